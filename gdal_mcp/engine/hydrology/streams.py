"""stream_network: the cells whose upstream area reaches a threshold, as lines between confluences with their Strahler
order (pyflwdir's), length and upstream area; and a PNG preview of them over a hillshade of the DEM (terrain.py's
hillshade, gdaldem's formula, with ground distances per row on lon/lat)."""

from __future__ import annotations

import base64
import math

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.hydrology.flow import Conditioning, InputType, Routing, route
from gdal_mcp.engine.hydrology.grid import Dem, ground_distance, timings
from gdal_mcp.engine.hydrology.watershed import WKB
from gdal_mcp.engine.preview.png import encode_png
from gdal_mcp.engine.preview.raster import preview_shape
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.vector.stream import output_layer_name, summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import StreamsOutput

#: Most stream cells written (the lines hold one vertex per cell; a threshold of a cell or two makes nearly every cell a
#: stream, millions of segments traced one by one in Python)
MAX_STREAM_CELLS = 5_000_000
#: stream colours by Strahler order, light to dark blue (order 1 first; higher orders take the last)
ORDER_COLOURS = np.array(
    [[110, 210, 255], [40, 170, 255], [0, 120, 235], [0, 80, 200], [0, 45, 160], [20, 10, 120]], dtype=np.uint8
)


