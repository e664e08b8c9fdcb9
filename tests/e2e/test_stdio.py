"""gdal-mcp as a subprocess over stdio, driven by the official MCP SDK (not FastMCP's client)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.helpers import make_workspace

GDAL_MCP = [sys.executable, "-m", "gdal_mcp"]


@pytest.fixture(scope="module")
def stdio_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("stdio"))


def server_params(ws: Path, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    return StdioServerParameters(command=GDAL_MCP[0], args=[*GDAL_MCP[1:], "--workspace", str(ws), *extra], env=env)


async def test_official_sdk_lists_tools_and_gets_facts(stdio_ws: Path) -> None:
    async with stdio_client(server_params(stdio_ws)) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "gdal-mcp"
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"raster_info", "vector_info", "list_datasets"} <= names

            r = await session.call_tool("raster_info", {"path": "raster/RGB.byte.tif", "stats": True})
            assert not r.is_error
            bands = r.structured_content["bands"]
            assert [round(b["statistics"]["mean"], 4) for b in bands] == [44.4345, 66.0220, 71.3932]

            r = await session.call_tool("vector_info", {"path": "vector/naturalearth_lowres.shp"})
            assert r.structured_content["layers"][0]["feature_count"] == 177

            r = await session.call_tool("list_datasets", {"path": "vector", "pattern": "*.shp"})
            assert {e["path"] for e in r.structured_content["entries"]} == {
                "vector/box.shp",
                "vector/lines.shp",
                "vector/naturalearth_lowres.shp",
                "vector/points.shp",
                "vector/polygons.shp",
            }

            r = await session.call_tool("raster_convert", {"input": "raster/slope.tif", "output": "out/s.tif"})
            assert not r.is_error
            read = await session.read_resource(r.structured_content["uri"])
            assert base64.b64decode(read.contents[0].blob) == (stdio_ws / "out" / "s.tif").read_bytes()

            r = await session.call_tool("raster_info", {"path": "../../../etc/passwd"})
            assert r.is_error
            assert r.structured_content == {
                "success": False,
                "error": {"code": "out-of-root", "message": r.structured_content["error"]["message"]},
            }
            assert str(stdio_ws) not in r.structured_content["error"]["message"]


def test_stdout_carries_only_protocol(stdio_ws: Path) -> None:
    """Raw JSON-RPC over the pipe: every stdout line must be a JSON-RPC message, even on errors."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "raster_info", "arguments": {"path": "bad/corrupt.tif", "stats": True}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "raster_info", "arguments": {"path": "raster/goes.tif"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "vector_info", "arguments": {"path": "vector/sample.osm.pbf"}},
        },
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    proc = subprocess.Popen(
        [*GDAL_MCP, "--workspace", str(stdio_ws), "--log-level", "DEBUG"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin and proc.stdout
    replies = {}
    for m in messages:
        proc.stdin.write((json.dumps(m) + "\n").encode())
        proc.stdin.flush()
        if "id" in m:
            while True:
                line = proc.stdout.readline()
                assert line, "server closed stdout"
                msg = json.loads(line)  # anything that is not JSON fails here
                assert msg["jsonrpc"] == "2.0"
                if msg.get("id") == m["id"]:
                    replies[m["id"]] = msg
                    break
    proc.stdin.close()
    rest = proc.stdout.read()
    proc.wait(timeout=15)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    for line in rest.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert replies[2]["result"]["isError"] is True
    assert replies[2]["result"]["structuredContent"]["error"]["code"] == "gdal-error"
    assert replies[3]["result"]["structuredContent"]["width"] == 542
    assert replies[4]["result"]["structuredContent"]["layer_count"] == 5
    assert "workspaces:" in stderr  # logs went to stderr, not stdout
