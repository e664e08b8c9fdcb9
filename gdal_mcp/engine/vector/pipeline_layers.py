"""What a `gdal vector pipeline` holds after some of its steps: its layer's name, CRS, geometry type, fields, count.

A prefix of the pipeline (read and the first k steps) is run with a streamed output (`write --of stream`): GDAL
builds the steps' layers without reading the data, and the one layer is described through OGR's C API on the GDAL
that runs the pipeline (pyogrio's, see engine/algorithms.py). The feature count is GDAL's when it knows it without
reading (OGR_L_GetFeatureCount(force=0)); otherwise `count` reads the prefix once (the caller decides when).
"""

from __future__ import annotations

import ctypes as c
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gdal_mcp.errors import GdalMcpError


class _Envelope(c.Structure):
    _fields_ = [("MinX", c.c_double), ("MaxX", c.c_double), ("MinY", c.c_double), ("MaxY", c.c_double)]


_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "GDALDatasetGetLayerCount": (c.c_int, [c.c_void_p]),
    "GDALDatasetGetLayer": (c.c_void_p, [c.c_void_p, c.c_int]),
    "OGR_L_GetName": (c.c_char_p, [c.c_void_p]),
    "OGR_L_GetGeomType": (c.c_uint, [c.c_void_p]),
    "OGR_L_GetSpatialRef": (c.c_void_p, [c.c_void_p]),
    "OGR_L_GetLayerDefn": (c.c_void_p, [c.c_void_p]),
    "OGR_L_GetFeatureCount": (c.c_longlong, [c.c_void_p, c.c_int]),
    "OGR_L_ResetReading": (None, [c.c_void_p]),
    "OGR_L_GetNextFeature": (c.c_void_p, [c.c_void_p]),
    "OGR_F_GetGeometryRef": (c.c_void_p, [c.c_void_p]),
    "OGR_F_Destroy": (None, [c.c_void_p]),
    "OGR_G_GetEnvelope": (None, [c.c_void_p, c.POINTER(_Envelope)]),
    "OGR_G_IsEmpty": (c.c_int, [c.c_void_p]),
    "OGR_FD_GetFieldCount": (c.c_int, [c.c_void_p]),
    "OGR_FD_GetGeomFieldCount": (c.c_int, [c.c_void_p]),
    "OGR_FD_GetGeomFieldDefn": (c.c_void_p, [c.c_void_p, c.c_int]),
    "OGR_GFld_GetNameRef": (c.c_char_p, [c.c_void_p]),
    "OGR_FD_GetFieldDefn": (c.c_void_p, [c.c_void_p, c.c_int]),
    "OGR_Fld_GetNameRef": (c.c_char_p, [c.c_void_p]),
    "OGR_Fld_GetType": (c.c_int, [c.c_void_p]),
    "OGR_Fld_GetSubType": (c.c_int, [c.c_void_p]),
    "OGR_GetFieldTypeName": (c.c_char_p, [c.c_int]),
    "OGR_GetFieldSubTypeName": (c.c_char_p, [c.c_int]),
    "OGRGeometryTypeToName": (c.c_char_p, [c.c_uint]),
    "OSRGetAuthorityName": (c.c_char_p, [c.c_void_p, c.c_char_p]),
    "OSRGetAuthorityCode": (c.c_char_p, [c.c_void_p, c.c_char_p]),
    "OSRExportToWktEx": (c.c_int, [c.c_void_p, c.POINTER(c.c_void_p), c.c_void_p]),
    "VSIFree": (None, [c.c_void_p]),
}
OFST_NONE = 0


@functools.lru_cache(maxsize=4)
def declared(lib: Any) -> Any:
    """`lib` with the OGR functions used here declared (once per library object)."""
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


@dataclass
class LayerState:
    """The pipeline's layer after a step."""

    name: str
    crs: str | None  # "EPSG:n" when GDAL identifies a code, else WKT2; None without a CRS
    geometry_type: str | None  # pyogrio's names (Polygon, MultiPolygon, Point Z …); None: no geometry
    fields: list[tuple[str, str, str | None]] = field(default_factory=list)  # (name, OGR type, OGR subtype or None)
    fast_count: int | None = None  # GDAL's count when it needs no reading
    geometry_fields: list[str] = field(default_factory=list)  # their names ("" for a shapefile's)


def _geometry_type(lib: Any, code: int) -> str | None:
    from pyogrio._geometry import GEOMETRY_TYPES

    if code in GEOMETRY_TYPES:
        return GEOMETRY_TYPES[code]
    if 1000 < code < 1008 and code - 1000 in GEOMETRY_TYPES:  # ISO Z codes
        return f"{GEOMETRY_TYPES[code - 1000]} Z"
    return (lib.OGRGeometryTypeToName(code) or b"Unknown").decode()


