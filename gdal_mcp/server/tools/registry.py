"""How tools, resources and prompts are declared and registered: module-level functions marked with @tool, @resource
or @prompt, taking `app: App` first, bound to the server's App when registered (register_tools & co.). The wrapper
turns a failure into the envelope, applies --read-only, adds resource links to write results and audits task runs."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import inspect
import json
import logging
import time
import typing
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import mcp.types as mt
from fastmcp.tools import ToolResult
from fastmcp.tools.function_tool import FunctionTool
from fastmcp.utilities.tasks import TaskConfig
from mcp.types import InputRequiredResult, ToolAnnotations
from pydantic import BaseModel

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import REMOTE_READS
from gdal_mcp.models import ReadsRemote, RemoteReads
from gdal_mcp.server.app import App
from gdal_mcp.server.audit import APPROVAL
from gdal_mcp.server.envelope import envelope
from gdal_mcp.server.jobboard import CURRENT_TOOL
from gdal_mcp.server.provenance import CALL_ARGUMENTS, jsonable
from gdal_mcp.server.results import with_links

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from gdal_mcp.server.tools.schema_cache import ToolSchemas

S = TypeVar("S")
ToolFn = TypeVar("ToolFn", bound=Callable[..., Any])
M = TypeVar("M", bound=BaseModel)
W = TypeVar("W", bound=BaseModel)

log = logging.getLogger("gdal_mcp.server.tools")

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
MODIFY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
#: how often a task's client is told to poll (progress messages change about that often)
TASK_POLL_INTERVAL = datetime.timedelta(seconds=1)


@dataclasses.dataclass(frozen=True)
class ToolMeta:
    """How a tool function is registered: the `@tool(...)` decorator's arguments."""

    title: str
    annotations: ToolAnnotations
    tags: frozenset[str]
    writes: bool
    task: bool


TOOL_META = "__gdal_mcp_tool__"


def tool(
    *, title: str, annotations: ToolAnnotations, tags: set[str], writes: bool = False, task: bool | None = None
) -> Callable[[ToolFn], ToolFn]:
    """Mark a module-level function as a tool; `register_tools` registers the module's tools on a server.

    The function's first parameter is `app: App` (given by the server, not part of the tool's schema), then the
    tool's parameters (types from server/tools/params.py), then `ctx: Context | None = None`. Its name is the tool's name,
    its docstring the description. `writes`: the tool writes files (refused with --read-only; the approval policy
    treats it as a writer). `task`: the tool may run as an MCP task (a 2026-07-28 client that asks for one gets a
    task id at once and polls it); by default every tool that is not read-only, the ones that can run long.
    """

    def mark(fn: ToolFn) -> ToolFn:
        meta = ToolMeta(
            title=title,
            annotations=annotations,
            tags=frozenset(tags | {"write" if writes else "read"}),
            writes=writes,
            task=(not annotations.read_only_hint) if task is None else task,
        )
        setattr(fn, TOOL_META, meta)
        return fn

    return mark


def tools_of(module: ModuleType) -> list[Callable[..., Any]]:
    """The functions `module` defines with @tool, in the order they are defined."""
    return [fn for fn in vars(module).values() if callable(fn) and hasattr(fn, TOOL_META) and fn.__module__ == module.__name__]


def register_tools(mcp: FastMCP, app: App, *modules: ModuleType, schemas: ToolSchemas | None = None) -> None:
    """Register every @tool function of `modules` on `mcp`, bound to `app`; their schemas from `schemas` where it
    has them (schema_cache.py), else derived by FastMCP (and put there)."""
    for module in modules:
        for fn in tools_of(module):
            register_tool(mcp, app, fn, schemas)


