"""Burning vector features into a new raster, like gdal_rasterize, written window by window.

The grid is copied from a `like` raster (CRS, transform, size) or built from resolution or size plus a bbox
(default: the layer's extent) as gdal_rasterize builds it for -tr / -ts / -te. Features are reprojected
(vertex by vertex, as GDAL does) to the grid's CRS.

Memory stays bounded by one output window plus one Arrow batch of features: the output is written in
strips of whole blocks (`iter_windows`, at most WINDOW_PIXELS pixels), and for each strip the features are
read again through `stream.read_layer(bbox=…)`, i.e. OGR's spatial filter with the strip's bounds in the
layer's CRS. A feature that spans several strips is read and burnt once per strip; within a strip features
are burnt in layer order, so where they overlap the last one wins, as in gdal_rasterize.
"""

from __future__ import annotations

import math
import warnings as pywarnings
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyogrio
import rasterio
import rasterio.shutil
from affine import Affine
from rasterio.enums import MergeAlg
from rasterio.features import rasterize as burn

from gdal_mcp.engine.crs import crs_label, layer_crs, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.geometry_transform import reproject_2d as reproject_geometries
from gdal_mcp.engine.geometry_transform import transformer
from gdal_mcp.engine.grid import DEFAULT_MAX_PIXELS, check_grid, describe_units
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    cast,
    check_nodata,
    fits,
    parse_dtype,
    pixel_driver,
    smallest_dtype,
    summarize,
    write_windows,
)
from gdal_mcp.engine.raster.warp import resolution_pair
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS
from gdal_mcp.engine.vector.opening import choose_layer
from gdal_mcp.engine.vector.stream import geometries, read_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

# Output pixels per window (tests lower it to exercise many windows).
WINDOW_PIXELS = DEFAULT_WINDOW_PIXELS
OUTPUT_BLOCK = (256, 256)
MAX_SIDE = 2**31 - 1


# ---------------------------------------------------------------------------------------------- shared helpers

# ---------------------------------------------------------------------------------------------- arguments


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _num(v: float) -> str:
    return str(int(v)) if math.isfinite(v) and float(v).is_integer() else str(v)


def _grid_bbox(bbox: Any) -> tuple[float, float, float, float]:
    try:
        values = tuple(float(v) for v in bbox)
    except (TypeError, ValueError):
        values = ()
    if len(values) != 4 or not all(math.isfinite(v) for v in values) or not (values[0] < values[2] and values[1] < values[3]):
        raise GdalMcpError(
            "invalid-argument",
            "bbox must be four finite numbers [minx, miny, maxx, maxy] with minx < maxx and miny < maxy, in the output CRS",
        )
    return values  # type: ignore[return-value]


def _layer_extent(path: str, layer: str) -> tuple[float, float, float, float] | None:
    """The layer's extent (OGR_L_GetExtent, before any where filter, as gdal_rasterize takes it)."""
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        info = pyogrio.read_info(path, layer=layer, force_total_bounds=True)
    tb = info.get("total_bounds")
    if tb is not None and all(math.isfinite(v) for v in tb):
        return float(tb[0]), float(tb[1]), float(tb[2]), float(tb[3])
    return None


def _bbox_in(bbox: tuple[float, float, float, float], bbox_crs: str | None, target: Any) -> tuple[float, float, float, float]:
    """`bbox` (given in `bbox_crs`, default the output CRS) in the output CRS, as gdalwarp -te_srs does."""
    if bbox_crs is None:
        return bbox
    given = parse_crs(bbox_crs, "bbox_crs")
    if target is None:
        raise GdalMcpError(
            "invalid-argument",
            "the output has no CRS (neither crs nor the layer gives one), so a bbox "
            "in bbox_crs cannot be placed; omit bbox_crs and give the bbox in the layer's coordinates",
        )
    if given == target:
        return bbox
    from rasterio.warp import transform_bounds

    try:
        out = transform_bounds(given, target, *bbox, densify_pts=21)
    except Exception:  # noqa: BLE001 - PROJ cannot transform it: say so below
        out = (math.nan,) * 4
    if not all(math.isfinite(v) for v in out) or not (out[0] < out[2] and out[1] < out[3]):
        raise GdalMcpError(
            "invalid-argument",
            f"bbox cannot be transformed from {bbox_crs} to the output CRS; give it in the output CRS (omit bbox_crs)",
        )
    return float(out[0]), float(out[1]), float(out[2]), float(out[3])


