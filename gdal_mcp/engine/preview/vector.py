"""Vector quicklooks: a layer burnt into an RGBA canvas with rasterio.features.rasterize, batch by batch.

Features stream in as Arrow batches (`read_layer`); each batch is burnt and dropped, so memory is bounded
by the canvas (a few arrays of max_size² pixels), not by the layer. The layer is drawn in its own CRS
coordinates (lon/lat layers as plate carrée), one map unit the same length in x and y, on an opaque white
background: polygons get a translucent fill (later ones show earlier ones through) and a darker 1-2 px
outline, lines are 1-2 px wide, points are 5 px dots. The image's longest side is `max_size`. A scale bar
(scalebar.py) is drawn in the bottom-left corner unless `scale_bar=False`; the legend states the scale either way.

`color_by` names an attribute. With at most 12 distinct values it is categorical (a qualitative palette;
the legend and `categories` list value → colour); numeric attributes with more values are coloured with
viridis over their min..max; text attributes with more values keep a colour for their 11 most frequent
values and draw the rest grey ("(other)"). Nulls are light grey. Deciding needs one pass over the
attribute before drawing (a second pass over the features), as does the extent when `where` is given.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyogrio

from gdal_mcp.engine.crs import describe_crs, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.features.masks import check_bbox
from gdal_mcp.engine.preview import colormaps
from gdal_mcp.engine.preview.common import (
    DEFAULT_MAX_SIZE,
    PreviewResult,
    check_max_size,
    fmt,
    fmt_extent,
    write_png,
)
from gdal_mcp.engine.preview.png import encode_png
from gdal_mcp.engine.preview.scalebar import scale_bar as draw_scale_bar
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.opening import choose_layer, list_layers
from gdal_mcp.engine.vector.stream import BATCH_SIZE, LayerStream, geometries, read_layer
from gdal_mcp.errors import GdalMcpError

MAX_CATEGORIES = 12
MAX_COUNTED = 100_000  # distinct text values counted exactly; rarer newcomers after that count as "other"
FILL_ALPHA = 0.45
OUTLINE_DARKEN = 0.6
MARGIN = 0.02  # of the extent, on each side, so that edge outlines and points stay visible
MIN_ASPECT = 1 / 8  # a very thin extent is widened (centred) so the image keeps a usable shape
BACKGROUND = (255, 255, 255)
SINGLE_COLOUR = "#1f77b4"
DOT = [(dr, dc) for dr in range(-2, 3) for dc in range(-2, 3) if dr * dr + dc * dc <= 5]  # a 5 px disc
BURN_CHUNK = 4096  # geometries per rasterize call
SIMPLIFY_OVER = 64  # geometries with more vertices are simplified to half a pixel before burning


@dataclass
class _Scan:
    """What a first pass learns: the extent of the features and how to colour `color_by`."""

    bounds: list[float] | None = None
    features: int = 0
    numeric: bool = True
    counts: Counter = field(default_factory=Counter)
    overflow: bool = False  # more distinct values than MAX_COUNTED
    nulls: int = 0
    lo: float = math.inf
    hi: float = -math.inf


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _key(v: Any) -> str:
    """A category's label: numbers without a spurious '.0', everything else as text."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _values(batch: pa.RecordBatch, name: str) -> pa.Array:
    col = batch.column(batch.schema.get_field_index(name))
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


