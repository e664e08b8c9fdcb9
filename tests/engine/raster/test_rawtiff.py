"""Tiles written straight into an uncompressed GTiff (rawtiff): every layout GDAL makes reads back as GDAL wrote
it, layouts that cannot be written raw are refused, writes in the background are counted and their failures
reported, and write_tiles takes the raw path for the default output with the same pixels as through GDAL."""

from __future__ import annotations

import errno
import functools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from rasterio.windows import Window

from gdal_mcp.engine import tiles
from gdal_mcp.engine.raster import rawtiff
from gdal_mcp.engine.raster.warp import reproject
from gdal_mcp.errors import GdalMcpError
from tests.engine.mappers import ProcessMapper, spawned_pool
from tests.helpers import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")

LAYOUTS = {
    "strips-pixel": dict(count=3, dtype="uint16"),
    "strips-band": dict(count=3, dtype="uint16", interleave="band"),
    "strips-7-rows": dict(count=2, dtype="int16", blockysize=7),  # a short last strip
    "tiled-pixel": dict(count=3, dtype="uint8", tiled=True),  # 256 x 256, padded edge blocks
    "tiled-band-512": dict(count=2, dtype="float32", tiled=True, blockxsize=512, blockysize=512, interleave="band"),
    "one-band-float64": dict(count=1, dtype="float64"),
}


def profile(width: int, height: int, **kw: Any) -> dict[str, Any]:
    return dict(
        driver="GTiff",
        width=width,
        height=height,
        crs="EPSG:32618",
        transform=rasterio.Affine(30, 0, 300000, 0, -30, 4500000),
        **kw,
    )


def random_pixels(count: int, height: int, width: int, dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=(count, height, width)).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=(count, height, width), endpoint=True, dtype=dtype)


def block_windows(layout: rawtiff.Layout, rows_per: int, cols_per: int) -> list[tuple[int, int, int, int]]:
    """Windows of whole blocks of a tiled layout covering the raster (the last ones reaching its edges)."""
    bh, bw = layout.block
    step_r, step_c = bh * rows_per, min(layout.width, bw * cols_per)
    return [
        (c, r, min(step_c, layout.width - c), min(step_r, layout.height - r))
        for r in range(0, layout.height, step_r)
        for c in range(0, layout.width, step_c)
    ]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_layout_reads_back_what_was_written(tmp_path: Path, name: str) -> None:
    width, height = 700, 530  # no block size divides these: edge blocks and strips are partial
    kw = LAYOUTS[name]
    path = tmp_path / "raw.tif"
    layout = rawtiff.create(str(path), profile(width, height, **kw))
    assert layout is not None, f"{name}: GDAL's layout was not recognised"
    data = random_pixels(kw["count"], height, width, kw["dtype"])
    if layout.block[1] == width:  # strips: any rows (37 is no multiple of any strip height here)
        windows = [(0, r, width, min(37, height - r)) for r in range(0, height, 37)]
    else:  # single blocks, and windows of several blocks across and down
        windows = block_windows(layout, 1, 1) if name.endswith("512") else block_windows(layout, 2, 2)
    assert len(windows) > 3
    for col, row, w, h in reversed(windows):  # any order
        assert layout.fits((col, row, w, h))
        rawtiff.write_window(layout, (col, row, w, h), data[:, row : row + h, col : col + w])
    # The reference: the same pixels written by GDAL.
    ref = tmp_path / "gdal.tif"
    with rasterio.open(ref, "w", **profile(width, height, **kw)) as out:
        out.write(data)
    with rasterio.open(path) as a, rasterio.open(ref) as b:
        assert (a.block_shapes, a.interleaving, a.dtypes) == (b.block_shapes, b.interleaving, b.dtypes)
        assert np.array_equal(a.read(), b.read())
        assert np.array_equal(a.read(window=Window(13, 17, 50, 60)), data[:, 17:77, 13:63])


