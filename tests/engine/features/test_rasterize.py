"""Rasterize: the MANIFEST fact on slope.tif's grid, gdal_rasterize as reference, grids, types, streaming, errors."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pyogrio.raw
import pytest
import rasterio
import rasterio.features
import shapely
from affine import Affine
from pyproj import Transformer

import gdal_mcp.engine.features.rasterize as rasterize_module
from gdal_mcp.engine.features.rasterize import rasterize
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

SLOPE = str(DATA / "raster" / "slope.tif")
POLYGONS = str(DATA / "vector" / "polygons.shp")
LINES = str(DATA / "vector" / "lines.shp")
WORLD = str(DATA / "vector" / "naturalearth_lowres.shp")


def read(path: Path) -> tuple[np.ndarray, dict]:
    with rasterio.open(path) as ds:
        return ds.read(1), ds.profile


def slope_grid() -> tuple[list[str], list[str]]:
    with rasterio.open(SLOPE) as ds:
        return [repr(v) for v in ds.bounds], [str(ds.width), str(ds.height)]


def write_layer(path: Path, geoms, crs: str | None, **fields: np.ndarray) -> str:
    pyogrio.raw.write(
        str(path), shapely.to_wkb(np.asarray(geoms)), list(fields.values()), list(fields), geometry_type="Polygon", crs=crs
    )
    return str(path)


def test_ids_on_the_slope_grid_give_the_manifest_counts(tmp_path: Path) -> None:
    summary, warnings = rasterize(POLYGONS, str(tmp_path / "ids.tif"), attribute="id", like=SLOPE)
    assert warnings == []
    data, profile = read(tmp_path / "ids.tif")
    values, counts = np.unique(data, return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist(), strict=True)) == {0: 84 * 78 - 125, 1: 75, 2: 50}
    with rasterio.open(SLOPE) as ds:
        assert (profile["transform"], profile["crs"], profile["width"], profile["height"]) == (
            ds.transform,
            ds.crs,
            ds.width,
            ds.height,
        )
    # The smallest type that holds the ids; background 0 and no nodata by default, as gdal_rasterize.
    assert (summary.dtype, summary.nodata, profile["nodata"], summary.driver) == ("uint8", None, None, "GTiff")


@pytest.mark.parametrize("extra", [[], ["-at"]], ids=["centres", "all_touched"])
def test_same_pixels_as_gdal_rasterize(tmp_path: Path, extra: list[str]) -> None:
    te, ts = slope_grid()
    gdal_cli("gdal_rasterize", *extra, "-a", "id", "-te", *te, "-ts", *ts, "-ot", "Byte", POLYGONS, str(tmp_path / "cli.tif"))
    rasterize(POLYGONS, str(tmp_path / "ours.tif"), attribute="id", like=SLOPE, all_touched=bool(extra))
    cli, cli_profile = read(tmp_path / "cli.tif")
    ours, profile = read(tmp_path / "ours.tif")
    assert profile["transform"].almost_equals(cli_profile["transform"])
    assert np.array_equal(ours, cli)
    if extra:
        assert (ours == 1).sum() > 75 and (ours == 2).sum() > 50


def test_invert_and_lines_match_gdal_rasterize(tmp_path: Path) -> None:
    te, ts = slope_grid()
    gdal_cli("gdal_rasterize", "-i", "-burn", "3", "-te", *te, "-ts", *ts, "-ot", "Byte", POLYGONS, str(tmp_path / "inv_cli.tif"))
    rasterize(POLYGONS, str(tmp_path / "inv.tif"), burn_value=3, like=SLOPE, invert=True)
    inverted, _ = read(tmp_path / "inv.tif")
    assert np.array_equal(inverted, read(tmp_path / "inv_cli.tif")[0])
    assert (inverted == 0).sum() == 125 and (inverted == 3).sum() == 84 * 78 - 125
    gdal_cli("gdal_rasterize", "-burn", "9", "-te", *te, "-ts", *ts, "-ot", "Byte", LINES, str(tmp_path / "l_cli.tif"))
    rasterize(LINES, str(tmp_path / "l.tif"), burn_value=9, like=SLOPE)
    assert np.array_equal(read(tmp_path / "l.tif")[0], read(tmp_path / "l_cli.tif")[0])


def test_resolution_without_bbox_widens_the_extent_like_gdal(tmp_path: Path) -> None:
    summary, _ = rasterize(POLYGONS, str(tmp_path / "r.tif"), burn_value=7, resolution=25)
    # Layer extent (244697.45, 1000132.71)-(246189.04, 1000460.79) widened by half a pixel: 61 x 14 pixels.
    assert (summary.width, summary.height, summary.resolution) == (61, 14, (25.0, 25.0))
    assert summary.bounds.left == pytest.approx(244697.45179524383 - 12.5)
    assert summary.bounds.top == pytest.approx(1000460.7859182726 + 12.5)
    gdal_cli("gdal_rasterize", "-burn", "7", "-tr", "25", "25", "-ot", "Byte", POLYGONS, str(tmp_path / "cli.tif"))
    cli, cli_profile = read(tmp_path / "cli.tif")
    ours, profile = read(tmp_path / "r.tif")
    assert profile["transform"].almost_equals(cli_profile["transform"]) and np.array_equal(ours, cli)


def test_bbox_with_resolution_or_size(tmp_path: Path) -> None:
    bbox = (244600.0, 1000000.0, 246300.0, 1000500.0)
    a, _ = rasterize(POLYGONS, str(tmp_path / "a.tif"), attribute="id", bbox=bbox, resolution=[10, 20])
    assert (a.width, a.height, a.resolution) == (170, 25, (10.0, 20.0))
    assert (a.bounds.left, a.bounds.top) == (244600.0, 1000500.0)
    b, _ = rasterize(POLYGONS, str(tmp_path / "b.tif"), attribute="id", bbox=bbox, size=[340, 50])
    assert (b.width, b.height, b.resolution) == (340, 50, (5.0, 10.0))
    te = [str(v) for v in bbox]
    gdal_cli("gdal_rasterize", "-a", "id", "-te", *te, "-ts", "340", "50", "-ot", "Byte", POLYGONS, str(tmp_path / "cli.tif"))
    assert np.array_equal(read(tmp_path / "b.tif")[0], read(tmp_path / "cli.tif")[0])


def test_features_are_reprojected_to_the_output_crs(tmp_path: Path) -> None:
    summary, _ = rasterize(POLYGONS, str(tmp_path / "ll.tif"), attribute="id", resolution=0.0002, crs="EPSG:4326")
    assert summary.crs == "EPSG:4326"
    data, profile = read(tmp_path / "ll.tif")
    meta, _, wkb, fields = pyogrio.raw.read(POLYGONS)
    to_ll = Transformer.from_crs(meta["crs"], "EPSG:4326", always_xy=True)
    geoms = shapely.transform(shapely.from_wkb(wkb), lambda xy: np.column_stack(to_ll.transform(xy[:, 0], xy[:, 1])))
    expected = rasterio.features.rasterize(
        zip(geoms, fields[0], strict=True), out_shape=data.shape, transform=profile["transform"], dtype="uint8"
    )
    assert np.array_equal(data, expected) and set(np.unique(data)) == {0, 1, 2}
    # The grid covers the projected extent of the layer.
    lon, lat = to_ll.transform(244697.45, 1000460.79)
    assert summary.bounds.left < lon and summary.bounds.top > lat


def test_many_windows_give_the_same_raster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole, _ = rasterize(WORLD, str(tmp_path / "one.tif"), attribute="pop_est", resolution=1.0)
    monkeypatch.setattr(rasterize_module, "WINDOW_PIXELS", 360 * 7)
    reports: list[tuple[float, str]] = []
    rasterize(
        WORLD, str(tmp_path / "many.tif"), attribute="pop_est", resolution=1.0, progress=lambda f, m="": reports.append((f, m))
    )
    one, profile = read(tmp_path / "one.tif")
    many, _ = read(tmp_path / "many.tif")
    # pop_est is an integer field up to 1.4e9: the smallest type holding it is UInt32.
    assert (whole.width, whole.height, whole.dtype) == (361, 175, "uint32")
    assert np.array_equal(one, many) and (one > 1e8).any()
    n = len(reports)
    # Strips of 6 full rows (2520 pixels / 361 columns) over 175 rows.
    assert n == 30 and reports[-1] == (1.0, f"rasterized window {n}/{n}")
    assert [f for f, _ in reports] == sorted(f for f, _ in reports)
    # Reference: every feature burnt at once (rasterio, GDAL's rasterizer), last one wins.
    _, _, wkb, fields = pyogrio.raw.read(WORLD, columns=["pop_est"])
    expected = rasterio.features.rasterize(
        zip(shapely.from_wkb(wkb), fields[0], strict=True), out_shape=one.shape, transform=profile["transform"], dtype="uint32"
    )
    assert np.array_equal(one, expected)


def test_where_filters_features(tmp_path: Path) -> None:
    rasterize(POLYGONS, str(tmp_path / "w.tif"), attribute="id", like=SLOPE, where="id = 2")
    values, counts = np.unique(read(tmp_path / "w.tif")[0], return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist(), strict=True)) == {0: 84 * 78 - 50, 2: 50}


def _cli_raster(tmp_path: Path, name: str, *args: str, source: str = POLYGONS) -> tuple[np.ndarray, dict]:
    te, ts = slope_grid()
    gdal_cli("gdal_rasterize", *args, "-te", *te, "-ts", *ts, source, str(tmp_path / name))
    return read(tmp_path / name)


def test_a_mask_keeps_its_zeros_as_data(tmp_path: Path) -> None:
    """Issue: nodata defaulted to 0, the background, so a 0/1 mask had its zeros flagged nodata."""
    summary, _ = rasterize(POLYGONS, str(tmp_path / "mask.tif"), burn_value=1, like=SLOPE)
    cli, cli_profile = _cli_raster(tmp_path, "cli.tif", "-burn", "1", "-ot", "Byte")
    with rasterio.open(tmp_path / "mask.tif") as ds:
        ours, valid = ds.read(1), ds.dataset_mask()
        assert ds.nodata is None and summary.nodata is None
    assert cli_profile["nodata"] is None and np.array_equal(ours, cli)
    # Every pixel is valid data: 125 ones and the zeros around them.
    assert valid.all() and (ours == 0).sum() == 84 * 78 - 125 and (ours == 1).sum() == 125


@pytest.mark.parametrize(
    ("kwargs", "args"),
    [
        ({"burn_value": 1, "init": 5}, ["-burn", "1", "-init", "5"]),
        ({"burn_value": 1, "nodata": 255}, ["-burn", "1", "-a_nodata", "255"]),
        ({"burn_value": 1, "init": 0, "nodata": 255}, ["-burn", "1", "-init", "0", "-a_nodata", "255"]),
        ({"burn_value": 0, "init": 1}, ["-burn", "0", "-init", "1"]),
        ({"attribute": "id", "init": 7, "nodata": 7}, ["-a", "id", "-init", "7", "-a_nodata", "7"]),
    ],
    ids=["init", "nodata", "init_and_nodata", "burn_zero", "attribute"],
)
def test_init_and_nodata_match_gdal_rasterize(tmp_path: Path, kwargs: dict, args: list[str]) -> None:
    summary, _ = rasterize(POLYGONS, str(tmp_path / "ours.tif"), like=SLOPE, **kwargs)
    cli, cli_profile = _cli_raster(tmp_path, "cli.tif", *args, "-ot", "Byte")
    ours, profile = read(tmp_path / "ours.tif")
    assert summary.dtype == "uint8" and np.array_equal(ours, cli)
    assert profile["nodata"] == cli_profile["nodata"] == kwargs.get("nodata")
    if "burn_value" in kwargs:
        assert (ours == kwargs["burn_value"]).sum() == 125


def test_burn_value_equal_to_nodata_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        rasterize(POLYGONS, str(tmp_path / "x.tif"), burn_value=0, nodata=0, like=SLOPE)
    assert e.value.code == "invalid-argument" and "burn_value 0 equals nodata" in e.value.message
    assert list(tmp_path.iterdir()) == []


def _points(path: Path, n: int, seed: int = 0) -> tuple[str, np.ndarray, np.ndarray]:
    """n random points over slope.tif's extent, in its CRS, many sharing a cell."""
    with rasterio.open(SLOPE) as ds:
        crs, b = ds.crs.to_wkt(), ds.bounds
    rng = np.random.default_rng(seed)
    # Pixel-centre-ish coordinates on a coarse lattice so cells get several points, none on a cell edge.
    xs = b.left + (rng.integers(0, 84, n) + 0.25 + 0.5 * rng.random(n)) * (b.right - b.left) / 84
    ys = b.bottom + (rng.integers(0, 20, n) + 0.25 + 0.5 * rng.random(n)) * (b.top - b.bottom) / 78
    pyogrio.raw.write(
        str(path), shapely.to_wkb(shapely.points(xs, ys)), [np.arange(n, dtype="int32")], ["k"], geometry_type="Point", crs=crs
    )
    return str(path), xs, ys


