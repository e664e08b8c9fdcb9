"""Smoke test of a built gdal-mcp through a real MCP client (the official `mcp` SDK): a few tool calls on a copy of
tests/data, checked against facts from tests/data/MANIFEST.md, plus two refusals of the sandbox.

    uv run --frozen python scripts/smoke.py --wheel dist/gdal_mcp-0.2.0-py3-none-any.whl   # uvx --from <wheel>
    uv run --frozen python scripts/smoke.py --command "gdal-mcp"                          # an installed server
    uv run --frozen python scripts/smoke.py --http http://127.0.0.1:8000/mcp --token T     # a running one (HTTP)

Over stdio it makes the workspace itself (a temporary copy of tests/data); over HTTP the server's workspace must
hold that copy (e.g. a container started with `-v <copy>:/data`: scripts/ci-local and the workflows do so).
Exit status 0 when every check passed. Used by .github/workflows (ci.yml, release.yml) and scripts/ci-local.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def workspace_copy(into: Path) -> Path:
    """A writable copy of tests/data (what the calls read, and where they write)."""
    ws = into / "data"
    shutil.copytree(DATA, ws)
    for path in [ws, *ws.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)  # a container's own user writes its outputs here
    return ws


async def checks(session: ClientSession) -> list[str]:
    """Run the calls; return what failed (empty: all passed)."""
    failures: list[str] = []

    async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await session.call_tool(tool, args)
        return {"error": result.is_error, **(result.structured_content or {})}

    def expect(what: str, ok: bool, got: Any) -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {what}", file=sys.stderr)
        if not ok:
            failures.append(f"{what}: {str(got)[:300]}")

    await session.initialize()
    names = {t.name for t in (await session.list_tools()).tools}
    expect("tools listed", {"raster_info", "vector_info", "raster_convert", "crs_info"} <= names, sorted(names))
    r = await call("raster_info", {"path": "raster/RGB.byte.tif", "stats": True})
    expect(
        "raster_info RGB.byte.tif: 791 x 718 x 3, band 1 mean 44.4345",
        not r["error"]
        and (r.get("width"), r.get("height"), r.get("count")) == (791, 718, 3)
        and round(r["bands"][0]["statistics"]["mean"], 4) == 44.4345,
        r,
    )
    r = await call("vector_info", {"path": "vector/naturalearth_lowres.shp"})
    expect("vector_info naturalearth_lowres: 177 features", not r["error"] and r["layers"][0]["feature_count"] == 177, r)
    r = await call(
        "raster_convert", {"input": "raster/RGB.byte.tif", "output": "smoke/rgb_cog.tif", "format": "COG", "overwrite": True}
    )
    expect("raster_convert to COG", not r["error"] and r.get("summary", {}).get("width") == 791, r)
    r = await call("crs_info", {"crs": "EPSG:32618"})
    expect("crs_info EPSG:32618: UTM zone 18N", not r["error"] and r.get("utm_zone") == "18N", r)
    outside = await session.call_tool("raster_info", {"path": "/etc/passwd"})
    code = (outside.structured_content or {}).get("error", {}).get("code")
    expect("a path outside the workspace: out-of-root", outside.is_error and code == "out-of-root", code)
    crs = await session.call_tool("crs_info", {"crs": "/etc/passwd"})
    code = (crs.structured_content or {}).get("error", {}).get("code")
    expect("a CRS that is a file: invalid-argument", crs.is_error and code == "invalid-argument", code)
    return failures


async def over_stdio(command: list[str], ws: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(command=command[0], args=[*command[1:], "--workspace", str(ws), "--confirm", "never"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return await checks(session)


async def over_http(url: str, token: str | None) -> list[str]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
            return await checks(session)


def uvx() -> list[str]:
    """uvx (`uv tool run`): on PATH, the uv that runs this script (`uv run` sets UV), or through the uv the scripts
    use (scripts/_uv.sh: `python3 -m uv`)."""
    if shutil.which("uvx"):
        return ["uvx"]
    if os.environ.get("UV") and os.path.exists(os.environ["UV"]):
        return [os.environ["UV"], "tool", "run"]
    if shutil.which("uv"):
        return ["uv", "tool", "run"]
    return [shutil.which("python3") or "python3", "-m", "uv", "tool", "run"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/smoke.py", description=__doc__.split("\n\n")[0])
    how = p.add_mutually_exclusive_group()
    how.add_argument("--wheel", type=Path, help="a built wheel, run with uvx --from (the server's own environment)")
    how.add_argument("--command", help="the server command, e.g. 'gdal-mcp' or 'python -m gdal_mcp'")
    how.add_argument("--http", metavar="URL", help="a running server's MCP endpoint (http://host:port/mcp)")
    p.add_argument("--token", default=os.environ.get("GDAL_MCP_TOKEN"), help="bearer token for --http")
    p.add_argument(
        "--workspace-copy",
        type=Path,
        metavar="DIR",
        help="only make the writable copy of tests/data in DIR (for a server started elsewhere) and exit",
    )
    args = p.parse_args(argv)
    if args.workspace_copy is not None:
        args.workspace_copy.mkdir(parents=True, exist_ok=True)
        print(workspace_copy(args.workspace_copy))
        return 0
    if not (args.wheel or args.command or args.http):
        p.error("give --wheel, --command or --http (or --workspace-copy)")
    if args.http:
        failures = asyncio.run(over_http(args.http, args.token))
    else:
        command = (
            [*uvx(), "--isolated", "--from", str(args.wheel.resolve()), "gdal-mcp"] if args.wheel else shlex.split(args.command)
        )
        with tempfile.TemporaryDirectory(prefix="gdal-mcp-smoke-") as tmp:
            failures = asyncio.run(over_stdio(command, workspace_copy(Path(tmp))))
    for failure in failures:
        print(f"smoke: FAILED {failure}", file=sys.stderr)
    print(f"smoke: {'passed' if not failures else f'{len(failures)} check(s) failed'}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
