"""PNG quicklooks: decoded with GDAL's PNG driver and checked against independent reads of the sources."""

from __future__ import annotations

import json
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pyogrio
import pytest
import rasterio
import shapely
from rasterio.enums import ColorInterp, Resampling
from rasterio.io import MemoryFile
from rasterio.transform import from_bounds
from rasterio.warp import transform_bounds

import gdal_mcp.engine.preview.vector as vector_mod
from gdal_mcp.engine.preview import colormaps, raster_preview, vector_preview
from gdal_mcp.engine.preview.png import encode_png
from gdal_mcp.engine.preview.raster import preview_shape
from gdal_mcp.engine.raster.region import bbox_window
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA, huge_vrt

R = DATA / "raster"
V = DATA / "vector"
RGB = str(R / "RGB.byte.tif")
SLOPE = str(R / "slope.tif")
FLOAT_NAN = str(R / "float_nan.tif")
GOES = str(R / "goes.tif")
SRTM = f"/vsizip/{R / 'N10W110.hgt.zip'}/N10W110.hgt"
H5 = f'HDF5:"{R / "two-subs.h5"}"://data'
NE = str(V / "naturalearth_lowres.shp")
BOX = str(V / "box.shp")
WHITE = (255, 255, 255)

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")


def decode(png: bytes) -> np.ndarray:
    """(height, width, bands) pixels of PNG bytes, read by GDAL's PNG driver (libpng checks every CRC)."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with MemoryFile(png) as mem, mem.open() as ds:
            assert ds.driver == "PNG"
            return ds.read().transpose(1, 2, 0)


def source_read(path: str, bands: list[int], shape: tuple[int, int], window=None) -> tuple[np.ndarray, np.ndarray]:
    """Values (float64) and invalid mask of `bands`, decimated with rasterio to `shape` (height, width)."""
    with rasterio.open(path) as ds:
        a = ds.read(bands, window=window, out_shape=(len(bands), *shape), resampling=Resampling.nearest, masked=True)
    data = np.ma.getdata(a).astype(np.float64)
    return data, np.ma.getmaskarray(a) | ~np.isfinite(data)


def stretched(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(np.rint(np.nan_to_num((values - lo) * 255.0 / (hi - lo))), 0, 255).astype(np.uint8)


def enlarge(a: np.ndarray, k: int) -> np.ndarray:
    return np.repeat(np.repeat(a, k, axis=0), k, axis=1)


# ------------------------------------------------------------------------------------------------- PNG


def test_png_encoder_round_trips_exactly() -> None:
    rng = np.random.default_rng(0)
    for shape in ((1, 1, 4), (3, 5, 4), (97, 203, 4)):
        rgba = rng.integers(0, 256, size=shape, dtype=np.uint8)
        assert np.array_equal(decode(encode_png(rgba)), rgba)
    png = encode_png(np.zeros((2, 2, 4), np.uint8), text={"Description": "extent → [0, 1]"})
    with MemoryFile(png) as mem, mem.open() as ds:
        assert ds.tags()["Description"] == "extent → [0, 1]"
    with pytest.raises(ValueError):
        encode_png(np.zeros((2, 2, 3), np.uint8))


def test_colormaps_are_256_entry_luts_from_their_anchors() -> None:
    viridis = colormaps.lut("viridis")
    assert viridis.shape == (256, 3) and viridis.dtype == np.uint8
    assert colormaps.rgb_to_hex(viridis[0]) == "#440154" and colormaps.rgb_to_hex(viridis[255]) == "#fde725"
    assert np.array_equal(colormaps.lut("Viridis_R"), viridis[::-1])
    gray = colormaps.lut("grey")
    assert np.array_equal(gray[:, 0], np.arange(256)) and (gray[:, 0] == gray[:, 2]).all()
    terrain = colormaps.lut("terrain")
    assert colormaps.rgb_to_hex(terrain[0]) == "#333399" and colormaps.rgb_to_hex(terrain[255]) == "#ffffff"
    for name in colormaps.COLORMAPS:
        table = colormaps.lut(name)
        assert table.shape == (256, 3) and len(np.unique(table, axis=0)) > 100, name
    with pytest.raises(GdalMcpError) as e:
        colormaps.lut("jet")
    assert e.value.code == "invalid-argument" and "viridis" in e.value.message


def test_preview_shape_rule() -> None:
    assert preview_shape(791, 718, 768) == (768, 697, 1)  # decimated: longest side = max_size
    assert preview_shape(20000, 100, 768) == (768, 4, 1)
    # small: enlarged by the largest whole factor that fits in max_size
    assert preview_shape(50, 40, 400) == (50, 40, 8)
    assert preview_shape(84, 78, 768) == (84, 78, 9)
    assert preview_shape(3, 2, 768) == (3, 2, 256)
    assert preview_shape(3, 2, 100) == (3, 2, 33)  # never beyond max_size
    assert preview_shape(700, 500, 768) == (700, 500, 1)
    assert preview_shape(384, 100, 768) == (384, 100, 2)
    assert preview_shape(791, 718, 1) == (1, 1, 1)


# ---------------------------------------------------------------------------------------------- rasters


def test_rgb_composite_percentile_stretch_and_transparent_nodata() -> None:
    messages: list[str] = []
    r = raster_preview(RGB, scale_bar=False, progress=lambda f, m="": messages.append(m))
    img = decode(r.png)
    assert img.shape == (697, 768, 4) and (r.width, r.height) == (768, 697)
    assert r.mode == "rgb" and r.bands_used == [1, 2, 3] and r.colormap is None
    assert r.crs == "EPSG:32618" and r.window == (0, 0, 791, 718)
    with rasterio.open(RGB) as ds:
        assert r.extent == tuple(ds.bounds)
        # Independent mask: GDAL's dataset mask (valid where any band is valid), decimated the same way.
        dataset_mask = ds.dataset_mask(out_shape=(697, 768), resampling=Resampling.nearest)
    assert np.array_equal(img[..., 3] == 0, dataset_mask == 0)
    assert 0.3 < (img[..., 3] == 0).mean() < 0.35
    values, invalid = source_read(RGB, [1, 2, 3], (697, 768))
    for j in range(3):
        valid = values[j][~invalid[j]]
        lo, hi = np.percentile(valid, [2, 98])
        assert r.value_range[j] == (lo, hi)
        # data_range is the preview pixels' own range, not the stretch (an agent reported 6-255 for data of 1-255)
        assert r.data_range[j] == (valid.min(), valid.max()) and r.data_range[j] != r.value_range[j]
        ok = ~invalid[j]
        assert np.array_equal(img[..., j][ok], stretched(values[j], lo, hi)[ok])
    assert (img[dataset_mask == 0][:, :3] == 0).all()
    assert "EPSG:32618" in r.legend and "2nd and 98th percentile" in r.legend and "Transparent" in r.legend
    assert "[101985, 2611485, 339315, 2826915]" in r.legend and r.warnings == []
    assert messages[0] == "preview: opening" and messages[-1] == "preview: done"


def test_stretch_none_keeps_byte_values_and_minmax_uses_the_extremes() -> None:
    r = raster_preview(RGB, stretch="none", max_size=400, scale_bar=False)
    img = decode(r.png)
    assert max(img.shape[:2]) == 400 and r.value_range == [(0.0, 255.0)] * 3
    values, invalid = source_read(RGB, [1, 2, 3], img.shape[:2])
    ok = ~invalid[0]
    assert np.array_equal(img[..., 0][ok], values[0][ok].astype(np.uint8))
    m = raster_preview(SLOPE, stretch="minmax")
    v, bad = source_read(SLOPE, [1], (78, 84))
    assert m.value_range == [(v[0][~bad[0]].min(), v[0][~bad[0]].max())]
    assert "min and max" in m.legend


def test_single_band_colormap_changes_colours_and_small_rasters_are_enlarged() -> None:
    gray = raster_preview(SLOPE, scale_bar=False)
    viridis = raster_preview(SLOPE, colormap="viridis", scale_bar=False)
    g, c = decode(gray.png), decode(viridis.png)
    assert g.shape == c.shape == (702, 756, 4)  # 84x78 enlarged 9x (768 // 84)
    assert gray.mode == "gray" and viridis.mode == "colormap" and viridis.colormap == "viridis"
    assert gray.source_pixels_per_pixel == pytest.approx(1 / 9)
    opaque = g[..., 3] == 255
    assert (g[..., 0] == g[..., 1])[opaque].all() and (g[..., 1] == g[..., 2])[opaque].all()
    assert not np.array_equal(g[..., :3], c[..., :3])
    values, invalid = source_read(SLOPE, [1], (78, 84))
    assert np.array_equal(c[..., 3] == 0, enlarge(invalid[0], 9))  # -9999 is transparent
    lo, hi = np.percentile(values[0][~invalid[0]], [2, 98])
    assert viridis.value_range == [(lo, hi)]
    expected = colormaps.lut("viridis")[stretched(values[0], lo, hi)]
    assert np.array_equal(c[..., :3][opaque], enlarge(expected, 9)[opaque])
    assert "viridis" in viridis.legend and "each pixel enlarged to 9x9" in viridis.legend
    reverse = decode(raster_preview(SLOPE, colormap="viridis_r", percentiles=(5, 95), scale_bar=False).png)
    assert not np.array_equal(reverse[..., :3], c[..., :3])


def test_float_nan_south_up_is_flipped_north_up() -> None:
    r = raster_preview(FLOAT_NAN)
    img = decode(r.png)
    assert img.shape == (512, 768, 4)  # 3x2 enlarged 256x
    values, invalid = source_read(FLOAT_NAN, [1], (2, 3))
    # The geotransform has +100 pixel height: row 0 is the south, so the image shows it at the bottom.
    assert np.array_equal(img[..., 3] == 0, enlarge(invalid[0][::-1], 256))
    lo, hi = np.percentile(values[0][~invalid[0]], [2, 98])
    assert r.value_range == [(lo, hi)]
    assert np.array_equal(img[::256, ::256, 0][~invalid[0][::-1]], stretched(values[0], lo, hi)[::-1][~invalid[0][::-1]])
    assert r.extent == (0, 0, 300, 200) and r.crs is None and "north up" in r.legend
    assert r.scale_bar is None and "No scale bar" in r.legend  # no CRS: no ground unit


@pytest.mark.parametrize(
    "path, bands, mode",
    [
        (RGB, [1, 2, 3], "rgb"),
        (str(R / "shade.tif"), [1], "gray"),
        (SLOPE, [1], "gray"),
        (FLOAT_NAN, [1], "gray"),
        (GOES, [1, 2, 3], "rgb"),
        (str(R / "demo.jpg"), [1, 2, 3], "rgb"),
        (str(R / "gadas-export.png"), [1, 2, 3], "rgb"),
        (SRTM, [1], "gray"),
        (H5, [1], "gray"),
        (str(R / "test_esri_wkt.tif"), [1], "gray"),
        (str(R / "rgb4.tif"), [1, 2, 3], "rgb"),
    ],
)
def test_every_test_raster_previews_with_its_mask(path: str, bands: list[int], mode: str) -> None:
    r = raster_preview(path, max_size=300, scale_bar=False)
    img = decode(r.png)
    assert img.shape == (r.height, r.width, 4) and r.mode == mode and r.bands_used == bands
    with rasterio.open(path) as ds:
        w, h = ds.width, ds.height
        flip = not ds.transform.is_identity and ds.transform.e > 0
        dataset_mask = ds.dataset_mask(out_shape=preview_shape(w, h, 300)[1::-1], resampling=Resampling.nearest)
    rw, rh, k = preview_shape(w, h, 300)
    assert (r.width, r.height) == (rw * k, rh * k)
    assert max(r.width, r.height) == 300 if max(w, h) > 300 else k == max(1, 300 // max(w, h))
    _, invalid = source_read(path, bands, (rh, rw))
    transparent = invalid.all(axis=0)
    if len(bands) == 3:  # GDAL's own dataset mask agrees with ours (any valid band makes a pixel visible)
        assert np.array_equal(transparent, dataset_mask == 0)
    if flip:
        transparent = transparent[::-1]
    assert np.array_equal(img[..., 3] == 0, enlarge(transparent, k))
    assert set(np.unique(img[..., 3])) <= {0, 255}
    assert r.legend and json.loads(r.model_dump_json())["legend"] == r.legend and "png" not in r.model_dump()


def test_goes_masks_the_space_around_the_disc() -> None:
    r = raster_preview(GOES)
    img = decode(r.png)
    assert img.shape == (542, 542, 4) and img[0, 0, 3] == 0 and img[271, 271, 3] == 255
    assert r.crs is not None and r.mode == "rgb" and r.warnings == []


def test_not_georeferenced_hdf5_and_containers() -> None:
    r = raster_preview(H5)
    assert (r.width, r.height) == (768, 768) and r.crs is None and r.extent == (0, 0, 3, 3)
    assert "pixel coordinates" in r.legend and r.scale_bar is None and "No scale bar" in r.legend
    with pytest.raises(GdalMcpError) as e:
        raster_preview(str(R / "two-subs.h5"))
    assert e.value.code == "invalid-argument" and "subdataset" in e.value.message


def test_srtm_in_zip_minmax_with_terrain() -> None:
    r = raster_preview(SRTM, stretch="minmax", colormap="terrain", max_size=512)
    img = decode(r.png)
    assert img.shape == (512, 512, 4) and r.crs == "EPSG:4326" and r.mode == "colormap"
    values, invalid = source_read(SRTM, [1], (512, 512))
    assert r.value_range == [(values[0][~invalid[0]].min(), values[0][~invalid[0]].max())]
    assert len(np.unique(img[..., :3].reshape(-1, 3), axis=0)) > 2  # the island shows up
    constant = raster_preview(SRTM)  # 2nd..98th percentile are both sea level
    assert constant.value_range == [(0.0, 0.0)] and "single value 0" in constant.warnings[0]


def test_palette_band_uses_its_colour_table(tmp_path: Path) -> None:
    path = tmp_path / "classes.tif"
    table = {0: (0, 0, 0, 0), 1: (255, 0, 0, 255), 2: (0, 128, 0, 255), 3: (0, 0, 255, 255)}
    data = np.repeat(np.arange(4, dtype=np.uint8), 25).reshape(1, 10, 10)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=10,
        height=10,
        count=1,
        dtype="uint8",
        crs="EPSG:4326",
        transform=from_bounds(0, 0, 10, 10, 10, 10),
        nodata=3,
    ) as ds:
        ds.write(data)
        ds.write_colormap(1, table)
    r = raster_preview(str(path), scale_bar=False)
    img = decode(r.png)
    assert r.mode == "palette" and img.shape == (760, 760, 4) and r.value_range == [(0.0, 2.0)]  # 10x10 enlarged 76x
    small = img[::76, ::76]
    band = data[0]
    assert (small[band == 1] == (255, 0, 0, 255)).all() and (small[band == 2] == (0, 128, 0, 255)).all()
    assert (small[band == 0] == (0, 0, 0, 255)).all()  # (GTiff colour tables keep no alpha)
    assert (small[band == 3][:, 3] == 0).all()  # nodata
    assert "colour table" in r.legend
    stretched_view = raster_preview(str(path), colormap="gray")
    assert stretched_view.mode == "gray"


def test_default_bands_without_colour_interpretation(tmp_path: Path) -> None:
    path = tmp_path / "multi.tif"
    with rasterio.open(path, "w", driver="GTiff", width=8, height=8, count=5, dtype="uint16", photometric="MINISBLACK") as ds:
        ds.write(np.arange(5 * 64, dtype=np.uint16).reshape(5, 8, 8))
        ds.colorinterp = [ColorInterp.gray] + [ColorInterp.undefined] * 4
    r = raster_preview(str(path))
    assert r.mode == "rgb" and r.bands_used == [1, 2, 3] and "5 bands" in r.warnings[0]
    one = raster_preview(str(path), bands=[4], colormap="magma")
    assert one.bands_used == [4] and one.mode == "colormap"
    gray_alpha = tmp_path / "ga.tif"
    with rasterio.open(gray_alpha, "w", driver="GTiff", width=8, height=8, count=2, dtype="uint8", ALPHA="YES") as ds:
        ds.write(np.stack([np.arange(64, dtype=np.uint8).reshape(8, 8), np.tile([0, 255], 32).reshape(8, 8)]))
    ga = raster_preview(str(gray_alpha))
    img = decode(ga.png)
    assert ga.bands_used == [1] and ga.warnings == [] and (img[::96, ::96, 3] == 0).sum() == 32
    on_rgb = raster_preview(RGB, colormap="viridis")  # a colormap on an RGB raster: its first band
    assert on_rgb.bands_used == [1] and on_rgb.mode == "colormap" and "band 1 of 3" in on_rgb.warnings[0]


def test_bbox_reads_only_its_window_and_reports_its_extent() -> None:
    bbox = (200000, 2700000, 260000, 2760000)
    r = raster_preview(RGB, bbox=bbox, max_size=128)
    with rasterio.open(RGB) as ds:
        win = bbox_window(ds, bbox)
        expected = ds.window_bounds(win)
    assert r.window == (int(win.col_off), int(win.row_off), int(win.width), int(win.height))
    assert r.extent == pytest.approx(expected) and max(r.width, r.height) == 128
    img = decode(r.png)
    values, invalid = source_read(RGB, [1], (r.height, r.width), window=win)
    lo, hi = np.percentile(values[0][~invalid[0]], [2, 98])
    assert r.value_range[0] == (lo, hi)
    assert r.data_range[0] is not None and r.data_range[0][0] <= lo and r.data_range[0][1] >= hi
    ll = transform_bounds("EPSG:32618", "EPSG:4326", *bbox)
    r2 = raster_preview(RGB, bbox=ll, bbox_crs="EPSG:4326", max_size=128)
    assert r2.extent[0] <= bbox[0] + 300 and r2.extent[2] >= bbox[2] - 300
    with pytest.raises(GdalMcpError) as e:
        raster_preview(RGB, bbox=(0, 0, 1, 1))
    assert e.value.code == "invalid-argument" and "does not intersect" in e.value.message
    assert img.shape[2] == 4


def test_dst_gets_the_same_png(tmp_path: Path) -> None:
    dst = tmp_path / "look.png"
    r = raster_preview(SLOPE, dst=str(dst), colormap="rdylgn")
    assert dst.read_bytes() == r.png and r.dst == str(dst)
    with rasterio.open(dst) as ds:
        assert ds.count == 4 and ds.tags()["Description"] == r.legend


@pytest.mark.parametrize(
    "kwargs, code, text",
    [
        ({"max_size": 0}, "invalid-argument", "max_size"),
        ({"max_size": 5000}, "invalid-argument", "4096"),
        ({"bands": [1, 2]}, "invalid-argument", "one band"),
        ({"bands": [4]}, "invalid-argument", "do not exist"),
        ({"colormap": "jet"}, "invalid-argument", "viridis"),
        ({"colormap": "viridis", "bands": [1, 2, 3]}, "invalid-argument", "single band"),
        ({"percentiles": (98, 2)}, "invalid-argument", "low < high"),
        ({"percentiles": (2,)}, "invalid-argument", "two numbers"),
        ({"stretch": "log"}, "invalid-argument", "percentile"),
        ({"bbox_crs": "EPSG:4326"}, "invalid-argument", "without bbox"),
    ],
)
def test_raster_argument_errors(kwargs: dict, code: str, text: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        raster_preview(RGB, **kwargs)
    assert e.value.code == code and text in e.value.message


def test_decimated_previews_read_the_overviews(tmp_path: Path) -> None:
    path = tmp_path / "ovr.tif"
    with rasterio.open(path, "w", driver="GTiff", width=1024, height=1024, count=1, dtype="uint8", tiled=True) as ds:
        ds.write(np.full((1, 1024, 1024), 10, np.uint8))
        ds.build_overviews([2, 4, 8], Resampling.nearest)
    with rasterio.open(path, "r+") as ds:  # the base changes, the overviews keep the old value
        ds.write(np.full((1, 1024, 1024), 200, np.uint8))
    assert raster_preview(str(path), max_size=128).value_range == [(10.0, 10.0)]
    assert raster_preview(str(path), max_size=1024).value_range == [(200.0, 200.0)]


def test_huge_raster_is_read_decimated_quickly_in_bounded_memory(tmp_path: Path) -> None:
    path = huge_vrt(tmp_path / "huge.vrt", size=20000)  # 400 MB if it were read at full resolution
    tracemalloc.start()
    try:
        t = time.perf_counter()
        r = raster_preview(str(path))
        elapsed = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (r.width, r.height) == (768, 768) and r.source_pixels_per_pixel == pytest.approx(20000 / 768)
    assert elapsed < 10 and peak < 64 * 1024 * 1024
    assert decode(r.png).shape == (768, 768, 4)


# ---------------------------------------------------------------------------------------------- vectors


def pixel(r, x: float, y: float) -> tuple[int, int]:
    """(row, col) of a map coordinate in a vector preview."""
    col, row = ~from_bounds(*r.extent, r.width, r.height) @ (x, y)
    return int(row), int(col)


def blend(hex_colour: str) -> np.ndarray:
    c = np.array(colormaps.hex_to_rgb(hex_colour), dtype=np.float32)
    return np.rint(np.float32(255) * (1 - np.float32(vector_mod.FILL_ALPHA)) + c * np.float32(vector_mod.FILL_ALPHA))


def test_polygon_is_filled_inside_and_background_outside() -> None:
    r = vector_preview(BOX)
    img = decode(r.png)
    assert r.mode == "vector" and r.features == 1 and r.crs == "EPSG:32618"
    # box.shp spans 75000 x 50000 m: square pixels keep the 3:2 shape
    assert img.shape == (512, 768, 4) and (img[..., 3] == 255).all()
    inside = img[pixel(r, 212500, 2725000)][:3]
    assert np.array_equal(inside, blend(vector_mod.SINGLE_COLOUR))
    assert tuple(img[pixel(r, 175000 - 500, 2700000 - 500)][:3]) == WHITE
    edge = img[pixel(r, 175000, 2725000)][:3]  # the outline is darker than the fill
    assert edge.sum() < inside.sum()
    assert r.extent[0] < 175000 and r.extent[2] > 250000 and "EPSG:32618" in r.legend


def test_color_by_category_gives_each_continent_its_colour() -> None:
    r = vector_preview(NE, color_by="continent")
    img = decode(r.png)
    assert max(r.width, r.height) == 768 and r.features == 177
    cats = r.categories
    assert cats is not None and len(cats) == 8 and cats["Africa"] != cats["South America"]
    africa = img[pixel(r, 20, 5)][:3]  # Central African Republic / DRC
    brazil = img[pixel(r, -50, -10)][:3]
    assert np.array_equal(africa, blend(cats["Africa"])) and np.array_equal(brazil, blend(cats["South America"]))
    assert tuple(img[pixel(r, -150, 0)][:3]) == WHITE  # Pacific
    assert "Africa = #" in r.legend and "plate carrée" in r.legend


def test_color_by_number_uses_viridis_over_the_value_range() -> None:
    r = vector_preview(NE, color_by="pop_est")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, _, fields = pyogrio.raw.read(NE, columns=["pop_est"], read_geometry=False)
    pop = fields[0].astype(np.float64)
    assert r.value_range == [(pop.min(), pop.max())] and r.colormap == "viridis"
    img = decode(r.png)
    china = img[pixel(r, 105, 35)][:3]
    lut = colormaps.lut("viridis")
    expected = lut[int(np.rint((1379302771 - pop.min()) * 255 / (pop.max() - pop.min())))]
    assert np.array_equal(china, blend(colormaps.rgb_to_hex(expected)))
    assert "numeric" in r.legend and "viridis" in r.legend


def test_many_text_values_keep_the_most_frequent_and_grey_the_rest() -> None:
    r = vector_preview(NE, color_by="name")
    assert r.categories is not None and len(r.categories) == 12 and r.categories["(other)"] == colormaps.OTHER
    assert "177 distinct values" in r.warnings[0]


def test_where_matching_nothing_and_empty_layers_give_blank_images() -> None:
    r = vector_preview(NE, where="continent = 'Atlantis'", scale_bar=False)
    img = decode(r.png)
    assert r.features == 0 and "where" in r.warnings[0] and "blank" in r.warnings[0]
    assert (img[..., :3] == 255).all() and (img[..., 3] == 255).all() and max(img.shape[:2]) == 768
    empty = vector_preview(str(V / "test_gpx.gpx"), layer="routes", max_size=64, scale_bar=False)
    assert empty.features == 0 and "blank" in empty.warnings[0] and (decode(empty.png)[..., :3] == 255).all()


def test_where_zooms_to_the_matching_features() -> None:
    r = vector_preview(NE, where="name = 'Australia'", color_by="continent")
    img = decode(r.png)
    assert r.features == 1 and r.categories == {"Oceania": colormaps.QUALITATIVE[0]}
    assert 110 < r.extent[0] < 114 and 153 < r.extent[2] < 157
    assert np.array_equal(img[pixel(r, 134, -25)][:3], blend(colormaps.QUALITATIVE[0]))


def test_batches_are_burnt_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = vector_preview(NE, color_by="continent")
    sizes: list[int] = []
    real = vector_mod.geometries

    def spy(batch):
        sizes.append(batch.num_rows)
        return real(batch)

    monkeypatch.setattr(vector_mod, "BATCH_SIZE", 16)
    monkeypatch.setattr(vector_mod, "geometries", spy)
    batched = vector_preview(NE, color_by="continent")
    assert max(sizes) == 16 and sum(sizes) == 177
    assert np.array_equal(decode(batched.png), decode(whole.png))


def test_mixed_geometries_polygon_line_and_point() -> None:
    r = vector_preview(str(V / "trio.geojson"))
    img = decode(r.png)
    assert r.features == 3 and img.shape[1] == 768
    colours = {tuple(p) for p in img[..., :3].reshape(-1, 3)}
    fill = tuple(blend(vector_mod.SINGLE_COLOUR).astype(int))
    assert WHITE in colours and fill in colours and colormaps.hex_to_rgb(vector_mod.SINGLE_COLOUR) in colours
    assert "points as 5 px dots" in r.legend and "lines" in r.legend and "polygons" in r.legend


@pytest.mark.parametrize(
    "path, layer, geometry",
    [
        (str(V / "test_gpx.gpx"), "tracks", "line"),
        (str(V / "test_gpx.gpx"), "track_points", "point"),
        (str(V / "sample.osm.pbf"), "points", "point"),
        (str(V / "sample.osm.pbf"), "lines", "line"),
        (str(V / "sample.osm.pbf"), "multipolygons", "polygon"),
        (str(V / "line_zm.gpkg"), None, "line"),
        (str(V / "polygons.shp"), None, "polygon"),
        (str(V / "points.shp"), None, "point"),
        (str(V / "lines.shp"), None, "line"),
    ],
)
def test_every_test_layer_draws(path: str, layer: str | None, geometry: str) -> None:
    r = vector_preview(path, layer=layer, max_size=256)
    img = decode(r.png)
    assert max(img.shape[:2]) == 256 and img.shape[2] == 4 and r.features and r.features > 0
    ink = (img[..., :3] != 255).any(axis=2)
    assert 0 < ink.mean() < 1 and r.warnings == []
    assert {"polygon": "polygons", "line": "lines", "point": "points"}[geometry] in r.legend


def test_points_are_dots_at_their_coordinates() -> None:
    r = vector_preview(str(V / "points.shp"))
    img = decode(r.png)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, wkb, _ = pyogrio.raw.read(str(V / "points.shp"))
    dot = colormaps.hex_to_rgb(vector_mod.SINGLE_COLOUR)
    for p in shapely.from_wkb(wkb):
        row, col = pixel(r, p.x, p.y)
        assert tuple(img[row, col][:3]) == dot
        assert tuple(img[row + 2, col][:3]) == dot and tuple(img[row + 4, col][:3]) == WHITE


def test_bbox_in_another_crs_becomes_the_extent() -> None:
    bbox = (-10, 35, 40, 70)
    r = vector_preview(NE, bbox=bbox, bbox_crs="EPSG:4326", max_size=300)
    assert r.extent[0] == pytest.approx(-10) and r.extent[2] == pytest.approx(40)
    assert r.extent[1] <= 35 and r.extent[3] >= 70 and r.width == 300
    africa = vector_preview(NE, bbox=(-20, -40, 55, 40), color_by="continent")  # categories of what is drawn
    assert africa.categories is not None and set(africa.categories) == {"Africa", "Asia", "Europe"}
    assert africa.extent == pytest.approx((-20, -40, 55, 40)) and africa.features == 75
    box = vector_preview(BOX, bbox=(170000, 2690000, 260000, 2760000), max_size=90)
    assert (box.width, box.height) == (90, 70) and box.features == 1
    assert box.extent == pytest.approx((170000, 2690000, 260000, 2760000))
    with pytest.raises(GdalMcpError) as e:
        vector_preview(NE, bbox_crs="EPSG:4326")
    assert e.value.code == "invalid-argument"


def test_nulls_other_values_and_features_without_geometry(tmp_path: Path) -> None:
    path = tmp_path / "mixed.geojson"
    feats = [
        {"type": "Feature", "properties": {"kind": "a"}, "geometry": {"type": "Point", "coordinates": [0, 0]}},
        {"type": "Feature", "properties": {"kind": None}, "geometry": {"type": "Point", "coordinates": [10, 10]}},
        {"type": "Feature", "properties": {"kind": "b"}, "geometry": None},
        {
            "type": "Feature",
            "properties": {"kind": "b"},
            "geometry": {
                "type": "GeometryCollection",
                "geometries": [
                    {"type": "Point", "coordinates": [5, 5]},
                    {"type": "LineString", "coordinates": [[0, 10], [10, 0]]},
                ],
            },
        },
    ]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    r = vector_preview(str(path), color_by="kind", max_size=100)
    assert r.categories == {"a": colormaps.QUALITATIVE[0], "b": colormaps.QUALITATIVE[1], "(null)": colormaps.NULL}
    assert r.features == 3 and any("no geometry" in w for w in r.warnings)
    img = decode(r.png)
    assert tuple(img[pixel(r, 10, 10)][:3]) == colormaps.hex_to_rgb(colormaps.NULL)
    assert tuple(img[pixel(r, 0, 0)][:3]) == colormaps.hex_to_rgb(colormaps.QUALITATIVE[0])
    assert tuple(img[pixel(r, 5, 5)][:3]) == colormaps.hex_to_rgb(colormaps.QUALITATIVE[1])


@pytest.mark.parametrize(
    "kwargs, code, text",
    [
        ({"path": str(V / "test_gpx.gpx")}, "invalid-argument", "track_points"),
        ({"path": NE, "layer": "nope"}, "not-found", "naturalearth_lowres"),
        ({"path": NE, "color_by": "colour"}, "not-found", "continent"),
        ({"path": NE, "where": "no_such_field = 1"}, "invalid-argument", "where"),
        ({"path": NE, "max_size": 4097}, "invalid-argument", "max_size"),
        ({"path": NE, "bbox": (10, 10, 0, 0)}, "invalid-argument", "minx < maxx"),
    ],
)
def test_vector_argument_errors(kwargs: dict, code: str, text: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        vector_preview(**kwargs)
    assert e.value.code == code and text in e.value.message


def test_vector_dst(tmp_path: Path) -> None:
    dst = tmp_path / "map.png"
    r = vector_preview(BOX, dst=str(dst), max_size=50)
    assert dst.read_bytes() == r.png and decode(r.png).shape == (34, 50, 4)
