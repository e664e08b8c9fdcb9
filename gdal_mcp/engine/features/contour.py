"""Contour lines and filled contours of a DEM, like gdal_contour, computed with contourpy in row strips.

gdal_contour's conventions, kept here:
- levels are `base + k * interval` (-i, -off) or the fixed `levels` (-fl);
- a pixel value exactly on a level counts as above it (GDAL nudges such values up by 1e-6, so lines
  never pass through pixel centres); contours are traced at `level - 1e-6`, which classifies the same;
- the grid is the pixel centres, extended by half a pixel to the raster edge with the edge values
  (GDAL's border squares), so lines run to the raster edge and polygons cover the whole raster;
- lines mode writes one LineString per contour line with fields ID and `attribute` (the level);
  polygons mode (-p) writes one MultiPolygon per band between two levels with fields ID, amin, amax;
- nodata pixels (the band's, NaN, or `nodata`) are left out.

Memory: the band is read in full-width strips of about STRIP_PIXELS pixels that overlap by one row. A
line crossing a strip border ends on the shared row in both strips at the same edge crossing; the
pieces are joined there, so each contour line is one feature, and a finished line is written at once.
Only the lines still open at the current border are held. Polygons (like gdal_contour's own polygon
writer) are held per band until the end and merged across strips, so their memory grows with the output.

Differences from gdal_contour, by design or known:
- next to nodata pixels GDAL extends lines half a pixel towards the nodata pixel; here a cell with a
  nodata corner is not contoured, so lines stop one half-cell earlier;
- polygons mode: the lowest band's amin is the level below the data minimum (interval mode) or the
  data minimum (fixed levels), and the highest band's amax is the level above the data maximum or the
  data maximum; gdal_contour 3.6 writes 0 and the data type's maximum there.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from rasterio.windows import Window

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.engine.vector.opening import list_layers
from gdal_mcp.engine.vector.stream import summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

# GDAL's nudge of a pixel value equal to a level (marching squares' fudge).
FUDGE = 0.0
# Pixels per strip (tests lower it to exercise the joins).
STRIP_PIXELS = 2 * 1024 * 1024
MAX_LEVELS = 100_000
BATCH_SIZE = 4096
WKB = {b"ARROW:extension:name": b"geoarrow.wkb"}


# ---------------------------------------------------------------------------------------------- levels

def _levels_between(lo: float, hi: float, interval: float | None, base: float, fixed: list[float] | None) -> list[float]:
    """The levels (sorted) in [lo, hi]."""
    if fixed is not None:
        return [v for v in fixed if lo <= v <= hi]
    assert interval is not None
    k0, k1 = math.ceil((lo - base) / interval), math.floor((hi - base) / interval)
    if k1 - k0 + 1 > MAX_LEVELS:
        raise GdalMcpError("invalid-argument", f"interval {interval:g} gives {k1 - k0 + 1} levels over the data range "
                           f"{lo:g}..{hi:g}; use a larger interval (at most {MAX_LEVELS} levels)")
    return [base + k * interval for k in range(k0, k1 + 1)]


def _check_levels(interval: float | None, levels: list[float] | None) -> list[float] | None:
    if (interval is None) == (levels is None):
        raise GdalMcpError("invalid-argument", "give either interval (levels every interval units, like gdal_contour "
                           "-i) or levels (fixed levels, like -fl), not both and not neither")
    if interval is not None:
        if not math.isfinite(interval) or interval <= 0:
            raise GdalMcpError("invalid-argument", f"interval must be a positive number (got {interval!r})")
        return None
    assert levels is not None
    if not levels or not all(math.isfinite(v) for v in levels):
        raise GdalMcpError("invalid-argument", "levels must be a non-empty list of finite numbers, e.g. [100, 200, 500]")
    if len(levels) > MAX_LEVELS:
        raise GdalMcpError("invalid-argument", f"at most {MAX_LEVELS} levels")
    return sorted(set(float(v) for v in levels))


# ---------------------------------------------------------------------------------------------- strips

class _Strip:
    """One strip of the padded grid: z (masked), pixel-space x/y of its points, and its border rows."""

    def __init__(self, z: np.ma.MaskedArray, x: np.ndarray, y: np.ndarray, top: float | None, bottom: float | None):
        self.z, self.x, self.y, self.top, self.bottom = z, x, y, top, bottom


def _strips(ds: Any, band: int, nodata: float | None, strip_rows: int) -> Iterator[tuple[_Strip, float]]:
    """Strips of rows sharing one row with the next, padded with the edge values to the raster edges."""
    width, height = ds.width, ds.height
    x = np.concatenate([[0.0], np.arange(width) + 0.5, [float(width)]])
    r0 = 0
    while True:
        r1 = min(height - 1, r0 + strip_rows)
        data = ds.read(band, window=Window(0, r0, width, r1 - r0 + 1), masked=False).astype(np.float64)
        invalid = np.isnan(data)
        if nodata is not None and not math.isnan(nodata):
            invalid |= data == nodata
        data = np.concatenate([data[:, :1], data, data[:, -1:]], axis=1)
        invalid = np.concatenate([invalid[:, :1], invalid, invalid[:, -1:]], axis=1)
        y = np.arange(r0, r1 + 1) + 0.5
        if r0 == 0:
            data, invalid, y = np.vstack([data[:1], data]), np.vstack([invalid[:1], invalid]), np.concatenate([[0.0], y])
        last = r1 == height - 1
        if last:
            data, invalid = np.vstack([data, data[-1:]]), np.vstack([invalid, invalid[-1:]])
            y = np.concatenate([y, [float(height)]])
        z = np.ma.MaskedArray(data, mask=invalid if invalid.any() else np.ma.nomask)
        yield _Strip(z, x, y, None if r0 == 0 else r0 + 0.5, None if last else r1 + 0.5), (r1 + 1) / height
        if last:
            return
        r0 = r1


def _generator(strip: _Strip) -> Any:
    import contourpy

    return contourpy.contour_generator(strip.x, strip.y, strip.z, name="serial", corner_mask=True,
                                       line_type=contourpy.LineType.Separate,
                                       fill_type=contourpy.FillType.OuterOffset)


def _range(z: np.ma.MaskedArray) -> tuple[float, float] | None:
    if z.count() == 0:
        return None
    return float(z.min()), float(z.max())


# ---------------------------------------------------------------------------------------------- lines

class _Chain:
    """A contour line being assembled from strip pieces (point arrays joined end to start)."""

    __slots__ = ("level", "index", "parts", "merged")

    def __init__(self, level: float, index: int, points: np.ndarray):
        self.level, self.index, self.parts = level, index, [points]
        self.merged = False  # True once joined into another chain

    @property
    def start(self) -> np.ndarray:
        return self.parts[0][0]

    @property
    def end(self) -> np.ndarray:
        return self.parts[-1][-1]

    def reverse(self) -> None:
        self.parts = [p[::-1] for p in reversed(self.parts)]

    def ending_at(self, key: tuple[int, int], row: float | None) -> None:
        """Orient the chain so that it ends at the border crossing `key`."""
        if not (_on(row, self.end) and _key(self.index, self.end) == key):
            self.reverse()

    def points(self) -> np.ndarray:
        return self.parts[0] if len(self.parts) == 1 else np.concatenate(self.parts)

    def closed(self) -> bool:
        return len(self.parts) > 1 and np.array_equal(self.start, self.end) or (
            len(self.parts) == 1 and len(self.parts[0]) > 2 and np.array_equal(self.start, self.end))


def _key(level: int, point: np.ndarray) -> tuple[int, int]:
    """A border crossing: the level and the grid edge it crosses (x between two pixel centres)."""
    return level, int(math.floor(point[0] - 0.5))


def _on(row: float | None, point: np.ndarray) -> bool:
    return row is not None and abs(point[1] - row) < 1e-9


def _attach(piece: np.ndarray, level: float, li: int, top: float | None,
            open_ends: dict[tuple[int, int], _Chain]) -> _Chain:
    """The chain `piece` belongs to: a new one, or chains open on the strip's top border joined through it."""
    k_start = _key(li, piece[0]) if _on(top, piece[0]) else None
    k_end = _key(li, piece[-1]) if _on(top, piece[-1]) else None
    a = open_ends.pop(k_start, None) if k_start else None
    b = open_ends.pop(k_end, None) if k_end else None
    if a is None and b is None:
        return _Chain(level, li, piece)
    if a is None:  # only the piece's end is attached: walk it the other way
        a, b, piece, k_start, k_end = b, None, piece[::-1], k_end, k_start
    assert a is not None and k_start is not None
    a.ending_at(k_start, top)
    a.parts.append(piece[1:])  # the border point is already the chain's end
    if b is None:
        return a
    if b is a:  # the piece closes a ring
        a.parts[-1] = np.vstack([a.parts[-1][:-1], a.start[None, :]])
        return a
    assert k_end is not None
    b.ending_at(k_end, top)
    b.reverse()  # b now starts at the piece's end
    a.parts[-1] = a.parts[-1][:-1]
    a.parts.extend(b.parts)
    b.merged, b.parts = True, []
    if _on(top, a.end):  # b's far end was open on the same border: it is a's now
        far = _key(li, a.end)
        if open_ends.get(far) is b:
            open_ends[far] = a
    return a