def register_tool(mcp: FastMCP, app: App, fn: Callable[..., Any], schemas: ToolSchemas | None = None) -> None:
    """Register one @tool function: bound to `app`, its GdalMcpError (or crash) turned into an isError envelope,
    --read-only applied, its write results carrying resource links, audited when it runs as a task."""
    meta: ToolMeta = getattr(fn, TOOL_META)
    name = fn.__name__
    bound = bound_to(app, fn)

    @functools.wraps(bound)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        CURRENT_TOOL.set(name)  # the approval console names this call's jobs by it (inline or task)
        REMOTE_READS.set(None)  # this call's remote reads (App.execute), none carried over from another
        try:
            if meta.writes and kwargs.get("plan_only") is not True:  # a plan (raster/vector_pipeline) writes nothing
                app.require_writable(name)
            return with_remote_reads(await bound(*args, **kwargs))
        except GdalMcpError as e:
            return envelope(app.scrub_error(e))
        except Exception as e:  # noqa: BLE001 - never a traceback to the client
            log.exception("unexpected error in tool %s", name)
            return envelope(GdalMcpError("internal-error", app.sandbox.scrub(f"unexpected {type(e).__name__} in {name}: {e}")))

    # The description is given as is and the docstring left off: FastMCP would otherwise import griffe to parse
    # every docstring at start-up (~0.3 s of the cold start); parameter docs live in the Annotated Fields.
    registered = audited_as_task(app, name, linked(app, wrapper)) if meta.task else linked(app, wrapper)
    description = inspect.cleandoc(fn.__doc__ or "")
    task = TaskConfig(mode="optional", poll_interval=TASK_POLL_INTERVAL) if meta.task else TaskConfig(mode="forbidden")
    known = schemas.get(name) if schemas is not None else None
    if known is None:
        made = FunctionTool.from_function(
            registered,
            name=name,
            title=meta.title,
            description=description,
            annotations=meta.annotations,
            tags=set(meta.tags),
            task=task,
        )
        if schemas is not None:
            schemas.put(made)
    else:
        made = tool_with_schemas(registered, name, meta, description, task, *known)
    mcp.add_tool(made)


def tool_with_schemas(
    fn: Callable[..., Any],
    name: str,
    meta: ToolMeta,
    description: str,
    task: TaskConfig,
    parameters: dict[str, Any],
    output_schema: dict[str, Any] | None,
) -> FunctionTool:
    """The FunctionTool that FunctionTool.from_function makes of `fn`, given the schemas it would derive.

    from_function's steps that do not derive a schema, as FastMCP 4.1.2 takes them: the Context parameter
    made a dependency, the task mode checked against the function, the return annotation kept for the result
    (ParsedFunction.from_function). tests/server/test_schema_cache.py compares every tool with from_function's.
    """
    from fastmcp.server.dependencies import transform_context_annotations

    task.validate_function(fn, name)
    fn = transform_context_annotations(fn)
    return_type = inspect.signature(fn).return_annotation
    if isinstance(return_type, str):
        return_type = typing.get_type_hints(fn, include_extras=True).get("return", return_type)
    return FunctionTool(
        fn=fn,
        return_type=return_type,
        name=name,
        title=meta.title,
        description=description,
        parameters=parameters,
        output_schema=output_schema,
        annotations=meta.annotations,
        tags=set(meta.tags),
        task_config=task,
    )


RESOURCE_META = "__gdal_mcp_resource__"
PROMPT_META = "__gdal_mcp_prompt__"


def resource(uri: str, **kwargs: Any) -> Callable[[ToolFn], ToolFn]:
    """Mark a module-level function as an MCP resource; `register_resources` registers the module's resources.

    Like a tool: the function's first parameter is `app: App`, then the URI's parameters (a `uri` with
    `{parameters}` makes a resource template). `kwargs` go to `mcp.resource` (name, mime_type, description …);
    without a description, the docstring is the description.
    """

    def mark(fn: ToolFn) -> ToolFn:
        setattr(fn, RESOURCE_META, (uri, kwargs))
        return fn

    return mark


