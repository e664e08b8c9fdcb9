"""The server's middleware.

EnvelopeAndAudit: every tools/call goes through it, before the tool runs or becomes an MCP task. It applies --confirm
(server/approval/policy.check), gives protocol-level failures (bad arguments, an unknown tool) the envelope, and
writes the call's audit record (a task's run is audited when it ends: tools/registry.py).

SchemasDereferencedOnce: FastMCP's own $ref inlining of the listed schemas, done once per tool instead of on every
tools/list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import mcp.types as mt
from fastmcp.exceptions import NotFoundError, ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.server.middleware.dereference import DereferenceRefsMiddleware
from fastmcp.tools import InputRequiredToolResult, Tool, ToolResult

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.server.app import App
from gdal_mcp.server.approval import policy as confirm
from gdal_mcp.server.audit import APPROVAL
from gdal_mcp.server.envelope import envelope
from gdal_mcp.server.provenance import CALL_ARGUMENTS


def _validation_message(exc: BaseException, parameters: list[str] | None = None) -> str:
    cause = exc.__cause__ or exc.__context__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        parts = []
        missing: list[str] = []
        unexpected: list[str] = []
        for err in errors():
            loc = ".".join(str(x) for x in err.get("loc", ()) if x not in ("call",)) or "arguments"
            parts.append(f"{loc}: {err.get('msg')}")
            if err.get("type") == "missing_argument":
                missing.append(loc)
            elif err.get("type") == "unexpected_keyword_argument":
                unexpected.append(loc)
        if len(missing) == 1 and len(unexpected) == 1:
            # input= to raster_info (which takes path=), inputs= for input=: say the name this tool uses
            parts.append(f"this tool takes the value of {unexpected[0]} as {missing[0]}=")
        elif unexpected and parameters:
            import difflib

            for name in unexpected:  # crs= to raster_reproject, which takes dst_crs= (and src_crs=, bbox_crs=)
                near = [p for p in parameters if name in p.split("_")] + difflib.get_close_matches(
                    name, parameters, n=3, cutoff=0.6
                )
                near = list(dict.fromkeys(near))[:4]
                if near:
                    parts.append(f"this tool has no {name}=; its parameters like it: {', '.join(near)}")
        if parts:
            return "invalid arguments: " + "; ".join(parts) + " (see the tool's input schema)"
    return f"invalid arguments: {exc}"


async def _parameters(context: MiddlewareContext[mt.CallToolRequestParams], name: str) -> list[str]:
    """The names of a tool's parameters (for a hint on a misspelt one); empty when unknown."""
    try:
        server = context.fastmcp_context.fastmcp if context.fastmcp_context is not None else None
        tool = await server.get_tool(name) if server is not None else None
        return list((tool.parameters or {}).get("properties", {})) if tool is not None else []
    except Exception:  # noqa: BLE001 - only a hint
        return []


class EnvelopeAndAudit(Middleware):
    """Protocol-level tool failures (bad arguments, unknown tool) get the envelope; every call is audited;
    --confirm is applied (confirm.check) before the call runs or becomes a background task."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.tool_specs: dict[str, confirm.ToolSpec | None] = {}

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        params = context.message
        name = params.name
        arguments = dict(params.arguments or {})
        # confirmation_id (approval console) is an argument of every call, taken off before the tool validates
        confirmation_id = arguments.pop(confirm.CONFIRMATION_ARG, None) if name != confirm.STATUS_TOOL else None
        if name != confirm.STATUS_TOOL and confirm.CONFIRMATION_ARG in (params.arguments or {}):
            context = context.copy(message=params.model_copy(update={"arguments": dict(arguments)}))
        t0 = time.perf_counter()
        APPROVAL.set(None)  # this call's approval, once given (its outputs' provenance records carry it)
        CALL_ARGUMENTS.set(arguments)
        outcome = "internal-error"
        outputs: list[str] = []
        task: str | None = None
        try:
            try:
                if confirmation_id is not None and not isinstance(confirmation_id, str):
                    raise GdalMcpError(
                        "invalid-argument", "confirmation_id must be the string a confirmation-required error gave"
                    )
                recorded: list[tuple[str, str]] = []
                token = confirm.RECORDED.set(recorded)
                try:
                    asked = await confirm.check(
                        self.app, context.fastmcp_context, name, arguments, self.tool_specs, confirmation_id=confirmation_id
                    )
                finally:
                    confirm.RECORDED.reset(token)
                approval = APPROVAL.get()
                if approval is not None and asked is None:  # for the task this call may become (registry)
                    self.app.call_approvals.remember(name, arguments, approval)
                ran: object = None
                try:
                    result = ran = asked if asked is not None else await call_next(context)
                finally:  # a yes about objects holds for this call only (a task's run: until APPROVAL_TTL)
                    if ran is None or isinstance(ran, ToolResult):
                        self.app.forget_versions(recorded)
                        if approval is not None:
                            self.app.call_approvals.forget(approval)
            except ValidationError as e:
                result = envelope(GdalMcpError("invalid-argument", _validation_message(e, await _parameters(context, name))))
            except NotFoundError:
                result = envelope(GdalMcpError("not-found", f"unknown tool '{name}'; tools/list shows the tools"))
            except GdalMcpError as e:
                result = envelope(self.app.scrub_error(e))
            if not isinstance(result, ToolResult):  # a CreateTaskResult: the task's run is audited when it ends
                outcome, task = "task-created", getattr(result, "task_id", None)
                return result
            sc = result.structured_content or {}
            if isinstance(result, InputRequiredToolResult):
                outcome = "input-required"  # a confirmation question went to the client; the call comes again
            elif result.is_error:
                outcome = (sc.get("error") or {}).get("code", "internal-error")
            else:
                outcome = "ok"
                out = sc.get("output")
                if isinstance(out, str):
                    outputs.append(out)
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.app.audit.write(
                tool=name,
                arguments=arguments,
                outcome=outcome,
                duration_ms=1000 * (time.perf_counter() - t0),
                outputs=outputs,
                task=task,
            )


class SchemasDereferencedOnce(DereferenceRefsMiddleware):
    """FastMCP's DereferenceRefsMiddleware (inline every $ref of the listed schemas: some clients cannot follow
    them), remembering each tool's result. FastMCP's own redoes it on every tools/list: ~100 ms of CPU for the 54
    tools, and every official-SDK session lists the tools once (it checks results against their output schemas), so
    it was a third of the server's CPU under 50 SDK sessions. The tools are fixed once the server is built; one entry
    per tool name and version, redone when the listed object is another (a copy FastMCP made): bounded, never stale.
    `cached`: the tool as listed on an earlier start, if it is the same tool (tools/schema_cache.py), else None."""

    def __init__(self, cached: Callable[[Tool], Tool | None] = lambda tool: None) -> None:
        self._tools: dict[tuple[str, str | None], tuple[Tool, Tool]] = {}
        self._cached = cached

    async def on_list_tools(
        self,
        context: MiddlewareContext[mt.ListToolsRequest],
        call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        listed = []
        for tool in tools:
            key = (tool.name, tool.version)
            known = self._tools.get(key)
            if known is None or known[0] is not tool:
                done = self._cached(tool)
                if done is None:
                    (done,) = await super().on_list_tools(context, _just(tool))
                known = self._tools[key] = (tool, done)
            listed.append(known[1])
        return listed


def _just(tool: Tool) -> CallNext[mt.ListToolsRequest, Sequence[Tool]]:
    async def call_next(context: MiddlewareContext[mt.ListToolsRequest]) -> Sequence[Tool]:
        return [tool]

    return call_next
