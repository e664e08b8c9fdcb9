"""Turning GDAL's exceptions into GdalMcpError at the engine boundary, with GDAL's own message."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from gdal_mcp.errors import GdalMcpError

F = TypeVar("F", bound=Callable[..., Any])
GDAL_MODULES = ("rasterio", "pyogrio", "fiona", "pyproj")


def gdal_message(exc: BaseException) -> str:
    """The message of `exc` and its causes (rasterio chains GDAL's error as 'See previous exception')."""
    texts: list[str] = []
    e: BaseException | None = exc
    while e is not None and len(texts) < 4:
        t = str(e).strip().replace(" See previous exception for details.", "")
        if t and t not in texts:
            texts.append(t)
        e = e.__cause__ or e.__context__
    return ": ".join(texts) or type(exc).__name__


def translate(exc: BaseException) -> GdalMcpError | None:
    """GdalMcpError for a GDAL-stack or memory failure; None for anything else (a bug)."""
    if isinstance(exc, GdalMcpError):
        return exc
    if isinstance(exc, MemoryError):
        return GdalMcpError("resource-limit", "the job ran out of memory (worker limit --max-memory); "
                            "work on a smaller area or raise the limit")
    if (type(exc).__module__ or "").startswith(GDAL_MODULES):
        text = gdal_message(exc)
        low = text.lower()
        if "out of memory" in low or "cannot allocate" in low:
            return GdalMcpError("resource-limit", f"GDAL ran out of memory: {text}")
        return GdalMcpError("gdal-error", text)
    return None


def wrap_gdal_errors(func: F) -> F:
    """Decorate an engine function so GDAL failures leave it as GdalMcpError."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            mapped = translate(exc)
            if mapped is None or mapped is exc:
                raise
            raise mapped from exc

    return wrapper  # type: ignore[return-value]