def test_add_counts_points_per_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, xs, ys = _points(tmp_path / "pts.gpkg", 3000)
    monkeypatch.setattr(rasterize_module, "WINDOW_PIXELS", 84 * 5)  # many strips: no point counted twice
    summary, _ = rasterize(path, str(tmp_path / "count.tif"), burn_value=1, add=True, like=SLOPE)
    ours, profile = read(tmp_path / "count.tif")
    assert summary.dtype == "uint32" and profile["nodata"] is None
    # Reference 1: a 2-D histogram of the points on the grid.
    cols, rows = ~profile["transform"] @ (xs, ys)
    expected = np.zeros(ours.shape, dtype="int64")
    np.add.at(expected, (np.floor(rows).astype(int), np.floor(cols).astype(int)), 1)
    assert ours.sum() == 3000 and np.array_equal(ours, expected) and ours.max() > 1
    # Reference 2: gdal_rasterize -add.
    cli, _ = _cli_raster(tmp_path, "cli.tif", "-add", "-burn", "1", "-init", "0", "-ot", "UInt32", source=path)
    assert np.array_equal(ours, cli)


def test_add_sums_attribute_over_overlapping_polygons(tmp_path: Path) -> None:
    boxes = [shapely.box(0, 0, 4, 4), shapely.box(2, 2, 6, 6), shapely.box(3, 0, 6, 3)]
    path = write_layer(tmp_path / "ov.gpkg", boxes, "EPSG:3857", v=np.array([1, 10, 100], dtype="int32"))
    rasterize(path, str(tmp_path / "sum.tif"), attribute="v", add=True, resolution=1, bbox=(0, 0, 6, 6))
    ours, profile = read(tmp_path / "sum.tif")
    expected = sum(
        rasterio.features.rasterize([(g, v)], out_shape=(6, 6), transform=profile["transform"], dtype="int32")
        for g, v in zip(boxes, [1, 10, 100], strict=True)
    )
    assert np.array_equal(ours, expected) and ours.max() == 111
    gdal_cli(
        "gdal_rasterize",
        "-add",
        "-a",
        "v",
        "-init",
        "0",
        "-te",
        "0",
        "0",
        "6",
        "6",
        "-tr",
        "1",
        "1",
        "-ot",
        "Int32",
        path,
        str(tmp_path / "cli.tif"),
    )
    assert np.array_equal(ours, read(tmp_path / "cli.tif")[0])


