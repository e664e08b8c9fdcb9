"""Window iteration covers every pixel exactly once, within the pixel budget."""

from __future__ import annotations

import numpy as np
import pytest

from gdal_mcp.engine.raster.windows import iter_windows


@pytest.mark.parametrize(
    "width,height,block,budget",
    [
        (791, 718, (3, 791), 4096),
        (1000, 1000, (256, 256), 100_000),
        (100_000, 50, (1, 100_000), 10_000),
        (30000, 30000, (30000, 30000), 1_000_000),
        (5, 5, (256, 256), 4),
    ],
)
def test_windows_tile_the_raster(width: int, height: int, block: tuple[int, int], budget: int) -> None:
    hits = np.zeros((height, width), dtype=np.uint8) if width * height <= 10**8 else None
    total = 0
    for w in iter_windows(width, height, block, budget):
        total += int(w.width * w.height)
        assert (
            w.width * w.height <= max(2 * budget, block[0] * block[1] if block[0] * block[1] <= 2 * budget else 0)
            or w.height == 1
            or w.width <= block[1]
        )
        if hits is not None:
            hits[int(w.row_off) : int(w.row_off + w.height), int(w.col_off) : int(w.col_off + w.width)] += 1
    assert total == width * height
    if hits is not None:
        assert (hits == 1).all()
