"""The DEM grid the hydrology tools work on: the whole band in memory (refused over MAX_CELLS), its ground distances
to the eight neighbours (per row on lon/lat), its cells' ground areas (engine/raster/pixel_areas.py), the raster
writer, and pyflwdir set up for a confined worker (numba's cache in the worker's private temporary directory)."""

from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import pixel_driver, write_windows
from gdal_mcp.engine.raster.pixel_areas import pixel_areas
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.errors import GdalMcpError

#: Largest grid (width x height) a hydrology tool reads: every algorithm here (priority-flood fill, flat routing,
#: accumulation in topological order) needs the whole grid at once. Measured at this limit (5000 x 5000 Float32, with
#: the worker's default 4 GiB address-space limit): flow_accumulation peaks at 2.2 GB resident (about 90 bytes a cell:
#: elevations in float64, directions, pyflwdir's index and order arrays, accumulation), stream_network 2.3 GB, breach
#: 2.0 GB; 20-30 s each. Beyond it the tool refuses with resource-limit rather than exhausting the worker's memory.
MAX_CELLS = 25_000_000
WINDOW_PIXELS = 1 << 22

#: D8 in the order ties are broken: E, SE, S, SW, W, NW, N, NE; (row, column) offsets and their ESRI codes
OFFSETS: tuple[tuple[int, int], ...] = ((0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1))
CODES = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=np.uint8)
NAMES = ("E", "SE", "S", "SW", "W", "NW", "N", "NE")
PIT = 0
NODATA = 247


@dataclass
class Dem:
    """One band of a DEM in memory, with what the algorithms need to know of its grid."""

    z: np.ndarray  # float64, NaN where nodata
    valid: np.ndarray  # bool
    transform: Any
    crs: Any
    geographic: bool
    #: ground distance (metres, or CRS units without a CRS) to the neighbour in each direction of OFFSETS:
    #: shape (8, 1, 1) on a projected grid, (8, height, 1) on a lon/lat grid (per row)
    dist: np.ndarray
    #: ground area of each cell in m², broadcastable to the grid ((1, 1) or (height, 1)); None without a CRS
    areas: np.ndarray | None
    warnings: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int]:
        return self.z.shape  # type: ignore[return-value]

    def area_grid(self) -> np.ndarray:
        """Cell areas (m²) as a full (height, width) float64 grid, 0 on nodata; refuses without a CRS."""
        if self.areas is None:
            raise GdalMcpError(
                "invalid-argument",
                "the DEM has no CRS, so cell areas are unknown; use measure='cells' (flow_accumulation) or "
                "threshold_cells (stream_network), or assign a CRS with raster_edit",
            )
        return np.where(self.valid, np.broadcast_to(self.areas, self.shape), 0.0)


def check_size(width: int, height: int) -> None:
    if width * height > MAX_CELLS:
        raise GdalMcpError(
            "resource-limit",
            f"the DEM is {width} x {height} = {width * height:,} cells; the hydrology tools hold the whole grid in memory "
            f"(about 90 bytes a cell) and take at most {MAX_CELLS:,} cells. Clip the DEM to the area of interest "
            "(raster_clip) or coarsen it (raster_reproject or raster_pipeline's resize step, with a larger resolution) first",
        )