@pytest.mark.parametrize("nodata", [5, float("nan")])
def test_nodata_is_declared_after_the_pixels_without_filling_the_file(tmp_path: Path, nodata: float) -> None:
    path = tmp_path / "raw.tif"
    layout = rawtiff.create(str(path), profile(300, 200, count=1, dtype="float32", nodata=nodata))
    assert layout is not None
    # GDAL did not fill the blocks with the nodata value (it would for a declared non-zero nodata)
    assert os.stat(path).st_blocks * 512 < 300 * 200 * 4 // 2
    data = random_pixels(1, 200, 300, "float32")
    rawtiff.write_window(layout, (0, 0, 300, 200), data)
    rawtiff.finish(str(path), nodata)
    with rasterio.open(path) as ds:
        assert ds.nodata == nodata or (np.isnan(nodata) and np.isnan(ds.nodata))
        assert np.array_equal(ds.read(), data)


@pytest.mark.parametrize(
    "options", [{"COMPRESS": "DEFLATE"}, {"NBITS": "4"}, {"SPARSE_OK": "TRUE"}, {"ENDIANNESS": "BIG"}, {"PHOTOMETRIC": "YCBCR"}]
)
def test_options_that_change_the_bytes_are_not_written_raw(options: dict[str, str]) -> None:
    assert not rawtiff.eligible("GTiff", options)
    assert rawtiff.eligible("GTiff", {"COMPRESS": "NONE", "TILED": "YES", "INTERLEAVE": "BAND"})
    assert not rawtiff.eligible("COG", {})


def test_files_gdal_laid_out_otherwise_are_not_recognised(tmp_path: Path) -> None:
    compressed = tmp_path / "deflate.tif"
    with rasterio.open(compressed, "w", **profile(100, 100, count=1, dtype="uint8", compress="deflate")):
        pass
    assert rawtiff.layout(str(compressed)) is None
    sparse = tmp_path / "sparse.tif"  # SPARSE_OK: blocks never written have no offset
    with rasterio.open(sparse, "w", **profile(100, 100, count=1, dtype="uint8", sparse_ok=True)):
        pass
    assert rawtiff.layout(str(sparse)) is None
    big = tmp_path / "big_endian.tif"
    with rasterio.open(big, "w", **profile(100, 100, count=1, dtype="uint16", endianness="big")):
        pass
    assert rawtiff.layout(str(big)) is None


def test_windows_that_split_blocks_are_refused(tmp_path: Path) -> None:
    layout = rawtiff.create(str(tmp_path / "t.tif"), profile(600, 600, count=1, dtype="uint8", tiled=True))
    assert layout is not None and layout.block == (256, 256)
    assert layout.fits((256, 0, 256, 512)) and layout.fits((512, 512, 88, 88))
    assert not layout.fits((100, 0, 256, 256)) and not layout.fits((0, 0, 300, 256))
    strips = rawtiff.create(str(tmp_path / "s.tif"), profile(600, 600, count=1, dtype="uint8", blockysize=7))
    assert strips is not None and strips.block == (7, 600)
    assert strips.fits((0, 5, 600, 10)) and not strips.fits((10, 0, 590, 7)) and not strips.fits((0, 595, 600, 10))
    with pytest.raises(ValueError, match="whole"):
        rawtiff.write_window(layout, (100, 0, 256, 256), np.zeros((1, 256, 256), "uint8"))
    with pytest.raises(ValueError, match="takes"):
        rawtiff.write_window(layout, (0, 0, 256, 256), np.zeros((1, 256, 256), "int16"))


