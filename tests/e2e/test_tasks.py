"""Long jobs as MCP tasks (fastmcp-tasks, 2026-07-28): task id at once, polled status with the progress
messages, the result, cancellation (worker killed, nothing left); legacy clients get the result inline."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from fastmcp.exceptions import ToolError
from fastmcp_tasks import call_tool_task

from gdal_mcp.config import Settings
from gdal_mcp.sandbox import TMP_PREFIX
from gdal_mcp.server.build import TASKS_CHECK_INTERVAL, build_server, tasks_check_interval
from tests.helpers import huge_vrt, make_workspace

# RGB.byte.tif (791 x 718, UTM 18N) warped to ~0.0003° pixels: about 8000 x 6600 x 3, a few seconds of work
WARP = {
    "input": "raster/RGB.byte.tif",
    "dst_crs": "EPSG:4326",
    "resolution": 0.0006,
    "creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"},
}
# a 200000 x 200000 sourceless VRT written out: runs far longer than any test
ENDLESS = {"input": "huge.vrt", "output": "out/endless.tif", "creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"}}


@pytest.fixture(scope="module")
def tasks_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    ws = make_workspace(tmp_path_factory.mktemp("tasks"))
    huge_vrt(ws / "huge.vrt")
    audit = tmp_path_factory.mktemp("tasks_audit") / "audit.jsonl"
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=120, audit_log=audit))
    yield mcp, app, ws, audit
    app.executor.close()


@pytest.fixture
async def modern(tasks_server: tuple) -> AsyncIterator[Client]:
    async with Client(tasks_server[0], mode="auto") as c:
        assert c.protocol_version == "2026-07-28"
        yield c


def leftovers(ws: Path) -> list[str]:
    return [str(p.relative_to(ws)) for p in ws.rglob(f"{TMP_PREFIX}*")]


def audit_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_write_tools_are_task_capable_and_read_tools_inline(tasks_server: tuple) -> None:
    tools = {t.name: t for t in await tasks_server[0].list_tools(run_middleware=False)}
    for name in (
        "raster_convert",
        "raster_reproject",
        "raster_clip",
        "raster_mosaic",
        "raster_overviews",
        "raster_calc",
        "raster_terrain",
        "raster_polygonize",
        "vector_rasterize",
        "zonal_stats",
        "vector_convert",
        "vector_buffer",
        "vector_dissolve",
        "raster_contour",
        "raster_proximity",
    ):
        assert tools[name].task_config.mode == "optional", name
    for name in ("raster_info", "vector_info", "list_datasets", "raster_stats", "vector_features", "crs_info"):
        assert not tools[name].task_config.supports_tasks(), name


async def test_every_task_tool_can_be_queued(tasks_server: tuple, modern: Client) -> None:
    """Docket hashes a task function's signature; one unhashable default (a list) once stopped its worker loop,
    and with it every task of the server."""
    for tool in await tasks_server[0].list_tools(run_middleware=False):
        if tool.task_config.supports_tasks():
            hash(inspect.signature(tool.fn))
    # raster_preview has a list default (percentiles=[2, 98]): run as a task, then another task after it
    for _ in range(2):
        task = await call_tool_task(modern, "raster_preview", {"input": "raster/slope.tif", "max_size": 64})
        r = await asyncio.wait_for(task.result(), 60)
        assert not r.is_error and r.content[0].type == "image"
        assert max(r.structured_content["width"], r.structured_content["height"]) == 64


async def test_reproject_as_a_task_polled_to_its_result(modern: Client, tasks_server: tuple, tmp_path: Path) -> None:
    _, app, ws, audit = tasks_server
    t0 = time.perf_counter()
    task = await call_tool_task(modern, "raster_reproject", {**WARP, "output": "out/task_warp.tif"})
    created = time.perf_counter() - t0
    assert created < 2.0, f"the task id came after {created:.1f} s"  # at once: the job itself takes seconds
    assert task.task_id
    statuses: list[tuple[str, str | None]] = []
    while True:
        status = await task.status()
        statuses.append((status.status, status.status_message))
        if status.status != "working":
            break
        assert time.perf_counter() - t0 < 120
        await asyncio.sleep(0.2)
    assert statuses[-1][0] == "completed", statuses
    messages = [m for s, m in statuses if s == "working" and m]
    assert any("warping" in m for m in messages), statuses  # the engine's progress, relayed as the status message
    result = await task.result()
    assert not result.is_error
    sc = result.structured_content
    assert sc["output"] == "out/task_warp.tif" and sc["uri"] == "gdal-mcp://files/out/task_warp.tif"
    assert sc["download_url"] is None  # not over HTTP
    links = [c for c in result.content if c.type == "resource_link"]
    assert [str(x.uri) for x in links] == [sc["uri"]]

    # independent reference: GDAL's own gdalwarp with the same grid request
    out = ws / "out" / "task_warp.tif"
    if shutil.which("gdalwarp") is None:
        pytest.skip("gdalwarp (Debian gdal-bin) is not installed: no independent reference here")
    ref = tmp_path / "ref.tif"
    subprocess.run(
        [
            "gdalwarp",
            "-q",
            "-t_srs",
            "EPSG:4326",
            "-tr",
            "0.0006",
            "0.0006",
            "-r",
            "near",
            "-et",
            "0",
            str(ws / "raster" / "RGB.byte.tif"),
            str(ref),
        ],
        check=True,
        timeout=300,
    )
    with rasterio.open(out) as a, rasterio.open(ref) as b:
        assert a.crs.to_epsg() == 4326 and a.count == b.count == 3
        assert abs(a.width - b.width) <= 1 and abs(a.height - b.height) <= 1
        assert np.allclose(a.res, b.res)
        assert abs(a.bounds.left - b.bounds.left) < 0.0012 and abs(a.bounds.top - b.bounds.top) < 0.0012
        h, w = min(a.height, b.height), min(a.width, b.width)
        x, y = a.read(window=((0, h), (0, w))), b.read(window=((0, h), (0, w)))
        # against the exact transformation (gdalwarp -et 0): GDAL interpolates it along each row of a block (up to 1/8
        # pixel off), so a few nearest pixels pick the neighbour (measured: 99.7 % equal at 0.0003°, 98.96 % at 0.0006°,
        # where a neighbour is a larger step)
        assert np.mean(x == y) > 0.985, np.mean(x == y)

    # the audit log: the task's creation and its run, both with the task id
    records = [r for r in audit_lines(audit) if r.get("task") == task.task_id]
    assert [r["outcome"] for r in records] == ["task-created", "ok"], records
    assert records[1]["outputs"] == ["out/task_warp.tif"]
    assert records[1]["arguments"]["output"] == "out/task_warp.tif" and "overwrite" not in records[1]["arguments"]


async def test_cancelled_task_kills_the_worker_and_leaves_nothing(modern: Client, tasks_server: tuple) -> None:
    _, app, ws, audit = tasks_server
    task = await call_tool_task(modern, "raster_convert", ENDLESS)
    busy: list[int] = []
    for _ in range(300):  # the worker may still be starting (GDAL import) on a loaded machine
        busy = app.executor.busy_pids()
        if busy and leftovers(ws) and (await task.status()).status_message:
            break
        await asyncio.sleep(0.1)
    assert len(busy) == 1 and leftovers(ws), (busy, leftovers(ws))
    assert (await task.status()).status == "working"
    (pid,) = busy
    await task.cancel()
    for _ in range(100):
        if not alive(pid) and not leftovers(ws):
            break
        await asyncio.sleep(0.1)
    assert not alive(pid), "the worker running the cancelled job is still alive"
    assert leftovers(ws) == [] and not (ws / "out" / "endless.tif").exists()
    assert pid not in app.executor.busy_pids()
    assert (await task.status()).status == "cancelled"
    with pytest.raises(ToolError, match="cancelled"):
        await task.result()
    for _ in range(50):
        records = [r for r in audit_lines(audit) if r.get("task") == task.task_id]
        if len(records) == 2:
            break
        await asyncio.sleep(0.1)
    assert [r["outcome"] for r in records] == ["task-created", "cancelled"], records
    # the server goes on: a fresh worker takes the next job
    r = await modern.call_tool("raster_info", {"path": "raster/slope.tif"}, raise_on_error=False)
    assert not r.is_error and r.structured_content["width"] == 84


async def test_legacy_client_gets_the_result_inline(tasks_server: tuple) -> None:
    mcp, app, ws, audit = tasks_server
    async with Client(mcp, mode="legacy") as c:
        assert c.protocol_version == "2025-11-25"
        with pytest.raises(ToolError, match="did not run as a task"):
            await call_tool_task(c, "raster_convert", {"input": "raster/slope.tif", "output": "out/legacy_try.tif"})
        seen: list[str | None] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(message)

        r = await c.call_tool(
            "raster_convert", {"input": "raster/slope.tif", "output": "out/legacy.tif"}, progress_handler=on_progress
        )
    assert not r.is_error and r.structured_content["output"] == "out/legacy.tif"
    assert any(m for m in seen), "an inline call relays progress as notifications"
    with rasterio.open(ws / "out" / "legacy.tif") as a, rasterio.open(ws / "raster" / "slope.tif") as b:
        assert np.array_equal(a.read(), b.read())
    inline = [r for r in audit_lines(audit) if r["tool"] == "raster_convert" and r["outputs"] == ["out/legacy.tif"]]
    assert len(inline) == 1 and "task" not in inline[0]


async def test_task_failure_is_the_usual_envelope(modern: Client) -> None:
    task = await call_tool_task(
        modern, "raster_convert", {"input": "bad/corrupt.tif", "output": "out/corrupt.tif"}, raise_on_error=False
    )
    r = await task.result()
    assert r.is_error and r.structured_content["error"]["code"] == "gdal-error"
    # bad arguments are refused before a task is created, with the usual envelope
    r = await modern.call_tool(
        "raster_convert", {"input": "raster/slope.tif", "output": "x.tif", "format": 3}, raise_on_error=False
    )
    assert r.is_error and r.structured_content["error"]["code"] == "invalid-argument"


async def test_a_task_starts_at_once_whatever_the_check_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server lets Docket's worker wait up to TASKS_CHECK_INTERVAL (1 s, not FastMCP's 50 ms: an idle server
    then wakes 20x less often) because its read of the in-memory backend returns as soon as a task is queued. Checked
    with an interval of a minute: were the interval the pickup delay, each task here would take that long."""
    monkeypatch.delenv("FASTMCP_DOCKET_MINIMUM_CHECK_INTERVAL", raising=False)
    assert tasks_check_interval() == TASKS_CHECK_INTERVAL  # the server's own default
    monkeypatch.setenv("FASTMCP_DOCKET_MINIMUM_CHECK_INTERVAL", "PT60S")  # FastMCP's setting still wins
    assert tasks_check_interval() is None
    ws = make_workspace(tmp_path / "ws")
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=120))
    try:
        async with Client(mcp, mode="auto") as c:
            assert mcp._worker.minimum_check_interval.total_seconds() == 60  # type: ignore[attr-defined]
            for size in (32, 48, 64):
                t0 = time.perf_counter()
                task = await call_tool_task(c, "raster_preview", {"input": "raster/slope.tif", "max_size": size})
                r = await asyncio.wait_for(task.result(), 60)
                took = time.perf_counter() - t0
                assert not r.is_error and max(r.structured_content["width"], r.structured_content["height"]) == size
                assert took < 20, f"a quick task took {took:.1f} s: picked up by the interval, not when queued"
    finally:
        app.executor.close()
