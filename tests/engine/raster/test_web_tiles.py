"""raster_tiles (gdal raster tile, GDAL's MBTiles driver) against Debian's gdal2tiles.py (GDAL 3.6) on the same input
and zoom levels, against the pixels of an analytic synthetic raster, and against the slippy-map tile arithmetic.

Tolerances (measured on this machine, GDAL 3.12.2 vs gdal2tiles 3.6.2):
- tile paths: the same set of z/x/y, the same count per zoom level (exact);
- pixels of the smooth synthetic raster (values change by at most 2 grey levels per source pixel), nearest
  resampling: mean absolute difference per tile 0.41-0.71 grey levels, 18-45 % of pixels identical, transparency
  differing on at most 0.5 % of pixels (gdal2tiles warps to the raster's own resolution first and then decimates,
  GDAL 3.12 warps each tile straight from the source): asserted <= 1.0, >= 10 %, <= 1 %;
- MBTiles (bilinear: GDAL's overview builder for the lower levels, gdal2tiles its own 4-children resampling):
  highest level 0.49-0.79, lower levels 1.0-2.7: asserted <= 1.5 and <= 4.0;
- the analytic raster with nearest resampling: every opaque tile pixel is the source pixel under its centre
  (100 % measured, asserted >= 99.9 %).
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.io import MemoryFile
from rasterio.transform import from_bounds

from gdal_mcp.engine.raster.web_tiles import MAX_TILES, raster_tiles
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")  # reading tiles back

RGB = str(DATA / "raster" / "RGB.byte.tif")
R = 6378137.0
HALF = math.pi * R
# the synthetic raster: 500 x 400 lon/lat pixels of 0.001 degree, values analytic in (col, row)
WEST, SOUTH, EAST, NORTH, WIDTH, HEIGHT = -98.0, 32.6, -97.5, 33.0, 500, 400


def smooth_bands(col: np.ndarray, row: np.ndarray) -> list[np.ndarray]:
    return [
        (127 + 120 * np.sin(col / 60.0)).astype("uint8"),
        (127 + 120 * np.cos(row / 45.0)).astype("uint8"),
        ((col + row) * 255 / (WIDTH + HEIGHT)).astype("uint8"),
    ]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web_tiles")


@pytest.fixture(scope="module")
def smooth(work: Path) -> str:
    row, col = np.mgrid[0:HEIGHT, 0:WIDTH]
    path = work / "smooth.tif"
    transform = from_bounds(WEST, SOUTH, EAST, NORTH, WIDTH, HEIGHT)
    profile = dict(driver="GTiff", width=WIDTH, height=HEIGHT, count=3, dtype="uint8", crs="EPSG:4326", transform=transform)
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(np.stack(smooth_bands(col, row)))
    return str(path)


@pytest.fixture(scope="module")
def smooth_tms_reference(work: Path, smooth: str) -> Path:
    """gdal2tiles.py (default TMS numbering) of the synthetic raster, zoom 8-10, nearest."""
    out = work / "g2t_smooth"
    gdal_cli("gdal2tiles.py", "-z", "8-10", "-r", "near", "-w", "none", smooth, str(out))
    return out


@pytest.fixture(scope="module")
def rgb_xyz_reference(work: Path) -> Path:
    """gdal2tiles.py --xyz of RGB.byte.tif (UTM, nodata 0 around the scene), zoom 7-8."""
    out = work / "g2t_rgb"
    gdal_cli("gdal2tiles.py", "-z", "7-8", "-r", "near", "-w", "none", "--xyz", RGB, str(out))
    return out


def tiles_in(root: Path, ext: str = "png") -> dict[tuple[int, int, int], Path]:
    """(z, x, y) -> file of every tile in a z/x/y directory (other files, e.g. gdal2tiles' .aux.xml, ignored)."""
    found = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith("." + ext):
                z, x = Path(dirpath).relative_to(root).parts
                found[(int(z), int(x), int(name.split(".")[0]))] = Path(dirpath) / name
    return found


def rgba(data: np.ndarray) -> np.ndarray:
    """Any 1-4 band tile as RGBA ints."""
    opaque = np.full((1, *data.shape[1:]), 255, data.dtype)
    if data.shape[0] == 1:
        data = np.concatenate([data, data, data, opaque])
    elif data.shape[0] == 2:
        data = np.concatenate([data[:1], data[:1], data[:1], data[1:]])
    elif data.shape[0] == 3:
        data = np.concatenate([data, opaque])
    return data.astype(int)


def read_tile(source: Path | bytes) -> np.ndarray:
    if isinstance(source, bytes):
        with MemoryFile(source) as mem, mem.open() as ds:
            return rgba(ds.read())
    with rasterio.open(source) as ds:
        return rgba(ds.read())


def compare(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """(mean absolute difference of RGB where both are opaque, fraction of those pixels identical, fraction of
    pixels whose transparency differs)."""
    both = (a[3] > 0) & (b[3] > 0)
    diff = np.abs(a[:3] - b[:3])[:, both]
    return float(diff.mean()), float((diff == 0).all(axis=0).mean()), float(((a[3] > 0) != (b[3] > 0)).mean())


def mbtiles_tiles(path: Path) -> dict[tuple[int, int, int], bytes]:
    """(z, x, y counted from the top) -> tile bytes of an MBTiles file (its rows count from the bottom: flipped)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles").fetchall()
    return {(z, x, (1 << z) - 1 - r): data for z, x, r, data in rows}


def slippy(lon: float, lat: float, zoom: int) -> tuple[float, float]:
    """The slippy-map tile coordinates (fractional, rows from the top) of a lon/lat point."""
    n = 2**zoom
    lat_r = math.radians(lat)
    return (lon + 180) / 360 * n, (1 - math.asinh(math.tan(lat_r)) / math.pi) / 2 * n


# ----- against gdal2tiles ---------------------------------------------------------------------
def test_tms_directory_matches_gdal2tiles(work: Path, smooth: str, smooth_tms_reference: Path) -> None:
    dst = work / "ours_tms"
    summary, warnings = raster_tiles(src=smooth, dst=str(dst), min_zoom=8, max_zoom=10, resampling="nearest", convention="tms")
    ours, ref = tiles_in(dst), tiles_in(smooth_tms_reference)
    assert set(ours) == set(ref) and len(ours) == 7
    assert summary.tiles == summary.planned_tiles == len(ref)
    assert [(z.zoom, z.tiles) for z in summary.zooms] == sorted(Counter(z for z, _, _ in ref).items())
    for key in ref:
        mad, identical, alpha = compare(read_tile(ours[key]), read_tile(ref[key]))
        assert mad <= 1.0 and identical >= 0.10 and alpha <= 0.01, (key, mad, identical, alpha)
    assert summary.convention == "tms" and summary.path_template == "{z}/{x}/{y}.png" and not warnings


def test_xyz_directory_of_real_imagery_has_gdal2tiles_tiles(work: Path, rgb_xyz_reference: Path) -> None:
    """RGB.byte.tif: the same z/x/y set (blank tiles around the scene included, as gdal2tiles writes them)."""
    dst = work / "ours_rgb"
    summary, _ = raster_tiles(src=RGB, dst=str(dst), min_zoom=7, max_zoom=8, resampling="nearest", threads=2)
    ref = tiles_in(rgb_xyz_reference)
    assert set(tiles_in(dst)) == set(ref)
    assert summary.tiles == summary.planned_tiles == len(ref)
    for z in summary.zooms:
        keys = [k for k in ref if k[0] == z.zoom]
        assert z.tiles == len(keys)
        assert (z.min_x, z.max_x) == (min(k[1] for k in keys), max(k[1] for k in keys))
        assert (z.min_y, z.max_y) == (min(k[2] for k in keys), max(k[2] for k in keys))


def test_mbtiles_holds_the_non_blank_gdal2tiles_tiles(work: Path, smooth: str, rgb_xyz_reference: Path) -> None:
    """GDAL's MBTiles driver stores no fully transparent tile: its tiles table is gdal2tiles' set minus the blank ones."""
    dst = work / "rgb.mbtiles"
    summary, _ = raster_tiles(src=RGB, dst=str(dst), min_zoom=7, max_zoom=8, resampling="nearest")
    ref = tiles_in(rgb_xyz_reference)
    non_blank = {k for k, p in ref.items() if read_tile(p)[3].any()}
    assert len(non_blank) < len(ref)  # the scene does not fill its tiles: the case is meaningful
    held = mbtiles_tiles(dst)
    assert set(held) == non_blank
    assert summary.container == "mbtiles" and summary.convention == "tms"
    assert summary.tiles == len(held) and summary.planned_tiles == len(ref)
    assert not list(work.glob("rgb.mbtiles?*"))  # one file: no .aux.xml, no journal


def test_mbtiles_pixels_match_gdal2tiles(work: Path, smooth: str, smooth_tms_reference: Path) -> None:
    dst = work / "smooth.mbtiles"
    raster_tiles(src=smooth, dst=str(dst), min_zoom=8, max_zoom=10, resampling="bilinear")
    held = mbtiles_tiles(dst)
    ref = {(z, x, (1 << z) - 1 - y): p for (z, x, y), p in tiles_in(smooth_tms_reference).items()}
    assert set(held) == set(ref)
    for key, data in held.items():
        mad, _, alpha = compare(read_tile(data), read_tile(ref[key]))
        assert mad <= (1.5 if key[0] == 10 else 4.0) and alpha <= 0.02, (key, mad, alpha)


# ----- against the analytic raster and tile arithmetic ----------------------------------------
def test_nearest_tiles_hold_the_source_pixel_under_each_centre(work: Path, smooth: str) -> None:
    dst = work / "analytic"
    summary, _ = raster_tiles(src=smooth, dst=str(dst), max_zoom=10, min_zoom=10, resampling="nearest", tile_format="WEBP")
    tiles = tiles_in(dst, "webp")
    assert summary.path_template == "{z}/{x}/{y}.webp" and len(tiles) == 4
    j, i = np.mgrid[0:256, 0:256]
    for (z, x, y), path in tiles.items():
        with rasterio.open(path) as ds:
            assert ds.driver == "WEBP"
            tile = rgba(ds.read())
        span = 2 * HALF / 2**z
        lon = np.degrees((-HALF + (x + (i + 0.5) / 256) * span) / R)
        lat = np.degrees(2 * np.arctan(np.exp((HALF - (y + (j + 0.5) / 256) * span) / R)) - np.pi / 2)
        col = np.floor((lon - WEST) / 0.001).astype(int)
        row = np.floor((NORTH - lat) / 0.001).astype(int)
        inside = (col >= 0) & (col < WIDTH) & (row >= 0) & (row < HEIGHT)
        expected = np.stack(smooth_bands(col, row)).astype(int)
        opaque = (tile[3] > 0) & inside
        assert ((tile[3] > 0) == inside).mean() >= 0.999
        # WEBP is lossy by default: the analytic check with lossless tiles below; here the values stay close
        assert np.abs(tile[:3] - expected)[:, opaque].mean() < 3


def test_nearest_png_tiles_are_exactly_the_source_pixels(work: Path, smooth: str) -> None:
    dst = work / "analytic_png"
    raster_tiles(src=smooth, dst=str(dst), min_zoom=10, max_zoom=10, resampling="nearest")
    j, i = np.mgrid[0:256, 0:256]
    for (z, x, y), path in tiles_in(dst).items():
        tile = read_tile(path)
        span = 2 * HALF / 2**z
        lon = np.degrees((-HALF + (x + (i + 0.5) / 256) * span) / R)
        lat = np.degrees(2 * np.arctan(np.exp((HALF - (y + (j + 0.5) / 256) * span) / R)) - np.pi / 2)
        col = np.floor((lon - WEST) / 0.001).astype(int)
        row = np.floor((NORTH - lat) / 0.001).astype(int)
        opaque = (tile[3] > 0) & (col >= 0) & (col < WIDTH) & (row >= 0) & (row < HEIGHT)
        expected = np.stack(smooth_bands(col, row)).astype(int)
        assert (tile[:3] == expected)[:, opaque].all(axis=0).mean() >= 0.999


def test_default_zoom_and_tile_ranges_follow_the_slippy_map_arithmetic(work: Path, smooth: str) -> None:
    """The default level is the one closest to the raster's 0.001 degree pixels; the tiles, those the corners fall in."""
    dst = work / "default_zoom"
    summary, _ = raster_tiles(src=smooth, dst=str(dst))
    # In EPSG:3857 a 0.001 degree pixel is 111.3 m wide and 111.3 / cos(lat) m high (132 m at 32.8 N); zoom z has
    # pixels of 2 * HALF / 256 / 2^z m, and the closest level is the nearest in log2: the same for both sizes here
    widths = [0.001 * (2 * HALF / 360) / f for f in (1.0, math.cos(math.radians(NORTH)))]
    (expected_zoom,) = {round(math.log2(2 * HALF / 256 / w)) for w in widths}
    assert summary.min_zoom == summary.max_zoom == expected_zoom
    x0, y0 = slippy(WEST, NORTH, expected_zoom)
    x1, y1 = slippy(EAST, SOUTH, expected_zoom)
    (level,) = summary.zooms
    assert (level.min_x, level.max_x, level.min_y, level.max_y) == (int(x0), int(x1), int(y0), int(y1))
    assert set(tiles_in(dst)) == {(expected_zoom, x, y) for x in range(int(x0), int(x1) + 1) for y in range(int(y0), int(y1) + 1)}


def test_bbox_restricts_the_tiles_to_those_it_touches(work: Path, smooth: str) -> None:
    box = (-97.9, 32.7, -97.8, 32.8)
    dst = work / "bbox"
    summary, _ = raster_tiles(src=smooth, dst=str(dst), min_zoom=10, max_zoom=12, bbox=box, resampling="nearest")
    x0, y0 = slippy(box[0], box[3], 12)
    x1, y1 = slippy(box[2], box[1], 12)
    top = {k for k in tiles_in(dst) if k[0] == 12}
    assert top == {(12, x, y) for x in range(int(x0), int(x1) + 1) for y in range(int(y0), int(y1) + 1)}
    assert summary.tiles == summary.planned_tiles == len(tiles_in(dst))


def test_global_raster_counts_every_tile_of_the_world(work: Path) -> None:
    """A -180..180 x -90..90 raster covers the whole grid: 4^z tiles per Web Mercator level (the poles clamped to
    85.05 degrees, as GDAL does), 2 x 4^z in WorldCRS84Quad."""
    path = work / "global.tif"
    profile = dict(driver="GTiff", width=360, height=180, count=1, dtype="uint8", crs="EPSG:4326")
    with rasterio.open(path, "w", transform=from_bounds(-180, -90, 180, 90, 360, 180), **profile) as ds:
        ds.write(np.indices((180, 360)).sum(0).astype("uint8"), 1)
    mercator, _ = raster_tiles(src=str(path), dst=str(work / "world"), min_zoom=0, max_zoom=2, resampling="nearest")
    assert [(z.zoom, z.tiles) for z in mercator.zooms] == [(0, 1), (1, 4), (2, 16)]
    lonlat, _ = raster_tiles(
        src=str(path), dst=str(work / "world84"), min_zoom=0, max_zoom=2, tiling_scheme="WorldCRS84Quad", resampling="nearest"
    )
    assert [(z.zoom, z.tiles) for z in lonlat.zooms] == [(0, 2), (1, 8), (2, 32)]
    assert mercator.tiles == mercator.planned_tiles and lonlat.tiles == lonlat.planned_tiles


# ----- options ----------------------------------------------------------------------------------
def test_viewer_jpeg_and_skip_blank(work: Path) -> None:
    dst = work / "viewer"
    summary, _ = raster_tiles(
        src=RGB, dst=str(dst), min_zoom=8, max_zoom=8, tile_format="JPEG", webviewer="leaflet", resampling="nearest"
    )
    assert summary.viewers == ["leaflet.html"] and (dst / "leaflet.html").is_file()
    tiles = tiles_in(dst, "jpg")
    assert len(tiles) == summary.tiles == 6
    with rasterio.open(next(iter(tiles.values()))) as ds:
        assert ds.driver == "JPEG" and ds.count == 3  # no alpha in JPEG
    skipped, _ = raster_tiles(src=RGB, dst=str(work / "skip"), min_zoom=8, max_zoom=8, skip_blank=True, resampling="nearest")
    kept = tiles_in(work / "skip")
    assert skipped.tiles == len(kept) < skipped.planned_tiles
    assert all(read_tile(p)[3].any() for p in kept.values())


# ----- limits and refusals ----------------------------------------------------------------------
def test_too_many_tiles_are_refused_before_any_work(work: Path, smooth: str) -> None:
    dst = work / "too_many"
    with pytest.raises(GdalMcpError) as e:
        raster_tiles(src=smooth, dst=str(dst), min_zoom=8, max_zoom=14, max_tiles=100)
    # analytic count: the corner tiles of each level
    expected = 0
    for z in range(8, 15):
        x0, y0 = slippy(WEST, NORTH, z)
        x1, y1 = slippy(EAST, SOUTH, z)
        expected += (int(x1) - int(x0) + 1) * (int(y1) - int(y0) + 1)
    assert e.value.code == "resource-limit"
    message = e.value.message
    assert f"{expected} tiles" in message and "limit of 100" in message
    assert "max_zoom" in message and "bbox" in message
    assert not dst.exists()
    assert MAX_TILES == 100_000


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"src": str(DATA / "raster" / "jacksboro_dem.tif")}, "8-bit"),
        ({"min_zoom": 11, "max_zoom": 9}, "min_zoom"),
        ({"max_zoom": 31}, "max_zoom"),
        ({"bbox": (10.0, 10.0, 11.0, 11.0), "bbox_crs": "EPSG:4326"}, "does not overlap"),
        ({"dst_name": "x.mbtiles", "tiling_scheme": "WorldCRS84Quad"}, "WebMercatorQuad"),
        ({"dst_name": "x.mbtiles", "min_zoom": 5, "max_zoom": 10}, "min_zoom to 8"),
        ({"tiling_scheme": "NZTM2000"}, "tiling_scheme"),
    ],
)
def test_bad_arguments_are_refused_and_nothing_is_written(work: Path, smooth: str, kwargs: dict, words: str) -> None:
    kwargs = dict(kwargs)
    dst = work / "refused" / kwargs.pop("dst_name", "tiles")
    with pytest.raises(GdalMcpError) as e:
        raster_tiles(src=kwargs.pop("src", smooth), dst=str(dst), **kwargs)
    assert e.value.code == "invalid-argument" and words in e.value.message, e.value.message
    assert not dst.exists()


def test_a_cancel_stops_gdal(work: Path) -> None:
    calls: list[float] = []

    def progress(fraction: float, message: str = "") -> None:
        calls.append(fraction)
        if len(calls) > 2:
            raise GdalMcpError("cancelled", "the job was cancelled")

    for name in ("cancelled", "cancelled.mbtiles"):
        calls.clear()
        with pytest.raises(GdalMcpError) as e:
            raster_tiles(src=RGB, dst=str(work / name), min_zoom=7, max_zoom=8, progress=progress)
        assert e.value.code == "cancelled" and len(calls) == 3
