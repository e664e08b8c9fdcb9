"""Bounding boxes, for every engine: checking [minx, miny, maxx, maxy] and transforming it to another CRS."""

from __future__ import annotations

import math
from typing import Any

from gdal_mcp.errors import GdalMcpError


def check_bbox(bbox: Any) -> tuple[float, float, float, float]:
    """Four finite numbers with minx < maxx and miny < maxy."""
    try:
        values = tuple(float(v) for v in bbox)
    except (TypeError, ValueError):
        values = ()
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        raise GdalMcpError("invalid-argument", "bbox must be four finite numbers [minx, miny, maxx, maxy]")
    minx, miny, maxx, maxy = values
    if not (minx < maxx and miny < maxy):
        raise GdalMcpError(
            "invalid-argument",
            "bbox must be [minx, miny, maxx, maxy] with minx < maxx and miny < maxy"
            " (a box crossing the antimeridian must be split)",
        )
    return minx, miny, maxx, maxy


def transform_bbox(
    box: tuple[float, float, float, float], src_crs: Any, dst_crs: Any, *, target: str = "layer"
) -> tuple[float, float, float, float]:
    """The box (in src_crs) as a box in dst_crs, edges densified (21 points each); CRSs as geometry_transform
    takes them. A box PROJ cannot place is an invalid-argument naming `target`."""
    from gdal_mcp.engine.geometry_transform import transformer

    trans = transformer(src_crs, dst_crs)
    if trans is None:
        return box
    try:
        out = trans.transform_bounds(*box, densify_pts=21)
    except Exception as e:  # noqa: BLE001 - PROJ refuses boxes outside the projection's domain
        raise GdalMcpError("invalid-argument", f"bbox cannot be transformed to the {target}'s CRS ({e})") from None
    if not all(math.isfinite(v) for v in out):
        raise GdalMcpError("invalid-argument", f"bbox cannot be transformed to the {target}'s CRS (outside its area of use)")
    return tuple(float(v) for v in out)  # type: ignore[return-value]


def bbox_in(bbox: Any, bbox_crs: Any, layer_crs: Any) -> tuple[float, float, float, float]:
    """`bbox` ([minx, miny, maxx, maxy] in bbox_crs, default the layer's) in the layer's CRS (edges densified)."""
    box = check_bbox(bbox)
    if bbox_crs is None:
        return box
    if layer_crs is None:
        raise GdalMcpError("invalid-argument", "bbox_crs given but the layer has no CRS (pass src_crs)")
    return transform_bbox(box, bbox_crs, layer_crs)