def _distances(ds: Any, geographic: bool) -> np.ndarray:
    """Ground distance to each D8 neighbour (see Dem.dist)."""
    t = ds.transform
    if geographic:
        from pyproj import CRS

        crs = CRS.from_wkt(ds.crs.to_wkt())
        geod = crs.get_geod()
        if geod is None:
            raise GdalMcpError("unsupported", "the DEM's geographic CRS has no ellipsoid, so ground distances are unknown")
        if t.b or t.d:
            raise GdalMcpError(
                "unsupported",
                "the lon/lat DEM's geotransform is rotated; warp it to a north-up grid first (raster_reproject)",
            )
        unit = math.degrees(crs.axis_info[0].unit_conversion_factor) if crs.axis_info else 1.0  # degrees per CRS unit
        rows = np.arange(ds.height, dtype=np.float64)
        lat = t.f + t.e * (rows + 0.5)
        lon = t.c + t.a * 0.5
        out = np.empty((8, ds.height, 1))
        for k, (dr, dc) in enumerate(OFFSETS):
            lat2 = np.clip((t.f + t.e * (rows + dr + 0.5)) * unit, -90.0, 90.0)
            _, _, d = geod.inv(
                np.full(ds.height, lon * unit),
                np.clip(lat * unit, -90.0, 90.0),
                np.full(ds.height, (lon + dc * t.a) * unit),
                lat2,
            )
            out[k, :, 0] = d
        return out
    factor = 1.0
    if ds.crs is not None and ds.crs.to_wkt():
        try:
            _, factor = ds.crs.linear_units_factor
        except Exception:  # noqa: BLE001 - no linear unit: CRS units as they are
            factor = 1.0
    out = np.empty((8, 1, 1))
    for k, (dr, dc) in enumerate(OFFSETS):
        out[k, 0, 0] = math.hypot(dc * t.a + dr * t.b, dc * t.d + dr * t.e) * factor
    return out


def read_dem(src: str, band: int, progress: Progress, *, what: str = "DEM") -> Dem:
    """Band `band` of `src` in memory (float64, NaN for nodata), refused over MAX_CELLS."""
    with open_raster(src) as ds:
        select_bands(ds, [band])
        check_size(ds.width, ds.height)
        progress(0.0, f"reading the {what} ({ds.width} x {ds.height})")
        z = ds.read(band, out_dtype="float64", masked=True)
        valid = ~np.ma.getmaskarray(z) & np.isfinite(z.filled(np.nan))
        values = np.where(valid, z.filled(np.nan), np.nan)
        has_crs = ds.crs is not None and bool(ds.crs.to_wkt())
        geographic = has_crs and ds.crs.is_geographic
        warnings: list[str] = []
        if not has_crs:
            warnings.append("the DEM has no CRS: distances are in its geotransform's units and cell areas unknown")
        areas_of = pixel_areas(ds)
        areas = None if areas_of.method == "none" else areas_of.for_window(Window(0, 0, ds.width, ds.height))
        if areas is not None and areas_of.per_pixel:
            raise GdalMcpError("unsupported", "the DEM's grid is rotated; warp it to a north-up grid first (raster_reproject)")
        warnings += [w for w in areas_of.warnings if "no CRS" not in w]
        dem = Dem(
            z=values,
            valid=valid,
            transform=ds.transform,
            crs=ds.crs,
            geographic=geographic,
            dist=_distances(ds, geographic),
            areas=areas,
            warnings=warnings,
        )
    if not valid.any():
        raise GdalMcpError("invalid-argument", f"band {band} of the {what} has no valid cell (all nodata)")
    if geographic:
        dem.warnings.append(
            "lon/lat DEM: distances between cells and cell areas are the ground's, per row, on the CRS's ellipsoid"
        )
    return dem


def write_array(
    dst: str,
    dem: Dem,
    array: np.ndarray,
    *,
    dtype: str,
    nodata: float | None,
    format: str | None,
    creation_options: dict[str, Any] | None,
    what: str,
    progress: Progress,
    source: str | None = None,
) -> None:
    """Write a (height, width) array on the DEM's grid to `dst` (the format from `format` or the extension); without
    COMPRESS in the creation options a GTiff/COG keeps the compression of `source` (the DEM read), as every writer does."""
    driver = pixel_driver(dst, format, what)
    options = normalize_options(creation_options)
    height, width = array.shape

    def compute(w: Window) -> np.ndarray:
        r, c = int(w.row_off), int(w.col_off)
        return np.asarray(array[r : r + int(w.height), c : c + int(w.width)], dtype=dtype)

    write_windows(
        dst,
        driver,
        options,
        width=width,
        height=height,
        count=1,
        dtype=dtype,
        crs=dem.crs,
        transform=dem.transform,
        nodata=nodata,
        compute=compute,
        progress=progress,
        what=what,
        window_pixels=WINDOW_PIXELS,
        source=source,
    )


