"""Window iteration: the one way engine code walks a raster in bounded memory."""

from __future__ import annotations

from collections.abc import Iterator

from rasterio.windows import Window

DEFAULT_WINDOW_PIXELS = 4 * 1024 * 1024


def iter_windows(
    width: int, height: int, block: tuple[int, int] = (256, 256), max_pixels: int = DEFAULT_WINDOW_PIXELS
) -> Iterator[Window]:
    """Strips of whole blocks covering the raster, each at most about `max_pixels` per band.

    `block` is (height, width) as rasterio's block_shapes gives it. Strips span the full width when
    that fits; very wide rasters are also cut into columns of whole blocks.
    """
    bh, bw = max(1, block[0]), max(1, block[1])
    if bh * bw > 2 * max_pixels:
        # Huge blocks (single-strip files): GDAL caches the block; our arrays stay small anyway.
        bh, bw = 1, 1
    rows = max(bh, (max_pixels // max(1, width)) // bh * bh)
    cols = width
    if rows * width > 2 * max_pixels:
        rows = bh
        cols = max(bw, (max_pixels // bh) // bw * bw)
    for row in range(0, height, rows):
        h = min(rows, height - row)
        for col in range(0, width, cols):
            yield Window(col, row, min(cols, width - col), h)


def count_windows(width: int, height: int, block: tuple[int, int] = (256, 256), max_pixels: int = DEFAULT_WINDOW_PIXELS) -> int:
    return sum(1 for _ in iter_windows(width, height, block, max_pixels))