@contextlib.contextmanager
def _quiet_layer(path: str, **kwargs: Any) -> Iterator[LayerStream]:
    """read_layer without pyogrio's warnings (e.g. on M coordinates it drops: they are not drawn anyway)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with read_layer(path, **kwargs) as stream:
            yield stream


def _scan(
    path: str,
    layer: str,
    where: str | None,
    box: tuple[float, float, float, float] | None,
    color_by: str | None,
    want_bounds: bool,
    progress: Progress,
) -> _Scan:
    import shapely

    scan = _Scan()
    with _quiet_layer(
        path,
        layer=layer,
        where=where,
        bbox=box,
        columns=[color_by] if color_by else [],
        read_geometry=want_bounds or box is not None,
    ) as stream:
        total = stream.total
        for batch in stream.batches:
            scan.features += batch.num_rows
            if want_bounds:
                b = shapely.bounds(geometries(batch))
                ok = np.isfinite(b).all(axis=1)
                if ok.any():
                    mins, maxs = b[ok, :2].min(axis=0), b[ok, 2:].max(axis=0)
                    if scan.bounds is None:
                        scan.bounds = [*mins.tolist(), *maxs.tolist()]
                    else:
                        scan.bounds = [
                            min(scan.bounds[0], mins[0]),
                            min(scan.bounds[1], mins[1]),
                            max(scan.bounds[2], maxs[0]),
                            max(scan.bounds[3], maxs[1]),
                        ]
            if color_by:
                values = _values(batch, color_by)
                scan.nulls += values.null_count
                numeric = _is_numeric(values.type)
                scan.numeric = scan.numeric and numeric
                if numeric:
                    v = np.asarray(values.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False))
                    finite = v[np.isfinite(v)]
                    scan.nulls += int((~np.isfinite(v)).sum()) - values.null_count
                    if finite.size:
                        scan.lo, scan.hi = min(scan.lo, float(finite.min())), max(scan.hi, float(finite.max()))
                    if len(scan.counts) <= MAX_CATEGORIES:
                        for value in np.unique(finite).tolist():
                            scan.counts[_key(value)] += 1
                else:
                    for value in values.drop_null().to_pylist():
                        k = _key(value)
                        if k in scan.counts or len(scan.counts) < MAX_COUNTED:
                            scan.counts[k] += 1
                        else:
                            scan.overflow = True
            progress(0.3 * (min(scan.features / total, 1.0) if total else 0.5), f"preview: scanned {scan.features} features")
    return scan


@dataclass
class _Colours:
    """Colour ids for features: a palette (id -> RGB) and a function from a batch to ids."""

    palette: np.ndarray  # (n, 3) uint8
    kind: str  # "single", "categorical", "numeric"
    categories: dict[str, str] | None = None
    lookup: dict[str, int] | None = None
    other_id: int | None = None
    null_id: int | None = None
    value_range: tuple[float, float] | None = None

    def ids(self, batch: pa.RecordBatch, color_by: str | None) -> np.ndarray:
        n = batch.num_rows
        if self.kind == "single" or color_by is None:
            return np.zeros(n, dtype=np.int64)
        values = _values(batch, color_by)
        if self.kind == "numeric":
            assert self.value_range is not None and self.null_id is not None
            v = np.asarray(values.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False))
            lo, hi = self.value_range
            scaled = (v - lo) * 255.0 / (hi - lo) if hi > lo else np.zeros_like(v)
            ids = np.clip(np.rint(np.nan_to_num(scaled, nan=0.0)), 0, 255).astype(np.int64)
            return np.where(np.isfinite(v), ids, self.null_id)
        assert self.lookup is not None
        out = np.empty(n, dtype=np.int64)
        numeric = _is_numeric(values.type)
        if numeric:
            values = values.cast(pa.float64())  # the same keys as the scan (decimals, ints and floats alike)
        for i, value in enumerate(values.to_pylist()):
            if value is None or (numeric and isinstance(value, float) and not math.isfinite(value)):
                out[i] = self.null_id if self.null_id is not None else 0
            else:
                out[i] = self.lookup.get(_key(value), self.other_id if self.other_id is not None else 0)
        return out


def _colours(color_by: str | None, scan: _Scan | None) -> tuple[_Colours, list[str]]:
    warn: list[str] = []
    if color_by is None or scan is None:
        return _Colours(palette=np.array([colormaps.hex_to_rgb(SINGLE_COLOUR)], dtype=np.uint8), kind="single"), warn
    null_hex = colormaps.NULL
    if scan.numeric and len(scan.counts) > MAX_CATEGORIES:
        lut = colormaps.lut("viridis")
        palette = np.vstack([lut, [colormaps.hex_to_rgb(null_hex)]]).astype(np.uint8)
        categories = {"(null)": null_hex} if scan.nulls else None
        return _Colours(palette=palette, kind="numeric", null_id=256, value_range=(scan.lo, scan.hi), categories=categories), warn
    if not scan.counts and scan.features:
        warn.append(f"color_by '{color_by}' is null in every feature drawn; all are light grey")
    if scan.numeric:
        chosen = sorted(scan.counts, key=float)
        rest = False
    elif len(scan.counts) <= MAX_CATEGORIES and not scan.overflow:
        chosen = sorted(scan.counts)
        rest = False
    else:
        top = sorted(scan.counts.items(), key=lambda kv: (-kv[1], kv[0]))[: MAX_CATEGORIES - 1]
        chosen = sorted(k for k, _ in top)
        rest = True
        warn.append(
            f"color_by '{color_by}' has {len(scan.counts)}{'+' if scan.overflow else ''} distinct values; "
            f"the {len(chosen)} most frequent get colours, the rest are grey '(other)'"
        )
    hexes = [colormaps.QUALITATIVE[i] for i in range(len(chosen))]
    categories = dict(zip(chosen, hexes, strict=True))
    lookup = {k: i for i, k in enumerate(chosen)}
    colours = [colormaps.hex_to_rgb(h) for h in hexes]
    other_id = null_id = None
    if rest:
        other_id = len(colours)
        colours.append(colormaps.hex_to_rgb(colormaps.OTHER))
        categories["(other)"] = colormaps.OTHER
    if scan.nulls or not colours:
        null_id = len(colours)
        colours.append(colormaps.hex_to_rgb(null_hex))
        categories["(null)"] = null_hex
    return _Colours(
        palette=np.array(colours, dtype=np.uint8),
        kind="categorical",
        categories=categories,
        lookup=lookup,
        other_id=other_id,
        null_id=null_id,
    ), warn


def _canvas(extent: list[float] | None, max_size: int, padded: bool) -> tuple[tuple[float, float, float, float], int, int]:
    """(extent shown, width, height): square pixels, longest side max_size."""
    if extent is None:
        minx, miny, maxx, maxy = 0.0, 0.0, 1.0, 1.0
    else:
        minx, miny, maxx, maxy = (float(v) for v in extent)
    cx, cy = (minx + maxx) / 2, (miny + maxy) / 2
    dx, dy = maxx - minx, maxy - miny
    if dx <= 0 and dy <= 0:
        dx = dy = max(abs(cx), abs(cy), 1.0) * 1e-3  # a single point: a small square around it
    dx, dy = max(dx, dy * MIN_ASPECT), max(dy, dx * MIN_ASPECT)
    if padded:
        dx, dy = dx * (1 + 2 * MARGIN), dy * (1 + 2 * MARGIN)
    res = max(dx, dy) / max_size
    width = max(1, min(max_size, math.ceil(dx / res - 1e-9)))
    height = max(1, min(max_size, math.ceil(dy / res - 1e-9)))
    half_w, half_h = width * res / 2, height * res / 2
    return (cx - half_w, cy - half_h, cx + half_w, cy + half_h), width, height


def _explode(geoms: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Geometry collections replaced by their parts (each keeping its feature's colour id)."""
    import shapely

    for _ in range(8):
        coll = shapely.get_type_id(geoms) == 7
        if not coll.any():
            break
        parts, index = shapely.get_parts(geoms[coll], return_index=True)
        geoms = np.concatenate([geoms[~coll], parts])
        ids = np.concatenate([ids[~coll], ids[coll][index]])
    return geoms, ids


