"""workspace_copy, workspace_move and workspace_delete through an MCP client: a dataset moves with its side files,
nothing is replaced or left half-done, nothing outside the workspace is reached, and a person approves what goes."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import geopandas
import pytest
import rasterio
from fastmcp import Client
from mcp.types import ElicitResult

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call

SHP_PARTS = ("shp", "shx", "dbf", "prj", "cpg")


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def box(ws: Path) -> Path:
    """A folder of its own in the session's workspace holding the box shapefile (5 files)."""
    folder = ws / f"wt-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    for ext in SHP_PARTS:
        shutil.copy(DATA / "vector" / f"box.{ext}", folder / f"box.{ext}")
    return folder


async def test_copy_takes_every_side_file_under_the_new_name(client: Client, ws: Path, box: Path) -> None:
    rel = box.relative_to(ws)
    before = digests(box)
    err, res = await call(client, "workspace_copy", input=f"{rel}/box.shp", output=f"{rel}/copies/square.shp")
    assert not err, res
    copies = box / "copies"
    assert sorted(p.name for p in copies.iterdir()) == sorted(f"square.{e}" for e in SHP_PARTS)
    assert {n.replace("square", "box"): d for n, d in digests(copies).items()} == before  # byte for byte
    assert digests(box) == before  # the source is untouched
    assert sorted(res["files"]) == sorted(f"{rel}/copies/square.{e}" for e in SHP_PARTS)
    assert res["output"] == f"{rel}/copies/square.shp" and res["uri"].endswith("square.shp")
    # read back by an independent reader: the same features and CRS
    a, b = geopandas.read_file(box / "box.shp"), geopandas.read_file(copies / "square.shp")
    assert a.crs == b.crs and a.geometry.geom_equals(b.geometry).all() and list(a.columns) == list(b.columns)
    assert not list(box.rglob(".gdal-mcp-tmp-*"))


async def test_copy_never_replaces_unless_asked_and_then_drops_stale_side_files(client: Client, ws: Path, box: Path) -> None:
    rel = box.relative_to(ws)
    shutil.copy(DATA / "raster" / "slope.tif", box / "a.tif")
    shutil.copy(DATA / "raster" / "RGB.byte.tif", box / "b.tif")
    (box / "b.tif.ovr").write_bytes(b"overviews of the old b.tif")  # would describe the new b.tif wrongly
    before = digests(box)
    err, res = await call(client, "workspace_copy", input=f"{rel}/a.tif", output=f"{rel}/b.tif")
    assert err and res["error"]["code"] == "already-exists"
    assert digests(box) == before
    err, res = await call(client, "workspace_copy", input=f"{rel}/a.tif", output=f"{rel}/b.tif", overwrite=True)
    assert not err, res
    assert not (box / "b.tif.ovr").exists()
    assert hashlib.sha256((box / "b.tif").read_bytes()).hexdigest() == before["a.tif"]
    err, res = await call(client, "workspace_copy", input=f"{rel}/a.tif", output=f"{rel}/a.png")
    assert err and res["error"]["code"] == "invalid-argument" and "raster_convert" in res["error"]["message"]


async def test_move_renames_the_dataset_and_its_side_files(client: Client, ws: Path, box: Path) -> None:
    rel = box.relative_to(ws)
    shutil.copy(DATA / "raster" / "slope.tif", box / "dem.tif")
    (box / "dem.tfw").write_text("30\n0\n0\n-30\n500000\n4000000\n")
    (box / "dem.tif.aux.xml").write_text("<PAMDataset/>")
    before = digests(box)
    err, res = await call(client, "workspace_move", input=f"{rel}/dem.tif", output=f"{rel}/archive/height.tif")
    assert not err, res
    assert not any((box / n).exists() for n in ("dem.tif", "dem.tfw", "dem.tif.aux.xml"))
    moved = box / "archive"
    assert sorted(p.name for p in moved.iterdir()) == ["height.tfw", "height.tif", "height.tif.aux.xml"]
    assert digests(moved)["height.tif"] == before["dem.tif"] and digests(moved)["height.tfw"] == before["dem.tfw"]
    with rasterio.open(moved / "height.tif") as ds:  # GDAL still reads it (and its world file)
        assert ds.width > 0
    assert digests(box)["box.shp"] == before["box.shp"]  # the other dataset in the folder stays