def _lines(ds: Any, band: int, nodata: float | None, interval: float | None, base: float, fixed: list[float] | None,
           strip_rows: int, progress: Progress) -> Iterator[tuple[float, np.ndarray]]:
    """(level, pixel-space points) of every contour line, each whole, in the order they are finished."""
    open_ends: dict[tuple[int, int], _Chain] = {}  # border crossing -> the chain ending there
    index: dict[float, int] = {}
    for strip, done in _strips(ds, band, nodata, strip_rows):
        rng = _range(strip.z)
        found = _levels_between(rng[0], rng[1], interval, base, fixed) if rng else []
        touched: dict[int, _Chain] = {}
        if found:
            gen = _generator(strip)
            for level in found:
                li = index.setdefault(level, len(index))
                for piece in gen.lines(level - FUDGE):
                    if len(piece) >= 2:
                        chain = _attach(piece, level, li, strip.top, open_ends)
                        touched[id(chain)] = chain
        for chain in open_ends.values():  # (a chain left open without a continuation: finish it)
            touched.setdefault(id(chain), chain)
        open_ends = {}
        for chain in touched.values():
            if chain.merged:
                continue
            ends = [p for p in (chain.start, chain.end) if _on(strip.bottom, p)]
            if ends and not chain.closed():
                for p in ends:
                    open_ends[_key(chain.index, p)] = chain
            else:
                yield chain.level, chain.points()
        progress(0.9 * done, f"contoured rows up to {round(done * ds.height)}/{ds.height}")


