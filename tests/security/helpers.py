"""The attacker's tools (the fixtures that make a canary and the outside secrets are in conftest.py): a real MCP
client (the official SDK over stdio) to call tools as an agent following injected instructions would, and `attack`,
which asserts what every attack must (SECURITY.md): the call is refused with a stable code (never internal-error),
no byte of an outside secret appears in anything the client gets back, no connection reaches the canary; and the
server answers the next call.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.helpers import DATA

#: codes a refused attack may get (the issue's list); internal-error never
REFUSED = {"out-of-root", "unsupported", "invalid-argument", "already-exists", "not-found"}


@dataclass
class Canary:
    """A TCP listener on loopback that records every connection made to it."""

    port: int
    hits: list[tuple[str, int]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Secrets:
    """Files outside the workspace, each holding SECRET (as text, as a CSV value, as a CRS name, as pixels)."""

    dir: Path
    token: str

    def path(self, name: str) -> str:
        return str(self.dir / name)


def server_params(ws: Path, *extra: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gdal_mcp", "--workspace", str(ws), "--confirm", "never", *extra],
        env={**base, **(env or {})},
    )


@asynccontextmanager
async def session(ws: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """A real MCP client session with a gdal-mcp server on `ws` (stdio)."""
    async with stdio_client(server_params(ws, *extra)) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


@asynccontextmanager
async def shared_session(ws: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """`session`, held open by a task of its own: a module-scoped fixture's setup and teardown run in different
    tasks, and the stdio client's cancel scopes must be left by the task that entered them. One server for a
    module's attacks on one workspace (a server start is ~4 s of CPU); each test still asserts the server answers."""
    ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with session(ws, *extra) as s:
                ready.set_result(s)
                await stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            raise

    task = asyncio.create_task(hold())
    try:
        yield await ready
    finally:
        stop.set()
        await task


def everything_returned(result: Any) -> str:
    """All the client got back: structured content and every content block, as one text."""
    parts = [json.dumps(result.structured_content or {})]
    for block in result.content:
        parts.append(str(getattr(block, "text", "") or ""))
        parts.append(str(getattr(block, "data", "") or ""))
        parts.append(str(getattr(block, "uri", "") or ""))
    return "\n".join(parts)


async def attack(
    s: ClientSession, tool: str, args: dict[str, Any], *, secrets: Secrets, canary: Canary, codes: set[str] | None = None
) -> str:
    """Call `tool` as an attacker; assert it was refused with one of `codes` (default: any stable refusal), that no
    secret byte and no connection got out, and that the server answers the next call. Returns the error code."""
    before = len(canary.hits)
    r = await s.call_tool(tool, args)
    returned = everything_returned(r)
    assert secrets.token not in returned, f"{tool} {args}: the outside secret got out"
    assert len(canary.hits) == before, f"{tool} {args}: a connection reached the canary"
    assert r.is_error, f"{tool} {args}: not refused: {returned[:300]}"
    code = (r.structured_content or {}).get("error", {}).get("code")
    assert code in (codes or REFUSED), f"{tool} {args}: {code}: {returned[:300]}"
    ok = await s.call_tool("raster_info", {"path": "good.tif"})
    assert not ok.is_error, f"after {tool}: the server did not answer the next call"
    return str(code)


def workspace(root: Path) -> Path:
    """A workspace with a good raster and CSV in it."""
    ws = root / "ws"
    ws.mkdir()
    shutil.copy(DATA / "raster" / "RGB.byte.tif", ws / "good.tif")
    (ws / "good.csv").write_text("id,WKT\n1,POINT (1 2)\n")
    for ext in ("shp", "shx", "dbf", "prj"):
        shutil.copy(DATA / "vector" / f"points.{ext}", ws / f"good.{ext}")
    return ws
