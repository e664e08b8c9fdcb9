"""Class 3 — outputs that replace files nobody named: a new output whose side files (a shapefile's .dbf, a GML's
.xsd, a GeoTIFF's world file) take the names of existing files, and two overwrite=false calls racing for the same
new path. Nothing is replaced without overwrite=true; of two racers exactly one succeeds."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

import pytest

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import Sandbox, rename_noreplace
from tests.security.helpers import Canary, Secrets, attack, session, workspace


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = workspace(tmp_path)
    (ws / "roads.dbf").write_bytes(b"the user's own roads.dbf")
    (ws / "plan.xsd").write_text("<schema>the user's own schema</schema>")
    (ws / "img.tfw").write_text("1\n0\n0\n-1\n0\n0\n")
    return ws


@pytest.mark.slow
async def test_side_files_never_replace_existing_files(ws: Path, secrets: Secrets, canary: Canary) -> None:
    """roads.shp would write roads.dbf, plan.gml plan.xsd, img.tif with TFW=YES img.tfw: all refused already-exists,
    the existing files byte for byte as they were, no part of the new output left behind."""
    before = {p.name: digest(p) for p in ws.iterdir() if p.is_file()}
    async with session(ws) as s:
        for tool, args, blocker in (
            ("vector_convert", {"input": "good.shp", "output": "roads.shp"}, "roads.dbf"),
            ("vector_convert", {"input": "good.shp", "output": "plan.gml"}, "plan.xsd"),
            ("raster_convert", {"input": "good.tif", "output": "img.tif", "creation_options": {"TFW": "YES"}}, "img.tfw"),
        ):
            code = await attack(s, tool, args, secrets=secrets, canary=canary, codes={"already-exists"})
            assert code == "already-exists", (tool, blocker)
        # the tool names the file in the way
        r = await s.call_tool("vector_convert", {"input": "good.shp", "output": "roads.shp"})
        assert "roads.dbf" in r.structured_content["error"]["message"]
        r = await s.call_tool("raster_convert", {"input": "good.tif", "output": "img.tif", "creation_options": {"TFW": "YES"}})
        assert "img.tfw" in r.structured_content["error"]["message"]
    assert {p.name: digest(p) for p in ws.iterdir() if p.is_file()} == before
    assert not any(p.name.startswith(".gdal-mcp-tmp-") for p in ws.iterdir())
    # with overwrite=true the dataset of that name is replaced, side files included (the person approved it)
    async with session(ws) as s:
        r = await s.call_tool("vector_convert", {"input": "good.shp", "output": "roads.shp", "overwrite": True})
        assert not r.is_error, r.structured_content
    assert digest(ws / "roads.dbf") != before["roads.dbf"]


async def test_two_new_writers_of_one_path_exactly_one_wins(ws: Path) -> None:
    """Two overwrite=false calls to the same new path at once: one succeeds, the other gets already-exists, and the
    file on disk is the winner's (never silently replaced by the later one)."""
    async with session(ws, "--workers", "2") as s:
        a, b = await asyncio.gather(
            s.call_tool(
                "raster_convert", {"input": "good.tif", "output": "race.tif", "creation_options": {"COMPRESS": "DEFLATE"}}
            ),
            s.call_tool("raster_reproject", {"input": "good.tif", "output": "race.tif", "dst_crs": "EPSG:4326"}),
        )
    outcomes = sorted([a.is_error, b.is_error])
    assert outcomes == [False, True], (a.structured_content, b.structured_content)
    loser = a if a.is_error else b
    assert loser.structured_content["error"]["code"] == "already-exists"
    import rasterio

    with rasterio.open(ws / "race.tif") as ds:
        won_reproject = ds.crs.to_epsg() == 4326
    assert won_reproject == (not b.is_error)  # what is on disk is what the winner wrote


