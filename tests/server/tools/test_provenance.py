"""Provenance records (issue 28): every output gets `<output>.provenance.json` beside it, in MapSmith's manifest format
(validated against its published JSON schema, tests/data/provenance), with the tool and its arguments, each input's
SHA-256 (checked here with hashlib on the files), the output's, the CRS decision of a reprojection (checked with
pyproj), the libraries' versions and the approval of the call. The record goes with its dataset."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import rasterio
from fastmcp import Client
from mcp.types import ElicitResult

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call

SCHEMA = json.loads((DATA / "provenance" / "manifest-v1.schema.json").read_text())
CORE_CHECKS = set(SCHEMA["properties"]["verification"]["items"]["properties"]["name"]["anyOf"][0]["enum"])


def _record(path: Path) -> dict[str, Any]:
    import jsonschema

    record = json.loads(path.with_name(path.name + ".provenance.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(record)
    # the semantic rules the schema cannot express (spec section 4)
    assert record["finished_at"] >= record["started_at"]
    assert all(c["name"] in CORE_CHECKS or c["name"].startswith("x-gdal-mcp:") for c in record["verification"])
    assert record["output"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    return record


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


SHAPEFILE = ("shp", "shx", "dbf", "prj", "cpg")


def _workspace(tmp_path: Path, raster: str | None = "RGB.byte.tif", shapefile: bool = False) -> Path:
    """A workspace holding RGB.byte.tif (under the name `raster`) and, with `shapefile`, box.shp's five files."""
    ws = tmp_path / "ws"
    ws.mkdir()
    if raster:
        (ws / raster).write_bytes((DATA / "raster" / "RGB.byte.tif").read_bytes())
    for part in SHAPEFILE if shapefile else ():
        (ws / f"box.{part}").write_bytes((DATA / "vector" / f"box.{part}").read_bytes())
    return ws


def _server(ws: Path, confirm: str = "never") -> tuple[Any, Any]:
    return build_server(Settings(workspaces=(ws,), workers=1, timeout=120, confirm=confirm))  # type: ignore[arg-type]


class Approves:
    def __init__(self) -> None:
        self.shown: list[str] = []

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
        self.shown.append(message)
        return ElicitResult(action="accept", content={"confirm": True})


async def test_a_chain_of_three_tools_leaves_a_valid_record_for_each_output(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    mcp, app = _server(ws, "destructive")
    person = Approves()
    try:
        async with Client(mcp, elicitation_handler=person) as client:
            err, res = await call(client, "raster_reproject", input="RGB.byte.tif", output="utm.tif", dst_crs="EPSG:4326")
            assert not err, res
            err, res = await call(client, "raster_clip", input="utm.tif", output="clip.tif", bbox=[-77.8, 24.5, -77.2, 25.0])
            assert not err, res
            err, res = await call(client, "raster_calc", inputs={"A": "clip.tif"}, expression="A * 2", output="calc.tif")
            assert not err, res
            # an overwrite asks the person; the record says who approved it, and how
            err, res = await call(
                client,
                "raster_calc",
                inputs={"A": "clip.tif"},
                expression="A * 3",
                output="calc.tif",
                overwrite=True,
            )
            assert not err, res
            assert len(person.shown) == 1
            # the server keeps the digests the records hold: a next job reading these files is given them
            known = app.digests.known([str(ws / "RGB.byte.tif"), str(ws / "clip.tif")])
            assert known[str((ws / "RGB.byte.tif").resolve())][1] == _sha(ws / "RGB.byte.tif")
            assert known[str((ws / "clip.tif").resolve())][1] == _sha(ws / "clip.tif")
    finally:
        app.executor.close()

    first = _record(ws / "utm.tif")
    assert first["operation"] == "raster_reproject"
    assert first["parameters"] == {"input": "RGB.byte.tif", "output": "utm.tif", "dst_crs": "EPSG:4326"}
    (source,) = first["inputs"]
    assert source["path"] == "RGB.byte.tif" and source["sha256"] == _sha(ws / "RGB.byte.tif") and source["crs"] == "EPSG:32618"
    assert source["x-gdal-mcp:size"] == (ws / "RGB.byte.tif").stat().st_size
    # the CRS decision: the operation PROJ gives for the pair (pyproj, independently)
    from pyproj import Transformer

    expected = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True)
    decision = first["crs_decisions"]
    assert decision["source_crs"] == "EPSG:32618" and decision["target_crs"] == "EPSG:4326"
    assert decision["transformation"]["pipeline"] == expected.definition
    assert decision["transformation"]["is_ballpark"] is False
    assert {c["name"]: c["passed"] for c in first["verification"]}["crs_matches"] is True
    with rasterio.open(ws / "utm.tif") as ds:
        assert first["output"]["crs"] == f"EPSG:{ds.crs.to_epsg()}"
    assert first["engine"]["name"] == "GDAL" and first["engine"]["version"] == rasterio.__gdal_version__
    assert first["x-gdal-mcp:approval"] is None  # nobody was asked for a new file under --confirm destructive
    assert "GDAL_CACHEMAX" in first["environment"]
    assert not any("PROXY" in k or "TOKEN" in k for k in first["environment"])

    second = _record(ws / "clip.tif")
    assert second["inputs"][0]["path"] == "utm.tif" and second["inputs"][0]["sha256"] == first["output"]["sha256"]
    third = _record(ws / "calc.tif")
    assert third["operation"] == "raster_calc" and third["parameters"]["expression"] == "A * 3"
    assert third["inputs"][0]["sha256"] == second["output"]["sha256"]
    approval = third["x-gdal-mcp:approval"]
    assert approval["channel"] == "elicitation" and approval["question"] == person.shown[0]
    assert approval["when"] <= third["started_at"]


