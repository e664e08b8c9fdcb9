"""Which source pixels a clip keeps: a bbox keeps gdal_translate -projwin's window (the GDAL CLI is the reference),
all_touched=true every pixel the bbox touches (analytic), a geometry or mask the pixels whose centre lies within its
bounding box (analytic, and rasterio.mask for the values)."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
import rasterio.mask
import shapely
from rasterio.transform import from_origin
from rasterio.windows import Window

from gdal_mcp.engine.raster.clip import clip
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli

# A 40 x 30 grid of 10 m x 7.5 m pixels (not square, so rows and columns cannot be confused), every value different.
X0, Y0, DX, DY = 500000.0, 4000000.0, 10.0, 7.5
WIDTH, HEIGHT = 40, 30


def grid(tmp_path, *, crs: str = "EPSG:32632", nodata: float | None = None, dtype: str = "int16") -> str:
    path = tmp_path / f"grid_{crs.replace(':', '')}_{dtype}.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=WIDTH,
        height=HEIGHT,
        count=2,
        dtype=dtype,
        crs=crs,
        transform=from_origin(X0, Y0, DX, DY),
        nodata=nodata,
    ) as ds:
        values = np.arange(WIDTH * HEIGHT).reshape(HEIGHT, WIDTH) + 1
        ds.write(np.stack([values, -values]).astype(dtype))
    return str(path)


def box(c_min: float, r_min: float, c_max: float, r_max: float) -> tuple[float, float, float, float]:
    """A bbox given by fractional pixel coordinates of the grid (columns c_min..c_max, rows r_min..r_max)."""
    return (X0 + c_min * DX, Y0 - r_max * DY, X0 + c_max * DX, Y0 - r_min * DY)


def projwin(src: str, bbox, out, *extra: str) -> None:
    minx, miny, maxx, maxy = bbox
    gdal_cli("gdal_translate", "-projwin", repr(minx), repr(maxy), repr(maxx), repr(miny), *extra, src, str(out))


def read(path):
    with rasterio.open(path) as ds:
        return ds.read(), ds.transform


# Fractional pixel coordinates (c_min, r_min, c_max, r_max): aligned, and off by fractions on each side, including
# sizes of exactly x.5 pixels (GDAL rounds them up) and offsets just under a pixel edge (GDAL's 0.001 tolerance).
INSIDE = [
    (2, 3, 12, 9),
    (2.3, 3.2, 12.4, 9.1),
    (2.6, 3.7, 12.2, 9.9),
    (2.9, 3.5, 7.4, 9.0),
    (0.5, 0.5, 3.0, 3.0),
    (4.9995, 6.9995, 9.4, 11.6),
    (10.25, 4.75, 35.75, 25.25),
    (0.0, 0.0, 40.0, 30.0),
    (0.4, 1.4, 3.6, 5.6),  # columns 0..2: column 3, whose centre (3.5) is inside, is dropped
]


@pytest.mark.parametrize("pixels", INSIDE)
def test_bbox_equals_gdal_translate_projwin(tmp_path, pixels) -> None:
    src = grid(tmp_path)
    bbox = box(*pixels)
    projwin(src, bbox, tmp_path / "ref.tif")
    result, warnings = clip(src, str(tmp_path / "ours.tif"), bbox=bbox)
    theirs, their_t = read(tmp_path / "ref.tif")
    ours, our_t = read(tmp_path / "ours.tif")
    assert ours.shape == theirs.shape and our_t.almost_equals(their_t, precision=1e-9)
    assert np.array_equal(ours, theirs) and warnings == []
    # The window reported is where gdal_translate's output lies in the source grid.
    w = result.window
    assert (w.col_off, w.row_off) == (round((their_t.c - X0) / DX), round((Y0 - their_t.f) / DY))
    assert (w.width, w.height) == (theirs.shape[2], theirs.shape[1])
    assert (result.summary.width, result.summary.height) == (w.width, w.height)


# Partly outside: gdal_translate pads the outside with 0; the clip keeps the part on the raster (and warns).
OUTSIDE = [(-3.4, -2.2, 6.3, 5.8), (30.6, 20.2, 44.9, 33.3), (-1.0, 10.0, 41.0, 12.0)]


@pytest.mark.parametrize("pixels", OUTSIDE)
def test_bbox_partly_outside_is_gdal_translate_limited_to_the_raster(tmp_path, pixels) -> None:
    src = grid(tmp_path)
    bbox = box(*pixels)
    projwin(src, bbox, tmp_path / "ref.tif")
    result, warnings = clip(src, str(tmp_path / "ours.tif"), bbox=bbox)
    theirs, their_t = read(tmp_path / "ref.tif")
    ours, our_t = read(tmp_path / "ours.tif")
    # Where gdal_translate's window lies in the source grid, and its part on the raster.
    g_col, g_row = round((their_t.c - X0) / DX), round((Y0 - their_t.f) / DY)
    c0, r0 = max(0, g_col), max(0, g_row)
    c1, r1 = min(WIDTH, g_col + theirs.shape[2]), min(HEIGHT, g_row + theirs.shape[1])
    on_raster = theirs[:, r0 - g_row : r1 - g_row, c0 - g_col : c1 - g_col]
    assert (result.window.col_off, result.window.row_off, result.window.width, result.window.height) == (c0, r0, c1 - c0, r1 - r0)
    assert np.array_equal(ours, on_raster)
    assert our_t.almost_equals(from_origin(X0 + c0 * DX, Y0 - r0 * DY, DX, DY), precision=1e-9)
    # gdal_translate's extra pixels are its padding (0), never data.
    padding = np.ones(theirs.shape[1:], dtype=bool)
    padding[r0 - g_row : r1 - g_row, c0 - g_col : c1 - g_col] = False
    assert padding.any() and (theirs[:, padding] == 0).all()
    assert len(warnings) == 1 and "past the raster's edge" in warnings[0] and "no padding" in warnings[0]


def test_bbox_in_another_crs_equals_projwin_srs(tmp_path) -> None:
    """A Web Mercator raster and a lon/lat bbox: Mercator keeps meridians and parallels straight, so the densified
    envelope we reproject and the two corners gdal_translate -projwin_srs reprojects are the same box."""
    src = tmp_path / "merc.tif"
    with rasterio.open(
        src,
        "w",
        driver="GTiff",
        width=200,
        height=150,
        count=1,
        dtype="uint16",
        crs="EPSG:3857",
        transform=from_origin(1000000.0, 6000000.0, 300.0, 300.0),
    ) as ds:
        ds.write(np.arange(200 * 150, dtype="uint16").reshape(1, 150, 200))
    for bbox in [(9.1, 47.1, 9.43, 47.29), (9.0, 47.09, 9.5, 47.33), (9.05, 47.2, 9.2, 47.3)]:
        minx, miny, maxx, maxy = bbox
        gdal_cli(
            "gdal_translate",
            "-projwin",
            repr(minx),
            repr(maxy),
            repr(maxx),
            repr(miny),
            "-projwin_srs",
            "EPSG:4326",
            str(src),
            str(tmp_path / "ref.tif"),
        )
        clip(str(src), str(tmp_path / "ours.tif"), bbox=bbox, bbox_crs="EPSG:4326")
        theirs, their_t = read(tmp_path / "ref.tif")
        ours, our_t = read(tmp_path / "ours.tif")
        assert ours.shape == theirs.shape and our_t.almost_equals(their_t, precision=1e-6), bbox
        assert np.array_equal(ours, theirs), bbox
        (tmp_path / "ref.tif").unlink()
        (tmp_path / "ours.tif").unlink()


@pytest.mark.parametrize(
    ("pixels", "window"),
    [
        # (c_min, r_min, c_max, r_max) -> every pixel whose area the bbox overlaps: floor(min) .. ceil(max) - 1
        ((2.3, 3.2, 12.4, 9.1), (2, 3, 11, 7)),
        ((2, 3, 12, 9), (2, 3, 10, 6)),  # edges on pixel edges take no neighbour
        ((2.999, 3.001, 3.001, 3.999), (2, 3, 2, 1)),
        ((-3.4, -2.2, 6.3, 5.8), (0, 0, 7, 6)),
    ],
)
def test_all_touched_bbox_keeps_every_touched_pixel(tmp_path, pixels, window) -> None:
    src = grid(tmp_path)
    result, _ = clip(src, str(tmp_path / "t.tif"), bbox=box(*pixels), all_touched=True)
    w = result.window
    assert (w.col_off, w.row_off, w.width, w.height) == window
    with rasterio.open(src) as ds:
        expected = ds.read(window=Window(*window))
    assert np.array_equal(read(tmp_path / "t.tif")[0], expected)


def test_default_keeps_pixels_whose_centre_is_outside_as_gdal_does(tmp_path) -> None:
    """The documented example: columns 2.6 to 7.4 keep columns 2..6 (the pixel holding the corner, then 4.8 rounded
    to 5 columns); column 2's centre (2.5) lies outside, column 7's (7.5) too and it is dropped."""
    src = grid(tmp_path)
    result, _ = clip(src, str(tmp_path / "d.tif"), bbox=box(2.6, 3.0, 7.4, 4.0))
    assert (result.window.col_off, result.window.width) == (2, 5)
    result, _ = clip(src, str(tmp_path / "t.tif"), bbox=box(2.6, 3.0, 7.4, 4.0), all_touched=True)
    assert (result.window.col_off, result.window.width) == (2, 6)


def test_bbox_thinner_than_half_a_pixel(tmp_path) -> None:
    src = grid(tmp_path)
    with pytest.raises(GdalMcpError) as e:
        clip(src, str(tmp_path / "x.tif"), bbox=box(2.1, 3.0, 2.4, 6.0))
    assert e.value.code == "invalid-argument" and "all_touched=true" in e.value.message
    result, _ = clip(src, str(tmp_path / "x.tif"), bbox=box(2.1, 3.0, 2.4, 6.0), all_touched=True)
    assert (result.window.col_off, result.window.row_off, result.window.width, result.window.height) == (2, 3, 1, 3)
    with pytest.raises(GdalMcpError) as e:
        clip(src, str(tmp_path / "y.tif"), bbox=box(41, 3, 45, 6))
    assert e.value.code == "invalid-argument" and "does not intersect" in e.value.message


def test_crop_false_blanks_outside_the_same_window(tmp_path) -> None:
    src = grid(tmp_path, nodata=-32768)
    bbox = box(2.3, 3.2, 12.4, 9.1)
    projwin(src, bbox, tmp_path / "ref.tif")
    result, _ = clip(src, str(tmp_path / "f.tif"), bbox=bbox, crop=False)
    w = result.window
    data, transform = read(tmp_path / "f.tif")
    theirs, _ = read(tmp_path / "ref.tif")
    assert data.shape == (2, HEIGHT, WIDTH) and transform == from_origin(X0, Y0, DX, DY)
    inside = (slice(None), slice(w.row_off, w.row_off + w.height), slice(w.col_off, w.col_off + w.width))
    assert np.array_equal(data[inside], theirs)
    data[inside] = -32768
    assert (data == -32768).all()


# ---------------------------------------------------------------------------------------------- shapes


def centre_window(c_min: float, r_min: float, c_max: float, r_max: float) -> tuple[int, int, int, int]:
    """Pixels whose centre (c + 0.5, r + 0.5) lies within the bounds, by enumeration."""
    cols = [c for c in range(WIDTH) if c_min <= c + 0.5 <= c_max]
    rows = [r for r in range(HEIGHT) if r_min <= r + 0.5 <= r_max]
    return cols[0], rows[0], len(cols), len(rows)


@pytest.mark.parametrize("pixels", [(2.3, 3.2, 12.4, 9.1), (2.6, 3.7, 12.6, 9.9), (2, 3, 12, 9)])
def test_geometry_window_holds_the_pixels_whose_centre_is_inside(tmp_path, pixels) -> None:
    """A rectangle: the window is exactly the pixels rasterio.mask keeps, so no kept pixel is cut off and no row or
    column of the output is all nodata."""
    src = grid(tmp_path, nodata=-32768)
    rect = shapely.box(*box(*pixels))
    result, _ = clip(src, str(tmp_path / "g.tif"), geometry=shapely.geometry.mapping(rect), geometry_crs="EPSG:32632")
    w = result.window
    assert (w.col_off, w.row_off, w.width, w.height) == centre_window(*pixels)
    with rasterio.open(src) as ds:
        full, _ = rasterio.mask.mask(ds, [rect], crop=False, nodata=-32768)
    kept_rows, kept_cols = np.nonzero(full[0] != -32768)
    assert (kept_cols.min(), kept_rows.min(), np.ptp(kept_cols) + 1, np.ptp(kept_rows) + 1) == (
        w.col_off,
        w.row_off,
        w.width,
        w.height,
    )
    ours, _ = read(tmp_path / "g.tif")
    assert np.array_equal(ours, full[:, w.row_off : w.row_off + w.height, w.col_off : w.col_off + w.width])


def test_geometry_all_touched_window_is_every_touched_pixel(tmp_path) -> None:
    src = grid(tmp_path, nodata=-32768)
    tri = shapely.Polygon([box(2.3, 3.2, 12.4, 9.1)[:2], (X0 + 12.4 * DX, Y0 - 9.1 * DY), (X0 + 12.4 * DX, Y0 - 3.2 * DY)])
    result, _ = clip(
        src, str(tmp_path / "t.tif"), geometry=shapely.geometry.mapping(tri), geometry_crs="EPSG:32632", all_touched=True
    )
    w = result.window
    assert (w.col_off, w.row_off, w.width, w.height) == (2, 3, 11, 7)
    with rasterio.open(src) as ds:
        full, _ = rasterio.mask.mask(ds, [tri], crop=False, all_touched=True, nodata=-32768)
    ours, _ = read(tmp_path / "t.tif")
    assert np.array_equal(ours, full[:, 3:10, 2:13])
    assert np.count_nonzero(full[0] != -32768) == np.count_nonzero(ours[0] != -32768)  # no touched pixel cut off


def test_geometry_between_pixel_centres(tmp_path) -> None:
    """A polygon inside one pixel, away from its centre: no pixel has its centre inside, so nothing to keep but
    with all_touched (then exactly that pixel)."""
    src = grid(tmp_path, nodata=-32768)
    tiny = shapely.geometry.mapping(shapely.box(*box(3.1, 4.1, 3.4, 4.4)))
    with pytest.raises(GdalMcpError) as e:
        clip(src, str(tmp_path / "x.tif"), geometry=tiny, geometry_crs="EPSG:32632")
    assert e.value.code == "invalid-argument" and "all_touched=true" in e.value.message
    result, _ = clip(src, str(tmp_path / "t.tif"), geometry=tiny, geometry_crs="EPSG:32632", all_touched=True)
    assert (result.window.col_off, result.window.row_off, result.window.width, result.window.height) == (3, 4, 1, 1)
    assert read(tmp_path / "t.tif")[0][0, 0, 0] == 4 * WIDTH + 3 + 1
