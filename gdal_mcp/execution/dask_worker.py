"""The worker side of the Dask executor (`--executor dask`): runs on the cluster's workers, never in the server.

The server (gdal_mcp.execution.dask_executor) registers `WorkerSetup` on every worker and submits `run_job(job, config,
job_id)` for each job. A job runs with the same engine functions and guarantees as in the local pool:

- the sandbox travels with the job (`config["roots"]`): its paths are checked again here, and every file GDAL
  opens is checked through the engine guard;
- progress goes to the server as Dask events (topic `PROGRESS_TOPIC`, throttled), and a per-job Dask Event
  (`cancel_event(job_id)`) stops the job at its next progress call (between windows or tiles) and its tiles on every
  worker between their blocks (`_Stops`, engine/tiles.check_stop); the job answers once its tiles stopped;
- a job runs at most once: if its worker died and Dask hands the task to another worker, that attempt refuses
  to start (a job may have had effects, e.g. an in-place edit);
- an output is written into its own attempt directory and moved into the job's temporary directory only when
  the job succeeded, so an attempt that died leaves nothing the server would commit;
- the tiles of a tile-parallel job (engine/tiles.py) are submitted to the cluster by `DaskMapper`; tiles of an
  uncompressed GTiff write their pixels into the output where they ran (engine/raster/rawtiff.py, flushed on
  every worker through `DaskMapper.everywhere`), other tiles' arrays come back to the job (spilled as files).

Only distributed and gdal_mcp's GDAL-free modules are imported at the top: the server imports this module (with
--executor dask only) for the functions it submits.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import WithRemote, remote_budget_error
from gdal_mcp.execution.common import (
    BUDGET_INTERVAL,
    PROGRESS_INTERVAL,
    classify,
    engine_function,
    job_progress,
    quiet_libraries,
    remote_readdir,
    set_gdal_environment,
    upload_output,
    with_provenance,
)
from gdal_mcp.execution.dask_confine import (
    _address,
    _layered,
    _task_tmp,
    confine_executor,
)
from gdal_mcp.sandbox.temporaries import upload_journal

log = logging.getLogger("gdal_mcp.execution.dask_worker")

#: Dask event topic of the jobs' progress and start messages (msgpack-able dicts with the job id)
PROGRESS_TOPIC = "gdal-mcp-progress"
#: how often a running job asks the scheduler whether it was cancelled
CANCEL_CHECK_INTERVAL = 0.1
#: prefix of the directory an attempt writes into, inside the job's temporary output directory
ATTEMPT_PREFIX = ".attempt-"
#: the error a second attempt of a job gives (its first worker died while running it)
RERUN_MESSAGE = "the Dask worker running this job died; a job is never run twice, since it may have had effects"
#: the directory of a job's attempt directory its tiles spill their arrays into (dask_tiles.SPILL_BYTES)
SPILL_DIR = ".tiles"
#: tile tasks in flight per cluster thread: bounds what finished tiles waiting to be assembled hold (spilled arrays
#: hold page cache, not worker memory). 2 starved the other workers while the job's writer was busy (2 workers,
#: 3 x 18300^2 nearest reproject: 3.65 s; 4: 3.47 s)
TILES_PER_THREAD = 4
#: tile arrays at least this large (outputs the job assembles: compressed, COG …) go through the shared file
#: system (a .npy in the job's attempt directory,
#: SPILL_DIR) rather than Dask's comms, which would pass every tile through the job worker's event loop. Measured
#: on 2 cores, 3 x 18300^2 uint16 reprojected in 88 tiles by 2 workers: 6.2 s spilled, 6.8 s through the comms.
SPILL_BYTES = 1024 * 1024
#: how many tile arrays this process spilled (for tests and diagnostics)
spilled = [0]
#: tiles run before new jobs; quick (metadata) jobs before both
TILE_PRIORITY = 1
#: how long a job whose tiles it stopped early (a cancel, a failed tile) waits for those still running on the workers
#: to end before it replies, so the server discards its output only once no tile can write there any more. A tile
#: checks its job's stop between its blocks (engine/tiles.check_stop), every CANCEL_CHECK_INTERVAL at most: well within
#: this; a tile stuck in one GDAL call runs on (it writes nothing once stopped, see run_tile). Well within the server's
#: GRACE (dask_executor, 3 s), which also covers the job's own discard of its output after this wait
TILE_STOP_WAIT = 1.5
#: a job's cancel flag unused this long on a worker is forgotten there
FLAG_IDLE = 120.0
#: how many stopped tile calls a worker remembers (to refuse a late tile of one)
STOPPED_KEPT = 256


def cancel_event(job_id: str) -> str:
    return f"gdal-mcp-cancel-{job_id}"


def started_event(job_id: str) -> str:
    return f"gdal-mcp-started-{job_id}"


class WorkerSetup(WorkerPlugin):
    """A Dask WorkerPlugin: the GDAL environment of a gdal-mcp worker, set when the worker starts (before any job
    imports rasterio). Unlike the local worker, stdout is left alone and no memory rlimit is set: a Dask
    worker's memory limit is its nanny's (--memory-limit)."""

    name = "gdal-mcp"
    idempotent = False

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = dict(config)

    def setup(self, worker: Any) -> None:
        if self.config.get("stdout_to_stderr"):
            # A worker of local:N inherited the server's stdout (over stdio, the MCP stream): nothing may reach it.
            os.dup2(2, 1)
            sys.stdout = sys.stderr
        if self.config.get("allow_remote") and not self.config.get("allow_network") and self.config.get("confine", True):
            # This worker's own egress proxy: its task threads reach the network only through it, as the local
            # workers reach the server's (execution/egress.py)
            # (a child process: this process's GDAL threads hold the interpreter while they wait for the network)
            from gdal_mcp.execution.egress import spawn

            _egress[0], self.config["egress_port"], self.config["egress_token"] = spawn(self.config["allow_remote"])
        from gdal_mcp.credentials import load_profiles

        try:
            profiles = load_profiles(self.config)  # this machine's AWS profiles, before the task threads are confined
        except ValueError as e:
            raise RuntimeError(f"Dask worker {_address()}: {e}") from None
        set_gdal_environment(self.config)
        quiet_libraries()
        tune_malloc()
        preload()
        from gdal_mcp.engine import drivers

        drivers.set_path_options(profiles)  # a bucket's own credentials, in both GDALs
        drivers.restrict()  # the driver allow-list (gdal_mcp.formats), before any task opens a file
        confine_executor(worker, self.config)


#: this worker process's egress proxy (with an allow-list), kept alive with the process
_egress: list[Any] = [None]


#: imported when a worker joins (WorkerSetup), besides the local worker's PRELOAD: the modules of the tile-parallel
#: raster jobs, so the first tiles a worker runs do not wait for them. Measured: ~0.3 s each for warp, mosaic, calc
#: and terrain after rasterio, 0.8 s with rasterio for all; a worker that joined cold started the first 2-worker
#: reproject of the bench 1.5 s late. Vector modules (pyogrio: ~1.3 s, ~90 MB) load on first use, as locally.
TILE_MODULES = (
    "gdal_mcp.engine.tiles",
    "gdal_mcp.engine.raster.rawtiff",
    "gdal_mcp.engine.raster.warp",
    "gdal_mcp.engine.raster.mosaic",
    "gdal_mcp.engine.raster.calc",
    "gdal_mcp.engine.raster.terrain",
    "gdal_mcp.engine.raster.stats",
    "gdal_mcp.engine.raster.categories",
)


_preloaded = [False]


def preload() -> None:
    """The local worker's warm-up (worker.preload) with TILE_MODULES, once per process (a server that connects
    again sets the worker up again). A failure is logged: the job that needs the module reports it."""
    from gdal_mcp.execution.common import preload as warm

    if _preloaded[0]:
        return
    _preloaded[0] = True
    try:
        warm(TILE_MODULES)
    except Exception:  # noqa: BLE001
        log.warning("preloading the engine on this worker failed", exc_info=True)


#: glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def tune_malloc() -> bool:
    """Undo the allocator setting a Dask nanny gives its workers (MALLOC_TRIM_THRESHOLD_=65536, which also turns off
    glibc's dynamic mmap threshold): with it every GDAL warp buffer is a fresh mmap and its pages fault in again.
    Measured on 30 tiles of 2048^2 x 3 uint16 warped one after another: 1.55 s with glibc's defaults, 2.66 s with
    the nanny's setting, 1.40 s with these (buffers under 32 MiB from the heap, the heap trimmed above 64 MiB).
    False where the C library is not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 * 1024**2)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 64 * 1024**2))
    except (OSError, AttributeError):
        return False


