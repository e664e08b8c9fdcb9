"""raster_tiles through the MCP client: a tile directory committed whole, an MBTiles file, overwrite of a tile
directory, the tile limit (and its operator setting), refusals that write nothing.

References: the files on disk counted by walking the directory / querying the MBTiles file with sqlite3 (stdlib), the
MBTiles and TMS row arithmetic (y_tms = 2^z - 1 - y_xyz). Pixel content against gdal2tiles is in
tests/engine/raster/test_web_tiles.py.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from pathlib import Path

import pytest
from fastmcp import Client

from gdal_mcp import jobs
from gdal_mcp.cli import build_parser, settings_from_args
from gdal_mcp.config import Settings
from gdal_mcp.engine.raster.web_tiles import MAX_TILES
from tests.helpers import call

RGB = "raster/RGB.byte.tif"
OUT = "out/web_tiles"


def tiles_on_disk(root: Path) -> set[tuple[int, int, int]]:
    found = set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".png"):
                z, x = Path(dirpath).relative_to(root).parts
                found.add((int(z), int(x), int(name[:-4])))
    return found


def leftovers(ws: Path) -> list[str]:
    return [p.name for p in (ws / OUT).iterdir() if p.name.startswith(".gdal-mcp-tmp-")]


async def test_directory_is_committed_whole_and_replaced_only_with_overwrite(client: Client, ws: Path) -> None:
    args = dict(input=RGB, output=f"{OUT}/rgb", min_zoom=6, max_zoom=7, resampling="nearest", webviewer="leaflet")
    err, res = await call(client, "raster_tiles", **args)
    assert not err, res
    root = ws / OUT / "rgb"
    xyz = tiles_on_disk(root)
    summary = res["summary"]
    assert res["output"] == f"{OUT}/rgb" and res["uri"] is None
    assert res["viewer_uri"].endswith(f"{OUT}/rgb/leaflet.html") and (root / "leaflet.html").is_file()
    assert res["viewer"] == f"{OUT}/rgb/leaflet.html"  # workspace-relative: where the person opens it
    assert summary["tiles"] == len(xyz) == summary["planned_tiles"] and summary["container"] == "directory"
    assert {z for z, _, _ in xyz} == {6, 7}
    assert not leftovers(ws)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    # its provenance record beside it: the digest of the directory's files (manifest-spec 3.3's container rule)
    import hashlib
    import json

    record = json.loads((ws / OUT / "rgb.provenance.json").read_text())
    listing = sorted(
        (p.relative_to(root).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest()) for p in root.rglob("*") if p.is_file()
    )
    expected = hashlib.sha256("".join(f"{n}\0{h}\n" for n, h in listing).encode()).hexdigest()
    assert record["operation"] == "raster_tiles" and record["output"]["sha256"] == expected

    # again without overwrite: refused, the directory as it was
    err, res = await call(client, "raster_tiles", **args)
    assert err and res["error"]["code"] == "already-exists", res
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert not leftovers(ws)

    # with overwrite: replaced as a whole (TMS rows now, no viewer page left from the first call)
    err, res = await call(client, "raster_tiles", **{**args, "overwrite": True, "convention": "tms", "webviewer": "none"})
    assert not err, res
    assert tiles_on_disk(root) == {(z, x, (1 << z) - 1 - y) for z, x, y in xyz}
    assert not (root / "leaflet.html").exists() and res["viewer_uri"] is None and res["viewer"] is None
    assert res["summary"]["convention"] == "tms"
    assert not leftovers(ws)


async def test_overwrite_never_replaces_a_directory_holding_other_files(client: Client, ws: Path) -> None:
    mixed = ws / OUT / "mixed"
    (mixed / "7" / "36").mkdir(parents=True)
    (mixed / "7" / "36" / "54.png").write_bytes(b"not really a tile")
    (mixed / "notes.txt").write_text("the user's notes")
    err, res = await call(client, "raster_tiles", input=RGB, output=f"{OUT}/mixed", max_zoom=7, overwrite=True)
    assert err and res["error"]["code"] == "invalid-argument", res
    assert "notes.txt" in res["error"]["message"]
    assert (mixed / "notes.txt").read_text() == "the user's notes" and (mixed / "7" / "36" / "54.png").is_file()
    assert not leftovers(ws)


async def test_mbtiles_file(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_tiles", input=RGB, output=f"{OUT}/rgb.mbtiles", min_zoom=7, max_zoom=8)
    assert not err, res
    path = ws / OUT / "rgb.mbtiles"
    with sqlite3.connect(path) as db:
        per_zoom = dict(db.execute("SELECT zoom_level, COUNT(*) FROM tiles GROUP BY zoom_level").fetchall())
        meta = dict(db.execute("SELECT name, value FROM metadata").fetchall())
    summary = res["summary"]
    assert res["uri"].endswith(f"{OUT}/rgb.mbtiles") and summary["container"] == "mbtiles"
    assert {z["zoom"]: z["tiles"] for z in summary["zooms"]} == per_zoom and sum(per_zoom.values()) == summary["tiles"]
    assert (meta["format"], meta["minzoom"], meta["maxzoom"]) == ("png", "7", "8")
    # beside it only its provenance record
    assert sorted(p.name for p in (ws / OUT).iterdir() if p.name.startswith("rgb.mbtiles")) == [
        "rgb.mbtiles",
        "rgb.mbtiles.provenance.json",
    ]


@pytest.mark.parametrize(
    "args, code, words",
    [
        ({"input": "raster/jacksboro_dem.tif", "output": f"{OUT}/dem"}, "invalid-argument", "8-bit"),
        ({"input": RGB, "output": f"{OUT}/r", "min_zoom": 9, "max_zoom": 8}, "invalid-argument", "min_zoom"),
        ({"input": RGB, "output": f"{OUT}/r.mbtiles", "tiling_scheme": "WorldCRS84Quad"}, "invalid-argument", "WebMercatorQuad"),
        ({"input": RGB, "output": f"{OUT}/r.mbtiles", "webviewer": "leaflet"}, "invalid-argument", "viewer"),
        ({"input": RGB, "output": RGB}, "invalid-argument", "existing file"),
        ({"input": RGB, "output": f"{OUT}/big", "min_zoom": 8, "max_zoom": 16}, "resource-limit", "limit of 100000"),
    ],
)
async def test_refusals_write_nothing(client: Client, ws: Path, args: dict, code: str, words: str) -> None:
    (ws / OUT).mkdir(parents=True, exist_ok=True)
    before = sorted(p.name for p in (ws / OUT).iterdir())
    err, res = await call(client, "raster_tiles", **args)
    assert err and res["error"]["code"] == code and words in res["error"]["message"], res
    assert sorted(p.name for p in (ws / OUT).iterdir()) == before


async def test_the_limit_is_the_operators_setting(client: Client, server: tuple) -> None:
    assert Settings(workspaces=()).max_tiles == MAX_TILES == jobs.WebTilesJob(src="x").max_tiles == 100_000
    assert settings_from_args(build_parser().parse_args(["--max-tiles", "5"])).max_tiles == 5
    _, app = server
    saved = app.settings
    app.settings = dataclasses.replace(saved, max_tiles=5)
    try:
        err, res = await call(client, "raster_tiles", input=RGB, output=f"{OUT}/five", min_zoom=7, max_zoom=8)
    finally:
        app.settings = saved
    assert err and res["error"]["code"] == "resource-limit", res
    assert "limit of 5 " in res["error"]["message"] and "max_zoom to 7" in res["error"]["message"]
