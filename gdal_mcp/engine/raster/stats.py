"""Exact band statistics, streamed window by window (never the values stored in the file).

`band_statistics` gives min/max/mean/std/sum in one pass (raster_info uses it). `raster_stats` adds exact
percentiles and histograms without holding the pixels: each valid value is mapped to an unsigned key that
sorts like the value (its bits, with the sign handled), and the order statistics the percentiles need are
found by radix selection, 16 bits per pass. 8- and 16-bit bands are done in one pass (a full bincount);
32-bit bands in two; 64-bit bands in at most four, usually fewer (once a candidate range holds few enough
values, they are collected and sorted).

Each pass of `raster_stats` is a map over tiles (engine/tiles.py; `stats_first_tile`, then `stats_refine_tile`,
run wherever the executor runs them) returning partial results that merge exactly: key histograms, value
histograms, candidate counts and collected keys add up (integers: any order), and the per-tile moments (count,
mean, M2, sum, min, max) are merged in tile-index order, so the floats are the same whichever order the tiles
finished in.
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
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import bbox_window, read_bands, select_bands
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


def valid_values(chunk: np.ndarray) -> tuple[np.ndarray, int]:
    """Valid pixels of a masked band chunk (mask and NaN excluded) and how many were invalid."""
    data = np.ma.getdata(chunk)
    mask = np.ma.getmask(chunk)
    invalid = None if mask is np.ma.nomask else mask
    if np.issubdtype(data.dtype, np.floating):
        nan = np.isnan(data)
        invalid = nan if invalid is None else invalid | nan
    if invalid is None or not invalid.any():
        return np.ascontiguousarray(data).ravel(), 0
    values = data[~invalid]
    return values, int(data.size - values.size)


def _chunks(
    ds, bands: list[int], window: Window | None, window_pixels: int | None = None
) -> Iterator[tuple[int, int, np.ndarray]]:
    """(i, n, chunk of shape (len(bands), h, w)) over `window` (default: all), in strips of whole blocks.

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
        ahead = pool.submit(read, next(windows))
        for i in range(n):
            chunk = ahead.result()
            following = next(windows, None)
            if following is not None:
                ahead = pool.submit(read, following)
            yield i, n, chunk


def band_statistics(
    ds, bands: list[int], *, window: Window | None = None, progress: Progress = no_progress
) -> dict[int, BandStatistics]:
    """Exact min/max/mean/std/sum and valid counts of `bands`, honouring nodata and masks."""
    acc = {b: _Accumulator() for b in bands}
    for i, n_windows, chunk in _chunks(ds, bands, window):
        for j, b in enumerate(bands):
            values, invalid = valid_values(chunk[j])
            acc[b].add(values, invalid)
        progress((i + 1) / n_windows, f"statistics: window {i + 1}/{n_windows}")
    return {b: a.result() for b, a in acc.items()}


# ---------------------------------------------------------------------------------------------------------
# Shared argument handling (also used by sample and xyz)

DEFAULT_PERCENTILES = [2.0, 25.0, 50.0, 75.0, 98.0]
MAX_PERCENTILES = 100
MAX_HISTOGRAM_BINS = 10_000
DIGIT_BITS = 16
COLLECT_LIMIT = 1 << 16  # candidate values kept in memory per order statistic


# ---------------------------------------------------------------------------------------------------------
# Order-preserving keys: value a < value b  <=>  key(a) < key(b) (unsigned), for ints and non-NaN floats.


def _check_real(dtype: np.dtype, band: int) -> None:
    if dtype.kind not in "uifb":
        raise GdalMcpError(
            "unsupported",
            f"band {band} is {dtype.name}; statistics need real-valued bands "
            "(convert complex data to its amplitude or real part first)",
        )


