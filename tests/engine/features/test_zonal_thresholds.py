"""zonal_stats thresholds: per zone, counts, shares and areas above / at or below each threshold, against numpy on a
mask rasterized by rasterio.features.rasterize and cell areas from pyproj.Geod (lon/lat) or the pixel size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyogrio.raw
import pytest
import shapely
from affine import Affine
from pyproj import Transformer
from rasterio.features import rasterize

import gdal_mcp.engine.features.zonal as zonal_module
import gdal_mcp.engine.tiles as tiles_module
from gdal_mcp.engine.features.zonal import zonal_stats
from gdal_mcp.engine.raster.thresholds import field_names
from gdal_mcp.errors import GdalMcpError
from tests.engine.features.test_zonal import write_zones
from tests.engine.raster.test_stats_thresholds import LONLAT, UTM, geod_row_areas, write

THRESHOLDS = [0.3, 0.6]


def expected_fields(a: np.ndarray, nodata: float, inside: np.ndarray, rows: np.ndarray | None, pixel: float | None) -> dict:
    """The threshold fields of one zone: numpy on the pixels `inside`, areas per row (`rows`) or per pixel (`pixel`)."""
    valid = inside & (a != nodata) & ~np.isnan(a)

    def area(mask: np.ndarray) -> float:
        return float((mask.sum(axis=1) * rows).sum()) if rows is not None else float(mask.sum()) * pixel  # type: ignore[operator]

    out = {}
    for t in THRESHOLDS:
        token = str(t).replace(".", "_")
        for side, mask in (("above", valid & (a > t)), ("at_or_below", valid & (a <= t))):
            n = int(mask.sum())
            out[f"{side}_{token}_count"] = n
            out[f"{side}_{token}_share"] = n / valid.sum() if valid.sum() else None
            out[f"{side}_{token}_area_m2"] = area(mask)
            out[f"{side}_{token}_area_ha"] = area(mask) / 1e4
            out[f"{side}_{token}_area_share"] = area(mask) / area(valid) if valid.sum() else None
    return out


def check(row: dict, expected: dict) -> None:
    for k, v in expected.items():
        if k.endswith("_count") or v is None:
            assert row[k] == v, k
        else:
            assert row[k] == pytest.approx(v, rel=1e-6, abs=1e-9), k


def test_zonal_thresholds_on_a_lonlat_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small tiles (32 px) and chunks: the zones cross many tiles and are read in several chunks.
    monkeypatch.setattr(tiles_module, "TILE_ALIGN", 32)
    monkeypatch.setattr(tiles_module, "MAX_TILE_SIDE", 32)
    monkeypatch.setattr(zonal_module, "WINDOW_PIXELS", 500)
    rng = np.random.default_rng(8)
    a = rng.random((200, 150)).astype("float32")
    a[rng.random(a.shape) < 0.1] = -1
    raster = write(tmp_path / "ndvi.tif", a, LONLAT, "EPSG:4326", -1)
    zones_4326 = [
        shapely.Polygon([(-25.13, 75.07), (20.11, 60.13), (35.07, 10.19), (-10.17, -5.11), (-28.03, 30.29)]),
        shapely.box(0.1, 40.1, 44.1, 79.1).difference(shapely.box(10.1, 50.1, 30.1, 70.1)),  # a hole
        shapely.box(100, 0, 110, 10),  # off the raster
    ]
    mercator = shapely.box(-2_000_003, 2_000_007, 3_000_011, 6_000_013)  # in EPSG:3857, reprojected
    to_4326 = Transformer.from_crs("EPSG:3857", "EPSG:4326", always_xy=True)
    zones_path = write_zones(tmp_path / "zones.gpkg", zones_4326, "EPSG:4326", name=np.array(["a", "b", "c"]))
    merc_path = write_zones(tmp_path / "merc.gpkg", [mercator], "EPSG:3857")
    result, warnings = zonal_stats(raster, zones_path, stats=["count"], thresholds=THRESHOLDS, id_field="name")
    rows = geod_row_areas(LONLAT, 200)
    for row, zone in zip(result.rows, zones_4326, strict=True):
        inside = rasterize([(zone, 1)], out_shape=a.shape, transform=LONLAT, fill=0, dtype="uint8").astype(bool)
        check(row, expected_fields(a, -1, inside, rows, None))
        assert row["count"] == row["above_0_3_count"] + row["at_or_below_0_3_count"]
    assert result.rows[0]["above_0_3_count"] > 1000 and result.rows[2]["above_0_3_count"] == 0
    assert result.rows[2]["above_0_3_share"] is None and result.rows[2]["above_0_3_area_m2"] == 0.0
    # Zones in another CRS: reprojected to the raster's (a Mercator box is a lon/lat box).
    (merc_row,), _ = zonal_stats(raster, merc_path, stats=["count"], thresholds=THRESHOLDS)[0].rows, None
    box = shapely.ops.transform(to_4326.transform, mercator)
    inside = rasterize([(box, 1)], out_shape=a.shape, transform=LONLAT, fill=0, dtype="uint8").astype(bool)
    check(merc_row, expected_fields(a, -1, inside, rows, None))


def test_zonal_thresholds_projected_with_dst(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    a = rng.random((90, 70)).astype("float32")
    a[:5] = np.nan
    raster = write(tmp_path / "utm.tif", a, UTM, "EPSG:32618", None)
    zones = [shapely.box(500050, 3998500, 500600, 3999990), shapely.Point(500105, 3999000).buffer(200)]
    path = write_zones(tmp_path / "z.gpkg", zones, "EPSG:32618", above_0_3_count=np.array([-1, -1]))
    result, warnings = zonal_stats(raster, path, stats=["mean"], thresholds=THRESHOLDS, dst=str(tmp_path / "out.gpkg"))
    assert "above_0_3_count" in warnings[0]  # the zones' own field of that name is replaced
    names = [n for n, _ in field_names(THRESHOLDS)]
    assert result.summary is not None and result.summary.fields == ["mean", *names]
    _, _, _, written = pyogrio.raw.read(str(tmp_path / "out.gpkg"))
    columns = dict(zip(result.summary.fields, written, strict=True))
    for i, zone in enumerate(zones):
        inside = rasterize([(zone, 1)], out_shape=a.shape, transform=UTM, fill=0, dtype="uint8").astype(bool)
        expected = expected_fields(a, -999, inside, None, 200.0)
        check(result.rows[i], expected)
        check({k: columns[k][i].item() for k in names}, expected)
        assert result.rows[i]["above_0_6_area_m2"] == result.rows[i]["above_0_6_count"] * 200.0
    assert columns["above_0_3_count"].dtype == np.int64 and columns["above_0_3_share"].dtype == np.float64


def test_zonal_thresholds_are_checked(tmp_path: Path) -> None:
    raster = write(tmp_path / "x.tif", np.zeros((4, 4), "uint8"), UTM, "EPSG:32618", None)
    path = write_zones(tmp_path / "z.gpkg", [shapely.box(500000, 3999950, 500030, 4000000)], "EPSG:32618")
    with pytest.raises(GdalMcpError) as e:
        zonal_stats(raster, path, thresholds=[float("inf")])
    assert e.value.code == "invalid-argument" and "finite" in e.value.message
    # No CRS on either side: counts and shares, no areas.
    plain = write(tmp_path / "plain.tif", np.arange(16, dtype="uint8").reshape(4, 4), Affine(1, 0, 0, 0, -1, 4), None, None)
    bare = write_zones(tmp_path / "bare.gpkg", [shapely.box(0, 0, 4, 4)], None)
    result, warnings = zonal_stats(plain, bare, stats=["count"], thresholds=[7])
    row = result.rows[0]
    assert (row["above_7_count"], row["above_7_share"], row["above_7_area_m2"], row["at_or_below_7_count"]) == (8, 0.5, None, 8)
    assert any("no CRS" in w for w in warnings)
