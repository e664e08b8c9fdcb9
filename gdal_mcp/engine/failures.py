"""Turning GDAL's exceptions into GdalMcpError at the engine boundary, with GDAL's own message."""

from __future__ import annotations

import ast
import errno
import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gdal_mcp.config import format_size
from gdal_mcp.errors import GdalMcpError

GDAL_MODULES = ("rasterio", "pyogrio", "fiona", "pyproj")
# Libraries whose messages may report a failed allocation or write (GEOS through shapely, Arrow).
NATIVE_MODULES = (*GDAL_MODULES, "shapely", "pyarrow")
OUT_OF_MEMORY_TEXTS = ("out of memory", "cannot allocate", "bad_alloc", "memory allocation failed", "unable to allocate")
DISK_FULL_TEXTS = {
    "no space left on device": "No space left on device",
    "database or disk is full": "No space left on device",
    "free disk space available is": "No space left on device",
    "disk quota exceeded": "Disk quota exceeded",
}
FILE_TOO_LARGE_TEXTS = ("file too large",)
# What GDAL drivers say when a write fails without saying why (libtiff prints the errno to stderr only).
WRITE_FAILURE_TEXTS = (
    "write error",
    "write failed",
    "could not write",
    "cannot write",
    "failed to write",
    "error while writing",
    "i/o failure",
    "i/o error",
    "fwrite",
    "short write",
)
NEARLY_FULL_BYTES = 1024 * 1024


def memory_limit_text() -> str | None:
    """This worker's address-space limit as the option that sets it ('--max-memory 4G'); None: no limit."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else f"--max-memory {format_size(soft)}"


def out_of_memory(exc: BaseException) -> GdalMcpError | None:
    """resource-limit naming the limit, for a failed allocation in numpy, Arrow, GDAL or GEOS."""
    from_native = (type(exc).__module__ or "").startswith(NATIVE_MODULES) or (
        isinstance(exc, GdalMcpError) and exc.code == "gdal-error"
    )
    text = gdal_message(exc) if not isinstance(exc, GdalMcpError) else exc.message
    if not isinstance(exc, MemoryError) and not (from_native and any(t in text.lower() for t in OUT_OF_MEMORY_TEXTS)):
        return None
    detail = f" ({text})" if text and text != type(exc).__name__ else ""
    limit = memory_limit_text()
    if limit is None:
        return GdalMcpError(
            "resource-limit",
            f"the job ran out of memory: the machine has none left to give "
            f"(no --max-memory limit is set){detail}; work on a smaller area",
        )
    return GdalMcpError(
        "resource-limit",
        f"the job needs more memory than the worker memory limit {limit} "
        f"allows{detail}; work on a smaller area or start the server with a larger --max-memory",
    )


def _nearly_full(path: str) -> bool:
    """Whether the file system holding `path` has (almost) no space or no inodes left."""
    try:
        st = os.statvfs(Path(path).parent)
    except OSError:
        return False
    root = hasattr(os, "geteuid") and os.geteuid() == 0  # root may use the blocks reserved for it
    free = (st.f_bfree if root else st.f_bavail) * st.f_frsize
    inodes = st.f_ffree if root else st.f_favail
    return free < NEARLY_FULL_BYTES or (st.f_files > 0 and inodes == 0)


def _file_size_limit() -> int | None:
    """RLIMIT_FSIZE (ulimit -f) in bytes; None when unlimited. Python ignores SIGXFSZ, so a write over it
    fails with EFBIG, which GDAL reports only as a write error."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def _reached(dst: str, size: int) -> bool:
    """Whether the output (or a staging file or sidecar named after it) has grown to `size` bytes."""
    p = Path(dst)
    try:
        return any(f.name.startswith(p.name) and f.stat().st_size >= size for f in p.parent.iterdir())
    except OSError:
        return False