async def test_a_move_that_would_replace_a_side_file_moves_nothing(client: Client, ws: Path, box: Path) -> None:
    rel = box.relative_to(ws)
    (box / "other.dbf").write_bytes(b"the .dbf of something else")
    before = digests(box)
    err, res = await call(client, "workspace_move", input=f"{rel}/box.shp", output=f"{rel}/other.shp")
    assert err and res["error"]["code"] == "already-exists", res
    assert digests(box) == before  # every part put back, the foreign .dbf untouched


async def test_delete_removes_the_dataset_and_keeps_what_another_may_use(client: Client, ws: Path, box: Path) -> None:
    rel = box.relative_to(ws)
    shutil.copy(DATA / "raster" / "slope.tif", box / "box.tif")  # box.prj may be the GeoTIFF's too
    (box / "box.tif.aux.xml").write_text("<PAMDataset/>")
    err, res = await call(client, "workspace_delete", input=f"{rel}/box.tif")
    assert not err, res
    assert sorted(res["files"]) == [f"{rel}/box.tif", f"{rel}/box.tif.aux.xml"]
    assert res["kept"] == sorted(f"{rel}/box.{e}" for e in SHP_PARTS if e != "shp")  # the shapefile's stem: left alone
    assert sorted(p.name for p in box.iterdir()) == sorted(f"box.{e}" for e in SHP_PARTS)
    err, res = await call(client, "workspace_delete", input=f"{rel}/box.shp")
    assert not err, res
    assert list(box.iterdir()) == [] and res["kept"] == []
    err, res = await call(client, "workspace_delete", input=f"{rel}/box.shp")
    assert err and res["error"]["code"] == "not-found"


async def test_files_outside_the_workspace_are_never_reached(client: Client, ws: Path, box: Path, tmp_path: Path) -> None:
    """Attack classes: path traversal and absolute paths out of the workspace; a side file that is a link out of the
    workspace, used to copy an outside file in (exfiltration) or to delete it; a link named as the dataset."""
    rel = box.relative_to(ws)
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    for args in ({"input": "../outside.shp"}, {"input": str(secret)}):
        err, res = await call(client, "workspace_delete", **args)
        assert err and res["error"]["code"] in ("out-of-root", "not-found"), res
    os.symlink(secret, box / "box.qix")  # a link among the shapefile's side files
    err, res = await call(client, "workspace_copy", input=f"{rel}/box.shp", output=f"{rel}/leak.shp")
    assert err and res["error"]["code"] == "out-of-root", res
    assert not (box / "leak.qix").exists() and not (box / "leak.shp").exists()
    err, res = await call(client, "workspace_copy", input=f"{rel}/box.shp", output="../leak.shp")
    assert err and res["error"]["code"] == "out-of-root", res
    err, res = await call(client, "workspace_delete", input=f"{rel}/box.shp")
    assert not err, res
    assert secret.read_text() == "outside" and not (box / "box.qix").is_symlink()  # the link went, not its target
    os.symlink(DATA / "raster" / "slope.tif", box / "linked.tif")
    err, res = await call(client, "workspace_delete", input=f"{rel}/linked.tif")
    assert err and res["error"]["code"] in ("out-of-root", "unsupported"), res
    assert (DATA / "raster" / "slope.tif").exists()


class Person:
    def __init__(self, action: str) -> None:
        self.action, self.shown = action, list[str]()

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
        self.shown.append(message)
        if self.action == "accept":
            return ElicitResult(action="accept", content={"confirm": True})
        return ElicitResult(action=self.action)


