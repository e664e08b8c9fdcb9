"""raster_edit through an MCP client: in place, metadata only, destructive annotation, refusals."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import rasterio
from fastmcp import Client

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call


def digest(path: Path) -> str:
    with rasterio.open(path) as ds:
        return hashlib.sha256(ds.read().tobytes()).hexdigest()


async def test_assign_missing_crs_in_place(client: Client, ws: Path) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert tools["raster_edit"].annotations.destructive_hint and not tools["raster_edit"].annotations.read_only_hint
    target = ws / "edit_me.tif"
    with rasterio.open(ws / "raster" / "float_nan.tif") as ds:  # no CRS
        assert ds.crs is None
    shutil.copy(ws / "raster" / "float_nan.tif", target)
    before = digest(target)
    err, res = await call(client, "raster_edit", input="edit_me.tif", crs="EPSG:32632", metadata={"SOURCE": "test"})
    assert not err, res
    assert res["output"] == "edit_me.tif" and res["summary"]["crs"] == "EPSG:32632"
    with rasterio.open(target) as ds:
        assert ds.crs.to_epsg() == 32632 and ds.tags()["SOURCE"] == "test"
    assert digest(target) == before
    assert not list(ws.glob(".gdal-mcp-tmp-*"))


async def test_png_edit_keeps_the_crs_its_sidecar_holds(client: Client, ws: Path) -> None:
    for suffix in ("", ".aux.xml"):
        shutil.copy(ws / "raster" / f"gadas-export.png{suffix}", ws / f"edit.png{suffix}")
    shutil.copy(ws / "raster" / "gadas-export.pgw", ws / "edit.pgw")
    with rasterio.open(ws / "edit.png") as ds:
        crs, transform = ds.crs, ds.transform
    before = digest(ws / "edit.png")
    err, res = await call(client, "raster_edit", input="edit.png", band_units="m")
    assert not err, res
    with rasterio.open(ws / "edit.png") as ds:  # GDAL keeps PNG edits in the .aux.xml (PAM), like gdal_edit.py
        assert ds.crs == crs and ds.transform == transform and ds.units[0] == "m"
    assert digest(ws / "edit.png") == before


async def test_refusals(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_edit", input="raster/slope.tif")
    assert err and res["error"]["code"] == "invalid-argument"


async def test_read_only_server_refuses(tmp_path: Path) -> None:
    shutil.copy(DATA / "raster" / "slope.tif", tmp_path / "s.tif")
    mcp, app = build_server(Settings(workspaces=(tmp_path,), workers=1, read_only=True))
    try:
        async with Client(mcp) as c:
            err, res = await call(c, "raster_edit", input="s.tif", nodata=0)
            assert err and res["error"]["code"] == "read-only"
    finally:
        app.executor.close()
