"""Clipping by box, GeoJSON geometry and vector mask, checked against rasterio.mask and MANIFEST facts."""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import numpy as np
import pytest
import rasterio
import rasterio.mask
import shapely
import shapely.geometry
from rasterio.features import geometry_mask
from rasterio.warp import transform_bounds, transform_geom
from rasterio.windows import Window

import gdal_mcp.engine.raster.clip as clip_module
from gdal_mcp.engine.raster.clip import clip as clip_raster
from gdal_mcp.engine.raster.cog import cog_check
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")
BOX = str(DATA / "vector" / "box.shp")
# MANIFEST: box.shp extent (175000, 2700000)-(250000, 2750000) in EPSG:32618; RGB.byte.tif GT below.
BOX_EXTENT = (175000.0, 2700000.0, 250000.0, 2750000.0)
X0, DX, Y0, DY = 101985.0, 300.0379266750948, 2826915.0, -300.041782729805
BOX_POLYGON = shapely.box(*BOX_EXTENT)
# A quadrilateral over the Bahamas part of RGB.byte.tif, in lon/lat.
LONLAT = {"type": "Polygon", "coordinates": [[[-77.9, 24.0], [-77.2, 23.9], [-76.9, 24.9], [-77.6, 25.1], [-77.9, 24.0]]]}


def clip(*args, **kwargs):
    """The engine's clip as (summary, warnings), for the tests that do not look at the window."""
    result, warnings = clip_raster(*args, **kwargs)
    return result.summary, warnings


def read(path):
    with rasterio.open(path) as ds:
        return ds.read(), ds.transform, ds.nodata, ds.profile, ds.colorinterp


def box_window() -> Window:
    """The pixels of RGB.byte.tif whose centre lies inside box.shp, computed from the MANIFEST numbers: the box
    spans columns 243.35..493.33 and rows 256.35..422.99, so columns 243..492 and rows 256..422."""
    minx, miny, maxx, maxy = BOX_EXTENT
    col0, col1 = math.ceil((minx - X0) / DX - 0.5), math.floor((maxx - X0) / DX - 0.5) + 1
    row0, row1 = math.ceil((maxy - Y0) / DY - 0.5), math.floor((miny - Y0) / DY - 0.5) + 1
    return Window(col0, row0, col1 - col0, row1 - row0)


def projwin_window(bbox) -> Window:
    """gdal_translate -projwin's window of `bbox` on RGB.byte.tif (apps/gdal_translate_lib.cpp's arithmetic)."""
    minx, miny, maxx, maxy = bbox
    col0, row0 = math.floor((minx - X0) / DX + 0.001), math.floor((maxy - Y0) / DY + 0.001)
    return Window(col0, row0, math.floor((maxx - minx) / DX + 0.5), math.floor((miny - maxy) / DY + 0.5))


def test_mask_file_crops_to_the_pixels_whose_centre_is_in_the_box(tmp_path) -> None:
    out = tmp_path / "box.tif"
    result, _ = clip_raster(RGB, str(out), mask=BOX)
    summary = result.summary
    win = box_window()
    assert (summary.width, summary.height) == (win.width, win.height) == (250, 167)
    assert (result.window.col_off, result.window.row_off, result.window.width, result.window.height) == (243, 256, 250, 167)
    b = summary.bounds
    assert b.left == pytest.approx(X0 + win.col_off * DX) and b.right == pytest.approx(X0 + (win.col_off + win.width) * DX)
    assert b.top == pytest.approx(Y0 + win.row_off * DY) and b.bottom == pytest.approx(Y0 + (win.row_off + win.height) * DY)
    # The first and last columns' centres are inside the box; the next column's centre (493.5) is not.
    assert b.left + DX / 2 >= BOX_EXTENT[0] > b.left - DX / 2 and b.right - DX / 2 <= BOX_EXTENT[2] < b.right + DX / 2
    assert summary.resolution == pytest.approx((DX, -DY))
    assert (summary.driver, summary.count, summary.dtype, summary.crs, summary.nodata) == ("GTiff", 3, "uint8", "EPSG:32618", 0.0)
    data, transform, _, _, colorinterp = read(out)
    with rasterio.open(RGB) as ds:
        source = ds.read(window=win)
        assert transform == ds.window_transform(win)
        assert colorinterp == ds.colorinterp
    outside = geometry_mask([BOX_POLYGON], out_shape=data.shape[1:], transform=transform)
    assert not outside.any()  # the box is a rectangle: every pixel of the window has its centre inside
    assert np.array_equal(data, source)