async def test_the_record_goes_with_its_dataset_and_holds_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """workspace_copy, workspace_move and workspace_delete take the record with the dataset; a credential in an
    argument is masked in the record (parameters_redacted)."""
    secret = "AKIA-SECRET-VALUE-0123456789"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    ws = _workspace(tmp_path)
    mcp, app = _server(ws)
    try:
        async with Client(mcp) as client:
            err, res = await call(
                client, "raster_convert", input="RGB.byte.tif", output="a.tif", creation_options={"TIFFTAG_DOCUMENTNAME": secret}
            )
            if err:  # a creation option this driver refuses: the record is then checked on a plain convert
                err, res = await call(client, "raster_convert", input="RGB.byte.tif", output="a.tif")
            assert not err, res
            record = _record(ws / "a.tif")
            assert secret not in (ws / "a.tif.provenance.json").read_text()
            # a model reads the record as text through the files resource (JSON is served as text, not base64)
            contents = await client.read_resource("gdal-mcp://files/a.tif.provenance.json")
            assert json.loads(contents[0].text) == record
            err, res = await call(client, "workspace_copy", input="a.tif", output="b.tif")
            assert not err and (ws / "b.tif.provenance.json").exists(), res
            assert json.loads((ws / "b.tif.provenance.json").read_text())["output"]["sha256"] == record["output"]["sha256"]
            err, res = await call(client, "workspace_move", input="b.tif", output="c.tif")
            assert not err and (ws / "c.tif.provenance.json").exists() and not (ws / "b.tif.provenance.json").exists(), res
            err, res = await call(client, "workspace_delete", input="c.tif")
            assert not err and not (ws / "c.tif.provenance.json").exists(), res
    finally:
        app.executor.close()


