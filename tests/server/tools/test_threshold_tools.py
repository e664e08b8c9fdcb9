"""raster_stats thresholds and weights="area", zonal_stats thresholds, through an MCP client, against numpy on the same
pixels, pyproj.Geod cell areas and masks rasterized by rasterio."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyogrio.raw
import pytest
import shapely
from fastmcp import Client
from rasterio.features import rasterize

from tests.engine.raster.test_stats_thresholds import LONLAT, UTM, geod_row_areas, write
from tests.helpers import call


def ndvi(ws: Path) -> np.ndarray:
    """A lon/lat float32 "NDVI" (0.5° cells, 80°N to 20°S) with nodata -1, written to ws/thr/ndvi.tif."""
    (ws / "thr").mkdir(exist_ok=True)
    rng = np.random.default_rng(11)
    a = (rng.random((200, 150)) * 1.2 - 0.2).astype("float32")
    a[rng.random(a.shape) < 0.08] = -1
    write(ws / "thr" / "ndvi.tif", a, LONLAT, "EPSG:4326", -1)
    return a


async def test_share_of_a_scene_above_a_threshold_in_one_call(client: Client, ws: Path) -> None:
    a = ndvi(ws)
    err, res = await call(client, "raster_stats", input="thr/ndvi.tif", thresholds=[0.3])
    assert not err, res
    valid = a != -1
    rows = geod_row_areas(LONLAT, 200)
    above = valid & (a > 0.3)
    t = res["bands"][0]["thresholds"][0]
    assert t["threshold"] == 0.3 and res["area_method"] == "geodesic" and res["weights"] == "none"
    assert t["above"]["count"] == above.sum() and t["above"]["share"] == above.sum() / valid.sum()
    assert t["at_or_below"]["count"] == (valid & (a <= 0.3)).sum()
    area = float((above.sum(axis=1) * rows).sum())
    assert t["above"]["area_m2"] == pytest.approx(area, rel=1e-6)
    assert t["above"]["area_ha"] == pytest.approx(area / 1e4, rel=1e-6)
    assert t["above"]["area_share"] == pytest.approx(area / float((valid.sum(axis=1) * rows).sum()), rel=1e-6)
    assert any("weights='area'" in w for w in res["warnings"])


async def test_area_weighted_mean_on_a_lonlat_grid(client: Client, ws: Path) -> None:
    a = ndvi(ws)
    err, res = await call(client, "raster_stats", input="thr/ndvi.tif", weights="area", percentiles=[25, 50, 75])
    assert not err, res
    valid = a != -1
    v = a[valid]
    w = np.broadcast_to(geod_row_areas(LONLAT, 200)[:, None], a.shape)[valid]
    b = res["bands"][0]
    mean = np.average(v.astype("float64"), weights=w)
    assert res["weights"] == "area" and b["mean"] == pytest.approx(mean, rel=1e-7)
    assert b["std"] == pytest.approx(math.sqrt(np.average((v - mean) ** 2, weights=w)), rel=1e-6)
    assert b["percentiles"] == {
        k: float(np.percentile(v, float(k), weights=w, method="inverted_cdf")) for k in ("25", "50", "75")
    }
    assert b["area_m2"] == pytest.approx(float(w.sum()), rel=1e-6)


async def test_thresholds_and_weights_are_refused_with_categorical(client: Client, ws: Path) -> None:
    ndvi(ws)
    err, res = await call(client, "raster_stats", input="thr/ndvi.tif", categorical=True, thresholds=[0.3])
    assert err and res["error"]["code"] == "invalid-argument" and "categorical" in res["error"]["message"]
    err, res = await call(client, "raster_stats", input="thr/ndvi.tif", weights="latitude")
    assert err and "weights" in str(res)


async def test_zonal_thresholds_per_zone(client: Client, ws: Path) -> None:
    a = ndvi(ws)
    zones = [shapely.box(-20.3, 30.3, 10.3, 70.3), shapely.Point(20.1, 0.1).buffer(11.3)]
    pyogrio.raw.write(
        str(ws / "thr" / "zones.gpkg"),
        shapely.to_wkb(np.asarray(zones)),
        [np.array(["north", "south"])],
        ["name"],
        geometry_type="Polygon",
        crs="EPSG:4326",
    )
    err, res = await call(
        client,
        "zonal_stats",
        input="thr/ndvi.tif",
        zones="thr/zones.gpkg",
        stats=["count"],
        thresholds=[0.3],
        id_field="name",
        output="thr/zones_ndvi.gpkg",
    )
    assert not err, res
    rows = geod_row_areas(LONLAT, 200)
    written = dict(zip(res["summary"]["fields"], pyogrio.raw.read(str(ws / "thr" / "zones_ndvi.gpkg"))[3], strict=True))
    for i, (row, zone) in enumerate(zip(res["rows"], zones, strict=True)):
        inside = rasterize([(zone, 1)], out_shape=a.shape, transform=LONLAT, fill=0, dtype="uint8").astype(bool)
        valid = inside & (a != -1)
        above, below = valid & (a > 0.3), valid & (a <= 0.3)
        assert (row["count"], row["above_0_3_count"], row["at_or_below_0_3_count"]) == (valid.sum(), above.sum(), below.sum())
        assert row["above_0_3_share"] == above.sum() / valid.sum()
        area = float((above.sum(axis=1) * rows).sum())
        assert row["above_0_3_area_m2"] == pytest.approx(area, rel=1e-6)
        assert row["above_0_3_area_ha"] == pytest.approx(area / 1e4, rel=1e-6)
        assert row["at_or_below_0_3_area_m2"] == pytest.approx(float((below.sum(axis=1) * rows).sum()), rel=1e-6)
        assert row["above_0_3_area_share"] == pytest.approx(area / float((valid.sum(axis=1) * rows).sum()), rel=1e-6)
        assert written["above_0_3_count"][i] == row["above_0_3_count"]
        assert written["above_0_3_area_m2"][i] == pytest.approx(row["above_0_3_area_m2"], rel=1e-12)


async def test_projected_thresholds_use_the_pixel_size(client: Client, ws: Path) -> None:
    (ws / "thr").mkdir(exist_ok=True)
    a = np.random.default_rng(12).integers(0, 10, (60, 50)).astype("uint8")
    write(ws / "thr" / "classes.tif", a, UTM, "EPSG:32618", None)
    err, res = await call(client, "raster_stats", input="thr/classes.tif", thresholds=[4, 8.5])
    assert not err, res
    assert res["pixel_area_m2"] == 200.0 and res["area_method"] == "projected"
    for t in res["bands"][0]["thresholds"]:
        n = int((a > t["threshold"]).sum())
        assert (t["above"]["count"], t["above"]["area_m2"]) == (n, n * 200.0)
        assert t["at_or_below"]["area_m2"] == (a.size - n) * 200.0
