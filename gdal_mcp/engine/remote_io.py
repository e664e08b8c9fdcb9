"""What a job read from remote locations: GDAL's own network statistics (CPL_VSIL_NETWORK_STATS_ENABLED, set by the
worker when the operator allows remote data), per job, in both bundled GDALs (rasterio's, and pyogrio's once loaded).

`reset()` before a job, `totals()` after it (and while it runs, for the byte budget), `clear_cache()` after it so a
job never reads another job's cached bytes of an object that may have changed since.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

from gdal_mcp.models import RemoteReads

#: what Python's HTTP clients fetched for this job (stac_io.py): [requests, bytes]; GDAL counts its own
_python = [0, 0]
#: the job's byte budget (--max-remote-bytes), set by the worker around each job (None: no limit)
_budget: list[int | None] = [None]


def count_request() -> None:
    _python[0] += 1


def count_bytes(n: int) -> None:
    _python[1] += n


def set_budget(limit: int | None) -> None:
    _budget[0] = limit


def over_budget() -> bool:
    """Whether the job has fetched more than its budget, counting Python's reads and GDAL's."""
    limit = _budget[0]
    if not limit:
        return False
    figures = totals()
    return figures is not None and figures.bytes > limit


def enabled() -> bool:
    return os.environ.get("CPL_VSIL_NETWORK_STATS_ENABLED", "").upper() == "YES"


def _libraries() -> list[Any]:
    """The bundled GDALs loaded in this process (pyogrio's only once a vector job has imported it)."""
    from gdal_mcp.engine.drivers import _bundled, _declared

    libs = []
    for name in ("rasterio", "pyogrio"):
        module = sys.modules.get(name)
        path = _bundled(module) if module is not None else None
        if path is not None:
            libs.append(_declared(path))
    return libs


def reset() -> None:
    _python[0] = _python[1] = 0
    if enabled():
        for lib in _libraries():
            lib.VSINetworkStatsReset()


def clear_cache() -> None:
    if enabled():
        for lib in _libraries():
            lib.VSICurlClearCache()


def totals() -> RemoteReads | None:
    """Requests and bytes downloaded since the last reset, over every remote file and both GDALs; None when nothing
    was requested (or remote data is not allowed)."""
    return since(None)


#: what this process has fetched so far: (requests, bytes, {file: bytes downloaded from it})
Reading = tuple[int, int, dict[str, int]]


def reading() -> Reading | None:
    """This process's counts now (since the last reset), for `since` (None where remote data is not allowed). A Dask
    worker never resets them (its threads run several tasks at once): its jobs and tiles count by difference."""
    if not enabled():
        return None
    requests, downloaded = _python
    files: dict[str, int] = {"<python>": _python[1]} if _python[0] else {}
    for lib in _libraries():
        ptr = lib.VSINetworkStatsGetAsSerializedJSON(None)
        if not ptr:
            continue
        try:
            stats = json.loads(ctypes.string_at(ptr).decode("utf-8", "replace"))
        except ValueError:
            stats = {}
        finally:
            lib.VSIFree(ptr)
        for method in (stats.get("methods") or {}).values():
            requests += int(method.get("count", 0))
            downloaded += int(method.get("downloaded_bytes", 0))
        for handler in (stats.get("handlers") or {}).values():
            for name, per_file in (handler.get("files") or {}).items():
                got = int(((per_file.get("methods") or {}).get("GET") or {}).get("downloaded_bytes", 0))
                if got:
                    files[name] = files.get(name, 0) + got
    return requests, downloaded, files


def since(before: Reading | None) -> RemoteReads | None:
    """What this process fetched after `before` (a `reading()`; None: since the last reset); None when nothing."""
    now = reading()
    if now is None:
        return None
    requests, downloaded, files = now
    if before is not None:
        requests, downloaded = requests - before[0], downloaded - before[1]
        files = {name: n for name, n in files.items() if n > before[2].get(name, 0)}
    if requests <= 0:
        return None
    return RemoteReads(requests=requests, bytes=max(0, downloaded), files=len(files))