def ground_distance(dem: Dem, x0: Any, y0: Any, x1: Any, y1: Any) -> np.ndarray:
    """Element-wise ground distance (metres; CRS units without a CRS) between points (x0, y0) and (x1, y1) in the
    DEM's CRS: geodesic on a lon/lat grid, Euclidean times the CRS's linear unit on a projected one."""
    x0, y0, x1, y1 = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (x0, y0, x1, y1)))
    if dem.geographic:
        from pyproj import CRS

        geod = CRS.from_wkt(dem.crs.to_wkt()).get_geod()
        assert geod is not None  # read_dem refused a geographic CRS without an ellipsoid
        _, _, d = geod.inv(x0.ravel(), y0.ravel(), x1.ravel(), y1.ravel())
        return np.asarray(d, dtype=np.float64).reshape(x0.shape)
    factor = 1.0
    if dem.crs is not None and dem.crs.to_wkt():
        try:
            _, factor = dem.crs.linear_units_factor
        except Exception:  # noqa: BLE001 - no linear unit: CRS units as they are
            factor = 1.0
    return np.hypot(x1 - x0, y1 - y0) * factor


# ------------------------------------------------------------------------------------------------ pyflwdir


def numba_cache() -> None:
    """numba (pyflwdir's compiled kernels) caches what it compiles, by default beside pyflwdir's sources, which a
    confined worker may not write: the cache goes to the worker's private temporary directory instead (CPL_TMPDIR,
    set by the local pool's workers and by Dask workers alike; else TMPDIR), set before numba is first imported.
    The local pool's workers share that directory, so a server compiles each kernel once (about 5 s for the fill);
    a new worker process then loads the cache (about 2 s with the imports)."""
    import sys

    if "numba" in sys.modules:
        return
    base = os.environ.get("CPL_TMPDIR") or os.environ.get("TMPDIR") or tempfile.gettempdir()
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(base, "gdal-mcp-numba"))


_JIT: dict[str, float] = {}


def import_pyflwdir() -> Any:
    """pyflwdir, imported with numba's cache where the worker may write; the first import's time recorded."""
    started = time.perf_counter()
    numba_cache()
    import pyflwdir
    import pyflwdir.dem

    _JIT.setdefault("import_s", time.perf_counter() - started)
    return pyflwdir


def flwdir(d8: np.ndarray, dem: Dem) -> Any:
    """A pyflwdir FlwdirRaster of the D8 array (ESRI codes, 0 pit, 247 nodata) on the DEM's grid."""
    pyflwdir = import_pyflwdir()
    return pyflwdir.from_array(d8, ftype="d8", transform=dem.transform, latlon=dem.geographic, check_ftype=False)


def accumulate(flw: Any, values: np.ndarray) -> np.ndarray:
    """Sum of `values` over each cell and every cell upstream of it (pyflwdir's accuflux), as float64."""
    started = time.perf_counter()
    out = np.asarray(flw.accuflux(np.ascontiguousarray(values, dtype=np.float64), nodata=-9999.0), dtype=np.float64)
    record("first_accumulation_s", time.perf_counter() - started)
    return out


def record(name: str, seconds: float) -> None:
    """Note the seconds of a first compiled call in this process (numba compiles or loads its cache then)."""
    _JIT.setdefault(name, seconds)


def timings() -> dict[str, float]:
    """Seconds this process spent on its first pyflwdir import and first accumulation (numba compiling or loading its
    cache): what a new worker pays once. Reported once: empty for later jobs of the same worker."""
    out = {k: round(v, 3) for k, v in _JIT.items() if v >= 0}
    for k in out:
        _JIT[k] = -1.0
    return out