def test_bbox_crs_is_transformed_to_the_output_crs(tmp_path: Path) -> None:
    with rasterio.open(SLOPE) as ds:
        crs = ds.crs
    to_ll = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    native = (244600.0, 1000000.0, 246300.0, 1000500.0)
    ll = to_ll.transform_bounds(*native)
    summary, _ = rasterize(POLYGONS, str(tmp_path / "ll.tif"), attribute="id", bbox=ll, bbox_crs="EPSG:4326", resolution=25)
    # Reference: the same bbox transformed back by pyproj (21 points per edge, as GDAL densifies).
    back = Transformer.from_crs("EPSG:4326", crs, always_xy=True).transform_bounds(*ll, densify_pts=21)
    assert summary.bounds.left == pytest.approx(back[0], abs=1e-6)
    assert summary.bounds.top == pytest.approx(back[3], abs=1e-6)
    assert (summary.width, summary.height) == (int(0.5 + (back[2] - back[0]) / 25), int(0.5 + (back[3] - back[1]) / 25))
    rasterize(POLYGONS, str(tmp_path / "native.tif"), attribute="id", bbox=back, resolution=25)
    assert np.array_equal(read(tmp_path / "ll.tif")[0], read(tmp_path / "native.tif")[0])
    # bbox_crs equal to the output CRS changes nothing; without bbox or without any CRS it is refused.
    same, _ = rasterize(POLYGONS, str(tmp_path / "same.tif"), attribute="id", bbox=native, bbox_crs=crs.to_wkt(), resolution=25)
    assert (same.bounds.left, same.bounds.top) == (native[0], native[3])
    with pytest.raises(GdalMcpError) as e:
        rasterize(POLYGONS, str(tmp_path / "x.tif"), attribute="id", bbox_crs="EPSG:4326", resolution=25)
    assert e.value.code == "invalid-argument" and "without bbox" in e.value.message


