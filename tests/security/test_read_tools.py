"""Class 5 — read tools that write: vector_info on a GML without a .gfs wrote one into the workspace, even with
--read-only. No tool that only reads may leave a byte changed in the workspace: its job runs on a thread the kernel
lets write nowhere there (GML .gfs, statistics .aux.xml, .gz .properties indexes, .ovr, .qix …)."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import DATA
from tests.security.helpers import session, workspace

GML = """<?xml version="1.0" encoding="utf-8"?>
<ogr:FeatureCollection xmlns:ogr="http://ogr.maptools.org/" xmlns:gml="http://www.opengis.net/gml">
  <gml:featureMember><ogr:plan fid="plan.0"><ogr:geometryProperty><gml:Point srsName="EPSG:4326">
    <gml:coordinates>1,2</gml:coordinates></gml:Point></ogr:geometryProperty><ogr:name>a</ogr:name></ogr:plan>
  </gml:featureMember>
</ogr:FeatureCollection>
"""


def snapshot(ws: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(ws)): (p.stat().st_size, p.stat().st_mtime_ns) for p in ws.rglob("*")}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = workspace(tmp_path)
    (ws / "plan.gml").write_text(GML)
    with gzip.open(ws / "good.csv.gz", "wb") as fh:
        fh.write((ws / "good.csv").read_bytes())
    shutil.copy(DATA / "raster" / "gadas-export.png", ws / "scan.png")
    shutil.copy(DATA / "raster" / "gadas-export.pgw", ws / "scan.pgw")
    shutil.copy(DATA / "raster" / "slope.tif", ws / "slope.tif")
    return ws


READS = [
    ("vector_info", {"path": "plan.gml"}),
    ("vector_features", {"input": "plan.gml"}),
    ("vector_info", {"path": "/vsigzip/good.csv.gz"}),
    ("raster_info", {"path": "slope.tif", "stats": True}),
    ("raster_info", {"path": "scan.png", "stats": True}),
    ("raster_stats", {"input": "slope.tif"}),
    ("raster_sample", {"input": "slope.tif", "points": [[-1900000, 2100000]], "points_crs": "EPSG:5070"}),
    ("raster_preview", {"input": "scan.png"}),
    ("vector_preview", {"input": "good.shp"}),
    ("vector_features", {"input": "good.shp", "bbox": [-180, -90, 180, 90], "bbox_crs": "EPSG:4326"}),
    ("list_datasets", {"path": "."}),
]


@pytest.mark.slow
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
async def test_read_tools_leave_the_workspace_untouched(ws: Path, read_only: bool) -> None:
    before = snapshot(ws)
    async with session(ws, *(["--read-only"] if read_only else [])) as s:
        for tool, args in READS:
            r = await s.call_tool(tool, args)
            assert not r.is_error, (tool, r.structured_content)
    after = snapshot(ws)
    assert after == before, {
        k: after.get(k) for k in set(after) ^ set(before) | {k for k in after if after.get(k) != before.get(k)}
    }
    assert not (ws / "plan.gfs").exists()


async def test_a_read_job_cannot_write_even_where_gdal_tries(ws: Path) -> None:
    """GDAL asked to write a .gfs beside the GML (the driver's own option): the kernel refuses, the read succeeds."""
    before = snapshot(ws)
    async with session(ws) as s:
        r = await s.call_tool("vector_info", {"path": "plan.gml"})
        assert not r.is_error
        r = await s.call_tool("vector_features", {"input": "plan.gml", "open_options": {"WRITE_GFS": "YES"}})
        assert not r.is_error or r.structured_content["error"]["code"] != "internal-error", r.structured_content
    assert snapshot(ws) == before and not os.path.exists(ws / "plan.gfs")


@pytest.mark.dask
async def test_read_tools_write_nothing_on_the_dask_executor(ws: Path) -> None:
    """The same on a Dask cluster's workers (a red team had vector_info write a .gfs there): each job, and each
    tile, runs on a thread confined to write only the job's output."""
    pytest.importorskip("distributed")
    before = snapshot(ws)
    async with session(ws, "--executor", "dask", "--dask-scheduler", "local:1") as s:
        for tool, args in READS[:7]:
            r = await s.call_tool(tool, args)
            assert not r.is_error, (tool, r.structured_content)
        r = await s.call_tool("raster_convert", {"input": "slope.tif", "output": "out/copy.tif"})
        assert not r.is_error, r.structured_content  # a job that writes still writes its output
    after = snapshot(ws)
    assert {k for k in after if k not in before} == {"out", "out/copy.tif", "out/copy.tif.provenance.json"}, set(after) ^ set(
        before
    )
    assert all(after[k] == before[k] for k in before)
