"""watershed: the catchment of each pour point, snapped to the highest accumulation within a distance, as polygons
(one feature per pour point, its whole catchment) or a raster of basin ids (nested catchments split: each cell gets
the id of the first pour point downstream of it)."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.hydrology.flow import Conditioning, InputType, Routing, route
from gdal_mcp.engine.hydrology.grid import Dem, ground_distance, timings, write_array
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import summarize
from gdal_mcp.engine.raster.region import points_in_raster_crs
from gdal_mcp.engine.vector.stream import output_layer_name, summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import Basin, WatershedOutput

OutputKind = Literal["polygons", "raster"]
MAX_POINTS = 100  # each catchment is one pass over the grid and one polygonization of its extent
WKB = {b"ARROW:extension:name": b"geoarrow.wkb"}


def ground_distances(dem: Dem, x: float, y: float, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Ground distance from (x, y) to each of (xs, ys), all in the DEM's CRS (grid.ground_distance)."""
    return ground_distance(dem, x, y, xs, ys)


def snap(dem: Dem, cells: np.ndarray, x: float, y: float, distance: float, index: int) -> tuple[int, int, float]:
    """(row, col, metres moved) of the cell with the highest accumulation (`cells`) whose centre lies within `distance`
    metres of (x, y); ties to the nearer cell, then the first in row order. distance 0: the cell containing the point."""
    t = dem.transform
    h, w = dem.shape
    col_f, row_f = ~t @ (x, y)
    r0, c0 = math.floor(row_f), math.floor(col_f)
    if not (0 <= r0 < h and 0 <= c0 < w):
        raise GdalMcpError(
            "invalid-argument",
            f"pour point {index + 1} ({x:g}, {y:g} in the DEM's CRS) lies outside the DEM; give points inside it (and "
            "points_crs when they are in another CRS)",
        )
    if distance <= 0:
        if not dem.valid[r0, c0]:
            raise GdalMcpError(
                "invalid-argument", f"pour point {index + 1} falls on a nodata cell; move it or give snap_distance (metres)"
            )
        cx, cy = t @ (c0 + 0.5, r0 + 0.5)
        return r0, c0, float(ground_distances(dem, x, y, np.array([cx]), np.array([cy]))[0])
    step_row = float(np.min(dem.dist[[2, 6]]))  # north-south step
    step_col = float(np.min(dem.dist[[0, 4]]))  # east-west step (the narrowest row's on lon/lat)
    dr, dc = math.ceil(distance / step_row) + 1, math.ceil(distance / step_col) + 1
    if (2 * dr + 1) * (2 * dc + 1) > 25_000_000:
        raise GdalMcpError("invalid-argument", f"snap_distance {distance:g} m spans too many cells; give a smaller one")
    rows = np.arange(max(0, r0 - dr), min(h, r0 + dr + 1))
    cols = np.arange(max(0, c0 - dc), min(w, c0 + dc + 1))
    grid_r, grid_c = np.meshgrid(rows, cols, indexing="ij")
    rr, cc = grid_r.ravel(), grid_c.ravel()
    xs, ys = t @ (cc + 0.5, rr + 0.5)
    d = ground_distances(dem, x, y, np.asarray(xs), np.asarray(ys))
    ok = (d <= distance) & dem.valid[rr, cc]
    if not ok.any():
        raise GdalMcpError(
            "invalid-argument",
            f"no valid cell centre lies within snap_distance={distance:g} m of pour point {index + 1}; give a larger "
            "snap_distance or move the point",
        )
    rr, cc, d = rr[ok], cc[ok], d[ok]
    best = np.lexsort((np.arange(d.size), d, -cells[rr, cc]))[0]
    return int(rr[best]), int(cc[best]), float(d[best])


