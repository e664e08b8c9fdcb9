"""The server's middleware beside the envelope (which the tool and e2e tests cover): the listed schemas' $refs inlined
once per tool (SchemasDereferencedOnce), not on every tools/list."""

from __future__ import annotations

import json
from typing import Any

import fastmcp.server.middleware.dereference as fastmcp_dereference
import pytest
from fastmcp import Client, FastMCP
from pydantic import BaseModel

from gdal_mcp.server.middleware import SchemasDereferencedOnce


class Corner(BaseModel):
    x: float
    y: float


class Box(BaseModel):
    lower_left: Corner
    upper_right: Corner


def _refs(schema: Any) -> int:
    return json.dumps(schema).count('"$ref"')


async def test_schemas_are_inlined_like_fastmcps_own_and_only_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Performance regression (an SDK session lists the tools once; 50 sessions re-dereferenced 54 tools each): the
    result equals FastMCP's DereferenceRefsMiddleware's, and a second tools/list inlines nothing again."""

    once = SchemasDereferencedOnce()

    def build(dereference: str) -> FastMCP:
        mcp = FastMCP(
            "t",
            middleware=[once] if dereference == "once" else [],
            dereference_schemas=dereference == "fastmcp",
        )

        @mcp.tool
        def grow(box: Box, by: Corner) -> Box:
            """Grow a box."""
            return box

        return mcp

    # the un-dereferenced schemas do have $refs: otherwise this test would prove nothing
    async with Client(build("none")) as c:
        (raw,) = await c.list_tools()
        assert _refs(raw.input_schema) > 0 and _refs(raw.output_schema) > 0
    async with Client(build("fastmcp")) as c:
        (reference,) = await c.list_tools()

    calls = []
    original = fastmcp_dereference.dereference_refs
    monkeypatch.setattr(fastmcp_dereference, "dereference_refs", lambda s: calls.append(1) or original(s))
    async with Client(build("once")) as c:
        (first,) = await c.list_tools()
        inlined = len(calls)
        (second,) = await c.list_tools()
    assert inlined == 2  # the input and the output schema
    assert len(once._tools) == 1  # one entry per tool, however many lists
    assert len(calls) == inlined, "the second tools/list dereferenced the schemas again"
    for listed in (first, second):
        assert listed.input_schema == reference.input_schema and _refs(listed.input_schema) == 0
        assert listed.output_schema == reference.output_schema and _refs(listed.output_schema) == 0