@pytest.mark.parametrize(
    ("kwargs", "dtype"),
    [
        ({"burn_value": 1}, "uint8"),
        ({"burn_value": 300}, "uint16"),
        ({"burn_value": -1}, "int8"),
        ({"burn_value": 70000, "nodata": -1}, "int32"),
        ({"burn_value": 1.5}, "float32"),
        ({"burn_value": 0.1}, "float64"),
        ({"burn_value": 1, "dtype": "Int16"}, "int16"),
        ({"burn_value": 1, "nodata": 255}, "uint8"),
    ],
)
def test_default_and_explicit_types(tmp_path: Path, kwargs: dict, dtype: str) -> None:
    summary, _ = rasterize(POLYGONS, str(tmp_path / "t.tif"), like=SLOPE, **kwargs)
    data, profile = read(tmp_path / "t.tif")
    assert summary.dtype == data.dtype.name == dtype
    # The background is nodata when one is declared (as gdal_rasterize leaves it), else 0 with no nodata.
    background = kwargs.get("nodata", 0)
    assert profile["nodata"] == kwargs.get("nodata") and (data == background).sum() == 84 * 78 - 125
    assert np.all(data[data != background] == np.array(kwargs["burn_value"], dtype=dtype))


def test_attribute_types_and_values(tmp_path: Path) -> None:
    boxes = [shapely.box(0, 0, 2, 2), shapely.box(2, 0, 4, 2)]
    path = write_layer(
        tmp_path / "z.gpkg",
        boxes,
        "EPSG:3857",
        big=np.array([5, 100000], dtype="int64"),
        small=np.array([-3, 4], dtype="int32"),
        real=np.array([0.5, 2.25]),
    )
    big, _ = rasterize(path, str(tmp_path / "big.tif"), attribute="big", resolution=1)
    small, _ = rasterize(path, str(tmp_path / "small.tif"), attribute="small", resolution=1)
    real, _ = rasterize(path, str(tmp_path / "real.tif"), attribute="real", resolution=1)
    assert (big.dtype, small.dtype, real.dtype) == ("uint32", "int8", "float64")
    # bbox default: the extent (0,0)-(4,2) widened by half a pixel.
    assert (real.width, real.height) == (5, 3)
    data, profile = read(tmp_path / "real.tif")
    expected = rasterio.features.rasterize(
        zip(boxes, [0.5, 2.25], strict=True), out_shape=(3, 5), transform=profile["transform"], dtype="float64"
    )
    assert np.array_equal(data, expected) and set(data.ravel().tolist()) == {0, 0.5, 2.25}
    # A value beyond the chosen type is clamped as GDAL does, with a warning for a fixed burn value.
    clamped, warnings = rasterize(path, str(tmp_path / "c.tif"), burn_value=300, dtype="Byte", resolution=1)
    assert any("does not fit uint8" in w for w in warnings) and read(tmp_path / "c.tif")[0].max() == 255
    rasterize(path, str(tmp_path / "c2.tif"), attribute="big", dtype="UInt16", resolution=1)
    assert sorted(set(read(tmp_path / "c2.tif")[0].ravel().tolist())) == [0, 5, 65535]


