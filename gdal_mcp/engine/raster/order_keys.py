"""Order statistics of raster bands: order-preserving keys (value a < value b <=> key(a) < key(b), unsigned, for ints
and non-NaN floats), numpy's linear percentile from order statistics, and raster_stats' percentile and histogram
arguments. Used by raster_stats (stats.py) and zonal statistics."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gdal_mcp.errors import GdalMcpError

# ---------------------------------------------------------------------------------------------------------
# Shared argument handling (also used by sample and xyz)

DEFAULT_PERCENTILES = [2.0, 25.0, 50.0, 75.0, 98.0]
MAX_PERCENTILES = 100
MAX_HISTOGRAM_BINS = 10_000


# ---------------------------------------------------------------------------------------------------------
# Order-preserving keys: value a < value b  <=>  key(a) < key(b) (unsigned), for ints and non-NaN floats.


def check_real(dtype: np.dtype, band: int) -> None:
    if dtype.kind not in "uifb":
        raise GdalMcpError(
            "unsupported",
            f"band {band} is {dtype.name}; statistics need real-valued bands "
            "(convert complex data to its amplitude or real part first)",
        )


def to_keys(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
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


def from_keys(keys: np.ndarray, dtype: np.dtype) -> np.ndarray:
    udt = np.dtype(f"u{dtype.itemsize}")
    keys = np.asarray(keys).astype(udt)
    if dtype.kind in "ub":
        return keys.view(dtype)
    sign = udt.type(1 << (8 * dtype.itemsize - 1))
    if dtype.kind == "i":
        return (keys ^ sign).view(dtype)
    return np.where((keys & sign) != 0, keys ^ sign, ~keys).view(dtype)


def bincount(digits: np.ndarray, size: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Counts (or summed weights) of small unsigned ints (bincount casts up to 32-bit unsigned itself; 64-bit ones
    need a copy)."""
    if digits.dtype.itemsize == 8:
        digits = digits.astype(np.uint32)
    return np.bincount(digits, weights=weights, minlength=size)


def lerp_percentile(q: float, n: int, at: dict[int, np.generic], dtype: np.dtype) -> float:
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


def needed_ranks(n: int, percentiles: list[float]) -> list[int]:
    ranks: set[int] = set()
    for q in percentiles:
        vi = (n - 1) * (q / 100.0)
        prev = math.floor(vi)
        ranks.update([n - 1] if vi >= n - 1 else [prev, prev + 1])
    return sorted(ranks)


def percent_key(q: float) -> str:
    q = float(q)
    return str(int(q)) if q.is_integer() else repr(q)


def check_percentiles(percentiles: list[float] | None) -> list[float]:
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


def check_bins(histogram_bins: int | None) -> int | None:
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
