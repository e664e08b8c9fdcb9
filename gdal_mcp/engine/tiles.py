"""Tile plans: one large raster job as independent output tiles, run by whatever executes the job.

An engine function splits its output grid with `plan()` and hands a module-level tile function and the
tiles to `map_tiles()`, which yields `(index, result)` as tiles finish, in any order. The executor that runs
the job decides how: the local worker runs the tiles one after another in its own process (the default
mapper below), in one `Session` that keeps their sources open from one tile to the next; on a Dask cluster the
job's task submits them to the cluster's workers and gathers them (the executor installs its mapper with `using()`
for the job's duration).

Results depend only on the plan, never on the executor, the number of workers or the completion order:
the plan is a function of the output grid and the pixel size alone, and every tile is computed by the same
function from the same inputs. So an output is pixel-identical whichever executor made it, and a reduction
(statistics) merges the same partial results, whatever order they arrive in, when the engine merges them in
index order or exactly (counts, integer sums, min/max).

Tile functions must be module-level functions of a `gdal_mcp.engine.*` module (a cluster worker imports
them by name) taking one picklable argument; they open their inputs themselves (with open_raster, which may hand
a tile the dataset an earlier tile of its Session opened: they only read it) and return plain values
(numpy arrays, numbers, small dicts). They must not write into the job's output themselves: the job's assembler
does (raster/output.write_tiles: through GDAL in the job's process, or, for an uncompressed GTiff, by wrapping the
tile function in raster/rawtiff.write_tile, which writes each tile's pixels at their offsets where it ran).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

#: the package tile functions must come from (a cluster worker imports them by name)
ENGINE_PREFIX = "gdal_mcp.engine."
#: the pixel bytes (all bands) of one tile: 2048 x 2048 x 3 uint16 (measured: as fast as one whole-raster warp
#: on 3 x 9000^2 uint16, faster than 1024 and 4096 tiles)
TILE_BYTES = 32 * 1024**2
#: the pixel bytes of one strip of whole rows (outputs written in scanline strips): a strip reads the input rows it
#: crosses, and rows read by two strips are decoded twice, so strips are taller than square tiles are large
#: (measured: 3 x 18300^2 uint16 reprojected into a striped GTiff by 2 processes, 57 strips of 256 rows 3.25 s,
#: 29 of 512 rows 2.95 s, 15 of 1024 rows 2.82 s; 1 process 5.5 / 5.3 / 5.1 s)
STRIP_BYTES = 64 * 1024**2
#: tile sides are multiples of this (the output's block size: a tile never writes part of a block)
TILE_ALIGN = 512
#: and never larger than this, whatever the pixel size
MAX_TILE_SIDE = 4096


@dataclass(frozen=True)
class Tile:
    """One output tile: `window` is what it produces, `read` the input window it needs (window + halo,
    clipped to the raster). Windows are (col_off, row_off, width, height) in output pixels."""

    index: int
    window: tuple[int, int, int, int]
    read: tuple[int, int, int, int]

    @property
    def offset(self) -> tuple[int, int]:
        """Where `window` starts inside `read` (the halo on the top/left that was not clipped): (col, row)."""
        return self.window[0] - self.read[0], self.window[1] - self.read[1]


def tile_side(bytes_per_pixel: int, *, tile_bytes: int | None = None) -> int:
    """The side in pixels of square tiles holding about `tile_bytes` (default TILE_BYTES, read at each call) at
    `bytes_per_pixel` (all bands)."""
    budget = TILE_BYTES if tile_bytes is None else tile_bytes
    side = math.isqrt(max(1, budget // max(1, bytes_per_pixel)))
    return int(min(MAX_TILE_SIDE, max(TILE_ALIGN, side // TILE_ALIGN * TILE_ALIGN)))


def plan(
    width: int, height: int, *, bytes_per_pixel: int, halo: int = 0, tile_bytes: int | None = None, full_width: bool = False
) -> list[Tile]:
    """The tiles covering a width x height grid, row by row, each with its read window (halo pixels on every
    side, clipped to the grid). Deterministic: the same arguments always give the same tiles.

    full_width: tiles are strips of whole rows (as many rows as fit STRIP_BYTES or tile_bytes), for outputs written in
    scanline strips, where square tiles side by side would each rewrite the strips they share (measured: 3 x
    18300^2 uint16 reprojected into a striped GTiff, 2 Dask workers, 12.9 s with square tiles)."""
    if width < 1 or height < 1:
        return []
    if full_width:
        budget = STRIP_BYTES if tile_bytes is None else tile_bytes
        # At least TILE_ALIGN / 2 rows, however wide the grid: GDAL's approximate transformer makes thin strips less
        # exact (RGB.byte.tif to EPSG:4326, bilinear, share of pixels within 1 of gdalwarp -et 0: 16 rows 0.76,
        # 64 rows 0.86, 128 rows 0.88, 256 rows 0.90; gdalwarp, the whole raster in one chunk, 0.90).
        rows = min(MAX_TILE_SIDE, max(TILE_ALIGN // 2, budget // max(1, width * bytes_per_pixel)))
        tile_w, tile_h = width, min(height, rows)
    else:
        tile_w = tile_h = tile_side(bytes_per_pixel, tile_bytes=tile_bytes)
    tiles: list[Tile] = []
    for row in range(0, height, tile_h):
        for col in range(0, width, tile_w):
            w, h = min(tile_w, width - col), min(tile_h, height - row)
            c0, r0 = max(0, col - halo), max(0, row - halo)
            c1, r1 = min(width, col + w + halo), min(height, row + h + halo)
            tiles.append(Tile(len(tiles), (col, row, w, h), (c0, r0, c1 - c0, r1 - r0)))
    return tiles


class Mapper(Protocol):
    """Runs `fn` on every item; yields (index, result) as each finishes, in any order. Closing the iterator
    early (an error, a cancel) stops the work not yet done."""

    def __call__(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]: ...


def run_here[T, U](fn: Callable[[T], U], items: Sequence[T]) -> Iterator[tuple[int, U]]:
    """The local mapper: one tile after another in this process (each may use the job's threads), in one Session
    (their sources stay open from one tile to the next)."""
    session = Session()
    try:
        for i, item in enumerate(items):
            with session.active():
                result = fn(item)
            yield i, result
    finally:
        session.close()


class Session:
    """What the tiles one thread runs one after another may share, active around each tile (`with
    session.active():`) and closed after the last: engine modules keep resources in it by name (`resource`), e.g.
    open_raster its open sources (engine/raster/opening.Keeper), so consecutive tiles neither open a source again
    nor decode again the blocks they share. Nothing outside a tile sees it."""

    _current = threading.local()

    def __init__(self) -> None:
        self._resources: dict[str, Any] = {}

    @classmethod
    def current(cls) -> Session | None:
        """The session of the tile running on this thread (None outside tiles)."""
        return getattr(cls._current, "session", None)

    @contextmanager
    def active(self) -> Iterator[None]:
        if Session.current() is not None:  # a tile inside a tile: the outer session
            yield
            return
        Session._current.session = self
        try:
            yield
        finally:
            Session._current.session = None

    def resource[T](self, name: str, make: Callable[[], T]) -> T:
        """The session's resource `name` (made by `make()` at its first use; it has a close() method)."""
        if name not in self._resources:
            self._resources[name] = make()
        return self._resources[name]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close every resource (all of them, even when one fails; then the first error is raised)."""
        resources, self._resources = list(self._resources.values()), {}
        close_all(reversed(resources))


def close_all(things: Iterable[Any]) -> None:
    """close() every one of `things`; raise the first error once all were tried."""
    failure: BaseException | None = None
    for thing in things:
        try:
            thing.close()
        except BaseException as exc:  # noqa: BLE001 - raised below, after the others were closed
            failure = failure or exc
    if failure is not None:
        raise failure


_local = threading.local()


def current_mapper() -> Mapper:
    return getattr(_local, "mapper", None) or run_here


@contextmanager
def using(mapper: Mapper | None) -> Iterator[None]:
    """Run the tiles of the jobs started inside this block with `mapper` (an executor's; None: locally)."""
    before = getattr(_local, "mapper", None)
    _local.mapper = mapper
    try:
        yield
    finally:
        _local.mapper = before


#: how the tile running in this context learns that its job was stopped: a callable raising the executor's error
#: (installed by the executor around each tile, `stopping_by`); None: never (a local tile, a direct call)
_stop_check: ContextVar[Callable[[], None] | None] = ContextVar("gdal_mcp_tile_stop_check", default=None)


@contextmanager
def stopping_by(check: Callable[[], None] | None) -> Iterator[None]:
    """Run the tile started inside this block with `check`: called by `check_stop()`, it raises when the tile's job
    was cancelled (an executor's; it must be cheap: tile functions call it between their blocks)."""
    token = _stop_check.set(check)
    try:
        yield
    finally:
        _stop_check.reset(token)


def check_stop() -> None:
    """Raise if the job of the tile running here was stopped (its executor's error, e.g. `cancelled`); else nothing.
    Tile functions call it between the pieces of their work (blocks, windows, row bands; in a GDAL progress callback,
    gdal_c.progress_callback, where GDAL offers one), so a cancelled job's tiles end within one piece. Outside an
    executor's tile: never."""
    check = _stop_check.get()
    if check is not None:
        check()


def check_tile_function(fn: Callable[..., Any]) -> None:
    """Tile functions are module-level functions of gdal_mcp.engine: a cluster worker imports them by name."""
    module = getattr(fn, "__module__", "") or ""
    qualname = getattr(fn, "__qualname__", "") or ""
    if not module.startswith(ENGINE_PREFIX) or "<" in qualname or "." in qualname:
        raise TypeError(f"tile functions must be module-level functions of gdal_mcp.engine, not {module}.{qualname}")


def resolve(module: str, name: str) -> Callable[..., Any]:
    """The tile function `module.name`, imported by name (how a cluster worker, or a tile wrapping another tile
    function, finds it): only module-level functions of gdal_mcp.engine."""
    import importlib

    if not module.startswith(ENGINE_PREFIX):
        raise ValueError(f"refusing to run {module}:{name}: not an engine function")
    fn = getattr(importlib.import_module(module), name)
    check_tile_function(fn)
    return fn  # type: ignore[no-any-return]


def run_threads[T, U](
    fn: Callable[[T], U], items: Sequence[T], threads: int, *, contiguous: bool = False
) -> Iterator[tuple[int, U]]:
    """The local mapper with `threads` tiles at once (GDAL and numpy release the GIL), as each finishes; at most
    `threads` tiles run or wait to be taken. Closing the iterator drops the tiles not started.

    Which thread runs which tile is decided when a thread is free: by default the next tile in order, so the
    threads take turns. `contiguous`: each thread works through its own run of consecutive tiles (the items split
    in `threads` runs), and a thread whose run is done takes the last tile of the longest run left. Each thread's
    Session then reads next to where it read before: source blocks near a tile's edges are decoded once, by one
    thread's open source, not once by each (3 x 12000^2 uint16 smooth source warped by 2 threads: see
    BENCHMARKS.md). For callers that take results in any order (in_order would hold a whole run's results)."""
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    lock = threading.Lock()
    sessions: dict[int, Session] = {}  # one per thread of the pool
    runs = _runs(len(items), threads if contiguous else 1)
    run_of: dict[int, int] = {}  # thread -> its run, in the order the threads came

    def take() -> int | None:
        """The index of the tile this thread runs next (its own run first), or None when none is left."""
        with lock:
            own = runs[run_of.setdefault(threading.get_ident(), len(run_of)) % len(runs)]
            if own:
                return own.popleft()
            longest = max(runs, key=len)
            return longest.pop() if longest else None

    def call() -> tuple[int, U] | None:
        i = take()
        if i is None:
            return None
        with sessions.setdefault(threading.get_ident(), Session()).active():
            return i, fn(items[i])

    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tile") as pool:
            pending: set[Future[tuple[int, U] | None]] = {pool.submit(call) for _ in range(min(threads, len(items)))}
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        result = future.result()
                        if result is None:  # its thread found no tile left
                            continue
                        if any(runs):  # keep `threads` tiles going
                            pending.add(pool.submit(call))
                        yield result
            finally:
                for future in pending:
                    future.cancel()
    finally:
        close_all(sessions.values())  # the pool's threads are done with them


def _runs(n: int, parts: int) -> list[deque[int]]:
    """range(n) cut in `parts` runs of consecutive indexes, as even as can be."""
    bounds = [n * k // parts for k in range(parts + 1)]
    return [deque(range(bounds[k], bounds[k + 1])) for k in range(parts)]


def map_tiles[T, U](
    fn: Callable[[T], U], items: Sequence[T], *, local_threads: int = 1, contiguous: bool = False
) -> Iterator[tuple[int, U]]:
    """(index, fn(items[index])) for every item, as each finishes, in any order, by the current executor.

    local_threads: how many tiles the local executor runs at once, for tiles whose results are small (statistics:
    the start of one tile's reading overlaps another's work; 3 x 18300^2 uint16 raster_stats 1.95 s -> 1.72 s with
    2). Tiles returning pixels stay one at a time there (memory). A cluster runs them as its workers allow.
    contiguous: those threads each work through a run of consecutive tiles (run_threads)."""
    check_tile_function(fn)
    mapper = current_mapper()
    if mapper is run_here and local_threads > 1 and len(items) > 1:
        return run_threads(fn, items, local_threads, contiguous=contiguous)
    return mapper(fn, items)  # type: ignore[no-any-return]


@contextmanager
def mapped[T, U](
    fn: Callable[[T], U], items: Sequence[T], *, local_threads: int = 1, contiguous: bool = False
) -> Iterator[Iterator[tuple[int, U]]]:
    """`map_tiles` in a with-block that stops the tiles not done when it ends: on an error or a cancel, here and now
    (the executor cancels them and waits for the running ones), not whenever the collector gets to a generator an
    exception's traceback still holds."""
    results = map_tiles(fn, items, local_threads=local_threads, contiguous=contiguous)
    try:
        yield results
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


def share_files() -> bool:
    """Whether the tiles of the current executor see the job's output directory (the local pool: one process; a Dask
    cluster: when the output is on the file system its workers share, not in a directory of the job's worker)."""
    return bool(getattr(current_mapper(), "shared_files", True))


def reaches_everywhere() -> bool:
    """Whether `everywhere()` can run a function in every process the current executor runs tiles in."""
    mapper = current_mapper()
    return mapper is run_here or callable(getattr(mapper, "everywhere", None))


def everywhere[T](fn: Callable[..., T], *args: Any) -> list[T]:
    """fn(*args) in every process the current executor runs tiles in (this one locally, every worker of a
    cluster), once the tiles of a `map_tiles` call have finished: what tiles left behind them there (writes a
    tile handed to a background thread) is collected with it. Their results, in no particular order."""
    mapper = current_mapper()
    if mapper is run_here:
        return [fn(*args)]
    run = getattr(mapper, "everywhere", None)
    if not callable(run):
        raise TypeError(f"the executor's mapper {mapper!r} cannot run a function in every process")
    return list(run(fn, *args))


def in_order[T](results: Iterator[tuple[int, T]]) -> Iterator[tuple[int, T]]:
    """`results` (index, value) as they arrive, re-sorted into index order (0, 1, 2 …): a result that arrives
    early is held until those before it came. Float reductions merged in this order give the same numbers
    whichever order the executor finished the tiles in."""
    held: dict[int, T] = {}
    following = 0
    for i, value in results:
        held[i] = value
        while following in held:
            yield following, held.pop(following)
            following += 1
    for i in sorted(held):  # indexes that were not contiguous from 0
        yield i, held.pop(i)
