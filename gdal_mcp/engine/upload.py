"""Uploading a finished output to object storage: each file written whole with one conditional request, so an object
appears complete or not at all, and never replaces one that exists.

GDAL's /vsis3/ writer sends a file below its chunk size as one PUT and a larger one as a multipart upload that the
final CompleteMultipartUpload makes visible at once; with `If-None-Match: *` on these requests S3 refuses (412) to
create an object whose key exists, and the existing object stays as it was. (GDAL's VSICopyFile is not used: on a
failed upload it deletes the target, which would remove the object the condition protected.) Azure blobs (/vsiaz/)
are written by azure_blob.py with the same conditions: GDAL's /vsiaz/ writer deletes a blob its condition found.

The side files go first and the dataset's own file last; when one is refused or fails, the objects this upload
created are deleted again (they are new: the condition guaranteed it), so a failed upload leaves nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Sequence
from typing import Any

from gdal_mcp.engine import azure_blob, gdal_c, guard, objects
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.outputs import PROBE_PREFIX
from gdal_mcp.sandbox.remote import shown

CHUNK = 8 * 1024 * 1024
log = logging.getLogger("gdal_mcp.engine.upload")


def _lib() -> Any:
    return gdal_c.require("VSIFOpenL")


def upload(
    sources: Sequence[str],
    targets: Sequence[str],
    progress: Progress = no_progress,
    journal: str | None = None,
    replace: dict[str, str] | None = None,
) -> list[str]:
    """Upload each local file of `sources` to the /vsis3/ path at the same index of `targets`; returns the targets
    written. An object is never replaced but one that `replace` names ({key: ETag}: overwrite=true, the versions the
    person approved, App.object_versions), and that one only in that version (If-Match): conflict when it changed. Every
    other target is created new (If-None-Match: *): already-exists when one exists. Nothing of a failed upload stays:
    the objects it created are deleted, the side files it replaced put back. `journal`: a file that gets a line for
    each new object as soon as it is created, for whoever cleans up after a killed upload."""
    if len(sources) != len(targets):
        raise GdalMcpError("internal-error", "upload: sources and targets differ in number")
    lib = _lib()
    total = sum(_size(s) for s in sources) or 1
    done = 0
    created: list[str] = []
    replaced: list[tuple[str, str, str]] = []  # (target, its backup, the ETag of what this upload wrote)
    backups: list[str] = []
    # Every object written, and the probe beside them, lies where the worker's sandbox allows (a side file's key too)
    guard.check_files([*targets, *(f"{t.rsplit('/', 1)[0]}/{PROBE_PREFIX}" for t in targets[-1:])])
    # A stop asked for while a file is being written (a cancel, the byte budget: progress raises) takes effect once the
    # file is written whole: closing a half-written file would complete an object with part of its bytes. (A worker
    # killed meanwhile never completes it: the PUT, or the multipart's completion, is sent by the close.)
    stop: list[BaseException] = []

    def report(fraction: float, message: str = "") -> None:
        if not stop:
            try:
                progress(fraction, message)
            except BaseException as e:  # noqa: BLE001 - raised below, between files
                stop.append(e)

    current = {t: e for t, e in (replace or {}).items() if t in targets}
    if current:
        objects.check_versions(list(current.items()))  # conflict before anything is written
    try:
        if targets:
            _check_condition(lib, targets[-1])
        for i, (src, dst) in enumerate(zip(sources, targets, strict=True)):
            etag = current.get(dst, "")
            lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)  # the last file's condition is not the read's
            backup = _backup(dst, src) if etag and i < len(targets) - 1 else ""  # the main goes last: no backup
            backups += [backup] if backup else []
            try:
                done, digest = _put(lib, src, dst, done, total, report, expect=etag)
                if etag:
                    replaced.append((dst, backup, digest))
                else:
                    created.append(dst)
                    if journal is not None:
                        with open(journal, "a", encoding="utf-8") as fh:
                            fh.write(dst + "\n")
                if stop:
                    raise stop[0]
            except BaseException:
                lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)
                for made in reversed(created):  # new objects (the condition guaranteed it): nothing of this upload stays
                    if lib.VSIUnlink(made.encode()) != 0:
                        log.warning("could not delete %s after a failed upload", shown(made))
                _put_back(lib, replaced)
                raise
    finally:
        lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)
        for backup in backups:
            os.unlink(backup)
    progress(1.0, "uploaded")
    return [*created, *(t for t, _, _ in replaced)]


def _backup(path: str, beside: str) -> str:
    """A side file about to be replaced, read into a new local file beside the upload's own (for _put_back)."""
    import uuid

    local = os.path.join(os.path.dirname(beside), f".replaced-{uuid.uuid4().hex}")
    try:
        objects.read_to(path, local)
    except BaseException:
        if os.path.exists(local):
            os.unlink(local)
        raise
    return local