def probe(tokens: dict[str, str]) -> list[str]:
    """Run on every worker at start-up: the probe files the server wrote (path -> content; for a directory, its
    `listing`) this worker cannot read back, each with the reason."""
    problems = []
    for path, token in tokens.items():
        try:
            if token.startswith(LISTING):
                seen = listing(path)
            else:
                with open(path, encoding="ascii") as fh:
                    seen = fh.read(256)
        except OSError as e:
            problems.append(f"{path}: {e.strerror or e}")
            continue
        if seen != token:
            problems.append(f"{path}: holds other content (a different file system is mounted at that path)")
    return problems


LISTING = "listing:"


def listing(directory: str) -> str:
    """What a directory holds (its first 200 names): the probe of a workspace nobody may write into."""
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries)
    return LISTING + "\n".join(names[:200])


def worker_pid() -> int:
    return os.getpid()


# ----- sandbox on the worker --------------------------------------------------------------------------
_sandboxes: dict[tuple[tuple[str, ...], bool, tuple[str, ...], str], Any] = {}
_sandbox_lock = threading.Lock()


def _sandbox(config: dict[str, Any]) -> Any:
    """The job's sandbox (cached per roots), installed as the engine guard of this worker process."""
    from gdal_mcp.engine import guard
    from gdal_mcp.sandbox import Sandbox

    key = (
        tuple(config["roots"]),
        bool(config.get("allow_network", False)),
        tuple(config.get("allow_remote") or ()),
        str(config.get("bucket") or ""),
    )
    with _sandbox_lock:
        sandbox = _sandboxes.get(key)
        if sandbox is None:
            try:
                sandbox = Sandbox.for_worker(config)
            except ValueError as e:
                raise GdalMcpError(
                    "internal-error",
                    f"the Dask worker {_address()} cannot use the workspace ({e}); "
                    "workers must mount the workspace at the same path as the server",
                ) from None
            _sandboxes[key] = sandbox
        # One guard per process: the workers of one cluster serve one server's workspace.
        guard.install(sandbox.check_referenced)
    return sandbox


