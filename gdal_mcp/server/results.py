"""How a job's result becomes a tool's answer, in one place: a read result with its paths made workspace-relative; a
written output resolved by the sandbox (a temporary file beside the final path), committed when the job succeeds
(atomically, never replacing without overwrite) or discarded, the clients told of the new file, and the answer
carrying its resource URI, a resource link and, over HTTP, its download URL."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from fastmcp import Context
from fastmcp.tools import ToolResult
from pydantic import BaseModel

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.jobs import Job
from gdal_mcp.sandbox import MAX_PATTERN_MATCHES, OutputTarget, ResolvedInput
from gdal_mcp.server.app import App

log = logging.getLogger("gdal_mcp.server")


def prepare_output[J: Job[Any]](
    app: App,
    job: J,
    *,
    output: str,
    overwrite: bool,
    inputs: list[ResolvedInput],
    final_dir_arg: str | None = None,
    side_file: bool = False,
) -> tuple[OutputTarget, J]:
    """Resolve `output` (the sandbox's rules: in the workspace, no replacing without overwrite, not an input) and
    point the job at its temporary path; `App.execute(job, output=target)` commits or discards it.

    `final_dir_arg` names a job field that receives the output's final directory (a VRT's sources
    are written relative to where it will live, not to the temporary directory).
    """
    target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=inputs, side_file=side_file)
    job = job.writing_to(str(target.tmp_path))
    if final_dir_arg:
        changes: dict[str, Any] = {final_dir_arg: str(target.final.parent)}
        job = dataclasses.replace(job, **changes)
    return target, job


def unchangeable(src: ResolvedInput, name: str, action: str, instead: str) -> GdalMcpError:
    """unsupported for a dataset a tool would change in place but that is no plain workspace file, saying what to do
    instead: an object in object storage (never replaced by this server), an archive member or a connection."""
    if src.network:
        return GdalMcpError(
            "unsupported",
            f"'{name}' is an object in object storage, which this server never changes or replaces ({action} changes "
            f"files in place); {instead}",
        )
    return GdalMcpError(
        "unsupported",
        f"'{name}' is not a plain workspace file (an archive member or a connection): {action} changes files in place; {instead}",
    )


def is_object(app: App, src: ResolvedInput, name: str) -> bool:
    """Whether the dataset `name` (resolved as `src`) is exactly one object in object storage that this server may
    change (a bucket workspace's, an allowed s3:// one): not a member of an archive in it, nor a band of it."""
    try:
        location = app.sandbox.object_location(name)
    except GdalMcpError:
        return False
    return location is not None and src.network and src.gdal_path == location.gdal_path


async def drop_object_side_files(app: App, name: str, suffixes: tuple[str, ...]) -> None:
    """After a tool rewrote the object `name` without some of its side files (raster_overviews action=delete: its
    .ovr): those side files' objects are deleted, in the version approved (App.object_versions), so they do not
    describe the new object wrongly."""
    from gdal_mcp import jobs

    location = app.sandbox.object_location(name)
    if location is None:
        return
    files = ((await app.object_dataset(location.gdal_path)) or {}).get("files", [])[1:]
    stale = list(app.object_versions(f for f in files if str(f["path"]).lower().endswith(suffixes)).items())
    if stale:
        await app.execute(jobs.DeleteVersionsJob(objects=stale), quick=True)


async def resolve_inputs(
    app: App, ctx: Context | None, inputs: list[str] | None, pattern: str | None, *, limit: int = MAX_PATTERN_MATCHES
) -> list[ResolvedInput]:
    """The datasets of a many-input tool: the list given, or what the glob `pattern` matches (Sandbox.resolve_inputs);
    in a bucket workspace the glob matches object names, listed by a worker (nothing is opened)."""
    if pattern is None or app.sandbox.bucket is None or inputs is not None:
        return app.sandbox.resolve_inputs(inputs, pattern, limit=limit)
    from gdal_mcp import jobs
    from gdal_mcp.sandbox.inputs import no_match, pattern_parts, too_many_matches

    fixed, rest = pattern_parts(pattern)
    location = app.sandbox.bucket_location(fixed or ".", what="input_pattern")
    assert location is not None
    names = await app.execute(jobs.RemoteNamesJob(prefix=location.gdal_path, pattern=rest, limit=limit), ctx=ctx, quick=True)
    if len(names) > limit:
        raise too_many_matches(pattern, limit)
    if not names:
        raise no_match(pattern)
    return app.sandbox.resolve_inputs([f"{fixed}/{n}" if fixed else n for n in names], None, what="input_pattern match")


def download_url(app: App, display: str) -> str | None:
    """Over HTTP, where a workspace file can be downloaded (GET /files/<path>, see gdal_mcp/server/web/downloads.py).

    The host is the one the client reached this server by (its Host header, checked by the Host guard;
    a task's worker sees the headers of the call that created it); else the bind address.
    """
    if app.settings.transport != "http":
        return None
    from urllib.parse import quote

    from fastmcp.server.dependencies import get_http_headers

    host = (get_http_headers(include_all=True) or {}).get("host")
    if not host:
        bind = app.settings.host if app.settings.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        host = f"[{bind}]:{app.settings.port}" if ":" in bind else f"{bind}:{app.settings.port}"
    return f"http://{host}/files/{quote(display)}"


def with_links(app: App, result: BaseModel) -> ToolResult:
    """A write result as the tool's answer: the structured result, with download_url set over HTTP, and
    an MCP resource link to each file it names (its gdal-mcp://files/ URI, name, media type and size)."""
    from urllib.parse import unquote

    import mcp.types as mt

    from gdal_mcp.formats import mime_type
    from gdal_mcp.sandbox import RESOURCE_PREFIX

    links: list[mt.ResourceLink] = []
    for field in type(result).model_fields:
        uri = getattr(result, field)
        if not (field == "uri" or field.endswith("_uri")) or not isinstance(uri, str) or not uri.startswith(RESOURCE_PREFIX):
            continue
        display = unquote(uri.removeprefix(RESOURCE_PREFIX))
        try:
            real = app.sandbox.resolve_file(display, what="output")
            size = real.stat().st_size if real.is_file() else None
        except (GdalMcpError, OSError):
            continue
        url = download_url(app, display)
        if field == "uri" and url and "download_url" in type(result).model_fields:
            result = result.model_copy(update={"download_url": url})
        links.append(
            mt.ResourceLink(
                type="resource_link",
                uri=uri,
                name=real.name,
                mime_type=mime_type(real.name),
                size=size,
                description=f"{display}, written by this call" + (f" (download: {url})" if url else ""),
            )
        )
    return ToolResult(
        content=[mt.TextContent(type="text", text=result.model_dump_json()), *links],
        structured_content=result.model_dump(mode="json"),
    )


async def write_output[S](
    app: App,
    ctx: Context | None,
    job: Job[tuple[S, list[str]]],
    *,
    inputs: list[ResolvedInput],
    output: str,
    overwrite: bool,
    final_dir_arg: str | None = None,
    side_file: bool = False,
) -> tuple[OutputTarget, S, list[str]]:
    """Run a job that writes a file: atomic output, scrubbed result, clients told of the new file.

    `final_dir_arg`: see prepare_output.
    Returns (output target, engine result, warnings) for the tool to shape into its result model.
    """
    import mcp.types as mt

    target, job = prepare_output(
        app, job, output=output, overwrite=overwrite, inputs=inputs, final_dir_arg=final_dir_arg, side_file=side_file
    )
    if target.remote is not None and not target.overwrite:
        await refuse_existing_object(app, target)
    result, warnings = await app.execute(job, ctx=ctx, output=target)
    if ctx is not None:
        try:
            await ctx.send_notification(mt.ResourceListChangedNotification())
        except Exception:  # noqa: BLE001 - a client without notifications still gets its result
            log.debug("resource list notification failed", exc_info=True)
    scrubbed = app.scrub_model(result) if isinstance(result, BaseModel) else app.sandbox.scrub_obj(result)
    return target, scrubbed, [app.sandbox.scrub(w) for w in warnings]  # type: ignore[return-value]


async def refuse_existing_object(app: App, target: OutputTarget) -> None:
    """already-exists before any work when an object is at the output's key (the upload's condition still decides,
    at the end: an object that appears meanwhile is not replaced either)."""
    from gdal_mcp import jobs

    try:
        await app.execute(jobs.ReadObjectJob(path=str(target.remote), length=0), quick=True)
    except GdalMcpError as e:
        if e.code == "not-found":
            return
        target.discard()
        raise
    target.discard()
    raise GdalMcpError(
        "already-exists",
        f"output '{target.display}' already exists; nothing was done. Choose another name, or pass overwrite=true to "
        "replace it (the user is asked first)",
    )


async def write_result[S, W: BaseModel](
    app: App,
    ctx: Context | None,
    job: Job[tuple[S, list[str]]],
    *,
    model: type[W],
    inputs: list[ResolvedInput],
    output: str,
    overwrite: bool,
    final_dir_arg: str | None = None,
) -> W:
    """write_output shaped as the usual {output, uri, summary, warnings} result model."""
    target, summary, warnings = await write_output(
        app, ctx, job, inputs=inputs, output=output, overwrite=overwrite, final_dir_arg=final_dir_arg
    )
    return model(output=target.display, uri=app.sandbox.uri(target.display), summary=summary, warnings=warnings)


async def read_result[M: BaseModel](
    app: App, ctx: Context | None, job: Job[M], *, display: str | None = None, quick: bool = False
) -> M:
    """Run a job that only reads; its result with paths made workspace-relative (and `path` set to `display`)."""
    result = app.scrub_model(await app.execute(job, ctx=ctx, quick=quick))
    if display is not None and hasattr(result, "path"):
        result.path = display
    return result


def optional_input(app: App, value: str | None, what: str, inputs: list[ResolvedInput]) -> str | None:
    """Resolve an optional secondary dataset (mask, like …): appended to `inputs`, its GDAL path returned."""
    if value is None:
        return None
    resolved = app.sandbox.resolve_input(value, what=what)
    inputs.append(resolved)
    return resolved.gdal_path
