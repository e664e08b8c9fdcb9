"""Remove small raster regions, like gdal_sieve.py: GDAL's GDALSieveFilter through rasterio.

A region smaller than `threshold` pixels is merged into its largest neighbouring region. Whether a
region is small depends on all of it, however far it reaches, so no halo makes windows exact: the
whole band is sieved at once. Memory is bounded instead: the band (values, result, mask and GDAL's
32-bit work copies, about 9 + 2 x itemsize bytes per pixel, measured) must fit in
SIEVE_BUDGET bytes, else the job is refused with resource-limit naming the size. The result is then
written window by window.

As gdal_sieve.py: one band out, same data type, nodata copied; pixels the band's mask marks invalid
(nodata, alpha) are neither sieved nor merged into.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import pixel_driver, summarize, write_windows
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

SIEVE_BUDGET = 1024 * 1024 * 1024
# The types GDAL's sieve takes through rasterio (values are read as 32-bit integers).
SUPPORTED = ("uint8", "int16", "uint16", "int32")
WINDOW_PIXELS = 4 * 1024 * 1024


def sieve_bytes(width: int, height: int, dtype: str) -> int:
    # measured: 627 MB peak for 8192 x 8192 Byte (about 9.8 bytes per pixel, including GDAL's work buffers)
    return width * height * (9 + 2 * np.dtype(dtype).itemsize)


@wrap_gdal_errors
def sieve(
    src: str,
    dst: str,
    *,
    threshold: int,
    connectedness: Literal[4, 8] = 4,
    band: int = 1,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Merge the regions of band `band` smaller than `threshold` pixels into their largest neighbour."""
    import rasterio.features

    warnings: list[str] = []
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise GdalMcpError("invalid-argument", f"threshold must be a whole number of pixels >= 1 (got {threshold!r})")
    if connectedness not in (4, 8) or isinstance(connectedness, bool):
        raise GdalMcpError("invalid-argument", f"connectedness must be 4 (edges) or 8 (edges and corners), got {connectedness!r}")
    driver = pixel_driver(dst, format, "sieve")
    options = normalize_options(creation_options)
    with open_raster(src) as ds:
        select_bands(ds, [band])
        dtype = ds.dtypes[band - 1]
        if dtype not in SUPPORTED:
            raise GdalMcpError(
                "unsupported",
                f"band {band} is {dtype}; GDAL's sieve takes classes as Byte, Int16, "
                "UInt16 or Int32: convert the raster first (raster_convert output_type)",
            )
        width, height = ds.width, ds.height
        need = sieve_bytes(width, height, dtype)
        if need > SIEVE_BUDGET:
            raise GdalMcpError(
                "resource-limit",
                f"sieving needs the whole band in memory: {width} x {height} {dtype} "
                f"is about {need / 2**20:.0f} MiB, over the {SIEVE_BUDGET / 2**20:.0f} MiB budget; "
                "clip the raster into smaller pieces (regions crossing the cut are sieved per piece)",
            )
        if threshold == 1:
            warnings.append("threshold 1 removes nothing: every region has at least one pixel")
        progress(0.0, f"reading band {band}")
        values = ds.read(band)
        mask = ds.read_masks(band) != 0
        progress(0.3, f"sieving regions under {threshold} pixels ({connectedness}-connected)")
        result = rasterio.features.sieve(values, threshold, mask=mask, connectivity=connectedness)
        del values, mask

        def compute(w: Window) -> np.ndarray:
            r, c = int(w.row_off), int(w.col_off)
            return np.asarray(result[r : r + int(w.height), c : c + int(w.width)], dtype=dtype)

        def report(fraction: float, message: str = "") -> None:
            progress(0.4 + 0.6 * fraction, message)

        write_windows(
            dst,
            driver,
            options,
            width=width,
            height=height,
            count=1,
            dtype=dtype,
            crs=ds.crs,
            transform=ds.transform,
            nodata=ds.nodatavals[band - 1],
            compute=compute,
            progress=report,
            what="sieve",
            window_pixels=WINDOW_PIXELS,
            block=(256, 256),
            source=ds,
        )
    return summarize(dst), warnings