def _polygons(mask: np.ndarray, dem: Dem) -> Any:
    """The cells of `mask` as one (Multi)Polygon in the DEM's CRS."""
    import rasterio.features
    import shapely
    from affine import Affine

    rows, cols = np.nonzero(mask)
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    sub = mask[r0:r1, c0:c1].astype(np.uint8)
    transform = dem.transform @ Affine.translation(c0, r0)
    parts = [shapely.geometry.shape(g) for g, v in rasterio.features.shapes(sub, mask=sub.astype(bool), transform=transform) if v]
    geom = shapely.union_all(parts)
    return shapely.multipolygons(shapely.get_parts(geom)) if geom.geom_type != "MultiPolygon" else geom


def _write_polygons(
    dst: str, dem: Dem, masks: list[np.ndarray], basins: list[Basin], fmt: str | None, output_layer: str | None
) -> Any:
    import shapely

    driver = vector_driver(dst, fmt)
    geoms = [shapely.to_wkb(_polygons(m, dem)) for m in masks]
    table = pa.table(
        {
            "id": pa.array([b.id for b in basins], pa.int32()),
            "x": pa.array([b.x for b in basins], pa.float64()),
            "y": pa.array([b.y for b in basins], pa.float64()),
            "snapped_x": pa.array([b.snapped_x for b in basins], pa.float64()),
            "snapped_y": pa.array([b.snapped_y for b in basins], pa.float64()),
            "moved_m": pa.array([b.moved_m for b in basins], pa.float64()),
            "cells": pa.array([b.snapped_cells for b in basins], pa.int64()),
            "area_m2": pa.array([b.area_m2 for b in basins], pa.float64()),
            "area_km2": pa.array([b.area_km2 for b in basins], pa.float64()),
            "geometry": pa.array(geoms, pa.binary()),
        }
    )
    schema = table.schema.set(table.schema.get_field_index("geometry"), pa.field("geometry", pa.binary(), metadata=WKB))
    table = table.cast(schema)
    layer = output_layer_name(dst, output_layer)
    crs = dem.crs.to_wkt() if dem.crs is not None and dem.crs.to_wkt() else None
    write_layer(dst, schema, iter(table.to_batches()), driver=driver, layer=layer, crs=crs, geometry_type="MultiPolygon")
    return summarize_vector(dst, layer)


#: a pour point's neighbourhood looked at for a stream it may have missed: this many cells' width around it
NEAR_CELLS = 5
#: ... and a cell there draining this many times more (and at least MIN_STREAM cells) is a stream it missed
MISSED_RATIO, MIN_STREAM = 10, 100


def catchments(
    routing: Routing,
    points: list[tuple[float, float]],
    given: list[tuple[float, float]],
    snap_distance: float,
    notes: list[str] | None = None,
) -> tuple[list[Basin], list[np.ndarray], list[int]]:
    """The basins of the pour points (in the DEM's CRS; `given` as the caller gave them), their cell masks and the
    snapped cells' linear indices. A point that lands beside a stream (a cell within NEAR_CELLS cells draining
    MISSED_RATIO times more) is said in `notes`, with the snap_distance that would reach it."""
    from pyflwdir import basins as pyflwdir_basins

    dem = routing.dem
    cells = routing.accumulation("cells")
    area = routing.accumulation("m2") if dem.areas is not None else None
    flw = routing.flw
    out: list[Basin] = []
    masks: list[np.ndarray] = []
    idxs: list[int] = []
    h, w = dem.shape
    for i, ((x, y), (gx, gy)) in enumerate(zip(points, given, strict=True)):
        filled = np.nan_to_num(cells, nan=-1.0)
        r, c, moved = snap(dem, filled, x, y, snap_distance, i)
        near = NEAR_CELLS * float(max(np.max(dem.dist[[0, 4]]), np.max(dem.dist[[2, 6]])))
        if notes is not None and snap_distance < near:
            r2, c2, d2 = snap(dem, filled, x, y, near, i)
            if cells[r2, c2] >= max(MIN_STREAM, MISSED_RATIO * cells[r, c]):
                notes.append(
                    f"pour point {i + 1} drains only {int(cells[r, c])} cell(s): a cell {d2:.0f} m away drains "
                    f"{int(cells[r2, c2])}. If the point is meant to be on that stream, give snap_distance={math.ceil(d2)} "
                    "(metres) or more"
                )
        idx = r * w + c
        ids = pyflwdir_basins.basins(flw.idxs_ds, np.array([idx], dtype=flw.idxs_ds.dtype), flw.idxs_seq, None)
        mask = ids.reshape(h, w) == 1
        sx, sy = dem.transform @ (c + 0.5, r + 0.5)
        a = None if area is None else float(area[r, c])
        out.append(
            Basin(
                id=i + 1,
                x=gx,
                y=gy,
                snapped_x=float(sx),
                snapped_y=float(sy),
                moved_m=moved,
                snapped_cells=int(cells[r, c]),
                area_m2=a,
                area_km2=None if a is None else a / 1e6,
            )
        )
        masks.append(mask)
        idxs.append(idx)
    return out, masks, idxs


