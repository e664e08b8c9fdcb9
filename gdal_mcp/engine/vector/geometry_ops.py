"""One-layer geometry transforms (vector_geometry), attributes kept, streamed in batches (GEOS via shapely 2).

- centroid / point_on_surface: a Point per feature (point_on_surface is always inside the polygon);
- convex_hull / envelope: a Polygon per feature; a hull or box that is not an area (a single point, points or
  a line on one straight line) is written as a null geometry and counted;
- boundary: polygons -> their rings as (Multi)LineStrings, lines -> their end points (MultiPoint);
- explode: one feature per part of multi-part geometries (ogr2ogr -explodecollections), attributes repeated;
- make_valid: invalid geometries repaired (shapely.make_valid, the "structure" method), keeping the parts of the
  original dimension; valid ones unchanged (vector_validate reports what was wrong);
- set_precision: coordinates snapped to a grid of `grid_size` layer units (GEOS set_precision keeps polygons
  valid); a geometry that collapses (smaller than the grid) is written as a null geometry and counted.

All work is planar in the layer's coordinates, as GEOS/ogr2ogr do: on a lon/lat layer a centroid is the centroid
in degrees (vector_measure gives centroids computed in a local projection).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.convert import explode as explode_parts
from gdal_mcp.engine.vector.geomtypes import GeomType, keep_dimension
from gdal_mcp.engine.vector.layer_map import (
    LAYER_OPTIONS,
    layer_meta,
    promotion_note,
    share,
    transform_layer,
    write_guarded,
)
from gdal_mcp.engine.vector.stream import (
    geometries,
    output_layer_name,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    with_geometries,
    write_layer,
)
from gdal_mcp.engine.vector.validate import repair
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

OPERATIONS = ("centroid", "point_on_surface", "convex_hull", "envelope", "boundary", "explode", "make_valid", "set_precision")


@wrap_gdal_errors
def geometry_op(
    src: str,
    dst: str,
    *,
    operation: str,
    grid_size: float | None = None,
    layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Apply `operation` (see the module docstring) to every feature of a layer into a new layer of `dst`."""
    import shapely

    if operation not in OPERATIONS:
        raise GdalMcpError("invalid-argument", f"operation must be one of {', '.join(OPERATIONS)} (got {operation!r})")
    if operation == "set_precision":
        if grid_size is None or not np.isfinite(grid_size) or grid_size <= 0:
            raise GdalMcpError(
                "invalid-argument",
                "set_precision needs grid_size > 0, in the layer's units (e.g. "
                "0.000001 degrees on EPSG:4326, about 0.1 m; 0.01 m on a metric CRS)",
            )
    elif grid_size is not None:
        raise GdalMcpError("invalid-argument", "grid_size applies to operation='set_precision' only")
    driver = vector_driver(dst, format)
    name, crs, declared = layer_meta(src, layer)
    if operation == "explode":
        return _explode(src, dst, name, crs, declared, driver, output_layer, progress)
    counts = {"nulled": 0, "repaired": 0, "lost": 0}
    z = declared.z

    def nulls(out: np.ndarray, geoms: np.ndarray, bad: np.ndarray, record: bool) -> np.ndarray:
        bad = bad & ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
        if record:
            counts["nulled"] += int(bad.sum())
        out = np.asarray(out, dtype=object).copy()
        out[bad] = None
        return out

    split = False
    check_types = False
    if operation in ("centroid", "point_on_surface"):
        fn = shapely.centroid if operation == "centroid" else shapely.point_on_surface
        out_type = GeomType(0, False, False)

        def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
            out = np.asarray(fn(geoms), dtype=object)
            out[shapely.is_empty(out)] = None
            return out
    elif operation in ("convex_hull", "envelope"):
        fn = shapely.convex_hull if operation == "convex_hull" else shapely.envelope
        out_type = GeomType(2, False, False)

        def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
            out = np.asarray(fn(geoms), dtype=object)
            return nulls(out, geoms, shapely.get_type_id(out) != 3, record)
    elif operation == "boundary":
        if declared.dim == 0:
            raise GdalMcpError(
                "invalid-argument",
                f"layer '{name}' holds points, which have no boundary; boundary "
                "applies to polygons (rings) and lines (end points)",
            )
        out_type = GeomType(None if declared.dim is None else declared.dim - 1, declared.dim == 1, z)
        split = True
        check_types = declared.dim == 2

        def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
            out = np.asarray(shapely.boundary(geoms), dtype=object)
            out[shapely.is_empty(out)] = None
            return out
    elif operation == "make_valid":
        out_type = declared
        split = True
        check_types = True

        def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
            out, invalid, lost = repair(geoms)
            if record:
                counts["repaired"] += int(invalid.sum())
                counts["lost"] += lost
            return out
    else:  # set_precision
        out_type = declared
        split = True
        check_types = True
        size = float(grid_size or 0)

        def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
            out = np.asarray(shapely.set_precision(geoms, size), dtype=object)
            dims = np.where(shapely.get_type_id(geoms) == 7, -1, shapely.get_dimensions(geoms))
            kept, _ = keep_dimension(out, dims)
            return nulls(kept, geoms, shapely.is_missing(kept) | shapely.is_empty(kept), record)

    result = transform_layer(
        src,
        dst,
        layer=name,
        driver=driver,
        output_layer=output_layer,
        crs=crs,
        declared=declared,
        out=out_type,
        op=op,
        drop_missing=False,
        split=split,
        progress=progress,
        verb=operation.replace("_", " "),
        check_types=check_types,
        state=(counts,),
    )
    warnings = promotion_note(declared, result) if check_types else list(result.notes)
    if counts["nulled"]:
        what = {
            "convex_hull": "a convex hull that is not an area (points or lines on one line)",
            "envelope": "a bounding box that is not an area (a point, or a straight horizontal/vertical line)",
            "set_precision": f"nothing left on the grid of {grid_size} (smaller than the grid)",
        }.get(operation, "")
        warnings.append(f"{counts['nulled']} feature(s) have {what}: written with a null geometry")
    if counts["repaired"]:
        warnings.append(
            f"{counts['repaired']} invalid geometries were repaired (make_valid), keeping the parts of their dimension"
        )
    if counts["lost"]:
        warnings.append(
            f"{counts['lost']} invalid geometries collapsed entirely (nothing of their dimension left) "
            "and were written with a null geometry"
        )
    if operation == "centroid" and _geographic(crs):
        warnings.append(
            "centroids computed in degrees on a lon/lat layer, as GEOS does (planar); for centroids "
            "computed on the ground use vector_measure measures=['centroid']"
        )
    return result.summary, warnings


