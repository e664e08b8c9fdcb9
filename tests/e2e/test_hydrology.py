"""The hydrology tools through the official MCP SDK against the real server over stdio (confined workers, where
numba's cache must go to the worker's private temporary directory): a DEM conditioned, its directions, accumulation,
watersheds and streams, each step reading the previous step's output from the workspace."""

from __future__ import annotations

import base64
import io
import os
import sys
from pathlib import Path

import numpy as np
import pyogrio
import pytest
import rasterio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from PIL import Image
from pyproj import Geod

from tests.helpers import make_workspace


@pytest.fixture(scope="module")
def hydro_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("hydro"))


async def call(session: ClientSession, tool: str, args: dict) -> object:
    r = await session.call_tool(tool, args)
    assert not r.is_error, (tool, r.content)
    return r


@pytest.mark.slow
async def test_hydrology_chain_through_the_official_sdk(hydro_ws: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gdal_mcp", "--workspace", str(hydro_ws), "--confirm", "never"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        r = await call(
            session, "dem_condition", {"input": "raster/jacksboro_dem.tif", "output": "h/breached.tif", "method": "breach"}
        )
        s = r.structured_content["summary"]
        assert s["cells_lowered"] > 0 and s["cells_raised"] == 0 and s["dtype"] == "int16"
        with rasterio.open(hydro_ws / "h" / "breached.tif") as a, rasterio.open(hydro_ws / "raster" / "jacksboro_dem.tif") as b:
            diff = a.read(1).astype(int) - b.read(1).astype(int)
        assert (diff <= 0).all() and int((diff != 0).sum()) == s["cells_changed"] and -diff.min() == s["max_change"]

        r = await call(session, "flow_direction", {"input": "h/breached.tif", "output": "h/d8.tif", "condition": "none"})
        assert r.structured_content["summary"]["pits"] == 0
        with rasterio.open(hydro_ws / "h" / "d8.tif") as ds:
            assert set(np.unique(ds.read(1)).tolist()) <= {0, 1, 2, 4, 8, 16, 32, 64, 128}

        r = await call(
            session,
            "flow_accumulation",
            {"input": "h/d8.tif", "input_type": "flow_direction", "output": "h/acc.tif", "measure": "cells"},
        )
        with rasterio.open(hydro_ws / "h" / "acc.tif") as ds:
            acc = ds.read(1)
        assert acc.min() == 1 and acc.max() == r.structured_content["summary"]["max_accumulation"]

        points = [[-84.25, 36.6], [-84.35, 36.68]]
        r = await call(
            session,
            "watershed",
            {"input": "h/breached.tif", "condition": "none", "output": "h/ws.gpkg", "points": points, "snap_distance": 300},
        )
        basins = r.structured_content["basins"]
        assert [b["id"] for b in basins] == [1, 2] and all(b["moved_m"] <= 300 for b in basins)
        table = pyogrio.read_dataframe(hydro_ws / "h" / "ws.gpkg")
        geod = Geod(ellps="WGS84")
        for geom, basin in zip(table.geometry, basins, strict=True):
            assert abs(geod.geometry_area_perimeter(geom.segmentize(0.0001))[0]) == pytest.approx(basin["area_m2"], rel=1e-4)
            # the snapped cell is the highest accumulation in the raster written before
            with rasterio.open(hydro_ws / "h" / "acc.tif") as ds:
                row, col = ds.index(basin["snapped_x"], basin["snapped_y"])
            assert acc[row, col] == basin["snapped_cells"]

        r = await call(
            session,
            "watershed",
            {
                "input": "h/d8.tif",
                "input_type": "flow_direction",
                "output": "h/ws.tif",
                "points": points,
                "snap_distance": 300,
                "output_kind": "raster",
            },
        )
        with rasterio.open(hydro_ws / "h" / "ws.tif") as ds:
            ids = ds.read(1)
        assert {int(v) for v in np.unique(ids)} <= {0, 1, 2} and (ids == 1).sum() > 0

        r = await call(
            session, "stream_network", {"input": "raster/jacksboro_dem.tif", "output": "h/streams.gpkg", "threshold_km2": 2}
        )
        image = r.content[0]
        assert image.type == "image" and image.mime_type == "image/png"
        png = Image.open(io.BytesIO(base64.b64decode(image.data)))
        res = r.structured_content
        assert png.size == (res["preview_width"], res["preview_height"]) == (403 * 1, 344 * 1)
        assert res["segments"] == res["summary"]["feature_count"] > 0 and res["max_order"] >= 3
        assert any(c.type == "resource_link" for c in r.content)

        # a wrong call: an error envelope that says what to do
        r = await session.call_tool("stream_network", {"input": "raster/jacksboro_dem.tif", "output": "h/none.gpkg"})
        assert r.is_error and "threshold" in r.content[0].text
