"""Synthetic inputs: a smooth-but-noisy 3-band uint16 raster in EPSG:32618, written window by window."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
from rasterio.transform import from_origin
from rasterio.windows import Window
from rasterio.windows import transform as window_transform

BANDS = 3
ROWS_PER_WINDOW = 512  # a multiple of the 256-pixel block height, so every block is written once
PROFILE = {
    "driver": "GTiff",
    "dtype": "uint16",
    "count": BANDS,
    "crs": "EPSG:32618",
    "tiled": True,
    "blockxsize": 256,
    "blockysize": 256,
    "compress": "DEFLATE",
    "bigtiff": "IF_SAFER",
    "num_threads": "ALL_CPUS",
}
GDAL_ENV = {"GDAL_CACHEMAX": 256, "GDAL_PAM_ENABLED": "NO"}


@dataclass(frozen=True)
class Raster:
    """A generated file and its shape."""

    path: Path
    width: int
    height: int

    @property
    def pixel_bytes(self) -> int:
        return self.width * self.height * BANDS * 2


def _pixels(row0: int, rows: int, col0: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Waves of several wavelengths (a function of global pixel coordinates) plus a little noise."""
    y = np.arange(row0, row0 + rows, dtype=np.float32)[:, None]
    x = np.arange(col0, col0 + cols, dtype=np.float32)[None, :]
    out = np.empty((BANDS, rows, cols), dtype=np.uint16)
    for b in range(BANDS):
        phase = 1.3 * b
        v = 6000 * np.sin(x / 2000 + phase) * np.cos(y / 3000)  # outer products keep this cheap
        v += 800 * (np.sin(x / 300 + phase) * np.cos(y / 150) + np.cos(x / 300 + phase) * np.sin(y / 150))
        v += 20000 + rng.integers(-3, 4, size=v.shape, dtype=np.int16)
        out[b] = v
    return out


def make_source(path: Path, size_mb: float) -> Raster:
    """A square raster of about `size_mb` MiB of pixels (10 m pixels, around 40.6° N)."""
    side = max(64, int(math.sqrt(size_mb * (1 << 20) / (BANDS * 2))))
    profile = dict(PROFILE, width=side, height=side, transform=from_origin(500_000, 4_500_000, 10, 10))
    rng = np.random.default_rng(0)
    with rasterio.Env(**GDAL_ENV), rasterio.open(path, "w", **profile) as dst:
        for row0 in range(0, side, ROWS_PER_WINDOW):
            rows = min(ROWS_PER_WINDOW, side - row0)
            dst.write(_pixels(row0, rows, 0, side, rng), window=Window(0, row0, side, rows))
    return Raster(path, side, side)


WARP_PROFILE = {
    "driver": "GTiff",
    "dtype": "uint16",
    "count": BANDS,
    "crs": "EPSG:32633",
    "tiled": True,
    "blockxsize": 512,
    "blockysize": 512,
    "compress": "DEFLATE",
    "zlevel": 1,
    "bigtiff": "IF_SAFER",
    "num_threads": "ALL_CPUS",
}


def make_warp_source(path: Path, side: int, kind: str) -> Raster:
    """The input of the large reproject cases (issue 13): `side`² × 3 uint16, EPSG:32633 (10 m pixels, around
    48.7° N, 15° E), tiled 512, DEFLATE level 1. `kind` "random": uniform random values over the whole uint16
    range (incompressible: the file is as large as its pixels); "smooth": the waves of `_pixels` with
    PREDICTOR=2 (compressible: about 35 % of its pixels). Written window by window."""
    profile = dict(WARP_PROFILE, width=side, height=side, transform=from_origin(410_000, 5_400_000, 10, 10))
    if kind == "smooth":
        profile["predictor"] = 2
    rng = np.random.default_rng(1)
    with rasterio.Env(**GDAL_ENV), rasterio.open(path, "w", **profile) as dst:
        for row0 in range(0, side, ROWS_PER_WINDOW):
            rows = min(ROWS_PER_WINDOW, side - row0)
            if kind == "random":
                data = rng.integers(0, 1 << 16, size=(BANDS, rows, side), dtype=np.uint16)
            else:
                data = _pixels(row0, rows, 0, side, rng)
            dst.write(data, window=Window(0, row0, side, rows))
    return Raster(path, side, side)


def make_tiles(src: Raster, workdir: Path) -> list[Raster]:
    """The source split into 2 × 2 tiles that overlap by 5 % of its side, copied window by window."""
    half, overlap = src.width // 2, max(16, src.width // 20)
    spans = [(0, half + overlap), (half - overlap, src.width)]
    tiles = []
    with rasterio.Env(**GDAL_ENV), rasterio.open(src.path) as ds:
        for r, (row0, row1) in enumerate(spans):
            for c, (col0, col1) in enumerate(spans):
                tile = Raster(workdir / f"tile{2 * r + c + 1}.tif", col1 - col0, row1 - row0)
                full = Window(col0, row0, tile.width, tile.height)
                profile = dict(PROFILE, width=tile.width, height=tile.height, transform=window_transform(full, ds.transform))
                with rasterio.open(tile.path, "w", **profile) as dst:
                    for r0 in range(0, tile.height, ROWS_PER_WINDOW):
                        rows = min(ROWS_PER_WINDOW, tile.height - r0)
                        data = ds.read(window=Window(col0, row0 + r0, tile.width, rows))
                        dst.write(data, window=Window(0, r0, tile.width, rows))
                tiles.append(tile)
    return tiles
