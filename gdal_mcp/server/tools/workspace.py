"""Workspace files: copy, move (rename) and delete a dataset with its side files, inside the workspace only (its
files, or its objects in a bucket workspace).

No GDAL: the sandbox decides which files a dataset is (gdal_mcp/sandbox/datasets.py) and commits a copy as every
output (temporary directory, no-replace rename). Delete and move change existing data: the confirmation policy asks
the person first (server/approval/policy.py), as for overwrite=true.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import mcp.types as mt
from fastmcp import Context

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.jobs import DeleteObjectsJob, DeleteVersionsJob, FetchObjectsJob
from gdal_mcp.models import WorkspaceResult
from gdal_mcp.sandbox.datasets import DatasetFiles, copy_dataset, dataset_files, delete_dataset, move_dataset
from gdal_mcp.sandbox.outputs import PROBE_PREFIX
from gdal_mcp.sandbox.paths import TMP_PREFIX
from gdal_mcp.server.app import App
from gdal_mcp.server.results import refuse_existing_object
from gdal_mcp.server.tools.params import DatasetFile, Overwrite, SameFormatOutput
from gdal_mcp.server.tools.registry import MODIFY, WRITE, tool

log = logging.getLogger("gdal_mcp.server.tools.workspace")


def _same_format(main: str, output: str) -> None:
    suffix = Path(main).suffix
    if suffix.lower() != ("." + output.rsplit(".", 1)[-1].lower() if "." in output else ""):
        raise GdalMcpError(
            "invalid-argument",
            f"output '{output}' must keep the extension '{suffix}': these tools copy and rename files; to "
            "change the format use raster_convert or vector_convert",
        )


async def _changed(app: App, ctx: Context | None, paths: list[str]) -> None:
    """Forget cached metadata of the files, and tell the client its resource list changed."""
    app.cache.evict(paths)
    if ctx is not None:
        try:
            await ctx.send_notification(mt.ResourceListChangedNotification())
        except Exception:  # noqa: BLE001 - a client without notifications still gets its result
            pass


def _existing_dataset(app: App, final: Path) -> DatasetFiles | None:
    """The dataset an overwrite replaces (None: nothing there yet)."""
    if not final.is_file():
        return None
    return dataset_files(app.sandbox, str(final), what="output")


def _drop_stale(replaced: DatasetFiles | None, placed: list[Path]) -> None:
    """After an overwrite: the replaced dataset's side files the new one did not bring (an .ovr, a world file) would
    now describe it wrongly; they go."""
    if replaced is None:
        return
    keep = {p.name for p in placed}
    for f in replaced.files:
        if f.name not in keep:
            f.unlink(missing_ok=True)


def _kept(app: App, source: DatasetFiles) -> list[str]:
    return [app.sandbox.display(f) for f in source.shared]


@tool(title="Copy a dataset", annotations=WRITE, tags={"workspace"}, writes=True)
async def workspace_copy(
    app: App, input: DatasetFile, output: SameFormatOutput, overwrite: Overwrite = False, ctx: Context | None = None
) -> WorkspaceResult:
    """Copy a dataset file and its side files to another name or folder in the workspace (a shapefile with its
    .dbf/.shx/.prj, a GeoTIFF with its .aux.xml/.ovr/world file). Atomic: all files or none; never replaces unless
    overwrite=true. Same format only (use raster_convert / vector_convert to change it). In object storage (a bucket
    workspace) the same, object by object."""
    if _objects(app, input, output):
        return await _copy_objects(app, ctx, input, output, overwrite=overwrite, move=False)
    source = await asyncio.to_thread(dataset_files, app.sandbox, input)
    _same_format(source.main.name, output)
    target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=[app.sandbox.resolve_input(input)])
    replaced = await asyncio.to_thread(_existing_dataset, app, target.final)
    placed = await asyncio.to_thread(copy_dataset, app.sandbox, source, target)
    await asyncio.to_thread(_drop_stale, replaced, placed)
    await _changed(app, ctx, [str(p) for p in placed])
    return WorkspaceResult(
        action="copy",
        input=app.sandbox.display(source.main),
        output=target.display,
        uri=app.sandbox.uri(target.display),
        files=[app.sandbox.display(p) for p in placed],
        kept=_kept(app, source),
    )


@tool(title="Move or rename a dataset", annotations=MODIFY, tags={"workspace"}, writes=True)
async def workspace_move(
    app: App, input: DatasetFile, output: SameFormatOutput, overwrite: Overwrite = False, ctx: Context | None = None
) -> WorkspaceResult:
    """Move or rename a dataset file and its side files inside the workspace. The user is asked to approve it
    first (it changes existing data). Never replaces an existing file unless overwrite=true; if a file cannot be
    moved, the ones already moved are put back. In object storage (a bucket workspace): a copy, then the old objects
    are deleted (only in the version approved)."""
    if _objects(app, input, output):
        return await _copy_objects(app, ctx, input, output, overwrite=overwrite, move=True)
    source = await asyncio.to_thread(dataset_files, app.sandbox, input)
    _same_format(source.main.name, output)
    target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=[app.sandbox.resolve_input(input)])
    shutil.rmtree(target.tmp_dir, ignore_errors=True)  # only its checks and new folders are wanted: a move renames
    replaced = await asyncio.to_thread(_existing_dataset, app, target.final)
    try:
        moved = await asyncio.to_thread(move_dataset, app.sandbox, source, target.final, overwrite=overwrite)
    except GdalMcpError:
        for d in reversed(target.created_dirs):  # folders made for it, now empty
            try:
                d.rmdir()
            except OSError:
                break
        raise
    await asyncio.to_thread(_drop_stale, replaced, moved)
    await _changed(app, ctx, [str(p) for p in (*source.files, *moved)])
    return WorkspaceResult(
        action="move",
        input=app.sandbox.display(source.main),
        output=target.display,
        uri=app.sandbox.uri(target.display),
        files=[app.sandbox.display(p) for p in moved],
        kept=_kept(app, source),
    )


@tool(title="Delete a dataset", annotations=MODIFY, tags={"workspace"}, writes=True)
async def workspace_delete(app: App, input: DatasetFile, ctx: Context | None = None) -> WorkspaceResult:
    """Delete a dataset file and its side files from the workspace (scratch outputs an analysis no longer needs).
    The user is asked to approve it first; it cannot be undone. Side files another dataset of the same name stem
    may use are kept and listed. In object storage (a bucket workspace), the objects are deleted only in the version
    the user approved."""
    if _objects(app, input):
        return await _delete_objects(app, ctx, input)
    source = await asyncio.to_thread(dataset_files, app.sandbox, input)
    shown = app.sandbox.display(source.main)
    removed = await asyncio.to_thread(delete_dataset, source)
    await _changed(app, ctx, [str(p) for p in removed])
    return WorkspaceResult(action="delete", input=shown, files=[app.sandbox.display(p) for p in removed], kept=_kept(app, source))


# ----- datasets in object storage (a bucket workspace, an allowed s3:// prefix): engine/objects.py -----
def _objects(app: App, *paths: str) -> bool:
    """Whether the call is about objects: refused (unsupported) when it mixes objects and local files."""
    located = [app.sandbox.object_location(p, what=what) for p, what in zip(paths, ("input", "output"), strict=False)]
    if all(loc is None for loc in located):
        return False
    if any(loc is None for loc in located):
        raise GdalMcpError(
            "unsupported",
            "the workspace_* tools copy and move within object storage or within local files, not between them; "
            "raster_convert or vector_convert writes a dataset from one to the other",
        )
    return True


async def _described(app: App, path: str, what: str) -> tuple[str, dict[str, Any] | None]:
    """(the /vsis3/ path, the dataset's objects as engine/objects.describe finds them, or None)."""
    location = app.sandbox.object_location(path, what=what)
    assert location is not None
    if location.path.rsplit("/", 1)[-1].startswith((TMP_PREFIX, PROBE_PREFIX)):
        raise GdalMcpError("invalid-argument", f"{what} '{path}' is a temporary object of a write in progress")
    return location.gdal_path, await app.object_dataset(location.gdal_path)


def _versions(app: App, files: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(path, ETag) of each object, in the version the person approved changing (App.object_versions)."""
    return list(app.object_versions(files).items())


def _missing(path: str) -> GdalMcpError:
    return GdalMcpError("not-found", f"'{path}' does not exist in the workspace; list_datasets shows what it holds")


async def _copy_objects(
    app: App, ctx: Context | None, input: str, output: str, *, overwrite: bool, move: bool
) -> WorkspaceResult:
    """A dataset's objects copied to new keys (read by a worker, uploaded like an output: never replacing one unless
    overwrite=true, then only in the version approved); for a move, the old objects then deleted in the version
    approved. Nothing is left of a copy that fails; a move whose old objects changed meanwhile takes its copy back."""
    app.require_writable("workspace_move" if move else "workspace_copy")
    src, source = await _described(app, input, "input")
    if source is None:
        raise _missing(input)
    files = source["files"]
    main = src.rsplit("/", 1)[-1]
    _same_format(main, output)
    sources_versions = _versions(app, files) if move else []  # conflict before anything is prepared
    target = app.sandbox.resolve_output(output, overwrite=overwrite)
    assert target.remote is not None
    if target.remote == src:
        target.discard()
        raise GdalMcpError("invalid-argument", f"output '{output}' is the input itself; name another key")
    replaced: list[dict[str, Any]] = []
    if not overwrite:
        await refuse_existing_object(app, target)
    else:
        _, old = await _described(app, output, "output")
        replaced = old["files"] if old else []
    dataset = DatasetFiles(main=Path(main), files=tuple(Path(f["path"].rsplit("/", 1)[-1]) for f in files))
    renamed = sorted(zip((f["path"] for f in files), (n for _, n in dataset.renamed(Path(target.final.name))), strict=True),
                     key=lambda pair: pair[0] == src)  # fmt: skip
    job = FetchObjectsJob(sources=[s for s, _ in renamed], names=[n for _, n in renamed], dst=str(target.tmp_path))
    await app.execute(job, ctx=ctx, output=target)
    folder = target.remote.rsplit("/", 1)[0]
    placed = [f"{folder}/{n}" for _, n in renamed]
    stale = _versions(app, [f for f in replaced if f["path"] not in placed])
    if stale:  # the replaced dataset's side files the new one did not bring: they would describe it wrongly
        try:
            await app.execute(DeleteVersionsJob(objects=stale), quick=True)
        except GdalMcpError as e:
            log.warning("side files of the replaced %s were left: %s", output, e.message)
    if move:
        try:
            await app.execute(DeleteVersionsJob(objects=sources_versions), ctx=ctx)
        except GdalMcpError as e:
            if not overwrite:  # the copy's objects are new (the upload's condition): take them back
                await app.execute(DeleteObjectsJob(objects=placed), quick=True)
            kept = "" if not overwrite else f" The copy at '{target.display}' stays (it replaced what was there)."
            raise GdalMcpError(e.code, f"{e.message}; nothing was moved.{kept}") from None
    await _changed(app, ctx, [*placed, *(s for s, _ in sources_versions)])
    return WorkspaceResult(
        action="move" if move else "copy",
        input=app.sandbox.display(src),
        output=target.display,
        uri=app.sandbox.uri(target.display),
        files=[app.sandbox.display(p) for p in placed],
        kept=[app.sandbox.display(p) for p in source["shared"]],
    )


async def _delete_objects(app: App, ctx: Context | None, input: str) -> WorkspaceResult:
    """A dataset's objects deleted (the main one first), each only in the version approved."""
    app.require_writable("workspace_delete")
    src, source = await _described(app, input, "input")
    if source is None:
        raise _missing(input)
    gone = await app.execute(DeleteVersionsJob(objects=_versions(app, source["files"])), ctx=ctx)
    await _changed(app, ctx, gone)
    return WorkspaceResult(
        action="delete",
        input=app.sandbox.display(src),
        files=[app.sandbox.display(p) for p in gone],
        kept=[app.sandbox.display(p) for p in source["shared"]],
    )