# ---------------------------------------------------------------------------------------------- polygons

def _bands(lo: float, hi: float, interval: float | None, base: float,
           fixed: list[float] | None) -> list[tuple[int, float | None, float | None]]:
    """(band id, lower level, upper level) of the bands between levels that [lo, hi] reaches; None: unbounded."""
    if fixed is None:
        assert interval is not None
        k0, k1 = math.floor((lo - base) / interval), math.floor((hi - base) / interval)
        if k1 - k0 + 1 > MAX_LEVELS:
            raise GdalMcpError("invalid-argument", f"interval {interval:g} gives {k1 - k0 + 1} bands over the data "
                               f"range {lo:g}..{hi:g}; use a larger interval")
        return [(k, base + k * interval, base + (k + 1) * interval) for k in range(k0, k1 + 1)]
    import bisect

    i0, i1 = bisect.bisect_right(fixed, lo), bisect.bisect_right(fixed, hi)
    return [(i, fixed[i - 1] if i > 0 else None, fixed[i] if i < len(fixed) else None) for i in range(i0, i1 + 1)]


def _polygons(ds: Any, band: int, nodata: float | None, interval: float | None, base: float,
              fixed: list[float] | None, strip_rows: int,
              progress: Progress) -> tuple[dict[int, list[Any]], dict[int, tuple[float | None, float | None]],
                                           tuple[float, float] | None]:
    """Polygon pieces (pixel space) per band, the bands' levels, and the data range."""
    import shapely

    pieces: dict[int, list[Any]] = {}
    bounds: dict[int, tuple[float | None, float | None]] = {}
    lo_hi: tuple[float, float] | None = None
    for strip, done in _strips(ds, band, nodata, strip_rows):
        rng = _range(strip.z)
        if rng is None:
            continue
        lo_hi = rng if lo_hi is None else (min(lo_hi[0], rng[0]), max(lo_hi[1], rng[1]))
        gen = _generator(strip)
        for bid, lower, upper in _bands(rng[0], rng[1], interval, base, fixed):
            bounds[bid] = (lower, upper)
            low = lower - FUDGE if lower is not None else rng[0] - 1.0
            high = upper - FUDGE if upper is not None else rng[1] + 1.0
            points, offsets = gen.filled(low, high)
            for pts, offs in zip(points, offsets, strict=True):
                rings = [np.round(pts[offs[i]:offs[i + 1]], 9) for i in range(len(offs) - 1)]
                polygon = shapely.Polygon(rings[0], rings[1:])
                if not polygon.is_empty:
                    pieces.setdefault(bid, []).append(polygon)
        progress(0.7 * done, f"contoured rows up to {round(done * ds.height)}/{ds.height}")
    return pieces, bounds, lo_hi


# ---------------------------------------------------------------------------------------------- writing

def _to_geo(transform: Any, points: np.ndarray) -> np.ndarray:
    a, b, c, d, e, f = transform.a, transform.b, transform.c, transform.d, transform.e, transform.f
    x, y = points[:, 0], points[:, 1]
    return np.column_stack([a * x + b * y + c, d * x + e * y + f])


