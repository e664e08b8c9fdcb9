"""raster_pipeline through an MCP client: the same pixels as the separate tools called one after another, the plan
(nothing written, nothing asked), one approval for the whole chain, and the failures (stable codes, nothing written)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from fastmcp import Client
from mcp.types import ElicitResult

from gdal_mcp.sandbox import TMP_PREFIX
from tests.helpers import call

BBOX = [-78.6, 23.5, -77.1, 24.9]  # inside RGB.byte.tif, in lon/lat
STEPS = [
    {"step": "clip", "bbox": BBOX, "bbox_crs": "EPSG:4326", "all_touched": True},
    {"step": "reproject", "dst_crs": "EPSG:4326", "resampling": "bilinear"},
]


def pixels(path: Path) -> tuple[np.ndarray, Any, Any, tuple[int, int]]:
    with rasterio.open(path) as ds:
        return ds.read(), ds.transform, ds.crs, ds.overviews(1)


def leftovers(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob(f"{TMP_PREFIX}*")]


async def test_pipeline_is_the_separate_tools_one_after_another(client: Client, ws: Path) -> None:
    """clip, then reproject, into a COG: raster_clip then raster_reproject(format=COG) give the same file's pixels and
    overviews, and the plan announced the grid written."""
    err, plan = await call(
        client,
        "raster_pipeline",
        input="raster/RGB.byte.tif",
        output="out/pipeline/cog.tif",
        steps=STEPS,
        format="COG",
        plan_only=True,
    )
    assert not err, plan
    assert not (ws / "out" / "pipeline" / "cog.tif").exists() and plan["uri"] is None and plan["summary"] is None
    err, res = await call(
        client, "raster_pipeline", input="raster/RGB.byte.tif", output="out/pipeline/cog.tif", steps=STEPS, format="COG"
    )
    assert not err, res
    assert res["output"] == "out/pipeline/cog.tif" and res["uri"].endswith("out/pipeline/cog.tif")
    assert res["plan"] == plan["plan"] and res["estimated_bytes"] == plan["estimated_bytes"]
    last, summary = res["plan"][-1], res["summary"]
    assert [last[k] for k in ("width", "height", "count", "crs", "nodata")] == [
        summary[k] for k in ("width", "height", "count", "crs", "nodata")
    ]
    assert last["bounds"] == summary["bounds"] and last["resolution"] == list(summary["resolution"])

    err, res = await call(
        client,
        "raster_clip",
        input="raster/RGB.byte.tif",
        output="out/pipeline/clip.tif",
        bbox=BBOX,
        bbox_crs="EPSG:4326",
        all_touched=True,
    )
    assert not err, res
    err, res = await call(
        client,
        "raster_reproject",
        input="out/pipeline/clip.tif",
        output="out/pipeline/sep.tif",
        dst_crs="EPSG:4326",
        resampling="bilinear",
        format="COG",
    )
    assert not err, res
    ours, theirs = pixels(ws / "out" / "pipeline" / "cog.tif"), pixels(ws / "out" / "pipeline" / "sep.tif")
    assert np.array_equal(ours[0], theirs[0]) and ours[1:] == theirs[1:]
    with rasterio.open(ws / "out" / "pipeline" / "cog.tif") as a, rasterio.open(ws / "out" / "pipeline" / "sep.tif") as b:
        shape = (3, a.height // 2, a.width // 2)
        assert a.overviews(1) == [2] and np.array_equal(a.read(out_shape=shape), b.read(out_shape=shape))
    assert leftovers(ws) == []


async def test_plan_only_checks_everything_and_writes_nothing(client: Client, ws: Path) -> None:
    steps = [{"step": "reproject", "dst_crs": "EPSG:32616", "resolution": 60}, {"step": "hillshade", "z_factor": 2}]
    err, res = await call(
        client, "raster_pipeline", input="raster/jacksboro_dem.tif", output="out/pipeline/new/hs.tif", steps=steps, plan_only=True
    )
    assert not err, res
    assert res["plan_only"] and res["output"] == "out/pipeline/new/hs.tif"
    assert [(g["step"], g["crs"], g["dtype"]) for g in res["plan"]] == [
        ("read", "EPSG:4326", "int16"),
        ("reproject", "EPSG:32616", "int16"),
        ("hillshade", "EPSG:32616", "uint8"),
    ]
    assert res["plan"][1]["resolution"] == [60.0, 60.0] and res["plan"][2]["nodata"] == 0.0
    assert res["estimated_bytes"] == res["plan"][2]["width"] * res["plan"][2]["height"]
    assert not (ws / "out" / "pipeline" / "new").exists() and leftovers(ws) == []


async def test_existing_output_is_refused_and_kept(client: Client, ws: Path) -> None:
    target = ws / "out" / "pipeline" / "kept.tif"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"keep me")
    for plan_only in (True, False):
        err, res = await call(
            client,
            "raster_pipeline",
            input="raster/RGB.byte.tif",
            output="out/pipeline/kept.tif",
            steps=[{"step": "select", "bands": [1]}],
            plan_only=plan_only,
        )
        assert err and res["error"]["code"] == "already-exists" and "overwrite=true" in res["error"]["message"]
    assert target.read_bytes() == b"keep me"
    err, res = await call(
        client,
        "raster_pipeline",
        input="raster/RGB.byte.tif",
        output="out/pipeline/kept.tif",
        steps=[{"step": "select", "bands": [1]}],
        overwrite=True,
    )
    assert not err and res["summary"]["count"] == 1


async def test_bad_steps_are_invalid_arguments_naming_the_step(client: Client, ws: Path) -> None:
    args = {"input": "raster/RGB.byte.tif", "output": "out/pipeline/bad.tif"}
    cases = [
        ([{"step": "select", "bands": [1]}, {"step": "blur"}], "steps.1"),
        ([{"step": "read", "input": "raster/RGB.byte.tif"}], "steps.0"),
        ([{"step": "resize", "size": [10, 10], "colour": "red"}], "steps.0.resize.colour"),
        ([{"step": "resize", "size": [10, 10], "resolution": 5}], "steps[0] (resize): give resolution or size"),
        ([{"step": "select", "bands": [4]}], "steps[0] (select): band(s) [4] do not exist"),
        ([{"step": "clip", "bbox": [0, 0, 1, 1]}], "steps[0] (clip): bbox"),
        ([], "steps"),
    ]
    for steps, needle in cases:
        err, res = await call(client, "raster_pipeline", **args, steps=steps)
        assert err and res["error"]["code"] == "invalid-argument" and needle in res["error"]["message"], (steps, res)
    assert not (ws / "out" / "pipeline" / "bad.tif").exists() and leftovers(ws) == []
    err, res = await call(client, "raster_pipeline", **args, steps=[{"step": "clip", "like": "../outside.tif"}])
    assert err and res["error"]["code"] == "out-of-root"


class Person:
    """A user answering the elicitation (approve); remembers what they were asked."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
        self.shown.append(message)
        return ElicitResult(action="accept", content={"confirm": True})


