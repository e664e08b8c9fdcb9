"""Exact band statistics, streamed window by window (never the values stored in the file)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS, count_windows, iter_windows
from gdal_mcp.models import BandStatistics


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

    def result(self) -> BandStatistics:
        total = self.n + self.invalid
        if self.n == 0:
            return BandStatistics(min=None, max=None, mean=None, std=None, sum=None, valid_count=0,
                                  nodata_count=self.invalid, valid_percent=0.0)
        return BandStatistics(
            min=self.lo, max=self.hi, mean=self.mean, std=float(np.sqrt(self.m2 / self.n)), sum=self.total,
            valid_count=self.n, nodata_count=self.invalid,
            valid_percent=100.0 * self.n / total if total else 0.0,
        )


def valid_values(chunk: np.ma.MaskedArray) -> tuple[np.ndarray, int]:
    """Valid pixels of a masked band chunk (mask and NaN excluded) and how many were invalid."""
    data = np.ma.getdata(chunk)
    valid = ~np.ma.getmaskarray(chunk)
    if np.issubdtype(data.dtype, np.floating):
        valid &= ~np.isnan(data)
    values = data[valid]
    return values, int(data.size - values.size)


def band_statistics(ds, bands: list[int], *, window: Window | None = None,
                    progress: Progress = no_progress) -> dict[int, BandStatistics]:
    """Exact min/max/mean/std/sum and valid counts of `bands`, honouring nodata and masks."""
    acc = {b: _Accumulator() for b in bands}
    width = int(window.width) if window else ds.width
    height = int(window.height) if window else ds.height
    col0 = int(window.col_off) if window else 0
    row0 = int(window.row_off) if window else 0
    block = ds.block_shapes[0] if ds.block_shapes else (256, 256)
    # All bands are read together, so a window holds DEFAULT_WINDOW_PIXELS pixels summed over bands.
    budget = max(1, DEFAULT_WINDOW_PIXELS // max(1, len(bands)))
    n_windows = max(1, count_windows(width, height, block, budget))
    for i, w in enumerate(iter_windows(width, height, block, budget)):
        w = Window(w.col_off + col0, w.row_off + row0, w.width, w.height)
        chunk = ds.read(bands, window=w, masked=True)
        for j, b in enumerate(bands):
            values, invalid = valid_values(chunk[j])
            acc[b].add(values, invalid)
        progress((i + 1) / n_windows, f"statistics: window {i + 1}/{n_windows}")
    return {b: a.result() for b, a in acc.items()}