async def test_delete_and_move_ask_the_person_and_copy_does_not(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for ext in SHP_PARTS:
        shutil.copy(DATA / "vector" / f"box.{ext}", ws / f"box.{ext}")
    sizes = sum((ws / f"box.{e}").stat().st_size for e in SHP_PARTS)
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="destructive"))
    try:
        declines, accepts = Person("decline"), Person("accept")
        async with Client(mcp, elicitation_handler=declines) as c:
            err, res = await call(c, "workspace_delete", input="box.shp")
            assert err and res["error"]["code"] == "declined"
            err, res = await call(c, "workspace_copy", input="box.shp", output="copy.shp")
            assert not err, res  # a new file: nothing to approve under --confirm destructive
        assert len(declines.shown) == 1
        asked = declines.shown[0]
        assert asked.startswith("Delete box.shp") and "4 side files" in asked and "cannot be undone" in asked
        assert (
            all(f"box.{e}" in asked for e in SHP_PARTS)
            and (f"{sizes} bytes" if sizes < 1000 else f"{sizes / 1000:.1f} KB") in asked
        )
        assert all((ws / f"box.{e}").exists() for e in SHP_PARTS)
        (ws / "copy.qix").write_bytes(b"a spatial index of the old copy")
        async with Client(mcp, elicitation_handler=declines) as c:  # a replacing copy names every file it removes
            err, res = await call(c, "workspace_copy", input="box.shp", output="copy.shp", overwrite=True)
            assert err and res["error"]["code"] == "declined"
        assert declines.shown[-1].startswith("Replace copy.shp") and "copy.qix" in declines.shown[-1]
        assert (ws / "copy.qix").exists()
        async with Client(mcp, elicitation_handler=accepts) as c:
            err, res = await call(c, "workspace_move", input="copy.shp", output="moved.shp")
            assert not err, res
        assert accepts.shown and accepts.shown[0].startswith("Move copy.shp") and "to moved.shp" in accepts.shown[0]
        assert all((ws / f"moved.{e}").exists() and not (ws / f"copy.{e}").exists() for e in SHP_PARTS)
    finally:
        app.executor.close()


async def test_read_only_refuses_all_three(tmp_path: Path) -> None:
    shutil.copy(DATA / "raster" / "slope.tif", tmp_path / "a.tif")
    mcp, app = build_server(Settings(workspaces=(tmp_path,), workers=1, timeout=60, read_only=True))
    try:
        async with Client(mcp) as c:
            for tool, args in (
                ("workspace_copy", {"input": "a.tif", "output": "b.tif"}),
                ("workspace_move", {"input": "a.tif", "output": "b.tif"}),
                ("workspace_delete", {"input": "a.tif"}),
            ):
                err, res = await call(c, tool, **args)
                assert err and res["error"]["code"] == "read-only", (tool, res)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tif"]
    finally:
        app.executor.close()


async def test_a_move_onto_a_file_is_asked_about_even_before_its_input_exists(tmp_path: Path) -> None:
    """Attack class: approval bypass by a race. Moving a file that is not there yet over an existing one with
    overwrite=true: the input could appear (a second call) between the check and the move, so the replacement is
    asked about anyway; declined, the file stays."""
    (tmp_path / "precious.tif").write_bytes(b"the person's")
    mcp, app = build_server(Settings(workspaces=(tmp_path,), workers=1, timeout=60, confirm="destructive"))
    try:
        declines = Person("decline")
        async with Client(mcp, elicitation_handler=declines) as c:
            err, res = await call(c, "workspace_move", input="junk.tif", output="precious.tif", overwrite=True)
        assert err and res["error"]["code"] == "declined", res
        assert declines.shown[0].startswith("Move junk.tif (not there yet) to precious.tif, replacing precious.tif (")
    finally:
        app.executor.close()
    assert (tmp_path / "precious.tif").read_bytes() == b"the person's"
