"""Zonal statistics: per-feature statistics of a raster band under each polygon, as rasterstats computes them.

A pixel belongs to a zone when its centre is inside the polygon (GDAL's rasterization rule), or when the
polygon touches it with all_touched; points select the pixel they fall in. Nodata, masked and NaN pixels
are left out. The statistics are rasterstats' (`zonal_stats`): count, min, max, mean, sum, std (population),
median, majority/minority (most/least frequent value, the smallest on a tie), unique, range, nodata,
percentile_<q> (numpy's linear percentile).

Memory: zones are read in Arrow batches (stream.read_layer) and reprojected to the raster's CRS; for each
zone only the window of its bounds is read, in chunks of at most WINDOW_PIXELS pixels. Sums and moments are
accumulated chunk by chunk in float64; the pixel values themselves are kept, as distinct values and their
counts, only when a value statistic (median, majority, minority, unique, percentile) is asked for, and then
for a group of zones covering at most VALUE_PIXELS pixels (or one larger zone) at a time.

Tiles: the raster is split into tiles (engine/tiles.py); each tile that a zone's window reaches computes that
zone's partial results there (`zonal_tile`, run wherever the executor runs it: count, nodata, moments, min/max,
the distinct values with their counts, the class counts and areas, the threshold tallies), and the job merges each zone's partial
results in tile-index order, so the numbers are the same whichever order the tiles finished in. A valid polygon
is sent to a tile clipped to the tile's extent plus two pixels (the pixels of the tile are the same).

Differences from rasterstats, on purpose: the band's GDAL mask is used (rasterstats assumes nodata -999
when the raster has none, and ignores alpha/per-dataset masks); `nodata` counts masked zone pixels inside
the raster (rasterstats also counts those beyond its edge); sums and means accumulate in float64 (numpy's
default for float32 data accumulates in float32), so they can differ in the last float32 digits.
"""

from __future__ import annotations

import json
import math
import re
import warnings as pywarnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyogrio
import shapely
from rasterio.features import rasterize
from rasterio.windows import Window

from gdal_mcp.engine import tiles
from gdal_mcp.engine.crs import layer_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.geometry_transform import reproject_2d as reproject_geometries
from gdal_mcp.engine.geometry_transform import transformer
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.categories import ClassTally, check_categorical_dtype
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.order_keys import lerp_percentile, needed_ranks
from gdal_mcp.engine.raster.pixel_areas import PixelAreas, pixel_areas
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.engine.raster.stats import _Accumulator
from gdal_mcp.engine.raster.thresholds import ThresholdTally, check_thresholds, field_names
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS, iter_windows
from gdal_mcp.engine.vector.opening import choose_layer, list_layers
from gdal_mcp.engine.vector.stream import geometries, read_layer, summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import ZonalResult

DEFAULT_STATS = ["count", "min", "max", "mean", "sum", "std", "median", "majority"]
BASIC_STATS = ("count", "min", "max", "mean", "sum", "std", "median", "majority", "minority", "unique", "range", "nodata")
VALUE_STATS = ("median", "majority", "minority", "unique")
INTEGER_STATS = ("count", "unique", "nodata")
PERCENTILE = re.compile(r"^percentile_(\d+(?:\.\d+)?)$")
# Pixels read at once for one zone: a quarter of the usual window, since a chunk costs several arrays of
# its size (data, mask, zone, selected values); tests lower it to split zones into several chunks.
WINDOW_PIXELS = DEFAULT_WINDOW_PIXELS // 4
ZONE_BATCH = 1024
# Pixels of the zones' windows whose values are held at once when a value statistic needs them.
VALUE_PIXELS = 16 * 1024 * 1024
MAX_LIMIT = 10_000


# ---------------------------------------------------------------------------------------------- arguments


