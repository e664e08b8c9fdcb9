"""reproject's margins and area of use (engine/raster/margins.py): the margins of an input without nodata are nodata
(gdalwarp -dstnodata with the same value says which pixels are outside), and a warning, checked against pyproj's
CRS.area_of_use, when the data reach outside the target CRS's area of use."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import rasterio
from pyproj import CRS
from rasterio.transform import from_origin

from gdal_mcp.engine import tiles
from gdal_mcp.engine.raster.warp import reproject
from tests.cli_reference import gdal_cli


def lonlat_source(path: Path, west: float, north: float, *, dtype: str = "uint8", values: tuple[int, int] = (0, 254)) -> Path:
    """A 2-band EPSG:4326 raster of 0.8° x 0.8° (200 x 200 pixels) from (west, north), random values in `values`,
    no nodata."""
    rng = np.random.default_rng(3)
    if np.dtype(dtype).kind == "f":
        data = rng.uniform(0, 100, (2, 200, 200)).astype(dtype)
    else:
        data = rng.integers(values[0], values[1] + 1, (2, 200, 200)).astype(dtype)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=200,
        height=200,
        count=2,
        dtype=dtype,
        crs="EPSG:4326",
        transform=from_origin(west, north, 0.004, 0.004),
    ) as out:
        out.write(data)
    return path


def _outside_by_cli(tmp_path: Path, src: Path, ours: Path, nodata: str) -> np.ndarray:
    """Which pixels of our grid gdalwarp -dstnodata leaves outside the source (same grid: -te -ts from ours)."""
    with rasterio.open(ours) as a:
        b = a.bounds
        gdal_cli(
            "gdalwarp",
            "-overwrite",
            "-t_srs",
            a.crs.to_string(),
            "-te",
            *map(repr, (b.left, b.bottom, b.right, b.top)),
            "-ts",
            str(a.width),
            str(a.height),
            "-dstnodata",
            nodata,
            str(src),
            str(tmp_path / "cli.tif"),
        )
    with rasterio.open(tmp_path / "cli.tif") as c:
        data = c.read()
    return np.isnan(data) if nodata == "nan" else data == float(nodata)


def test_margins_of_a_byte_input_without_nodata_are_the_largest_free_value(tmp_path) -> None:
    src = lonlat_source(tmp_path / "src.tif", 6.5, 50.2)
    with rasterio.open(src) as ds:
        assert ds.nodata is None
        free = sorted(set(range(256)) - set(np.unique(ds.read()).tolist()))
    assert free == [255]
    s, warnings = reproject(str(src), str(tmp_path / "out.tif"), dst_crs="EPSG:32632", resampling="bilinear")
    assert s.nodata == 255.0
    assert any("255" in w and "declared nodata" in w and "no input pixel" in w for w in warnings), warnings
    with rasterio.open(tmp_path / "out.tif") as out:
        data = out.read()
        assert out.nodata == 255
    outside = _outside_by_cli(tmp_path, src, tmp_path / "out.tif", "255")
    assert outside.any() and ((data == 255) == outside).mean() > 0.999


def test_signed_and_float_inputs(tmp_path) -> None:
    src = lonlat_source(tmp_path / "i16.tif", 6.5, 50.2, dtype="int16", values=(-32767, 2000))
    s, _ = reproject(str(src), str(tmp_path / "i16_out.tif"), dst_crs="EPSG:32632")
    with rasterio.open(src) as ds:
        assert -32768 not in np.unique(ds.read())
    assert s.nodata == -32768.0  # the smallest Int16 value no input pixel takes
    outside = _outside_by_cli(tmp_path, src, tmp_path / "i16_out.tif", "-32768")
    with rasterio.open(tmp_path / "i16_out.tif") as out:
        assert outside.any() and np.array_equal(out.read() == -32768, outside)

    src = lonlat_source(tmp_path / "f32.tif", 6.5, 50.2, dtype="float32")
    s, warnings = reproject(str(src), str(tmp_path / "f_out.tif"), dst_crs="EPSG:32632")
    assert s.nodata == "nan" and any("NaN" in w for w in warnings)
    outside = _outside_by_cli(tmp_path, src, tmp_path / "f_out.tif", "nan")
    with rasterio.open(tmp_path / "f_out.tif") as out:
        assert outside.any() and np.array_equal(np.isnan(out.read()), outside)


def test_a_wider_output_type_takes_a_value_the_input_type_cannot_hold(tmp_path) -> None:
    src = lonlat_source(tmp_path / "full.tif", 6.5, 50.2, values=(0, 255))
    with rasterio.open(src) as ds:
        assert len(np.unique(ds.read())) == 256  # every Byte value occurs: none can mark the margins
    s, warnings = reproject(str(src), str(tmp_path / "b.tif"), dst_crs="EPSG:32632")
    assert s.nodata is None and any("every uint8 value" in w and "nodata=" in w for w in warnings), warnings
    s, _ = reproject(str(src), str(tmp_path / "u16.tif"), dst_crs="EPSG:32632", output_type="UInt16")
    assert s.nodata == 65535.0


def test_an_explicit_nodata_or_an_input_nodata_is_kept(tmp_path) -> None:
    src = lonlat_source(tmp_path / "src.tif", 6.5, 50.2)
    s, warnings = reproject(str(src), str(tmp_path / "a.tif"), dst_crs="EPSG:32632", nodata=0)
    assert s.nodata == 0.0 and not any("declared nodata" in w for w in warnings)
    with rasterio.open(src, "r+") as ds:
        ds.nodata = 7
    s, warnings = reproject(str(src), str(tmp_path / "b.tif"), dst_crs="EPSG:32632")
    assert s.nodata == 7.0 and not any("declared nodata" in w for w in warnings)


def test_inside_the_footprint_no_nodata_is_added(tmp_path) -> None:
    src = lonlat_source(tmp_path / "src.tif", 6.5, 50.2)
    s, warnings = reproject(
        str(src), str(tmp_path / "in.tif"), dst_crs="EPSG:32632", bbox=(6.7, 49.6, 6.9, 49.8), bbox_crs="EPSG:4326"
    )
    assert s.nodata is None and not any("nodata" in w for w in warnings), warnings
    # lon/lat to Web Mercator keeps the rectangle: no pixel centre falls outside, no nodata either (as gdalwarp)
    s, warnings = reproject(str(src), str(tmp_path / "merc.tif"), dst_crs="EPSG:3857")
    assert s.nodata is None and not any("nodata" in w for w in warnings), warnings
    assert not _outside_by_cli(tmp_path, src, tmp_path / "merc.tif", "255").any()


def test_small_tiles_choose_the_same_value_and_pixels(tmp_path, monkeypatch) -> None:
    """The value scan and the warp in many tiles (as on a cluster): the same output as in a few."""
    src = lonlat_source(tmp_path / "src.tif", 6.5, 50.2, dtype="uint16", values=(0, 60000))
    options = {"TILED": "YES", "BLOCKXSIZE": "64", "BLOCKYSIZE": "64"}
    reproject(str(src), str(tmp_path / "few.tif"), dst_crs="EPSG:32632", options=options)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=1))
    reproject(str(src), str(tmp_path / "many.tif"), dst_crs="EPSG:32632", options=options)
    with rasterio.open(tmp_path / "few.tif") as a, rasterio.open(tmp_path / "many.tif") as b:
        assert a.nodata == b.nodata == 65535 and np.array_equal(a.read(), b.read())


# ----- area of use ---------------------------------------------------------------------------------------------
def test_luxembourg_into_utm_32n_is_warned_about_with_the_area_and_the_distance(tmp_path) -> None:
    src = lonlat_source(tmp_path / "lux.tif", 5.7, 50.2)  # lon 5.7 to 6.5: UTM zone 32N starts at 6°E
    _, warnings = reproject(str(src), str(tmp_path / "utm.tif"), dst_crs="EPSG:32632")
    area = CRS.from_epsg(32632).area_of_use
    assert area is not None and area.west == 6.0
    (text,) = [w for w in warnings if "area of use" in w]
    first = area.name.split(". ")[0]
    assert "EPSG:32632" in text and first in text
    assert f"lon {area.west:g} to {area.east:g}, lat {area.south:g} to {area.north:g}" in text
    assert f"{area.west - 5.7:.3g}° (about" in text and " west of it" in text  # 0.3° west
    # and into zone 31N (0°E to 6°E), east of it
    _, warnings = reproject(str(src), str(tmp_path / "utm31.tif"), dst_crs="EPSG:32631")
    area = CRS.from_epsg(32631).area_of_use
    (text,) = [w for w in warnings if "area of use" in w]
    assert f"{6.5 - area.east:.3g}° (about" in text and " east of it" in text


def test_data_inside_the_area_of_use_get_no_word(tmp_path) -> None:
    src = lonlat_source(tmp_path / "in.tif", 6.5, 50.2)  # lon 6.5 to 7.3, inside zone 32N
    area = CRS.from_epsg(32632).area_of_use
    assert area.west <= 6.5 and 7.3 <= area.east and area.south <= 49.4 and 50.2 <= area.north
    _, warnings = reproject(str(src), str(tmp_path / "utm.tif"), dst_crs="EPSG:32632")
    assert not any("area of use" in w for w in warnings), warnings
    # the source's own CRS (a resampling, no reprojection): nothing to say either
    _, warnings = reproject(str(src), str(tmp_path / "res.tif"), resolution=0.01)
    assert not any("area of use" in w for w in warnings), warnings


@pytest.mark.parametrize(("bbox", "warned"), [((6.1, 49.5, 6.4, 50.0), False), ((5.75, 49.5, 6.4, 50.0), True)])
def test_the_bbox_written_decides(tmp_path, bbox, warned) -> None:
    """Only what is written counts: a bbox inside zone 32N out of a source that reaches beyond it is fine."""
    src = lonlat_source(tmp_path / "lux.tif", 5.7, 50.2)
    _, warnings = reproject(str(src), str(tmp_path / "b.tif"), dst_crs="EPSG:32632", bbox=bbox, bbox_crs="EPSG:4326")
    assert any("area of use" in w for w in warnings) == warned, warnings


@pytest.mark.parametrize(("lon0", "lon1", "east_by"), [(177.5, 181.5, None), (-179.5, -178.5, None), (-179.5, -177.0, -177.0)])
def test_areas_across_the_antimeridian(tmp_path, lon0, lon1, east_by) -> None:
    """Fiji's map grid (EPSG:3460), whose area of use crosses 180°: data on either side of it, or across it."""
    west = lon0 if lon0 < 180 else lon0 - 360
    src = tmp_path / "fiji.tif"
    with rasterio.open(
        src,
        "w",
        driver="GTiff",
        width=100,
        height=50,
        count=1,
        dtype="uint8",
        crs="EPSG:4326",
        transform=from_origin(west, -16.5, (lon1 - lon0) / 100, 2 / 50),
        nodata=0,
    ) as out:
        out.write(np.ones((1, 50, 100), dtype="uint8"))
    _, warnings = reproject(str(src), str(tmp_path / "fiji_grid.tif"), dst_crs="EPSG:3460")
    texts = [w for w in warnings if "area of use" in w]
    if east_by is None:
        assert texts == []
        return
    area = CRS.from_epsg(3460).area_of_use
    assert area.west > area.east  # it crosses 180°
    (text,) = texts
    assert f"{east_by - area.east:.3g}° (about" in text and "east of it" in text, text


