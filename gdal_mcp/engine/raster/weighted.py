"""Area weights for raster_stats (weights="area"): each valid pixel counts by its ground area (engine/raster/
pixel_areas.py: geodesic per row on lon/lat grids), so a lon/lat raster's high-latitude rows weigh less.

- mean and std: the weighted mean sum(w v) / sum(w) and the weighted population std sqrt(sum(w (v - mean)²) /
  sum(w)) (numpy's average with weights), accumulated chunk by chunk with West's (1979) weighted update, tiles
  merged in tile order;
- percentiles: numpy's percentile(v, q, weights=w, method="inverted_cdf"): the smallest value whose cumulative
  weight reaches q% of the total weight (q=0 the minimum, q=100 the maximum). stats.py finds them with the same radix
  selection as the unweighted ones, with a histogram of summed weights beside each histogram of counts: per digit
  the cumulative weight, the first digit reaching the target (`first_reaching`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.raster.pixel_areas import PixelAreas

WEIGHTS = ("none", "area")
#: a lon/lat raster read with weights="none" is told about weights="area" when its pixel areas differ more than this
SPREAD_HINT = 1.01


@dataclass
class WeightedMoments:
    """Running total weight, weighted mean and weighted M2 (sum of w (v - mean)²)."""

    weight: float = 0.0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, values: np.ndarray, weights: np.ndarray) -> None:
        if values.size == 0:
            return
        v = values.astype(np.float64, copy=False)
        total = float(weights.sum())
        if total <= 0:
            return
        # numpy's sums, not np.dot: BLAS may add in an order that depends on the arrays' alignment, and tiles merged
        # in tile order must give the same floats in any process
        mean = float((weights * v).sum() / total)
        d = v - mean
        np.square(d, out=d)
        d *= weights
        self._combine(total, mean, float(d.sum()))

    def merge(self, other: WeightedMoments) -> None:
        self._combine(other.weight, other.mean, other.m2)

    def _combine(self, weight: float, mean: float, m2: float) -> None:
        if weight <= 0:
            return
        total = self.weight + weight
        delta = mean - self.mean
        self.mean += delta * weight / total
        self.m2 += m2 + delta * delta * self.weight * weight / total
        self.weight = total

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / self.weight) if self.weight > 0 else math.nan


def first_reaching(weights: np.ndarray, targets: list[float], below: float) -> list[tuple[int, float]]:
    """For each target: the index of the first positive entry of `weights` where `below` plus the cumulative weight
    reaches it (the last positive entry when rounding leaves the sum short of it), and the cumulative weight before
    that entry. [] when no entry is positive."""
    nz = np.flatnonzero(weights > 0)
    if not nz.size:
        return []
    cumulative = below + np.cumsum(weights[nz])
    out = []
    for target in targets:
        k = min(int(np.searchsorted(cumulative, target, side="left")), nz.size - 1)
        out.append((int(nz[k]), float(cumulative[k - 1]) if k else below))
    return out


def area_spread(areas: PixelAreas, window: Window) -> float | None:
    """On a north-up lon/lat grid, the largest pixel area of the rows of `window` over the smallest (None elsewhere)."""
    if areas.method != "geodesic" or areas.per_pixel:
        return None
    r0, h = int(window.row_off), int(window.height)
    rows = {r0, r0 + h - 1}
    t: Any = areas.transform
    if t.e:
        equator = math.floor(-t.f / t.e)  # the row holding latitude 0, if it is read
        if r0 <= equator < r0 + h:
            rows.add(equator)
    sizes = [float(areas.rows(r, r + 1)[0]) for r in sorted(rows)]
    return max(sizes) / min(sizes) if min(sizes) > 0 else math.inf