def check_stats(stats: Any) -> list[str]:
    """The statistic names, validated and without repeats."""
    if isinstance(stats, str):
        stats = stats.split()
    if not isinstance(stats, list | tuple) or not stats:
        raise GdalMcpError("invalid-argument", f"stats must be a non-empty list of: {', '.join(BASIC_STATS)}, percentile_<q>")
    out: list[str] = []
    for s in stats:
        name = str(s).strip()
        match = PERCENTILE.match(name)
        if name not in BASIC_STATS and not (match and 0 <= float(match.group(1)) <= 100):
            raise GdalMcpError(
                "invalid-argument",
                f"unknown statistic {s!r}; use {', '.join(BASIC_STATS)} or "
                "percentile_<q> with q from 0 to 100 (e.g. percentile_90)",
            )
        if name not in out:
            out.append(name)
    return out


# ---------------------------------------------------------------------------------------------- one zone


def _window(ds: Any, bounds: tuple[float, float, float, float]) -> Window | None:
    """The pixels covering `bounds` (floor of the top-left, ceil of the bottom-right, as rasterstats), within
    the raster; None when they miss it."""
    inv = ~ds.transform
    minx, miny, maxx, maxy = bounds
    cols, rows = zip(*(inv @ (x, y) for x, y in ((minx, miny), (minx, maxy), (maxx, miny), (maxx, maxy))), strict=True)
    if not all(math.isfinite(v) for v in cols + rows):
        return None
    c0, r0 = max(0, math.floor(min(cols))), max(0, math.floor(min(rows)))
    c1, r1 = min(ds.width, math.ceil(max(cols))), min(ds.height, math.ceil(max(rows)))
    if c1 <= c0 or r1 <= r0:
        return None
    return Window(c0, r0, c1 - c0, r1 - r0)


def _boxify(geom: Any, ds: Any) -> Any:
    """Points as the pixels they fall in (boxes 1 % smaller than a cell, as rasterstats' boxify_points)."""
    import shapely

    t = ds.transform
    shrink = 0.01 * abs(min(t.a, t.e))
    boxes = []
    for pt in shapely.get_parts(geom):
        col, row = (math.floor(v) for v in ~t @ (pt.x, pt.y))
        x0, y0 = t @ (col, row)
        x1, y1 = t @ (col + 1, row + 1)
        boxes.append(shapely.box(min(x0, x1) + shrink, min(y0, y1) + shrink, max(x0, x1) - shrink, max(y0, y1) - shrink))
    return shapely.MultiPolygon(boxes)


