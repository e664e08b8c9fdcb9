"""Analysis tools through an MCP client: terrain, calculator, polygonize, rasterize, zonal statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client

from tests.conftest import call


async def test_hillshade_of_zipped_srtm(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_terrain", input="/vsizip/raster/N10W110.hgt.zip/N10W110.hgt",
                          output="out/hs.tif", product="hillshade")
    assert not err, res
    assert res["summary"]["dtype"] == "uint8" and res["summary"]["nodata"] == 0
    assert any("111120" in w for w in res["warnings"]), "geographic DEM must be scaled (and say so)"


async def test_ndvi_with_band_suffixes(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_calc", inputs={"A": "raster/RGB.byte.tif:1", "B": "raster/RGB.byte.tif:3"},
                          expression="(B - A) / (B + A)", output="out/ratio.tif")
    assert not err, res
    with rasterio.open(ws / "raster" / "RGB.byte.tif") as src, rasterio.open(ws / "out" / "ratio.tif") as out:
        a, b = src.read(1).astype("float64"), src.read(3).astype("float64")
        valid = (src.read(1) != 0) & (src.read(3) != 0)
        got = out.read(1)
        assert np.allclose(got[valid], ((b - a) / (b + a))[valid], atol=1e-6)
        assert (got[~valid] == out.nodata).all()


@pytest.mark.parametrize("expression", ["A.__class__", "__import__('os')", "open('/etc/passwd')", "A[0]", "2**10**10",
                                        "(lambda: 1)()", "'x'", "[a for a in A]"])
async def test_calculator_refuses_unsafe_expressions(client: Client, expression: str) -> None:
    err, res = await call(client, "raster_calc", inputs={"A": "raster/slope.tif"}, expression=expression,
                          output="out/never.tif")
    assert err and res["error"]["code"] == "invalid-argument"


async def test_calculator_grid_mismatch_says_how_to_fix(client: Client) -> None:
    err, res = await call(client, "raster_calc", inputs={"A": "raster/RGB.byte.tif", "B": "raster/slope.tif"},
                          expression="A + B", output="out/never.tif")
    assert err and res["error"]["code"] == "invalid-argument" and "raster_reproject" in res["error"]["message"]
