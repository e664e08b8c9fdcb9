"""Scattered points to a raster grid (GDAL 3.12's `gdal vector grid`, formerly gdal_grid).

Two steps. First the features are read with pyogrio (any format it reads, the `where` filter, CSV type
detection) batch by batch: each feature contributes its vertices (points, or the vertices of lines and polygons,
as gdal_grid does) with z from `z_field` or from the geometry's Z; features without a value are left out and
counted. The points go to a temporary PointZ shapefile beside the output (exact doubles; rasterio's GDAL, which
runs the algorithm, reads fewer formats than pyogrio's), and their extent is the default output extent. Then
`gdal vector grid <method>` runs on it through engine/algorithms.py with an explicit extent and size, so the
grid is ours (resolution honoured exactly, as vector_rasterize builds it) and GDAL's algorithms compute each
pixel at its centre. GDAL holds every point in memory (3 doubles each) and writes the output block by block.

Distances (radius, the inverse-distance weights) are in the layer's CRS units: DEGREES on a lon/lat layer.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import warnings as pywarnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyogrio
import rasterio.shutil

from gdal_mcp.engine.algorithms import algorithm, number
from gdal_mcp.engine.bbox import bbox_in
from gdal_mcp.engine.crs import crs_label, layer_crs
from gdal_mcp.engine.failures import disk_full, wrap_gdal_errors
from gdal_mcp.engine.grid import DEFAULT_MAX_PIXELS, check_grid, describe_units
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.output import (
    GDAL_TYPE_NAMES,
    _delete,
    check_nodata,
    parse_dtype,
    pixel_driver,
    record_options,
    staging_options,
    summarize,
    writable_driver,
)
from gdal_mcp.engine.raster.warp import resolution_pair
from gdal_mcp.engine.vector.opening import choose_layer, open_options_for
from gdal_mcp.engine.vector.stream import geometries, read_layer, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

#: method -> GDAL's `gdal vector grid` sub-command
METHODS = {
    "invdist": "invdist",
    "invdistnn": "invdistnn",
    "nearest": "nearest",
    "average": "average",
    "linear": "linear",
    "minimum": "minimum",
    "maximum": "maximum",
    "range": "range",
    "count": "count",
}
METRICS = ("minimum", "maximum", "range", "count")
#: the optional parameters each method takes (anything else given is refused, never silently ignored)
ACCEPTS: dict[str, frozenset[str]] = {
    "invdist": frozenset({"power", "smoothing", "radius", "min_points", "max_points"}),
    "invdistnn": frozenset({"power", "smoothing", "radius", "min_points", "max_points"}),
    "average": frozenset({"radius", "min_points", "max_points"}),
    "nearest": frozenset({"radius"}),
    "linear": frozenset({"radius"}),
    **{m: frozenset({"radius", "min_points"}) for m in METRICS},
}
#: methods that use every point for every pixel without a radius (average and the metrics would be one constant)
NEEDS_RADIUS = frozenset({"invdistnn", "average", *METRICS})
#: most points interpolated: GDAL holds them all in memory (24 bytes each, more for a triangulation or a quadtree)
MAX_POINTS = 10_000_000
#: most pixel x point pairs of invdist without a radius (every point weighs on every pixel); GDAL's vectorised
#: power=2 kernel did ~9e8 pairs/s on one core here, so this is a few minutes; other powers are ~40x slower
MAX_PAIRS = 2 * 10**11
SLOW_POWER_FACTOR = 40
#: a radius above this on a lon/lat layer cannot be degrees: it is metres given by mistake
MAX_DEGREES = 180.0


@dataclass
class _Points:
    """What the reading pass found."""

    count: int = 0
    features: int = 0
    null_z: int = 0
    no_z: int = 0
    bounds: list[float] = field(default_factory=lambda: [math.inf, math.inf, -math.inf, -math.inf])
    failure: BaseException | None = None


def _check_arguments(method: str, given: dict[str, Any]) -> None:
    """Refuse parameters the method does not take, missing radii and impossible values, before any reading."""
    if method not in METHODS:
        raise GdalMcpError("invalid-argument", f"method must be one of {', '.join(METHODS)} (got {method!r})")
    extra = [k for k, v in given.items() if v is not None and k not in ACCEPTS[method]]
    if extra:
        raise GdalMcpError(
            "invalid-argument",
            f"method {method} does not take {', '.join(extra)}; it takes {', '.join(sorted(ACCEPTS[method]))}",
        )
    radius = given.get("radius")
    if radius is not None and (not math.isfinite(radius) or radius < 0 or (radius == 0 and method != "linear")):
        raise GdalMcpError(
            "invalid-argument",
            f"radius must be a positive number of layer units (got {radius!r})"
            + ("; with linear, radius=0 leaves pixels outside the points' hull as nodata" if method == "linear" else ""),
        )
    if method in NEEDS_RADIUS and radius is None:
        what = (
            "invdistnn searches the max_points nearest points within radius"
            if method == "invdistnn"
            else f"{method} without a radius would use every point for every pixel (one constant value)"
        )
        raise GdalMcpError("invalid-argument", f"{what}: pass radius, in the layer's CRS units")
    if method in ("invdist", "average") and radius is None:
        needing = [k for k in ("min_points", "max_points") if given.get(k) is not None]
        if needing:
            raise GdalMcpError("invalid-argument", f"{' and '.join(needing)} work only within a search radius: pass radius too")
    for key in ("min_points", "max_points"):
        value = given.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise GdalMcpError("invalid-argument", f"{key} must be a whole number >= 1 (got {value!r})")
    lo, hi = given.get("min_points"), given.get("max_points")
    if lo is not None and hi is not None and lo > hi:
        raise GdalMcpError("invalid-argument", f"min_points ({lo}) is more than max_points ({hi})")
    power, smoothing = given.get("power"), given.get("smoothing")
    if power is not None and (not math.isfinite(power) or power <= 0):
        raise GdalMcpError("invalid-argument", f"power must be a positive number (got {power!r}); 2 is usual")
    if smoothing is not None and (not math.isfinite(smoothing) or smoothing < 0):
        raise GdalMcpError("invalid-argument", f"smoothing must be >= 0 (got {smoothing!r})")


def _method_argv(*, power: float | None, smoothing: float | None, radius: float | None, **points: Any) -> list[str]:
    """The method's own arguments, as `gdal vector grid <method>` takes them (only those given)."""
    argv = []
    for key, value in (("power", power), ("smoothing", smoothing), ("radius", radius), *points.items()):
        if value is not None:
            argv.append(f"--{key.replace('_', '-')}={number(value)}")
    return argv