def test_copy_only_driver_is_staged(tmp_path: Path) -> None:
    summary, _ = rasterize(POLYGONS, str(tmp_path / "ids.png"), attribute="id", like=SLOPE)
    assert summary.driver == "PNG" and (summary.width, summary.height) == (84, 78)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".aux.xml")) == ["ids.png"]
    values, counts = np.unique(read(tmp_path / "ids.png")[0], return_counts=True)
    assert counts.tolist()[1:] == [75, 50]


def test_streamed_over_a_large_grid(tmp_path: Path) -> None:
    """64 MB of output pixels: what Python holds is one window and one batch of features."""
    tracemalloc.start()
    try:
        summary, _ = rasterize(
            POLYGONS,
            str(tmp_path / "big.tif"),
            attribute="id",
            size=[8000, 8000],
            creation_options={"COMPRESS": "DEFLATE", "TILED": True},
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (summary.width, summary.height, summary.dtype, summary.compression) == (8000, 8000, "uint8", "deflate")
    assert peak < 8000 * 8000 / 4, f"peak traced memory {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize(
    ("kwargs", "code", "needle"),
    [
        ({"like": SLOPE}, "invalid-argument", "exactly one of burn_value"),
        ({"like": SLOPE, "burn_value": 1, "attribute": "id"}, "invalid-argument", "exactly one of burn_value"),
        ({"like": SLOPE, "burn_value": 1, "resolution": 10}, "invalid-argument", "remove resolution"),
        ({"like": SLOPE, "burn_value": 1, "bbox": (0, 0, 1, 1), "crs": "EPSG:4326"}, "invalid-argument", "remove bbox, crs"),
        ({"burn_value": 1}, "invalid-argument", "like= a raster to copy the grid from"),
        ({"burn_value": 1, "resolution": 10, "size": [10, 10]}, "invalid-argument", "not both"),
        ({"burn_value": 1, "resolution": -1}, "invalid-argument", "resolution must be a positive number"),
        ({"burn_value": 1, "size": [0, 10]}, "invalid-argument", "size must be [width, height]"),
        ({"burn_value": 1, "resolution": 1, "bbox": (1, 0, 0, 1)}, "invalid-argument", "minx < maxx"),
        ({"burn_value": 1, "resolution": 1e-9}, "invalid-argument", "coarser resolution"),
        ({"like": SLOPE, "attribute": "nope"}, "not-found", "field 'nope' not found; fields are: id"),
        ({"like": SLOPE, "burn_value": 1, "dtype": "Byte", "nodata": -1}, "invalid-argument", "nodata -1.0 cannot"),
        ({"like": SLOPE, "burn_value": 1, "dtype": "Complex"}, "invalid-argument", "dtype 'Complex' is not supported"),
        ({"like": SLOPE, "burn_value": 1, "where": "nosuchfield = 1"}, "invalid-argument", "not a valid attribute filter"),
        ({"like": SLOPE, "burn_value": 1, "layer": "other"}, "not-found", "layer 'other' not found"),
        ({"like": SLOPE, "burn_value": 1, "crs": None, "format": "VRT"}, "unsupported", "cannot write VRT"),
        ({"like": SLOPE, "burn_value": 1, "bbox_crs": "EPSG:4326"}, "invalid-argument", "remove bbox_crs"),
        ({"like": SLOPE, "burn_value": 1, "add": True, "invert": True}, "invalid-argument", "exclude each other"),
        ({"like": SLOPE, "burn_value": 1.0, "nodata": 1}, "invalid-argument", "equals nodata"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, code: str, needle: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        rasterize(POLYGONS, str(tmp_path / "x.tif"), **kwargs)
    assert e.value.code == code and needle in e.value.message
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_grid_guard_names_degrees_and_the_pixel_limit(tmp_path: Path) -> None:
    # 10 "metres" on EPSG:4326 is 10 degrees: the layer (~0.02 degrees wide) becomes a 1x1 grid.
    with pytest.raises(GdalMcpError) as e:
        rasterize(POLYGONS, str(tmp_path / "x.tif"), burn_value=1, resolution=10, crs="EPSG:4326")
    assert e.value.code == "invalid-argument" and "degrees" in e.value.message and "1x1" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        rasterize(POLYGONS, str(tmp_path / "x.tif"), burn_value=1, resolution=1, max_pixels=1000)
    assert e.value.code == "invalid-argument" and "--max-pixels" in e.value.message and "metres" in e.value.message
    assert list(tmp_path.iterdir()) == []


def test_text_attribute_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        rasterize(WORLD, str(tmp_path / "x.tif"), attribute="name", resolution=1)
    assert e.value.code == "invalid-argument" and "not numeric" in e.value.message


def test_layer_without_crs_onto_a_georeferenced_grid(tmp_path: Path) -> None:
    with rasterio.open(SLOPE) as ds:
        t: Affine = ds.transform
        inner = shapely.box(*(t @ (10, 20)), *(t @ (20, 10)))  # pixels 10..19 x 10..19
    path = write_layer(tmp_path / "nocrs.gpkg", [inner], None, v=np.array([4], dtype="int32"))
    _, warnings = rasterize(path, str(tmp_path / "n.tif"), attribute="v", like=SLOPE)
    assert warnings == ["the layer has no CRS; its coordinates are taken to be in the output's CRS"]
    data, _ = read(tmp_path / "n.tif")
    assert (data == 4).sum() == 100 and (data[10:20, 10:20] == 4).all()