def prompt(**kwargs: Any) -> Callable[[ToolFn], ToolFn]:
    """Mark a module-level function as an MCP prompt; `register_prompts` registers the module's prompts.

    Like a tool: the function's first parameter is `app: App`, then the prompt's arguments; its name is the
    prompt's name, its docstring the description. `kwargs` go to `mcp.prompt` (title, tags …).
    """

    def mark(fn: ToolFn) -> ToolFn:
        setattr(fn, PROMPT_META, kwargs)
        return fn

    return mark


def marked(module: ModuleType, meta: str) -> list[Callable[..., Any]]:
    """The functions `module` defines with the marker `meta` (RESOURCE_META, PROMPT_META), in definition order."""
    return [fn for fn in vars(module).values() if callable(fn) and hasattr(fn, meta) and fn.__module__ == module.__name__]


def register_resources(mcp: FastMCP, app: App, *modules: ModuleType) -> None:
    """Register every @resource function of `modules` on `mcp`, bound to `app`."""
    for module in modules:
        for fn in marked(module, RESOURCE_META):
            uri, kwargs = getattr(fn, RESOURCE_META)
            mcp.resource(uri, **{"description": description_of(fn), **kwargs})(bound_to(app, fn))


def register_prompts(mcp: FastMCP, app: App, *modules: ModuleType) -> None:
    """Register every @prompt function of `modules` on `mcp`, bound to `app`."""
    for module in modules:
        for fn in marked(module, PROMPT_META):
            mcp.prompt(**{"description": description_of(fn), **getattr(fn, PROMPT_META)})(bound_to(app, fn))


def description_of(fn: Callable[..., Any]) -> str | None:
    """The docstring as a description, given as is (FastMCP would otherwise import griffe to parse it)."""
    return inspect.cleandoc(fn.__doc__) if fn.__doc__ else None


def with_remote_reads(result: Any) -> Any:
    """The call's remote reads (REMOTE_READS, summed over its jobs by App.execute) in its result's `remote` where the
    tool shaped its result from an engine summary that does not carry them; a ToolResult's JSON text follows."""
    figures = REMOTE_READS.get()
    if not figures:
        return result
    if isinstance(result, ReadsRemote):
        if result.remote is None:
            result.remote = RemoteReads(**figures)
        return result
    sc = result.structured_content if isinstance(result, ToolResult) else None
    if not isinstance(sc, dict) or sc.get("remote") is not None or result.is_error:
        return result
    for block in result.content:
        if isinstance(block, mt.TextContent):
            try:
                same = json.loads(block.text) == sc
            except ValueError:
                same = False
            if same:
                block.text = json.dumps({**sc, "remote": figures}, separators=(",", ":"), ensure_ascii=False)
    sc["remote"] = figures
    return result


def bound_to(app: App, fn: Callable[..., Any]) -> Callable[..., Any]:
    """An async `fn(app, …)` as FastMCP registers it: `app` given, the signature without it, annotations
    evaluated and no docstring (see description_of).

    The annotations are evaluated once here: FastMCP reads them ~7 times per tool (signature, injected parameters,
    session ids, the output schema), and each time re-evaluated every Annotated[..., Field(...)] (about a third of
    building the server)."""
    name = fn.__name__
    hints = typing.get_type_hints(fn, include_extras=True)
    signature = inspect.signature(fn)
    first, *params = signature.parameters.values()
    if first.name != "app":
        raise TypeError(f"{name}: its first parameter must be `app: App` (the server's application)")

    async def bound(*args: Any, **kwargs: Any) -> Any:
        return await fn(app, *args, **kwargs)

    bound.__name__ = bound.__qualname__ = name
    bound.__module__ = fn.__module__
    bound.__doc__ = None
    bound.__annotations__ = {k: v for k, v in hints.items() if k != "app"}
    bound.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p.replace(annotation=hints.get(p.name, p.annotation)) for p in params],
        return_annotation=hints.get("return", signature.return_annotation),
    )
    return bound