def _burn(geoms: np.ndarray, values: np.ndarray, out: np.ndarray, transform, all_touched: bool) -> None:
    from rasterio.features import rasterize

    # rasterize holds every shape it is given (as GeoJSON-like objects and OGR geometries): feed it in chunks.
    for i in range(0, geoms.size, BURN_CHUNK):
        rasterize(
            zip(geoms[i : i + BURN_CHUNK], values[i : i + BURN_CHUNK].tolist(), strict=True),
            out=out,
            transform=transform,
            all_touched=all_touched,
            dtype=out.dtype,
        )


def _dots(points: np.ndarray, values: np.ndarray, out: np.ndarray, transform) -> None:
    """Small discs at the points (multipoints exploded), burnt with their colour id."""
    import shapely

    if not points.size:
        return
    parts, index = shapely.get_parts(points, return_index=True)
    coords = shapely.get_coordinates(parts)
    keep = ~shapely.is_empty(parts)
    if not keep.any():
        return
    cols, rows = (~transform) @ (coords[:, 0], coords[:, 1])
    cols, rows = np.floor(cols).astype(np.int64), np.floor(rows).astype(np.int64)
    vals = values[index[keep]]
    h, w = out.shape
    for dr, dc in DOT:
        r, c = rows + dr, cols + dc
        ok = (r >= 0) & (r < h) & (c >= 0) & (c < w)
        out[r[ok], c[ok]] = vals[ok]


