"""What every tool shares: annotations, and the wrapper that turns failures into the envelope."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from mcp.types import ToolAnnotations

from gdal_mcp.app import App
from gdal_mcp.errors import GdalMcpError, envelope

log = logging.getLogger("gdal_mcp.tools")

READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
MODIFY = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)


def gdal_tool(mcp: Any, app: App, *, title: str, annotations: ToolAnnotations, tags: set[str],
              writes: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register an async tool whose GdalMcpError (or crash) becomes an isError envelope."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                if writes:
                    app.require_writable(fn.__name__)
                return await fn(*args, **kwargs)
            except GdalMcpError as e:
                return envelope(app.scrub_error(e))
            except Exception as e:  # noqa: BLE001 - never a traceback to the client
                log.exception("unexpected error in tool %s", fn.__name__)
                return envelope(GdalMcpError(
                    "internal-error", app.sandbox.scrub(f"unexpected {type(e).__name__} in {fn.__name__}: {e}")
                ))

        mcp.tool(title=title, annotations=annotations, tags=tags | {"write" if writes else "read"})(wrapper)
        return fn

    return decorate