def test_plain_writes_where_o_direct_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without O_DIRECT (tmpfs before Linux 6.6 refuses the open, others the write): the same bytes
    through the page cache."""
    monkeypatch.setattr(rawtiff, "DIRECT_MIN", 4096)
    real_pwrite, refused = os.pwrite, []

    def pwrite(fd: int, data: Any, offset: int) -> int:
        if fcntl_flags(fd) & os.O_DIRECT:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(rawtiff.os, "pwrite", pwrite)
    monkeypatch.setattr(rawtiff, "_direct", [True])
    layout = rawtiff.create(str(tmp_path / "r.tif"), profile(2000, 300, count=3, dtype="uint16"))
    assert layout is not None
    data = random_pixels(3, 300, 2000, "uint16")
    rawtiff.write_window(layout, (0, 0, 2000, 150), data[:, :150])
    rawtiff.write_window(layout, (0, 150, 2000, 150), data[:, 150:])
    assert len(refused) == 1 and rawtiff._direct == [False]  # tried once, then plain writes
    with rasterio.open(tmp_path / "r.tif") as ds:
        assert np.array_equal(ds.read(), data)


def fcntl_flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


def test_o_direct_writes_the_aligned_middle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the file system takes O_DIRECT (this test's tmp_path, unless it is an old tmpfs), long runs go
    through it: page-aligned in the file and in memory."""
    monkeypatch.setattr(rawtiff, "_direct", [True])
    real_pwrite, direct = os.pwrite, []

    def pwrite(fd: int, data: Any, offset: int) -> int:
        if fcntl_flags(fd) & os.O_DIRECT:
            direct.append((offset, len(data), np.frombuffer(data, np.uint8).ctypes.data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(rawtiff.os, "pwrite", pwrite)
    layout = rawtiff.create(str(tmp_path / "d.tif"), profile(3000, 400, count=3, dtype="uint16"))
    assert layout is not None
    data = random_pixels(3, 400, 3000, "uint16")
    rawtiff.write_window(layout, (0, 0, 3000, 400), data)
    if not rawtiff._direct[0]:
        pytest.skip("this file system refuses O_DIRECT: covered by test_plain_writes_where_o_direct_is_refused")
    assert direct and all(o % rawtiff.ALIGN == 0 and n % rawtiff.ALIGN == 0 and a % rawtiff.ALIGN == 0 for o, n, a in direct)
    with rasterio.open(tmp_path / "d.tif") as ds:
        assert np.array_equal(ds.read(), data)


def test_background_writes_are_counted_and_failures_reported(tmp_path: Path) -> None:
    path = tmp_path / "bg.tif"
    layout = rawtiff.create(str(path), profile(400, 300, count=1, dtype="uint8"))
    assert layout is not None
    data = random_pixels(1, 300, 400, "uint8")
    total = 0
    for row in range(0, 300, 100):
        pieces = rawtiff.runs(layout, (0, row, 400, 100), data[:, row : row + 100])
        total += sum(len(b) for _, b in pieces)
        rawtiff._background.submit(layout, pieces)
    assert rawtiff.flush(layout.key) == (total, None, None) and total == 400 * 300
    with rasterio.open(path) as ds:
        assert np.array_equal(ds.read(), data)
    # Once flushed, the job has ended: a tile that ran on (after a cancel) is turned away, nothing is kept.
    with pytest.raises(RuntimeError, match="has ended"):
        rawtiff._background.submit(layout, rawtiff.runs(layout, (0, 0, 400, 100), data[:, :100]))
    # The output gone before the writes (a job that gave up): reported, never created again.
    os.remove(path)
    again = rawtiff.Layout(**{**layout.__dict__, "nonce": "another job"})
    rawtiff._background.submit(again, rawtiff.runs(again, (0, 0, 400, 100), data[:, :100]))
    written, code, message = rawtiff.flush(again.key)
    assert (written, code) == (0, errno.ENOENT) and message and not path.exists()
    assert layout.key not in rawtiff._background.pending and again.key not in rawtiff._background.failed


def test_a_writer_thread_that_cannot_start_counts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thread.start failing (no memory for a stack under the worker's address-space limit) fails the tile, and the
    job's flush returns at once instead of waiting for a write that was never queued."""
    import threading

    path = tmp_path / "t.tif"
    layout = rawtiff.create(str(path), profile(100, 100, count=1, dtype="uint8"))
    assert layout is not None
    background = rawtiff._Background()

    def refuse(self: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError, match="new thread"):
        background.submit(layout, rawtiff.runs(layout, (0, 0, 100, 100), np.zeros((1, 100, 100), "uint8")))
    assert background.flush(layout.key, timeout=5) == (0, None, None)


def test_a_flush_that_waits_too_long_fails_the_job(tmp_path: Path) -> None:
    layout = rawtiff.create(str(tmp_path / "slow.tif"), profile(100, 100, count=1, dtype="uint8"))
    assert layout is not None
    background = rawtiff._Background()
    import threading

    gate = threading.Event()
    background.submit(layout, lambda: gate.wait(10) and [])  # a write stuck on a hung file system
    written, code, message = background.flush(layout.key, timeout=0.2)
    assert written == 0 and code is None and message and "did not finish" in message
    gate.set()


def test_write_tiles_writes_the_default_gtiff_raw_with_gdals_pixels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """reproject into a plain GTiff goes the raw way (locally: in the background, flushed); with creation options
    that compress it goes through GDAL; both give the same pixels, and so does a process-pool executor (whose
    tiles write synchronously: it cannot reach its processes afterwards)."""
    monkeypatch.setattr(tiles, "TILE_ALIGN", 128)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=1))
    created: list[str] = []
    real_create = rawtiff.create
    monkeypatch.setattr(rawtiff, "create", lambda p, *a, **k: created.append(p) or real_create(p, *a, **k))
    reproject(RGB, str(tmp_path / "raw.tif"), dst_crs="EPSG:4326", nodata=0)
    assert len(created) == 1 and Path(created[0]).name == "raw.tif"
    reproject(RGB, str(tmp_path / "gdal.tif"), dst_crs="EPSG:4326", nodata=0, options={"COMPRESS": "DEFLATE"})
    assert len(created) == 1  # not eligible: never created raw
    with spawned_pool() as pool:
        with tiles.using(ProcessMapper(pool)):
            reproject(RGB, str(tmp_path / "pool.tif"), dst_crs="EPSG:4326", nodata=0)
    with (
        rasterio.open(tmp_path / "raw.tif") as a,
        rasterio.open(tmp_path / "gdal.tif") as b,
        rasterio.open(tmp_path / "pool.tif") as c,
    ):
        assert a.nodata == b.nodata == c.nodata == 0
        assert (a.transform, a.crs, a.colorinterp) == (b.transform, b.crs, b.colorinterp)
        assert np.array_equal(a.read(), b.read()) and np.array_equal(a.read(), c.read())


class LosingMapper:
    """Runs tiles here in the background, but its `everywhere` loses one process's report (a worker that died
    with writes queued)."""

    def __call__(self, fn: Any, items: Any) -> Any:
        return tiles.run_here(fn, items)

    def everywhere(self, fn: Any, *args: Any) -> list[Any]:
        written, code, message = fn(*args)
        return [(written - 1, code, message)]


def test_bytes_a_dead_worker_never_wrote_fail_the_job_and_leave_nothing(tmp_path: Path) -> None:
    with tiles.using(LosingMapper()), pytest.raises(GdalMcpError) as e:
        reproject(RGB, str(tmp_path / "lost.tif"), dst_crs="EPSG:4326")
    assert e.value.code == "internal-error" and "not written" in e.value.message
    assert list(tmp_path.iterdir()) == []


def test_calc_counters_come_back_from_raw_tiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """raster_calc's tiles return (pixels, counters): written raw, the counters still reach the job, so the
    warnings (clamped values, division by zero) are the ones the GDAL-assembled output gives."""
    from gdal_mcp.engine.raster.calc import calc

    monkeypatch.setattr(tiles, "TILE_ALIGN", 128)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=1))
    created: list[str] = []
    real_create = rawtiff.create
    monkeypatch.setattr(rawtiff, "create", lambda p, *a, **k: created.append(p) or real_create(p, *a, **k))
    expressions = ["a * 3", "a / (a - 100)"]  # over 255 is clamped in Byte; a == 100 divides by zero
    _, raw_warnings = calc({"a": RGB}, expressions, str(tmp_path / "raw.tif"), output_type="Byte", nodata=0)
    assert len(created) == 1
    _, gdal_warnings = calc(
        {"a": RGB}, expressions, str(tmp_path / "gdal.tif"), output_type="Byte", nodata=0, creation_options={"COMPRESS": "LZW"}
    )
    assert len(created) == 1
    assert raw_warnings == gdal_warnings
    assert any("clamped" in w for w in raw_warnings) and any("divided by zero" in w for w in raw_warnings)
    with rasterio.open(tmp_path / "raw.tif") as a, rasterio.open(tmp_path / "gdal.tif") as b:
        assert a.descriptions == b.descriptions and a.nodata == b.nodata == 0
        assert np.array_equal(a.read(), b.read())
