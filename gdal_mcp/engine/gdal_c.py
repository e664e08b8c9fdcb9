"""GDAL's C API through ctypes, on the GDAL library rasterio is linked to (its wheel's bundled libgdal).

For the few GDAL algorithms rasterio does not expose: GDALComputeProximity (raster_proximity),
GDALContourGenerateEx (raster_contour), GDALBuildOverviews without levels or on a read-only dataset
(raster_overviews delete / external). One loader that checks it found the same GDAL as rasterio's, one table of
the signatures used, and the helpers every caller needs: open a dataset, a string list, the last error, a progress
callback a cancel can stop. Never the system's GDAL bindings (no `osgeo`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
from collections.abc import Callable
from typing import Any

import rasterio

from gdal_mcp.errors import GdalMcpError

c = ctypes
#: GDALProgressFunc: int (*)(double complete, const char *message, void *arg)
ProgressFunc = c.CFUNCTYPE(c.c_int, c.c_double, c.c_char_p, c.c_void_p)
_CHARPP = c.POINTER(c.c_char_p)


class DirEntry(c.Structure):
    """GDAL's VSIDIREntry (cpl_vsi.h): what VSIGetNextDirEntry gives (catalog.list_remote)."""

    _fields_ = [
        ("pszName", c.c_char_p),
        ("nMode", c.c_int),
        ("nSize", c.c_uint64),
        ("nMTime", c.c_int64),
        ("bModeKnown", c.c_char),
        ("bSizeKnown", c.c_char),
        ("bMTimeKnown", c.c_char),
        ("papszExtra", c.c_void_p),
    ]


