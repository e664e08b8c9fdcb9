"""Exact band statistics, streamed window by window (never the values stored in the file).

`band_statistics` gives min/max/mean/std/sum in one pass (raster_info uses it). `raster_stats` adds exact
percentiles and histograms without holding the pixels: each valid value is mapped to an unsigned key that
sorts like the value (its bits, with the sign handled), and the order statistics the percentiles need are
found by radix selection, 16 bits per pass. 8- and 16-bit bands are done in one pass (a full bincount);
32-bit bands in two; 64-bit bands in at most four, usually fewer (once a candidate range holds few enough
values, they are collected and sorted).

Each pass of `raster_stats` is a map over tiles (engine/tiles.py; `stats_first_tile`, then `stats_refine_tile`,
run wherever the executor runs them) returning partial results merged in tile-index order (tiles.in_order): key
histograms, value histograms, candidate counts and collected keys add up (integers: any order would do), and the
floats (the per-tile moments: count, mean, M2, sum, min, max; area-weighted histograms and moments; threshold
areas) are the same whichever order the tiles finished in.

`thresholds` (engine/raster/thresholds.py) are tallied in the first pass; `weights="area"` (engine/raster/
weighted.py) adds, beside each histogram of key counts, one of summed pixel areas, and the radix selection
looks for the digit where the cumulative area reaches q% of the total instead of the rank.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import rasterio
from rasterio.enums import MaskFlags
from rasterio.windows import Window

from gdal_mcp.engine import tiles
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster import region
from gdal_mcp.engine.raster.dimensions import band_dimensions
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.order_keys import (
    bincount,
    check_bins,
    check_percentiles,
    check_real,
    from_keys,
    lerp_percentile,
    needed_ranks,
    percent_key,
    to_keys,
)
from gdal_mcp.engine.raster.pixel_areas import PixelAreas, pixel_areas
from gdal_mcp.engine.raster.region import bbox_window, read_bands, select_bands
from gdal_mcp.engine.raster.thresholds import ThresholdTally, check_thresholds
from gdal_mcp.engine.raster.weighted import SPREAD_HINT, WEIGHTS, WeightedMoments, area_spread, first_reaching
from gdal_mcp.engine.raster.windows import count_windows, iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import BandStatistics, BandStatsDetail, Histogram, RasterStatsResult


@dataclass
class _Accumulator:
    """Running count/mean/M2 (Chan et al.), min, max and sum for one band."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    total: float = 0.0
    lo: float = np.inf
    hi: float = -np.inf
    invalid: int = 0

    def add(self, values: np.ndarray, invalid: int) -> None:
        self.invalid += invalid
        k = values.size
        if k == 0:
            return
        v = values.astype(np.float64, copy=False)
        mean_b = float(v.mean())
        m2_b = float(((v - mean_b) ** 2).sum())
        delta = mean_b - self.mean
        n = self.n + k
        self.mean += delta * k / n
        self.m2 += m2_b + delta * delta * self.n * k / n
        self.n = n
        self.total += float(v.sum())
        self.lo = min(self.lo, float(v.min()))
        self.hi = max(self.hi, float(v.max()))

    def merge(self, other: _Accumulator) -> None:
        """Add another accumulator's values (Chan et al.'s pairwise update, as `add` does per chunk)."""
        self.invalid += other.invalid
        k = other.n
        if k == 0:
            return
        delta = other.mean - self.mean
        n = self.n + k
        self.mean += delta * k / n
        self.m2 += other.m2 + delta * delta * self.n * k / n
        self.n = n
        self.total += other.total
        self.lo = min(self.lo, other.lo)
        self.hi = max(self.hi, other.hi)

    def result(self) -> BandStatistics:
        total = self.n + self.invalid
        if self.n == 0:
            return BandStatistics(
                min=None, max=None, mean=None, std=None, sum=None, valid_count=0, nodata_count=self.invalid, valid_percent=0.0
            )
        return BandStatistics(
            min=self.lo,
            max=self.hi,
            mean=self.mean,
            std=float(np.sqrt(self.m2 / self.n)),
            sum=self.total,
            valid_count=self.n,
            nodata_count=self.invalid,
            valid_percent=100.0 * self.n / total if total else 0.0,
        )