def _z_values(batch: pa.RecordBatch, z_field: str) -> np.ndarray:
    """The z field as float64, NaN where null."""
    column = batch.column(z_field)
    values = column.cast(pa.float64()).fill_null(math.nan) if column.null_count else column.cast(pa.float64())
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype="float64")


def _point_batches(
    stream: Any, z_field: str | None, need_z: bool, found: _Points, progress: Progress, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """PointZ batches (ISO WKB) of every vertex with a z value; counts and extent go into `found`.

    A failure (a cancel from `progress`, too many points) is kept in found.failure and ends the stream: raised
    inside pyogrio's writer it would come back wrapped by Arrow."""
    import shapely

    total = stream.total
    try:
        for batch in stream.batches:
            found.features += batch.num_rows
            geoms = geometries(batch)
            keep = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
            geoms = geoms[keep]
            coords = shapely.get_coordinates(geoms, include_z=True)
            if z_field is not None:
                values = _z_values(batch, z_field)[keep]
                found.null_z += int(np.isnan(values).sum())
                z = np.repeat(values, shapely.get_num_coordinates(geoms))
            elif need_z:
                z = coords[:, 2]
                found.no_z += int(np.isnan(z).sum())
            else:
                z = np.zeros(len(coords))
            ok = np.isfinite(z) & np.isfinite(coords[:, 0]) & np.isfinite(coords[:, 1])
            x, y, z = coords[ok, 0], coords[ok, 1], z[ok]
            found.count += len(x)
            if found.count > MAX_POINTS:
                raise GdalMcpError(
                    "resource-limit",
                    f"more than {MAX_POINTS} points to interpolate (GDAL holds them all in memory); select fewer "
                    "with where=, or grid parts of the area separately",
                )
            if len(x):
                b = found.bounds
                found.bounds = [min(b[0], x.min()), min(b[1], y.min()), max(b[2], x.max()), max(b[3], y.max())]
                wkb = shapely.to_wkb(shapely.points(x, y, z), output_dimension=3, flavor="iso")
                yield pa.record_batch([pa.array(wkb, type=pa.binary())], schema=schema)
            progress(0.3 * min(found.features / total, 1.0) if total else 0.15, f"read {found.features} features")
    except GeneratorExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - re-raised by the caller once the writer has closed
        found.failure = exc


def _write_points(stream: Any, z_field: str | None, need_z: bool, shp: str, progress: Progress) -> _Points:
    """Write the points of the open layer `stream` to the PointZ shapefile `shp` (no CRS: the algorithm is given
    the layer's); what was found."""
    found = _Points()
    schema = pa.schema([pa.field("geometry", pa.binary(), metadata={"ARROW:extension:name": "geoarrow.wkb"})])
    write_layer(
        shp,
        schema,
        _point_batches(stream, z_field, need_z, found, progress, schema),
        driver="ESRI Shapefile",
        layer="points",
        crs=None,
        geometry_type="Point Z",
    )
    if found.failure is not None:
        raise found.failure
    return found


def _numeric_fields(src: str, layer: str) -> list[str]:
    """The layer's numeric fields (for messages)."""
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        info = pyogrio.read_info(src, layer=layer, **open_options_for(src))
    return [str(f) for f, t in zip(info["fields"], info["dtypes"], strict=True) if _numeric(str(t))]


def _numeric(dtype: str) -> bool:
    try:
        return dtype != "object" and np.dtype(dtype).kind in "iuf"
    except TypeError:
        return False


def _check_layer(stream: Any, src: str, layer: str, z_field: str | None, need_z: bool) -> None:
    """invalid-argument for a z_field that is not numeric, or no z_field on a layer without Z (read_layer has
    refused a z_field the layer lacks, naming its fields)."""
    if z_field is not None:
        dtype = dict(zip([str(f) for f in stream.meta["fields"]], [str(t) for t in stream.meta["dtypes"]], strict=True))
        if not _numeric(dtype.get(z_field, "object")):
            numeric = _numeric_fields(src, layer)
            raise GdalMcpError(
                "invalid-argument",
                f"z_field {z_field!r} is {dtype.get(z_field)}, not numeric; numeric fields: {', '.join(numeric) or '(none)'}",
            )
    geometry_type = str(stream.meta.get("geometry_type") or "Unknown")
    if need_z and not geometry_type.endswith(" Z") and geometry_type != "Unknown":
        numeric = _numeric_fields(src, layer)
        raise GdalMcpError(
            "invalid-argument",
            f"the layer's geometries ({geometry_type}) have no Z to interpolate; pass z_field, one of the numeric "
            f"fields: {', '.join(numeric) or '(none: the layer has no numeric field)'}",
        )


def _no_points(found: _Points, z_field: str | None, where: str | None) -> GdalMcpError:
    if found.features == 0:
        said = f"where {where!r} matched no features" if where else "the layer has no features"
        return GdalMcpError("invalid-argument", f"nothing to interpolate: {said}")
    if found.null_z:
        return GdalMcpError("invalid-argument", f"nothing to interpolate: {z_field} is null in every feature read")
    if found.no_z:
        return GdalMcpError("invalid-argument", "nothing to interpolate: no geometry has a Z value; pass z_field")
    return GdalMcpError(
        "invalid-argument",
        "nothing to interpolate: no feature has a geometry (a table of coordinates: make points first with vector_from_table)",
    )


def _grid(
    extent: tuple[float, float, float, float],
    *,
    from_bbox: bool,
    resolution: Any,
    size: Any,
    crs: Any,
    max_pixels: int,
) -> tuple[tuple[float, float, float, float], int, int]:
    """(extent, width, height) of the output. With resolution, the pixel size is exact: the grid starts at the
    extent's top-left corner and has round(extent / resolution) pixels; the points' own extent is first widened
    by half a pixel, so the outermost points sit on pixel centres (as gdal_rasterize widens it)."""
    minx, miny, maxx, maxy = extent
    if size is not None:
        if (
            not isinstance(size, list | tuple)
            or len(size) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in size)
        ):
            raise GdalMcpError("invalid-argument", "size must be [width, height] in pixels, both >= 1")
        width, height = int(size[0]), int(size[1])
        res: tuple[float, float] | None = None
    else:
        xres, yres = resolution_pair(resolution)  # type: ignore[misc]
        if not from_bbox:
            minx, miny, maxx, maxy = minx - xres / 2, miny - yres / 2, maxx + xres / 2, maxy + yres / 2
        fw, fh = 0.5 + (maxx - minx) / xres, 0.5 + (maxy - miny) / yres
        width, height = (int(fw), int(fh)) if max(fw, fh) < 2**31 else (2**31, 2**31)
        res = (xres, yres)
        maxx, miny = minx + width * xres, maxy - height * yres
    check_grid(
        width,
        height,
        max_pixels=max_pixels,
        crs_units=describe_units(crs, crs_label(crs)),
        resolution=res,
        what="the interpolation grid",
        extent=(extent[2] - extent[0], extent[3] - extent[1]),
    )
    return (minx, miny, maxx, maxy), width, height


