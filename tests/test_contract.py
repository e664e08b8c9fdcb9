"""Contract: tools/list (names, titles, annotations, schemas) matches the committed snapshot.

A change to a tool's interface must be deliberate: regenerate with
GDAL_MCP_UPDATE_SNAPSHOT=1 uv run pytest tests/test_contract.py, and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fastmcp import Client

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools.json"


async def current(client: Client) -> dict:
    tools = {}
    for t in sorted(await client.list_tools(), key=lambda t: t.name):
        a = t.annotations
        tools[t.name] = {
            "title": t.title,
            "description": t.description,
            "annotations": {
                "readOnlyHint": a.read_only_hint,
                "destructiveHint": a.destructive_hint,
                "idempotentHint": a.idempotent_hint,
                "openWorldHint": a.open_world_hint,
            },
            "inputSchema": t.input_schema,
            "outputSchema": t.output_schema,
        }
    return tools


async def test_tools_list_matches_snapshot(client: Client) -> None:
    tools = await current(client)
    if os.environ.get("GDAL_MCP_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(json.dumps(tools, indent=2, sort_keys=True) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert sorted(tools) == sorted(expected), "tools were added or removed"
    for name in expected:
        assert tools[name] == expected[name], f"the interface of {name} changed; update the snapshot deliberately"
