"""raster_stats(categorical=true) and zonal_stats(categorical=true) through an MCP client."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import rasterio
import shapely
from fastmcp import Client
from rasterio.features import geometry_mask
from rasterio.transform import from_origin

from tests.engine.raster.test_categories import countries_grid, reference_areas, write_zones
from tests.helpers import call


async def test_raster_stats_categorical_geodesic_areas(client: Client, ws: Path) -> None:
    (ws / "cats").mkdir(exist_ok=True)
    _, grid, names = countries_grid(ws / "cats" / "countries.tif")
    err, res = await call(client, "raster_stats", input="cats/countries.tif", categorical=True)
    assert not err, res
    assert res["bands"] == [] and res["area_method"] == "geodesic" and res["path"] == "cats/countries.tif"
    ref = reference_areas(grid, 0.5)
    classes = res["categories"][0]["classes"]
    assert [c["value"] for c in classes] == sorted(ref)
    for c in classes:
        n, area = ref[c["value"]]
        assert c["count"] == n and c["area_m2"] == pytest.approx(area, rel=1e-6)
        assert c["area_ha"] == pytest.approx(area / 1e4, rel=1e-6)
    # bbox in another CRS (web mercator around France): only the classes there.
    err, res = await call(
        client,
        "raster_stats",
        input="cats/countries.tif",
        categorical=True,
        bbox=[-300000, 5000000, 700000, 6500000],
        bbox_crs="EPSG:3857",
    )
    assert not err, res
    found = {names[c["value"] - 1] for c in res["categories"][0]["classes"]}
    assert "France" in found and "Brazil" not in found


async def test_raster_stats_categorical_errors(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_stats", input="raster/slope.tif", categorical=True, percentiles=[50])
    assert err and res["error"]["code"] == "invalid-argument" and "categorical" in res["error"]["message"]
    (ws / "cats").mkdir(exist_ok=True)
    with rasterio.open(
        ws / "cats" / "continuous.tif",
        "w",
        driver="GTiff",
        width=150,
        height=100,
        count=1,
        dtype="float32",
        crs="EPSG:32618",
        transform=from_origin(0, 0, 10, 10),
    ) as ds:
        ds.write(np.random.default_rng(1).random((100, 150), dtype="float32"), 1)
    err, res = await call(client, "raster_stats", input="cats/continuous.tif", categorical=True)
    assert err and res["error"]["code"] == "invalid-argument" and "raster_reclassify" in res["error"]["message"]


async def test_zonal_stats_categorical_with_output(client: Client, ws: Path) -> None:
    (ws / "cats").mkdir(exist_ok=True)
    _, grid, _ = countries_grid(ws / "cats" / "countries2.tif")
    boxes = [shapely.box(-10, 35, 30, 60), shapely.box(100, -45, 155, -10)]
    write_zones(ws / "cats" / "boxes.gpkg", boxes, "EPSG:4326", ["europe", "australia"])
    err, res = await call(
        client,
        "zonal_stats",
        input="cats/countries2.tif",
        zones="cats/boxes.gpkg",
        categorical=True,
        id_field="zone",
        output="cats/boxes_classes.gpkg",
    )
    assert not err, res
    assert [r["id"] for r in res["rows"]] == ["europe", "australia"]
    for row, box in zip(res["rows"], boxes, strict=True):
        inside = ~geometry_mask([box], out_shape=grid.shape, transform=from_origin(-180, 90, 0.5, 0.5))
        ref = reference_areas(grid, 0.5, inside)
        valid = sum(n for n, _ in ref.values())
        assert row["count"] == valid
        assert {k: v["count"] for k, v in row["classes"].items()} == {str(k): n for k, (n, _) in ref.items()}
        assert {k: v["area_m2"] for k, v in row["classes"].items()} == pytest.approx(
            {str(k): a for k, (_, a) in ref.items()}, rel=1e-6
        )
        assert sum(v["fraction"] for v in row["classes"].values()) == pytest.approx(1.0)
    info = pyogrio.read_info(str(ws / "cats" / "boxes_classes.gpkg"))
    assert "classes" in list(info["fields"])
    _, _, _, fields = pyogrio.raw.read(str(ws / "cats" / "boxes_classes.gpkg"))
    written = dict(zip(info["fields"], fields, strict=True))
    assert [json.loads(t) for t in written["classes"]] == [r["classes"] for r in res["rows"]]
    assert np.asarray(written["count"]).tolist() == [r["count"] for r in res["rows"]]