def _grid(
    path: str,
    layer: str,
    src_crs: Any,
    *,
    resolution: Any,
    size: Any,
    bbox: Any,
    bbox_crs: str | None,
    crs: str | None,
    max_pixels: int,
    warnings: list[str],
) -> tuple[Any, Affine, int, int]:
    """(crs, transform, width, height) as gdal_rasterize computes them for -tr / -ts and -te.

    Without bbox the extent is the layer's (all features, the where filter does not narrow it), widened by
    half a pixel on each side when a resolution is given, as gdal_rasterize does "to avoid missing points
    on the border".
    """
    if resolution is not None and size is not None:
        raise GdalMcpError(
            "invalid-argument", "give resolution or size, not both (gdal_rasterize -tr and -ts exclude each other)"
        )
    if resolution is None and size is None:
        raise GdalMcpError(
            "invalid-argument",
            "say what grid to burn into: like= a raster to copy the grid from, or resolution= (or size=) with an optional bbox",
        )
    target = parse_crs(crs, "crs") if crs is not None else src_crs
    if bbox is not None:
        minx, miny, maxx, maxy = _bbox_in(_grid_bbox(bbox), bbox_crs, target)
    else:
        if bbox_crs is not None:
            raise GdalMcpError("invalid-argument", "bbox_crs was given without bbox; give bbox too, or omit bbox_crs")
        extent = _layer_extent(path, layer)
        if extent is None:
            raise GdalMcpError(
                "invalid-argument", "the layer has no features with a geometry; pass bbox to set the output extent"
            )
        minx, miny, maxx, maxy = extent
        if target is not None and src_crs is not None and target != src_crs:
            from rasterio.warp import transform_bounds

            minx, miny, maxx, maxy = transform_bounds(src_crs, target, minx, miny, maxx, maxy, densify_pts=21)
            if not all(math.isfinite(v) for v in (minx, miny, maxx, maxy)):
                raise GdalMcpError("invalid-argument", "the layer's extent cannot be projected to crs; pass bbox")
    if size is not None:
        if (
            not isinstance(size, list | tuple)
            or len(size) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | np.integer) or not 1 <= v <= MAX_SIDE for v in size)
        ):
            raise GdalMcpError("invalid-argument", "size must be [width, height] in pixels, both >= 1")
        width, height = int(size[0]), int(size[1])
        xres, yres = (maxx - minx) / width, (maxy - miny) / height
    else:
        xres, yres = resolution_pair(resolution)  # type: ignore[misc]
        if bbox is None:
            minx, miny, maxx, maxy = minx - xres / 2, miny - yres / 2, maxx + xres / 2, maxy + yres / 2
        fw, fh = 0.5 + (maxx - minx) / xres, 0.5 + (maxy - miny) / yres
        if fw > MAX_SIDE or fh > MAX_SIDE:
            raise GdalMcpError(
                "invalid-argument",
                f"resolution {xres}, {yres} makes a grid of {fw:.0f} x {fh:.0f} "
                "pixels; use a coarser resolution or a smaller bbox",
            )
        width, height = int(fw), int(fh)
    check_grid(
        width,
        height,
        max_pixels=max_pixels,
        crs_units=describe_units(target, crs_label(target)),
        resolution=None if size is not None else (xres, yres),
        what="the rasterize grid",
        extent=(maxx - minx, maxy - miny),
    )
    if width < 1 or height < 1 or xres <= 0 or yres <= 0:
        raise GdalMcpError(
            "invalid-argument",
            f"the extent [{minx}, {miny}, {maxx}, {maxy}] gives an empty grid "
            f"({width} x {height} pixels); pass a bbox with an area, or a finer resolution",
        )
    if target is None and src_crs is None:
        warnings.append("neither the layer nor the arguments give a CRS; the output has none")
    return target, Affine(xres, 0.0, minx, 0.0, -yres, maxy), width, height


