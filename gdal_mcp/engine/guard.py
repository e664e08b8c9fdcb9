"""A hook the worker installs so engine code can refuse datasets that reach outside the workspace.

The decision itself lives in `gdal_mcp.sandbox`; the engine only reports the files GDAL opened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

_check: Callable[[Iterable[str]], None] | None = None


def install(check: Callable[[Iterable[str]], None]) -> None:
    global _check
    _check = check


def check_files(files: Iterable[str]) -> None:
    if _check is not None:
        _check(files)