def _put_back(lib: Any, replaced: list[tuple[str, str, str]]) -> None:
    """After a failed replace: each side file this upload had replaced gets its old bytes back, on the condition that
    it still holds what this upload wrote (its ETag, the MD5 of a single-part upload); otherwise it is left and said."""
    for target, backup, digest in reversed(replaced):
        if not backup:
            continue
        now = objects.etag(target)
        if now != digest:
            log.error("could not put back %s after a failed replace: it changed again meanwhile", shown(target))
            continue
        try:
            _put(lib, backup, target, 0, 1, no_progress, expect=now)
        except GdalMcpError as e:
            log.error("could not put back %s after a failed replace: %s", shown(target), e.message)
        finally:
            lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)


#: object stores (their /vsis3/bucket path) seen to refuse a second conditional create, in this process
_honoured: set[str] = set()


def _check_condition(lib: Any, target: str) -> None:
    """Once per bucket and process, before the first upload there: the store must refuse to create an object that
    exists (If-None-Match: *) and to replace one in another version than named (If-Match), or an upload could replace
    an object. A probe object in the target's folder is written, written again under each condition (which must both
    fail), and deleted. unsupported when the store ignores either."""
    import uuid

    bucket = "/".join(target.split("/")[:3])
    if bucket in _honoured:
        return
    probe = f"{target.rsplit('/', 1)[0]}/{PROBE_PREFIX}{uuid.uuid4().hex}"
    if not _write(lib, probe, b"1", "If-None-Match: *"):
        raise GdalMcpError(
            "gdal-error", f"cannot write to {shown(probe.rsplit('/', 1)[0])}: {gdal_c.last_error(lib) or 'refused'}"
        )
    ignored = [
        header
        for header, data in (("If-None-Match: *", b"2"), (f'If-Match: "{"0" * 32}"', b"3"))
        if _write(lib, probe, data, header)
    ]
    lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)
    if lib.VSIUnlink(probe.encode()) != 0:  # a store that lets this worker write but not delete keeps it
        log.warning("could not delete the probe object %s", shown(probe))
    if ignored:
        raise GdalMcpError(
            "unsupported",
            f"the object store of {shown(bucket)} ignores {ignored[0].split(':')[0]}: an upload there could replace an "
            "existing object, so this server writes no output to it (nothing was written); write the output to the "
            "workspace or another allowed bucket, or ask the operator for a store that honours conditional writes",
        )
    _honoured.add(bucket)


def _write(lib: Any, path: str, data: bytes, header: str) -> bool:
    """One small object written with one PUT under `header`; whether the store took it."""
    if azure_blob.is_azure(path):
        create = header.startswith("If-None-Match")
        return azure_blob.write(path, data, create=create, expect=header.partition('"')[2].rstrip('"'))
    lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", header.encode())
    lib.CPLErrorReset()
    handle = lib.VSIFOpenL(path.encode(), b"wb")
    if not handle:
        return False
    written = lib.VSIFWriteL(data, 1, len(data), handle) == len(data)
    return bool(lib.VSIFCloseL(handle) == 0 and written)


def _size(path: str) -> int:
    return os.path.getsize(path)


def _put(lib: Any, src: str, dst: str, done: int, total: int, progress: Progress, *, expect: str = "") -> tuple[int, str]:
    """One file written to one object, new (If-None-Match: *) or only in the version `expect` (If-Match: the ETag of
    the object it replaces); (bytes done, the MD5 of what was written). Sent once (no retries): a conditional PUT sent
    again after its answer was lost is refused because of its own first success; the object carries a token of this
    write (x-amz-meta-gdalmcp-upload), so such a write is recognised as ours."""
    import uuid

    if azure_blob.is_azure(dst):  # not GDAL's writer: it deletes a blob its condition found (azure_blob.py)
        start = done

        def uploaded(n: int) -> None:
            progress(min(0.99, (start + n) / total), f"uploading {shown(dst)}")

        return start + _size(src), azure_blob.put(src, dst, expect=expect, progress=uploaded)
    token = uuid.uuid4().hex
    condition = f'If-Match: "{expect}"' if expect else "If-None-Match: *"
    lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", f"{condition}\r\n{MARK_HEADER}: {token}".encode())
    lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_MAX_RETRY", b"0")
    lib.CPLErrorReset()
    try:
        return _put_once(lib, src, dst, done, total, progress, expect=expect, token=token)
    finally:
        lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)
        lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_MAX_RETRY", None)