def _attribute_range(path: str, layer: str, where: str | None, attribute: str) -> list[float]:
    """Min and max of an integer attribute over the features to burn (one pass, no geometry)."""
    lo: int | None = None
    hi: int | None = None
    with read_layer(
        path, layer=layer, where=where, columns=None if where else [attribute], read_geometry=False, count=False
    ) as st:
        for batch in st.batches:
            column = batch.column(attribute)
            if column.null_count == len(column):
                continue
            mm = pc.min_max(column)
            a, b = int(mm["min"].as_py()), int(mm["max"].as_py())
            lo, hi = (a, b) if lo is None or hi is None else (min(lo, a), max(hi, b))
    return [] if lo is None or hi is None else [float(lo), float(hi)]


def _first_value(path: str, layer: str, where: str | None, attribute: str) -> float | None:
    """The attribute of the first feature (gdal_rasterize -i burns it everywhere outside the features)."""
    with read_layer(
        path, layer=layer, where=where, columns=None if where else [attribute], read_geometry=False, batch_size=1, count=False
    ) as st:
        for batch in st.batches:
            if batch.num_rows:
                value = batch.column(attribute)[0].as_py()
                return None if value is None else float(value)
    return None


def _values(column: pa.Array, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Burn values cast to dtype as GDAL writes them (rounded, clamped), and which rows have a value."""
    valid = ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    raw = column.fill_null(0).to_numpy(zero_copy_only=False)
    if raw.dtype == bool:
        raw = raw.astype("uint8")
    target = np.dtype(dtype)
    if raw.dtype.kind in "iu" and target.kind in "iu":
        have, want = np.iinfo(raw.dtype), np.iinfo(target)
        lo, hi = raw.dtype.type(max(have.min, want.min)), raw.dtype.type(min(have.max, want.max))
        return np.clip(raw, lo, hi).astype(target), valid
    return cast(raw.astype("float64", copy=False), dtype), valid


# ---------------------------------------------------------------------------------------------- rasterize


@wrap_gdal_errors
def rasterize(
    src: str,
    dst: str,
    *,
    layer: str | None = None,
    where: str | None = None,
    burn_value: float | None = None,
    attribute: str | None = None,
    like: str | None = None,
    resolution: float | list[float] | None = None,
    size: list[int] | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    crs: str | None = None,
    all_touched: bool = False,
    invert: bool = False,
    add: bool = False,
    dtype: str | None = None,
    init: float | None = None,
    nodata: float | None = None,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Burn the features of `src` into a new raster `dst` (a fixed value or a numeric attribute).

    `init` is the background (gdal_rasterize -init; default 0, or nodata when only nodata is given, as
    gdal_rasterize leaves a new GTiff), `nodata` the value declared nodata (-a_nodata; default none), `add`
    sums the values of the features over each pixel (-add: count points per cell with burn_value=1).
    """
    warnings: list[str] = []
    if (burn_value is None) == (attribute is None):
        raise GdalMcpError(
            "invalid-argument",
            "pass exactly one of burn_value (a fixed value) or attribute (a numeric field whose value each feature burns)",
        )
    for label, number in (("burn_value", burn_value), ("init", init), ("nodata", nodata)):
        if number is not None and (isinstance(number, bool) or not isinstance(number, int | float)):
            raise GdalMcpError("invalid-argument", f"{label} must be a number, got {number!r}")
    if burn_value is not None and nodata is not None and _same(float(burn_value), float(nodata)):
        raise GdalMcpError(
            "invalid-argument",
            f"burn_value {burn_value} equals nodata: every burnt pixel would read as "
            "nodata. Burn another value, or declare another nodata (or none)",
        )
    if add and invert:
        raise GdalMcpError(
            "invalid-argument",
            "add and invert exclude each other (invert burns one value outside the features; there is nothing to add up)",
        )
    if like is not None:
        given = [
            n
            for n, v in (("resolution", resolution), ("size", size), ("bbox", bbox), ("bbox_crs", bbox_crs), ("crs", crs))
            if v is not None
        ]
        if given:
            raise GdalMcpError(
                "invalid-argument", f"like copies the whole grid of a raster; remove {', '.join(given)} or drop like"
            )
    driver = pixel_driver(dst, format, "rasterize")
    options = normalize_options(creation_options)
    try:
        out_dtype = parse_dtype(dtype)
    except GdalMcpError as e:
        raise GdalMcpError(e.code, e.message.replace("output_type", "dtype")) from None
    # The background: -init, else what gdal_rasterize leaves in a new GTiff (nodata when declared, else 0).
    fill = float(init) if init is not None else 0.0 if nodata is None else float(nodata)
    for label, number in (("init", fill), ("nodata", nodata)):
        if (
            number is not None
            and math.isnan(number)
            and out_dtype is not None
            and not np.issubdtype(np.dtype(out_dtype), np.floating)
        ):
            raise GdalMcpError("invalid-argument", f"{label} NaN needs a float dtype, not {out_dtype}")

    name = choose_layer(src, layer)
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        info = pyogrio.read_info(src, layer=name)
    fields = dict(zip(list(info["fields"]), list(info["dtypes"]), strict=True))
    if attribute is not None:
        if attribute not in fields:
            raise GdalMcpError("not-found", f"field {attribute!r} not found; fields are: {', '.join(fields) or '(none)'}")
        kind = np.dtype(fields[attribute]).kind if fields[attribute] != "object" else "O"
        if kind not in "iufb":
            raise GdalMcpError(
                "invalid-argument",
                f"field {attribute!r} is {fields[attribute]}, not numeric; burn a numeric field or use burn_value",
            )
    src_crs = layer_crs(info.get("crs"))

    # The grid.
    if like is not None:
        with open_raster(like) as ref:
            target, transform, width, height = (
                ref.crs if ref.crs and ref.crs.to_wkt() else None,
                ref.transform,
                ref.width,
                ref.height,
            )
    else:
        target, transform, width, height = _grid(
            src,
            name,
            src_crs,
            resolution=resolution,
            size=size,
            bbox=bbox,
            bbox_crs=bbox_crs,
            crs=crs,
            max_pixels=max_pixels,
            warnings=warnings,
        )
    if src_crs is None and target is not None:
        warnings.append("the layer has no CRS; its coordinates are taken to be in the output's CRS")
    elif target is None and src_crs is not None:
        warnings.append("the output grid has no CRS; the layer's coordinates are burnt as they are")
    trans = transformer(src_crs, target)

    # Values and type.
    if invert and attribute is not None:
        first = _first_value(src, name, where, attribute)
        warnings.append(
            f"invert burns one value everywhere outside the features: the first feature's {attribute} "
            f"({first}), as gdal_rasterize -i does"
        )
        burn_value = 0.0 if first is None else first
    if out_dtype is None:
        if attribute is not None and not invert and np.dtype(fields[attribute]).kind == "f":
            out_dtype = "float64"
        elif attribute is not None and not invert:
            out_dtype = smallest_dtype(_attribute_range(src, name, where, attribute) + [fill])
        else:
            out_dtype = smallest_dtype(
                [float(burn_value), fill]  # type: ignore[arg-type]
                + ([] if nodata is None else [float(nodata)])
            )
        if add and np.dtype(out_dtype).itemsize < 4 and np.dtype(out_dtype).kind in "iu":
            # Sums outgrow the burnt values: counts of points per cell need room.
            out_dtype = "uint32" if np.dtype(out_dtype).kind == "u" else "int32"
    fill = check_nodata(fill, out_dtype)
    if nodata is not None:
        nodata = check_nodata(nodata, out_dtype)
        if add and init is None:
            warnings.append(
                f"add sums onto the background, which is nodata ({_num(nodata)}) as no init was given; "
                "pass init=0 to count from zero"
            )
    if burn_value is not None and not fits(float(burn_value), out_dtype):
        warnings.append(f"burn_value {burn_value} does not fit {out_dtype}; it is rounded and clamped as GDAL does")
    fixed = None if burn_value is None else cast(np.array([burn_value], dtype="float64"), out_dtype)[0]

    counts = {"dropped": 0, "null": 0}

    def compute(w: Any) -> np.ndarray:
        wt = rasterio.windows.transform(w, transform)
        shape = (int(w.height), int(w.width))
        query = _query_bbox(_bounds(wt, shape), target, src_crs, trans)
        if invert:
            assert fixed is not None  # invert always has a single burn value
            covered = np.zeros(shape, dtype="uint8")
            for geoms, _ in _window_features(src, name, where, query, None, out_dtype, trans, counts):
                burn(((g, 1) for g in geoms), out=covered, transform=wt, all_touched=all_touched)
            return np.where(covered.astype(bool), np.array(fill, dtype=out_dtype), fixed).astype(out_dtype)
        data = np.full(shape, fill, dtype=out_dtype)
        for geoms, values in _window_features(src, name, where, query, attribute, out_dtype, trans, counts):
            pairs = zip(geoms, values if values is not None else [fixed] * len(geoms), strict=True)
            burn(pairs, out=data, transform=wt, all_touched=all_touched, merge_alg=merge)
        return data

    merge = MergeAlg.add if add else MergeAlg.replace
    write_windows(
        dst,
        driver,
        options,
        width=width,
        height=height,
        count=1,
        dtype=out_dtype,
        crs=target,
        transform=transform,
        nodata=nodata,
        compute=compute,
        progress=progress,
        what="rasterized",
        window_pixels=WINDOW_PIXELS,
        block=OUTPUT_BLOCK,
    )
    if counts["dropped"]:
        warnings.append(
            "some features could not be projected to the output CRS (they lie outside its valid area) and were not burnt"
        )
    if counts["null"]:
        warnings.append(f"features whose {attribute} is null were not burnt")
    return summarize(dst), warnings


def _bounds(transform: Affine, shape: tuple[int, int]) -> tuple[float, float, float, float]:
    """(minx, miny, maxx, maxy) of a window of `shape` (rows, cols) with this transform."""
    xs, ys = zip(*(transform @ (c, r) for c in (0, shape[1]) for r in (0, shape[0])), strict=True)
    return min(xs), min(ys), max(xs), max(ys)


def _query_bbox(
    bounds: tuple[float, float, float, float], target: Any, src_crs: Any, trans: Any
) -> tuple[float, float, float, float] | None:
    """The window's bounds in the layer's CRS, a little wider (None: read every feature)."""
    minx, miny, maxx, maxy = bounds
    if trans is not None:
        from rasterio.warp import transform_bounds

        try:
            minx, miny, maxx, maxy = transform_bounds(target, src_crs, minx, miny, maxx, maxy, densify_pts=21)
        except Exception:  # noqa: BLE001 - PROJ refuses the window: fall back to every feature
            return None
        if not all(math.isfinite(v) for v in (minx, miny, maxx, maxy)):
            return None
    pad = 1e-9 * max(abs(minx), abs(maxx), abs(miny), abs(maxy), 1.0)
    return minx - pad, miny - pad, maxx + pad, maxy + pad


def _window_features(
    src: str,
    layer: str,
    where: str | None,
    query: tuple[float, float, float, float] | None,
    attribute: str | None,
    dtype: str,
    trans: Any,
    counts: dict[str, int],
) -> Any:
    """(geometries, burn values or None) per Arrow batch of the features whose envelope meets `query`."""
    import shapely

    # Fields OGR is told to ignore read as null inside the where filter: keep them all when filtering.
    columns = None if where else ([attribute] if attribute else [])
    with read_layer(src, layer=layer, where=where, bbox=query, columns=columns, count=False) as st:
        for batch in st.batches:
            geoms, dropped = reproject_geometries(geometries(batch), trans)
            counts["dropped"] += dropped
            keep = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
            values = None
            if attribute is not None:
                values, valid = _values(batch.column(attribute), dtype)
                counts["null"] += int((keep & ~valid).sum())
                keep &= valid
                values = values[keep]
            if keep.any():
                yield geoms[keep], values
