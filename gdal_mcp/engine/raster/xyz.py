"""Raster to a CSV point table (gdal2xyz -csv), written row by row in bounded memory."""

from __future__ import annotations

import csv
from collections.abc import Iterator

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import bbox_window, read_bands, select_bands
from gdal_mcp.engine.raster.windows import count_windows, iter_windows
from gdal_mcp.errors import GdalMcpError

# Text is ~100 bytes a cell in numpy, so windows are much smaller than for statistics.
XYZ_WINDOW_CELLS = 1 << 18


def _row_major_windows(window: Window, block_height: int, budget: int) -> tuple[int, Iterator[Window]]:
    """Windows over `window` in gdal2xyz order: full-width strips, or pieces of single rows when too wide."""
    width, height = int(window.width), int(window.height)
    # A block of (block_height, 1) keeps strips on block rows when such a strip fits, else (1, 1) gives
    # single rows (cut into pieces for extremely wide rasters): both keep pixels in row-major order.
    block = (block_height, 1) if block_height * width <= budget else (1, 1)
    n = max(1, count_windows(width, height, block, budget))
    wins = (
        Window(w.col_off + window.col_off, w.row_off + window.row_off, w.width, w.height)
        for w in iter_windows(width, height, block, budget)
    )
    return n, wins


def _text(values: np.ndarray) -> np.ndarray:
    """Integers without decimals, floats as the shortest text that reads back to the same value."""
    return values.astype(str)


@wrap_gdal_errors
def to_xyz(
    src: str,
    dst: str,
    bands: list[int] | None = None,
    skip_nodata: bool = True,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    progress: Progress = no_progress,
) -> tuple[dict, list[str]]:
    """Write one CSV row per pixel centre: x, y, then one value per band (default: all bands).

    Header `x,y,band_1,...`. With skip_nodata, pixels where every selected band is nodata, masked or
    NaN are left out; other pixels keep their stored values. Returns ({"rows": n, "columns": [...]}, warnings).
    """
    with open_raster(src) as ds:
        indexes = select_bands(ds, bands)
        dtypes = [np.dtype(ds.dtypes[b - 1]) for b in indexes]
        for b, dt in zip(indexes, dtypes, strict=True):
            if dt.kind not in "uifb":
                raise GdalMcpError("unsupported", f"band {b} is {dt.name}; xyz export needs real-valued bands")
        window = bbox_window(ds, bbox, bbox_crs)
        gt = ds.transform.to_gdal()
        columns = ["x", "y"] + [f"band_{b}" for b in indexes]
        budget = max(1, XYZ_WINDOW_CELLS // (2 + len(indexes)))
        block_height = ds.block_shapes[0][0] if ds.block_shapes else 1
        n, windows = _row_major_windows(window, block_height, budget)
        rows = 0
        try:
            fh = open(dst, "w", newline="", encoding="utf-8")
        except OSError as e:
            raise GdalMcpError("invalid-argument", f"cannot write {dst}: {e.strerror}") from None
        with fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(columns)
            for i, w in enumerate(windows):
                chunk = read_bands(ds, indexes, window=w, masked=True)
                data = np.ma.getdata(chunk)
                if skip_nodata:
                    invalid = np.ma.getmaskarray(chunk).copy()
                    for j, dt in enumerate(dtypes):
                        if dt.kind == "f":
                            invalid[j] |= np.isnan(data[j])
                    rr, cc = np.nonzero(~invalid.all(axis=0))
                else:
                    rr, cc = np.nonzero(np.ones(data.shape[1:], dtype=bool))
                if rr.size:
                    col = cc + int(w.col_off)
                    row = rr + int(w.row_off)
                    # Same arithmetic, in the same order, as gdal2xyz: the centre of each pixel.
                    x = gt[0] + (col + 0.5) * gt[1] + (row + 0.5) * gt[2]
                    y = gt[3] + (col + 0.5) * gt[4] + (row + 0.5) * gt[5]
                    cells = [_text(x), _text(y)]
                    cells += [_text(data[j][rr, cc].astype(dt, copy=False)) for j, dt in enumerate(dtypes)]
                    writer.writerows(zip(*cells, strict=True))
                    rows += int(rr.size)
                progress((i + 1) / n, f"xyz: window {i + 1}/{n}, {rows} rows written")
    return {"rows": rows, "columns": columns}, []