@wrap_gdal_errors
def vector_preview(
    path: str,
    *,
    layer: str | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    color_by: str | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    where: str | None = None,
    scale_bar: bool = True,
    dst: str | None = None,
    progress: Progress = no_progress,
) -> PreviewResult:
    """A PNG map of one layer (see the module doc) and a legend saying what the colours mean.

    `bbox` (in `bbox_crs`, default the layer's CRS) becomes the image's extent and filters features;
    otherwise the extent is that of the features drawn. A layer or filter with no features gives a blank
    image and a warning. Sources with several layers need `layer`.
    """
    import shapely
    from rasterio.transform import from_bounds

    check_max_size(max_size)
    progress(0.0, "preview: opening")
    name = choose_layer(path, layer, list_layers(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = pyogrio.read_info(path, layer=name)
    if not info.get("geometry_type"):
        raise GdalMcpError("invalid-argument", f"layer '{name}' has no geometry (it is a table); nothing to draw")
    fields = [str(f) for f in info["fields"]]
    if color_by is not None and color_by not in fields:
        raise GdalMcpError("not-found", f"color_by field '{color_by}' not found; fields are: {', '.join(fields) or '(none)'}")
    layer_crs = info.get("crs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyproj's remarks on PROJ strings
        crs_info = describe_crs(layer_crs) if layer_crs else None
    crs = (f"EPSG:{crs_info.epsg}" if crs_info.epsg else crs_info.name) if crs_info else None

    box: tuple[float, float, float, float] | None = None
    if bbox is not None:
        box = check_bbox(bbox)
        if bbox_crs is not None:
            given = parse_crs(bbox_crs, "bbox_crs")
            if not layer_crs:
                raise GdalMcpError(
                    "invalid-argument",
                    "the layer has no CRS, so a bbox in bbox_crs cannot be placed "
                    "on it; omit bbox_crs and give the bbox in the layer's own coordinates",
                )
            own = parse_crs(layer_crs)
            if given != own:
                from rasterio.warp import transform_bounds

                try:
                    box = transform_bounds(given, own, *box, densify_pts=21)
                except Exception as e:  # noqa: BLE001 - PROJ refuses points outside the projection's domain
                    raise GdalMcpError(
                        "invalid-argument", f"bbox cannot be transformed from {bbox_crs} to the layer's CRS ({crs}): {e}"
                    ) from None
                if not all(math.isfinite(v) for v in box):
                    raise GdalMcpError("invalid-argument", f"bbox lies outside the domain of the layer's CRS ({crs})")
    elif bbox_crs is not None:
        raise GdalMcpError("invalid-argument", "bbox_crs was given without bbox; give bbox too, or omit bbox_crs")

    # Pass 1 (only when needed): the features' extent under `where`, and what color_by holds.
    extent: list[float] | None = list(box) if box is not None else None
    scan: _Scan | None = None
    if extent is None and where is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tb = pyogrio.read_info(path, layer=name, force_total_bounds=True).get("total_bounds")
        if tb is not None and all(math.isfinite(v) for v in tb):
            extent = [float(v) for v in tb]
    if color_by is not None or (extent is None and where is not None):
        scan = _scan(path, name, where, box, color_by, extent is None and box is None, progress)
        if extent is None:
            extent = scan.bounds
    colours, warn = _colours(color_by, scan)

    shown, width, height = _canvas(extent, max_size, padded=box is None)
    transform = from_bounds(*shown, width, height)
    tolerance = (shown[2] - shown[0]) / width / 2
    n = len(colours.palette)
    fill = np.zeros((height, width), dtype=np.uint16)  # colour id + 1 of this batch's polygons
    canvas = np.empty((height, width, 3), dtype=np.float32)
    canvas[:] = BACKGROUND
    ink = np.zeros((height, width), dtype=np.uint16)  # outlines, lines and dots: colour id + 1 (+ n when darker)
    palette_f = colours.palette.astype(np.float32)

    drawn = no_geometry = 0
    kinds: Counter = Counter()
    start = 0.3 if scan is not None else 0.0
    with _quiet_layer(
        path, layer=name, where=where, bbox=box, columns=[color_by] if color_by else [], batch_size=BATCH_SIZE
    ) as stream:
        total = stream.total if box is None and where is None else (scan.features if scan else None)
        seen = 0
        for batch in stream.batches:
            seen += batch.num_rows
            geoms = geometries(batch)
            ids = colours.ids(batch, color_by)
            present = ~shapely.is_missing(geoms)
            no_geometry += int((~present).sum())
            geoms, ids = geoms[present], ids[present]
            geoms = shapely.force_2d(geoms)
            geoms, ids = _explode(geoms, ids)
            keep = ~shapely.is_empty(geoms)
            geoms, ids = geoms[keep], ids[keep]
            drawn += int(present.sum())
            big = shapely.get_num_coordinates(geoms) > SIMPLIFY_OVER
            if big.any():
                geoms = geoms.copy()
                geoms[big] = shapely.simplify(geoms[big], tolerance, preserve_topology=True)
            types = shapely.get_type_id(geoms)
            polys = np.isin(types, (3, 6))
            lines = np.isin(types, (1, 2, 5))
            points = np.isin(types, (0, 4))
            kinds.update({"polygon": int(polys.sum()), "line": int(lines.sum()), "point": int(points.sum())})
            if polys.any():
                fill[:] = 0
                _burn(geoms[polys], ids[polys] + 1, fill, transform, all_touched=False)
                hit = fill > 0
                colour = palette_f[fill[hit].astype(np.int64) - 1]
                canvas[hit] = canvas[hit] * (1 - FILL_ALPHA) + colour * FILL_ALPHA
                _burn(shapely.boundary(geoms[polys]), ids[polys] + 1 + n, ink, transform, all_touched=True)
            _burn(geoms[lines], ids[lines] + 1, ink, transform, all_touched=True)
            _dots(geoms[points], ids[points] + 1, ink, transform)
            progress(
                start + (0.95 - start) * (min(seen / total, 1.0) if total else 0.5),
                f"preview: drew {seen}" + (f"/{total}" if total else "") + " features",
            )

    rgba = np.empty((height, width, 4), dtype=np.uint8)
    rgba[..., :3] = np.rint(canvas)
    rgba[..., 3] = 255
    del canvas, fill
    darker = np.rint(colours.palette.astype(np.float32) * OUTLINE_DARKEN).astype(np.uint8)
    inks = np.vstack([colours.palette, darker])
    hit = ink > 0
    rgba[hit, :3] = inks[ink[hit].astype(np.int64) - 1]
    bar, bar_text = draw_scale_bar(
        rgba,
        layer_crs,
        ((shown[0] + shown[2]) / 2, (shown[1] + shown[3]) / 2),
        ((shown[2] - shown[0]) / width, 0.0),
        draw=scale_bar,
    )

    # -- legend and warnings
    if drawn == 0:
        why = f" (where {where!r} matched none)" if where else (" in the bbox" if box is not None else "")
        warn.append(f"no features to draw{why}: the image is blank")
    if no_geometry:
        warn.append(f"{no_geometry} feature(s) have no geometry and are not drawn")
    is_geographic = bool(crs_info and crs_info.is_geographic)
    parts = [
        f"Layer '{name}' ({info.get('geometry_type')}): {drawn} feature(s) drawn"
        + (f" matching {where!r}" if where else "")
        + "."
    ]
    styles = []
    if kinds["polygon"]:
        styles.append("polygons as translucent fills with a darker outline")
    if kinds["line"]:
        styles.append("lines 1-2 px wide")
    if kinds["point"]:
        styles.append("points as 5 px dots")
    if styles:
        parts.append("Drawn on white: " + ", ".join(styles) + ".")
    if colours.kind == "single":
        parts.append(f"All features in one colour ({SINGLE_COLOUR}).")
    elif colours.kind == "numeric":
        lo, hi = colours.value_range or (0.0, 0.0)
        parts.append(
            f"Coloured by '{color_by}' (numeric) with colormap {colormaps.describe('viridis')}: "
            f"{fmt(lo)} at the low end to {fmt(hi)} at the high end"
            + ("; null is light grey" if colours.null_id is not None and scan and scan.nulls else "")
            + "."
        )
    else:
        listing = ", ".join(f"{k} = {v}" for k, v in (colours.categories or {}).items())
        parts.append(f"Coloured by '{color_by}' (categories): {listing}.")
    coords = "lon/lat drawn as x/y (plate carrée)" if is_geographic else "the layer's own coordinates"
    parts.append(
        f"CRS {crs or 'none'}; extent {fmt_extent(shown)} (minx, miny, maxx, maxy), in {coords}, north up, "
        f"{fmt(round((shown[2] - shown[0]) / width, 6))} units per pixel; image {width}x{height} px."
    )
    parts.append(bar_text)
    legend = " ".join(parts)
    progress(0.97, "preview: encoding PNG")
    png = encode_png(rgba, text={"Description": legend, "Software": "gdal-mcp"})
    written = write_png(dst, png) if dst is not None else None
    progress(1.0, "preview: done")
    return PreviewResult(
        png=png,
        width=width,
        height=height,
        mode="vector",
        bands_used=[],
        value_range=[colours.value_range] if colours.kind == "numeric" else [],
        colormap="viridis" if colours.kind == "numeric" else None,
        categories=colours.categories,
        crs=crs,
        extent=shown,
        features=drawn,
        scale_bar=bar,
        legend=legend,
        dst=written,
        warnings=warn,
    )