# ----- attempt directories -------------------------------------------------------------------------------
def _attempt_output(job: Any) -> tuple[Any, Path | None]:
    """The job writing into a fresh attempt directory inside its temporary output directory (None: the job
    writes no new file, e.g. an in-place edit)."""
    from gdal_mcp.sandbox import TMP_DIR_RE

    dst = job.output_path()
    if dst is None:
        return job, None
    target = Path(dst)
    if not TMP_DIR_RE.fullmatch(target.parent.name):
        return job, None  # not a server-made temporary directory: nothing to isolate
    attempt = target.parent / f"{ATTEMPT_PREFIX}{uuid.uuid4().hex}"
    try:
        attempt.mkdir()  # never parents: a temporary directory the server discarded is not made again
    except FileNotFoundError:
        raise GdalMcpError("cancelled", "the job's temporary output directory is gone: the server gave up on the job") from None
    return job.writing_to(str(attempt / target.name)), attempt


def _own_output(job: Any) -> tuple[Any, Path]:
    """The job writing into a fresh directory of this worker's own (in its private temporary directory once its task
    threads are confined), for an output this worker uploads (Job.upload): the caller removes the directory."""
    import tempfile

    dst = job.output_path()
    if dst is None:
        raise GdalMcpError("internal-error", f"{type(job).__name__} has an upload but writes no file")
    directory = Path(tempfile.mkdtemp(prefix="gdal-mcp-output-", dir=_task_tmp[0]))
    return job.writing_to(str(directory / Path(dst).name)), directory


def _finish_attempt(attempt: Path) -> None:
    """Move what a finished attempt wrote into the job's temporary directory (where the server commits it
    from); the directories of attempts that died before go."""
    tmp_dir = attempt.parent
    shutil.rmtree(attempt / SPILL_DIR, ignore_errors=True)  # tiles' arrays not read back (none when it succeeded)
    for item in sorted(attempt.iterdir()):
        os.replace(item, tmp_dir / item.name)
    attempt.rmdir()
    for other in tmp_dir.glob(f"{ATTEMPT_PREFIX}*"):
        shutil.rmtree(other, ignore_errors=True)


# ----- jobs ------------------------------------------------------------------------------------------
class _Cancelled(GdalMcpError):
    def __init__(self) -> None:
        super().__init__("cancelled", "the job was cancelled")


