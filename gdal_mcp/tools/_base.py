"""What every tool shares: annotations, and the wrapper that turns failures into the envelope."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.types import ToolAnnotations
from pydantic import BaseModel

from gdal_mcp.app import App
from gdal_mcp.errors import GdalMcpError, envelope
from gdal_mcp.jobs import Job
from gdal_mcp.sandbox import OutputTarget

S = TypeVar("S")
M = TypeVar("M", bound=BaseModel)
W = TypeVar("W", bound=BaseModel)

log = logging.getLogger("gdal_mcp.tools")

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
MODIFY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


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


async def write_output(app: App, ctx: Any, job: Job[tuple[S, list[str]]], *, inputs: list[Any], output: str,
                       overwrite: bool, final_dir_arg: str | None = None) -> tuple[OutputTarget, S, list[str]]:
    """Run a job that writes a file: atomic output, scrubbed result, clients told of the new file.

    `final_dir_arg` names a job field that receives the output's final directory (a VRT's sources
    are written relative to where it will live, not to the temporary directory).
    Returns (output target, engine result, warnings) for the tool to shape into its result model.
    """
    import mcp.types as mt

    target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=inputs)
    job = job.writing_to(str(target.tmp_path))
    if final_dir_arg:
        job = dataclasses.replace(job, **{final_dir_arg: str(target.final.parent)})
    result, warnings = await app.execute(job, ctx=ctx, output=target)
    if ctx is not None:
        try:
            await ctx.send_notification(mt.ResourceListChangedNotification())
        except Exception:  # noqa: BLE001 - a client without notifications still gets its result
            log.debug("resource list notification failed", exc_info=True)
    scrubbed = app.scrub_model(result) if isinstance(result, BaseModel) else app.sandbox.scrub_obj(result)
    return target, scrubbed, [app.sandbox.scrub(w) for w in warnings]  # type: ignore[return-value]


async def write_result(app: App, ctx: Any, job: Job[tuple[S, list[str]]], *, model: type[W], inputs: list[Any],
                       output: str, overwrite: bool, final_dir_arg: str | None = None) -> W:
    """write_output shaped as the usual {output, uri, summary, warnings} result model."""
    target, summary, warnings = await write_output(app, ctx, job, inputs=inputs, output=output,
                                                   overwrite=overwrite, final_dir_arg=final_dir_arg)
    return model(output=target.display, uri=app.sandbox.uri(target.display), summary=summary, warnings=warnings)


async def read_result(app: App, ctx: Any, job: Job[M], *, display: str | None = None, quick: bool = False) -> M:
    """Run a job that only reads; its result with paths made workspace-relative (and `path` set to `display`)."""
    result = app.scrub_model(await app.execute(job, ctx=ctx, quick=quick))
    if display is not None and hasattr(result, "path"):
        result.path = display
    return result


def optional_input(app: App, value: str | None, what: str, inputs: list[Any]) -> str | None:
    """Resolve an optional secondary dataset (mask, like …): appended to `inputs`, its GDAL path returned."""
    if value is None:
        return None
    resolved = app.sandbox.resolve_input(value, what=what)
    inputs.append(resolved)
    return resolved.gdal_path