def _line_batches(lines: Iterator[tuple[float, np.ndarray]], transform: Any, schema: pa.Schema,
                  counter: list[int]) -> Iterator[pa.RecordBatch]:
    import shapely

    ids: list[int] = []
    levels: list[float] = []
    geoms: list[Any] = []

    def batch() -> pa.RecordBatch:
        wkb = shapely.to_wkb(np.array(geoms, dtype=object), flavor="iso")
        out = pa.record_batch([pa.array(ids, pa.int32()), pa.array(levels, pa.float64()),
                               pa.array(wkb, pa.binary())], schema=schema)
        ids.clear()
        levels.clear()
        geoms.clear()
        return out

    for level, points in lines:
        ids.append(counter[0])
        counter[0] += 1
        levels.append(level)
        geoms.append(shapely.LineString(_to_geo(transform, points)))
        if len(geoms) >= BATCH_SIZE:
            yield batch()
    if geoms:
        yield batch()


@wrap_gdal_errors
def contour(src: str, dst: str, *, interval: float | None = None, levels: list[float] | None = None,
            base: float = 0.0, band: int = 1, polygons: bool = False, attribute: str = "elev",
            nodata: float | None = None, format: str | None = None, output_layer: str | None = None,
            progress: Progress = no_progress) -> tuple[VectorSummary, list[str]]:
    """Contour lines (or polygons between levels) of band `band` of `src`, written to the vector file `dst`."""
    import shapely

    warnings: list[str] = []
    fixed = _check_levels(interval, levels)
    if not math.isfinite(base):
        raise GdalMcpError("invalid-argument", f"base must be a finite number (got {base!r})")
    if not isinstance(attribute, str) or not attribute.strip():
        raise GdalMcpError("invalid-argument", "attribute must be a non-empty field name")
    if interval is None and base != 0:
        warnings.append("base only shifts interval levels; ignored with fixed levels")
    driver = vector_driver(dst, format)
    layer = output_layer or "contour"
    with open_raster(src) as ds:
        select_bands(ds, [band])
        if ds.dtypes[band - 1].startswith("complex"):
            raise GdalMcpError("unsupported", "complex bands cannot be contoured; convert the raster first")
        if ds.transform.is_identity and not (ds.crs and ds.crs.to_wkt()):
            warnings.append("the raster has no georeferencing: contours are in pixel coordinates")
        band_nodata = ds.nodatavals[band - 1] if nodata is None else float(nodata)
        strip_rows = max(1, STRIP_PIXELS // max(1, ds.width))
        crs = ds.crs.to_wkt() if ds.crs and ds.crs.to_wkt() else None
        counter = [0]
        if not polygons:
            schema = pa.schema([pa.field("ID", pa.int32()), pa.field(attribute, pa.float64()),
                                pa.field("geometry", pa.binary(), metadata=WKB)])
            lines = _lines(ds, band, band_nodata, interval, base, fixed, strip_rows, progress)
            write_layer(dst, schema, _line_batches(lines, ds.transform, schema, counter), driver=driver, layer=layer,
                        crs=crs, geometry_type="LineString")
        else:
            pieces, bounds, lo_hi = _polygons(ds, band, band_nodata, interval, base, fixed, strip_rows, progress)
            schema = pa.schema([pa.field("ID", pa.int32()), pa.field("amin", pa.float64()),
                                pa.field("amax", pa.float64()), pa.field("geometry", pa.binary(), metadata=WKB)])
            ids: list[int] = []
            amin: list[float] = []
            amax: list[float] = []
            geoms: list[Any] = []
            t = ds.transform
            for n, bid in enumerate(sorted(pieces)):
                merged = shapely.unary_union(shapely.make_valid(np.array(pieces.pop(bid), dtype=object)))
                parts = [g for g in shapely.get_parts(merged) if g.geom_type == "Polygon" and not g.is_empty]
                if not parts:
                    continue
                lower, upper = bounds[bid]
                assert lo_hi is not None
                ids.append(len(ids))
                amin.append(lower if lower is not None else lo_hi[0])
                amax.append(upper if upper is not None else lo_hi[1])
                geoms.append(shapely.transform(shapely.MultiPolygon(parts), lambda p: _to_geo(t, p)))
                progress(0.7 + 0.25 * (n + 1) / max(1, len(bounds)), f"merged band {n + 1}/{len(bounds)}")
            counter[0] = len(ids)
            batch = pa.record_batch([pa.array(ids, pa.int32()), pa.array(amin, pa.float64()),
                                     pa.array(amax, pa.float64()),
                                     pa.array(shapely.to_wkb(np.array(geoms, dtype=object), flavor="iso")
                                              if geoms else [], pa.binary())], schema=schema)
            write_layer(dst, schema, iter([batch]), driver=driver, layer=layer, crs=crs, geometry_type="MultiPolygon")
    if counter[0] == 0:
        warnings.append("no contour: no level falls within the data range" if not polygons else
                        "no polygon: the band has no valid pixel")
    progress(1.0, f"wrote {counter[0]} {'polygons' if polygons else 'contour lines'}")
    names = [n for n, _ in list_layers(dst)]
    return summarize_vector(dst, layer if layer in names else names[0]), warnings