@dataclass
class _Flag:
    """One job's cancel flag as this process last saw it."""

    event: Any  # the job's distributed.Event (cancel_event(job_id)) on the scheduler
    checked: float = 0.0  # when the scheduler was last asked (time.monotonic)
    used: float = 0.0
    cancelled: bool = False
    asking: bool = False  # a thread is asking the scheduler now: the others keep the last answer meanwhile


class _Stops:
    """Which jobs were stopped, as this worker process sees them, shared by a job's task and its tiles here: the
    job's cancel flag (the scheduler asked at most every CANCEL_CHECK_INTERVAL per job and process, however many
    of its tasks ask), and the tile calls their job stopped itself (DaskMapper, when it closes early); and the tiles
    running here per call, so that their job can wait for them to end."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.flags: dict[str, _Flag] = {}
        self.stopped: dict[str, None] = {}  # tile calls (insertion order, at most STOPPED_KEPT)
        self.running: dict[str, int] = {}  # tile call -> tiles of it running in this process

    def watch(self, job_id: str, client: Any) -> None:
        """Know the job's flag through `client` (a job's task, or a tile's: the first to ask in this process)."""
        from distributed import Event

        with self.cond:
            if job_id not in self.flags:
                now = time.monotonic()  # first asked CANCEL_CHECK_INTERVAL later: a quick job never waits for it
                self.flags[job_id] = _Flag(Event(cancel_event(job_id), client=client), checked=now, used=now)

    def check(self, job_id: str, call: str | None = None) -> None:
        """Raise the `cancelled` error if the job was cancelled or the tile call stopped (asking the scheduler when
        the last answer is older than CANCEL_CHECK_INTERVAL)."""
        now = time.monotonic()
        with self.cond:
            if call is not None and call in self.stopped:
                raise _Cancelled()
            flag = self.flags.get(job_id)
        if flag is None:  # forgotten after FLAG_IDLE without a check (a long GDAL call): watched again
            from distributed import get_client

            self.watch(job_id, get_client())
            with self.cond:
                flag = self.flags[job_id]
        with self.cond:
            flag.used = now
            if flag.cancelled:
                raise _Cancelled()
            ask = not flag.asking and now - flag.checked >= CANCEL_CHECK_INTERVAL
            if ask:
                flag.asking = True
                self._forget_idle(now)
        if not ask:
            return
        cancelled = False
        try:
            cancelled = bool(flag.event.is_set())
        except Exception:  # noqa: BLE001 - the scheduler unreachable for a moment: asked again at the next check
            log.debug("could not ask the scheduler for job %s's cancel flag", job_id, exc_info=True)
        finally:
            with self.cond:
                flag.asking, flag.checked = False, time.monotonic()
                flag.cancelled = flag.cancelled or cancelled
        if cancelled:
            raise _Cancelled()

    def _forget_idle(self, now: float) -> None:
        for job_id in [j for j, f in self.flags.items() if now - f.used > FLAG_IDLE and not f.asking]:
            del self.flags[job_id]

    @contextlib.contextmanager
    def tile(self, call: str) -> Iterator[None]:
        """A tile of `call` runs here while the block runs (`stop` waits for the count to reach 0)."""
        with self.cond:
            self.running[call] = self.running.get(call, 0) + 1
        try:
            yield
        finally:
            with self.cond:
                left = self.running[call] - 1
                if left:
                    self.running[call] = left
                else:
                    del self.running[call]
                self.cond.notify_all()

    def stop(self, call: str, timeout: float) -> int:
        """Stop the tiles of `call` in this process (the running ones at their next check, later ones before they
        start) and wait up to `timeout` for the running ones to end: how many still run."""
        with self.cond:
            self.stopped[call] = None
            while len(self.stopped) > STOPPED_KEPT:
                del self.stopped[next(iter(self.stopped))]
            self.cond.wait_for(lambda: not self.running.get(call), timeout)
            return self.running.get(call, 0)


_stops = _Stops()


def stop_tiles(call: str, timeout: float) -> int:
    """Run on every worker by a job that stopped its tile call early (DaskMapper): see _Stops.stop."""
    return _stops.stop(call, timeout)