def test_the_preferred_value_in_one_tile_only_gives_the_next_free_one(tmp_path, monkeypatch) -> None:
    """255 occurs in one of many tiles, 254 in others: the tiles that answered 'no 255 here' are scanned again in full,
    and 253, free everywhere, is the value (the first tile alone would have offered 254)."""
    src = lonlat_source(tmp_path / "src.tif", 6.5, 50.2, values=(0, 252))
    with rasterio.open(src, "r+") as ds:
        data = ds.read()
        data[:, :3, :3] = 255  # the first 64-px tile
        data[:, 150:153, 150:153] = 254  # another one
        ds.write(data)
        expected = max(set(range(256)) - set(np.unique(ds.read()).tolist()))
    assert expected == 253
    monkeypatch.setattr(tiles, "TILE_ALIGN", 64)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=1))
    s, warnings = reproject(str(src), str(tmp_path / "out.tif"), dst_crs="EPSG:32632")
    assert s.nodata == 253.0 and any("253 is the largest uint8 value" in w for w in warnings), warnings


def test_a_mosaic_input_in_another_crs_no_longer_covers_the_others_with_its_margins(tmp_path) -> None:
    """raster_mosaic warps an input in another CRS onto the mosaic grid first: its margins (no nodata in the input)
    are nodata now, so the inputs before it show through there; gdalwarp -dstnodata gives that input's footprint."""
    from gdal_mcp.engine.raster.mosaic import mosaic

    a = tmp_path / "a.tif"
    with rasterio.open(
        a,
        "w",
        driver="GTiff",
        width=400,
        height=400,
        count=1,
        dtype="uint8",
        crs="EPSG:32632",
        transform=from_origin(300000, 5600000, 250, 250),
    ) as out:
        out.write(np.full((1, 400, 400), 10, dtype="uint8"))
    b = tmp_path / "b.tif"
    with rasterio.open(
        b, "w", driver="GTiff", width=100, height=100, count=1, dtype="uint8", crs="EPSG:4326",
        transform=from_origin(6.5, 50.2, 0.004, 0.004),
    ) as out:  # fmt: skip
        out.write(np.full((1, 100, 100), 20, dtype="uint8"))
    s, _ = mosaic([str(a), str(b)], str(tmp_path / "m.tif"))
    with rasterio.open(tmp_path / "m.tif") as m:
        data = m.read(1)
        bounds, shape = m.bounds, (m.width, m.height)
    gdal_cli(
        "gdalwarp", "-t_srs", "EPSG:32632", "-te", *map(repr, bounds), "-ts", *map(str, shape), "-dstnodata", "255",
        str(b), str(tmp_path / "b_cli.tif"),
    )  # fmt: skip
    with rasterio.open(tmp_path / "b_cli.tif") as ref:
        footprint = ref.read(1) == 20
    assert footprint.any() and not footprint.all()
    assert not (data == 0).any()  # no 0 margins drawn over the first input
    assert (np.where(footprint, 20, 10) == data).mean() > 0.995  # edge pixels may round the other way


