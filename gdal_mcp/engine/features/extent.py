"""The extent of a dataset, raster or vector, with its CRS: what raster_pipeline's clip `like` cuts to."""

from __future__ import annotations

import math

from gdal_mcp.errors import GdalMcpError


def dataset_extent(path: str) -> tuple[tuple[float, float, float, float], str]:
    """([minx, miny, maxx, maxy], CRS as WKT or user text) of a raster's grid, or of the features of a vector file's
    only layer; invalid-argument when it has no CRS or no extent, or several layers."""
    from gdal_mcp.engine.raster.opening import open_raster

    try:
        with open_raster(path) as ds:
            if ds.crs is None or not ds.crs.to_wkt():
                raise GdalMcpError("invalid-argument", "it has no CRS, so its bounds cannot be placed; give bbox and bbox_crs")
            b = ds.bounds
            return (b.left, b.bottom, b.right, b.top), ds.crs.to_wkt()
    except GdalMcpError as e:
        if e.code != "unsupported":  # not a raster: a vector file, maybe
            raise
    import pyogrio

    from gdal_mcp.engine.vector.opening import choose_layer

    info = pyogrio.read_info(path, layer=choose_layer(path, None), force_total_bounds=True)
    bounds, crs = info.get("total_bounds"), info.get("crs")
    if bounds is None or not all(math.isfinite(v) for v in bounds) or not (bounds[0] < bounds[2] and bounds[1] < bounds[3]):
        raise GdalMcpError("invalid-argument", "it has no extent (no features, or a single point); give bbox instead")
    if not crs:
        raise GdalMcpError("invalid-argument", "it has no CRS, so its bounds cannot be placed; give bbox and bbox_crs")
    return (float(bounds[0]), float(bounds[1]), float(bounds[2]), float(bounds[3])), str(crs)
