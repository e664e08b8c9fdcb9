"""raster_reclassify through an MCP client."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rasterio
from fastmcp import Client

from tests.helpers import call


async def test_reclassify_slope(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "raster_reclassify",
        input="raster/slope.tif",
        output="out/slope4.tif",
        classes=[
            {"min": 0, "max": 5, "value": 1},
            {"min": 5, "max": 15, "value": 2},
            {"min": 15, "max": 45, "value": 3},
            {"min": 45, "value": 4},
        ],
    )
    assert not err, res
    assert res["summary"]["dtype"] == "uint8"
    with rasterio.open(ws / "raster" / "slope.tif") as ds, rasterio.open(ws / "out" / "slope4.tif") as out:
        v, got = ds.read(1, masked=True), out.read(1, masked=True)
    exp = np.select([v < 5, v < 15, v < 45], [1, 2, 3], 4)
    assert (got.compressed() == exp[~np.ma.getmaskarray(v)]).all()
    err, res = await call(client, "raster_reclassify", input="raster/slope.tif", output="out/bad.tif")
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(
        client, "raster_reclassify", input="raster/slope.tif", output="out/bad.tif", classes=[{"min": 0, "value": 1, "colour": 3}]
    )
    assert err and res["error"]["code"] == "invalid-argument"
    assert not (ws / "out" / "bad.tif").exists()