#: name -> (restype, argtypes) of every function called
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "GDALVersionInfo": (c.c_char_p, [c.c_char_p]),
    "GDALOpenEx": (c.c_void_p, [c.c_char_p, c.c_uint, c.c_void_p, c.c_void_p, c.c_void_p]),
    "GDALClose": (c.c_int, [c.c_void_p]),
    "GDALGetRasterBand": (c.c_void_p, [c.c_void_p, c.c_int]),
    "GDALGetDriverByName": (c.c_void_p, [c.c_char_p]),
    "GDALCreate": (c.c_void_p, [c.c_void_p, c.c_char_p, c.c_int, c.c_int, c.c_int, c.c_int, c.c_void_p]),
    "GDALBuildOverviews": (c.c_int, [c.c_void_p, c.c_char_p, c.c_int, c.c_void_p, c.c_int, c.c_void_p, c.c_void_p, c.c_void_p]),
    "GDALComputeProximity": (c.c_int, [c.c_void_p, c.c_void_p, _CHARPP, ProgressFunc, c.c_void_p]),
    "GDALContourGenerateEx": (c.c_int, [c.c_void_p, c.c_void_p, _CHARPP, ProgressFunc, c.c_void_p]),
    "GDALDatasetCreateLayer": (c.c_void_p, [c.c_void_p, c.c_char_p, c.c_void_p, c.c_int, _CHARPP]),
    "GDALDatasetStartTransaction": (c.c_int, [c.c_void_p, c.c_int]),
    "GDALDatasetCommitTransaction": (c.c_int, [c.c_void_p]),
    "OGR_Fld_Create": (c.c_void_p, [c.c_char_p, c.c_int]),
    "OGR_Fld_Destroy": (None, [c.c_void_p]),
    "OGR_L_CreateField": (c.c_int, [c.c_void_p, c.c_void_p, c.c_int]),
    "CPLErrorReset": (None, []),
    "CPLGetLastErrorMsg": (c.c_char_p, []),
    # a dataset's grid (raster_pipeline reads the lazy dataset a GDAL pipeline builds: engine/raster/pipeline.py)
    "GDALGetRasterXSize": (c.c_int, [c.c_void_p]),
    "GDALGetRasterYSize": (c.c_int, [c.c_void_p]),
    "GDALGetRasterCount": (c.c_int, [c.c_void_p]),
    "GDALGetGeoTransform": (c.c_int, [c.c_void_p, c.POINTER(c.c_double)]),
    "GDALGetProjectionRef": (c.c_char_p, [c.c_void_p]),
    "GDALGetRasterDataType": (c.c_int, [c.c_void_p]),
    "GDALGetDataTypeName": (c.c_char_p, [c.c_int]),
    "GDALGetRasterNoDataValue": (c.c_double, [c.c_void_p, c.POINTER(c.c_int)]),
    "GDALGetRasterColorInterpretation": (c.c_int, [c.c_void_p]),
    # a 64-bit integer band's nodata, exactly (rasterio sets it through a double: output.declare_wide_nodata)
    "GDALSetRasterNoDataValueAsInt64": (c.c_int, [c.c_void_p, c.c_int64]),
    "GDALSetRasterNoDataValueAsUInt64": (c.c_int, [c.c_void_p, c.c_uint64]),
    "GDALGetRasterNoDataValueAsInt64": (c.c_int64, [c.c_void_p, c.POINTER(c.c_int)]),
    "GDALGetRasterNoDataValueAsUInt64": (c.c_uint64, [c.c_void_p, c.POINTER(c.c_int)]),
    # objects in storage: uploads and reads (upload.py), bucket listings (catalog.list_remote)
    "VSIFOpenL": (c.c_void_p, [c.c_char_p, c.c_char_p]),
    "VSIFWriteL": (c.c_size_t, [c.c_void_p, c.c_size_t, c.c_size_t, c.c_void_p]),
    "VSIFReadL": (c.c_size_t, [c.c_void_p, c.c_size_t, c.c_size_t, c.c_void_p]),
    "VSIFSeekL": (c.c_int, [c.c_void_p, c.c_uint64, c.c_int]),
    "VSIFTellL": (c.c_uint64, [c.c_void_p]),
    "VSIFCloseL": (c.c_int, [c.c_void_p]),
    "VSIUnlink": (c.c_int, [c.c_char_p]),
    "VSIStatL": (c.c_int, [c.c_char_p, c.c_void_p]),
    "VSICurlPartialClearCache": (None, [c.c_char_p]),
    "CPLSetThreadLocalConfigOption": (None, [c.c_char_p, c.c_char_p]),
    "VSIGetFileMetadata": (c.c_void_p, [c.c_char_p, c.c_char_p, c.c_void_p]),
    "CSLDestroy": (None, [c.c_void_p]),
    "VSIOpenDir": (c.c_void_p, [c.c_char_p, c.c_int, c.c_void_p]),
    "VSIGetNextDirEntry": (c.POINTER(DirEntry), [c.c_void_p]),
    "VSICloseDir": (None, [c.c_void_p]),
}

GDAL_OF_READONLY, GDAL_OF_UPDATE, GDAL_OF_RASTER = 0x00, 0x01, 0x02


@functools.lru_cache(maxsize=1)
def libgdal() -> Any:
    """The GDAL library rasterio is linked to, its functions declared; None when it cannot be found."""
    root = os.path.dirname(rasterio.__file__)
    patterns = [
        os.path.join(root + ".libs", "libgdal*"),
        os.path.join(root, ".dylibs", "libgdal*"),
        os.path.join(root + ".libs", "gdal*.dll"),
        os.path.join(root, "gdal*.dll"),
    ]
    candidates = [p for pat in patterns for p in sorted(glob.glob(pat))]
    if not candidates and (found := ctypes.util.find_library("gdal")):
        candidates = [found]
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            lib.GDALVersionInfo.restype = c.c_char_p
            lib.GDALVersionInfo.argtypes = [c.c_char_p]
            if lib.GDALVersionInfo(b"RELEASE_NAME").decode() != rasterio.__gdal_version__:
                continue  # another GDAL than rasterio's: its datasets and drivers are not rasterio's
            for name, (restype, argtypes) in _SIGNATURES.items():
                function = getattr(lib, name)
                function.restype = restype
                function.argtypes = argtypes
        except (OSError, AttributeError):
            continue
        return lib
    return None