def _geographic(crs_text: str | None) -> bool:
    from gdal_mcp.engine.vector.units import _horizontal

    crs = _horizontal(crs_text)
    return bool(crs is not None and crs.is_geographic)


def _explode(
    src: str, dst: str, name: str, crs: str | None, declared: GeomType, driver: str, output_layer: str | None, progress: Progress
) -> tuple[VectorSummary, list[str]]:
    out_name = output_layer_name(dst, output_layer)
    out_type = GeomType(declared.dim, False, declared.z)
    facts: dict[str, Any] = {"rows": 0, "out": 0}

    def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
        geoms = geometries(batch)
        rows, parts = explode_parts(geoms)
        facts["rows"] += batch.num_rows
        facts["out"] += len(rows)
        if len(rows) != batch.num_rows:
            batch = batch.take(pa.array(rows))
        return with_geometries(batch, parts)

    def write() -> None:
        with read_layer(src, layer=name) as stream:
            write_layer(
                dst,
                stream.schema,
                relay(stream.batches, stream.total, share(progress, 0, 0.98), "exploded", transform),
                driver=driver,
                layer=out_name,
                crs=crs,
                geometry_type=out_type.name,
                layer_options=LAYER_OPTIONS.get(driver),
            )

    write_guarded(dst, write)
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    warnings = [f"{facts['rows']} feature(s) became {facts['out']} (one per part)"]
    return summary, warnings