def test_mask_file_matches_rasterio_mask(tmp_path) -> None:
    """rasterio.mask crops to the box's bounds snapped outward: one more column on the right (493), all nodata
    because its centre is outside the box; every other pixel is the same."""
    out = tmp_path / "m.tif"
    clip(RGB, str(out), mask=BOX)
    with rasterio.open(RGB) as ds:
        expected, transform = rasterio.mask.mask(ds, [BOX_POLYGON], crop=True)
    data, got_transform, *_ = read(out)
    assert got_transform == transform and expected.shape[2] == data.shape[2] + 1
    assert np.array_equal(data, expected[:, :, :-1]) and (expected[:, :, -1] == 0).all()


def test_many_windows_give_the_same_pixels_and_report_progress(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(clip_module, "WINDOW_PIXELS", 3 * 256 * 16)
    reports: list[tuple[float, str]] = []
    out = tmp_path / "w.tif"
    clip(RGB, str(out), mask=BOX, crop=False, progress=lambda f, m="": reports.append((f, m)))
    with rasterio.open(RGB) as ds:
        expected, _ = rasterio.mask.mask(ds, [BOX_POLYGON], crop=False)
    assert np.array_equal(read(out)[0], expected)
    n = len(reports)
    assert n > 10 and reports[-1] == (1.0, f"clipped window {n}/{n}") and reports[2][1] == f"clipped window 3/{n}"
    assert [f for f, _ in reports] == sorted(f for f, _ in reports)


def test_geojson_in_lonlat_is_reprojected(tmp_path) -> None:
    out = tmp_path / "g.tif"
    summary, _ = clip(RGB, str(out), geometry=LONLAT)
    # GeoJSON edges are straight in lon/lat: densify them before projecting, as the clip does.
    dense = shapely.segmentize(shapely.geometry.shape(LONLAT), 0.01)
    utm = transform_geom("EPSG:4326", "EPSG:32618", shapely.geometry.mapping(dense))
    with rasterio.open(RGB) as ds:
        expected, transform = rasterio.mask.mask(ds, [utm], crop=True)
    data, got_transform, nodata, *_ = read(out)
    assert got_transform == transform and (summary.width, summary.height) == (expected.shape[2], expected.shape[1])
    assert nodata == 0 and np.array_equal(data, expected)
    # The extent is the polygon's projected bounds, snapped outward.
    left, bottom, right, top = shapely.geometry.shape(utm).bounds
    assert summary.bounds.left <= left < summary.bounds.left + DX
    assert summary.bounds.top >= top > summary.bounds.top + DY


def test_geometry_crs_and_feature_wrappers(tmp_path) -> None:
    feature = {"type": "Feature", "properties": {}, "geometry": shapely.geometry.mapping(BOX_POLYGON)}
    a, _ = clip(RGB, str(tmp_path / "a.tif"), geometry={"type": "FeatureCollection", "features": [feature]}, geometry_crs="32618")
    b, _ = clip(RGB, str(tmp_path / "b.tif"), mask=BOX)
    assert a.bounds == b.bounds and np.array_equal(read(tmp_path / "a.tif")[0], read(tmp_path / "b.tif")[0])


def test_bbox_in_another_crs_is_a_pure_window(tmp_path) -> None:
    """The lon/lat bbox becomes the envelope of its densified edges in UTM; then gdal_translate -projwin's window."""
    bbox = (-77.8, 24.1, -77.1, 24.8)
    out = tmp_path / "bb.tif"
    summary, _ = clip(RGB, str(out), bbox=bbox, bbox_crs="EPSG:4326")
    with rasterio.open(RGB) as ds:
        utm = transform_bounds("EPSG:4326", ds.crs, *bbox, densify_pts=21)
        win = projwin_window(utm)
        source = ds.read(window=win)
        expected_transform = ds.window_transform(win)
    data, transform, nodata, *_ = read(out)
    assert transform == expected_transform and data.shape == source.shape
    assert np.array_equal(data, source)  # no masking: source zeros stay, nothing else set to nodata
    assert nodata == 0 and summary.crs == "EPSG:32618"


def test_bbox_in_the_raster_crs_by_default(tmp_path) -> None:
    summary, _ = clip(RGB, str(tmp_path / "b.tif"), bbox=BOX_EXTENT)
    win = projwin_window(BOX_EXTENT)
    assert (win.col_off, win.row_off, win.width, win.height) == (243, 256, 250, 167)
    with rasterio.open(RGB) as ds:
        source = ds.read(window=win)
    assert (summary.width, summary.height) == (win.width, win.height)
    assert np.array_equal(read(tmp_path / "b.tif")[0], source)


def test_bbox_without_crop_blanks_outside_the_window(tmp_path) -> None:
    clip(RGB, str(tmp_path / "b.tif"), bbox=BOX_EXTENT, crop=False)
    data = read(tmp_path / "b.tif")[0]
    win = projwin_window(BOX_EXTENT)
    with rasterio.open(RGB) as ds:
        source = ds.read()
    rows = slice(win.row_off, win.row_off + win.height)
    cols = slice(win.col_off, win.col_off + win.width)
    assert data.shape == (3, 718, 791)
    assert np.array_equal(data[:, rows, cols], source[:, rows, cols])
    data[:, rows, cols] = 0
    assert not data.any()


def test_all_touched_keeps_more_pixels(tmp_path) -> None:
    normal, _ = clip(RGB, str(tmp_path / "n.tif"), geometry=LONLAT, crop=False)
    touched, _ = clip(RGB, str(tmp_path / "t.tif"), geometry=LONLAT, crop=False, all_touched=True)
    assert (normal.width, normal.height) == (touched.width, touched.height) == (791, 718)
    n, t = read(tmp_path / "n.tif")[0], read(tmp_path / "t.tif")[0]
    assert (t[0] != 0).sum() > (n[0] != 0).sum()
    assert np.array_equal(t[:, n[0] != 0], n[:, n[0] != 0])  # a superset with the same values


def test_crop_false_keeps_the_full_grid(tmp_path) -> None:
    summary, _ = clip(RGB, str(tmp_path / "f.tif"), mask=BOX, crop=False)
    assert (summary.width, summary.height) == (791, 718)
    data, transform, *_ = read(tmp_path / "f.tif")
    with rasterio.open(RGB) as ds:
        assert transform == ds.transform
        expected, _ = rasterio.mask.mask(ds, [BOX_POLYGON], crop=False)
    assert np.array_equal(data, expected)


def test_mask_where_selects_features_and_reprojects(tmp_path) -> None:
    world = str(DATA / "vector" / "naturalearth_lowres.shp")
    summary, _ = clip(RGB, str(tmp_path / "bs.tif"), mask=world, mask_where="name = 'Bahamas'")
    assert summary.width < 791 and summary.height < 718
    data = read(tmp_path / "bs.tif")[0]
    assert 0 < (data[0] != 0).sum() < data[0].size
    with pytest.raises(GdalMcpError) as e:
        clip(RGB, str(tmp_path / "x.tif"), mask=world, mask_where="name = 'Fiji'")
    assert e.value.code == "invalid-argument" and "does not overlap" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        clip(RGB, str(tmp_path / "x.tif"), mask=world, mask_where="no_such_field = 1")
    assert e.value.code == "invalid-argument" and "mask_where" in e.value.message


def test_cog_output_is_a_valid_cog_and_leaves_no_temporary(tmp_path) -> None:
    out = tmp_path / "c.tif"
    summary, _ = clip(RGB, str(out), geometry=LONLAT, crop=False, format="COG")
    assert summary.driver == "GTiff"
    with rasterio.open(out) as ds:
        assert cog_check(ds) == ([], [])
        assert ds.overviews(1) and ds.colorinterp[:3] == (
            rasterio.enums.ColorInterp.red,
            rasterio.enums.ColorInterp.green,
            rasterio.enums.ColorInterp.blue,
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tif"]
    clip(RGB, str(tmp_path / "g.tif"), geometry=LONLAT, crop=False)
    assert np.array_equal(read(out)[0], read(tmp_path / "g.tif")[0])


def test_nodata_parameter_replaces_source_nodata(tmp_path) -> None:
    summary, _ = clip(RGB, str(tmp_path / "n.tif"), mask=BOX, nodata=255)
    data = read(tmp_path / "n.tif")[0]
    with rasterio.open(RGB) as ds:
        source = ds.read(window=box_window())
    outside = geometry_mask([BOX_POLYGON], out_shape=data.shape[1:], transform=read(tmp_path / "n.tif")[1])
    assert summary.nodata == 255.0
    assert (data[:, outside] == 255).all()
    inside_src, inside_out = source[:, ~outside], data[:, ~outside]
    assert np.array_equal(inside_out[inside_src != 0], inside_src[inside_src != 0])
    assert (inside_out[inside_src == 0] == 255).all()


def test_float_without_nodata_gets_nan(tmp_path) -> None:
    src = tmp_path / "f.tif"
    transform = rasterio.transform.from_origin(0, 10, 1, 1)
    with rasterio.open(
        src, "w", driver="GTiff", width=10, height=10, count=1, dtype="float32", crs="EPSG:32618", transform=transform
    ) as ds:
        ds.write(np.arange(100, dtype="float32").reshape(1, 10, 10) + 1)
    tri = {"type": "Polygon", "coordinates": [[[0, 0], [10.2, 0], [0, 10.2], [0, 0]]]}
    summary, _ = clip(str(src), str(tmp_path / "o.tif"), geometry=tri, geometry_crs="EPSG:32618")
    assert summary.nodata == "nan" and (summary.width, summary.height) == (10, 10)
    data = read(tmp_path / "o.tif")[0][0]
    rows, cols = np.indices((10, 10))
    inside = cols <= rows  # centre (col + 0.5, 9.5 - row) is inside when x + y < 10.2
    assert np.isnan(data[~inside]).all()
    assert np.array_equal(data[inside], (rows * 10 + cols + 1)[inside].astype("float32"))


def test_south_up_raster_bbox(tmp_path) -> None:
    # float_nan.tif: 3x2, GT (0, 100, 0, 0, 0, +100), no CRS, nodata NaN. The bbox spans columns and rows 0.5..1.5:
    # the projwin rule keeps the pixel holding its first corner and one pixel's size; all_touched the four it touches.
    src = str(DATA / "raster" / "float_nan.tif")
    for all_touched, size in ((False, 1), (True, 2)):
        result, _ = clip_raster(src, str(tmp_path / "s.tif"), bbox=(50, 50, 150, 150), all_touched=all_touched)
        assert (result.summary.width, result.summary.height) == (size, size) and result.summary.nodata == "nan"
        assert (result.window.col_off, result.window.row_off) == (0, 0)
        with rasterio.open(src) as ds:
            expected = ds.read(window=Window(0, 0, size, size))
            assert read(tmp_path / "s.tif")[1] == ds.transform  # same origin, south up
        assert np.array_equal(read(tmp_path / "s.tif")[0], expected, equal_nan=True)
        (tmp_path / "s.tif").unlink()


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({}, "got none"),
        ({"bbox": BOX_EXTENT, "mask": BOX}, "got bbox and mask"),
        ({"bbox": BOX_EXTENT, "geometry": LONLAT, "mask": BOX}, "got bbox and geometry and mask"),
        (
            {"geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}},
            "[-78.9586, 23.565, -76.5749, 25.5509] (minx, miny, maxx, maxy) in EPSG:4326",
        ),
        ({"mask": str(DATA / "vector" / "test_gpx.gpx")}, "5 layers; pass mask_layer= one of"),
        ({"mask": str(DATA / "vector" / "test_gpx.gpx"), "mask_layer": "tracks"}, "needs polygons"),
        ({"bbox": (3, 0, 1, 1)}, "minx < maxx"),
        ({"bbox": BOX_EXTENT, "mask_where": "x = 1"}, "mask_where only applies with mask"),
        ({"mask": BOX, "nodata": 300}, "cannot be stored in uint8"),
        ({"geometry": {"type": "Polygon"}}, "not valid GeoJSON"),
    ],
)
def test_invalid_arguments(tmp_path, kwargs, text) -> None:
    with pytest.raises(GdalMcpError) as e:
        clip(RGB, str(tmp_path / "x.tif"), **kwargs)
    assert e.value.code == "invalid-argument"
    assert text in e.value.message
    assert not (tmp_path / "x.tif").exists()


def test_matches_gdalwarp_crop_to_cutline(tmp_path) -> None:
    gdalwarp = shutil.which("gdalwarp")
    if gdalwarp is None:
        pytest.skip("gdalwarp not on PATH (install Debian gdal-bin)")
    ref = tmp_path / "ref.tif"
    subprocess.run(
        [gdalwarp, "-q", "-cutline", BOX, "-crop_to_cutline", RGB, str(ref)], check=True, capture_output=True, timeout=60
    )
    clip(RGB, str(tmp_path / "ours.tif"), mask=BOX)
    ours, ours_t, ours_nodata, *_ = read(tmp_path / "ours.tif")
    theirs, theirs_t, theirs_nodata, *_ = read(ref)
    assert ours_nodata == theirs_nodata == 0
    # Same grid: same resolution, origins a whole number of pixels apart.
    assert ours_t.a == pytest.approx(theirs_t.a) and ours_t.e == pytest.approx(theirs_t.e)
    dc, dr = (theirs_t.c - ours_t.c) / ours_t.a, (theirs_t.f - ours_t.f) / ours_t.e
    assert dc == pytest.approx(round(dc), abs=1e-6) and dr == pytest.approx(round(dr), abs=1e-6)
    # gdalwarp snaps the cutline envelope inward without CUTLINE_ALL_TOUCHED (GDAL's CropToCutline); we keep every
    # pixel whose centre lies in the box: box.shp spans columns 243.35..493.33 and rows 256.35..422.99, so gdalwarp
    # keeps columns 244..492 and rows 257..421, we columns 243..492 and rows 256..422.
    dc, dr = round(dc), round(dr)
    assert (dc, dr) == (1, 1) and ours.shape[1:] == (theirs.shape[1] + 2, theirs.shape[2] + 1)
    # Over gdalwarp's extent the pixels are identical; our extra column and rows are pixels whose centres lie in
    # the box, which gdalwarp drops.
    assert np.array_equal(ours[:, dr : dr + theirs.shape[1], dc : dc + theirs.shape[2]], theirs)
    ring = np.ones(ours.shape[1:], dtype=bool)
    ring[dr : dr + theirs.shape[1], dc : dc + theirs.shape[2]] = False
    outside = geometry_mask([BOX_POLYGON], out_shape=ours.shape[1:], transform=ours_t)
    assert ring[:, 0].all() and ring[0].all() and ring[-1].all() and not outside.any()
    with rasterio.open(RGB) as ds:
        assert np.array_equal(ours[:, ring], ds.read(window=Window(243, 256, 250, 167))[:, ring])


def test_slope_zones_match_the_rasterstats_reference(tmp_path) -> None:
    # MANIFEST: slope.tif with vector/polygons.shp gives counts 75 and 50, mean(zone 1) 14.66, mean(zone 2) 56.6058.
    import pyogrio.raw

    slope, polygons = str(DATA / "raster" / "slope.tif"), str(DATA / "vector" / "polygons.shp")
    summary, _ = clip(slope, str(tmp_path / "all.tif"), mask=polygons, crop=False)
    assert (summary.width, summary.height, summary.dtype, summary.nodata) == (84, 78, "float32", -9999.0)
    with rasterio.open(tmp_path / "all.tif") as ds:
        assert ds.read(1, masked=True).count() == 125
    meta, _, wkb, _ = pyogrio.raw.read(polygons, columns=[])
    results = []
    for i, geom in enumerate(shapely.from_wkb(wkb)):
        clip(slope, str(tmp_path / f"z{i}.tif"), geometry=shapely.geometry.mapping(geom), geometry_crs=meta["crs"])
        with rasterio.open(tmp_path / f"z{i}.tif") as ds:
            values = ds.read(1, masked=True)
        results.append((values.count(), float(values.mean())))
    assert [n for n, _ in results] == [75, 50]
    assert results[0][1] == pytest.approx(14.66, abs=0.005) and results[1][1] == pytest.approx(56.6058, abs=1e-4)


# ---------------------------------------------------------------------------------------------- integer, no nodata

TRIANGLE = {"type": "Polygon", "coordinates": [[[0, 0], [20.2, 0], [0, 20.2], [0, 0]]]}


def classes(tmp_path, dtype: str = "uint8", values=None) -> str:
    """A 20x20 class raster without nodata whose classes 0..3 (or `values`) occur inside TRIANGLE."""
    src = tmp_path / f"classes_{dtype}.tif"
    data = (np.arange(400).reshape(20, 20) % 4).astype(dtype) if values is None else values.astype(dtype)
    with rasterio.open(
        src,
        "w",
        driver="GTiff",
        width=20,
        height=20,
        count=1,
        dtype=dtype,
        crs="EPSG:32618",
        transform=rasterio.transform.from_origin(0, 20, 1, 1),
    ) as ds:
        ds.write(data, 1)
    return str(src)


def triangle_inside() -> np.ndarray:
    """Pixels whose centre is inside TRIANGLE (the rule of rasterio.mask and gdalwarp -cutline)."""
    return ~geometry_mask(
        [shapely.geometry.shape(TRIANGLE)], out_shape=(20, 20), transform=rasterio.transform.from_origin(0, 20, 1, 1)
    )


@pytest.mark.parametrize("fmt", [None, "COG"])
def test_integer_without_nodata_keeps_real_zeros_behind_a_mask(tmp_path, fmt) -> None:
    """Issue: clipping a Byte raster without nodata declared 0 nodata, so class-0 pixels inside vanished."""
    src = classes(tmp_path)
    summary, warnings = clip(src, str(tmp_path / "o.tif"), geometry=TRIANGLE, geometry_crs="EPSG:32618", format=fmt)
    inside = triangle_inside()
    with rasterio.open(src) as ds:
        source = ds.read(1)
    with rasterio.open(tmp_path / "o.tif") as ds:
        assert ds.nodata is None and summary.nodata is None
        assert ds.mask_flag_enums[0] == [rasterio.enums.MaskFlags.per_dataset]
        masked, valid = ds.read(1, masked=True), ds.dataset_mask()
        if fmt == "COG":
            assert cog_check(ds) == ([], [])
        assert ds.files == [str(tmp_path / "o.tif")]  # an internal mask: no .msk sidecar
    assert np.array_equal(valid == 255, inside) and np.array_equal(~masked.mask, inside)
    # Every kept pixel keeps its class, zeros included (60 of them inside the triangle).
    assert (
        np.array_equal(masked.compressed(), source[inside])
        and (masked.compressed() == 0).sum() == (source[inside] == 0).sum() > 50
    )
    assert any("mask band" in w for w in warnings)


def test_integer_mask_matches_gdalwarp_dstalpha(tmp_path) -> None:
    gdalwarp = shutil.which("gdalwarp")
    if gdalwarp is None:
        pytest.skip("gdalwarp not on PATH (install Debian gdal-bin)")
    src = classes(tmp_path)
    cut = tmp_path / "tri.geojson"
    cut.write_text(
        json.dumps(
            {
                "type": "FeatureCollection",
                "crs": {"type": "name", "properties": {"name": "EPSG:32618"}},
                "features": [{"type": "Feature", "properties": {}, "geometry": TRIANGLE}],
            }
        )
    )
    subprocess.run(
        [gdalwarp, "-q", "-cutline", str(cut), "-dstalpha", src, str(tmp_path / "ref.tif")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    clip(src, str(tmp_path / "ours.tif"), mask=str(cut), crop=False)
    with rasterio.open(tmp_path / "ref.tif") as ref, rasterio.open(tmp_path / "ours.tif") as ours:
        alpha, theirs = ref.read(2), ref.read(1)
        valid, data = ours.dataset_mask(), ours.read(1)
        assert ref.transform == ours.transform
    assert np.array_equal(valid, alpha) and alpha.min() == 0 and alpha.max() == 255
    assert np.array_equal(data[valid == 255], theirs[alpha == 255]) and (data[valid == 255] == 0).any()


@pytest.mark.parametrize(
    ("dtype", "used", "expected"),
    [
        ("uint8", [255], 254),
        ("uint8", [], 255),
        ("int16", [-32768, -32767], -32766),
        ("uint32", [4294967295], 4294967294),
    ],
)
def test_formats_without_masks_get_an_unused_value(tmp_path, dtype, used, expected) -> None:
    values = np.arange(400).reshape(20, 20) % 4
    inside = triangle_inside()
    rows, cols = np.nonzero(inside)
    for k, v in enumerate(used):
        values[rows[k], cols[k]] = v
    values[~inside & (np.arange(400).reshape(20, 20) % 7 == 0)] = expected  # only outside: not a kept value
    src = classes(tmp_path, dtype, values)
    fmt = "PNG" if dtype in ("uint8",) else "netCDF"
    out = tmp_path / ("o.png" if fmt == "PNG" else "o.nc")
    summary, warnings = clip(src, str(out), geometry=TRIANGLE, geometry_crs="EPSG:32618", format=fmt)
    with rasterio.open(out) as ds:
        data = ds.read(1)
        assert ds.nodata == expected
    assert any(f"set to {expected}, declared nodata" in w for w in warnings)
    assert (data[~inside] == expected).all() and not (data[inside] == expected).any()
    assert np.array_equal(data[inside], values[inside].astype(dtype))


def test_every_value_used_and_no_mask_format_is_refused(tmp_path) -> None:
    # Rows 0-15 (320 pixels) are kept and hold all 256 byte values; rows 16-19 are outside.
    src = classes(tmp_path, "uint8", np.arange(400).reshape(20, 20) % 256)
    top = {"type": "Polygon", "coordinates": [[[0, 4], [20, 4], [20, 20], [0, 20], [0, 4]]]}
    with pytest.raises(GdalMcpError) as e:
        clip(src, str(tmp_path / "o.png"), geometry=top, geometry_crs="EPSG:32618", crop=False)
    assert e.value.code == "invalid-argument" and "every uint8 value" in e.value.message
    assert "write GTiff or COG" in e.value.message and not (tmp_path / "o.png").exists()
    # GTiff takes a mask band instead.
    clip(src, str(tmp_path / "o.tif"), geometry=top, geometry_crs="EPSG:32618", crop=False)
    with rasterio.open(tmp_path / "o.tif") as ds:
        assert ds.read(1, masked=True).count() == 320 and ds.nodata is None