def list_files(path: str, *, recursive: bool, limit: int) -> list[tuple[str, int, int, dict[str, str]]] | None:
    """The files below the VSI directory `path` (a bucket prefix: /vsis3/…), as (name relative to it, size, mtime,
    GDAL's extras such as {"ETag": …}), directories left out, at most `limit`; None when it cannot be listed."""
    import stat

    lib = require("VSIOpenDir")
    handle = lib.VSIOpenDir(path.encode(), -1 if recursive else 0, None)
    if not handle:
        return None
    found: list[tuple[str, int, int, dict[str, str]]] = []
    try:
        while len(found) < limit:
            entry = lib.VSIGetNextDirEntry(handle)
            if not entry:
                break
            e = entry.contents
            name = (e.pszName or b"").decode("utf-8", "replace")
            if not name or (e.bModeKnown and stat.S_ISDIR(e.nMode)):
                continue
            extra = c.cast(e.papszExtra, _CHARPP)
            extras: dict[str, str] = {}
            i = 0
            while extra and extra[i]:
                key, _, value = extra[i].decode("utf-8", "replace").partition("=")
                extras[key] = value
                i += 1
            found.append((name, int(e.nSize) if e.bSizeKnown else 0, int(e.nMTime) if e.bMTimeKnown else 0, extras))
    finally:
        lib.VSICloseDir(handle)
    return found


def file_metadata(path: str, domain: str) -> dict[str, str]:
    """VSIGetFileMetadata: a remote object's metadata in `domain` ("HEADERS": the HTTP headers of a HEAD), {} when
    there is none."""
    lib = require("VSIGetFileMetadata")
    raw = lib.VSIGetFileMetadata(path.encode(), domain.encode(), None)
    if not raw:
        return {}
    try:
        items = c.cast(raw, _CHARPP)
        out: dict[str, str] = {}
        i = 0
        while items[i]:
            key, _, value = items[i].decode("utf-8", "replace").partition("=")
            out[key] = value
            i += 1
        return out
    finally:
        lib.CSLDestroy(raw)


def require(function: str) -> Any:
    """libgdal(), or `unsupported` saying which GDAL function could not be reached."""
    lib = libgdal()
    if lib is None:
        raise GdalMcpError("unsupported", f"cannot reach this rasterio's GDAL library for {function}")
    return lib


def last_error(lib: Any) -> str:
    """GDAL's last error message ("" when none)."""
    return (lib.CPLGetLastErrorMsg() or b"").decode(errors="replace")


def open_dataset(lib: Any, path: str, *, update: bool) -> Any:
    """GDALOpenEx of a raster (in update mode or read-only); gdal-error with GDAL's message when it fails."""
    handle = lib.GDALOpenEx(
        os.fsencode(path), GDAL_OF_RASTER | (GDAL_OF_UPDATE if update else GDAL_OF_READONLY), None, None, None
    )
    if not handle:
        raise GdalMcpError("gdal-error", f"GDAL cannot open {path}: {last_error(lib)}")
    return handle


def strings(values: list[str]) -> Any:
    """A NULL-terminated char** (GDAL's string lists)."""
    return (c.c_char_p * (len(values) + 1))(*[v.encode() for v in values], None)


def progress_callback(report: Callable[[float], None]) -> tuple[Any, list[BaseException]]:
    """A GDALProgressFunc calling report(fraction), and the list where it puts what report raised: a cancel raised
    by an engine's progress stops GDAL (the callback returns 0), and the caller re-raises it after the call."""
    failure: list[BaseException] = []

    def call(fraction: float, message: bytes | None, arg: Any) -> int:
        try:
            report(fraction)
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller once GDAL has stopped
            failure.append(e)
            return 0
        return 1

    return ProgressFunc(call), failure
