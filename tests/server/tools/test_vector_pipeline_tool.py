"""vector_pipeline through the MCP client: one call, one output, compared with Debian's ogr2ogr (GDAL 3.6) and with
the separate tools; plan_only writes nothing and agrees with the run; refusals name the step and leave nothing."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyogrio
import shapely
from fastmcp import Client

from tests.cli_reference import gdal_cli
from tests.helpers import call

NE = "vector/naturalearth_lowres.shp"
OUT = "out/vector_pipeline"
AFRICA = "continent = 'Africa'"
STEPS = [
    {"step": "filter", "where": AFRICA},
    {"step": "reproject", "dst_crs": "EPSG:3857"},
    {"step": "select", "fields": ["name", "pop_est"]},
]


def _read(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyogrio.read_dataframe(path)


def _geoms(df: Any) -> np.ndarray:
    out = [g.geoms[0] if g is not None and g.geom_type.startswith("Multi") and len(g.geoms) == 1 else g for g in df.geometry]
    return shapely.normalize(np.array(out, dtype=object))


def _leftovers(folder: Path, stem: str) -> list[str]:
    """Files (or temporary directories) a call left under `folder` for outputs named `stem`."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(stem) or ".tmp" in p.name) if folder.is_dir() else []


async def test_writes_what_ogr2ogr_writes(client: Client, ws: Path, tmp_path: Path) -> None:
    err, out = await call(client, "vector_pipeline", input=NE, output=f"{OUT}/africa.gpkg", steps=STEPS)
    assert not err, out
    assert out["output"] == f"{OUT}/africa.gpkg" and out["uri"].endswith(f"{OUT}/africa.gpkg")
    assert out["summary"]["feature_count"] == 51 and out["summary"]["crs"] == "EPSG:3857"
    # the GDAL pipeline that ran, with workspace-relative paths
    assert out["pipeline"].startswith(f'read --input-layer=naturalearth_lowres --input={NE} ! filter "--where={AFRICA}"')
    assert out["pipeline"].endswith(f"write --of=GPKG --output-layer=africa --output={OUT}/africa.gpkg")
    assert str(ws) not in json.dumps(out)

    ref = tmp_path / "ref.gpkg"
    gdal_cli("ogr2ogr", "-f", "GPKG", str(ref), str(ws / NE), "-where", AFRICA, "-t_srs", "EPSG:3857", "-select", "name,pop_est")
    got, expected = _read(ws / OUT / "africa.gpkg"), _read(ref)
    assert sorted(got.columns) == sorted(expected.columns)
    assert got[["name", "pop_est"]].equals(expected[["name", "pop_est"]])
    # 1 mm in Web Mercator metres: the same PROJ formulas (measured difference: 0)
    assert shapely.equals_exact(_geoms(got), _geoms(expected), 1e-3).all()


async def test_plan_only_writes_nothing_and_agrees_with_the_run(client: Client, ws: Path) -> None:
    steps = [*STEPS, {"step": "buffer", "distance": 5, "units": "km"}]
    err, plan = await call(client, "vector_pipeline", input=NE, output=f"{OUT}/plan.gpkg", steps=steps, plan_only=True)
    assert not err, plan
    assert plan["plan_only"] and plan["uri"] is None and plan["summary"] is None
    assert _leftovers(ws / OUT, "plan") == []
    stages = plan["plan"]
    assert [(s["index"], s["step"]) for s in stages] == [
        (None, "read"),
        (0, "filter"),
        (1, "reproject"),
        (2, "select"),
        (3, "buffer"),
    ]
    assert [s["feature_count"] for s in stages] == [177, 51, 51, 51, 51]
    assert [s["crs"] for s in stages] == ["EPSG:4326", "EPSG:4326", "EPSG:3857", "EPSG:3857", "EPSG:3857"]
    assert "--distance=5000" in stages[-1]["gdal"]  # 5 km in the metres of EPSG:3857

    err, run = await call(client, "vector_pipeline", input=NE, output=f"{OUT}/plan.gpkg", steps=steps)
    assert not err, run
    last, summary = stages[-1], run["summary"]
    assert (last["feature_count"], last["crs"], last["geometry_type"]) == (
        summary["feature_count"],
        summary["crs"],
        summary["geometry_type"],
    )
    assert [f["name"] for f in last["fields"]] == summary["fields"]
    info = pyogrio.read_info(ws / OUT / "plan.gpkg")
    assert [f["type"] for f in last["fields"]] == [t.removeprefix("OFT") for t in info["ogr_types"]]
    assert plan["pipeline"] == run["pipeline"]