async def test_lineage_follows_the_chain_and_replay_redoes_it_on_a_new_input(tmp_path: Path) -> None:
    """dataset_lineage of the last output returns the chain back to the original input (as a list and a PNG graph);
    replay with that input substituted plans the three calls, then runs them: outputs byte-identical to the same three
    calls made by hand on the new input, each with its own record."""
    import io

    import numpy as np
    from PIL import Image

    ws = _workspace(tmp_path, raster="may.tif")
    with rasterio.open(ws / "may.tif") as src:  # next month's scene: the same grid, other values
        profile, data = src.profile, src.read()
    with rasterio.open(ws / "june.tif", "w", **profile) as dst:
        dst.write((data // 2 + np.uint8(7)).astype(data.dtype))
    chain = [
        ("raster_reproject", {"input": "{src}", "output": "{p}utm.tif", "dst_crs": "EPSG:4326"}),
        ("raster_clip", {"input": "{p}utm.tif", "output": "{p}clip.tif", "bbox": [-77.8, 24.5, -77.2, 25.0]}),
        ("raster_calc", {"inputs": {"A": "{p}clip.tif"}, "expression": "A * 2 + 1", "output": "{p}calc.tif"}),
    ]

    def filled(value: Any, src: str, p: str) -> Any:
        if isinstance(value, str):
            return value.replace("{src}", src).replace("{p}", p)
        if isinstance(value, dict):
            return {k: filled(v, src, p) for k, v in value.items()}
        return value

    mcp, app = _server(ws)
    try:
        async with Client(mcp) as client:
            for name, args in chain:
                err, res = await call(client, name, **filled(args, "may.tif", ""))
                assert not err, res
            result = await client.call_tool("dataset_lineage", {"input": "calc.tif"})
            lineage = result.structured_content
            assert lineage is not None
            assert [(s["operation"], s["path"]) for s in lineage["steps"]] == [
                (None, "may.tif"),
                ("raster_reproject", "utm.tif"),
                ("raster_clip", "clip.tif"),
                ("raster_calc", "calc.tif"),
            ]
            assert lineage["origins"] == ["may.tif"] and lineage["sha256"] == _sha(ws / "calc.tif")
            assert lineage["steps"][0]["sha256"] == _sha(ws / "may.tif") and all(s["current"] for s in lineage["steps"][1:])
            image = next(c for c in result.content if c.type == "image")
            import base64

            png = Image.open(io.BytesIO(base64.b64decode(image.data)))
            assert png.format == "PNG" and png.width >= 4 * 200

            err, plan = await call(client, "replay", input="calc.tif", substitute={"may.tif": "june.tif"}, suffix="_june")
            assert not err and plan["executed"] is False, plan
            assert [(c["tool"], c["arguments"]) for c in plan["plan"]] == [
                (name, _renamed_args(filled(args, "june.tif", ""))) for name, args in chain
            ]
            assert not (ws / "utm_june.tif").exists()  # a plan writes nothing
            err, ran = await call(
                client, "replay", input="calc.tif", substitute={"may.tif": "june.tif"}, suffix="_june", plan_only=False
            )
            assert not err and ran["executed"] and ran["failed_step"] is None, ran
            assert ran["outputs"] == ["utm_june.tif", "clip_june.tif", "calc_june.tif"]
            for name, args in chain:  # the same calls by hand on the new input
                err, res = await call(client, name, **filled(args, "june.tif", "hand_"))
                assert not err, res
            err, bad = await call(client, "replay", input="calc.tif", substitute={"nope.tif": "june.tif"})
            assert err and bad["error"]["code"] == "invalid-argument" and "may.tif" in bad["error"]["message"], bad
    finally:
        app.executor.close()
    for name in ("utm", "clip", "calc"):
        assert (ws / f"{name}_june.tif").read_bytes() == (ws / f"hand_{name}.tif").read_bytes(), name
        record = _record(ws / f"{name}_june.tif")
        assert record["operation"] == {"utm": "raster_reproject", "clip": "raster_clip", "calc": "raster_calc"}[name]
    assert _record(ws / "calc_june.tif")["inputs"][0]["sha256"] == _sha(ws / "clip_june.tif")
    assert (ws / "calc_june.tif").read_bytes() != (ws / "calc.tif").read_bytes()  # another month, another answer


def _renamed_args(args: dict[str, Any]) -> dict[str, Any]:
    """The chain's arguments with each output (and each read of one) renamed as replay does (suffix _june)."""
    names = {"utm.tif": "utm_june.tif", "clip.tif": "clip_june.tif", "calc.tif": "calc_june.tif"}

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return names.get(value, value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk(args)


def _members_sha(shp: Path) -> str:
    """A shapefile's digest as manifest-spec section 3.3 (draft.9) defines it: SHA-256 of '<ext>\\0<sha256>\\n' per
    member file (.shp .shx .dbf .prj .cpg), sorted by extension."""
    lines = sorted(
        (shp.with_suffix(ext).suffix.lower(), _sha(shp.with_suffix(ext)))
        for ext in (".shp", ".shx", ".dbf", ".prj", ".cpg")
        if shp.with_suffix(ext).exists()
    )
    return hashlib.sha256("".join(f"{ext}\0{sha}\n" for ext, sha in lines).encode()).hexdigest()


async def test_a_shapefile_is_digested_with_all_its_members(tmp_path: Path) -> None:
    """The digest of a shapefile covers its five files, so an edit of its attributes (.dbf) is a change: lineage then
    says the file is no longer the one recorded."""
    ws = _workspace(tmp_path, raster=None, shapefile=True)
    mcp, app = _server(ws)
    try:
        async with Client(mcp) as client:
            err, res = await call(client, "vector_reproject", input="box.shp", output="box4326.shp", dst_crs="EPSG:4326")
            assert not err, res
            record = json.loads((ws / "box4326.shp.provenance.json").read_text())
            assert record["inputs"][0]["sha256"] == _members_sha(ws / "box.shp")
            assert record["output"]["sha256"] == _members_sha(ws / "box4326.shp")
            err, lineage = await call(client, "dataset_lineage", input="box4326.shp")
            assert not err and lineage["steps"][-1]["current"] is True, lineage
            dbf = ws / "box4326.dbf"
            data = dbf.read_bytes()  # the attributes' file changed (a byte of the last record), the .shp not
            dbf.write_bytes(data[:-2] + (b"X" if data[-2:-1] != b"X" else b"Y") + data[-1:])
            err, lineage = await call(client, "dataset_lineage", input="box4326.shp")
            assert not err, lineage
            assert lineage["sha256"] == _members_sha(ws / "box4326.shp") != record["output"]["sha256"]
            assert any("no provenance record describes these bytes" in w for w in lineage["warnings"]), lineage
    finally:
        app.executor.close()


async def test_a_change_in_place_keeps_the_chain(tmp_path: Path) -> None:
    """raster_edit in place (a new nodata) writes the file's new record: its input is the file's bytes before the
    change, the earlier record is kept inside it, and lineage goes through the edit back to the original input."""
    ws = _workspace(tmp_path)
    mcp, app = _server(ws)
    try:
        async with Client(mcp) as client:
            err, res = await call(client, "raster_convert", input="RGB.byte.tif", output="copy.tif")
            assert not err, res
            converted = _record(ws / "copy.tif")
            err, res = await call(client, "raster_edit", input="copy.tif", nodata=255)
            assert not err, res
            edited = _record(ws / "copy.tif")
            assert edited["operation"] == "raster_edit" and edited["output"]["sha256"] == _sha(ws / "copy.tif")
            assert edited["inputs"][0]["sha256"] == converted["output"]["sha256"] != edited["output"]["sha256"]
            assert edited["x-gdal-mcp:previous"]["operation"] == "raster_convert"
            err, lineage = await call(client, "dataset_lineage", input="copy.tif")
            assert not err, lineage
            assert [s["operation"] for s in lineage["steps"]] == [None, "raster_convert", "raster_edit"], lineage
            assert lineage["origins"] == ["RGB.byte.tif"] and lineage["steps"][1]["current"] is False
            assert not [p for p in ws.iterdir() if p.name.startswith(".gdal-mcp-tmp")]
    finally:
        app.executor.close()


async def test_lineage_and_replay_in_a_bucket_workspace(tmp_path: Path) -> None:
    """In a bucket workspace the records are objects beside the outputs: lineage reads them (a worker, through the
    egress proxy) and replay's plan names the objects by their workspace-relative keys."""
    import boto3

    from tests.remote_servers import environment, local_s3

    with local_s3() as (endpoint, env), environment(env):
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="prov")
        s3.upload_file(str(DATA / "raster" / "RGB.byte.tif"), "prov", "ws/RGB.byte.tif")
        mcp, app = build_server(Settings(workspaces=(), bucket="s3://prov/ws", workers=1, timeout=120, confirm="never"))
        try:
            async with Client(mcp) as client:
                err, res = await call(client, "raster_convert", input="RGB.byte.tif", output="out/a.tif", format="COG")
                assert not err, res
                err, res = await call(
                    client, "raster_clip", input="out/a.tif", output="out/b.tif", bbox=[101985, 2611485, 130000, 2640000]
                )
                assert not err, res
                record = json.loads(s3.get_object(Bucket="prov", Key="ws/out/b.tif.provenance.json")["Body"].read())
                body = s3.get_object(Bucket="prov", Key="ws/out/b.tif")["Body"].read()
                assert record["output"]["sha256"] == hashlib.sha256(body).hexdigest()
                err, lineage = await call(client, "dataset_lineage", input="out/b.tif")
                assert not err, lineage
                # the outputs are linked through their records (the S3 ETag of each upload is recorded, so no object is
                # read whole); the original object is read by windows, so it is named, not hashed
                assert [(s["operation"], s["path"]) for s in lineage["steps"]] == [
                    ("raster_convert", "out/a.tif"),
                    ("raster_clip", "out/b.tif"),
                ], lineage
                assert lineage["origins"] == ["RGB.byte.tif"] and lineage["steps"][0]["unhashed_inputs"] == ["RGB.byte.tif"]
                assert lineage["steps"][-1]["current"] is True and lineage["steps"][-1]["record"] == "out/b.tif.provenance.json"
                err, plan = await call(client, "replay", input="out/b.tif", substitute={"RGB.byte.tif": "RGB.byte.tif"})
                assert not err and [c["output"] for c in plan["plan"]] == ["out/a_replay.tif", "out/b_replay.tif"], plan
        finally:
            app.executor.close()


async def test_band_inputs_own_records_and_replay_failures(tmp_path: Path) -> None:
    """raster_calc's 'path:band' input is hashed like the file; of two files with the same bytes, each has its own
    history (its own record first); a replayed output's record says what it replays; a replay whose output exists
    fails with the step's error (isError), saying what was written before it."""
    ws = _workspace(tmp_path, raster="may.tif")
    (ws / "june.tif").write_bytes((DATA / "raster" / "RGB.byte.tif").read_bytes()[:-1] + b"\x01")
    mcp, app = _server(ws)
    try:
        async with Client(mcp) as client:
            for out in ("b1.tif", "b1_copy.tif"):
                err, res = await call(client, "raster_calc", inputs={"A": "may.tif:1"}, expression="A + 1", output=out)
                assert not err, res
            record = _record(ws / "b1.tif")
            assert record["inputs"][0]["sha256"] == _sha(ws / "may.tif") and "notes" not in record
            assert _sha(ws / "b1.tif") == _sha(ws / "b1_copy.tif")
            err, lineage = await call(client, "dataset_lineage", input="b1_copy.tif")
            assert not err and lineage["steps"][-1]["record"] == "b1_copy.tif.provenance.json", lineage
            assert lineage["origins"] == ["may.tif"]
            args = {"input": "b1_copy.tif", "substitute": {"may.tif": "june.tif"}, "suffix": "_june", "plan_only": False}
            err, ran = await call(client, "replay", **args)
            assert not err and ran["outputs"] == ["b1_copy_june.tif"], ran
            replayed = _record(ws / "b1_copy_june.tif")
            assert replayed["x-gdal-mcp:replay_of"] == {
                "record": "b1_copy.tif.provenance.json",
                "sha256": _sha(ws / "b1_copy.tif"),
            }
            err, again = await call(client, "replay", **args)
            assert err and again["error"]["code"] == "already-exists", again
            assert (
                "replay stopped at step 1 of 1" in again["error"]["message"]
                and "nothing was written" in again["error"]["message"]
            )
    finally:
        app.executor.close()


async def test_a_ballpark_datum_shift_is_said_and_recorded(tmp_path: Path) -> None:
    """WGS 84 / UTM 18N (the Bahamas) to the Tokyo datum: PROJ knows no datum shift there and uses a ballpark one
    (checked with pyproj here); raster_reproject says so, and the record's transformation has is_ballpark=true."""
    from pyproj import Transformer
    from pyproj.aoi import AreaOfInterest

    expected = Transformer.from_crs(
        "EPSG:32618", "EPSG:4301", always_xy=True, area_of_interest=AreaOfInterest(-78.9, 23.5, -76.2, 25.6)
    )
    assert "ballpark" in expected.description.lower()
    ws = _workspace(tmp_path)
    mcp, app = _server(ws)
    try:
        async with Client(mcp) as client:
            err, res = await call(client, "raster_reproject", input="RGB.byte.tif", output="tokyo.tif", dst_crs="EPSG:4301")
            assert not err, res
            assert any("'ballpark'" in w for w in res["warnings"]), res["warnings"]
    finally:
        app.executor.close()
    record = _record(ws / "tokyo.tif")
    assert record["crs_decisions"]["transformation"]["is_ballpark"] is True
    assert any("'ballpark'" in w for w in record["x-gdal-mcp:warnings"])


async def test_inputs_in_different_crss_are_recorded(tmp_path: Path) -> None:
    """A raster clipped with a vector mask in another CRS: the record's inputs_share_crs check fails, saying each
    input's CRS, and the CRS decision says the output's CRS and that the other input was transformed to it."""
    ws = _workspace(tmp_path, shapefile=True)
    mcp, app = _server(ws)
    try:
        async with Client(mcp) as client:
            err, res = await call(client, "vector_reproject", input="box.shp", output="box4326.gpkg", dst_crs="EPSG:4326")
            assert not err, res
            err, res = await call(client, "raster_clip", input="RGB.byte.tif", output="clip.tif", mask="box4326.gpkg")
            assert not err, res
    finally:
        app.executor.close()
    record = _record(ws / "clip.tif")
    check = {c["name"]: c for c in record["verification"]}["inputs_share_crs"]
    assert (
        check["passed"] is False
        and "RGB.byte.tif: EPSG:32618" in check["detail"]
        and "box4326.gpkg: EPSG:4326" in check["detail"]
    )
    assert record["crs_decisions"]["analysis_crs"] == "EPSG:32618"
    assert record["crs_decisions"]["x-gdal-mcp:input_crs"] == {"RGB.byte.tif": "EPSG:32618", "box4326.gpkg": "EPSG:4326"}
