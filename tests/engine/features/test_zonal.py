"""Zonal statistics: the MANIFEST/rasterstats facts, an independent numpy reference, zone types, output, errors."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pyogrio.raw
import pytest
import rasterio
import shapely
from pyproj import Transformer
from rasterio.features import geometry_mask

import gdal_mcp.engine.features.zonal as zonal_module
import gdal_mcp.engine.tiles as tiles_module
from gdal_mcp.engine.features.zonal import zonal_stats
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

SLOPE = str(DATA / "raster" / "slope.tif")
POLYGONS = str(DATA / "vector" / "polygons.shp")
POINTS = str(DATA / "vector" / "points.shp")
LINES = str(DATA / "vector" / "lines.shp")
FLOAT_NAN = str(DATA / "raster" / "float_nan.tif")
ALL = [
    "count",
    "min",
    "max",
    "mean",
    "sum",
    "std",
    "median",
    "majority",
    "minority",
    "unique",
    "range",
    "nodata",
    "percentile_10",
    "percentile_90.5",
]

# python-rasterstats 0.21.0 `zonal_stats(polygons.shp, slope.tif, stats=ALL)` (float32 accumulation for
# sum/mean/std; we accumulate in float64, hence the tolerance on those).
RASTERSTATS = [
    {
        "min": 6.575114727020264,
        "max": 22.273418426513672,
        "mean": 14.660084635416666,
        "count": 75,
        "sum": 1099.50634765625,
        "std": 3.0407310788675135,
        "median": 14.283852577209473,
        "majority": 6.575114727020264,
        "minority": 6.575114727020264,
        "unique": 75,
        "range": 15.698303699493408,
        "percentile_10": 11.310429573059082,
        "percentile_90.5": 18.81821060180664,
        "nodata": 0,
    },
    {
        "min": 16.940950393676758,
        "max": 82.69043731689453,
        "mean": 56.60576171875,
        "count": 50,
        "sum": 2830.2880859375,
        "std": 14.212444407500138,
        "median": 55.908355712890625,
        "majority": 16.940950393676758,
        "minority": 16.940950393676758,
        "unique": 50,
        "range": 65.74948692321777,
        "percentile_10": 37.81666946411133,
        "percentile_90.5": 74.43663024902344,
        "nodata": 0,
    },
]
ACCUMULATED = ("mean", "sum", "std")


def write_zones(path: Path, geoms, crs: str | None, geometry_type: str = "Polygon", **fields: np.ndarray) -> str:
    pyogrio.raw.write(
        str(path), shapely.to_wkb(np.asarray(geoms)), list(fields.values()), list(fields), geometry_type=geometry_type, crs=crs
    )
    return str(path)


def numpy_reference(raster: str, geom, all_touched: bool = False) -> dict:
    """Statistics of the pixels whose centre is in `geom`, from the whole band in memory."""
    with rasterio.open(raster) as ds:
        data = ds.read(1, masked=True)
        outside = geometry_mask([geom], out_shape=data.shape, transform=ds.transform, all_touched=all_touched)
    valid = data[~outside].compressed()
    keys, counts = np.unique(valid, return_counts=True)
    return {
        "count": valid.size,
        "min": float(valid.min()),
        "max": float(valid.max()),
        "mean": float(valid.astype("float64").mean()),
        "sum": float(valid.astype("float64").sum()),
        "std": float(valid.astype("float64").std()),
        "median": float(np.median(valid)),
        "majority": float(keys[np.argmax(counts)]),
        "minority": float(keys[np.argmin(counts)]),
        "unique": keys.size,
        "range": float(valid.max()) - float(valid.min()),
        "nodata": int(np.ma.getmaskarray(data)[~outside].sum()),
        "percentile_10": float(np.percentile(valid, 10)),
        "percentile_90.5": float(np.percentile(valid, 90.5)),
    }


def polygons() -> list:
    return list(shapely.from_wkb(pyogrio.raw.read(POLYGONS)[2]))


def check(row: dict, expected: dict, rel: float = 1e-6) -> None:
    for k, v in expected.items():
        if k in ACCUMULATED:
            assert row[k] == pytest.approx(v, rel=rel), k
        else:
            assert row[k] == v, k


def test_manifest_facts(tmp_path: Path) -> None:
    result, warnings = zonal_stats(SLOPE, POLYGONS)
    assert warnings == [] and result.warnings == []
    assert (result.row_count, result.truncated, result.remaining, result.band) == (2, False, 0, 1)
    assert result.stats == ["count", "min", "max", "mean", "sum", "std", "median", "majority"]
    one, two = result.rows
    assert (one["id"], one["count"], two["id"], two["count"]) == (0, 75, 1, 50)
    assert round(one["mean"], 2) == 14.66
    assert two["mean"] == pytest.approx(56.6058, abs=5e-5)


def test_every_statistic_as_rasterstats_and_numpy(tmp_path: Path) -> None:
    result, _ = zonal_stats(SLOPE, POLYGONS, stats=ALL)
    for row, expected, geom in zip(result.rows, RASTERSTATS, polygons(), strict=True):
        check(row, expected)
        check(row, numpy_reference(SLOPE, geom), rel=1e-12)
        assert set(row) == {"id", *ALL}
        assert isinstance(row["count"], int) and isinstance(row["nodata"], int) and isinstance(row["unique"], int)


def test_all_touched(tmp_path: Path) -> None:
    result, _ = zonal_stats(SLOPE, POLYGONS, stats=["count", "mean"], all_touched=True)
    # rasterstats: counts 95 and 73, means 15.7394557 and 50.5920209.
    assert [r["count"] for r in result.rows] == [95, 73]
    assert [r["mean"] for r in result.rows] == pytest.approx([15.739455694901316, 50.59202094927226], rel=1e-6)
    for row, geom in zip(result.rows, polygons(), strict=True):
        assert row["count"] == numpy_reference(SLOPE, geom, all_touched=True)["count"]


def test_points_take_their_pixel_and_lines_their_path() -> None:
    points, _ = zonal_stats(SLOPE, POINTS, stats=["count", "mean"])
    # rasterstats: one pixel each.
    assert [(r["count"], r["mean"]) for r in points.rows] == [
        (1, 11.386489868164062),
        (1, 35.54704666137695),
        (1, 53.58441162109375),
    ]
    with rasterio.open(SLOPE) as ds:
        for row, pt in zip(points.rows, shapely.from_wkb(pyogrio.raw.read(POINTS)[2]), strict=True):
            assert row["mean"] == float(ds.read(1)[ds.index(pt.x, pt.y)])
    lines, _ = zonal_stats(SLOPE, LINES, stats=["count", "min", "max", "median"])
    assert [r["count"] for r in lines.rows] == [58, 32]  # rasterstats
    assert [r["median"] for r in lines.rows] == [16.254602432250977, 20.30215072631836]


def test_chunked_zones_give_the_same_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    whole, _ = zonal_stats(SLOPE, POLYGONS, stats=ALL)
    monkeypatch.setattr(zonal_module, "WINDOW_PIXELS", 7)  # a zone read in many one-row chunks
    chunked, _ = zonal_stats(SLOPE, POLYGONS, stats=ALL)
    for a, b in zip(whole.rows, chunked.rows, strict=True):
        check(b, a, rel=1e-12)


def test_zones_in_another_crs_are_reprojected(tmp_path: Path) -> None:
    meta, _, wkb, fields = pyogrio.raw.read(POLYGONS)
    to_ll = Transformer.from_crs(meta["crs"], "EPSG:4326", always_xy=True)
    ll = shapely.transform(shapely.from_wkb(wkb), lambda xy: np.column_stack(to_ll.transform(xy[:, 0], xy[:, 1])))
    path = write_zones(tmp_path / "ll.gpkg", ll, "EPSG:4326", zone=np.array(["a", "b"], dtype=object))
    result, warnings = zonal_stats(SLOPE, path, stats=["count", "mean"], id_field="zone")
    assert warnings == []
    assert [(r["id"], r["count"]) for r in result.rows] == [("a", 75), ("b", 50)]
    assert result.rows[0]["mean"] == pytest.approx(14.660084635416666, rel=1e-6)


def test_nodata_masked_and_nan_pixels_are_left_out(tmp_path: Path) -> None:
    with rasterio.open(SLOPE) as ds:
        everything = shapely.box(*ds.bounds)
        valid = int((ds.read_masks(1) != 0).sum())
    path = write_zones(tmp_path / "all.gpkg", [everything], None)
    result, warnings = zonal_stats(SLOPE, path, stats=["count", "nodata", "min", "max"])
    assert warnings == ["the zones have no CRS: their coordinates are taken to be in the raster's CRS"]
    row = result.rows[0]
    assert row["count"] + row["nodata"] == 84 * 78 and row["count"] == valid
    assert row["count"] / (84 * 78) == pytest.approx(0.9512, abs=1e-4)  # MANIFEST: valid 95.12 %
    assert (row["min"], round(row["max"], 2)) == (0.0, 737.93)
    # float_nan.tif: 3x2 south-up, nodata NaN; MANIFEST min -1.88, max 1.41, 83.33 % valid.
    path = write_zones(tmp_path / "fn.gpkg", [shapely.box(0, 0, 300, 200)], None)
    fn, _ = zonal_stats(FLOAT_NAN, path, stats=["count", "nodata", "min", "max"])
    assert (fn.rows[0]["count"], fn.rows[0]["nodata"]) == (5, 1)
    assert (round(fn.rows[0]["min"], 2), round(fn.rows[0]["max"], 2)) == (-1.88, 1.41)


def test_empty_zones_and_ties(tmp_path: Path) -> None:
    data = np.array([[1, 1, 2, 2], [3, 3, 3, 9], [5, 5, 9, 9], [7, 7, 7, 7]], dtype="int16")
    raster = tmp_path / "ties.tif"
    transform = rasterio.transform.from_origin(0, 4, 1, 1)
    with rasterio.open(
        raster, "w", driver="GTiff", width=4, height=4, count=1, dtype="int16", nodata=9, transform=transform, crs="EPSG:3857"
    ) as out:
        out.write(data, 1)
    zones = [shapely.box(0, 2, 4, 4), shapely.box(10, 10, 11, 11), shapely.box(0, 0, 4, 4)]
    path = write_zones(tmp_path / "z.gpkg", zones, "EPSG:3857")
    result, _ = zonal_stats(str(raster), path, stats=["count", "majority", "minority", "unique", "nodata", "median", "mean"])
    top, outside, whole = result.rows
    # Top half: 1 1 2 2 / 3 3 3 (9 is nodata): 3 is the majority; 1 and 2 tie as minority: the smaller wins.
    assert (top["count"], top["majority"], top["minority"], top["unique"], top["nodata"]) == (7, 3.0, 1.0, 3, 1)
    assert outside == {
        "id": 1,
        "count": 0,
        "majority": None,
        "minority": None,
        "unique": None,
        "nodata": 0,
        "median": None,
        "mean": None,
    }
    # Whole raster: 7 (x4) is the majority; 1, 2 and 5 tie (x2) as minority: 1.
    assert (whole["count"], whole["majority"], whole["minority"], whole["nodata"]) == (13, 7.0, 1.0, 3)
    assert whole["median"] == 3.0 and whole["mean"] == pytest.approx(data[data != 9].mean())


def test_limit_truncates_the_table_and_dst_gets_every_zone(tmp_path: Path) -> None:
    result, _ = zonal_stats(SLOPE, POLYGONS, limit=1, stats=["count"])
    assert (result.rows, result.row_count, result.truncated, result.remaining) == ([{"id": 0, "count": 75}], 2, True, 1)
    out = tmp_path / "zones.gpkg"
    result, _ = zonal_stats(SLOPE, POLYGONS, limit=0, stats=["count", "mean", "percentile_50"], id_field="id", dst=str(out))
    assert (result.rows, result.row_count, result.truncated, result.remaining) == ([], 2, True, 2)
    summary = result.summary
    assert summary is not None and (summary.driver, summary.feature_count, summary.geometry_type) == ("GPKG", 2, "Polygon")
    assert summary.fields == ["id", "count", "mean", "percentile_50"]
    meta, _, wkb, fields = pyogrio.raw.read(str(out))
    values = dict(zip(meta["fields"], fields, strict=True))
    assert values["id"].tolist() == [1, 2] and values["count"].tolist() == [75, 50]
    assert values["mean"][0] == pytest.approx(14.660084635416666, rel=1e-6)
    assert "Albers" in meta["crs"]
    # The zones keep their own geometry.
    assert shapely.equals(shapely.from_wkb(wkb), np.asarray(polygons())).all()


def test_dst_shapefile_replaces_a_field_of_the_same_name(tmp_path: Path) -> None:
    first = tmp_path / "first.shp"
    zonal_stats(SLOPE, POLYGONS, stats=["count"], dst=str(first))
    result, warnings = zonal_stats(SLOPE, str(first), stats=["count", "max"], all_touched=True, dst=str(tmp_path / "b.shp"))
    assert warnings == ["the zones' field(s) count are replaced by the statistics of the same name in dst"]
    assert result.summary is not None and result.summary.fields == ["id", "count", "max"]
    meta, _, _, fields = pyogrio.raw.read(str(tmp_path / "b.shp"))
    assert fields[1].tolist() == [95, 73]


def test_progress_is_reported_per_tile_with_the_zones_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tiles_module, "TILE_ALIGN", 8)  # 16 x 16 tiles: 6 x 5 of them on slope.tif
    monkeypatch.setattr(tiles_module, "MAX_TILE_SIDE", 16)
    reports: list[tuple[float, str]] = []
    zonal_stats(SLOPE, POLYGONS, progress=lambda f, m="": reports.append((f, m)))
    # The tiles the zones' windows reach (pixels covering their bounds, rounded outward).
    reached = set()
    with rasterio.open(SLOPE) as ds:
        for geom in shapely.from_wkb(pyogrio.raw.read(POLYGONS)[2]):
            w = ds.window(*geom.bounds)
            c0, r0 = max(0, math.floor(w.col_off)), max(0, math.floor(w.row_off))
            c1, r1 = min(ds.width, math.ceil(w.col_off + w.width)), min(ds.height, math.ceil(w.row_off + w.height))
            cols, rows = range(c0 // 16, (c1 - 1) // 16 + 1), range(r0 // 16, (r1 - 1) // 16 + 1)
            reached |= {(r, c) for r in rows for c in cols}
    messages = [m for _, m in reports]
    assert len(reached) > 2 and len(messages) == len(reached) + 2  # one per tile, the group's end, the total
    assert messages[-2:] == ["zonal statistics: 2/2 zones", "zonal statistics of 2 zones"]
    finished = [int(m.split(": ")[1].split("/")[0]) for m in messages[:-1]]
    assert finished == sorted(finished) and [f for f, _ in reports] == sorted(f for f, _ in reports)
    assert reports[-1][0] == 1.0


def test_large_zone_is_streamed(tmp_path: Path) -> None:
    """A zone over 64 million Float64 pixels (512 MB): the arrays held are one chunk, not the zone."""
    vrt = tmp_path / "big.vrt"
    vrt.write_text(
        '<VRTDataset rasterXSize="8000" rasterYSize="8000"><SRS>EPSG:3857</SRS>'
        "<GeoTransform>0, 1, 0, 8000, 0, -1</GeoTransform>"
        '<VRTRasterBand dataType="Float64" band="1"/></VRTDataset>'
    )
    path = write_zones(tmp_path / "big.gpkg", [shapely.box(0, 0, 8000, 8000), shapely.box(10, 10, 20, 20)], "EPSG:3857")
    tracemalloc.start()
    try:
        result, _ = zonal_stats(str(vrt), path, stats=["count", "min", "max", "mean", "sum", "std", "nodata", "range"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.rows[0] == {
        "id": 0,
        "count": 64_000_000,
        "min": 0.0,
        "max": 0.0,
        "mean": 0.0,
        "sum": 0.0,
        "std": 0.0,
        "nodata": 0,
        "range": 0.0,
    }
    assert result.rows[1]["count"] == 100
    assert peak < 8000 * 8000 * 8 / 10, f"peak traced memory {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("kwargs", "code", "needle"),
    [
        ({"stats": ["count", "mode"]}, "invalid-argument", "unknown statistic 'mode'"),
        ({"stats": ["percentile_101"]}, "invalid-argument", "unknown statistic 'percentile_101'"),
        ({"stats": []}, "invalid-argument", "stats must be a non-empty list"),
        ({"band": 2}, "invalid-argument", "band(s) [2] do not exist; the raster has 1 band(s)"),
        ({"id_field": "name"}, "not-found", "id_field 'name' not found; fields are: id"),
        ({"limit": -1}, "invalid-argument", "limit must be an integer"),
        ({"layer": "other"}, "not-found", "layer 'other' not found"),
        ({"dst": "out.unknown"}, "invalid-argument", "cannot tell the vector format"),
    ],
)
def test_bad_arguments(kwargs: dict, code: str, needle: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        zonal_stats(SLOPE, POLYGONS, **kwargs)
    assert e.value.code == code and needle in e.value.message


def test_zones_must_be_a_vector_file() -> None:
    with pytest.raises(GdalMcpError) as e:
        zonal_stats(SLOPE, SLOPE)
    assert e.value.code in ("unsupported", "gdal-error")