def _lengths(dem: Dem, xs: np.ndarray, ys: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Length of each polyline (vertices xs, ys; polyline k runs from starts[k] to starts[k + 1] - 1), metres:
    geodesic on lon/lat, Euclidean times the CRS's unit on a projected grid."""
    d = ground_distance(dem, xs[:-1], ys[:-1], xs[1:], ys[1:])
    seg = np.concatenate([d, [0.0]])
    ends = np.append(starts[1:], xs.size) - 1
    seg[ends] = 0.0  # no step from one polyline's last vertex to the next one's first
    return np.add.reduceat(seg, starts) if starts.size else np.zeros(0)


def _hillshade(src: str, band: int, dem: Dem) -> np.ndarray:
    """gdaldem's hillshade (315°, 45°, Horn, edges computed) of the DEM, from terrain.py."""
    from gdal_mcp.engine.raster.terrain import OUTPUT_BLOCK, WINDOW_PIXELS, LonLatGrid, TerrainTile, terrain_tile

    t = dem.transform
    grid = LonLatGrid.of(dem.crs, t) if dem.geographic else None
    params = {
        "ewres": t.a,
        "nsres": t.e,
        "z": 1.0,
        "azimuth": 315.0,
        "altitude": 45.0,
        "percent": False,
        "algorithm": "Horn",
        "hillshade_mode": "standard",
        "zero_for_flat": False,
        "trigonometric": False,
        "lonlat": grid,
        "ground": grid is not None,
    }
    with open_raster(src) as ds:
        nodata = ds.nodatavals[band - 1]
    h, w = dem.shape
    spec = TerrainTile(
        path=src,
        band=band,
        nodata=nodata,
        product="hillshade",
        params=params,
        compute_edges=True,
        dtype="uint8",
        out_nodata=0.0,
        window=(0, 0, w, h),
        window_pixels=WINDOW_PIXELS,
        block=OUTPUT_BLOCK,
    )
    return terrain_tile(spec)


def preview(
    shade: np.ndarray | None, valid: np.ndarray, max_size: int, lines: list[tuple[np.ndarray, int]], dem: Dem
) -> np.ndarray:
    """RGBA image: the hillshade in grey (nodata transparent), the streams coloured by order over it."""
    import rasterio.features
    import shapely
    from affine import Affine

    h, w = valid.shape
    width, height, factor = preview_shape(w, h, max_size)
    out_w, out_h = width * factor, height * factor
    rows = np.minimum((np.arange(out_h) + 0.5) * h / out_h, h - 1).astype(int)
    cols = np.minimum((np.arange(out_w) + 0.5) * w / out_w, w - 1).astype(int)
    rgba = np.zeros((out_h, out_w, 4), dtype=np.uint8)
    grey = shade[np.ix_(rows, cols)] if shade is not None else np.full((out_h, out_w), 200, np.uint8)
    ok = valid[np.ix_(rows, cols)]
    rgba[..., :3] = grey[..., None]
    rgba[..., 3] = np.where(ok, 255, 0)
    scale = Affine.scale(w / out_w, h / out_h)
    transform = dem.transform @ scale
    burnt = np.zeros((out_h, out_w), dtype=np.uint8)
    # higher orders drawn last, over the lower ones
    shapes = [(shapely.geometry.mapping(shapely.linestrings(line)), int(o)) for line, o in sorted(lines, key=lambda lo: lo[1])]
    if shapes:
        burnt = rasterio.features.rasterize(
            shapes, out_shape=(out_h, out_w), transform=transform, all_touched=True, dtype="uint8"
        )
    where = burnt > 0
    colours = ORDER_COLOURS[np.minimum(burnt[where], len(ORDER_COLOURS)) - 1]
    rgba[where, :3] = colours
    rgba[where, 3] = 255
    return rgba


@wrap_gdal_errors
def stream_network(
    src: str,
    dst: str,
    *,
    threshold_km2: float | None = None,
    threshold_cells: int | None = None,
    band: int = 1,
    input_type: InputType = "dem",
    condition: Conditioning = "fill",
    max_size: int = 768,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[StreamsOutput, list[str]]:
    """Streams of `src` (cells draining at least the threshold) into `dst` as lines, with a preview PNG."""
    if (threshold_km2 is None) == (threshold_cells is None):
        raise GdalMcpError(
            "invalid-argument", "give the stream threshold as threshold_km2 (upstream area) or threshold_cells, one of them"
        )
    if threshold_km2 is not None and not (math.isfinite(threshold_km2) and threshold_km2 > 0):
        raise GdalMcpError("invalid-argument", f"threshold_km2 must be a positive number (got {threshold_km2!r})")
    if threshold_cells is not None and threshold_cells < 1:
        raise GdalMcpError("invalid-argument", f"threshold_cells must be at least 1 (got {threshold_cells!r})")
    if not 16 <= max_size <= 4096:
        raise GdalMcpError("invalid-argument", f"max_size must be between 16 and 4096 (got {max_size!r})")
    driver = vector_driver(dst, format)
    routing: Routing = route(src, band=band, condition_method=condition, input_type=input_type, progress=progress)
    dem = routing.dem
    warnings = list(routing.warnings)
    progress(0.4, "accumulating flow")
    cells = routing.accumulation("cells")
    km2 = routing.accumulation("km2") if dem.areas is not None else None
    mean_cell: float | None = None
    if dem.areas is not None:
        mean_cell = float(np.mean(np.broadcast_to(dem.areas, dem.shape)[dem.valid])) / 1e6
    t_km2: float | None
    if threshold_km2 is not None:
        if km2 is None or mean_cell is None:
            raise GdalMcpError("invalid-argument", "the DEM has no CRS, so areas are unknown; give threshold_cells instead")
        mask = dem.valid & (np.nan_to_num(km2, nan=-1) >= threshold_km2)
        t_cells, t_km2 = threshold_km2 / mean_cell, threshold_km2
    else:
        assert threshold_cells is not None
        mask = dem.valid & (np.nan_to_num(cells, nan=-1) >= threshold_cells)
        t_cells, t_km2 = float(threshold_cells), (None if mean_cell is None else threshold_cells * mean_cell)
    flw = routing.flw
    from pyflwdir import streams as pyflwdir_streams

    if int(mask.sum()) > MAX_STREAM_CELLS:
        raise GdalMcpError(
            "resource-limit",
            f"{int(mask.sum()):,} cells reach the threshold (more than {MAX_STREAM_CELLS:,}): that many streams would be "
            "mostly one-cell rills and a huge file; give a larger threshold_km2 or threshold_cells",
        )
    progress(0.6, "ordering and tracing streams")
    strord = np.asarray(flw.stream_order(type="strahler", mask=mask)).reshape(dem.shape)
    paths = pyflwdir_streams.streams(flw.idxs_ds, flw.idxs_seq, mask=mask.ravel())
    paths = [p for p in paths if len(p) >= 2 and p[0] != p[1]]  # not pyflwdir's zero-length marks at outlets
    h, w = dem.shape
    t = dem.transform
    idxs_ds = np.asarray(flw.idxs_ds)
    streaming = np.flatnonzero(mask.ravel())
    moving = streaming[idxs_ds[streaming] != streaming]
    inflows = np.bincount(idxs_ds[moving], minlength=mask.size)  # stream cells flowing into each cell
    lines: list[np.ndarray] = []
    orders, ups, up_km2 = [], [], []
    for p in paths:
        r, c = np.divmod(np.asarray(p, dtype=np.int64), w)
        xs, ys = t @ (c + 0.5, r + 0.5)
        lines.append(np.column_stack([xs, ys]))
        orders.append(int(strord[r[0], c[0]]))
        # the segment's own last cell: the last vertex is the confluence below it, unless the segment ends at an
        # outlet it reached as its own cell (pyflwdir's streams: a pit without two stream cells flowing into it)
        end = int(p[-1])
        last = end if idxs_ds[end] == end and inflows[end] <= 1 else int(p[-2])
        ups.append(int(cells.flat[last]))
        up_km2.append(None if km2 is None else float(km2.flat[last]))
    if lines:
        starts = np.cumsum([0, *[len(line) for line in lines[:-1]]])
        allv = np.concatenate(lines)
        lengths = _lengths(dem, allv[:, 0], allv[:, 1], np.asarray(starts))
    else:
        lengths = np.zeros(0)
        warnings.append("no cell reaches the threshold: no streams; give a smaller threshold")
    import shapely

    table = pa.table(
        {
            "id": pa.array(range(1, len(lines) + 1), pa.int32()),
            "strahler": pa.array(orders, pa.int32()),
            "length_m": pa.array(lengths.tolist(), pa.float64()),
            "upstream_cells": pa.array(ups, pa.int64()),
            "upstream_km2": pa.array(up_km2, pa.float64()),
            "geometry": pa.array([shapely.to_wkb(shapely.linestrings(line)) for line in lines], pa.binary()),
        }
    )
    schema = table.schema.set(table.schema.get_field_index("geometry"), pa.field("geometry", pa.binary(), metadata=WKB))
    table = table.cast(schema)
    layer = output_layer_name(dst, output_layer)
    crs = dem.crs.to_wkt() if dem.crs is not None and dem.crs.to_wkt() else None
    batches = table.to_batches() or [pa.RecordBatch.from_pylist([], schema=schema)]
    write_layer(dst, schema, iter(batches), driver=driver, layer=layer, crs=crs, geometry_type="LineString")
    progress(0.85, "drawing the preview")
    shade = _hillshade(src, band, dem) if input_type == "dem" else None
    rgba = preview(shade, dem.valid, max_size, list(zip(lines, orders, strict=True)), dem)
    png = encode_png(rgba)
    result = StreamsOutput(
        written=summarize_vector(dst, layer),
        segments=len(lines),
        stream_cells=int(mask.sum()),
        threshold_cells=t_cells,
        threshold_km2=t_km2,
        max_order=int(strord.max()) if mask.any() else 0,
        total_length_m=float(lengths.sum()) if dem.crs is not None else None,
        png_base64=base64.b64encode(png).decode("ascii"),
        preview_width=int(rgba.shape[1]),
        preview_height=int(rgba.shape[0]),
        compile_seconds=timings(),
    )
    return result, warnings
