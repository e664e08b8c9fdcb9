"""Datasets that are objects in object storage (a bucket workspace, an allowed s3:// prefix): which objects a dataset
is, described for the person's approval (size, date, ETag), and copied, moved or deleted with every change conditional
on the version the person approved.

One listing of a folder gives every object's name, size, date and ETag (GDAL's VSIDIREntry extras); the dataset's
side files are picked from the names by the rule the workspace's files follow (sandbox/datasets.members).

A change is made only to the version approved: a delete is sent with `If-Match: <ETag>` after the ETags were checked
again just before, so an object written meanwhile stays (conflict), and a replace is an upload with the same condition
(engine/upload.py). A copy reads the objects into the job's directory and the worker uploads them like any output
(Job.upload): each object whole, new ones never replacing anything.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from gdal_mcp.engine import azure_blob, gdal_c
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.remote import shown

log = logging.getLogger("gdal_mcp.engine.objects")
CHUNK = 8 * 1024 * 1024
#: objects of one folder looked at to find a dataset's side files (a larger folder: the side files among the first)
MAX_FOLDER = 100_000


def _lib() -> Any:
    return gdal_c.require("VSIOpenDir")


def folder_listing(folder: str) -> dict[str, dict[str, Any]]:
    """Every object directly in the /vsis3/ or /vsiaz/ `folder`: name -> {size, mtime, etag} (one listing, fresh)."""
    if azure_blob.is_azure(folder):  # GDAL's /vsiaz/ entries carry no ETag
        return azure_blob.listing(folder, MAX_FOLDER)
    lib = _lib()
    lib.VSICurlPartialClearCache(folder.encode())
    listed = gdal_c.list_files(folder, recursive=False, limit=MAX_FOLDER) or []
    return {
        name: {
            "size": size,
            "mtime": mtime,
            "etag": next((v for k, v in extras.items() if k.lower() == "etag"), "").strip('"'),
        }
        for name, size, mtime, extras in listed
        if "/" not in name
    }


def describe(objects: Sequence[str], progress: Progress = no_progress) -> dict[str, dict[str, Any] | None]:
    """For each /vsis3/ path of `objects` naming a dataset's main object: {"files": [{path, size, mtime, etag}, … main first],
    "shared": [paths of side files another dataset of the same stem may use (left alone)]}, or None when there is no
    such object. One listing per folder."""
    from gdal_mcp.sandbox.datasets import members

    listings: dict[str, dict[str, dict[str, Any]]] = {}
    out: dict[str, dict[str, Any] | None] = {}
    for i, path in enumerate(objects):
        folder, _, name = path.rpartition("/")
        listing = listings.get(folder)
        if listing is None:
            listing = listings[folder] = folder_listing(folder)
        if not name or name not in listing:
            out[path] = None
            continue
        own, maybe, other = members(name, listing)
        files = [name, *own, *([] if other else maybe)]
        out[path] = {
            "files": [{"path": f"{folder}/{n}", **listing[n]} for n in files],
            "shared": [f"{folder}/{n}" for n in maybe] if other else [],
        }
        progress((i + 1) / max(1, len(objects)), "listed")
    return out


def fetch(sources: Sequence[str], names: Sequence[str], dst: str, progress: Progress = no_progress) -> dict[str, Any]:
    """Read the objects `sources` whole into the directory of `dst` (a job's temporary output, the last name being
    `dst`'s own) under `names`: a copy or a move of a dataset between keys, uploaded afterwards by the worker
    (Job.upload). {"files": the names written}."""
    if len(sources) != len(names) or not names or names[-1] != os.path.basename(dst):
        raise GdalMcpError("internal-error", "fetch: sources and names do not match the output")
    directory = os.path.dirname(dst)
    for i, (src, name) in enumerate(zip(sources, names, strict=True)):
        if "/" in name or name in ("", ".", ".."):
            raise GdalMcpError("internal-error", f"fetch: bad name {name!r}")
        read_to(src, os.path.join(directory, name))
        progress((i + 1) / len(sources), f"read {shown(src)}")
    return {"files": list(names)}


def stream(src: str, sink: Callable[[bytes], object], limit: int | None = None) -> None:
    """The object `src` read whole (or its first `limit` bytes), piece by piece, into `sink`; not-found when there is
    no such object."""
    lib = _lib()
    lib.VSICurlPartialClearCache(src.encode())
    handle = lib.VSIFOpenL(src.encode(), b"rb")
    if not handle:
        raise GdalMcpError("not-found", f"{shown(src)} does not exist (any more); nothing was changed")
    try:
        buffer = ctypes.create_string_buffer(CHUNK)
        left = limit
        while got := lib.VSIFReadL(buffer, 1, CHUNK if left is None else min(CHUNK, left), handle):
            sink(buffer.raw[:got])
            if left is not None:
                left -= got
                if left <= 0:
                    break
    finally:
        lib.VSIFCloseL(handle)


def read_to(src: str, local: str) -> None:
    """The object `src` read whole into the new local file `local`; not-found when there is no such object."""
    with open(local, "xb") as fh:
        stream(src, fh.write)


def sha256(src: str) -> str:
    """The SHA-256 of the object `src`'s bytes, streamed."""
    import hashlib

    h = hashlib.sha256()
    stream(src, h.update)
    return h.hexdigest()


def download_dataset(src: str, dst: str) -> list[str]:
    """The dataset whose main object is `src`, with its side files, read into `dst`'s directory under `dst`'s name
    (a tool that changes a dataset in object storage works on this copy, which its worker then uploads in place of
    the objects: raster_edit, raster_overviews). The local files written, the main one first."""
    from pathlib import Path

    from gdal_mcp.sandbox.datasets import DatasetFiles

    found = describe([src]).get(src)
    if found is None:
        raise GdalMcpError("not-found", f"{shown(src)} does not exist; list_datasets shows what the workspace holds")
    paths = [f["path"] for f in found["files"]]
    dataset = DatasetFiles(main=Path(paths[0].rsplit("/", 1)[-1]), files=tuple(Path(p.rsplit("/", 1)[-1]) for p in paths))
    written = []
    for path, (_, name) in zip(paths, dataset.renamed(Path(os.path.basename(dst))), strict=True):
        local = os.path.join(os.path.dirname(dst), name)
        read_to(path, local)
        written.append(local)
    return written


def check_versions(expected: Sequence[Sequence[str]]) -> None:
    """conflict unless every (/vsis3/ path, ETag) of `expected` is there in that version (an ETag "" : absent)."""
    listings: dict[str, dict[str, dict[str, Any]]] = {}
    for path, etag in expected:
        folder, _, name = path.rpartition("/")
        listing = listings.get(folder)
        if listing is None:
            listing = listings[folder] = folder_listing(folder)
        now = listing.get(name, {}).get("etag", "")
        if now != etag:
            what = "was deleted" if not now else "was created" if not etag else "was changed"
            raise GdalMcpError(
                "conflict",
                f"{shown(path)} {what} after it was described to the person (or while the job ran); nothing was changed. "
                "Look at it again (list_datasets) and repeat the call if it is still wanted",
            )


def delete(objects: Sequence[Sequence[str]], progress: Progress = no_progress) -> list[str]:
    """Delete the (/vsis3/ path, ETag) `objects` (a dataset: its main object first, so a failure part-way leaves side
    files without a dataset rather than a dataset without its side files), each only in the version given: checked
    again just before, and the request itself conditional (If-Match). conflict, with nothing deleted, when one changed;
    the paths deleted."""
    check_versions(objects)
    lib = _lib()
    gone: list[str] = []
    try:
        for i, (path, version) in enumerate(objects):
            lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", f'If-Match: "{version}"'.encode())
            lib.CPLErrorReset()
            if lib.VSIUnlink(path.encode()) != 0:
                lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)
                done = f" ({', '.join(shown(p) for p in gone)} already went)" if gone else ""
                raise GdalMcpError(
                    "conflict" if etag(path) != version else "gdal-error",
                    f"deleting {shown(path)} failed{done}: {gdal_c.last_error(lib) or 'refused'}; it changed meanwhile, or "
                    "this server may not delete it",
                )
            gone.append(path)
            progress((i + 1) / len(objects), "deleted")
    finally:
        lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)
    return gone


def etag(path: str) -> str:
    """The ETag of the object at the /vsis3/ `path` now ("" when there is none), from a fresh listing of its folder."""
    folder, _, name = path.rpartition("/")
    return str(folder_listing(folder).get(name, {}).get("etag", ""))
