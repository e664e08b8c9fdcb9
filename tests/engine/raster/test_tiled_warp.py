"""reproject and mosaic in tiles: the same pixels whatever runs the tiles (a parallel mapper finishing them in
another order than the local one), correct at the tile seams (gdalwarp / gdalbuildvrt), cancel between tiles."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine import tiles
from gdal_mcp.engine.raster.mosaic import mosaic
from gdal_mcp.engine.raster.warp import reproject
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.engine.mappers import ProcessMapper, spawned_pool
from tests.helpers import DATA

R = DATA / "raster"
RGB = str(R / "RGB.byte.tif")
TILES = [str(R / f"rgb{i}.tif") for i in (1, 2, 3, 4)]
SMALL = 1  # tile_bytes: tiles of TILE_ALIGN pixels
ALIGN = 128  # RGB.byte.tif (791 x 718) in 7 x 6 tiles


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    with spawned_pool() as p:
        yield p


@pytest.fixture
def small_tiles(monkeypatch) -> None:
    monkeypatch.setattr(tiles, "TILE_ALIGN", ALIGN)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=SMALL))


def read_all(path: Path) -> tuple[Any, np.ndarray, list[np.ndarray]]:
    with rasterio.open(path) as ds:
        overviews = [ds.read(out_shape=(ds.count, ds.height // f, ds.width // f)) for f in ds.overviews(1)]
        return (ds.profile["crs"], ds.transform, ds.nodata, ds.dtypes), ds.read(), overviews


def assert_identical(a: Path, b: Path) -> None:
    meta_a, pixels_a, ovr_a = read_all(a)
    meta_b, pixels_b, ovr_b = read_all(b)
    assert meta_a == meta_b
    assert np.array_equal(pixels_a, pixels_b, equal_nan=pixels_a.dtype.kind == "f")
    assert len(ovr_a) == len(ovr_b) and all(np.array_equal(x, y) for x, y in zip(ovr_a, ovr_b, strict=True))


def run_both(tmp_path: Path, pool: ProcessPoolExecutor, make: Any, name: str) -> ProcessMapper:
    """make(dst) locally and under the pool mapper; the outputs must be identical."""
    make(tmp_path / f"local_{name}")
    mapper = ProcessMapper(pool)
    with tiles.using(mapper):
        make(tmp_path / f"pool_{name}")
    assert_identical(tmp_path / f"local_{name}", tmp_path / f"pool_{name}")
    return mapper


def several_out_of_order(mapper: ProcessMapper) -> None:
    assert mapper.orders and all(len(o) > 4 for o in mapper.orders), mapper.orders
    # Submitted last-first to two processes: tile 0 cannot be the first to finish.
    assert all(o != sorted(o) and sorted(o) == list(range(len(o))) for o in mapper.orders), mapper.orders


@pytest.mark.usefixtures("small_tiles")
@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("bilinear.tif", {"dst_crs": "EPSG:4326", "resampling": "bilinear"}),
        ("nearest_nodata.tif", {"dst_crs": "EPSG:32617", "nodata": 0}),
        ("float.tif", {"resolution": 450, "resampling": "average", "src_nodata": 255, "output_type": "Float32", "nodata": -1}),
        ("cog.tif", {"dst_crs": "EPSG:3857", "format": "COG", "resampling": "cubic"}),
    ],
)
def test_reproject_is_the_same_whichever_executor_runs_the_tiles(tmp_path, pool, name, kwargs) -> None:
    mapper = run_both(tmp_path, pool, lambda dst: reproject(RGB, str(dst), threads=2, **kwargs), name)
    several_out_of_order(mapper)
    if kwargs.get("format") == "COG":
        with rasterio.open(tmp_path / f"pool_{name}") as ds:
            assert ds.overviews(1), "a COG of this size has overviews"
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"local_{name}", f"pool_{name}"]


@pytest.mark.usefixtures("small_tiles")
def test_reproject_through_gcps_is_the_same_whichever_executor_runs_the_tiles(tmp_path, pool) -> None:
    from tests.engine.raster.gcp_rasters import gcp_copy

    src = gcp_copy(tmp_path / "gcp.tif", bend=3000.0)
    mapper = run_both(
        tmp_path, pool, lambda dst: reproject(str(src), str(dst), dst_crs="EPSG:4326", gcp_transformer="tps"), "tps.tif"
    )
    several_out_of_order(mapper)


@pytest.mark.usefixtures("small_tiles")
@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("m.tif", TILES, {}),
        ("bbox.tif", list(reversed(TILES)), {"bbox": (150000.0, 2600000.0, 230000.0, 2700000.0), "src_nodata": 0}),
        ("sep.tif", TILES[:2], {"separate": True}),
        ("wgs84_cog.tif", [TILES[0], RGB], {"dst_crs": "EPSG:4326", "format": "COG"}),
    ],
)
def test_mosaic_is_the_same_whichever_executor_runs_the_tiles(tmp_path, pool, name, args, kwargs) -> None:
    mapper = run_both(tmp_path, pool, lambda dst: mosaic(args, str(dst), threads=2, **kwargs), name)
    several_out_of_order(mapper)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"local_{name}", f"pool_{name}"], "staging files left"


# ----- the tile seams against the GDAL command line (the existing tests' tolerances) ------------------------------
@pytest.mark.usefixtures("small_tiles")
def test_small_tiles_are_as_close_to_the_exact_warp_as_gdalwarp_is(tmp_path, monkeypatch) -> None:
    """GDAL interpolates the coordinate transformation linearly along each row of a chunk (error up to 1/8 pixel),
    so a warp depends a little on its chunking: 128-pixel tiles differ from gdalwarp's one chunk (bilinear: ~10 %
    of the pixels by more than 1). The reference is therefore the exact transformation (gdalwarp -et 0): the tiles
    must be at least as close to it as gdalwarp itself, at the seams too (a tile placed wrongly would not be)."""
    # square tiles (a tiled output; a striped one is written in whole-row strips, checked below)
    reproject(RGB, str(tmp_path / "ours.tif"), dst_crs="EPSG:4326", resampling="bilinear", options={"TILED": "YES"})
    with monkeypatch.context() as m:
        m.setattr(tiles, "TILE_ALIGN", 512)  # strips of the real minimum height (256 rows: 3 strips here)
        reproject(RGB, str(tmp_path / "strips.tif"), dst_crs="EPSG:4326", resampling="bilinear")
    gdal_cli("gdalwarp", "-t_srs", "EPSG:4326", "-r", "bilinear", RGB, str(tmp_path / "cli.tif"))
    gdal_cli("gdalwarp", "-et", "0", "-t_srs", "EPSG:4326", "-r", "bilinear", RGB, str(tmp_path / "exact.tif"))
    with (
        rasterio.open(tmp_path / "ours.tif") as a,
        rasterio.open(tmp_path / "cli.tif") as b,
        rasterio.open(tmp_path / "exact.tif") as x,
        rasterio.open(tmp_path / "strips.tif") as s,
    ):
        assert a.shape == b.shape == x.shape == s.shape and a.transform == b.transform == x.transform == s.transform
        assert a.profile.get("tiled") and not s.profile.get("tiled")
        exact = x.read().astype(int)
        ours = np.abs(a.read().astype(int) - exact) <= 1
        cli = np.abs(b.read().astype(int) - exact) <= 1
        strips = np.abs(s.read().astype(int) - exact) <= 1
    # strips of 256 rows: within a point of gdalwarp's one chunk (thinner strips would not be)
    assert strips.mean() >= cli.mean() - 0.01, (strips.mean(), cli.mean())
    seams = np.zeros(a.shape, dtype=bool)  # the rows and columns on either side of a tile edge
    for k in range(ALIGN, max(a.shape), ALIGN):
        seams[k - 1 : k + 1, :] = True
        seams[:, k - 1 : k + 1] = True
    assert ours.mean() >= cli.mean() > 0.85, (ours.mean(), cli.mean())
    assert ours[:, seams].mean() >= cli[:, seams].mean(), (ours[:, seams].mean(), cli[:, seams].mean())


@pytest.mark.usefixtures("small_tiles")
def test_small_tiles_match_gdalbuildvrt_exactly(tmp_path) -> None:
    from tests.engine.raster.test_mosaic import coarse_copy

    coarse = coarse_copy(tmp_path)  # average resolution: inputs placed at fractional pixel offsets and scales
    for name, inputs in (("tiles", TILES), ("average", [TILES[0], coarse])):
        mosaic(inputs, str(tmp_path / f"{name}.tif"))
        gdal_cli("gdalbuildvrt", str(tmp_path / f"{name}.vrt"), *inputs)
        gdal_cli("gdal_translate", str(tmp_path / f"{name}.vrt"), str(tmp_path / f"{name}_cli.tif"))
        with rasterio.open(tmp_path / f"{name}.tif") as ours, rasterio.open(tmp_path / f"{name}_cli.tif") as cli:
            assert ours.transform.almost_equals(cli.transform, precision=1e-9) and ours.shape == cli.shape
            assert np.array_equal(ours.read(), cli.read())


# ----- progress after every tile; a cancel between tiles stops the rest and leaves nothing --------------------------
@pytest.mark.usefixtures("small_tiles")
def test_progress_after_every_tile_and_cancel_between_tiles(tmp_path, pool) -> None:
    seen: list[tuple[float, str]] = []
    reproject(
        RGB, str(tmp_path / "a.tif"), dst_crs="EPSG:4326", options={"TILED": "YES"}, progress=lambda f, m="": seen.append((f, m))
    )
    width, height = _grid(tmp_path / "a.tif")
    n = len(tiles.plan(width, height, bytes_per_pixel=3))
    assert n > 4
    assert seen[0] == (0.0, f"warping {width}x{height} x 3 band(s) in {n} tile(s)")
    assert [m for _, m in seen if m.startswith("warped ")] == [f"warped {k}/{n} tiles" for k in range(1, n + 1)]
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0

    def cancel(fraction: float, message: str = "") -> None:
        if message == "warped 2/" + str(n) + " tiles":
            raise GdalMcpError("cancelled", "cancelled by the client")

    mapper = ProcessMapper(pool)
    with tiles.using(mapper), pytest.raises(GdalMcpError) as e:
        reproject(RGB, str(tmp_path / "b.tif"), dst_crs="EPSG:4326", format="COG", progress=cancel)
    assert e.value.code == "cancelled"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tif"], "partial output or staging file left"
    assert len(mapper.orders[0]) == 2, "the tiles after the cancel were still collected"


def _grid(path: Path) -> tuple[int, int]:
    with rasterio.open(path) as ds:
        return ds.width, ds.height


# ----- a write error on the writer thread (a full disk) surfaces as before: resource-limit, nothing left ----------
@pytest.mark.parametrize("fmt", ["GTiff", "COG"])
@pytest.mark.parametrize("small", [True, False], ids=["128-pixel tiles", "one tile"])
def test_a_full_disk_while_tiles_are_written(tmp_path, monkeypatch, fmt, small) -> None:
    """The last blocks reach the disk when the output is closed (rasterio's close ignores a failure there): with
    small tiles that is where the disk fills up, and it must fail the job all the same."""
    from rasterio.transform import from_origin

    from tests.faults import mount_small_tmpfs, unmount

    if small:
        monkeypatch.setattr(tiles, "TILE_ALIGN", ALIGN)
        monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=SMALL))
    disk = tmp_path / "small"
    reason = mount_small_tmpfs(disk, "2m")
    if reason:
        pytest.skip(reason)
    try:
        noise = tmp_path / "noise.tif"  # 4 MB of incompressible float32 for a 2 MB file system
        with rasterio.open(
            noise,
            "w",
            driver="GTiff",
            width=1000,
            height=1000,
            count=1,
            dtype="float32",
            crs="EPSG:32631",
            transform=from_origin(500000, 5000000, 10, 10),
        ) as ds:
            ds.write(np.random.default_rng(3).random((1000, 1000), dtype="float32"), 1)
        out = disk / "out.tif"
        with pytest.raises(GdalMcpError) as e:
            reproject(str(noise), str(out), dst_crs="EPSG:32632", format=fmt)
        assert e.value.code == "resource-limit" and "disk is full" in e.value.message, e.value.message
        assert list(disk.iterdir()) == [], "a partial output or staging file was left behind"
    finally:
        unmount(disk)


@pytest.mark.parametrize("nodata", [None, 0, 255])
@pytest.mark.parametrize("shift", [0, -300, 5000], ids=["inside", "half-outside", "all-outside"])
def test_warp_into_a_used_buffer_leaves_nothing_of_it(nodata, shift) -> None:
    """warp_tile(out=) does not clear the buffer it is given (a raw write's pooled buffer): GDAL must write every
    pixel, also where no source pixel falls (the margins, a tile wholly outside the source)."""
    from affine import Affine
    from rasterio.crs import CRS
    from rasterio.warp import calculate_default_transform

    from gdal_mcp.engine.raster.warp import WarpTile, warp_tile

    with rasterio.open(RGB) as ds:
        transform, width, height = calculate_default_transform(ds.crs, "EPSG:4326", ds.width, ds.height, *ds.bounds)
    spec = WarpTile(
        src=RGB,
        indexes=(1, 2, 3),
        window=(0, 0, width, height),
        transform=tuple(transform * Affine.translation(shift, shift))[:6],
        crs=CRS.from_epsg(4326).to_wkt(),
        dtype="uint8",
        src_nodata=None,
        nodata=nodata,
        resampling="nearest",
        warp_options=(),
        threads=1,
    )
    fresh = warp_tile(spec)
    used = np.full((height, width, 3), 77, dtype="uint8")  # pixel-interleaved, full of an earlier tile's values
    warp_tile(spec, out=used.transpose(2, 0, 1))
    assert np.array_equal(used.transpose(2, 0, 1), fresh)
    assert (shift == 5000) == (fresh == (nodata or 0)).all()


@pytest.mark.parametrize(
    "window",
    [(0, 0, 512, 256), (300, 100, 500, 300), (17, 1677 % 128 + 128, 513, 129), (511, 127, 2, 2)],
    ids=["aligned", "misaligned", "strip-like", "corner"],
)
def test_a_blockwise_tile_is_its_window_of_the_whole_grid_wherever_it_starts(window) -> None:
    """Data loss regression: a tile not starting on a 512 x 128 block of the warped VRT (strip tiles of a GTiff
    written in strips start on any row) skipped rows and columns, which kept the buffer's earlier values. Every
    pixel of the window must equal the same pixel of the whole grid read at once."""
    from affine import Affine
    from rasterio.crs import CRS
    from rasterio.warp import calculate_default_transform

    from gdal_mcp.engine.raster.warp import WarpTile, is_blockwise, warp_tile

    with rasterio.open(RGB) as ds:
        transform, width, height = calculate_default_transform(ds.crs, "EPSG:4326", ds.width, ds.height, *ds.bounds)
    col, row, w, h = window
    assert col + w <= width and row + h <= height

    def spec(win: tuple[int, int, int, int]) -> WarpTile:
        return WarpTile(
            src=RGB,
            indexes=(1, 2, 3),
            window=win,
            transform=tuple(transform * Affine.translation(win[0], win[1]))[:6],
            crs=CRS.from_epsg(4326).to_wkt(),
            dtype="uint8",
            src_nodata=None,
            nodata=0,
            resampling="bilinear",
            warp_options=(),
            threads=1,
            grid=(width, height),
            grid_transform=tuple(transform)[:6],
        )

    assert is_blockwise(spec(window))
    whole = warp_tile(spec((0, 0, width, height)))
    used = np.full((3, h, w), 77, dtype="uint8")  # an earlier tile's values: any pixel not read stays 77
    warp_tile(spec(window), out=used)
    assert np.array_equal(used, whole[:, row : row + h, col : col + w])


@pytest.mark.parametrize("shift", [0, -300, 5000], ids=["inside", "half-outside", "all-outside"])
def test_a_margin_fill_gives_exactly_the_pixels_of_a_nodata_warp(tmp_path: Path, shift: int) -> None:
    """Speed without a changed pixel (WarpTile.fill_only): the margin value of a source without nodata written by
    INIT_DEST, not as the warp's destination nodata, gives the same array as the nodata warp, margins included, also
    into a used buffer (every pixel written); the source holds every other byte value, so a copied source pixel that
    took the margin value would show."""
    from dataclasses import replace

    from affine import Affine
    from rasterio.crs import CRS
    from rasterio.warp import calculate_default_transform

    from gdal_mcp.engine.raster.warp import WarpTile, is_blockwise, warp_tile

    with rasterio.open(RGB) as ds:
        transform, width, height = calculate_default_transform(ds.crs, "EPSG:4326", ds.width, ds.height, *ds.bounds)
    plain = tmp_path / "plain.tif"
    _rgb_without_nodata(plain, every_value=True)  # 7, the margin value, occurs nowhere; every other value does
    grid = tuple(transform * Affine.translation(shift, shift))[:6]
    spec = WarpTile(
        src=str(plain),
        indexes=(1, 2, 3),
        window=(0, 0, width, height),
        transform=grid,
        crs=CRS.from_epsg(4326).to_wkt(),
        dtype="uint8",
        src_nodata=None,
        nodata=7,
        resampling="nearest",
        warp_options=(),
        threads=1,
        grid=(width, height),
        grid_transform=grid,
    )
    filled = replace(spec, fill_only=True)
    assert is_blockwise(spec) and is_blockwise(filled)
    reference = warp_tile(spec)
    assert np.array_equal(warp_tile(filled), reference)
    used = np.full((3, height, width), 77, dtype="uint8")
    assert np.array_equal(warp_tile(filled, out=used), reference)
    margins = (reference == 7).all(axis=0)
    assert (shift == 5000) == margins.all() and (shift == 0) == (margins.mean() < 0.4) and margins.any()


def test_reproject_fills_the_margins_of_a_source_without_nodata_only_where_that_cannot_change_a_pixel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WarpTile.fill_only is set only where the margin scan is exact, so the margin value cannot be a data pixel's:
    nearest, the input's own 8- to 32-bit integer type, the whole input scanned. Not for bilinear (new values), a
    nodata the caller chose, a float input cast to integers (its scan once rounded 254.5 to 254, GDAL to 255), 64-bit
    integers (the value as a float is another), nor a bbox (the scan's window of a part is an estimate a curved edge
    can exceed). Where it is not set, GDAL's destination nodata keeps a data pixel off the value (a red-team find:
    9,512 data pixels of a float32 input read as nodata). The output declares the value as nodata either way."""
    from gdal_mcp.engine.raster import warp

    sources = {name: tmp_path / f"{name}.tif" for name in ("byte", "float", "int64")}
    data = _rgb_without_nodata(sources["byte"])  # 7 free for the margins
    _rgb_without_nodata(sources["int64"], "int64")
    with rasterio.open(sources["byte"]) as ds:
        profile = {**ds.profile, "dtype": "float32"}
    with rasterio.open(sources["float"], "w", **profile) as out:
        out.write(np.where(data > 250, 254.5, data).astype("float32"))
    seen: list[bool] = []
    real = warp._warped_vrt

    def spy(spec: Any, stack: Any) -> Any:
        seen.append(spec.fill_only)
        return real(spec, stack)

    monkeypatch.setattr(warp, "_warped_vrt", spy)
    with rasterio.open(RGB) as ds:
        b = ds.bounds
    part = (b.left - 20000, b.bottom + 60000, b.right - 80000, b.top + 20000)  # some margin, part of the input
    cases = [
        ("byte", {}, True),
        ("byte", {"resampling": "bilinear"}, False),
        ("byte", {"nodata": 9}, False),
        ("byte", {"bbox": part, "bbox_crs": "EPSG:32618"}, False),
        ("float", {"output_type": "uint8"}, False),
        ("int64", {}, False),
    ]
    for i, (name, kwargs, expected) in enumerate(cases):
        seen.clear()
        with tiles.using(tiles.run_here):
            summary, _ = warp.reproject(str(sources[name]), str(tmp_path / f"out{i}.tif"), dst_crs="EPSG:4326", **kwargs)
        assert summary.nodata is not None, (name, kwargs)
        assert set(seen) == {expected}, (name, kwargs, seen)
        if name == "float":  # GDAL rounds 254.5 to 255: the scan (cast as GDAL does) knows, 255 stays data
            with rasterio.open(tmp_path / f"out{i}.tif") as out, rasterio.open(sources[name]) as src:
                assert (src.read() == 254.5).any() and out.nodata != 255
                pixels = out.read()
                assert (pixels == 255).any() and (pixels == out.nodata).all(axis=0).any()


def _rgb_without_nodata(path: Path, dtype: str = "uint8", every_value: bool = False) -> np.ndarray:
    """RGB.byte.tif's pixels written to `path` as `dtype`, declaring no nodata, with 7 occurring nowhere (a free margin
    value); `every_value`: every other byte value occurs. Returns the pixels written (uint8)."""
    with rasterio.open(RGB) as ds:
        profile = {**ds.profile, "nodata": None, "dtype": dtype}
        data = ds.read()
    data[data == 7] = 8
    if every_value:
        data[0, 0, : 255 - 7] = [v for v in range(256) if v != 7][: 255 - 7]
    with rasterio.open(path, "w", **profile) as out:
        out.write(data.astype(dtype))
    return data