def disk_full(exc: BaseException, dst: str | None = None) -> GdalMcpError | None:
    """resource-limit for a write that failed because the disk (or the file-size limit) is full.

    GDAL often reports only 'Write error' (libtiff prints the errno to stderr); then a file system with
    no space left, checked while the partial output still exists, is the cause. Call before removing it.
    """
    code = exc.errno if isinstance(exc, OSError) else None
    if isinstance(exc, GdalMcpError):
        text = exc.message if exc.code == "gdal-error" else ""
    elif isinstance(exc, OSError) or (type(exc).__module__ or "").startswith(NATIVE_MODULES):
        text = gdal_message(exc)
    else:
        return None
    low = text.lower()
    where = f"writing {dst}" if dst else "writing the output"
    write_failed = bool(dst) and any(t in low for t in WRITE_FAILURE_TEXTS)
    size_limit = _file_size_limit()
    if (
        code == errno.EFBIG
        or any(t in low for t in FILE_TOO_LARGE_TEXTS)
        or (write_failed and dst and size_limit is not None and _reached(dst, size_limit))
    ):
        limit = f", the file-size limit ulimit -f is {format_size(size_limit)}" if size_limit is not None else ""
        return GdalMcpError(
            "resource-limit",
            f"the output reached the largest file size allowed (File too large"
            f"{limit}) while {where}; write a smaller output, or raise that limit",
        )
    cause = next((c for t, c in DISK_FULL_TEXTS.items() if t in low), None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        cause = os.strerror(code)
    if cause is None and write_failed and dst and _nearly_full(dst):
        cause = "No space left on device"
    if cause is None:
        return None
    detail = f" (the error: {text})" if text else ""
    return GdalMcpError("resource-limit", f"the disk is full ({cause}) while {where}; free space or write elsewhere{detail}")


# Python reprs that libraries put in their messages: bytes (pyogrio names a layer "'b'roads''") and objects.
_BYTES_REPR = re.compile(r"(?<!\w)b('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
_OBJECT_REPR = re.compile(r"<(?:[\w.]+\.)?(\w+) object at 0x[0-9a-fA-F]+>")


def _decoded(m: re.Match[str]) -> str:
    try:
        return bytes(ast.literal_eval("b" + m.group(1))).decode("utf-8", "replace")
    except (ValueError, SyntaxError):
        return m.group(1)[1:-1]


def plain_text(text: str) -> str:
    """A library's message without Python reprs: a bytes literal (b'roads') becomes its text (roads), an object
    (<pyogrio._io.X object at 0x7f…>) its type name. Messages are read by a model, not a Python prompt."""
    return _OBJECT_REPR.sub(lambda m: m.group(1), _BYTES_REPR.sub(_decoded, text))


def gdal_message(exc: BaseException) -> str:
    """The message of `exc` and its causes (rasterio chains GDAL's error as 'See previous exception'), as plain text."""
    texts: list[str] = []
    e: BaseException | None = exc
    while e is not None and len(texts) < 4:
        t = plain_text(str(e).strip().replace(" See previous exception for details.", ""))
        if t and t not in texts:
            texts.append(t)
        e = e.__cause__ or e.__context__
    return ": ".join(texts) or type(exc).__name__


def translate(exc: BaseException, dst: str | None = None) -> GdalMcpError | None:
    """GdalMcpError for a GDAL-stack, memory or disk failure; None for anything else (a bug).

    `dst` is the file the job writes, if any: a write error is then checked against its disk.
    """
    if isinstance(exc, GdalMcpError) and exc.code != "gdal-error":
        return exc
    resource = out_of_memory(exc) or disk_full(exc, dst)
    if resource is not None:
        return resource
    if isinstance(exc, GdalMcpError):
        return remote_missing(exc.message) or exc
    if (type(exc).__module__ or "").startswith(GDAL_MODULES):
        message = gdal_message(exc)
        return remote_missing(message) or GdalMcpError("gdal-error", message)
    if isinstance(exc, UnicodeDecodeError):
        # Text read from the file (a CRS name, a field name or value) that is not valid in its encoding.
        return GdalMcpError("gdal-error", f"the file holds text that is not valid {exc.encoding}: {exc}")
    if type(exc).__name__ == "GEOSException" and type(exc).__module__ == "shapely.errors":
        # GEOS refusing what GDAL read (a ring that does not close …): the input's geometry is corrupt.
        return GdalMcpError("gdal-error", f"invalid geometry in the data: {gdal_message(exc)}")
    return None


def remote_missing(message: str) -> GdalMcpError | None:
    """not-found for GDAL's report of a remote 404 (it opens /vsicurl/, /vsis3/ … and says the HTTP status)."""
    # GDAL's own words when it listed the folder (object storage) and the name is not there
    listed = r"'/vsi(s3|gs|az|adls|oss|swift|curl)/[^']*' does not exist in the file system"
    http = r"HTTP (response )?code:? ?404|HTTP error code ?: ?404|ObjectNotFound|NoSuchKey|NoSuchBucket"
    if re.search(f"{http}|{listed}", message):
        return GdalMcpError(
            "not-found", f"{message} (nothing at that remote location: check the URL, or list_datasets the s3:// prefix)"
        )
    return None


def wrap_gdal_errors[F: Callable[..., Any]](func: F) -> F:
    """Decorate an engine function so GDAL failures leave it as GdalMcpError."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            dst = kwargs.get("dst")
            mapped = translate(exc, dst if isinstance(dst, str) else None)
            if mapped is None or mapped is exc:
                raise
            raise mapped from exc

    return wrapper  # type: ignore[return-value]


# END