#: the header naming the upload that wrote an object (one random token per write)
MARK_HEADER = "x-amz-meta-gdalmcp-upload"


def _ours(path: str, token: str) -> bool:
    """Whether the object at `path` is the one the write with `token` made (its answer was lost on the way)."""
    lib = _lib()
    lib.CPLSetThreadLocalConfigOption(b"GDAL_HTTP_HEADERS", None)
    lib.VSICurlPartialClearCache(path.encode())
    headers = {k.lower(): v.strip() for k, v in gdal_c.file_metadata(path, "HEADERS").items()}
    return headers.get(MARK_HEADER) == token


def _put_once(
    lib: Any, src: str, dst: str, done: int, total: int, progress: Progress, *, expect: str, token: str
) -> tuple[int, str]:
    import hashlib

    handle = lib.VSIFOpenL(dst.encode(), b"wb")
    if not handle:
        raise GdalMcpError("gdal-error", f"cannot write {shown(dst)}: {gdal_c.last_error(lib) or 'GDAL refused to open it'}")
    ok = True
    md5 = hashlib.md5(usedforsecurity=False)
    try:
        with open(src, "rb") as fh:
            while chunk := fh.read(CHUNK):
                md5.update(chunk)
                if lib.VSIFWriteL(chunk, 1, len(chunk), handle) != len(chunk):
                    ok = False
                    break
                done += len(chunk)
                progress(min(0.99, done / total), f"uploading {shown(dst)}")
    finally:
        closed = lib.VSIFCloseL(handle) == 0  # the PUT, or the multipart's completion
    if ok and closed:
        return done, md5.hexdigest()
    error = gdal_c.last_error(lib)
    if ok and _ours(dst, token):  # written whole; only the answer was lost
        return done, md5.hexdigest()
    if expect and objects.etag(dst) != expect:  # If-Match refused: someone else wrote or deleted it since it was looked at
        raise GdalMcpError(
            "conflict",
            f"'{shown(dst)}' changed while the job ran (someone else wrote or deleted it); it was not replaced. Look at "
            "it again and repeat the call if it is still wanted",
        )
    if _exists(lib, dst):  # GDAL names the failed request, not its status: a 412 leaves an object at the key
        raise GdalMcpError(
            "already-exists",
            f"output '{shown(dst)}' already exists (or was being written by someone else); nothing was written. "
            "Choose another key, or pass overwrite=true to replace it",
        )
    raise GdalMcpError("gdal-error", f"uploading {shown(dst)} failed: {error or 'GDAL gave no reason'}")


def _exists(lib: Any, path: str) -> bool:
    lib.VSICurlPartialClearCache(path.encode())
    buffer = ctypes.create_string_buffer(512)  # a VSIStatBufL (struct stat64)
    return bool(lib.VSIStatL(path.encode(), buffer) == 0)


def read_object(path: str, offset: int = 0, length: int = 8 * 1024 * 1024, progress: Progress = no_progress) -> tuple[int, bytes]:
    """(the object's size, `length` bytes of it from `offset`) of a /vsis3/ object: resources/read and downloads of a
    bucket workspace. not-found when there is no such object."""
    lib = _lib()
    handle = lib.VSIFOpenL(path.encode(), b"rb")
    if not handle:
        raise GdalMcpError("not-found", f"{shown(path)} does not exist; list_datasets shows what the workspace holds")
    try:
        lib.VSIFSeekL(handle, 0, 2)  # SEEK_END: the size (from the open's HEAD)
        size = int(lib.VSIFTellL(handle))
        lib.VSIFSeekL(handle, max(0, offset), 0)
        want = max(0, min(length, size - offset))
        buffer = ctypes.create_string_buffer(want)
        got = lib.VSIFReadL(buffer, 1, want, handle) if want else 0
    finally:
        lib.VSIFCloseL(handle)
    progress(1.0, "read")
    return size, buffer.raw[:got]


def delete_objects(objects: Sequence[str], progress: Progress = no_progress) -> int:
    """Delete the /vsis3/ `objects` (those an upload killed midway had created: new ones, the condition
    guaranteed it); how many went. Missing ones are skipped."""
    lib = _lib()
    gone = 0
    for i, path in enumerate(objects):
        if _exists(lib, path):
            if lib.VSIUnlink(path.encode()) == 0:
                gone += 1
            else:
                log.warning("could not delete %s, left by an upload that was stopped", shown(path))
        progress((i + 1) / max(1, len(objects)), "deleting")
    return gone