async def test_existing_output_needs_overwrite(client: Client, ws: Path) -> None:
    args = {"input": NE, "output": f"{OUT}/twice.fgb", "steps": [{"step": "limit", "limit": 2}]}
    assert not (await call(client, "vector_pipeline", **args))[0]
    err, out = await call(client, "vector_pipeline", **{**args, "steps": [{"step": "limit", "limit": 3}]})
    assert err and out["error"]["code"] == "already-exists"
    assert len(_read(ws / OUT / "twice.fgb")) == 2  # untouched
    err, out = await call(client, "vector_pipeline", **{**args, "steps": [{"step": "limit", "limit": 3}]}, overwrite=True)
    assert not err and out["summary"]["feature_count"] == 3 == len(_read(ws / OUT / "twice.fgb"))


async def test_refusals_name_the_step_and_leave_nothing(client: Client, ws: Path) -> None:
    cases = [
        ([{"step": "limit", "limit": 1}, {"step": "nope"}], "steps.1"),
        ([{"step": "read", "input": NE}], "steps.0"),
        ([{"step": "limit", "limit": 1}, {"step": "filter", "where": "no_such_field > 1"}], "steps[1] (filter)"),
        ([{"step": "buffer", "distance": 100}], "steps[0] (buffer)"),  # the world in metres: too wide for one zone
        ([{"step": "sql", "sql": "SELECT * FROM naturalearth_lowres; ATTACH 'x.db' AS x"}], "steps[0] (sql)"),
    ]
    for steps, says in cases:
        for plan_only in (False, True):
            err, out = await call(
                client, "vector_pipeline", input=NE, output=f"{OUT}/refused.gpkg", steps=steps, plan_only=plan_only
            )
            assert err and out["error"]["code"] in ("invalid-argument", "unsupported"), out
            assert says in out["error"]["message"], out["error"]["message"]
    assert _leftovers(ws / OUT, "refused") == []


async def test_clip_to_a_mask_file_equals_vector_clip(client: Client, ws: Path) -> None:
    (ws / OUT).mkdir(parents=True, exist_ok=True)
    mask = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {"k": 1},
                "geometry": {"type": "Polygon", "coordinates": [[[5, 40], [25, 40], [25, 55], [5, 55], [5, 40]]]},
            }
        ],
    }
    (ws / OUT / "mask.geojson").write_text(json.dumps(mask))
    err, out = await call(
        client,
        "vector_pipeline",
        input=NE,
        output=f"{OUT}/clipped.gpkg",
        steps=[{"step": "clip", "mask": f"{OUT}/mask.geojson"}, {"step": "select", "fields": ["name"]}],
    )
    assert not err, out
    err, ref = await call(client, "vector_clip", input=NE, output=f"{OUT}/clipped_ref.gpkg", mask=f"{OUT}/mask.geojson")
    assert not err, ref
    got, expected = _read(ws / OUT / "clipped.gpkg"), _read(ws / OUT / "clipped_ref.gpkg")
    assert got["name"].tolist() == expected["name"].tolist() and len(got) == out["summary"]["feature_count"] > 5
    assert shapely.equals_exact(_geoms(got), _geoms(expected), 1e-9).all()  # degrees: the same GEOS intersection


async def test_buffer_and_simplify_read_like_vector_buffer_and_simplify(client: Client) -> None:
    """Same names, same meaning: distance/tolerance in `units`, metres by default, described as the tools do."""
    tools = {t.name: t.input_schema for t in await client.list_tools()}
    items = tools["vector_pipeline"]["properties"]["steps"]["items"]
    steps = {v["properties"]["step"]["const"]: v["properties"] for v in items["oneOf"]}
    buffer, simplify = tools["vector_buffer"]["properties"], tools["vector_simplify"]["properties"]
    for step, tool, names in ((steps["buffer"], buffer, ("units", "segments")), (steps["simplify"], simplify, ("units",))):
        for name in names:
            assert step[name]["description"] == tool[name]["description"]
            assert step[name].get("default") == tool[name].get("default")
    assert steps["buffer"]["distance"]["description"] == buffer["distance"]["description"].split(";")[0]
    assert steps["simplify"]["tolerance"]["description"] == simplify["tolerance"]["description"]
    assert "DEGREES" in steps["segmentize"]["max_length"]["description"]