def linked(app: App, wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """The tool with its write results carrying resource links (see with_links); other results as they are."""

    @functools.wraps(wrapper)
    async def run(*args: Any, **kwargs: Any) -> Any:
        result = await wrapper(*args, **kwargs)
        if (
            isinstance(result, BaseModel)
            and not isinstance(result, ToolResult | InputRequiredResult)
            and any(f == "uri" or f.endswith("_uri") for f in type(result).model_fields)
        ):
            return with_links(app, result)
        return result

    return run


def audit_outcome(result: Any) -> tuple[str, list[str]]:
    """(outcome, outputs) of a tool's result for the audit log: 'ok' or the error code, the output written."""
    if isinstance(result, InputRequiredResult):
        return "input-required", []
    if isinstance(result, ToolResult):
        sc = result.structured_content or {}
        if result.is_error:
            return (sc.get("error") or {}).get("code", "internal-error"), []
    else:
        sc = result.model_dump() if isinstance(result, BaseModel) else {}
    out = sc.get("output")
    return "ok", [out] if isinstance(out, str) else []


def audited_as_task(app: App, name: str, wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """The tool as registered when it may run as an MCP task.

    A task runs in the tasks extension's worker, outside the middleware, which only sees the task being
    created: the run itself (its outcome, or its cancellation) is audited here, with the task id.
    """
    from fastmcp_tasks.context import get_task_context

    defaults = {k: p.default for k, p in inspect.signature(wrapper).parameters.items()}

    def given(kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments as the client gave them (the task receives them with every default filled in)."""
        return {k: v for k, v in kwargs.items() if k != "ctx" and not (k in defaults and defaults[k] == v)}

    @functools.wraps(wrapper)
    async def run(*args: Any, **kwargs: Any) -> Any:
        task = get_task_context()
        if task is None:  # an inline call: the middleware audits it
            return await wrapper(*args, **kwargs)
        t0 = time.perf_counter()
        outcome, outputs = "internal-error", list[str]()
        # outside the middleware's context: this call's arguments and approval for its outputs' provenance records
        CALL_ARGUMENTS.set(jsonable(given(kwargs)))
        APPROVAL.set(app.call_approvals.take(name, kwargs))
        try:
            result = await wrapper(*args, **kwargs)
            outcome, outputs = audit_outcome(result)
            return result
        except asyncio.CancelledError:  # tasks/cancel: the executor stops the job, the partial output goes
            outcome = "cancelled"
            raise
        finally:
            app.audit.write(
                tool=name,
                arguments=given(kwargs),
                outcome=outcome,
                duration_ms=1000 * (time.perf_counter() - t0),
                outputs=outputs,
                task=task.task_id,
            )

    run.__signature__ = hashable_signature(name, wrapper)  # type: ignore[attr-defined]
    return run


class _ListDefault(list):  # type: ignore[type-arg]
    """A list parameter default that can be hashed (as the tuple of its items); otherwise a plain list."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return handler(list)  # the JSON schema's default: a plain array


def hashable_signature(name: str, fn: Callable[..., Any]) -> inspect.Signature:
    """`fn`'s signature (annotations evaluated) with list defaults made hashable.

    The tasks extension's worker (Docket) hashes a task function's signature to cache it; one unhashable
    default (`percentiles=[2, 98]`) raised inside its worker loop and stopped every task of the server.
    A default that still cannot be hashed fails here, when the server is built.
    """
    sig = inspect.signature(fn, eval_str=True)
    sig = sig.replace(
        parameters=[p.replace(default=_ListDefault(p.default)) if type(p.default) is list else p for p in sig.parameters.values()]
    )
    try:
        hash(sig)
    except TypeError as e:
        raise TypeError(
            f"tool {name}: a parameter default cannot be hashed ({e}), so it cannot run as an MCP "
            "task; use an immutable default (a tuple, None) or task=False"
        ) from None
    return sig
