"""Provenance: a dataset's lineage (the recorded steps that made it, linked by digests) and replay (the chain run
again with other inputs). The records themselves are written by the workers beside every output
(engine/provenance.py)."""

from __future__ import annotations

import base64
import os
import re
from typing import Annotated, Any, cast

import mcp.types as mt
from fastmcp import Context
from fastmcp.tools import InputRequiredToolResult, ToolResult
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import ERROR_CODES, ErrorCode, GdalMcpError
from gdal_mcp.models import LineageResult, ReplayCall, ReplayResult
from gdal_mcp.server.app import App
from gdal_mcp.server.provenance import REPLAY_OF
from gdal_mcp.server.tools.params import Overwrite, WorkspaceFile
from gdal_mcp.server.tools.registry import READ, WRITE, tool

MaxSteps = Annotated[int, Field(ge=1, le=200, description="Most datasets to follow back (default 50)")]


async def _lineage(app: App, path: str, max_steps: int, ctx: Context | None) -> tuple[str, LineageResult]:
    bucket = app.sandbox.bucket_location(path, what="input")
    src = app.sandbox.resolve_input(path)
    if bucket is not None:  # a bucket workspace: its objects and the records uploaded beside them
        root = app.sandbox.bucket_location(".", what="input")
        roots = [root.gdal_path] if root is not None else []
    elif src.network or not os.path.exists(src.gdal_path):
        raise GdalMcpError("invalid-argument", f"'{src.display}': lineage follows files of the workspace (no remote data)")
    else:
        roots = [str(r) for r in app.sandbox.roots]
    job = jobs.LineageJob(path=src.gdal_path, roots=roots, max_steps=max_steps, key=app.provenance_key)
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
    approved = [f"{s.operation}({s.path}) by {s.approval.get('who')}" for s in made if s.approval]
    text = (
        f"{result.dataset}: {len(made)} recorded step(s) back to {len(result.origins)} original input(s) "
        f"({', '.join(result.origins) or 'none'}): "
        + " → ".join(f"{s.operation}({s.path})" for s in made)
        + f". Approved: {'; '.join(approved) if approved else 'no step needed a person’s approval'}."
        + (f" Warnings: {' '.join(result.warnings)}" if result.warnings else "")
    )
    return ToolResult(
        content=[
            mt.TextContent(type="text", text=app.sandbox.scrub(text)),
            mt.ImageContent(type="image", data=base64.b64encode(result.graph_png).decode("ascii"), mime_type="image/png"),
        ],
        structured_content=info,
    )


#: tools a replay never runs, whatever a record names: they change or remove datasets, or replay themselves
NOT_REPLAYED = frozenset({"workspace_copy", "workspace_move", "workspace_delete", "replay", "dataset_lineage"})


async def _replayable(ctx: Context | None, name: str) -> bool:
    """Whether replay may run the tool a record names: one of this server's tools that writes an `output`."""
    if name in NOT_REPLAYED or ctx is None:
        return False
    try:
        tool = await ctx.fastmcp.get_tool(name)
    except Exception:  # noqa: BLE001 - unknown: not run
        return False
    return tool is not None and "output" in (tool.parameters or {}).get("properties", {})


def _same(a: str, b: str) -> bool:
    return a.removeprefix("./") == b.removeprefix("./")


def _renamed(path: str, suffix: str) -> str:
    folder, _, name = path.rpartition("/")
    stem, dot, ext = name.partition(".")
    return f"{folder + '/' if folder else ''}{stem}{suffix}{dot}{ext}"


def _substituted(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        band = re.fullmatch(r"(.+)(:\d+)", value)  # raster_calc's 'path:band': the path substituted, the band kept
        if band and any(_same(band[1], old) for old in mapping):
            return _substituted(band[1], mapping) + band[2]
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
    if REPLAY_OF.get() is not None:
        raise GdalMcpError("invalid-argument", "replay cannot run inside a replay (a record names replay as its tool)")
    display, chain = await _lineage(app, input, max_steps, ctx)
    warnings = list(chain.warnings)
    if chain.truncated:
        raise GdalMcpError("resource-limit", f"the chain of {display} is longer than max_steps={max_steps}: raise it")
    origins = set(chain.origins)  # hashed or not (a remote input read by windows is an original input too)
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
    renamed: dict[str, str] = {}  # an earlier step's output digest -> its new output
    for step in made:
        for sha, read in zip(step.inputs, step.input_paths, strict=False):
            if sha in renamed and read:  # the file this step read was made by an earlier step (or is a copy of it)
                mapping[read] = renamed[sha]
        if step.parameters is None or step.path is None:
            raise GdalMcpError("invalid-argument", f"the record of {step.path} has no arguments: it cannot be replayed")
        if not await _replayable(ctx, step.operation or ""):  # a record is a file: it never chooses what runs
            raise GdalMcpError(
                "invalid-argument",
                f"the record of {step.path} names {step.operation!r}, which replay does not run (only tools that write an "
                "output, not workspace_* or replay); nothing was run",
            )
        new_output = next((v for k, v in (outputs or {}).items() if _same(k, step.path)), None) or _renamed(step.path, suffix)
        mapping[step.path] = new_output
        renamed[step.sha256] = new_output
        arguments = {k: v for k, v in _substituted(step.parameters, mapping).items() if k != "overwrite"}
        if overwrite:  # the replay's own: a recorded overwrite=true was the person's yes for that file, not these
            arguments["overwrite"] = True
        plan.append(ReplayCall(tool=step.operation or "", arguments=arguments, output=new_output, replaces=step.path))
    result = ReplayResult(dataset=display, plan=plan, executed=False, warnings=warnings)
    if plan_only:
        return result
    if ctx is None:
        raise GdalMcpError("internal-error", "replay runs its calls through the server: no request context")
    result.executed = True
    for i, (call, step) in enumerate(zip(plan, made, strict=True)):
        token = REPLAY_OF.set({"record": step.record, "sha256": step.sha256})  # the new record says what it replays
        try:
            answer = await ctx.fastmcp.call_tool(call.tool, call.arguments)
        finally:
            REPLAY_OF.reset(token)
        if isinstance(answer, InputRequiredToolResult):  # a question for the person: replay cannot ask it for the step
            done = f" (written before it: {', '.join(result.outputs)})" if result.outputs else " (nothing was written)"
            raise GdalMcpError(
                "confirmation-required",
                f"replay stopped at step {i + 1} of {len(plan)}: {call.tool} writing {call.output} needs the person's "
                f"approval{done}. Call {call.tool} yourself with the plan's arguments (plan_only=true shows them), "
                "then replay again",
            )
        content = answer.structured_content or {}
        if content.get("success") is False or getattr(answer, "is_error", False):
            error = content.get("error") or {"code": "internal-error", "message": "failed"}
            done = f"; written before it: {', '.join(result.outputs)}" if result.outputs else "; nothing was written"
            code = str(error.get("code") or "internal-error")
            raise GdalMcpError(
                cast(ErrorCode, code if code in ERROR_CODES else "internal-error"),
                f"replay stopped at step {i + 1} of {len(plan)} ({call.tool} writing {call.output}): "
                f"{error.get('message')}{done}. Later steps did not run",
            )
        result.outputs.append(str(content.get("output") or call.output))
        await ctx.report_progress(progress=i + 1, total=len(plan), message=f"replayed {call.tool}")
    return result