async def test_one_approval_for_the_whole_chain_and_none_for_a_plan(server, ws: Path, monkeypatch) -> None:  # noqa: ANN001
    """Under --confirm writes: a plan asks nobody; the run asks once, naming every step."""
    mcp, app = server
    monkeypatch.setattr(app, "settings", dataclasses.replace(app.settings, confirm="writes"))
    person = Person()
    async with Client(mcp, elicitation_handler=person) as c:
        args = {"input": "raster/RGB.byte.tif", "output": "out/pipeline/chain.tif", "steps": STEPS}
        err, res = await call(c, "raster_pipeline", **args, plan_only=True)
        assert not err, res
        assert person.shown == []  # a plan changes nothing: nobody is asked
        err, res = await call(c, "raster_pipeline", **args)
        assert not err, res
    assert person.shown == ["Create out/pipeline/chain.tif with raster/RGB.byte.tif processed by clip → reproject?"]
    assert (ws / "out" / "pipeline" / "chain.tif").exists()


async def test_plans_work_on_a_read_only_server_and_runs_do_not(client: Client, server: tuple, monkeypatch) -> None:
    """plan_only writes nothing, so --read-only does not refuse it (both pipelines); running is refused."""
    app = server[1]
    monkeypatch.setattr(app, "settings", dataclasses.replace(app.settings, read_only=True))
    raster = {"input": "raster/RGB.byte.tif", "output": "out/ro/p.tif", "steps": [{"step": "select", "bands": [1]}]}
    vector = {"input": "vector/points.shp", "output": "out/ro/v.gpkg", "steps": [{"step": "reproject", "dst_crs": "EPSG:4326"}]}
    for tool, args in (("raster_pipeline", raster), ("vector_pipeline", vector)):
        err, res = await call(client, tool, **args, plan_only=True)
        assert not err, (tool, res)
        err, res = await call(client, tool, **args)
        assert err and res["error"]["code"] == "read-only", (tool, res)
