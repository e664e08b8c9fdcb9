"""Fill nodata gaps by interpolation from their edges, like gdal_fillnodata.py: GDAL's GDALFillNodata.

rasterio.fill.fillnodata runs GDALFillNodata on an array. GDAL's search for edge values stops at
`max_distance` pixels and its smoothing passes reach one pixel each, so a full-width strip read with a
halo of max_distance + smoothing_iterations (+ 2) rows above and below gives the strip's rows exactly
what the whole band gives. The strip (core + halo) is bounded: FILL_BUDGET bytes of working memory,
about 24 bytes per pixel (the values, the mask and GDAL's distance and value work buffers). A halo that
alone does not fit (a huge max_distance on a very wide raster) is refused with resource-limit.

As gdal_fillnodata.py: the output is the one band, same data type and nodata value; pixels the band's
mask (nodata, alpha, mask band) marks invalid are filled; pixels farther than max_distance from any
valid pixel stay nodata.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rasterio.enums import MaskFlags
from rasterio.windows import Window

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import pixel_driver, summarize, write_windows
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

# Core pixels per strip (tests lower it), and the working memory a strip with its halo may use.
WINDOW_PIXELS = 4 * 1024 * 1024
FILL_BUDGET = 1024 * 1024 * 1024
BYTES_PER_PIXEL = 24
SUPPORTED = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "float64")


def halo_rows(max_distance: float, smoothing_iterations: int) -> int:
    """Rows above and below a strip that GDALFillNodata may reach from the strip's rows."""
    return int(math.ceil(max_distance)) + int(smoothing_iterations) + 2


@wrap_gdal_errors
def fill_nodata(
    src: str,
    dst: str,
    *,
    max_distance: float = 100,
    smoothing_iterations: int = 0,
    band: int = 1,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Fill the invalid pixels of band `band` of `src` from the valid pixels around them, into `dst`."""
    import rasterio.fill

    warnings: list[str] = []
    if not isinstance(max_distance, int | float) or not math.isfinite(max_distance) or max_distance <= 0:
        raise GdalMcpError("invalid-argument", f"max_distance must be a positive number of pixels (got {max_distance!r})")
    if isinstance(smoothing_iterations, bool) or not isinstance(smoothing_iterations, int) or smoothing_iterations < 0:
        raise GdalMcpError("invalid-argument", f"smoothing_iterations must be an integer >= 0 (got {smoothing_iterations!r})")
    driver = pixel_driver(dst, format, "fill")
    options = normalize_options(creation_options)
    with open_raster(src) as ds:
        select_bands(ds, [band])
        dtype = ds.dtypes[band - 1]
        if dtype not in SUPPORTED:
            raise GdalMcpError("unsupported", f"band {band} is {dtype}; convert it to an integer or float type first")
        width, height = ds.width, ds.height
        halo = halo_rows(max_distance, smoothing_iterations)
        core = max(1, WINDOW_PIXELS // max(1, width))
        need = (min(height, core + 2 * halo)) * width * BYTES_PER_PIXEL
        if need > FILL_BUDGET:
            raise GdalMcpError(
                "resource-limit",
                f"filling needs strips of {min(height, core + 2 * halo)} rows x "
                f"{width} columns (max_distance {max_distance:g} px reaches {halo} rows each side): "
                f"about {need / 2**20:.0f} MiB, over the {FILL_BUDGET / 2**20:.0f} MiB budget; use a "
                "smaller max_distance or clip the raster into narrower pieces",
            )
        if ds.mask_flag_enums[band - 1] == [MaskFlags.all_valid]:
            warnings.append(
                "the band has no nodata value or mask: every pixel is valid, nothing was filled "
                "(set a nodata value first with raster_convert nodata=)"
            )

        def compute(w: Window) -> np.ndarray:
            r0, r1 = int(w.row_off), int(w.row_off + w.height)
            a, b = max(0, r0 - halo), min(height, r1 + halo)
            read = Window(0, a, width, b - a)
            values = ds.read(band, window=read)
            mask = ds.read_masks(band, window=read)
            if mask.all():
                filled = values
            else:
                filled = rasterio.fill.fillnodata(
                    values, mask=mask, max_search_distance=float(max_distance), smoothing_iterations=int(smoothing_iterations)
                )
            c0 = int(w.col_off)
            return np.asarray(filled[r0 - a : r1 - a, c0 : c0 + int(w.width)], dtype=dtype)

        block = (max(1, min(core, height)), width)
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
            progress=progress,
            what="fill",
            window_pixels=block[0] * width,
            block=(1, width),
            source=ds,
        )
    return summarize(dst), warnings
