"""Workspace files: copy, move (rename) and delete a dataset with its side files, inside the workspace only.

No GDAL: the sandbox decides which files a dataset is (gdal_mcp/sandbox/datasets.py) and commits a copy as every
output (temporary directory, no-replace rename). Delete and move change existing data: the confirmation policy asks
the person first (server/approval/policy.py), as for overwrite=true.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import mcp.types as mt
from fastmcp import Context

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import WorkspaceResult
from gdal_mcp.sandbox.datasets import DatasetFiles, copy_dataset, dataset_files, delete_dataset, move_dataset
from gdal_mcp.server.app import App
from gdal_mcp.server.tools.params import DatasetFile, Overwrite, SameFormatOutput
from gdal_mcp.server.tools.registry import MODIFY, WRITE, tool


def _same_format(source: DatasetFiles, output: str) -> None:
    if source.main.suffix.lower() != ("." + output.rsplit(".", 1)[-1].lower() if "." in output else ""):
        raise GdalMcpError(
            "invalid-argument",
            f"output '{output}' must keep the extension '{source.main.suffix}': these tools copy and rename files; to "
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
    overwrite=true. Same format only (use raster_convert / vector_convert to change it)."""
    source = await asyncio.to_thread(dataset_files, app.sandbox, input)
    _same_format(source, output)
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
    moved, the ones already moved are put back."""
    source = await asyncio.to_thread(dataset_files, app.sandbox, input)
    _same_format(source, output)
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
    may use are kept and listed."""
    source = await asyncio.to_thread(dataset_files, app.sandbox, input)
    shown = app.sandbox.display(source.main)
    removed = await asyncio.to_thread(delete_dataset, source)
    await _changed(app, ctx, [str(p) for p in removed])
    return WorkspaceResult(action="delete", input=shown, files=[app.sandbox.display(p) for p in removed], kept=_kept(app, source))
