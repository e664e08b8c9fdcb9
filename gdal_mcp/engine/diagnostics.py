"""Facts about the worker itself: versions and the limits it runs under."""

from __future__ import annotations

import os
import resource
from typing import Any

from gdal_mcp.engine.progress import Progress, no_progress


def worker_status(progress: Progress = no_progress) -> dict[str, Any]:
    """pid, address-space limit, GDAL cache size and library versions of this worker."""
    import pyogrio
    import pyproj
    import rasterio

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return {
        "pid": os.getpid(),
        "memory_limit": None if soft == resource.RLIM_INFINITY else soft,
        "gdal_cachemax": os.environ.get("GDAL_CACHEMAX"),
        "vrt_python": os.environ.get("GDAL_VRT_ENABLE_PYTHON"),
        "gdal": rasterio.__gdal_version__,
        "gdal_vector": pyogrio.__gdal_version_string__,
        "proj": pyproj.proj_version_str,
    }


def probe_access(
    read: list[str], connect: list[tuple[str, int]], write: list[str] | None = None, progress: Progress = no_progress
) -> dict[str, Any]:
    """Try to read each file, write each file and connect to each (host, port) *directly*, bypassing every check of
    the server: what the kernel lets this worker do (the confinement self-test; SECURITY.md). Never returns what
    it read, only whether it could; a file it could create is removed again."""
    import socket

    out: dict[str, Any] = {"read": {}, "write": {}, "connect": {}}
    for path in read:
        try:
            with open(path, "rb") as fh:
                fh.read(1)
            out["read"][path] = "allowed"
        except OSError as e:
            out["read"][path] = e.strerror or str(e)
    for path in write or []:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.remove(path)
            out["write"][path] = "allowed"
        except OSError as e:
            out["write"][path] = e.strerror or str(e)
    for host, port in connect:
        try:
            with socket.create_connection((host, port), timeout=2):
                pass
            out["connect"][f"{host}:{port}"] = "allowed"
        except OSError as e:
            out["connect"][f"{host}:{port}"] = e.strerror or str(e)
    return out
