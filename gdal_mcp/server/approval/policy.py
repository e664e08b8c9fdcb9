"""Human confirmation before a tool changes data (--confirm never|destructive|writes|all).

Used from one place, the tool-call middleware in server/middleware.py (`check()`): it runs before FastMCP's
tasks extension turns a call into a background task and before the tool body, with the live request
(protocol era, the client's capabilities, the answers of a retried call), so confirmation happens
before anything starts, in both protocol eras. Its parts:
- `plan()` decides whether a call needs a person's approval under the server's policy and words the
  question concretely (tool, what changes, size and date of what gets replaced, workspace-relative paths);
- `obtain()` asks it through the channel the client offers: elicitation (`ctx.elicit` on 2025-11-25
  and earlier; an InputRequiredResult the client answers by calling again on 2026-07-28), or the
  approval console (`console_channel`: HTTP with --console, see parked.py), or else fails closed with
  `confirmation-required`. It never asks the model. Every answer is written to the audit log.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NoReturn, get_args

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.server.app import App
from gdal_mcp.server.approval.question import Existing, Kind, Question, human_size

if TYPE_CHECKING:
    from fastmcp import Context
    from fastmcp.tools import ToolResult
    from mcp.types import InputRequiredResult

log = logging.getLogger("gdal_mcp.server.approval.policy")

Policy = Literal["never", "destructive", "writes", "all"]
POLICIES: tuple[str, ...] = get_args(Policy)
DESTRUCTIVE: tuple[str, ...] = ("replace", "modify")
ASKS: dict[str, tuple[str, ...]] = {
    "never": (),
    "destructive": DESTRUCTIVE,
    "writes": (*DESTRUCTIVE, "create"),
    "all": (*DESTRUCTIVE, "create", "call"),
}
# Tools whose argument makes an ordinary write change an existing dataset instead of creating one.
MODIFYING_MODES: dict[str, tuple[str, frozenset[str]]] = {"vector_convert": ("mode", frozenset({"append", "add_layer"}))}
REQUEST_KEY = "confirm"
#: the object keys a yes recorded during this tools/call (App.approve_versions), set by the middleware around confirm.check
RECORDED: ContextVar[list[tuple[str, str]] | None] = ContextVar("gdal_mcp_recorded_versions", default=None)
STATUS_TOOL = "confirmation_status"  # the console's read-only tool (server/tools/approval.py)
CONFIRMATION_ARG = "confirmation_id"  # taken off every tools/call by the middleware (server/middleware.py)
MAX_LEGACY_ROUNDS = 3
FLAGS = ("overwrite", "external", "unset_nodata")  # booleans the question depends on (lax input: "true" is true)
_BOOL = TypeAdapter(bool)


class Approval(BaseModel):
    """The form the person answers (one checkbox: clients render an empty form badly)."""

    confirm: bool = Field(title="Approve", description="Tick to let the server go ahead; decline to leave every file as it is")


def _existing(app: App, path: Any, *, dataset: bool = False, objects: Objects | None = None) -> Existing | None:
    """The workspace file `path` names, if it exists (None otherwise), resolved exactly as the tool resolves it: a
    dataset the tool reads (and changes in place) through `resolve_input` (GDAL syntax, file://), an output through
    the plain-path rules of `resolve_output`. A path the sandbox refuses is not a confirmation matter: the tool
    refuses it itself and writes nothing. An object in object storage is as `objects` describes it (describe_objects).
    """
    if not isinstance(path, str) or not path:
        return None
    if objects is not None and path in objects:
        return objects[path][0] if objects[path] else None
    try:
        if dataset:
            resolved = app.sandbox.resolve_input(path)
            if resolved.network or not resolved.files:
                return None
            real = resolved.files[0]
        else:
            real = app.sandbox.resolve_file(path, what="output")
        st = real.stat()
    except (GdalMcpError, OSError):
        return None
    if not real.is_file():
        return None
    return Existing(
        display=app.sandbox.display(real), size=st.st_size, mtime=st.st_mtime, mtime_ns=st.st_mtime_ns, inode=st.st_ino
    )


#: the datasets in object storage a call names: its argument (as given) -> the dataset's objects, main first (() when
#: there is none)
Objects = Mapping[str, tuple[Existing, ...]]


async def describe_objects(app: App, arguments: dict[str, Any], *, destructive: bool) -> dict[str, tuple[Existing, ...]]:
    """The objects of the datasets in object storage that a call's `input` and `output` name, with size, date and
    ETag, listed by a worker (the server never reads storage itself): only when the question could be about them (a
    tool that changes its input, a mode that adds to its output, overwrite=true). A path the sandbox refuses is left
    out (the tool refuses it)."""
    from gdal_mcp.jobs import DescribeObjectsJob

    keys = ("input", "output") if destructive else ("output",) if arguments.get("overwrite") else ()
    named: dict[str, str] = {}
    for key in keys:
        value = arguments.get(key)
        if not isinstance(value, str) or not value:
            continue
        try:
            location = app.sandbox.object_location(value)
        except GdalMcpError:
            continue
        if location is not None:
            named[value] = location.gdal_path
    if not named:
        return {}
    found = await app.execute(DescribeObjectsJob(objects=sorted(set(named.values()))), quick=True)
    out: dict[str, tuple[Existing, ...]] = {}
    for value, path in named.items():
        dataset = found.get(path)
        out[value] = tuple(
            Existing(
                display=app.sandbox.display(f["path"]),
                size=int(f["size"]),
                mtime=float(f["mtime"]),
                mtime_ns=int(f["mtime"]) * 1_000_000_000,
                inode=0,
                key=str(f["path"]),
                etag=str(f["etag"]),
            )
            for f in (dataset or {}).get("files", ())
        )
    return out


#: tools whose `output` may be a directory (raster_tiles' z/x/y tiles): replacing one is a "replace" question too
DIRECTORY_OUTPUTS = frozenset({"raster_tiles"})
#: entries counted for the size a question shows of a directory (beyond: the size shown is a lower bound)
DIRECTORY_SCAN_LIMIT = 200_000


def _existing_directory(app: App, path: Any) -> Existing | None:
    """The existing directory a directory output names (resolved as `resolve_output(directory=True)` resolves it), with
    the bytes it holds; None when there is none or the tool refuses the path itself (a link, outside)."""
    import os
    from pathlib import Path

    from gdal_mcp.sandbox.paths import candidate, contained

    if not isinstance(path, str) or not path:
        return None
    try:
        cand = candidate(app.sandbox.roots, path)
        final = Path(os.path.realpath(cand.parent)) / cand.name
        if final.is_symlink() or not final.is_dir() or not contained(app.sandbox.roots, final):
            return None
        st = final.stat()
        size, seen = 0, 0
        for dirpath, _dirs, files in os.walk(final):
            for name in files:
                seen += 1
                if seen > DIRECTORY_SCAN_LIMIT:
                    break
                try:
                    size += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
            if seen > DIRECTORY_SCAN_LIMIT:
                break
    except OSError:
        return None
    return Existing(
        display=app.sandbox.display(final) + "/", size=size, mtime=st.st_mtime, mtime_ns=st.st_mtime_ns, inode=st.st_ino
    )


def _shown(app: App, value: Any) -> str:
    """An argument as the person reads it: paths workspace-relative, lists shortened."""
    if isinstance(value, list | tuple):
        items = [_shown(app, v) for v in value[:3]]
        more = f" and {len(value) - 3} more" if len(value) > 3 else ""
        return ", ".join(items) + more
    if isinstance(value, dict):
        return ", ".join(f"{k}={_shown(app, v)}" for k, v in list(value.items())[:5])
    return app.sandbox.scrub(str(value))


def _product(app: App, tool: str, title: str, a: dict[str, Any]) -> str:
    """What the output will hold: 'a reprojection of dem.tif to EPSG:32632'."""
    src = _shown(app, a["input"]) if a.get("input") else None
    crs = a.get("dst_crs")
    to_crs = f" to {crs}" if crs else ""
    if tool in ("raster_reproject", "vector_reproject") and src:
        return f"a reprojection of {src}{to_crs}" if crs else f"a resampled copy of {src}"
    if tool in ("raster_convert", "vector_convert") and src:
        fmt = a.get("format")
        return f"a {fmt} conversion of {src}{to_crs}" if fmt else f"a conversion of {src}{to_crs}"
    if tool == "raster_clip" and src:
        return f"a clip of {src}"
    steps = a.get("steps")
    if isinstance(steps, list) and src:  # a pipeline (raster_pipeline): its steps, so one approval covers them all
        # only names that look like step names: the arguments are not validated yet, and the person reads this
        names = [str(s["step"]) for s in steps if isinstance(s, dict) and re.fullmatch(r"[a-z][a-z_-]{0,30}", str(s.get("step")))]
        return f"{src} processed by {' → '.join(names)}" if len(names) == len(steps) else f"the result of {tool} on {src}"
    if tool == "raster_mosaic":
        parts = _shown(app, a["inputs"]) if a.get("inputs") else f"the rasters matching {_shown(app, a.get('input_pattern'))}"
        return f"a mosaic of {parts}"
    what = title[0].lower() + title[1:]
    return f"the result of {tool} ({what}) on {src}" if src else f"the result of {tool} ({what})"


def _dataset(app: App, path: Any, objects: Objects) -> tuple[Existing, ...]:
    """A dataset's files as the workspace_* tools take them (the file and its side files), as the person is shown
    them; () when the tool will refuse the path itself."""
    from gdal_mcp.sandbox.datasets import dataset_files

    if not isinstance(path, str) or not path:
        return ()
    if path in objects:
        return objects[path]
    try:
        files = dataset_files(app.sandbox, path).files
    except GdalMcpError:
        return ()
    found = (_existing(app, app.sandbox.display(f)) for f in files)
    return tuple(e for e in found if e is not None)


def _files_message(targets: tuple[Existing, ...]) -> str:
    main, sides = targets[0], targets[1:]
    if not sides:
        return main.describe()
    total = sum(t.size for t in targets)
    names = ", ".join(t.display.rsplit("/", 1)[-1] for t in sides)
    return (
        f"{main.describe()} with its {len(sides)} side file{'s' if len(sides) > 1 else ''} ({names}), {human_size(total)} in all"
    )


def _workspace_message(app: App, tool: str, a: dict[str, Any], objects: Objects) -> tuple[str, tuple[Existing, ...]] | None:
    """workspace_delete and workspace_move: every file that goes (or is replaced), so an answer binds to them all."""
    source = _dataset(app, a.get("input"), objects)
    if tool == "workspace_delete":
        if not source:
            return None  # the tool refuses the path itself
        return f"Delete {_files_message(source)}? This cannot be undone.", source
    output = a.get("output")
    if not a.get("overwrite") and _dataset(app, output, objects):
        return None  # the tool refuses an existing output without overwrite=true (already-exists): nothing to ask
    replaced = _dataset(app, output, objects) if a.get("overwrite") else ()
    if not source and not replaced:
        return None  # the tool refuses the missing input itself
    # an input missing now may appear before the tool runs (a second call): what it would replace is still asked about
    moved = _files_message(source) if source else f"{_shown(app, a.get('input'))} (not there yet)"
    replacing = f", replacing {_files_message(replaced)}" if replaced else ""
    return f"Move {moved} to {_shown(app, output)}{replacing}?", source + replaced


def _modify_message(
    app: App, tool: str, title: str, a: dict[str, Any], objects: Objects
) -> tuple[str, tuple[Existing, ...]] | None:
    """Tools that change their input in place (annotated destructive)."""
    if tool in ("workspace_delete", "workspace_move"):
        return _workspace_message(app, tool, a, objects)
    src = _existing(app, a.get("input"), dataset=True, objects=objects)
    # an object is changed with its side files (rewritten and uploaded in their place): the question names them all
    named = a.get("input")
    whole: tuple[Existing, ...] = (objects.get(named, ()) if isinstance(named, str) else ()) or ((src,) if src else ())
    shown = _files_message(whole) if len(whole) > 1 else src.describe() if src is not None else ""
    if tool == "raster_overviews":
        if src is None:
            return None  # the tool refuses a missing input itself
        if a.get("external"):
            ovr = _existing(app, f"{src.display}.ovr")  # what the tool writes: the resolved input's name + .ovr
            replacing = f", replacing {ovr.describe()}" if ovr else ""
            levels = a.get("levels", "auto")
            return (
                f"Write overviews of {src.display} (levels {_shown(app, levels)}, {a.get('resampling')} "
                f"resampling) to {src.display}.ovr{replacing}? {src.display} itself stays as it is.",
                (src, ovr) if ovr else (src,),
            )
        if a.get("action") == "delete":
            return f"Rewrite {shown} in place to remove all its overviews?", whole
        return (
            f"Rewrite {shown} in place to add overviews (levels {_shown(app, a.get('levels', 'auto'))}, "
            f"{a.get('resampling')} resampling)?",
            whole,
        )
    if tool == "raster_edit":
        if src is None:
            return None
        changes = []
        for key, label in (
            ("crs", "set the CRS to"),
            ("nodata", "set nodata to"),
            ("scale", "set scale to"),
            ("offset", "set offset to"),
            ("bounds", "set the extent to"),
            ("metadata", "set metadata"),
            ("band_descriptions", "set band descriptions"),
            ("band_units", "set units to"),
        ):
            if a.get(key) is not None:
                changes.append(f"{label} {_shown(app, a[key])}")
        if a.get("unset_nodata"):
            changes.append("remove its nodata value")
        what = "; ".join(changes) if changes else "rewrite its metadata"
        return f"Change {shown} in place: {what}? Pixel values stay as they are.", whole
    if src is not None:
        return f"Let {tool} ({title}) change {shown} in place?", whole
    return f"Let {tool} ({title}) change data in place?", ()


def plan(
    app: App, tool: str, title: str, annotations: Any, arguments: dict[str, Any], *, writes: bool, objects: Objects | None = None
) -> Question | None:
    """The question this call needs under the server's --confirm policy, or None to run it unasked. `objects`: the
    datasets in object storage the call names, as describe_objects found them."""
    objects = objects or {}
    if isinstance(arguments.get("input"), str) and objects.get(arguments["input"]) == ():
        return None  # an object the call reads is not there: the tool refuses it (not-found), nothing to ask
    asks = ASKS[app.settings.confirm]
    if app.settings.read_only and (writes or getattr(annotations, "read_only_hint", True) is False):
        return None  # nothing can change: the tool refuses to write (read-only) by itself
    if arguments.get("plan_only") is True:
        return None  # only planned (raster_pipeline plan_only): nothing is run or written
    a = arguments
    kind: Kind
    targets: tuple[Existing, ...] = ()
    output = a.get("output") if isinstance(a.get("output"), str) else None
    mode_arg = MODIFYING_MODES.get(tool)
    if getattr(annotations, "destructive_hint", False):
        kind = "modify"
        worded = _modify_message(app, tool, title, a, objects)
        if worded is None:
            return None
        message, targets = worded
    elif mode_arg is not None and a.get(mode_arg[0]) in mode_arg[1] and output is not None:
        target = _existing(app, output, objects=objects)
        if target is None:
            return None  # nothing to add to: the tool refuses with not-found
        kind, targets = "modify", objects.get(output, ()) or (target,)
        src = _shown(app, a.get("input"))
        layer = a.get("output_layer")
        if a.get(mode_arg[0]) == "append":
            into = f"layer {layer} of " if layer else ""
            message = f"Append the features of {src} to {into}{target.describe()}?"
        else:
            message = f"Add a new layer{' ' + layer if layer else ''} with the features of {src} to {target.describe()}?"
    elif output is not None and (writes or getattr(annotations, "read_only_hint", True) is False):
        target = _existing(app, output, objects=objects)
        if target is None and tool in DIRECTORY_OUTPUTS:
            target = _existing_directory(app, output)
        product = _product(app, tool, title, a)
        if target is not None and a.get("overwrite"):
            kind, targets = "replace", (target,)
            message = f"Replace {target.describe()} with {product}?"
            if target.display.endswith("/"):  # a directory output: all it holds goes
                message = f"Replace the directory {target.describe()} and everything in it with {product}?"
            if tool == "workspace_copy":  # the replaced dataset's side files go too: name them all
                targets = _dataset(app, output, objects) or targets
                message = f"Replace {_files_message(targets)} with a copy of {_shown(app, a.get('input'))}?"
            elif len(objects.get(output, ())) > 1:  # an object's side files are replaced too (uploaded in their place)
                targets = objects[output]
                message = f"Replace {_files_message(targets)} with {product}?"
        elif target is not None:
            return None  # overwrite=false on an existing file: the tool refuses with already-exists
        else:
            kind = "create"
            message = f"Create {_shown(app, output)} with {product}?"
    elif writes:
        kind, message = "create", f"Let {tool} ({title}) write to the workspace?"
    else:
        if "call" not in asks:
            return None
        kind = "call"
        shown = ", ".join(f"{k}={_shown(app, v)}" for k, v in a.items() if v is not None and v != [] and k != "ctx")
        message = f"Run {tool} ({title}){' with ' + shown if shown else ''}?"
    state = hashlib.sha256(
        json.dumps(
            {"tool": tool, "arguments": a, "targets": [(t.display, t.size, t.mtime_ns, t.inode, t.etag) for t in targets]},
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()
    question = Question(tool=tool, kind=kind, message=message, targets=targets, arguments=a, state=state)
    if kind in asks:
        return question
    if kind in DESTRUCTIVE:  # let through by the operator's policy: still on record
        app.audit.confirmation(
            tool=tool,
            arguments=a,
            question=message,
            kind=kind,
            answer="approved",
            channel="policy",
            detail=f"--confirm {app.settings.confirm}",
        )
    return None


def _can_elicit(ctx: Context) -> bool:
    """The client declared elicitation (form mode) in its capabilities."""
    try:
        capabilities = ctx.session.client_capabilities
        cap = capabilities.elicitation if capabilities is not None else None
    except Exception:  # noqa: BLE001 - no session, no request: nobody to ask
        return False
    if cap is None:
        return False
    # An empty capability means form mode (the original form of the capability); url-only cannot show a form.
    return getattr(cap, "form", None) is not None or getattr(cap, "url", None) is None


def _modern(ctx: Context) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    rc = getattr(ctx, "request_context", None)
    return rc is not None and rc.protocol_version in MODERN_PROTOCOL_VERSIONS


def console_channel(app: App, question: Question) -> ToolResult | None:
    """The approval console (HTTP, --console): park the question and tell the agent where it waits.

    Returns None without a console (stdio, or --no-console), so the call fails closed; else the
    confirmation-required result with the confirmation id, the console URL and the expiry (parked.py).
    """
    approvals, console = app.approvals, app.console
    if approvals is None or console is None:
        return None
    return approvals.required(
        approvals.park(question), "This client cannot ask its user (no elicitation).", console_url=console.url()
    )


def _answer(app: App, question: Question, action: str, approved: bool, channel: str, *, detail: str | None = None) -> None:
    answer = "approved" if approved else ("declined" if action in ("accept", "decline") else "cancelled")
    question.record(
        app.audit,
        answer,
        channel,
        detail,
    )
    if not approved:
        raise GdalMcpError(
            "declined",
            f"the user {answer} {question.tool}: {question.message} Nothing was changed; "
            "do not retry unless the user asks for it",
        )


def _approved(action: str, content: Any) -> bool:
    if action != "accept":
        return False
    confirm = content.get("confirm") if isinstance(content, dict) else getattr(content, "confirm", None)
    return confirm is True


async def obtain(
    app: App, ctx: Context | None, question: Question, replan: Callable[[], Awaitable[Question | None]]
) -> InputRequiredResult | ToolResult | None:
    """Get the person's answer to `question`. Returns None to go ahead, or a result to hand back to the client
    (an InputRequiredResult on 2026-07-28, or what the console returns); raises `declined` or
    `confirmation-required`. `replan()` recomputes the question just before the job runs: an answer given
    for files that changed since is void, and the person is asked again."""
    if ctx is not None and _can_elicit(ctx):
        if _modern(ctx):
            return _modern_round(app, ctx, question)
        for _ in range(MAX_LEGACY_ROUNDS):
            try:
                result = await ctx.elicit(question.message, response_type=Approval)
            except Exception as e:  # noqa: BLE001 - the client failed to ask: fail closed, never go ahead
                log.warning("elicitation failed for %s: %s", question.tool, e)
                _refuse(app, question, f"elicitation failed: {type(e).__name__}")
            approved = _approved(result.action, getattr(result, "data", None))
            _answer(app, question, result.action, approved, "elicitation", detail="ctx.elicit (2025-11-25)")
            now = await replan()
            if now is None or now.state == question.state:
                _approved_versions(app, question)
                return None
            question = now  # the files changed while the person was deciding: ask about what is there now
        raise GdalMcpError(
            "confirmation-required", f"the files of {question.tool} kept changing while the user was asked; nothing was done"
        )
    parked = console_channel(app, question)
    if parked is not None:
        return parked
    _refuse(app, question, "it declares no elicitation support, and no approval console is set up")


def _refuse(app: App, question: Question, why: str) -> NoReturn:
    """Fail closed: nobody could be asked, so nothing is done."""
    question.record(
        app.audit,
        "refused",
        "policy",
        why,
    )
    raise GdalMcpError(
        "confirmation-required",
        f"{question.tool} needs a person's approval first ({question.message}) and this client cannot ask its user "
        f"({why}). Nothing was changed. Ask the user to run it from a client that supports elicitation; the "
        f"operator may also start the server with --confirm never (now --confirm {app.settings.confirm})",
    )


def _modern_round(app: App, ctx: Context, question: Question) -> InputRequiredResult | None:
    """2026-07-28: the server cannot push a request; return one, and read the answer when the client calls again."""
    from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

    responses = ctx.input_responses
    answer = responses.get(REQUEST_KEY) if responses is not None else None
    if isinstance(answer, ElicitResult) and ctx.request_state == question.state:
        approved = _approved(answer.action, answer.content)
        _answer(app, question, answer.action, approved, "elicitation", detail="input-required retry (2026-07-28)")
        _approved_versions(app, question)
        return None
    # First round, or an answer about other arguments or files that changed since it was given: ask (again).
    return InputRequiredResult(
        request_state=question.state,
        input_requests={
            REQUEST_KEY: ElicitRequest(params=ElicitRequestFormParams(message=question.message, requested_schema=_schema()))
        },
    )


def _schema() -> dict[str, Any]:
    from fastmcp.server.elicitation import parse_elicit_response_type

    return parse_elicit_response_type(Approval).schema


def token_fingerprint(token: str) -> str:
    """How the audit log names the token a console approval was made with: never the token itself."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class ToolSpec:
    """What the policy needs to know about a tool: its annotations, title, whether it always writes, signature."""

    title: str
    annotations: Any
    writes: bool
    signature: inspect.Signature | None

    def arguments(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments with the tool's defaults filled in (the raw JSON values otherwise)."""
        a = dict(raw)
        if self.signature is not None:
            for name, param in self.signature.parameters.items():
                if name != "ctx" and name not in a and param.default is not inspect.Parameter.empty:
                    a[name] = param.default
        for flag in FLAGS:
            if flag in a and not isinstance(a[flag], bool):
                try:
                    a[flag] = _BOOL.validate_python(a[flag])
                except ValidationError:
                    a[flag] = False  # the tool rejects the argument itself
        return a


async def tool_spec(ctx: Context, name: str, cache: dict[str, ToolSpec | None]) -> ToolSpec | None:
    """The spec of tool `name` on this server (None for an unknown tool), looked up once."""
    if name not in cache:
        tool = await ctx.fastmcp.get_tool(name)
        if tool is None:
            return None
        fn = getattr(tool, "fn", None)
        try:
            signature = inspect.signature(fn) if fn is not None else None  # follows the wrapper to the tool's def
        except (TypeError, ValueError):
            signature = None
        cache[name] = ToolSpec(
            title=tool.title or name, annotations=tool.annotations, writes="write" in (tool.tags or set()), signature=signature
        )
    return cache[name]


async def check(
    app: App,
    ctx: Context | None,
    name: str,
    raw: dict[str, Any],
    cache: dict[str, ToolSpec | None],
    *,
    confirmation_id: str | None = None,
) -> ToolResult | None:
    """Apply --confirm to a tools/call before it runs: None to go ahead, or a result to hand back instead
    (the question as an InputRequiredResult on 2026-07-28, or the console's confirmation-required); raises
    `declined` or `confirmation-required`. `confirmation_id`: the call repeats one parked in the approval
    console; it goes ahead if the person approved exactly this call on these files."""
    if name == STATUS_TOOL:
        return None  # asking about a confirmation is never itself asked about
    if ctx is None:  # never in a tools/call; fail closed rather than run unasked
        raise GdalMcpError("internal-error", f"{name}: no request context to apply --confirm to; nothing was done")
    spec = await tool_spec(ctx, name, cache)
    if spec is None:
        return None  # unknown tool: the call fails with not-found by itself
    called = spec.arguments(raw)
    modifying = MODIFYING_MODES.get(name)
    destructive = bool(getattr(spec.annotations, "destructive_hint", False)) or (
        modifying is not None and called.get(modifying[0]) in modifying[1]
    )

    async def replan() -> Question | None:
        objects = await describe_objects(app, called, destructive=destructive)
        return plan(app, name, spec.title, spec.annotations, called, writes=spec.writes, objects=objects)

    question = await replan()
    if question is None:
        return None
    if confirmation_id is not None:
        if app.approvals is None or app.console is None:
            raise GdalMcpError(
                "invalid-argument",
                "confirmation_id is only for the approval console (HTTP transport with --console); call the tool without it",
            )
        redeemed = app.approvals.redeem(confirmation_id, question, console_url=app.console.url())
        if redeemed is None:
            _approved_versions(app, question)
        return redeemed
    result = await obtain(app, ctx, question, replan)
    if result is None:
        return None
    from fastmcp.tools import InputRequiredToolResult, ToolResult

    if isinstance(result, ToolResult):
        return result  # the console's confirmation-required
    return InputRequiredToolResult(result)


def _approved_versions(app: App, question: Question) -> None:
    """A yes about objects binds to their versions: the call that changes them does so only in these (If-Match, and
    App.object_versions refuses any object not among them). The keys go on the request's list (RECORDED), which the
    middleware drops when the call ends."""
    keys = app.approve_versions(question.tool, ((t.key, t.etag) for t in question.targets if t.key))
    recorded = RECORDED.get()
    if recorded is not None:
        recorded.extend(keys)
