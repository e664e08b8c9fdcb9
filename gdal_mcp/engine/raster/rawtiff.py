"""Tiles written straight into an uncompressed GTiff, by whichever process computed them.

An uncompressed GTiff that GDAL created and closed without pixels holds every block at a fixed offset (GDAL
extends the file sparse instead of writing zeros): block k of a plane lies at `base + k * block_bytes`. Once the
job has created the file and verified that layout (`layout()`), a tile's pixels need no GDAL at all: the tile
task copies them into the file's byte order (pixel- or band-interleaved, padded edge blocks) and writes them at
their offsets (`write_tile()`), in the cluster worker that computed them. Nothing goes through the job's
process: no spilled arrays, no single writer all pixels funnel through, so the write scales with the workers.

The bulk of each run is written with O_DIRECT (page-aligned, from a page-aligned buffer), the few bytes on
either side of it through the page cache; file systems that refuse O_DIRECT get plain writes. O_DIRECT leaves
the page cache alone: measured on this 2-core VM, writing 2 GB through the page cache costs 4-5 s of CPU (the
hypervisor backs each new page on first touch) against 0.3 s direct (`BENCHMARKS.md`).

Everything GDAL would otherwise decide stays GDAL's: the file, its header, tags and offsets are written by GDAL
(`create()`), and a layout this module cannot verify exactly (compressed, sparse, big-endian, bit-packed, blocks
not in order) is simply not used: `write_tiles` then assembles the tiles through GDAL as before.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import inspect
import mmap
import os
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import rasterio

#: O_DIRECT alignment of file offsets, lengths and buffer addresses: a page (at least 4096, covering 512- and
#: 4096-byte sectors), so that a direct run never shares a page with the buffered bytes of a neighbouring tile
ALIGN = max(4096, mmap.PAGESIZE)
#: runs shorter than this are written through the page cache (not worth the alignment)
DIRECT_MIN = 1024 * 1024
#: whether this process still tries O_DIRECT (a file system that refused it turns it off)
_direct = [hasattr(os, "O_DIRECT")]

_FALSE = ("NO", "FALSE", "OFF", "0")


@dataclass(frozen=True)
class Layout:
    """Where the pixels of an uncompressed GTiff lie: one plane of blocks (pixel-interleaved: all bands
    together) or one per band, each plane's blocks one after another in row-major order."""

    path: str
    width: int
    height: int
    count: int
    dtype: str
    pixel_interleaved: bool
    block: tuple[int, int]  # (rows, cols)
    bases: tuple[int, ...]  # the first block's offset of each plane
    nonce: str = ""  # set by create(): one job's writes into the file, told from another job's into the same path

    @property
    def key(self) -> str:
        """What background writes and their flush are kept under: this job's writes into this file."""
        return f"{self.path}\0{self.nonce}"

    @property
    def pixel_bytes(self) -> int:
        """Bytes of one pixel in one plane."""
        size = np.dtype(self.dtype).itemsize
        return size * self.count if self.pixel_interleaved else size

    @property
    def block_bytes(self) -> int:
        return self.block[0] * self.block[1] * self.pixel_bytes

    @property
    def blocks_across(self) -> int:
        return -(-self.width // self.block[1])

    def row_offset(self, base: int, row: int) -> int:
        """Where `row` starts in the plane at `base` of a striped file (its strips lie one after another)."""
        return base + row * self.width * self.pixel_bytes

    def fits(self, window: tuple[int, int, int, int]) -> bool:
        """Whether a window (col, row, width, height) can be written raw: whole rows of a striped file (its strips
        lie one after another, so any rows are one run of bytes), or whole blocks of a tiled one (or reaching the
        raster's edge)."""
        col, row, w, h = window
        bh, bw = self.block
        if not (w > 0 and h > 0 and col >= 0 and row >= 0 and col + w <= self.width and row + h <= self.height):
            return False
        if bw == self.width:
            return col == 0 and w == self.width
        return (
            col % bw == 0 and row % bh == 0 and (w % bw == 0 or col + w == self.width) and (h % bh == 0 or row + h == self.height)
        )


def eligible(driver: str, options: dict[str, str]) -> bool:
    """Whether an output with these creation options may have a raw layout (checked again once created)."""
    if driver != "GTiff" or sys.byteorder != "little" or not hasattr(os, "pwrite"):
        return False
    opts = {str(k).upper(): str(v).upper() for k, v in options.items()}
    return (
        opts.get("COMPRESS", "NONE") == "NONE"
        and "NBITS" not in opts
        and opts.get("SPARSE_OK", "NO") in _FALSE
        and opts.get("ENDIANNESS", "NATIVE") in ("NATIVE", "LITTLE")
        and opts.get("PHOTOMETRIC", "") != "YCBCR"
    )


def create(path: str, profile: dict[str, Any], prepare: Any = None) -> Layout | None:
    """Create `path` with GDAL, pixels left out, and return its verified layout (None: not a raw layout, and the
    file is removed). The nodata value is not declared yet (GDAL would fill every block with it): `finish()`."""
    from gdal_mcp.engine.raster.output import close_checked

    created = {k: v for k, v in profile.items() if k != "nodata"}
    with rasterio.open(path, "w", **created) as out:
        if prepare is not None:
            prepare(out)
        close_checked(out)
    found = layout(path)
    if found is None:
        os.remove(path)
        return None
    return dataclasses.replace(found, nonce=uuid.uuid4().hex)


def finish(path: str, nodata: float | None) -> None:
    """Declare the nodata value once the pixels are in (only the header changes)."""
    if nodata is None:
        return
    from gdal_mcp.engine.raster.output import close_checked

    with rasterio.open(path, "r+") as ds:
        ds.nodata = nodata
        close_checked(ds)


def layout(path: str) -> Layout | None:
    """The raw layout of an uncompressed GTiff, verified block by block against GDAL's own offsets, or None."""
    with open(path, "rb") as fh:
        if fh.read(2) != b"II":
            return None
    with rasterio.open(path) as ds:
        if ds.driver != "GTiff" or ds.compression is not None or len(set(ds.block_shapes)) != 1:
            return None
        if len(set(ds.dtypes)) != 1 or ds.tags(1, ns="IMAGE_STRUCTURE").get("NBITS"):
            return None
        pixel = ds.count == 1 or (ds.interleaving is not None and ds.interleaving.value == "PIXEL")
        if ds.count > 1 and not pixel and (ds.interleaving is None or ds.interleaving.value != "BAND"):
            return None
        bh, bw = ds.block_shapes[0]
        candidate = Layout(path, ds.width, ds.height, ds.count, ds.dtypes[0], pixel, (bh, bw), ())
        across, down = candidate.blocks_across, -(-ds.height // bh)
        size = candidate.block_bytes
        last_rows = ds.height - (down - 1) * bh
        bases, end = [], 0
        for band in [1] if pixel else range(1, ds.count + 1):

            def item(name: str, x: int, y: int, band: int = band) -> int | None:
                value = ds.get_tag_item(f"{name}_{x}_{y}", "TIFF", bidx=band)
                return int(value) if value else None

            base = item("BLOCK_OFFSET", 0, 0)
            if not base:
                return None
            for y in range(down):
                for x in range(across):
                    k = y * across + x
                    if item("BLOCK_OFFSET", x, y) != base + k * size:
                        return None
            # Full blocks, but for strips the last one may hold only the rows left.
            last = item("BLOCK_SIZE", across - 1, down - 1)
            if item("BLOCK_SIZE", 0, 0) != size or last not in (size, last_rows * bw * candidate.pixel_bytes):
                return None
            bases.append(base)
            end = max(end, base + (across * down - 1) * size + (last or 0))
        if os.path.getsize(path) < end:
            return None
        return Layout(path, ds.width, ds.height, ds.count, ds.dtypes[0], pixel, (bh, bw), tuple(bases))


def write_window(target: Layout, window: tuple[int, int, int, int], data: Any) -> int:
    """Write the (count, h, w) pixels of `window` (whole blocks: `target.fits(window)`) at their offsets in the
    file; the bytes written."""
    return _write_runs(target.path, runs(target, window, data))


def check_tile(target: Layout, window: tuple[int, int, int, int], data: Any) -> Any:
    """`data` as the (count, h, w) pixels of `window`, or ValueError when they cannot be written there raw."""
    col, row, w, h = window
    if not target.fits(window):
        raise ValueError(f"window {window} does not cover whole {target.block} blocks")
    if data.ndim == 2:
        data = data[np.newaxis]
    if data.shape != (target.count, h, w) or data.dtype != np.dtype(target.dtype):
        raise ValueError(f"tile of {data.shape} {data.dtype}, the output takes ({target.count}, {h}, {w}) {target.dtype}")
    return data


def extent(target: Layout, window: tuple[int, int, int, int]) -> int:
    """The bytes `runs()` writes for `window` (edge blocks count whole)."""
    col, row, w, h = window
    planes = 1 if target.pixel_interleaved else target.count
    if target.block[1] == target.width:
        return h * w * target.pixel_bytes * planes
    bh, bw = target.block
    blocks = (-(-(row + h) // bh) - row // bh) * (-(-(col + w) // bw) - col // bw)
    return blocks * target.block_bytes * planes


def runs(target: Layout, window: tuple[int, int, int, int], data: Any) -> list[tuple[int, Any]]:
    """The (file offset, bytes) runs holding the (count, h, w) pixels of `window` in the file's layout: one per
    plane for whole rows; for blocks, one per plane and block row of the window (the blocks of a block row lie one
    after another), edge blocks padded to their full size."""
    col, row, w, h = window
    data = check_tile(target, window, data)
    bh, bw = target.block
    planes = [(target.bases[0], None)] if target.pixel_interleaved else [(base, b) for b, base in enumerate(target.bases)]
    out = []
    if bw == target.width:
        # Whole rows: one contiguous run per plane.
        for base, band in planes:
            start = target.row_offset(base, row)
            buf = _aligned(h * w * target.pixel_bytes, start)
            _copy(buf, data, band, (h, w), (0, h, 0, w), target)
            out.append((start, buf))
        return out
    size = target.block_bytes
    first, last = col // bw, -(-(col + w) // bw)
    for by in range(row // bh, -(-(row + h) // bh)):
        r0 = by * bh - row
        rows = min(bh, h - r0)
        for base, band in planes:
            start = base + (by * target.blocks_across + first) * size
            buf = _aligned((last - first) * size, start)
            for j, bx in enumerate(range(first, last)):
                c0 = bx * bw - col
                cols = min(bw, w - c0)
                block = buf[j * size : (j + 1) * size]
                if rows < bh or cols < bw:
                    block[:] = 0
                _copy(block, data, band, (bh, bw), (r0, r0 + rows, c0, c0 + cols), target)
            out.append((start, buf))
    return out


def _buffer_for(target: Layout, window: tuple[int, int, int, int]) -> tuple[int, Any, Any] | None:
    """For a window that is one run of the file (whole rows of a single plane), that run's offset, its aligned
    buffer and a (count, h, w) view of it in the file's pixel order, for a tile function to fill; else None."""
    col, row, w, h = window
    if not target.fits(window) or target.block[1] != target.width or (target.count > 1 and not target.pixel_interleaved):
        return None
    start = target.row_offset(target.bases[0], row)
    buf = _aligned(h * w * target.pixel_bytes, start)
    return start, buf, buf.view(target.dtype).reshape(h, w, target.count).transpose(2, 0, 1)


def _write_runs(path: str | _Files, pieces: list[tuple[int, Any]]) -> int:
    """Write the runs (into `path`, or into files opened already), then give their buffers back to the pool."""
    with path if isinstance(path, _Files) else _Files(path) as files:
        written = sum(files.write(offset, buf) for offset, buf in pieces)
    _release(pieces)
    return written


class _Background:
    """This process's writer thread: a tile's runs are written while the task computes the next tile (the write
    waits on the disk, the next warp on the CPU). One tile waits at most (memory stays bounded). What was written,
    and the first failure, are kept per job and output (`Layout.key`) until `flush()` collects them; a flush that
    leaves the thread idle ends it (the next job starts its own)."""

    def __init__(self) -> None:
        import queue

        self.cond = threading.Condition()
        self.queue: queue.Queue[tuple[str, _Files, Any] | None] = queue.Queue(maxsize=1)
        self.pending: dict[str, int] = {}
        self.written: dict[str, int] = {}
        self.failed: dict[str, tuple[int | None, str]] = {}
        self.flushed: dict[str, None] = {}  # the last paths flushed (insertion order): their job has ended
        self.thread: threading.Thread | None = None

    def submit(self, target: Layout, pieces: list[tuple[int, Any]] | Any) -> None:
        """Queue runs to write into `path`: a list, or a function returning one (the copy into the file's layout
        then also happens on the writer thread, beside the next tile's computation)."""
        key, path = target.key, target.path
        with self.cond:
            if key in self.flushed:
                raise RuntimeError(f"{path}: the job writing it has ended (a tile that ran on after a cancel)")
            if key in self.failed:
                code, message = self.failed[key]
                raise OSError(code, message) if code else RuntimeError(message)
        # Opened here, by the tile's thread: its confinement may write this job's output (gdal_mcp.execution.confine), and the
        # writer thread, which serves the tiles of every job of this process, only writes through what it is given.
        try:
            files = _Files(path).opened()
        except OSError as exc:  # the output is gone (a job that gave up): reported by flush(), as a failed write
            with self.cond:
                if key not in self.flushed:
                    self.failed.setdefault(key, (exc.errno, str(exc.strerror or exc)))
                self.cond.notify_all()
            return
        with self.cond:
            if self.thread is None or not self.thread.is_alive():
                thread = threading.Thread(target=self._run, name="raw-tile-writer", daemon=True)
                try:
                    thread.start()  # may fail (no memory for a stack): then nothing was counted
                except BaseException:
                    files.__exit__()
                    raise
                self.thread = thread
            self.pending[key] = self.pending.get(key, 0) + 1
        try:
            self.queue.put((key, files, pieces))
        except BaseException:
            files.__exit__()
            with self.cond:
                self.pending[key] -= 1
                self.cond.notify_all()
            raise

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return  # flush() ended it: nothing of any job is pending
            key, files, pieces = item
            written, failure = 0, None
            try:
                written = _write_runs(files, pieces if isinstance(pieces, list) else pieces())
            except BaseException as exc:  # noqa: BLE001 - reported by flush()
                failure = (
                    exc.errno if isinstance(exc, OSError) else None,
                    str(exc.strerror or exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}",
                )
            del pieces
            with self.cond:
                self.pending[key] -= 1
                if key not in self.flushed:  # else a late tile of an ended job: nothing to keep
                    self.written[key] = self.written.get(key, 0) + written
                    if failure is not None:
                        self.failed.setdefault(key, failure)
                elif not self.pending[key]:
                    del self.pending[key]
                self.cond.notify_all()

    def flush(self, key: str, timeout: float | None = None) -> tuple[int, int | None, str | None]:
        with self.cond:
            done = self.cond.wait_for(lambda: self.pending.get(key, 0) == 0, timeout)
            written = self.written.pop(key, 0)
            code, message = self.failed.pop(key, (None, None))
            if done:
                self.pending.pop(key, None)
            elif message is None:
                message = f"writes into {key.split(chr(0))[0]} did not finish within {timeout:g} s"
            self.flushed[key] = None
            while len(self.flushed) > FLUSHED_KEPT:
                del self.flushed[next(iter(self.flushed))]
            if self.thread is not None and not any(self.pending.values()):
                # Idle: the thread ends, and the next job's first tile starts a fresh one (it holds nothing between
                # jobs; the files it writes are opened by the tiles' threads, see submit()).
                self.queue.put(None)
                self.thread = None
            return written, code, message


#: how many ended outputs a process remembers, to turn away tiles that run on after their job ended
FLUSHED_KEPT = 256
#: how long a flush waits for a process's queued writes (a hung file system): then the job fails
FLUSH_TIMEOUT = 600.0
_background = _Background()


def flush(key: str) -> tuple[int, int | None, str | None]:
    """Wait for this process's background writes of a job into its output (`Layout.key`): (bytes written, errno,
    message of the first failure). Run by the job in every process its tiles ran in (tiles.everywhere), which also
    frees the pool; later writes of that job in this process are refused."""
    try:
        return _background.flush(key, FLUSH_TIMEOUT)
    finally:
        clear_pool()


def _copy(buf: Any, data: Any, band: int | None, shape: tuple[int, int], part: tuple[int, int, int, int], target: Layout) -> None:
    """Copy data[..., r0:r1, c0:c1] into the top-left of `buf` laid out as `shape` pixels of the plane."""
    r0, r1, c0, c1 = part
    rows, cols = shape
    if band is None:
        grid = buf.view(target.dtype).reshape(rows, cols, target.count)
        grid[: r1 - r0, : c1 - c0] = data[:, r0:r1, c0:c1].transpose(1, 2, 0)
    else:
        grid = buf.view(target.dtype).reshape(rows, cols)
        grid[: r1 - r0, : c1 - c0] = data[band, r0:r1, c0:c1]


def _aligned(nbytes: int, offset: int) -> Any:
    """An uninitialised uint8 buffer of `nbytes` whose address is congruent to the file `offset` modulo ALIGN, so
    the page-aligned part of the run is also page-aligned in memory (what O_DIRECT needs). Taken from this
    process's pool of written buffers when one of the size is there (`_release`)."""
    size = nbytes + 2 * ALIGN
    raw = None
    with _pool_lock:
        for i, pooled in enumerate(_pool):
            if pooled.size == size:
                raw = _pool.pop(i)
                break
    if raw is None:
        raw = np.empty(size, dtype=np.uint8)
    shift = (offset - raw.ctypes.data) % ALIGN
    return raw[shift : shift + nbytes]


def _release(pieces: list[tuple[int, Any]]) -> None:
    """Give written buffers back to the pool (at most POOL_BUFFERS kept, none over POOL_MAX_BYTES): the next
    tile's buffer is memory this process already touched. A fresh 32 MiB+ array is a new mapping whose pages the
    kernel (on a VM, the hypervisor too) must supply again, tile after tile."""
    with _pool_lock:
        for _, buf in pieces:
            raw = buf.base
            if isinstance(raw, np.ndarray) and raw.base is None and raw.size <= POOL_MAX_BYTES and len(_pool) < POOL_BUFFERS:
                _pool.append(raw)


def clear_pool() -> None:
    with _pool_lock:
        _pool.clear()


#: written tile buffers a process keeps for its next tiles: with the background writer, one tile is computed while
#: one waits and one is written, so two come back between tiles
POOL_BUFFERS = 2
POOL_MAX_BYTES = 256 * 1024**2
_pool: list[Any] = []
_pool_lock = threading.Lock()


class _Files:
    """The output opened for writing (never created: a job that gave up and removed it gets ENOENT) through the
    page cache, and with O_DIRECT for the aligned middle of long runs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self.direct = -1

    def __enter__(self) -> _Files:
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        return self

    def opened(self) -> _Files:
        """Both descriptors opened now (by the calling thread), for another thread to write through and close."""
        self.__enter__()
        self._direct_fd()
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self.direct, self.fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.direct = -1

    def write(self, offset: int, buf: Any) -> int:
        view = memoryview(buf)
        end = offset + len(view)
        lo, hi = -(-offset // ALIGN) * ALIGN, end // ALIGN * ALIGN
        if hi - lo >= DIRECT_MIN and self._direct_fd() >= 0:
            try:
                _pwrite_all(self.direct, view[lo - offset : hi - offset], lo)
            except OSError as e:
                if e.errno != errno.EINVAL:  # this file system wants another alignment: write through the cache
                    raise
                _direct[0] = False
                _pwrite_all(self.fd, view[lo - offset : hi - offset], lo)
            _pwrite_all(self.fd, view[: lo - offset], offset)
            _pwrite_all(self.fd, view[hi - offset :], hi)
        else:
            _pwrite_all(self.fd, view, offset)
        return len(view)

    def _direct_fd(self) -> int:
        if self.direct < 0 and _direct[0]:
            try:
                self.direct = os.open(self.path, os.O_WRONLY | os.O_DIRECT | getattr(os, "O_CLOEXEC", 0))
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                    _direct[0] = False  # tmpfs before Linux 6.6 and others: plain writes from now on
                # anything else (out of descriptors …): plain writes this time
        return self.direct


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    while len(view):
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


@dataclass(frozen=True)
class RawTile:
    """A tile function's work, written into a raw layout by the task that computed it."""

    module: str
    name: str
    spec: Any
    window: tuple[int, int, int, int]
    target: Layout
    background: bool  # written by this process's writer thread (the job then flushes every process)
    counters: bool = False  # the tile function returns (pixels, *counters): the counters go back to the job


def write_tile(tile: RawTile) -> Any:
    """Tile function: compute `tile.spec` with the named tile function and write its pixels into the output; the
    bytes it writes (the job's process gets no pixels). In the background the write may still be under way when
    this returns: the job's `flush()` in every process waits for it and counts the bytes. With `counters`, (the
    bytes, (None, *counters))."""
    from gdal_mcp.engine import tiles

    fn = tiles.resolve(tile.module, tile.name)
    target, window = tile.target, tile.window
    # The tile function fills the file's bytes in place when it takes `out` and the window is one run of the file.
    buffer = _buffer_for(target, window) if "out" in inspect.signature(fn).parameters else None
    result = fn(tile.spec) if buffer is None else fn(tile.spec, out=buffer[2])
    rest = None
    if tile.counters:
        result, rest = result[0], (None, *result[1:])
    data = check_tile(target, window, result)
    tiles.check_stop()  # a tile whose job was cancelled meanwhile writes nothing
    pieces: Any
    if buffer is not None:
        offset, buf, view = buffer
        if not np.shares_memory(data, view):
            view[...] = data  # it computed elsewhere after all
        pieces = [(offset, buf)]
    else:
        pieces = functools.partial(runs, target, window, data)  # laid out by whoever writes them
    if not tile.background:
        written = _write_runs(target.path, pieces if isinstance(pieces, list) else pieces())
    else:
        _background.submit(target, pieces)
        written = extent(target, window)
    return (written, rest) if tile.counters else written