class _JobContext:
    """Progress and cancellation of one job on this worker, shared with the tiles' mapper (and, through _stops, with
    the job's tiles that run in this process)."""

    def __init__(self, job_id: str, worker: Any, client: Any, budget: int | None = None) -> None:
        self.job_id = job_id
        self.worker = worker
        _stops.watch(job_id, client)
        self._last_progress = 0.0
        self.remote = _RemoteCount(budget)

    def publish(self, kind: str, **fields: Any) -> None:
        self.worker.log_event(PROGRESS_TOPIC, {"job": self.job_id, "kind": kind, **fields})

    def progress(self, fraction: float, text: str = "") -> None:
        now = time.monotonic()
        if fraction >= 1.0 or now - self._last_progress >= PROGRESS_INTERVAL:
            self._last_progress = now
            self.publish("progress", fraction=float(min(max(fraction, 0.0), 1.0)), text=str(text))
        self.check_cancel()

    def check_cancel(self) -> None:
        """Raise if the server cancelled the job (asked the scheduler at most every CANCEL_CHECK_INTERVAL), or if it has
        fetched more than its remote byte budget."""
        _stops.check(self.job_id)
        self.remote.check()


class _RemoteCount:
    """What a job fetched from remote locations on a Dask cluster: GDAL's network statistics are per process and
    several tasks share a worker process, so they count by difference (engine/remote_io.since) over the job's task in
    its process, plus what each of its tiles that ran in another process reported. Reads of other jobs' tasks that
    ran in the same processes meanwhile are counted too: an upper bound, and the byte budget stops a job early rather
    than late (the local pool counts exactly: one job per process)."""

    def __init__(self, budget: int | None) -> None:
        from gdal_mcp.engine import remote_io

        self.budget = budget
        remote_io.clear_cache()  # nothing another job read (or found missing) is served from GDAL's cache
        self.before = remote_io.reading()
        self.tiles = [0, 0, 0]  # requests, bytes, files of tiles elsewhere
        self._checked = 0.0

    def add(self, figures: dict[str, int]) -> None:
        for i, name in enumerate(("requests", "bytes", "files")):
            self.tiles[i] += int(figures.get(name, 0))

    def figures(self) -> dict[str, int] | None:
        from gdal_mcp.engine import remote_io

        if self.before is None:
            return None
        own = remote_io.since(self.before)
        requests, downloaded, files = self.tiles
        if own is not None:
            requests, downloaded, files = requests + own.requests, downloaded + own.bytes, files + own.files
        return {"requests": requests, "bytes": downloaded, "files": files} if requests else None

    def check(self, *, final: bool = False) -> None:
        """remote_budget_error once the job fetched more than its budget (measured every BUDGET_INTERVAL at most)."""
        now = time.monotonic()
        if not self.budget or self.before is None or (not final and now - self._checked < BUDGET_INTERVAL):
            return
        self._checked = now
        figures = self.figures()
        if figures is not None and figures["bytes"] > self.budget:
            raise remote_budget_error(self.budget, figures["bytes"])


def run_job(job: Any, config: dict[str, Any], job_id: str) -> tuple[Any, ...]:
    """The Dask task of one job: ("result", value) or ("error", code, message), like the local worker's replies."""
    from distributed import Event, get_client, get_worker

    from gdal_mcp.engine import tiles

    worker = get_worker()
    client = get_client()
    started = Event(started_event(job_id), client=client)
    if started.is_set():
        return ("error", "internal-error", RERUN_MESSAGE)
    started.set()
    ctx = _JobContext(job_id, worker, client, config.get("max_remote_bytes"))
    ctx.publish("started", address=str(worker.address), pid=os.getpid())
    attempt: Path | None = None
    try:
        ctx.check_cancel()
        with remote_readdir(job):  # identifying a remote input's format opens it too
            func = engine_function(job)
        sandbox = _sandbox(config)
        if job.upload:
            # Its output goes to object storage: written in a directory of this worker's own, uploaded from there in
            # this task. The server's temporary path is not checked (this worker need not see the server's files).
            sandbox.check_referenced([p for p in job.paths() if p != job.output_path()], what="job path")
            job, attempt = _own_output(job)
        else:
            sandbox.check_referenced(job.paths(), what="job path")
            job, attempt = _attempt_output(job)
        # Where this job may write (its output now goes to its attempt directory; a file it changes in place);
        # nothing else. Its own thread and its tiles' are confined so (_layered); without confinement, as before.
        writable = job.writable()
        layered = _task_tmp[0] is not None
        # Tiles share the job's directory only where it is on the file system every worker shares: then large tile
        # arrays travel as files there, and raw GTiff tiles write where they ran; else both go through Dask's comms.
        shared = attempt is not None and not job.upload
        mapper = DaskMapper(
            config,
            ctx,
            scratch=attempt / SPILL_DIR if shared and attempt is not None else None,
            writable=writable if not job.upload else [],
            layered=layered,
            shared_files=shared or attempt is None,
        )
        kwargs = job.kwargs()
        progress = job_progress(job, ctx.progress)
        recorded = with_provenance(job, func)

        def work() -> Any:
            with tiles.using(mapper), remote_readdir(job):
                return recorded(**kwargs, progress=progress)

        if layered:
            from distributed import rejoin, secede

            secede()  # this task thread only waits for the job's own thread: the worker may run tiles meanwhile
            try:
                result = _layered(work, writable)
            finally:
                rejoin()
        else:
            result = work()
        ctx.remote.check(final=True)
        if job.upload:
            upload_output(job, ctx.progress)  # a cancel stops it at its next chunk, and removes what it uploaded
        elif attempt is not None:
            _finish_attempt(attempt)
            attempt = None
        figures = ctx.remote.figures()
        return ("result", result if figures is None else WithRemote(result, figures))
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a structured reply
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        return ("error", *classify(exc, job))
    finally:
        if attempt is not None:
            shutil.rmtree(attempt, ignore_errors=True)
            Path(upload_journal(str(attempt))).unlink(missing_ok=True)  # what its upload created (it cleans up itself)


