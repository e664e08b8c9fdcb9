"""Provenance: a dataset's lineage (the recorded steps that made it, linked by digests) and replay (the chain run
again with other inputs). The records themselves are written by the workers beside every output
(engine/provenance.py)."""

from __future__ import annotations

import base64
import os
from typing import Annotated, Any

import mcp.types as mt
from fastmcp import Context
from fastmcp.tools import ToolResult
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import LineageResult, ReplayCall, ReplayResult
from gdal_mcp.server.app import App
from gdal_mcp.server.tools.params import Overwrite, WorkspaceFile
from gdal_mcp.server.tools.registry import READ, WRITE, tool

MaxSteps = Annotated[int, Field(ge=1, le=200, description="Most datasets to follow back (default 50)")]


async def _lineage(app: App, path: str, max_steps: int, ctx: Context | None) -> tuple[str, LineageResult]:
    if app.sandbox.bucket is not None:
        raise GdalMcpError("unsupported", "lineage follows the provenance records of a local workspace; this one is a bucket")
    src = app.sandbox.resolve_input(path)
    if src.network or not os.path.isfile(src.gdal_path):
        raise GdalMcpError("invalid-argument", f"'{src.display}': lineage follows files of the workspace (no remote data)")
    job = jobs.LineageJob(path=src.gdal_path, roots=[str(r) for r in app.sandbox.roots], max_steps=max_steps)
    result = await app.execute(job, ctx=ctx, quick=True)
    result.dataset = src.display
    for step in result.steps:
        if step.record:
            step.record = app.sandbox.display(step.record)
    return src.display, result


@tool(title="Dataset lineage", annotations=READ, tags={"provenance"})
async def dataset_lineage(app: App, input: WorkspaceFile, max_steps: MaxSteps = 50, ctx: Context | None = None) -> ToolResult:
    """How a workspace file was made: the chain of tool calls back to its original inputs, from the provenance records
    this server writes beside every output (<output>.provenance.json), linked by SHA-256 (an input of one step is the
    output of another when their bytes are equal, whatever the file is called now). Each step gives the tool, its
    arguments, when it ran, who approved it, and whether the file still has those bytes; the answer also has the
    chain drawn as a graph (PNG). Original inputs are the files no record made. Replay the chain on other inputs with
    replay."""
    _, result = await _lineage(app, input, max_steps, ctx)
    info = app.sandbox.scrub_obj(result.model_dump())
    assert isinstance(info, dict)
    made = [s for s in result.steps if s.operation]
    text = (
        f"{result.dataset}: {len(made)} recorded step(s) back to {len(result.origins)} original input(s) "
        f"({', '.join(result.origins) or 'none'}): " + " → ".join(f"{s.operation}({s.path})" for s in made)
    )
    return ToolResult(
        content=[
            mt.TextContent(type="text", text=app.sandbox.scrub(text)),
            mt.ImageContent(type="image", data=base64.b64encode(result.graph_png).decode("ascii"), mime_type="image/png"),
        ],
        structured_content=info,
    )


def _same(a: str, b: str) -> bool:
    return a.removeprefix("./") == b.removeprefix("./")


def _renamed(path: str, suffix: str) -> str:
    folder, _, name = path.rpartition("/")
    stem, dot, ext = name.partition(".")
    return f"{folder + '/' if folder else ''}{stem}{suffix}{dot}{ext}"


def _substituted(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return next((new for old, new in mapping.items() if _same(value, old)), value)
    if isinstance(value, list):
        return [_substituted(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _substituted(v, mapping) for k, v in value.items()}
    return value


@tool(title="Replay a recorded chain", annotations=WRITE, tags={"provenance"}, writes=True, task=False)
async def replay(
    app: App,
    input: WorkspaceFile,
    substitute: Annotated[
        dict[str, str],
        Field(
            min_length=1,
            max_length=100,
            description="Original input -> the file to use instead, e.g. {'scenes/2024-05.tif': 'scenes/2024-06.tif'} "
            "(keys as dataset_lineage lists the original inputs); inputs not named are read as recorded",
        ),
    ],
    suffix: Annotated[
        str,
        Field(
            pattern=r"^[A-Za-z0-9_.-]{1,40}$",
            description="Appended to each recorded output's name for the new outputs (utm.tif -> utm_2024-06.tif)",
        ),
    ] = "_replay",
    outputs: Annotated[
        dict[str, str] | None,
        Field(max_length=200, description="Recorded output -> new output, where the suffix rule is not wanted"),
    ] = None,
    plan_only: Annotated[
        bool, Field(description="true (default): return the calls without running them; false: run them in order")
    ] = True,
    overwrite: Overwrite = False,
    max_steps: MaxSteps = 50,
    ctx: Context | None = None,
) -> ReplayResult:
    """Run the chain of tool calls that made `input` again, on other inputs: next month's scene for last month's.
    The chain is read from the provenance records (as dataset_lineage shows it); each original input named in
    `substitute` is replaced by its new file, every intermediate output gets a new name (the suffix, or `outputs`),
    and each call reads the new outputs of the calls before it. plan_only=true (default) returns the calls; run
    them with plan_only=false: each goes through the same confirmation policy as a call of its own, writes its own
    provenance record, and the first failure stops the rest (failed_step, error)."""
    display, chain = await _lineage(app, input, max_steps, ctx)
    warnings = list(chain.warnings)
    if chain.truncated:
        raise GdalMcpError("resource-limit", f"the chain of {display} is longer than max_steps={max_steps}: raise it")
    origins = {s.path for s in chain.steps if s.operation is None and s.path}
    unknown = [k for k in substitute if not any(_same(k, o) for o in origins)]
    if unknown:
        raise GdalMcpError(
            "invalid-argument",
            f"substitute: {', '.join(unknown)} is not an original input of {display}; its original inputs are: "
            f"{', '.join(sorted(origins)) or 'none (no recorded step)'}",
        )
    made = [s for s in chain.steps if s.operation]
    if not made:
        raise GdalMcpError("invalid-argument", f"{display} has no provenance record: there is nothing to replay")
    mapping = dict(substitute)
    plan: list[ReplayCall] = []
    for step in made:
        if step.parameters is None or step.path is None:
            raise GdalMcpError("invalid-argument", f"the record of {step.path} has no arguments: it cannot be replayed")
        new_output = next((v for k, v in (outputs or {}).items() if _same(k, step.path)), None) or _renamed(step.path, suffix)
        mapping[step.path] = new_output
        arguments = _substituted(step.parameters, mapping)
        if overwrite:
            arguments["overwrite"] = True
        plan.append(ReplayCall(tool=step.operation or "", arguments=arguments, output=new_output, replaces=step.path))
    result = ReplayResult(dataset=display, plan=plan, executed=False, warnings=warnings)
    if plan_only:
        return result
    if ctx is None:
        raise GdalMcpError("internal-error", "replay runs its calls through the server: no request context")
    result.executed = True
    for i, call in enumerate(plan):
        answer = await ctx.fastmcp.call_tool(call.tool, call.arguments)
        content = answer.structured_content or {}
        if content.get("success") is False or getattr(answer, "is_error", False):
            result.failed_step, result.error = i, content.get("error") or {"code": "internal-error", "message": "failed"}
            break
        result.outputs.append(str(content.get("output") or call.output))
        if ctx is not None:
            await ctx.report_progress(progress=i + 1, total=len(plan), message=f"replayed {call.tool}")
    return result
