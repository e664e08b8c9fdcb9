"""The driver allow-list, applied to both bundled GDALs (rasterio's, and pyogrio's when it loads).

Every driver not in gdal_mcp.formats.ALLOWED_DRIVERS is deregistered: GDAL cannot open, nor be made to open (a VRT
source, an overview file named in an .aux.xml …), a file in that format. rasterio registers GDAL's drivers again at
every top-level Env: so their names also go into that library's own GDAL_SKIP configuration option (set in each
library, not in the environment: the two GDALs have different drivers, and a name a library lacks makes it warn),
which GDALAllRegister applies each time. `ensure()`, before every job, checks the counts anyway.
`refused_driver(path)` names the driver a refused file belongs to, for the `unsupported` error.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.abc
import importlib.machinery
import os
import re
import sys
import threading
from types import ModuleType
from typing import Any

from gdal_mcp.formats import ALLOWED_DRIVERS

c = ctypes
_lock = threading.Lock()
#: library path -> [(driver name, driver handle)] deregistered from it
_denied: dict[str, list[tuple[str, int]]] = {}
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "GDALAllRegister": (None, []),
    "GDALGetDriverCount": (c.c_int, []),
    "GDALGetDriver": (c.c_void_p, [c.c_int]),
    "GDALGetDriverShortName": (c.c_char_p, [c.c_void_p]),
    "GDALDeregisterDriver": (None, [c.c_void_p]),
    "GDALRegisterDriver": (c.c_int, [c.c_void_p]),
    "GDALIdentifyDriverEx": (c.c_void_p, [c.c_char_p, c.c_uint, c.POINTER(c.c_char_p), c.POINTER(c.c_char_p)]),
    "CPLSetConfigOption": (None, [c.c_char_p, c.c_char_p]),
    "CPLGetConfigOption": (c.c_char_p, [c.c_char_p, c.c_char_p]),
    # network statistics and the remote cache, in both GDALs (remote_io.py)
    "VSINetworkStatsReset": (None, []),
    "VSINetworkStatsGetAsSerializedJSON": (c.c_void_p, [c.c_void_p]),
    "VSIFree": (None, [c.c_void_p]),
    "VSICurlClearCache": (None, []),
    # credentials of one bucket (credentials.load_profiles)
    "VSISetPathSpecificOption": (None, [c.c_char_p, c.c_char_p, c.c_char_p]),
}
#: (path prefix, option, value) set in every bundled GDAL as it is restricted (set_path_options)
_path_options: list[tuple[str, str, str]] = []


def set_path_options(options: list[tuple[str, str, str]]) -> None:
    """Options of some paths only (a bucket's credentials), for both GDALs: before `restrict()`, which sets them in
    rasterio's GDAL and, when it loads, pyogrio's."""
    _path_options[:] = options


@functools.lru_cache(maxsize=4)
def _declared(path: str) -> Any:
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _bundled(module: ModuleType) -> str | None:
    """The libgdal bundled in a wheel (rasterio.libs/, pyogrio.libs/, or .dylibs on macOS)."""
    root = os.path.dirname(module.__file__ or "")
    for pattern in (root + ".libs/libgdal*", os.path.join(root, ".dylibs", "libgdal*")):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


#: library path -> how many drivers it has registered once restricted
_counts: dict[str, int] = {}


def restrict_library(path: str, *, register: bool = True) -> list[str]:
    """Register every driver of the libgdal at `path` (unless `register` is False), then deregister those not
    allowed. Returns the names deregistered now."""
    with _lock:
        lib = _declared(path)
        if register:
            lib.GDALAllRegister()
        names: list[str] = []
        denied = _denied.setdefault(path, [])
        for i in reversed(range(lib.GDALGetDriverCount())):
            handle = lib.GDALGetDriver(i)
            name = (lib.GDALGetDriverShortName(handle) or b"").decode()
            if name and name not in ALLOWED_DRIVERS:
                lib.GDALDeregisterDriver(handle)
                if all(h != handle for _, h in denied):
                    denied.append((name, handle))
                names.append(name)
        skip = [n for n in (lib.CPLGetConfigOption(b"GDAL_SKIP", b"") or b"").decode().split(",") if n]
        lib.CPLSetConfigOption(b"GDAL_SKIP", ",".join(dict.fromkeys([*skip, *(n for n, _ in denied)])).encode())
        _counts[path] = lib.GDALGetDriverCount()
        for prefix, option, value in _path_options:
            lib.VSISetPathSpecificOption(prefix.encode(), option.encode(), value.encode())
        return names


def ensure() -> None:
    """Before a job: a library whose driver count grew since it was restricted (something registered drivers
    again) is restricted again."""
    for path, count in list(_counts.items()):
        if _declared(path).GDALGetDriverCount() != count:
            restrict_library(path, register=False)


def restrict() -> None:
    """Apply the allow-list to rasterio's GDAL now and to pyogrio's when it is imported (it loads on a worker's
    first vector job)."""
    import rasterio

    path = _bundled(rasterio)
    if path is not None:
        restrict_library(path)
    if "pyogrio" in sys.modules:
        _restrict_pyogrio()
    elif not any(isinstance(f, _AfterPyogrio) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterPyogrio())


def _restrict_pyogrio() -> None:
    import pyogrio

    path = _bundled(pyogrio)
    if path is not None and path not in _denied:
        restrict_library(path)


class _AfterPyogrio(importlib.abc.MetaPathFinder):
    """Applies the allow-list to pyogrio's GDAL as soon as `import pyogrio` has registered its drivers."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != "pyogrio":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _restrict_pyogrio()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def refused_driver(path: str) -> str | None:
    """The name of a deregistered driver that recognises the file at `path` (None: none does). Briefly registers
    the refused drivers again to ask them: call it only when no job runs GDAL in this process."""
    with _lock:
        for lib_path in _denied:
            lib = _declared(lib_path)
            if lib.GDALIdentifyDriverEx(path.encode(), 0, None, None):
                return None  # an allowed driver recognises it: the failure was another one
        for lib_path, denied in _denied.items():
            if not denied:
                continue
            lib = _declared(lib_path)
            for _, handle in denied:
                lib.GDALRegisterDriver(handle)
            try:
                names = (c.c_char_p * (len(denied) + 1))(*[n.encode() for n, _ in denied], None)
                found = lib.GDALIdentifyDriverEx(path.encode(), 0, names, None)
                if found:
                    return str(lib.GDALGetDriverShortName(found).decode())
            finally:
                for _, handle in denied:
                    lib.GDALDeregisterDriver(handle)
    return None


#: drivers whose datasets name other files or URLs inside them (sources, tiles, overlays): the server checks those
#: names for workspace files (sandbox/references.py) but cannot for a remote dataset, so a remote one is refused
REFERENCING_DRIVERS = frozenset({"VRT", "OGR_VRT", "MRF", "GTI", "KML", "LIBKML", "STACIT", "STACTA", "WMS", "WMTS", "XYZ"})


def identified(path: str) -> str | None:
    """The short name of the driver GDAL picks for `path`, or None: asked of both bundled GDALs (rasterio's has the
    raster drivers, pyogrio's the vector ones such as OGR_VRT), every allowed driver."""
    import importlib

    for name in ("rasterio", "pyogrio"):  # pyogrio (a second GDAL, ~90 MB) loaded only when rasterio's knows nothing
        lib_path = _bundled(importlib.import_module(name))
        if lib_path is None:
            continue
        if lib_path not in _counts:
            restrict_library(lib_path)  # pyogrio's GDAL, loaded now: its allow-list first
        lib = _declared(lib_path)
        with _lock:
            found = lib.GDALIdentifyDriverEx(path.encode(), 0, None, None)
            if found:
                return str(lib.GDALGetDriverShortName(found).decode())
    return None


#: a dataset name ending in ':<band number>'
BAND_SUFFIX = re.compile(r"^(.+):(\d+)$")


def refuse_remote_references(paths: list[str]) -> None:
    """out-of-root for a remote dataset in a format that names other files or URLs inside it (an OGR VRT object in a
    bucket could name any key the server's credentials reach, or a local file the worker may read)."""
    from gdal_mcp.errors import GdalMcpError
    from gdal_mcp.sandbox.remote import is_remote

    for path in paths:
        if not (is_remote(path) or path.startswith(("/vsizip//vsi", "/vsitar//vsi", "/vsigzip//vsi"))):
            continue
        # 'x.tif:2' names band 2 of x.tif when x.tif opens (engine/raster/calc.split_band): then x.tif is what GDAL
        # opens, and asking for a key 'x.tif:2' would cost requests (and load pyogrio's GDAL) for nothing
        band = BAND_SUFFIX.match(path)
        name = identified(band.group(1)) if band else None
        if name is None:
            name = identified(path)
        if name in REFERENCING_DRIVERS:
            raise GdalMcpError(
                "out-of-root",
                f"{path.split('?', 1)[0]} is a remote {name} dataset, which names other files inside it; this server "
                "reads such datasets only from the workspace (copy its sources there, or give them directly)",
            )