def _crs(lib: Any, srs: int | None) -> str | None:
    """EPSG:n when the layer's CRS is that code (the drivers identify what they read), else its WKT2."""
    if not srs:
        return None
    auth, code = lib.OSRGetAuthorityName(srs, None), lib.OSRGetAuthorityCode(srs, None)
    if auth and code and auth.decode().upper() == "EPSG":
        return f"EPSG:{code.decode()}"
    out = c.c_void_p()
    options = (c.c_char_p * 2)(b"FORMAT=WKT2_2019", None)
    lib.OSRExportToWktEx(srs, c.byref(out), c.cast(options, c.c_void_p))
    try:
        return (c.cast(out, c.c_char_p).value or b"").decode(errors="replace") or None
    finally:
        if out.value:
            lib.VSIFree(out)


def only_layer(lib: Any, dataset: int | None, where: str) -> int:
    """The one layer of a pipeline's streamed dataset."""
    lib = declared(lib)
    count = lib.GDALDatasetGetLayerCount(dataset) if dataset else 0
    if count != 1:
        raise GdalMcpError("gdal-error", f"{where}: the pipeline holds {count} layers here, not one")
    return int(lib.GDALDatasetGetLayer(dataset, 0))


def describe(lib: Any, layer: int) -> LayerState:
    """Name, CRS, geometry type, fields and (when GDAL knows it without reading) the feature count of a layer."""
    lib = declared(lib)
    defn = lib.OGR_L_GetLayerDefn(layer)
    fields = []
    for i in range(lib.OGR_FD_GetFieldCount(defn)):
        fd = lib.OGR_FD_GetFieldDefn(defn, i)
        sub = lib.OGR_Fld_GetSubType(fd)
        fields.append(
            (
                (lib.OGR_Fld_GetNameRef(fd) or b"").decode(errors="replace"),
                (lib.OGR_GetFieldTypeName(lib.OGR_Fld_GetType(fd)) or b"").decode(),
                (lib.OGR_GetFieldSubTypeName(sub) or b"").decode() if sub != OFST_NONE else None,
            )
        )
    fast = lib.OGR_L_GetFeatureCount(layer, 0)
    geometry_fields = [
        (lib.OGR_GFld_GetNameRef(lib.OGR_FD_GetGeomFieldDefn(defn, i)) or b"").decode(errors="replace")
        for i in range(lib.OGR_FD_GetGeomFieldCount(defn))
    ]
    return LayerState(
        name=(lib.OGR_L_GetName(layer) or b"").decode(errors="replace"),
        crs=_crs(lib, lib.OGR_L_GetSpatialRef(layer)),
        geometry_type=_geometry_type(lib, int(lib.OGR_L_GetGeomType(layer))),
        fields=fields,
        fast_count=int(fast) if fast >= 0 else None,
        geometry_fields=geometry_fields,
    )


def count(lib: Any, layer: int) -> int:
    """The layer's feature count, reading it through when GDAL does not know it."""
    lib = declared(lib)
    n = int(lib.OGR_L_GetFeatureCount(layer, 1))
    if n < 0:
        raise GdalMcpError("gdal-error", "GDAL could not count the features of the pipeline")
    return n


def extent(lib: Any, layer: int, check: Callable[[], None] | None = None) -> tuple[float, float, float, float]:
    """The extent of the layer's geometries, read feature by feature (a pipeline layer's GetExtent may be the
    source's, transformed, not that of the features it yields). NaNs when it has no geometry. `check` is called
    every 10000 features (a cancel raised there stops the reading)."""
    lib = declared(lib)
    env = _Envelope()
    minx = miny = float("inf")
    maxx = maxy = float("-inf")
    lib.OGR_L_ResetReading(layer)
    n = 0
    while feature := lib.OGR_L_GetNextFeature(layer):
        try:
            geom = lib.OGR_F_GetGeometryRef(feature)
            if geom and not lib.OGR_G_IsEmpty(geom):
                lib.OGR_G_GetEnvelope(geom, c.byref(env))
                minx, miny = min(minx, env.MinX), min(miny, env.MinY)
                maxx, maxy = max(maxx, env.MaxX), max(maxy, env.MaxY)
        finally:
            lib.OGR_F_Destroy(feature)
        n += 1
        if check is not None and n % 10000 == 0:
            check()
    lib.OGR_L_ResetReading(layer)
    if minx > maxx:
        nan = float("nan")
        return nan, nan, nan, nan
    return minx, miny, maxx, maxy