# ----- tiles -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Spilled:
    """A tile's array left in a file of the job's attempt directory (on the shared file system)."""

    path: str


def _spill(value: Any, scratch: str) -> Any:
    """Large arrays of a tile result (an array, or a tuple/list holding some) written to .npy files in `scratch`."""
    import numpy as np

    if isinstance(value, np.ndarray) and value.nbytes >= SPILL_BYTES:
        with contextlib.suppress(FileExistsError):
            os.mkdir(scratch)  # never its parents: the attempt directory of a job that ended is not made again
        path = os.path.join(scratch, f"{uuid.uuid4().hex}.npy")
        np.save(path, value, allow_pickle=False)
        spilled[0] += 1
        return _Spilled(path)
    if isinstance(value, tuple | list):
        return type(value)(_spill(v, scratch) for v in value)
    return value


def _unspill(value: Any) -> Any:
    """The arrays `_spill` wrote, read back (each file removed once read)."""
    import numpy as np

    if isinstance(value, _Spilled):
        try:
            return np.load(value.path, allow_pickle=False)
        finally:
            os.remove(value.path)
    if isinstance(value, tuple | list):
        return type(value)(_unspill(v) for v in value)
    return value


def run_tile(
    fn_module: str,
    fn_name: str,
    item: Any,
    config: dict[str, Any],
    scratch: str | None = None,
    writable: list[str] | None = None,
    job_id: str | None = None,
    call: str | None = None,
    home: str | None = None,
) -> Any:
    """The Dask task of one tile: the tile function imported by name (a gdal_mcp.engine module-level function,
    like jobs), under the job's sandbox guard, on a thread that may write only `writable` (the job's attempt
    directory; see _layered). With `scratch` (a directory of the job's attempt, on the file system every worker
    shares), its large arrays travel as files there instead of through Dask's comms.

    With `job_id` (and `call`, its DaskMapper call), the tile stops with the job: it does not start once the job was
    cancelled or the call stopped, the tile function checks between its blocks (engine/tiles.check_stop), and a tile
    that finished after the stop returns nothing and writes nothing (`cancelled`)."""
    from gdal_mcp.engine import tiles

    fn = tiles.resolve(fn_module, fn_name)
    _sandbox(config)
    if job_id is None:
        result = _layered(lambda: fn(item), writable) if writable is not None else fn(item)
        return _spill(result, scratch) if scratch is not None else result
    from distributed import get_client

    _stops.watch(job_id, get_client())
    check = functools.partial(_stops.check, job_id, call)

    def work() -> Any:
        with tiles.stopping_by(check):
            return fn(item)

    from gdal_mcp.engine import remote_io

    before = remote_io.reading() if home is not None and home != _address() else None
    with _stops.tile(call or job_id):
        check()
        result = _layered(work, writable) if writable is not None else work()
        check()
        result = _spill(result, scratch) if scratch is not None else result
    # A tile that ran outside its job's process says what it fetched (the job's own process counts its tiles there)
    figures = remote_io.since(before) if before is not None else None
    return _TileReads(result, figures.model_dump()) if figures is not None else result


