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