def test_the_commit_is_no_replace(tmp_path: Path) -> None:
    """The commit itself: a file that appears at the final path while the job runs is never replaced."""
    sandbox = Sandbox([tmp_path])
    target = sandbox.resolve_output("late.tif")
    target.tmp_path.write_bytes(b"new")
    (tmp_path / "late.tif").write_bytes(b"appeared meanwhile")
    with pytest.raises(GdalMcpError) as e:
        target.commit()
    assert e.value.code == "already-exists"
    assert (tmp_path / "late.tif").read_bytes() == b"appeared meanwhile"
    assert not target.tmp_dir.exists()
    # side files placed before the collision are taken back: nothing of the refused output stays
    target = sandbox.resolve_output("pair.tif")
    target.tmp_path.write_bytes(b"new")
    (target.tmp_dir / "pair.tif.aux.xml").write_text("<PAMDataset/>")
    (tmp_path / "pair.tif").write_bytes(b"appeared meanwhile")
    with pytest.raises(GdalMcpError):
        target.commit()
    assert not (tmp_path / "pair.tif.aux.xml").exists()
    src = tmp_path / "a"
    src.write_text("a")
    (tmp_path / "b").write_text("b")
    with pytest.raises(FileExistsError):
        rename_noreplace(src, tmp_path / "b")
    assert (tmp_path / "b").read_text() == "b" and src.exists()
    rename_noreplace(src, tmp_path / "c")
    assert (tmp_path / "c").read_text() == "a" and not os.path.exists(src)


async def test_creation_options_never_name_files(ws: Path, secrets: Secrets, canary: Canary) -> None:
    """Creation options that make GDAL write (or read) another file: an MRF's DATANAME/INDEXNAME pointed at a
    workspace file (a red team corrupted one this way on the Dask executor), file-naming options of other formats,
    and option values that are paths or URLs. Refused before any work starts; the file keeps every byte."""
    victim = ws / "victim.txt"
    victim.write_text("the user's data")
    before = digest(victim)
    async with session(ws) as s:
        for options in (
            {"DATANAME": str(victim)},
            {"INDEXNAME": "victim.txt"},
            {"CONFIG_FILE": "x.xml"},
            {"GMLJP2V2_DEF": secrets.path("secret.txt")},
            {"COMPRESS": "../victim.txt"},
            {"COMPRESS": f"{canary.url}/x"},
        ):
            fmt = "JP2OpenJPEG" if "GMLJP2V2_DEF" in options else "MRF"
            code = await attack(
                s,
                "raster_convert",
                {"input": "good.tif", "output": "o.mrf", "format": fmt, "creation_options": options},
                secrets=secrets,
                canary=canary,
            )
            assert code == "invalid-argument", options
        # a JSON value of a file-naming option lists files GDAL reads into the output: refused too
        code = await attack(
            s,
            "raster_convert",
            {
                "input": "good.tif",
                "output": "o.jp2",
                "creation_options": {
                    "GMLJP2V2_DEF": json.dumps({"root_instance": {"gml_filelist": [secrets.path("secret.txt")]}})
                },
            },
            secrets=secrets,
            canary=canary,
        )
        assert code == "invalid-argument"
        # the same option as a switch is a setting: the JPEG 2000 gets its GMLJP2 v2 box
        r = await s.call_tool(
            "raster_convert", {"input": "good.tif", "output": "ok.jp2", "creation_options": {"GMLJP2V2_DEF": "YES"}}
        )
        assert not r.is_error, r.structured_content
        code = await attack(
            s,
            "vector_convert",
            {"input": "good.shp", "output": "o.gml", "layer_options": {"XSISCHEMAURI": f"{canary.url}/s.xsd"}},
            secrets=secrets,
            canary=canary,
        )
        assert code == "invalid-argument"
        # names that read as another one (a right-to-left override) are refused too
        code = await attack(s, "raster_convert", {"input": "good.tif", "output": "fdp.\u202etif"}, secrets=secrets, canary=canary)
        assert code == "invalid-argument"
    assert digest(victim) == before