@dataclass
class ZonePart:
    """What one tile (or all of them, merged) holds of one zone: the moments of its valid pixels, its nodata
    pixels, its distinct values with their counts (when kept), its class tally (categorical) and its threshold tally."""

    acc: _Accumulator = field(default_factory=_Accumulator)
    nodata: int = 0
    keys: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    tally: ClassTally | None = None
    thresholds: ThresholdTally | None = None

    def merge(self, other: ZonePart) -> None:
        with np.errstate(invalid="ignore", over="ignore"):
            self.acc.merge(other.acc)
        self.nodata += other.nodata
        self.keys += other.keys
        self.counts += other.counts
        if other.tally is not None:
            if self.tally is None:
                self.tally = ClassTally(other.tally.label)
            self.tally.merge(other.tally)
        if other.thresholds is not None:
            if self.thresholds is None:
                self.thresholds = ThresholdTally(other.thresholds.thresholds)
            self.thresholds.merge(other.thresholds)

    def values(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """The distinct values, sorted, and how many pixels hold each."""
        if not self.keys:
            return np.empty(0, dtype=dtype), np.empty(0, dtype=np.int64)
        keys, inverse = np.unique(np.concatenate(self.keys), return_inverse=True)
        counts = np.zeros(keys.size, dtype=np.int64)
        np.add.at(counts, inverse.ravel(), np.concatenate(self.counts))
        return keys, counts


@dataclass(frozen=True)
class ZonalTile:
    """One raster tile and the zones whose windows reach it (picklable)."""

    path: str
    band: int
    #: (col_off, row_off, width, height) of the tile in the raster's pixels
    window: tuple[int, int, int, int]
    #: (zone number, WKB in the raster's CRS, the zone's window (col_off, row_off, width, height))
    zones: tuple[tuple[int, bytes, tuple[int, int, int, int]], ...]
    all_touched: bool
    keep_values: bool
    categorical: bool
    window_pixels: int
    #: each zone's valid pixels above and at or below these (engine/raster/thresholds.py)
    thresholds: tuple[float, ...] = ()


def zonal_tile(spec: ZonalTile) -> list[tuple[int, ZonePart]]:
    """Each zone's partial results within one tile: its pixels there (the zone's window cut to the tile) read
    in chunks, a pixel taken when the zone's rasterization burns it."""
    col, row, width, height = spec.window
    out = []
    with open_raster(spec.path) as ds:
        areas = pixel_areas(ds) if spec.categorical or spec.thresholds else None
        block = ds.block_shapes[spec.band - 1]
        for number, wkb, (zc, zr, zw, zh) in spec.zones:
            part = ZonePart(
                tally=ClassTally(f"band {spec.band} (under one zone)") if spec.categorical else None,
                thresholds=ThresholdTally(spec.thresholds) if spec.thresholds else None,
            )
            c0, r0 = max(col, zc), max(row, zr)
            c1, r1 = min(col + width, zc + zw), min(row + height, zr + zh)
            geom = shapely.from_wkb(wkb)
            values_parts: list[np.ndarray] = []
            if c1 > c0 and r1 > r0 and not geom.is_empty:
                for sub in iter_windows(c1 - c0, r1 - r0, block, spec.window_pixels):
                    w = Window(c0 + sub.col_off, r0 + sub.row_off, sub.width, sub.height)
                    chunk = ds.read(spec.band, window=w, masked=True)
                    inside = rasterize(
                        [(geom, 1)],
                        out_shape=(int(w.height), int(w.width)),
                        transform=ds.window_transform(w),
                        fill=0,
                        all_touched=spec.all_touched,
                        dtype="uint8",
                    ).astype(bool)
                    data = np.ma.getdata(chunk)
                    invalid = np.ma.getmaskarray(chunk)
                    if np.issubdtype(data.dtype, np.floating):
                        invalid = invalid | np.isnan(data)
                    part.nodata += int(np.count_nonzero(inside & invalid))
                    values = data[inside & ~invalid]
                    pixel = areas.for_window(w) if areas is not None else None
                    if part.tally is not None:
                        part.tally.add(data, ~inside | invalid, pixel)
                    if part.thresholds is not None:
                        part.thresholds.add(data, inside & ~invalid, pixel)
                    with np.errstate(invalid="ignore", over="ignore"):
                        part.acc.add(values, 0)
                    if spec.keep_values and values.size:
                        values_parts.append(values)
            if values_parts:
                keys, counts = np.unique(np.concatenate(values_parts), return_counts=True)
                part.keys, part.counts = [keys], [counts.astype(np.int64)]
            out.append((number, part))
    return out


def _statistics(
    part: ZonePart,
    stats: list[str],
    dtype: np.dtype,
    areas: PixelAreas | None,
    categorical: bool = False,
    thresholds: tuple[float, ...] = (),
) -> dict[str, Any]:
    """The statistics of one zone from its merged partial results; `categorical` adds "classes": {value: {count,
    area_m2, area_ha, fraction}}, fraction of the zone's valid pixels; `thresholds` the fields above_<t>_count …
    at_or_below_<t>_area_share (engine/raster/thresholds.py)."""
    acc = part.acc
    n = acc.n
    keys, counts = part.values(dtype) if part.keys else (np.empty(0, dtype=dtype), np.empty(0, dtype=np.int64))
    cumulative = np.cumsum(counts)

    def at(ranks: list[int]) -> dict[int, np.generic]:
        """The values of the given ranks (0-based) of the zone's sorted valid values."""
        return {r: keys[int(np.searchsorted(cumulative, r, side="right"))] for r in ranks}

    out: dict[str, Any] = {}
    for s in stats:
        if s == "count":
            out[s] = n
        elif s == "nodata":
            out[s] = part.nodata
        elif n == 0:
            out[s] = None
        elif s == "min":
            out[s] = acc.lo
        elif s == "max":
            out[s] = acc.hi
        elif s == "mean":
            out[s] = acc.mean
        elif s == "sum":
            out[s] = acc.total
        elif s == "std":
            out[s] = math.sqrt(acc.m2 / n)
        elif s == "range":
            out[s] = acc.hi - acc.lo
        elif s == "median":
            # np.median: the middle value, or the mean (in the band's type) of the two middle ones
            middle = at(sorted({(n - 1) // 2, n // 2}))
            out[s] = float(np.median(np.array(list(middle.values()), dtype=keys.dtype)))
        elif s == "unique":
            out[s] = int(keys.size)
        elif s == "majority":
            out[s] = float(keys[int(np.argmax(counts))])
        elif s == "minority":
            out[s] = float(keys[int(np.argmin(counts))])
        else:
            q = float(s.split("_", 1)[1])
            out[s] = lerp_percentile(q, n, at(needed_ranks(n, [q])), keys.dtype)
    if categorical:
        tally = part.tally or ClassTally("")
        out["classes"] = tally.as_json(areas is not None and areas.method != "none")
    if thresholds:
        out.update((part.thresholds or ThresholdTally(thresholds)).fields(areas))
    return out


def _clipped(geom: Any, ds: Any, window: tuple[int, int, int, int], clippable: bool) -> Any:
    """A valid polygon (`clippable`) cut to the extent of `window` plus two pixels on every side (the pixels of
    the window burn the same); other geometries as they are."""
    if not clippable:
        return geom
    col, row, width, height = window
    corners = [ds.transform @ (c, r) for c in (col - 2, col + width + 2) for r in (row - 2, row + height + 2)]
    xs, ys = [x for x, _ in corners], [y for _, y in corners]
    box = (min(xs), min(ys), max(xs), max(ys))
    minx, miny, maxx, maxy = geom.bounds
    if box[0] <= minx and box[1] <= miny and maxx <= box[2] and maxy <= box[3]:
        return geom
    return shapely.clip_by_rect(geom, *box)


def zones_statistics(
    path: str,
    ds: Any,
    band: int,
    geoms: list[Any],
    stats: list[str],
    all_touched: bool,
    areas: PixelAreas | None,
    tick: Any = None,
    *,
    categorical: bool = False,
    thresholds: tuple[float, ...] = (),
) -> list[dict[str, Any]]:
    """The statistics of `band` under each geometry (in the raster's CRS), in order, tile by tile.
    `tick(finished)` is called after every tile with the number of these zones finished so far. `areas`: the
    raster's pixel areas, for `categorical` (class areas) and `thresholds`."""
    keep_values = any(s in VALUE_STATS or s.startswith("percentile_") for s in stats)
    dtype = np.dtype(ds.dtypes[band - 1])
    bpp = dtype.itemsize
    plan = tiles.plan(ds.width, ds.height, bytes_per_pixel=bpp)
    side = tiles.tile_side(bpp)  # the plan is a grid of side x side tiles, row by row
    across = math.ceil(ds.width / side)
    assert len(plan) == across * math.ceil(ds.height / side), "tiles.plan is not a regular grid"
    windows: list[Window | None] = []
    geoms = list(geoms)
    for i, geom in enumerate(geoms):
        if geom is not None and not geom.is_empty and "Point" in geom.geom_type:
            geoms[i] = geom = _boxify(geom, ds)
        windows.append(None if geom is None or geom.is_empty else _window(ds, geom.bounds))
    results: list[dict[str, Any] | None] = [None] * len(geoms)
    finished = {"zones": 0}
    for i, win in enumerate(windows):
        if win is None:
            results[i] = _statistics(ZonePart(), stats, dtype, areas, categorical, thresholds)
            finished["zones"] += 1
    # Groups of zones computed together; when values are kept, at most VALUE_PIXELS of zone windows at once.
    groups: list[list[int]] = [[]]
    held = 0
    for i, win in enumerate(windows):
        if win is None:
            continue
        size = int(win.width) * int(win.height)
        if keep_values and groups[-1] and held + size > VALUE_PIXELS:
            groups.append([])
            held = 0
        groups[-1].append(i)
        held += size
    if tick is not None and finished["zones"]:
        tick(finished["zones"])
    for group in groups:
        if not group:
            continue
        reach: dict[int, list[int]] = {}  # tile index -> zones whose windows reach it
        for i in group:
            w = windows[i]
            assert w is not None
            c0, r0 = int(w.col_off), int(w.row_off)
            c1, r1 = c0 + int(w.width) - 1, r0 + int(w.height) - 1
            for tr in range(r0 // side, r1 // side + 1):
                for tc in range(c0 // side, c1 // side + 1):
                    reach.setdefault(tr * across + tc, []).append(i)
        order = sorted(reach)
        remaining = {i: 0 for i in group}  # tiles each zone reaches, then those still to merge
        for t in order:
            for i in reach[t]:
                remaining[i] += 1
        # Polygons reaching several tiles are sent clipped to each (when valid: a clip of an invalid one could
        # burn other pixels).
        clippable = {
            i: remaining[i] > 1 and geoms[i].geom_type.endswith("Polygon") and bool(shapely.is_valid(geoms[i])) for i in group
        }
        specs = []
        for t in order:
            tile = plan[t]
            zones = []
            for i in reach[t]:
                w = windows[i]
                assert w is not None
                zones.append(
                    (
                        i,
                        shapely.to_wkb(_clipped(geoms[i], ds, tile.window, clippable[i])),
                        (int(w.col_off), int(w.row_off), int(w.width), int(w.height)),
                    )
                )
            specs.append(
                ZonalTile(
                    path=path,
                    band=band,
                    window=tile.window,
                    zones=tuple(zones),
                    all_touched=all_touched,
                    keep_values=keep_values,
                    categorical=categorical,
                    window_pixels=WINDOW_PIXELS,
                    thresholds=thresholds,
                )
            )
        parts = {i: ZonePart() for i in group}

        def arrived(results_: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
            for result in results_:
                if tick is not None:
                    tick(finished["zones"])  # after every tile (on a cluster, where a cancel arrives)
                yield result

        # Each zone's partial results merged in tile order: the same floats whichever order tiles finished in.
        with tiles.mapped(zonal_tile, specs) as done:
            for _, tile_parts in tiles.in_order(arrived(done)):
                for i, part in tile_parts:
                    parts[i].merge(part)
                    remaining[i] -= 1
                    if remaining[i] == 0:
                        results[i] = _statistics(parts.pop(i), stats, dtype, areas, categorical, thresholds)
                        finished["zones"] += 1
        if tick is not None:
            tick(finished["zones"])
    return [r if r is not None else {} for r in results]


# ---------------------------------------------------------------------------------------------- all zones


def _json_value(v: Any) -> Any:
    """A table cell for the result: plain Python, non-finite floats as strings."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, bytes):
        return v.hex()
    return v


@wrap_gdal_errors
def zonal_stats(
    raster: str,
    zones: str,
    *,
    layer: str | None = None,
    band: int = 1,
    stats: list[str] | None = None,
    all_touched: bool = False,
    id_field: str | None = None,
    categorical: bool = False,
    thresholds: list[float] | None = None,
    limit: int = 200,
    dst: str | None = None,
    format: str | None = None,
    progress: Progress = no_progress,
) -> tuple[ZonalResult, list[str]]:
    """Statistics of `band` of `raster` under each feature of `zones`; with `dst`, also a copy of the zones
    carrying the statistics as attributes.

    `categorical`: each zone also gets "classes", {value: {count, area_m2, area_ha, fraction}} (fraction of the
    zone's valid pixels; areas as raster_stats categorical computes them), written to `dst` as one JSON text
    field "classes". Without `stats`, only count is computed besides.

    `thresholds`: each zone also gets, per threshold t, the count, share, area (m², ha) and area share of its valid
    pixels > t and <= t, as the fields above_<t>_count … at_or_below_<t>_area_share (engine/raster/thresholds.py).
    """
    names = check_stats((["count"] if categorical else DEFAULT_STATS) if stats is None else stats)
    levels = tuple(check_thresholds(thresholds))
    level_fields = field_names(list(levels))
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise GdalMcpError(
            "invalid-argument", f"limit must be an integer from 0 to {MAX_LIMIT}; pass dst to get every zone in a file"
        )
    warnings: list[str] = []
    driver = vector_driver(dst, format) if dst is not None else None
    name = choose_layer(zones, layer)
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        info = pyogrio.read_info(zones, layer=name)
    fields = list(info["fields"])
    if id_field is not None and id_field not in fields:
        raise GdalMcpError("not-found", f"id_field {id_field!r} not found; fields are: {', '.join(fields) or '(none)'}")
    with open_raster(raster) as ds:
        select_bands(ds, [band])
        dtype = np.dtype(ds.dtypes[band - 1])
        if dtype.kind not in "uif":
            raise GdalMcpError("unsupported", f"band {band} is {dtype.name}; zonal statistics need real-valued bands")
        zones_crs = layer_crs(info.get("crs"))
        raster_crs = ds.crs if ds.crs and ds.crs.to_wkt() else None
        if zones_crs is not None and raster_crs is None:
            warnings.append("the raster has no CRS: the zones' coordinates are taken as the raster's own")
        elif zones_crs is None and raster_crs is not None:
            warnings.append("the zones have no CRS: their coordinates are taken to be in the raster's CRS")
        trans = transformer(zones_crs, raster_crs)
        if raster_crs is not None and raster_crs.is_geographic and not categorical:
            # each pixel counts once, but a lon/lat pixel's ground area shrinks with cos(latitude)
            lat = sorted(abs(v) for v in (ds.bounds.bottom, ds.bounds.top))
            lat_lo, lat_hi = (0.0 if ds.bounds.bottom < 0 < ds.bounds.top else lat[0]), min(lat[1], 89.9)
            ratio = math.cos(math.radians(lat_lo)) / max(math.cos(math.radians(lat_hi)), 1e-9)
            if ratio > 1.02:
                warnings.append(
                    f"lon/lat raster: each pixel counts once, while pixel areas differ up to {ratio:.2f}x between "
                    f"latitudes {lat_lo:g} and {lat_hi:g} here, so means are not area-weighted; for area-weighted "
                    "means use raster_stats weights='area' (a bbox), cube_series zones= (netCDF/HDF5/Zarr), or "
                    "reproject to an equal-area CRS first"
                )
        areas = None
        if categorical:
            check_categorical_dtype(dtype, band)
        if categorical or levels:
            areas = pixel_areas(ds)
            warnings.extend(areas.warnings)
        rows: list[dict[str, Any]] = []
        state = {"done": 0, "dropped": 0, "missing": 0}
        columns = None if dst is not None else ([id_field] if id_field else [])

        with read_layer(zones, layer=name, columns=columns, batch_size=ZONE_BATCH) as st:
            if st.geometry_column is None:
                raise GdalMcpError(
                    "invalid-argument", f"layer '{name}' has no geometries; zones must be polygons (or points/lines)"
                )
            total = st.total

            def compute(batch: pa.RecordBatch) -> list[dict[str, Any]]:
                raw = geometries(batch)
                state["missing"] += int(np.count_nonzero(shapely.is_missing(raw) | shapely.is_empty(raw)))
                geoms, dropped = reproject_geometries(raw, trans)
                state["dropped"] += dropped
                ids = batch.column(id_field).to_pylist() if id_field else None
                before = state["done"]

                def tick(finished: int) -> None:
                    done = before + finished
                    progress(
                        min(0.99, done / total) if total else 0.5,
                        f"zonal statistics: {done}" + (f"/{total}" if total else "") + " zones",
                    )

                out = zones_statistics(
                    raster, ds, band, list(geoms), names, all_touched, areas, tick, categorical=categorical, thresholds=levels
                )
                for i, values in enumerate(out):
                    index = state["done"]
                    state["done"] += 1
                    if len(rows) < limit:
                        rows.append(
                            {
                                "id": _json_value(ids[i] if ids is not None else index),
                                **{k: _json_value(v) for k, v in values.items()},
                            }
                        )
                return out

            if dst is None:
                for batch in st.batches:
                    room = limit - len(rows)
                    if room <= 0 and total is not None:
                        state["done"] = total
                        break
                    if room > 0:
                        compute(batch.slice(0, room))
                    state["done"] += max(0, batch.num_rows - max(room, 0))
                row_count = state["done"]
            else:
                added = names + (["classes"] if categorical else []) + [n for n, _ in level_fields]
                replaced = [s for s in added if s in fields]
                if replaced:
                    warnings.append(
                        f"the zones' field(s) {', '.join(replaced)} are replaced by the statistics of the same name in dst"
                    )
                schema, batches = _with_stats(st, names, compute, categorical, level_fields)
                failure: list[BaseException] = []

                def guarded() -> Iterator[pa.RecordBatch]:
                    try:
                        yield from batches
                    except BaseException as e:
                        failure.append(e)
                        raise

                out_layer = Path(dst).stem  # type: ignore[arg-type]
                try:
                    write_layer(
                        dst,
                        schema,
                        guarded(),
                        driver=driver,  # type: ignore[arg-type]
                        layer=out_layer,
                        crs=info.get("crs"),
                        geometry_type=st.geometry_type,
                    )
                except Exception:
                    if failure:
                        raise failure[0] from None
                    raise
                row_count = state["done"]
    if state["missing"]:
        warnings.append(f"{state['missing']} zone(s) have no geometry; their statistics are empty")
    if state["dropped"]:
        warnings.append(f"{state['dropped']} zone(s) could not be projected to the raster's CRS; their statistics are empty")
    summary = None
    if dst is not None:
        layers = [n for n, _ in list_layers(dst)]
        summary = summarize_vector(dst, out_layer if out_layer in layers else layers[0])
    progress(1.0, f"zonal statistics of {row_count} zones")
    result = ZonalResult(
        rows=rows,
        row_count=row_count,
        truncated=row_count > len(rows),
        remaining=row_count - len(rows),
        stats=names,
        band=band,
        summary=summary,
        warnings=warnings,
    )
    return result, warnings


def _with_stats(
    st: Any, names: list[str], compute: Any, categorical: bool = False, level_fields: list[tuple[str, bool]] | None = None
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The zones' schema plus one column per statistic (replacing a field of the same name), and the batches;
    categorical adds the text field "classes" (the JSON of the zone's classes), thresholds their fields."""
    types = {s: (pa.int64() if s in INTEGER_STATS else pa.float64()) for s in names}
    types.update((name, pa.int64() if is_int else pa.float64()) for name, is_int in level_fields or [])
    extra = [pa.field("classes", pa.string())] if categorical else []
    kept = [f for f in st.schema if f.name not in types and not (categorical and f.name == "classes")]
    schema = pa.schema(kept + [pa.field(s, t) for s, t in types.items()] + extra)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in st.batches:
            values = compute(batch)
            arrays = [batch.column(f.name) for f in kept]
            arrays += [pa.array([v[s] for v in values], type=t) for s, t in types.items()]
            if categorical:
                arrays.append(pa.array([json.dumps(v["classes"]) for v in values], type=pa.string()))
            yield pa.record_batch(arrays, schema=schema)

    return schema, batches()
