"""Provenance records are files in the workspace, so anyone who can write there can plant one (a shared folder, an
unzipped download). Only records this server signed (HMAC with a key kept outside the workspace) are believed: for
a digest, for lineage, for replay. Replay runs only tools that write an output, never itself, and stops when a step
needs an approval it cannot ask for. Records and the console never carry credentials or reach outside the
workspace. Each test names the attack class it covers (found by a red team)."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from mcp.types import ElicitResult

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _signed(record: dict[str, Any], key: str) -> dict[str, Any]:
    body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return {**record, "x-gdal-mcp:signature": "hmac-sha256:" + hmac.new(bytes.fromhex(key), body, hashlib.sha256).hexdigest()}


def _forged(operation: str, parameters: dict[str, Any], source: Path, output: Path) -> dict[str, Any]:
    return {
        "spec_version": "1.0.0-draft.6",
        "operation": operation,
        "parameters": parameters,
        "inputs": [{"path": source.name, "sha256": _sha(source)}],
        "output": {"path": output.name, "sha256": _sha(output)},
        "engine": {"name": "GDAL", "version": "3.12.2"},
        "verification": [{"name": "crs_present", "passed": True, "detail": "planted"}],
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z",
    }


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.tif").write_bytes((DATA / "raster" / "RGB.byte.tif").read_bytes())
    (root / "b.tif").write_bytes((DATA / "raster" / "RGB.byte.tif").read_bytes()[:-1] + b"\x02")
    for part in ("shp", "shx", "dbf", "prj", "cpg"):
        (root / f"keep.{part}").write_bytes((DATA / "vector" / f"box.{part}").read_bytes())
    return root


async def test_a_planted_record_is_not_believed(ws: Path) -> None:
    """Attack class: forged provenance. An unsigned record beside b.tif claiming it was made from a.tif by
    workspace_delete (to make replay delete keep.shp), and one with a wrong signature, are left out of lineage (with
    a warning); replay finds nothing to run; nothing is deleted; a new output's record does not take the forged
    digest of its input."""
    forged = _forged("workspace_delete", {"input": "keep.shp"}, ws / "a.tif", ws / "b.tif")
    (ws / "b.tif.provenance.json").write_text(json.dumps({**forged, "x-gdal-mcp:signature": "hmac-sha256:" + "0" * 64}))
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    try:
        async with Client(mcp) as client:
            err, lineage = await call(client, "dataset_lineage", input="b.tif")
            assert not err and [s["operation"] for s in lineage["steps"]] == [None], lineage
            assert any("not signed by this server" in w for w in lineage["warnings"]), lineage
            err, res = await call(client, "replay", input="b.tif", substitute={"a.tif": "a.tif"}, plan_only=False)
            assert err and res["error"]["code"] == "invalid-argument", res
            assert (ws / "keep.shp").exists() and (ws / "keep.dbf").exists()
            # the record beside an input is not trusted for its digest: the new record has b.tif's real digest
            state = ";".join(f":{(ws / 'b.tif').stat().st_size}:{(ws / 'b.tif').stat().st_mtime_ns}" for _ in [0])
            lying = {**forged, "output": {"path": "b.tif", "sha256": "0" * 64, "x-gdal-mcp:state": state}}
            (ws / "b.tif.provenance.json").write_text(json.dumps(lying))
            err, res = await call(client, "raster_convert", input="b.tif", output="c.tif")
            assert not err, res
            record = json.loads((ws / "c.tif.provenance.json").read_text())
            assert record["inputs"][0]["sha256"] == _sha(ws / "b.tif")
    finally:
        app.executor.close()


async def test_replay_runs_only_tools_that_write_an_output(ws: Path) -> None:
    """Attack class: a record choosing what runs. Even a record signed with the server's key (an earlier version, a
    copied record) naming workspace_delete, or replay itself (recursion), is not run; nothing changes."""
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    try:
        for operation, parameters in (
            ("workspace_delete", {"input": "keep.shp"}),
            ("replay", {"input": "b.tif", "substitute": {"a.tif": "a.tif"}, "plan_only": False}),
        ):
            record = _signed(_forged(operation, parameters, ws / "a.tif", ws / "b.tif"), app.provenance_key)
            (ws / "b.tif.provenance.json").write_text(json.dumps(record))
            async with Client(mcp) as client:
                err, res = await call(client, "replay", input="b.tif", substitute={"a.tif": "a.tif"}, plan_only=False)
            assert err and res["error"]["code"] == "invalid-argument" and "does not run" in res["error"]["message"], res
            assert (ws / "keep.shp").exists()
    finally:
        app.executor.close()


async def test_lineage_survives_hostile_records_and_never_leaves_the_workspace(ws: Path, tmp_path: Path) -> None:
    """Attack classes: denial of service and reading outside the workspace. A record of 100 000 nested arrays is
    skipped; a record that is a link to a file outside the workspace is not read (the worker cannot, and the
    console's view has no record)."""
    from gdal_mcp import jobs

    (ws / "deep.tif.provenance.json").write_text("[" * 100_000)
    secret = tmp_path / "outside.json"
    secret.write_text(json.dumps({"private_key": "-----BEGIN PRIVATE KEY-----SUPERSECRET"}))
    (ws / "a.tif.provenance.json").symlink_to(secret)
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    try:
        async with Client(mcp) as client:
            err, lineage = await call(client, "dataset_lineage", input="a.tif")
            assert err and lineage["error"]["code"] == "out-of-root", lineage  # the sandbox refuses a linked side file
            assert "SUPERSECRET" not in json.dumps(lineage)
            err, other = await call(client, "dataset_lineage", input="b.tif")  # the deep record is skipped, not fatal
            assert not err, other
        result = await app.execute(jobs.LineageJob(path=str(ws / "a.tif"), roots=[str(ws)], key=app.provenance_key))
        assert result.record is None
    finally:
        app.executor.close()


async def test_records_carry_no_credential(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack class: credential disclosure. A cookie or bearer token in GDAL's settings, and a password in a URL
    argument, never reach a record (an allow-list of settings is recorded; URL passwords are masked)."""
    from gdal_mcp.credentials import redact_obj

    monkeypatch.setenv("GDAL_HTTP_COOKIE", "sessionid=COOKIESECRET123456")
    monkeypatch.setenv("GDAL_HTTP_BEARER", "BEARERSECRET123456")
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    try:
        async with Client(mcp) as client:
            err, res = await call(client, "raster_convert", input="a.tif", output="c.tif")
            assert not err, res
    finally:
        app.executor.close()
    text = (ws / "c.tif.provenance.json").read_text()
    assert "COOKIESECRET" not in text and "BEARERSECRET" not in text and "/tmp/gdal-mcp-workers" not in text
    masked = redact_obj({"src": "https://bob:hunter2pw@data.example.com/x.tif", "where": "'postgresql://u:dbpass99@h/db'"})
    assert "hunter2pw" not in json.dumps(masked) and "dbpass99" not in json.dumps(masked), masked


async def test_replay_stops_where_a_step_needs_an_approval_it_cannot_ask(ws: Path) -> None:
    """Attack class: confirmation bypass. Under --confirm writes, the person approves the replay; its step would
    write a file, which needs its own approval, and replay cannot relay that question: it stops with
    confirmation-required and writes nothing (before, it reported the steps done)."""

    async def approves(message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"confirm": True})

    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    try:
        async with Client(mcp) as client:
            err, res = await call(client, "raster_convert", input="a.tif", output="c.tif")
            assert not err, res
    finally:
        app.executor.close()
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="writes"))
    try:
        async with Client(mcp, elicitation_handler=approves) as client:
            err, res = await call(client, "replay", input="c.tif", substitute={"a.tif": "b.tif"}, plan_only=False)
            assert err and res["error"]["code"] == "confirmation-required", res
            assert "step 1 of 1" in res["error"]["message"]
    finally:
        app.executor.close()
    assert not (ws / "c_replay.tif").exists()


async def test_the_signing_key_is_never_a_path_a_tool_may_name(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack class: stealing or destroying the signing key. A server whose workspace holds the key directory of the
    user's other servers (--workspace ~) cannot read, list, copy, move, delete or overwrite it."""
    state = ws / ".local" / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    (state / "gdal-mcp").mkdir(parents=True)
    (state / "gdal-mcp" / "provenance.key").write_text("ab" * 32)
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    assert app.provenance_key != "ab" * 32  # a key inside a workspace is never used either
    key = ".local/state/gdal-mcp/provenance.key"
    try:
        async with Client(mcp) as client:
            with pytest.raises(Exception, match="out-of-root|outside"):
                await client.read_resource(f"gdal-mcp://files/{key}")
            for tool, args in (
                ("workspace_delete", {"input": key}),
                ("workspace_copy", {"input": key, "output": "stolen.key"}),
                ("raster_convert", {"input": "a.tif", "output": ".local/state/gdal-mcp/x.tif"}),
            ):
                err, res = await call(client, tool, **args)
                assert err and res["error"]["code"] in ("out-of-root", "invalid-argument", "not-found"), (tool, res)
            err, listed = await call(client, "list_datasets", path=".local/state")
            assert "ab" * 32 not in json.dumps(listed)  # at most named, never opened
            assert all(e.get("driver") is None for e in listed.get("entries", []) if "provenance.key" in e["path"])
    finally:
        app.executor.close()
    assert (state / "gdal-mcp" / "provenance.key").read_text() == "ab" * 32


async def test_replay_follows_a_copy_and_lineage_is_not_hijacked_by_same_bytes(ws: Path) -> None:
    """Attack class: replay computing from stale data, and lineage rewritten by an unrelated call. A step that read a
    copy of an earlier output reads the replayed output (linked by digest, not name); another file written with the
    same bytes as an intermediate does not take over its step."""
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    try:
        async with Client(mcp) as client:
            for tool, args in (
                ("raster_convert", {"input": "a.tif", "output": "mid.tif"}),
                ("workspace_copy", {"input": "mid.tif", "output": "work/mid2.tif"}),
                ("raster_clip", {"input": "work/mid2.tif", "output": "final.tif", "bbox": [101985, 2611485, 130000, 2640000]}),
                ("raster_convert", {"input": "mid.tif", "output": "scratch/same.tif"}),  # the same bytes again
            ):
                err, res = await call(client, tool, **args)
                assert not err, (tool, res)
            assert _sha(ws / "scratch" / "same.tif") == _sha(ws / "mid.tif")
            err, lineage = await call(client, "dataset_lineage", input="final.tif")
            assert not err, lineage
            assert [(s["operation"], s["path"]) for s in lineage["steps"]] == [
                (None, "a.tif"),
                ("raster_convert", "mid.tif"),
                ("raster_clip", "final.tif"),
            ], lineage
            err, plan = await call(client, "replay", input="final.tif", substitute={"a.tif": "b.tif"})
            assert not err, plan
            assert [c["arguments"]["input"] for c in plan["plan"]] == ["b.tif", "mid_replay.tif"], plan
    finally:
        app.executor.close()