def _to_keys(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    values = np.ascontiguousarray(values, dtype=dtype)
    udt = np.dtype(f"u{dtype.itemsize}")
    bits = values.view(udt)
    if dtype.kind in "ub":
        return bits
    sign = udt.type(1 << (8 * dtype.itemsize - 1))
    if dtype.kind == "i":
        return bits ^ sign
    # Floats: negative values get all bits flipped, positive ones just the sign bit.
    return bits ^ ((values.view(f"i{dtype.itemsize}") >> (8 * dtype.itemsize - 1)).view(udt) | sign)


def _from_keys(keys: np.ndarray, dtype: np.dtype) -> np.ndarray:
    udt = np.dtype(f"u{dtype.itemsize}")
    keys = np.asarray(keys).astype(udt)
    if dtype.kind in "ub":
        return keys.view(dtype)
    sign = udt.type(1 << (8 * dtype.itemsize - 1))
    if dtype.kind == "i":
        return (keys ^ sign).view(dtype)
    return np.where((keys & sign) != 0, keys ^ sign, ~keys).view(dtype)


def _bincount(digits: np.ndarray, size: int) -> np.ndarray:
    """Counts of small unsigned ints (bincount casts up to 32-bit unsigned itself; 64-bit ones need a copy)."""
    if digits.dtype.itemsize == 8:
        digits = digits.astype(np.uint32)
    return np.bincount(digits, minlength=size)


def _lerp_percentile(q: float, n: int, at: dict[int, np.generic], dtype: np.dtype) -> float:
    """numpy's default (linear) percentile from the order statistics `at` (rank -> value), as np.percentile
    computes it for a scalar q: in the band's float type for float bands, in float64 for integer bands."""
    vi = (n - 1) * (q / 100.0)
    prev = math.floor(vi)
    if vi >= n - 1:
        return float(at[n - 1])
    t = vi - prev
    a: Any
    b: Any
    if dtype.kind == "f":
        a, b = at[prev], at[prev + 1]
        with np.errstate(invalid="ignore", over="ignore"):
            diff = b - a
    else:
        # The difference is exact (Python ints; numpy's own would wrap around for wide int16 ranges).
        diff = float(int(at[prev + 1]) - int(at[prev]))
        a, b = float(at[prev]), float(at[prev + 1])
    with np.errstate(invalid="ignore", over="ignore"):
        result = b - diff * (1 - t) if t >= 0.5 else a + diff * t
    return float(result)


def _needed_ranks(n: int, percentiles: list[float]) -> list[int]:
    ranks: set[int] = set()
    for q in percentiles:
        vi = (n - 1) * (q / 100.0)
        prev = math.floor(vi)
        ranks.update([n - 1] if vi >= n - 1 else [prev, prev + 1])
    return sorted(ranks)


@dataclass
class _Group:
    """Values whose key starts with `prefix` (the top `known` bits): the candidates for some ranks."""

    prefix: int
    below: int  # valid values with a smaller key
    count: int
    ranks: list[int]
    counts: np.ndarray | None = None  # histogram of the next 16 key bits, when refining
    chunks: list[np.ndarray] = field(default_factory=list)  # the keys themselves, when collecting


class _BandWork:
    """Everything raster_stats accumulates for one band across passes."""

    def __init__(self, index: int, dtype: np.dtype, percentiles: list[float], bins: int | None) -> None:
        self.index = index
        self.dtype = dtype
        self.bits = 8 * dtype.itemsize
        self.small = self.bits <= DIGIT_BITS  # one bincount holds the whole distribution
        self.first_bits = min(self.bits, DIGIT_BITS)
        self.percentiles = percentiles
        self.bins = bins
        self.acc = _Accumulator()
        self.first = np.zeros(1 << self.first_bits, dtype=np.int64) if self.small or percentiles else None
        self.known = 0
        self.groups: list[_Group] = []
        self.at: dict[int, np.generic] = {}
        self.hist_pending = False
        self.hist_counts: np.ndarray | None = None
        self.hist_edges: np.ndarray | None = None

    def extra_passes(self) -> int:
        """Passes after the first this band needs at most."""
        if self.small:
            return 0
        return max((self.bits - DIGIT_BITS) // DIGIT_BITS if self.percentiles else 0, 1 if self.bins else 0)

    # -- pass 1: moments and the first 16 key bits
    def first_pass(self, chunk: np.ndarray) -> None:
        values, invalid = valid_values(chunk)
        if self.small:
            assert self.first is not None
            self.acc.invalid += invalid
            self.first += _bincount(_to_keys(values, self.dtype), self.first.size)
            return
        values = values.astype(self.dtype, copy=False)
        with np.errstate(invalid="ignore", over="ignore"):  # infinite values: mean/std become inf/nan
            self.acc.add(values, invalid)
        if self.first is not None and values.size:
            self.first += _bincount(_to_keys(values, self.dtype) >> (self.bits - self.first_bits), self.first.size)

    def finish_first(self) -> None:
        if self.small:
            assert self.first is not None  # small types always count the first 16 key bits
            nz = np.flatnonzero(self.first)
            if nz.size:
                values = _from_keys(nz, self.dtype)
                counts = self.first[nz]
                v = values.astype(np.float64)
                n = int(counts.sum())
                total = float((v * counts).sum())
                mean = total / n
                acc = self.acc
                acc.n, acc.total, acc.mean = n, total, mean
                acc.m2 = float((counts * (v - mean) ** 2).sum())
                acc.lo, acc.hi = float(values[0]), float(values[-1])
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
            self._descend(self.first, _needed_ranks(n, self.percentiles), 0, 0, self.first_bits)
        self.known = self.first_bits
        self.first = None

    def _descend(self, counts: np.ndarray, ranks: list[int], below: int, prefix: int, digit_bits: int) -> None:
        """Place each rank in its digit: resolved when the key is complete, else a group for the next pass."""
        cum = np.cumsum(counts)
        groups: dict[int, _Group] = {}
        for r in ranks:
            d = int(np.searchsorted(cum, r - below, side="right"))
            before = int(cum[d - 1]) if d else 0
            key = (prefix << digit_bits) | d
            if self.known + digit_bits == self.bits:
                self.at[r] = _from_keys(np.array([key], dtype=np.uint64), self.dtype)[0]
                continue
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(prefix=key, below=below + before, count=int(counts[d]), ranks=[])
                if g.count > COLLECT_LIMIT:
                    g.counts = np.zeros(1 << DIGIT_BITS, dtype=np.int64)
            g.ranks.append(r)
        self.groups.extend(groups.values())

    # -- later passes: the histogram, and the next 16 key bits of each candidate group
    def needs_pass(self) -> bool:
        return bool(self.groups) or self.hist_pending

    def refine_pass(self, chunk: np.ndarray) -> None:
        values, _ = valid_values(chunk)
        values = values.astype(self.dtype, copy=False)
        if self.hist_pending:
            assert self.bins is not None
            self.hist_counts += np.histogram(values, self.bins, range=(self.acc.lo, self.acc.hi))[0]
        if not self.groups or not values.size:
            return
        keys = _to_keys(values, self.dtype)
        top = keys >> (self.bits - self.known)
        shift = self.bits - self.known - DIGIT_BITS
        for g in self.groups:
            sel = keys[top == g.prefix]
            if g.counts is None:
                g.chunks.append(sel)
            else:
                g.counts += _bincount((sel >> shift) & 0xFFFF, g.counts.size)

    def finish_refine(self) -> None:
        if self.hist_pending:
            assert self.bins is not None
            self.hist_pending = False
            self.hist_edges = np.histogram_bin_edges(np.empty(0, self.dtype), self.bins, range=(self.acc.lo, self.acc.hi))
        groups, self.groups = self.groups, []
        for g in groups:
            if g.counts is None:
                keys = np.sort(np.concatenate(g.chunks)) if g.chunks else np.empty(0, np.uint64)
                if keys.size != g.count:
                    raise GdalMcpError(
                        "gdal-error",
                        f"band {self.index} gave different pixels on a second read "
                        "(was the file being written?); try again once it is complete",
                    )
                values = _from_keys(keys, self.dtype)
                for r in g.ranks:
                    self.at[r] = values[r - g.below]
            else:
                self._descend(g.counts, g.ranks, g.below, g.prefix, DIGIT_BITS)
        self.known += DIGIT_BITS

    def result(self) -> BandStatsDetail:
        st = self.acc.result()
        n = self.acc.n
        pct = {_percent_key(q): (_lerp_percentile(q, n, self.at, self.dtype) if n else None) for q in self.percentiles}
        hist = None
        if self.hist_counts is not None and self.hist_edges is not None:
            hist = Histogram(edges=[float(e) for e in self.hist_edges], counts=[int(round(c)) for c in self.hist_counts])
        return BandStatsDetail(index=self.index, **st.model_dump(), percentiles=pct, histogram=hist)


def _percent_key(q: float) -> str:
    q = float(q)
    return str(int(q)) if q.is_integer() else repr(q)


def _check_percentiles(percentiles: list[float] | None) -> list[float]:
    if percentiles is None:
        return list(DEFAULT_PERCENTILES)
    if not isinstance(percentiles, list | tuple):
        raise GdalMcpError("invalid-argument", "percentiles must be a list of numbers between 0 and 100")
    if len(percentiles) > MAX_PERCENTILES:
        raise GdalMcpError("invalid-argument", f"at most {MAX_PERCENTILES} percentiles at once; got {len(percentiles)}")
    out: list[float] = []
    for q in percentiles:
        if isinstance(q, bool) or not isinstance(q, int | float | np.number) or not 0 <= float(q) <= 100:
            raise GdalMcpError(
                "invalid-argument", f"percentile {q!r} is not a number between 0 and 100 (e.g. percentiles=[2, 50, 98])"
            )
        if float(q) not in out:
            out.append(float(q))
    return out


def _check_bins(histogram_bins: int | None) -> int | None:
    if histogram_bins is None:
        return None
    if (
        isinstance(histogram_bins, bool)
        or not isinstance(histogram_bins, int | np.integer)
        or not 1 <= histogram_bins <= MAX_HISTOGRAM_BINS
    ):
        raise GdalMcpError(
            "invalid-argument", f"histogram_bins must be an integer from 1 to {MAX_HISTOGRAM_BINS}, got {histogram_bins!r}"
        )
    return int(histogram_bins)


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


#: pass 1, per band: the moments (empty but for the invalid count on 8/16-bit bands) and the first key histogram
FirstPart = tuple[_Accumulator, np.ndarray | None]
#: later passes, per band: the value histogram, and per group its next-digit counts or its collected keys
RefinePart = tuple[np.ndarray | None, list[np.ndarray]]


def stats_first_tile(spec: StatsTile) -> list[FirstPart]:
    """The first pass over one tile: per band, its moments and first key histogram."""
    return [(w.acc, w.first) for w in _tile_pass(spec)]


def stats_refine_tile(spec: StatsTile) -> list[RefinePart]:
    """A later pass over one tile: per band, its value histogram and its candidates' counts or keys."""
    return [
        (
            w.hist_counts if w.hist_pending else None,
            [
                g.counts
                if g.counts is not None
                else (np.concatenate(g.chunks) if g.chunks else np.empty(0, np.dtype(f"u{w.dtype.itemsize}")))
                for g in w.groups
            ],
        )
        for w in _tile_pass(spec)
    ]


def _tile_pass(spec: StatsTile) -> list[_BandWork]:
    """One pass over one tile, accumulated in a _BandWork per band (as the whole area once was)."""
    with rasterio.Env(GDAL_NUM_THREADS="ALL_CPUS"), open_raster(spec.path) as ds:
        bands = list(spec.bands)
        work = [_BandWork(b, np.dtype(ds.dtypes[b - 1]), list(spec.percentiles), spec.bins) for b in bands]
        if spec.refine:
            for w, r in zip(work, spec.refine, strict=True):
                w.first = None
                w.known = r.known
                w.groups = [
                    _Group(
                        prefix=prefix,
                        below=0,
                        count=0,
                        ranks=[],
                        counts=np.zeros(1 << DIGIT_BITS, dtype=np.int64) if counted else None,
                    )
                    for prefix, counted in r.groups
                ]
                if r.hist is not None:
                    w.bins, w.acc.lo, w.acc.hi = r.hist
                    w.hist_pending = True
                    w.hist_counts = np.zeros(r.hist[0], dtype=np.int64)
        window = Window(*spec.window)
        for _, _, chunk in _chunks(ds, bands, window, spec.window_pixels):
            for j, w in enumerate(work):
                if spec.refine:
                    w.refine_pass(chunk[j])
                else:
                    w.first_pass(chunk[j])
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


@wrap_gdal_errors
def raster_stats(
    path: str,
    bands: list[int] | None = None,
    percentiles: list[float] | None = None,
    histogram_bins: int | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    progress: Progress = no_progress,
) -> RasterStatsResult:
    """Exact per-band statistics, percentiles (numpy's linear definition) and histogram, streamed.

    Nodata, masks and NaN are excluded. Values are the stored ones (scale/offset not applied). Each pass is a
    map over tiles whose partial results merge exactly (see the module docstring).
    """
    qs = _check_percentiles(percentiles)
    bins = _check_bins(histogram_bins)
    with open_raster(path) as ds:
        indexes = select_bands(ds, bands)
        indexes = list(dict.fromkeys(indexes))
        window = bbox_window(ds, bbox, bbox_crs)
        work: list[_BandWork] = []
        for b in indexes:
            dtype = np.dtype(ds.dtypes[b - 1])
            _check_real(dtype, b)
            work.append(_BandWork(b, dtype, qs, bins))
        warnings = [
            f"band {b}: scale {ds.scales[b - 1]} / offset {ds.offsets[b - 1]} are not applied; statistics "
            "are of the stored values"
            for b in indexes
            if (ds.scales[b - 1], ds.offsets[b - 1]) != (1.0, 0.0)
        ]
        windows = reduction_windows(ds, window, sum(w.dtype.itemsize for w in work))
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
            )
            for win in windows
        ]

    # Pass 1: integer histograms add up as tiles arrive; the moments are merged in tile order at the end.
    moments: dict[int, list[_Accumulator]] = {}
    first_pass = tiles.map_tiles(stats_first_tile, specs(work, refine=False), local_threads=LOCAL_THREADS)
    for k, (i, parts) in enumerate(first_pass):
        for w, (_, first) in zip(work, parts, strict=True):
            if first is not None and w.first is not None:
                w.first += first
        moments[i] = [acc for acc, _ in parts]
        report(1, k, len(windows))
    for i in sorted(moments):
        for w, acc in zip(work, moments.pop(i), strict=True):
            with np.errstate(invalid="ignore", over="ignore"):  # infinite values: mean/std become inf/nan
                w.acc.merge(acc)
    for w in work:
        w.finish_first()
    p = 1
    while active := [w for w in work if w.needs_pass()]:
        p += 1
        refine_pass = tiles.map_tiles(stats_refine_tile, specs(active, refine=True), local_threads=LOCAL_THREADS)
        for k, (_, refined) in enumerate(refine_pass):
            for w, (hist, groups) in zip(active, refined, strict=True):
                if hist is not None and w.hist_counts is not None:
                    w.hist_counts += hist
                for g, part in zip(w.groups, groups, strict=True):
                    if g.counts is not None:
                        g.counts += part
                    elif part.size:
                        g.chunks.append(part)
            report(p, k, len(windows))
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
        bands=[w.result() for w in work],
        warnings=warnings,
    )