@dataclass(frozen=True)
class _TileReads:
    """A tile's result, with what it fetched remotely in a process other than its job's (_RemoteCount)."""

    value: Any
    remote: dict[str, int]


class DaskMapper:
    """tiles.Mapper on a Dask cluster: the job's task submits its tiles to the cluster (it secedes from the
    worker's thread pool while it waits), keeps at most TILES_PER_THREAD x the cluster's threads in flight, and
    yields (index, result) as tiles finish. Closing the generator (an error, a cancel) cancels the rest."""

    def __init__(
        self,
        config: dict[str, Any],
        ctx: _JobContext,
        scratch: Path | None = None,
        writable: list[str] | None = None,
        layered: bool = False,
        shared_files: bool = True,
    ) -> None:
        self.config = config
        #: whether the job's output directory is on the file system every worker shares (tiles may write into it)
        self.shared_files = shared_files
        self.ctx = ctx
        self.scratch = str(scratch) if scratch is not None else None
        #: where the tiles may write (the job's attempt directory); None: as the task thread may
        self.writable = writable
        #: called from the job's own confined thread, not a task thread (which has seceded already)
        self.layered = layered

    def __call__(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        from distributed import wait, worker_client

        module, name = fn.__module__, fn.__name__
        if not items:
            return
        # One job maps tiles several times (statistics passes, a range pass before colour relief): each call's
        # keys are its own, so a result Dask still holds from an earlier call is never taken for this one's.
        call = uuid.uuid4().hex[:12]
        stops = f"{self.ctx.job_id}-{call}"  # what stop_tiles names
        with worker_client(separate_thread=not self.layered) as client:
            threads = sum(client.nthreads().values()) or 1
            limit = max(2, TILES_PER_THREAD * threads)
            pending: dict[Any, int] = {}
            queue = iter(enumerate(items))

            def submit_more() -> None:
                for i, item in queue:
                    future = client.submit(
                        run_tile,
                        module,
                        name,
                        item,
                        self.config,
                        self.scratch,
                        self.writable,
                        self.ctx.job_id,
                        stops,
                        str(self.ctx.worker.address),
                        pure=False,
                        retries=0,
                        priority=TILE_PRIORITY,
                        key=f"gdal-mcp-tile-{self.ctx.job_id}-{call}-{i}",
                    )
                    pending[future] = i
                    if len(pending) >= limit:
                        return

            try:
                submit_more()
                while pending:
                    try:
                        done, _ = wait(list(pending), timeout=CANCEL_CHECK_INTERVAL, return_when="FIRST_COMPLETED")
                    except TimeoutError:
                        done = set()
                    self.ctx.check_cancel()
                    for future in done:
                        i = pending.pop(future)
                        result = future.result()
                        if isinstance(result, _TileReads):
                            self.ctx.remote.add(result.remote)
                            result = result.value
                        result = _unspill(result)
                        future.release()
                        submit_more()
                        yield i, result
            finally:
                if pending:
                    client.cancel(list(pending))  # those not started never start
                    self._stop_running(client, stops)

    def _stop_running(self, client: Any, stops: str) -> None:
        """Stop the tiles of this call still running on the workers and wait (TILE_STOP_WAIT at most) until they
        ended: the job replies, and the server discards its output, only once none of them can write there."""
        try:
            # on_error="return": a worker that failed to answer does not hide the others' counts
            left = client.run(_in_thread, stop_tiles, stops, TILE_STOP_WAIT, on_error="return")
        except Exception:  # noqa: BLE001 - the scheduler gone: the tiles' writes fail or land in a removed directory
            log.debug("stopping the tiles of %s failed", stops, exc_info=True)
            return
        running = {address: n for address, n in left.items() if isinstance(n, int) and n}
        if running:
            log.warning("job %s: tiles still ran %g s after they were stopped: %s", self.ctx.job_id, TILE_STOP_WAIT, running)

    def everywhere(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """fn(*args) on every worker of the cluster (Client.run: in the worker process, beside its tasks), on a
        thread of its own: a function that waits (a flush of queued writes) never holds up the worker's event
        loop, its heartbeats and comms."""
        from distributed import worker_client

        with worker_client(separate_thread=not self.layered) as client:
            return list(client.run(_in_thread, fn, *args).values())


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    import asyncio

    return await asyncio.to_thread(fn, *args)
