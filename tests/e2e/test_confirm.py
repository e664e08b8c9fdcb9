"""--confirm: a person approves changes to existing data through the client, in both protocol eras.

FastMCP's Client in mode="auto" (2026-07-28: the input-required result / retry pattern) and mode="legacy"
(2025-11-25: ctx.elicit) with an elicitation handler that accepts, declines or cancels; the official `mcp`
SDK over stdio without elicitation (fails closed). Files are compared byte for byte; rasters are checked
with rasterio in the test process, independently of the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rasterio
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA

MODES = ("auto", "legacy")
ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}


def fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def decimal_size(n: int) -> str:
    """The size as the question should show it, computed here independently (decimal units)."""
    return f"{n / 1000:.1f} KB" if n < 1_000_000 else f"{n / 1_000_000:.1f} MB"


class Person:
    """An elicitation handler that answers as told and remembers what it was shown."""

    def __init__(self, action: str = "accept", before: Any = None) -> None:
        self.action = action
        self.shown: list[str] = []
        self.before = before  # called with the message before answering (to change files meanwhile)

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
        self.shown.append(message)
        if self.before is not None:
            self.before(message)
        if self.action == "accept":
            return ElicitResult(action="accept", content=response_type(confirm=True))
        return ElicitResult(action=self.action)


class Served:
    def __init__(self, root: Path, confirm: str) -> None:
        self.ws = root / "ws"
        self.ws.mkdir()
        for name in ("slope.tif", "rgb1.tif"):
            shutil.copy(DATA / "raster" / name, self.ws / name)
        for ext in ("shp", "shx", "dbf", "prj", "cpg"):
            shutil.copy(DATA / "vector" / f"box.{ext}", self.ws / f"box.{ext}")
        self.audit = root / "audit.jsonl"
        self.mcp, self.app = build_server(
            Settings(workspaces=(self.ws,), workers=1, timeout=60, audit_log=self.audit, confirm=confirm)
        )

    def decisions(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [r for r in map(json.loads, self.audit.read_text().splitlines()) if r.get("event") == "confirmation"]

    def client(self, mode: str, person: Person | None = None) -> Client:
        return Client(self.mcp, mode=mode, elicitation_handler=person)


@pytest.fixture(scope="module")
def destructive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("confirm-destructive"), "destructive")
    yield s
    s.app.executor.close()


@pytest.fixture(scope="module")
def writes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("confirm-writes"), "writes")
    yield s
    s.app.executor.close()


@pytest.fixture(scope="module")
def never(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("confirm-never"), "never")
    yield s
    s.app.executor.close()


async def call(c: Client, tool: str, **args: Any) -> tuple[bool, dict[str, Any]]:
    r = await c.call_tool(tool, args, raise_on_error=False)
    return r.is_error, r.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_accept_replaces_after_a_concrete_question(destructive: Served, mode: str) -> None:
    s, out = destructive, f"out/{mode}/slope_4326.tif"
    person = Person("accept")
    async with s.client(mode, person) as c:
        assert c.protocol_version == ERAS[mode]
        err, res = await call(c, "raster_convert", input="slope.tif", output=out)
        assert not err, res
        assert person.shown == []  # a new file: not destructive, nothing asked
        before = (s.ws / out).stat()
        err, res = await call(c, "raster_reproject", input="slope.tif", output=out, dst_crs="EPSG:4326", overwrite=True)
        assert not err, res
    assert len(person.shown) == 1
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(before.st_mtime))
    assert person.shown[0] == (
        f"Replace {out} ({decimal_size(before.st_size)}, modified {stamp}) with a reprojection of slope.tif to EPSG:4326?"
    )
    with rasterio.open(s.ws / out) as ds:
        assert ds.crs.to_epsg() == 4326
    record = s.decisions()[-1]
    assert record["tool"] == "raster_reproject" and record["answer"] == "approved"
    assert record["channel"] == "elicitation" and record["shown"] == person.shown[0] and record["kind"] == "replace"
    assert record["detail"] == {"auto": "input-required retry (2026-07-28)", "legacy": "ctx.elicit (2025-11-25)"}[mode]
    assert str(s.ws) not in json.dumps(record)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_or_cancel_touches_nothing(destructive: Served, mode: str, action: str) -> None:
    s, out = destructive, f"out/{mode}-{action}.tif"
    async with s.client(mode, Person("accept")) as c:
        assert not (await call(c, "raster_convert", input="slope.tif", output=out))[0]
    before = fingerprint(s.ws / out)
    listing = sorted(p.name for p in (s.ws / "out").iterdir())
    person = Person(action)
    async with s.client(mode, person) as c:
        err, res = await call(c, "raster_convert", input="rgb1.tif", output=out, overwrite=True)
        assert err and res["error"]["code"] == "declined", res
        assert "Nothing was changed" in res["error"]["message"]
        err, res = await call(c, "raster_edit", input=out, nodata=7)
        assert err and res["error"]["code"] == "declined", res
        err, res = await call(c, "raster_overviews", input=out)
        assert err and res["error"]["code"] == "declined", res
    assert fingerprint(s.ws / out) == before
    assert sorted(p.name for p in (s.ws / "out").iterdir()) == listing  # no temporary left behind
    assert person.shown[1].startswith(f"Change {out} (") and "set nodata to 7" in person.shown[1]
    assert person.shown[2].startswith(f"Rewrite {out} (") and "add overviews" in person.shown[2]
    answers = [(r["tool"], r["answer"], r["channel"]) for r in s.decisions()[-3:]]
    expected = "declined" if action == "decline" else "cancelled"
    assert answers == [
        ("raster_convert", expected, "elicitation"),
        ("raster_edit", expected, "elicitation"),
        ("raster_overviews", expected, "elicitation"),
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_destructive_tools_run_once_approved(destructive: Served, mode: str) -> None:
    s, out = destructive, f"out/ovr-{mode}.tif"
    async with s.client(mode, Person("accept")) as c:
        assert not (await call(c, "raster_convert", input="slope.tif", output=out))[0]
        with rasterio.open(s.ws / out) as ds:
            assert ds.overviews(1) == []
        err, res = await call(c, "raster_overviews", input=out, levels=[2, 4])
        assert not err, res
        err, res = await call(c, "raster_edit", input=out, nodata=-1)
        assert not err, res
    with rasterio.open(s.ws / out) as ds:
        assert ds.overviews(1) == [2, 4] and ds.nodata == -1


@pytest.mark.parametrize("mode", MODES)
async def test_vector_append_asks(destructive: Served, mode: str) -> None:
    s, out = destructive, f"out/box-{mode}.gpkg"
    person = Person("decline")
    async with s.client(mode, person) as c:
        assert not (await call(c, "vector_convert", input="box.shp", output=out))[0]
        before = fingerprint(s.ws / out)
        err, res = await call(c, "vector_convert", input="box.shp", output=out, mode="append")
        assert err and res["error"]["code"] == "declined", res
    assert fingerprint(s.ws / out) == before
    assert person.shown[0].startswith(f"Append the features of box.shp to {out} (")


async def test_an_answer_binds_to_the_file_as_it_was_shown(destructive: Served) -> None:
    """2026-07-28: the file changes while the person decides; the answer is void and they are asked again."""
    s, out = destructive, "out/moving.tif"
    async with s.client("auto", Person("accept")) as c:
        assert not (await call(c, "raster_convert", input="slope.tif", output=out))[0]

    def touch_once(message: str) -> None:
        if len(person.shown) == 1:
            (s.ws / out).write_bytes((s.ws / out).read_bytes() + b"\0" * 5000)

    person = Person("accept", before=touch_once)
    async with s.client("auto", person) as c:
        err, res = await call(c, "raster_convert", input="rgb1.tif", output=out, overwrite=True)
        assert not err, res
    assert len(person.shown) == 2 and person.shown[0] != person.shown[1]
    grown = decimal_size((DATA / "raster" / "slope.tif").stat().st_size)
    assert grown not in person.shown[1]
    with rasterio.open(s.ws / out) as ds, rasterio.open(DATA / "raster" / "rgb1.tif") as ref:
        assert ds.count == ref.count and ds.shape == ref.shape


@pytest.mark.parametrize("mode", MODES)
async def test_writes_policy_asks_for_new_files_too(writes: Served, mode: str) -> None:
    s = writes
    person = Person("decline")
    async with s.client(mode, person) as c:
        err, res = await call(c, "raster_convert", input="slope.tif", output=f"new-{mode}.tif")
        assert err and res["error"]["code"] == "declined", res
        assert not (await call(c, "raster_info", path="slope.tif"))[0]  # reading is not asked about
    assert not (s.ws / f"new-{mode}.tif").exists()
    assert person.shown == [f"Create new-{mode}.tif with a conversion of slope.tif?"]


async def test_never_asks_nothing_and_audits_the_policy(never: Served) -> None:
    s = never
    person = Person("decline")
    async with s.client("legacy", person) as c:
        assert not (await call(c, "raster_convert", input="slope.tif", output="o.tif"))[0]
        assert not (await call(c, "raster_convert", input="rgb1.tif", output="o.tif", overwrite=True))[0]
        assert not (await call(c, "raster_edit", input="o.tif", nodata=3))[0]
    assert person.shown == []
    with rasterio.open(s.ws / "o.tif") as ds:
        assert ds.count == 3 and ds.nodata == 3
    assert [(r["tool"], r["answer"], r["channel"], r["detail"]) for r in s.decisions()] == [
        ("raster_convert", "approved", "policy", "--confirm never"),
        ("raster_edit", "approved", "policy", "--confirm never"),
    ]


async def test_client_without_elicitation_fails_closed_over_stdio(tmp_path: Path) -> None:
    """The official SDK's ClientSession declares no elicitation: confirmation-required, nothing touched."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(DATA / "raster" / "slope.tif", ws / "slope.tif")
    audit = tmp_path / "audit.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=sys.executable,
        env=env,
        args=["-m", "gdal_mcp", "--workspace", str(ws), "--workers", "1", "--audit-log", str(audit)],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        r = await session.call_tool("raster_convert", {"input": "slope.tif", "output": "copy.tif"})
        assert not r.is_error  # a new file: the default policy lets it through
        before = fingerprint(ws / "copy.tif"), fingerprint(ws / "slope.tif")
        for tool, args in (
            ("raster_convert", {"input": "slope.tif", "output": "copy.tif", "overwrite": True}),
            ("raster_edit", {"input": "copy.tif", "nodata": 1}),
            ("raster_overviews", {"input": "slope.tif"}),
        ):
            r = await session.call_tool(tool, args)
            assert r.is_error and r.structured_content["error"]["code"] == "confirmation-required", r
            message = r.structured_content["error"]["message"]
            assert "cannot ask its user" in message and "--confirm never" in message and str(ws) not in message
    assert (fingerprint(ws / "copy.tif"), fingerprint(ws / "slope.tif")) == before
    assert sorted(p.name for p in ws.iterdir()) == ["copy.tif", "copy.tif.provenance.json", "slope.tif"]
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    refused = [(r["tool"], r["answer"], r["channel"]) for r in records if r.get("event") == "confirmation"]
    assert refused == [
        ("raster_convert", "refused", "policy"),
        ("raster_edit", "refused", "policy"),
        ("raster_overviews", "refused", "policy"),
    ]
    outcomes = [r["outcome"] for r in records if "outcome" in r]
    assert outcomes == ["ok", "confirmation-required", "confirmation-required", "confirmation-required"]