@wrap_gdal_errors
def interpolate(
    src: str,
    dst: str,
    *,
    method: str = "invdist",
    layer: str | None = None,
    where: str | None = None,
    z_field: str | None = None,
    power: float | None = None,
    smoothing: float | None = None,
    radius: float | None = None,
    min_points: int | None = None,
    max_points: int | None = None,
    resolution: float | list[float] | None = None,
    size: list[int] | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    output_type: str = "Float32",
    nodata: float | None = None,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Interpolate the points of `src` (z from `z_field` or the geometry's Z) onto a new raster `dst`.

    `nodata` fills the pixels a method leaves without a value (outside radius, fewer than min_points, outside
    the points' hull for linear with a radius) and is declared on the output; default NaN (float types).
    """
    warnings: list[str] = []
    _check_arguments(
        method,
        {"power": power, "smoothing": smoothing, "radius": radius, "min_points": min_points, "max_points": max_points},
    )
    if (resolution is None) == (size is None):
        raise GdalMcpError(
            "invalid-argument",
            "give exactly one of resolution (pixel size in the layer's CRS units) or size ([width, height] in pixels)",
        )
    dtype = parse_dtype(output_type) or "float32"
    if nodata is None:
        if np.dtype(dtype).kind != "f":
            raise GdalMcpError(
                "invalid-argument",
                f"output_type {output_type} needs a nodata value (for pixels without a result); pass nodata=, "
                "or use Float32 (default nodata NaN)",
            )
        nodata = math.nan
    elif isinstance(nodata, bool) or not isinstance(nodata, int | float):
        raise GdalMcpError("invalid-argument", f"nodata must be a number (got {nodata!r})")
    nodata = check_nodata(nodata, dtype)
    driver = pixel_driver(dst, format, "interpolation")
    options = normalize_options(creation_options)

    name = choose_layer(src, layer)
    need_z = z_field is None and method != "count"
    if bbox is None and bbox_crs is not None:
        raise GdalMcpError("invalid-argument", "bbox_crs was given without bbox; give bbox too, or omit bbox_crs")

    work = tempfile.mkdtemp(prefix=".interpolate-", dir=str(Path(dst).parent))
    staged = not writable_driver(driver)
    target = str(Path(dst).with_name(Path(dst).name + ".staging.tif")) if staged else dst
    existed = os.path.exists(dst)
    try:
        with read_layer(src, layer=name, where=where, columns=[z_field] if z_field else []) as stream:
            _check_layer(stream, src, name, z_field, need_z)
            crs = layer_crs(stream.crs)
            geographic = bool(crs is not None and crs.is_geographic)
            if geographic and radius is not None and radius > MAX_DEGREES:
                raise GdalMcpError(
                    "invalid-argument",
                    f"radius {number(radius)} is in the layer's units, DEGREES ({crs_label(crs)} is geographic), so it "
                    "cannot be metres here; give degrees (1 degree of latitude is about 111 km), or reproject the "
                    "points to a projected CRS first (vector_reproject) to work in metres",
                )
            extent = None
            if bbox is not None:
                if bbox_crs is not None and crs is None:
                    raise GdalMcpError(
                        "invalid-argument", "bbox_crs was given but the layer has no CRS; give bbox in the layer's coordinates"
                    )
                box = bbox_in(bbox, bbox_crs, crs)
                extent, width, height = _grid(
                    box, from_bbox=True, resolution=resolution, size=size, crs=crs, max_pixels=max_pixels
                )
            found = _write_points(stream, z_field, need_z, os.path.join(work, "points.shp"), progress)
        if found.count == 0:
            raise _no_points(found, z_field, where)
        if found.null_z:
            warnings.append(f"{found.null_z} feature(s) with a null {z_field} were left out")
        if found.no_z:
            warnings.append(f"{found.no_z} vertices without a Z value were left out")
        if extent is None:
            minx, miny, maxx, maxy = found.bounds
            if not (minx < maxx and miny < maxy):
                raise GdalMcpError(
                    "invalid-argument",
                    f"the {found.count} point(s) span no area ([{minx}, {miny}, {maxx}, {maxy}]); pass bbox to set the "
                    "output extent",
                )
            extent, width, height = _grid(
                (minx, miny, maxx, maxy), from_bbox=False, resolution=resolution, size=size, crs=crs, max_pixels=max_pixels
            )
        if method == "invdist" and radius is None:
            pairs = width * height * found.count * (1 if power in (None, 2) and not smoothing else SLOW_POWER_FACTOR)
            if pairs > MAX_PAIRS:
                raise GdalMcpError(
                    "resource-limit",
                    f"invdist without a radius weighs all {found.count} points at each of {width}x{height} pixels, "
                    "too much work for one call; pass radius (a search radius in layer units), use "
                    "method=invdistnn (the nearest max_points), or a coarser grid",
                )
        if geographic and method != "linear":
            warnings.append(
                f"the layer is lon/lat ({crs_label(crs)}): distances and radius are in degrees, and a degree of "
                "longitude is shorter than one of latitude away from the equator; reproject the points "
                "(vector_reproject) for distances in metres"
            )
        if crs is None:
            warnings.append("the layer has no CRS; the output has none either")

        if driver == "GTiff":
            options.setdefault("BIGTIFF", "IF_SAFER")
        write_options = staging_options(driver) if staged else options
        argv = [
            "--extent=" + ",".join(number(v) for v in extent),
            f"--size={width},{height}",
            f"--output-data-type={GDAL_TYPE_NAMES[dtype]}",
            f"--nodata={number(nodata)}",
            "--output-format=" + ("GTiff" if staged else driver),
            *[f"--creation-option={k}={v}" for k, v in write_options.items()],
            *([f"--crs={crs.to_wkt()}"] if crs is not None else []),
            *_method_argv(
                power=power,
                smoothing=smoothing,
                radius=radius,
                min_points=min_points,
                max_points=max_points,
            ),
            os.path.join(work, "points.shp"),
            target,
        ]
        with algorithm(["vector", "grid", METHODS[method]], argv) as alg:
            alg.run(progress, message=f"interpolating ({method})", start=0.3, scale=0.65 if staged else 0.7)
            warnings += [w for w in alg.warnings if "lacks a Z component" not in w]
        if staged:
            progress(0.95, f"writing {driver} with GDAL CreateCopy")
            rasterio.shutil.copy(target, dst, driver=driver, **options)
        record_options(dst, options)
    except BaseException as exc:
        full = disk_full(exc, dst)
        if not existed:
            _delete(dst)
        if full is not None:
            raise full from exc
        raise
    finally:
        if staged:
            _delete(target)
        shutil.rmtree(work, ignore_errors=True)
    progress(1.0, "interpolated")
    return summarize(dst), warnings
