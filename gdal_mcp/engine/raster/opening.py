"""Opening rasters: the one place engine code opens a dataset for reading."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import rasterio
from rasterio.errors import RasterioIOError

from gdal_mcp.engine import guard
from gdal_mcp.engine.raster.headers import check_header
from gdal_mcp.errors import GdalMcpError


@contextlib.contextmanager
def open_raster(path: str, **kwargs: Any) -> Iterator[rasterio.io.DatasetReader]:
    """Open a raster, mapping GDAL's refusal to a clear error and checking the files it reaches."""
    check_header(path)
    try:
        ds = rasterio.open(path, **kwargs)
    except RasterioIOError as e:
        text = str(e)
        if path.upper().startswith("HDF4") or path.lower().endswith((".hdf", ".hdf4", ".he4")):
            raise GdalMcpError("unsupported", f"this GDAL build has no HDF4 driver; cannot open {path}") from None
        if "not recognized as" in text or "not recognised as" in text:
            raise GdalMcpError(
                "unsupported",
                f"{path} is not a raster GDAL can read (for vector data use vector_info)",
            ) from None
        raise GdalMcpError("gdal-error", f"GDAL cannot open {path}: {text}") from None
    try:
        guard.check_files(ds.files)
        gt = ds.transform.to_gdal()
        if not all(math.isfinite(v) for v in (*gt, *ds.bounds)):
            # NaN or overflowing coordinates cannot be placed, compared or written as JSON numbers.
            raise GdalMcpError("gdal-error", f"{path}: the geotransform {list(gt)} does not give finite "
                               "coordinates; the file's georeferencing is corrupt")
        yield ds
    finally:
        ds.close()