@wrap_gdal_errors
def watershed(
    src: str,
    dst: str,
    *,
    points: list[tuple[float, float]],
    points_crs: str | None = None,
    snap_distance: float = 0.0,
    band: int = 1,
    input_type: InputType = "dem",
    condition: Conditioning = "fill",
    output_kind: OutputKind = "polygons",
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[WatershedOutput, list[str]]:
    """Catchments of `points` on the DEM (or D8 raster) `src`, written to `dst` as polygons or a basin-id raster."""
    if not points or len(points) > MAX_POINTS:
        raise GdalMcpError("invalid-argument", f"give 1 to {MAX_POINTS} pour points as [[x, y], …]")
    if not math.isfinite(snap_distance) or snap_distance < 0:
        raise GdalMcpError("invalid-argument", f"snap_distance must be 0 or a positive number of metres (got {snap_distance!r})")
    if output_kind not in ("polygons", "raster"):
        raise GdalMcpError("invalid-argument", f"unknown output_kind {output_kind!r}; use polygons or raster")
    with open_raster(src) as ds:
        xs, ys, _ = points_in_raster_crs(
            ds, [p[0] for p in points], [p[1] for p in points], points_crs, argument="points_crs", points="points", raster="DEM"
        )
    routing = route(src, band=band, condition_method=condition, input_type=input_type, progress=progress)
    progress(0.5, f"delineating {len(points)} catchment(s)")
    warnings = list(routing.warnings)
    basins, masks, idxs = catchments(
        routing, list(zip(xs, ys, strict=True)), [(p[0], p[1]) for p in points], snap_distance, notes=warnings
    )
    if len(set(idxs)) < len(idxs):
        warnings.append("several pour points snapped to the same cell: their catchments are the same")
    progress(0.8, "writing")
    if output_kind == "polygons":
        written: Any = _write_polygons(dst, routing.dem, masks, basins, format, output_layer)
    else:
        h, w = routing.dem.shape
        flw = routing.flw
        from pyflwdir import basins as pyflwdir_basins

        order = np.array(idxs, dtype=flw.idxs_ds.dtype)
        ids = np.arange(1, len(idxs) + 1, dtype=np.uint32)
        raster = pyflwdir_basins.basins(flw.idxs_ds, order, flw.idxs_seq, ids).reshape(h, w)
        write_array(
            dst,
            routing.dem,
            raster,
            dtype="uint32",
            nodata=0,
            format=format,
            creation_options=None,
            what="watershed",
            progress=lambda f, m="": None,
            source=src,
        )
        written = summarize(dst)
        if any(m.sum() != int((raster == b.id).sum()) for m, b in zip(masks, basins, strict=True)):
            warnings.append(
                "some catchments are nested: in the raster each cell has the id of the first pour point downstream of it, so a "
                "downstream basin's id covers only its part below the upstream pour points (the basins list gives whole areas)"
            )
    return WatershedOutput(written=written, basins=basins, compile_seconds=timings()), warnings
