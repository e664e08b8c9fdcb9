"""The one place a failure becomes the tool result a client sees: isError with {"success": false, "error": {code,
message}}. Every tool failure and every protocol-level failure (bad arguments, unknown tool) goes through it."""

from __future__ import annotations

import json

import mcp.types as mt
from fastmcp.tools import ToolResult

from gdal_mcp.errors import GdalMcpError


def envelope(error: GdalMcpError) -> ToolResult:
    """The MCP tool result for a failure: isError with the structured error payload."""
    payload = error.payload()
    return ToolResult(
        content=[mt.TextContent(type="text", text=json.dumps(payload))],
        structured_content=payload,
        is_error=True,
    )