def test_the_scan_stops_once_every_value_occurred(tmp_path, monkeypatch) -> None:
    """Speed (the scan is a second read of the input): when the first tiles already hold every value of the type, no
    value can be free, and the other tiles are not read. The answer is the full scan's: no nodata, the margins 0."""
    import inspect
    import sys

    opening = sys.modules["gdal_mcp.engine.raster.opening"]
    src = lonlat_source(tmp_path / "src.tif", 6.5, 50.2, values=(0, 254))
    with rasterio.open(src, "r+") as ds:
        data = ds.read()
        data[:, :16, :16] = np.arange(256, dtype="uint8").reshape(16, 16)  # every value, in the first 64-px tile
        ds.write(data)
    monkeypatch.setattr(tiles, "TILE_ALIGN", 64)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=1))
    scanned = []
    original = opening.open_raster

    def counting(*args, **kwargs):
        if inspect.currentframe().f_back.f_code.co_name == "used_values_tile":
            scanned.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(opening, "open_raster", counting)
    s, warnings = reproject(str(src), str(tmp_path / "out.tif"), dst_crs="EPSG:32632")
    assert s.nodata is None and any("every uint8 value occurs" in w for w in warnings), warnings
    total = len(tiles.plan(200, 200, bytes_per_pixel=2))
    assert total >= 9 and 1 <= len(scanned) <= 2, (len(scanned), total)


def test_values_are_cast_as_gdal_converts_them_halves_away_from_zero(tmp_path) -> None:
    """The margin scan, rasterize and reclassify cast floats to integers as GDAL writes them: numpy rounds halves to
    even (254.5 -> 254) where GDAL rounds them away from zero (255), so a scan could pick 255 as free for a float
    input with 254.5 while GDAL wrote 255 pixels (a red-team find). Reference: GDAL's own conversion (RasterIO)."""
    import rasterio
    from rasterio.transform import from_origin

    from gdal_mcp.engine.raster.output import cast

    values = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 254.5, 255.5, 3.49999, 0.49999999999999994, -32768.5, 1e10, -1e10]])
    path = tmp_path / "halves.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=values.shape[1], height=1, count=1, dtype="float64", crs="EPSG:4326",
        transform=from_origin(0, 1, 1, 1),
    ) as ds:  # fmt: skip
        ds.write(values, 1)
    with rasterio.open(path) as ds:
        for dtype in ("uint8", "int16", "int32", "uint16"):
            assert np.array_equal(cast(values, dtype), ds.read(1, out_dtype=dtype)), dtype