def invalid_pixels(chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The data of a (masked) band chunk and its invalid pixels (mask or NaN), None when all are valid."""
    data = np.ma.getdata(chunk)
    mask = np.ma.getmask(chunk)
    invalid: np.ndarray | None = None if mask is np.ma.nomask else np.asarray(mask)
    if np.issubdtype(data.dtype, np.floating):
        nan = np.isnan(data)
        invalid = nan if invalid is None else invalid | nan
    if invalid is not None and not invalid.any():
        invalid = None
    return data, invalid


def valid_values(chunk: np.ndarray) -> tuple[np.ndarray, int]:
    """Valid pixels of a masked band chunk (mask and NaN excluded) and how many were invalid."""
    data, invalid = invalid_pixels(chunk)
    if invalid is None:
        return np.ascontiguousarray(data).ravel(), 0
    values = data[~invalid]
    return values, int(data.size - values.size)


def valid_weighted(chunk: np.ndarray, areas: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None, int]:
    """valid_values, with the area of each valid pixel (`areas` as PixelAreas.for_window gives them; None: none)."""
    if areas is None:
        values, count = valid_values(chunk)
        return values, None, count
    data, invalid = invalid_pixels(chunk)
    full = np.broadcast_to(areas, data.shape)
    if invalid is None:
        return np.ascontiguousarray(data).ravel(), np.array(full, dtype=np.float64).ravel(), 0
    return data[~invalid], full[~invalid], int(np.count_nonzero(invalid))


def _chunks(
    ds, bands: list[int], window: Window | None, window_pixels: int | None = None
) -> Iterator[tuple[int, int, Window, np.ndarray]]:
    """(i, n, its window, chunk of shape (len(bands), h, w)) over `window` (default: all), in strips of whole blocks.

    The next chunk is read (by GDAL, which releases the GIL) while the caller works on this one. Bands
    with neither nodata nor a mask are read as plain arrays: no mask to read or test. Otherwise chunks
    are masked arrays, as `ds.read(masked=True)` gives them.
    """
    width = int(window.width) if window else ds.width
    height = int(window.height) if window else ds.height
    col0 = int(window.col_off) if window else 0
    row0 = int(window.row_off) if window else 0
    block = ds.block_shapes[0] if ds.block_shapes else (256, 256)
    # All bands are read together, so a window holds DEFAULT_WINDOW_PIXELS pixels summed over bands
    # (region's, as iter_chunks uses it), or `window_pixels`.
    budget = max(1, (window_pixels or region.DEFAULT_WINDOW_PIXELS) // max(1, len(bands)))
    n = max(1, count_windows(width, height, block, budget))
    masked = any(ds.mask_flag_enums[b - 1] != [MaskFlags.all_valid] for b in bands)
    windows = (Window(w.col_off + col0, w.row_off + row0, w.width, w.height) for w in iter_windows(width, height, block, budget))

    def read(w: Window) -> np.ndarray:
        return read_bands(ds, bands, window=w, masked=masked)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="stats-read") as pool:
        current = next(windows)
        ahead = pool.submit(read, current)
        for i in range(n):
            chunk = ahead.result()
            following = next(windows, None)
            if following is not None:
                ahead = pool.submit(read, following)
            yield i, n, current, chunk
            if following is not None:
                current = following


def band_statistics(
    ds, bands: list[int], *, window: Window | None = None, progress: Progress = no_progress
) -> dict[int, BandStatistics]:
    """Exact min/max/mean/std/sum and valid counts of `bands`, honouring nodata and masks."""
    acc = {b: _Accumulator() for b in bands}
    for i, n_windows, _, chunk in _chunks(ds, bands, window):
        for j, b in enumerate(bands):
            values, invalid = valid_values(chunk[j])
            acc[b].add(values, invalid)
        progress((i + 1) / n_windows, f"statistics: window {i + 1}/{n_windows}")
    return {b: a.result() for b, a in acc.items()}


DIGIT_BITS = 16
COLLECT_LIMIT = 1 << 16  # candidate values kept in memory per order statistic


@dataclass
class _Group:
    """Values whose key starts with `prefix` (the top `known` bits): the candidates for some ranks (or, weighted,
    some percentiles' target weights)."""

    prefix: int
    below: int  # valid values with a smaller key
    count: int
    ranks: list[int]
    counts: np.ndarray | None = None  # histogram of the next 16 key bits, when refining
    chunks: list[np.ndarray] = field(default_factory=list)  # the keys themselves, when collecting
    # weighted: the weight of the smaller keys, the (percentile, target weight) pairs, the summed weights of the next
    # 16 key bits (refining) or each collected key's weight (collecting)
    below_weight: float = 0.0
    targets: list[tuple[float, float]] = field(default_factory=list)
    weights: np.ndarray | None = None
    weight_chunks: list[np.ndarray] = field(default_factory=list)


class _BandWork:
    """Everything raster_stats accumulates for one band across passes."""

    def __init__(
        self,
        index: int,
        dtype: np.dtype,
        percentiles: list[float],
        bins: int | None,
        weighted: bool = False,
        thresholds: tuple[float, ...] = (),
    ) -> None:
        self.index = index
        self.dtype = dtype
        self.bits = 8 * dtype.itemsize
        self.small = self.bits <= DIGIT_BITS  # one bincount holds the whole distribution
        self.first_bits = min(self.bits, DIGIT_BITS)
        self.percentiles = percentiles
        self.bins = bins
        self.weighted = weighted
        self.acc = _Accumulator()
        self.wacc = WeightedMoments()
        self.first = np.zeros(1 << self.first_bits, dtype=np.int64) if self.small or percentiles else None
        self.wfirst = np.zeros(self.first.size) if weighted and self.first is not None else None
        self.tally = ThresholdTally(thresholds) if thresholds else None
        self.known = 0
        self.groups: list[_Group] = []
        self.at: dict[int, np.generic] = {}
        self.wat: dict[float, np.generic] = {}  # weighted: percentile -> value
        self.hist_pending = False
        self.hist_counts: np.ndarray | None = None
        self.hist_edges: np.ndarray | None = None

    def extra_passes(self) -> int:
        """Passes after the first this band needs at most."""
        if self.small:
            return 0
        return max((self.bits - DIGIT_BITS) // DIGIT_BITS if self.percentiles else 0, 1 if self.bins else 0)

    # -- pass 1: moments and the first 16 key bits
    def first_pass(self, chunk: np.ndarray, areas: np.ndarray | None = None) -> None:
        values, weights, invalid = valid_weighted(chunk, areas if self.weighted else None)
        if self.small:
            assert self.first is not None
            self.acc.invalid += invalid
            keys = to_keys(values, self.dtype)
            self.first += bincount(keys, self.first.size)
            if self.wfirst is not None:
                self.wfirst += bincount(keys, self.first.size, weights)
            return
        values = values.astype(self.dtype, copy=False)
        with np.errstate(invalid="ignore", over="ignore"):  # infinite values: mean/std become inf/nan
            self.acc.add(values, invalid)
            if weights is not None:
                self.wacc.add(values, weights)
        if self.first is not None and values.size:
            digits = to_keys(values, self.dtype) >> (self.bits - self.first_bits)
            self.first += bincount(digits, self.first.size)
            if self.wfirst is not None:
                self.wfirst += bincount(digits, self.first.size, weights)

    def merge_first(self, part: FirstPart) -> None:
        """Add one tile's first-pass part (tiles merged in tile order)."""
        if part.first is not None and self.first is not None:
            self.first += part.first
        if part.wfirst is not None and self.wfirst is not None:
            self.wfirst += part.wfirst
        with np.errstate(invalid="ignore", over="ignore"):  # infinite values: mean/std become inf/nan
            self.acc.merge(part.acc)
            if part.wacc is not None:
                self.wacc.merge(part.wacc)
        if part.tally is not None and self.tally is not None:
            self.tally.merge(part.tally)

    def merge_refine(self, part: RefinePart) -> None:
        """Add one tile's part of a later pass (tiles merged in tile order)."""
        hist, groups = part
        if hist is not None and self.hist_counts is not None:
            self.hist_counts += hist
        for g, (found, weights) in zip(self.groups, groups, strict=True):
            if g.counts is not None:
                g.counts += found
                if weights is not None and g.weights is not None:
                    g.weights += weights
            elif found.size:
                g.chunks.append(found)
                if weights is not None:
                    g.weight_chunks.append(weights)

    def finish_first(self) -> None:
        if self.small:
            assert self.first is not None  # small types always count the first 16 key bits
            nz = np.flatnonzero(self.first)
            if nz.size:
                values = from_keys(nz, self.dtype)
                counts = self.first[nz]
                v = values.astype(np.float64)
                n = int(counts.sum())
                total = float((v * counts).sum())
                mean = total / n
                acc = self.acc
                acc.n, acc.total, acc.mean = n, total, mean
                acc.m2 = float((counts * (v - mean) ** 2).sum())
                acc.lo, acc.hi = float(values[0]), float(values[-1])
                if self.wfirst is not None:
                    self.wacc.add(v, self.wfirst[nz])
                if self.bins:
                    self.hist_counts, self.hist_edges = np.histogram(
                        values, self.bins, range=(float(values[0]), float(values[-1])), weights=counts
                    )
        elif self.bins and self.acc.n and math.isfinite(self.acc.lo) and math.isfinite(self.acc.hi):
            self.hist_pending = True
            self.hist_counts = np.zeros(self.bins, dtype=np.int64)
        n = self.acc.n
        if n and self.percentiles:
            assert self.first is not None  # percentiles always count the first key bits
            if self.wfirst is not None:
                total = float(self.wfirst.sum())
                targets = [(q, q / 100.0 * total) for q in self.percentiles if 0 < q < 100]
                self._descend_weighted(self.first, self.wfirst, targets, 0.0, 0, self.first_bits)
            else:
                self._descend(self.first, needed_ranks(n, self.percentiles), 0, 0, self.first_bits)
        self.known = self.first_bits
        self.first = self.wfirst = None

    def _descend(self, counts: np.ndarray, ranks: list[int], below: int, prefix: int, digit_bits: int) -> None:
        """Place each rank in its digit: resolved when the key is complete, else a group for the next pass."""
        cum = np.cumsum(counts)
        groups: dict[int, _Group] = {}
        for r in ranks:
            d = int(np.searchsorted(cum, r - below, side="right"))
            before = int(cum[d - 1]) if d else 0
            key = (prefix << digit_bits) | d
            if self.known + digit_bits == self.bits:
                self.at[r] = from_keys(np.array([key], dtype=np.uint64), self.dtype)[0]
                continue
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(prefix=key, below=below + before, count=int(counts[d]), ranks=[])
                if g.count > COLLECT_LIMIT:
                    g.counts = np.zeros(1 << DIGIT_BITS, dtype=np.int64)
            g.ranks.append(r)
        self.groups.extend(groups.values())

    def _descend_weighted(
        self, counts: np.ndarray, weights: np.ndarray, targets: list[tuple[float, float]], below: float, prefix: int, bits: int
    ) -> None:
        """Place each percentile in the digit where the cumulative weight reaches its target (weighted.first_reaching):
        resolved when the key is complete, else a group for the next pass."""
        groups: dict[int, _Group] = {}
        for (q, target), (d, before) in zip(targets, first_reaching(weights, [t for _, t in targets], below), strict=False):
            key = (prefix << bits) | d
            if self.known + bits == self.bits:
                self.wat[q] = from_keys(np.array([key], dtype=np.uint64), self.dtype)[0]
                continue
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(prefix=key, below=0, count=int(counts[d]), ranks=[], below_weight=before)
                if g.count > COLLECT_LIMIT:
                    g.counts = np.zeros(1 << DIGIT_BITS, dtype=np.int64)
                    g.weights = np.zeros(1 << DIGIT_BITS)
            g.targets.append((q, target))
        self.groups.extend(groups.values())

    # -- later passes: the histogram, and the next 16 key bits of each candidate group
    def needs_pass(self) -> bool:
        return bool(self.groups) or self.hist_pending

    def refine_pass(self, chunk: np.ndarray, areas: np.ndarray | None = None) -> None:
        values, weights, _ = valid_weighted(chunk, areas if self.weighted and self.groups else None)
        values = values.astype(self.dtype, copy=False)
        if self.hist_pending:
            assert self.bins is not None
            self.hist_counts += np.histogram(values, self.bins, range=(self.acc.lo, self.acc.hi))[0]
        if not self.groups or not values.size:
            return
        keys = to_keys(values, self.dtype)
        top = keys >> (self.bits - self.known)
        shift = self.bits - self.known - DIGIT_BITS
        for g in self.groups:
            selected = top == g.prefix
            sel = keys[selected]
            if g.counts is None:
                g.chunks.append(sel)
                if weights is not None:
                    g.weight_chunks.append(weights[selected])
            else:
                digits = (sel >> shift) & 0xFFFF
                g.counts += bincount(digits, g.counts.size)
                if weights is not None and g.weights is not None:
                    g.weights += bincount(digits, g.weights.size, weights[selected])

    def finish_refine(self) -> None:
        if self.hist_pending:
            assert self.bins is not None
            self.hist_pending = False
            self.hist_edges = np.histogram_bin_edges(np.empty(0, self.dtype), self.bins, range=(self.acc.lo, self.acc.hi))
        groups, self.groups = self.groups, []
        for g in groups:
            if g.counts is None:
                keys = np.concatenate(g.chunks) if g.chunks else np.empty(0, np.uint64)
                if keys.size != g.count:
                    raise GdalMcpError(
                        "gdal-error",
                        f"band {self.index} gave different pixels on a second read "
                        "(was the file being written?); try again once it is complete",
                    )
                if g.targets:
                    order = np.argsort(keys, kind="stable")
                    values = from_keys(keys[order], self.dtype)
                    weights = np.concatenate(g.weight_chunks)[order]
                    found = first_reaching(weights, [t for _, t in g.targets], g.below_weight)
                    for (q, _), (i, _) in zip(g.targets, found, strict=False):
                        self.wat[q] = values[i]
                    continue
                values = from_keys(np.sort(keys), self.dtype)
                for r in g.ranks:
                    self.at[r] = values[r - g.below]
            elif g.targets:
                assert g.weights is not None
                self._descend_weighted(g.counts, g.weights, g.targets, g.below_weight, g.prefix, DIGIT_BITS)
            else:
                self._descend(g.counts, g.ranks, g.below, g.prefix, DIGIT_BITS)
        self.known += DIGIT_BITS

    def _weighted_percentile(self, q: float) -> float | None:
        if q <= 0:
            return self.acc.lo
        if q >= 100:
            return self.acc.hi
        return float(self.wat[q]) if q in self.wat else None

    def result(self, areas: PixelAreas | None = None) -> BandStatsDetail:
        st = self.acc.result()
        n = self.acc.n
        if self.weighted:
            pct = {percent_key(q): (self._weighted_percentile(q) if n else None) for q in self.percentiles}
            if n and self.wacc.weight > 0:
                st.mean, st.std = self.wacc.mean, self.wacc.std
        else:
            pct = {percent_key(q): (lerp_percentile(q, n, self.at, self.dtype) if n else None) for q in self.percentiles}
        hist = None
        if self.hist_counts is not None and self.hist_edges is not None:
            hist = Histogram(edges=[float(e) for e in self.hist_edges], counts=[int(round(c)) for c in self.hist_counts])
        extra: dict[str, Any] = {}
        if self.tally is not None:
            extra = {"thresholds": self.tally.result(areas), "area_m2": self.tally.valid_area_m2(areas)}
        elif self.weighted and areas is not None:
            extra = {"area_m2": self.wacc.weight if n else 0.0}
        return BandStatsDetail(index=self.index, **st.model_dump(), percentiles=pct, histogram=hist, **extra)


# ---------------------------------------------------------------------------------------------------------
# Tiles: each pass maps a tile function over the area read; partial results merge exactly.


@dataclass(frozen=True)
class Refine:
    """What one band counts in a later pass: its value histogram (bins, lo, hi) and, per candidate group
    (key prefix of `known` bits), the histogram of the next 16 key bits (`counted`) or the keys themselves."""

    known: int
    hist: tuple[int, float, float] | None
    groups: tuple[tuple[int, bool], ...]


@dataclass(frozen=True)
class StatsTile:
    """One tile of one statistics pass (picklable: what a worker needs to compute it)."""

    path: str
    bands: tuple[int, ...]
    #: (col_off, row_off, width, height) in the raster's pixels
    window: tuple[int, int, int, int]
    percentiles: tuple[float, ...]
    bins: int | None
    #: pixels (all bands) per chunk read inside the tile: chunk by chunk moments depend on it
    window_pixels: int
    #: empty: the first pass; else one entry per band, the later pass's work
    refine: tuple[Refine, ...] = ()
    #: weights="area": moments and key histograms weighted by the pixels' ground areas
    weighted: bool = False
    #: the first pass also tallies each band's pixels above and at or below these (engine/raster/thresholds.py)
    thresholds: tuple[float, ...] = ()


@dataclass
class FirstPart:
    """Pass 1 over one tile, per band: the moments (empty but for the invalid count on 8/16-bit bands), the first key
    histogram, and when asked the same weighted by area and the threshold tally."""

    acc: _Accumulator
    first: np.ndarray | None
    wacc: WeightedMoments | None = None
    wfirst: np.ndarray | None = None
    tally: ThresholdTally | None = None


#: later passes, per band: the value histogram, and per group its next-digit counts or its collected keys, with (when
#: weighted) their summed weights or each key's weight
RefinePart = tuple[np.ndarray | None, list[tuple[np.ndarray, np.ndarray | None]]]


def stats_first_tile(spec: StatsTile) -> list[FirstPart]:
    """The first pass over one tile: per band, its moments and first key histogram (and weighted ones, and tallies)."""
    return [FirstPart(w.acc, w.first, w.wacc if w.weighted else None, w.wfirst, w.tally) for w in _tile_pass(spec)]


def stats_refine_tile(spec: StatsTile) -> list[RefinePart]:
    """A later pass over one tile: per band, its value histogram and its candidates' counts or keys."""

    def group_part(w: _BandWork, g: _Group) -> tuple[np.ndarray, np.ndarray | None]:
        if g.counts is not None:
            return g.counts, g.weights if w.weighted else None
        keys = np.concatenate(g.chunks) if g.chunks else np.empty(0, np.dtype(f"u{w.dtype.itemsize}"))
        if not w.weighted:
            return keys, None
        return keys, np.concatenate(g.weight_chunks) if g.weight_chunks else np.empty(0)

    return [(w.hist_counts if w.hist_pending else None, [group_part(w, g) for g in w.groups]) for w in _tile_pass(spec)]


def _tile_pass(spec: StatsTile) -> list[_BandWork]:
    """One pass over one tile, accumulated in a _BandWork per band (as the whole area once was)."""
    with rasterio.Env(GDAL_NUM_THREADS="ALL_CPUS"), open_raster(spec.path) as ds:
        bands = list(spec.bands)
        thresholds = () if spec.refine else spec.thresholds
        work = [
            _BandWork(b, np.dtype(ds.dtypes[b - 1]), list(spec.percentiles), spec.bins, spec.weighted, thresholds) for b in bands
        ]
        if spec.refine:
            for w, r in zip(work, spec.refine, strict=True):
                w.first = w.wfirst = None
                w.known = r.known
                w.groups = [
                    _Group(
                        prefix=prefix,
                        below=0,
                        count=0,
                        ranks=[],
                        counts=np.zeros(1 << DIGIT_BITS, dtype=np.int64) if counted else None,
                        weights=np.zeros(1 << DIGIT_BITS) if counted and spec.weighted else None,
                    )
                    for prefix, counted in r.groups
                ]
                if r.hist is not None:
                    w.bins, w.acc.lo, w.acc.hi = r.hist
                    w.hist_pending = True
                    w.hist_counts = np.zeros(r.hist[0], dtype=np.int64)
        areas = pixel_areas(ds) if spec.weighted or thresholds else None
        window = Window(*spec.window)
        for _, _, win, chunk in _chunks(ds, bands, window, spec.window_pixels):
            tiles.check_stop()  # between chunks: a cancelled job's tile ends here
            pixel = areas.for_window(win) if areas is not None else None
            for j, w in enumerate(work):
                if spec.refine:
                    w.refine_pass(chunk[j], pixel)
                    continue
                w.first_pass(chunk[j], pixel)
                if w.tally is not None:
                    data, invalid = invalid_pixels(chunk[j])
                    w.tally.add(data, np.ones(data.shape, bool) if invalid is None else ~invalid, pixel)
    return work


#: The pixel bytes of one reduction tile. A reduction tile returns a few small arrays, not its pixels, and reads
#: its pixels in chunks, so it can be larger than an output tile: the next chunk is read while one is counted
#: only within a tile. Measured with raster_stats on 13219² x 3 uint16 (DEFLATE, 256 blocks, 2 busy cores):
#: 4096² tiles 4.6-4.9 s, 2048² tiles 6.3-6.4 s, the former whole-raster pass 4.7-6.0 s.
REDUCTION_TILE_BYTES = 4 * tiles.TILE_BYTES
#: statistics tiles the local executor runs at once (their results are small)
LOCAL_THREADS = 2


def reduction_windows(ds: Any, window: Window, bytes_per_pixel: int) -> list[tuple[int, int, int, int]]:
    """The tiles (`tiles.plan`) of a whole-area reduction over `window`, in raster pixels. A striped file
    (blocks as wide as the raster) gets each row of tiles as one full-width item, so that every strip is
    decompressed once rather than once per tile column."""
    col0, row0 = int(window.col_off), int(window.row_off)
    plan = tiles.plan(int(window.width), int(window.height), bytes_per_pixel=bytes_per_pixel, tile_bytes=REDUCTION_TILE_BYTES)
    block = ds.block_shapes[0] if ds.block_shapes else (256, 256)
    if block[1] >= ds.width and any(t.window[0] for t in plan):
        rows = dict.fromkeys((t.window[1], t.window[3]) for t in plan)
        return [(col0, row0 + r, int(window.width), h) for r, h in rows]
    return [(col0 + c, row0 + r, w, h) for c, r, w, h in (t.window for t in plan)]


def _area_warnings(areas: PixelAreas, window: Window, weighted: bool, thresholds: bool) -> list[str]:
    """What a reader of raster_stats should know about pixel areas: none without a CRS (refused with weights=area),
    map areas on Mercator, a projected grid's equal areas with weights=area, a lon/lat grid read unweighted."""
    if weighted and areas.method == "none":
        raise GdalMcpError(
            "invalid-argument",
            "weights='area' needs pixel areas, and the raster has no CRS; assign one with raster_edit, or use weights='none'",
        )
    out = list(areas.warnings) if weighted or thresholds else []
    if weighted and areas.method == "projected":
        out.append(
            "weights='area' on a projected raster: every pixel has the same area, so mean and std equal the unweighted "
            "ones; only the percentiles change definition (weighted inverted_cdf instead of linear)"
        )
    spread = None if weighted else area_spread(areas, window)
    if spread is not None and spread > SPREAD_HINT:
        out.append(
            f"lon/lat raster: the pixels read differ in ground area by up to {100 * (spread - 1):.0f}% (smaller toward "
            "the poles), and mean, std and percentiles count every pixel once; pass weights='area' to weight them by "
            "their ground area"
        )
    return out


@wrap_gdal_errors
def raster_stats(
    path: str,
    bands: list[int] | None = None,
    percentiles: list[float] | None = None,
    histogram_bins: int | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    thresholds: list[float] | None = None,
    weights: str = "none",
    progress: Progress = no_progress,
) -> RasterStatsResult:
    """Exact per-band statistics, percentiles (numpy's linear definition) and histogram, streamed.

    Nodata, masks and NaN are excluded. Values are the stored ones (scale/offset not applied). Each pass is a
    map over tiles whose partial results merge exactly (see the module docstring).

    `thresholds`: per band and threshold t, the count, share, area and area share of the valid pixels > t and <= t
    (engine/raster/thresholds.py). `weights="area"`: mean, std and percentiles weighted by each pixel's ground area
    (engine/raster/weighted.py; percentiles then numpy's weighted inverted_cdf).
    """
    qs = check_percentiles(percentiles)
    bins = check_bins(histogram_bins)
    levels = tuple(check_thresholds(thresholds))
    if weights not in WEIGHTS:
        raise GdalMcpError("invalid-argument", f"weights must be 'none' or 'area', got {weights!r}")
    weighted = weights == "area"
    with open_raster(path) as ds:
        indexes = select_bands(ds, bands)
        indexes = list(dict.fromkeys(indexes))
        dims = band_dimensions(ds, indexes)
        window = bbox_window(ds, bbox, bbox_crs)
        work: list[_BandWork] = []
        for b in indexes:
            dtype = np.dtype(ds.dtypes[b - 1])
            check_real(dtype, b)
            work.append(_BandWork(b, dtype, qs, bins, weighted, levels))
        warnings = [
            f"band {b}: scale {ds.scales[b - 1]} / offset {ds.offsets[b - 1]} are not applied; statistics "
            "are of the stored values"
            for b in indexes
            if (ds.scales[b - 1], ds.offsets[b - 1]) != (1.0, 0.0)
        ]
        windows = reduction_windows(ds, window, sum(w.dtype.itemsize for w in work))
        areas = pixel_areas(ds)
        warnings += _area_warnings(areas, window, weighted, bool(levels))
    total_passes = 1 + max(w.extra_passes() for w in work)
    done = 0.0

    def report(p: int, i: int, n: int) -> None:
        nonlocal done
        total = max(total_passes, p)
        done = max(done, min(1.0, (p - 1 + (i + 1) / n) / total))
        progress(done, f"statistics pass {p}/{total}: tile {i + 1}/{n}")

    def specs(active: list[_BandWork], refine: bool) -> list[StatsTile]:
        jobs = tuple(
            Refine(
                known=w.known,
                hist=(w.bins, w.acc.lo, w.acc.hi) if w.hist_pending and w.bins else None,
                groups=tuple((g.prefix, g.counts is not None) for g in w.groups),
            )
            for w in active
        )
        return [
            StatsTile(
                path=path,
                bands=tuple(w.index for w in active),
                window=win,
                percentiles=tuple(qs),
                bins=bins,
                window_pixels=region.DEFAULT_WINDOW_PIXELS,
                refine=jobs if refine else (),
                weighted=weighted,
                thresholds=levels,
            )
            for win in windows
        ]

    def arrived(results: Iterator[tuple[int, Any]], p: int) -> Iterator[tuple[int, Any]]:
        for k, result in enumerate(results):
            report(p, k, len(windows))
            yield result

    # Every pass merges the tiles' parts in tile order (tiles.in_order): the float sums (moments, weighted histograms,
    # areas) are the same whichever order the tiles finished in; the integer ones would be in any order.
    with tiles.mapped(stats_first_tile, specs(work, refine=False), local_threads=LOCAL_THREADS) as first_pass:
        for _, parts in tiles.in_order(arrived(first_pass, 1)):
            for w, part in zip(work, parts, strict=True):
                w.merge_first(part)
    for w in work:
        w.finish_first()
    p = 1
    while active := [w for w in work if w.needs_pass()]:
        p += 1
        with tiles.mapped(stats_refine_tile, specs(active, refine=True), local_threads=LOCAL_THREADS) as refine_pass:
            for _, refined in tiles.in_order(arrived(refine_pass, p)):
                for w, part in zip(active, refined, strict=True):
                    w.merge_refine(part)
        for w in active:
            w.finish_refine()
    progress(1.0, f"statistics done in {p} pass(es)")
    for w in work:
        if w.acc.n == 0:
            warnings.append(f"band {w.index} has no valid pixels in the area read (all nodata/masked)")
        elif not (math.isfinite(w.acc.lo) and math.isfinite(w.acc.hi)):
            warnings.append(
                f"band {w.index} holds infinite values: mean/std are not finite" + (" and no histogram was made" if bins else "")
            )
    return RasterStatsResult(
        path=path,
        window=(int(window.col_off), int(window.row_off), int(window.width), int(window.height)),
        bands=[
            w.result(areas if weighted or levels else None).model_copy(update={"dimensions": dims.by_band.get(w.index, {})})
            for w in work
        ],
        dimensions=dims.info,
        weights="area" if weighted else "none",
        area_method=areas.method if weighted or levels else None,  # type: ignore[arg-type]
        pixel_area_m2=areas.constant if weighted or levels else None,
        warnings=warnings + dims.warnings,
    )
