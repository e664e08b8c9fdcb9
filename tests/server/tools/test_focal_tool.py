"""raster_focal through the FastMCP client, against numpy on the same pixels (the reference and tolerances of
tests/engine/raster/test_focal.py: exact for min/max/sum/median/range, one Float32 step for mean and std)."""

from __future__ import annotations

from pathlib import Path

import pytest
import rasterio
from fastmcp import Client

from tests.engine.raster.test_focal import assert_matches, circle, reference, square
from tests.helpers import call

DEM = "raster/jacksboro_dem.tif"
TOPOBATHY = "raster/topobathy.tif"
OUT = "out/focal"


async def test_mean_of_the_dem(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_focal", input=DEM, output=f"{OUT}/mean.tif", overwrite=True)
    assert not err, res
    assert res["output"] == f"{OUT}/mean.tif" and res["uri"].endswith(f"{OUT}/mean.tif")
    assert res["statistic"] == "mean" and res["window"] == {"size": 3, "cells": 9, "pixel_size_m": None}
    assert res["summary"]["dtype"] == "float32" and res["summary"]["crs"] == "EPSG:4326"
    with rasterio.open(ws / DEM) as ds:
        a = ds.read(1)
    with rasterio.open(ws / OUT / "mean.tif") as ds:
        got, nodata = ds.read(1), ds.nodata
    assert_matches(got, nodata, reference(a, square(3), "mean"), "mean")


async def test_range_in_a_circle_with_a_new_nodata(client: Client, ws: Path) -> None:
    with rasterio.open(ws / TOPOBATHY) as ds:
        a, profile = ds.read(1), ds.profile
    a[40:50, 60:75] = -32768  # a hole
    profile.update(nodata=-32768)
    (ws / "work").mkdir(exist_ok=True)
    with rasterio.open(ws / "work" / "focal_topobathy.tif", "w", **profile) as out:
        out.write(a, 1)
    err, res = await call(
        client,
        "raster_focal",
        input="work/focal_topobathy.tif",
        output=f"{OUT}/range.tif",
        statistic="range",
        shape="circle",
        size=5,
        nodata=-99999,
        output_type="Float32",
        overwrite=True,
    )
    assert not err, res
    assert res["window"]["cells"] == 13 and res["summary"]["nodata"] == -99999
    with rasterio.open(ws / OUT / "range.tif") as ds:
        got = ds.read(1)
    assert_matches(got, -99999, reference(a, circle(5), "range", -32768), "range")
    assert not [p.name for p in (ws / OUT).iterdir() if "focal-" in p.name]  # no temporary max/min left


@pytest.mark.parametrize(
    "args",
    [
        {"size": 4},
        {"kernel": []},
        {"kernel": [[1, 1, 1], [1, 1, 1]]},
        {"statistic": "variance"},
        {"size": 5, "radius": 100.0},
        {"radius": 1.0},
        {"bands": [3]},
    ],
)
async def test_bad_arguments(client: Client, ws: Path, args: dict) -> None:
    output = f"{OUT}/bad.tif"
    err, res = await call(client, "raster_focal", input=DEM, output=output, **args)
    assert err and res["error"]["code"] == "invalid-argument", res
    assert not (ws / output).exists()
