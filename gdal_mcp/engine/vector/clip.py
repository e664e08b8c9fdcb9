"""Clipping a vector layer by a box, a GeoJSON geometry or the polygons of a vector file (ogr2ogr -clipsrc).

The mask is reprojected to the layer's CRS (edges densified). Features are read with a bbox prefilter on
the mask's extent; each batch is cut with vectorised shapely (features wholly inside are kept untouched,
the others intersected). Attributes are kept, features left with nothing are dropped, and, as ogr2ogr
does with -clipsrc, only the parts of a feature's own dimension are kept (a polygon touching the mask along
an edge is dropped, not turned into a line). An empty result is written with a warning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gdal_mcp.engine.crs import parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.features.masks import check_choice, check_owners, mask_polygons
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.geomtypes import GeomType, keep_dimension
from gdal_mcp.engine.vector.layer_map import layer_meta, promotion_note, transform_layer
from gdal_mcp.engine.vector.stream import vector_driver
from gdal_mcp.engine.vector.units import layer_bounds
from gdal_mcp.models import VectorSummary


def _intersection(geoms: np.ndarray, mask: Any, counts: dict[str, int], record: bool) -> np.ndarray:
    """geoms ∩ mask; an input GEOS refuses (invalid) is made valid first."""
    import shapely
    import shapely.errors

    try:
        return shapely.intersection(geoms, mask)
    except shapely.errors.GEOSException:
        out = np.empty(len(geoms), dtype=object)
        for i, g in enumerate(geoms):
            try:
                out[i] = shapely.intersection(g, mask)
            except shapely.errors.GEOSException:
                counts["repaired"] += int(record)
                out[i] = shapely.intersection(shapely.make_valid(g), mask)
        return out


def _fmt_bounds(b: tuple[float, float, float, float] | np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.6g}" if abs(v) < 1e5 else f"{v:.1f}" for v in b) + "]"


@wrap_gdal_errors
def clip(
    src: str,
    dst: str,
    *,
    layer: str | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    geometry: dict | None = None,
    geometry_crs: str | None = None,
    mask: str | None = None,
    mask_layer: str | None = None,
    mask_where: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Clip the features of `src` to a bbox, a GeoJSON geometry or the polygons of a vector file, writing `dst`.

    bbox is in bbox_crs (default the layer's CRS); geometry is GeoJSON in geometry_crs (default EPSG:4326);
    mask is a vector file (mask_layer, mask_where) in its own CRS. The output keeps the input's geometry type,
    promoted to Multi (with a warning) when cutting splits features and the format insists on one type.
    """
    import shapely

    kind = check_choice(bbox, geometry, mask)
    check_owners(kind, bbox_crs=bbox_crs, geometry_crs=geometry_crs, mask_layer=mask_layer, mask_where=mask_where)
    driver = vector_driver(dst, format)
    name, crs_text, declared = layer_meta(src, layer)
    layer_crs = parse_crs(crs_text, "layer CRS") if crs_text else None
    warnings: list[str] = []
    if layer_crs is None and (kind == "mask" or (kind == "geometry" and geometry_crs is None)):
        warnings.append(f"layer '{name}' has no CRS: the {kind} coordinates were taken as the layer's own")
    polygons, _ = mask_polygons(
        target_crs=layer_crs,
        target="layer",
        bbox=bbox,
        bbox_crs=bbox_crs,
        geometry=geometry,
        geometry_crs=geometry_crs,
        mask=mask,
        mask_layer=mask_layer,
        mask_where=mask_where,
    )
    region = shapely.union_all(polygons)
    shapely.prepare(region)
    minx, miny, maxx, maxy = (float(v) for v in region.bounds)
    prefilter = (minx, miny, maxx, maxy)
    counts = {"touching": 0, "repaired": 0, "cut": 0, "inside": 0}

    def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
        out = np.full(len(geoms), None, dtype=object)
        present = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
        hit = present & shapely.intersects(region, geoms)
        inside = hit & shapely.contains_properly(region, geoms)
        out[inside] = geoms[inside]
        cross = hit & ~inside
        if cross.any():
            cut = _intersection(geoms[cross], region, counts, record)
            ids = shapely.get_type_id(geoms[cross])
            dims = np.where(ids == 7, -1, shapely.get_dimensions(geoms[cross]))  # a collection keeps every part
            kept, lost = keep_dimension(cut, dims)
            out[cross] = kept
            if record:
                counts["touching"] += lost
                counts["cut"] += int(cross.sum()) - lost
        if record:
            counts["inside"] += int(inside.sum())
        return out

    out_type = GeomType(declared.dim, declared.multi, declared.z)
    result = transform_layer(
        src,
        dst,
        layer=name,
        driver=driver,
        output_layer=output_layer,
        crs=crs_text,
        declared=declared,
        out=out_type,
        op=op,
        drop_missing=True,
        split=declared.dim is not None and declared.dim > 0,
        progress=progress,
        verb="clipped",
        bbox=prefilter,
        state=(counts,),
    )
    warnings += promotion_note(declared, result)
    if counts["touching"]:
        warnings.append(
            f"{counts['touching']} feature(s) only touched the clip region (along its edge or at a point) "
            "and were left out, as ogr2ogr -clipsrc does"
        )
    if counts["repaired"]:
        warnings.append(
            f"{counts['repaired']} invalid geometries were made valid (make_valid) before cutting; "
            "run validate on the input to see them"
        )
    if result.summary.feature_count == 0:
        try:
            extent = _fmt_bounds(layer_bounds(src, name))
        except Exception:  # noqa: BLE001 - only for the message
            extent = "(unknown)"
        warnings.append(
            f"no feature of layer '{name}' intersects the {kind}: the output has 0 features. The layer "
            f"covers {extent} and the {kind} {_fmt_bounds(prefilter)} (minx, miny, maxx, maxy, in the "
            "layer's CRS); check the coordinates and their CRS"
        )
    return result.summary, warnings
