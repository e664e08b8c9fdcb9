"""Pixel-by-pixel comparison of two rasters (the server's and the CLI's output), streamed window by window."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
from rasterio.windows import Window

ROWS = 512  # rows per window: a few hundred MB at most for 3 bands of ~25 000 columns on both sides


@dataclass(frozen=True)
class Comparison:
    text: str  # one line for the report
    fraction: float | None  # differing pixels / compared pixels (None: the grids cannot be compared)


def compare_rasters(a: Path, b: Path) -> Comparison:
    """The fraction of pixels (any band) that differ between `a` and `b` on their common grid.

    The grids must have the same CRS, band count and pixel size; an origin shifted by a whole number of
    pixels is aligned, and the pixels outside the overlap are counted and reported apart."""
    with rasterio.Env(GDAL_CACHEMAX=64), rasterio.open(a) as da, rasterio.open(b) as db:
        ta, tb = da.transform, db.transform
        grid = f"{da.width}×{da.height} vs {db.width}×{db.height}"
        if (
            da.count != db.count
            or da.crs != db.crs
            or not (math.isclose(ta.a, tb.a, rel_tol=1e-9) and math.isclose(ta.e, tb.e, rel_tol=1e-9))
        ):
            return Comparison(
                f"grids differ ({grid}, pixel {ta.a:g},{ta.e:g} vs {tb.a:g},{tb.e:g}, CRS {da.crs} vs {db.crs}): not compared",
                None,
            )
        dx, dy = (tb.c - ta.c) / ta.a, (tb.f - ta.f) / ta.e  # b's origin in a's pixel coordinates
        if abs(dx - round(dx)) > 1e-3 or abs(dy - round(dy)) > 1e-3:
            return Comparison(f"grids differ by a fraction of a pixel ({dx:.4f}, {dy:.4f} px; {grid}): not compared", None)
        dx, dy = round(dx), round(dy)
        # the overlap, in a's pixel coordinates
        col0, row0 = max(0, dx), max(0, dy)
        col1, row1 = min(da.width, dx + db.width), min(da.height, dy + db.height)
        if col1 <= col0 or row1 <= row0:
            return Comparison(f"grids do not overlap ({grid})", None)
        width = col1 - col0
        differ = 0
        for r in range(row0, row1, ROWS):
            rows = min(ROWS, row1 - r)
            pa = da.read(window=Window(col0, r, width, rows))
            pb = db.read(window=Window(col0 - dx, r - dy, width, rows))
            differ += int(np.count_nonzero((pa != pb).any(axis=0)))
        compared = width * (row1 - row0)
        outside = da.width * da.height + db.width * db.height - 2 * compared
    fraction = differ / compared
    shift = f"; origins {dx}, {dy} px apart, {outside:,} pixels outside the overlap" if (dx or dy or outside) else ""
    return Comparison(
        f"pixels differing (any band) server vs CLI: {differ:,} of {compared:,} = {100 * fraction:.4f} % ({grid}{shift})",
        fraction,
    )
