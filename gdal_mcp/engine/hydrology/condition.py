"""Depression removal: fill (raise) or breach (carve), so that every cell of a DEM drains to an outlet.

- fill: pyflwdir's priority-flood (`pyflwdir.dem.fill_depressions`, Wang & Liu 2006) with outlets at every cell on the
  grid edge or next to nodata: each depression is raised to the elevation of its lowest pour point (a flat, which
  flow_direction routes across). pyflwdir orders its queue by float32 elevations: exact for Int16, Int32 below 2^24
  and Float32 DEMs; a Float64 DEM whose values float32 cannot hold may keep sub-millimetre depressions (warned).
- breach: carving instead of raising (implemented here; pyflwdir's `dem_adjust` mixes raising and lowering): from
  the bottom of each depression (a cell the fill raised that has no lower neighbour), lowest first, the path the
  priority-flood routes it along (over the depression's lowest pour point) is followed downstream, and every cell on it
  higher than the lowest elevation met so far is lowered to it. So a channel at the bottom's elevation runs from the
  bottom across the rim until the terrain beyond falls below it; the rest of the depression keeps its elevations.

Either way the output keeps the DEM's data type: both only copy existing elevations (a spill or a bottom elevation)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.hydrology.d8 import d8_directions
from gdal_mcp.engine.hydrology.grid import Dem, flwdir, import_pyflwdir, numba_cache, read_dem, record, timings, write_array
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import summarize
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import HydroRasterSummary

Method = Literal["fill", "breach"]
METHODS = ("fill", "breach")


@dataclass
class Conditioned:
    z: np.ndarray
    raised: int
    lowered: int
    max_change: float


def _fill(dem: Dem) -> tuple[np.ndarray, np.ndarray]:
    pyflwdir = import_pyflwdir()
    started = time.perf_counter()
    filled, d8 = pyflwdir.dem.fill_depressions(np.ascontiguousarray(dem.z), outlets="edge", nodata=np.nan)
    record("first_fill_s", time.perf_counter() - started)
    return np.where(dem.valid, filled, np.nan), d8


_CARVE: list[Any] = []


def _carve_kernel() -> Any:
    """The carving loop, compiled by numba on first use (its cache in the worker's temporary directory)."""
    if not _CARVE:
        numba_cache()
        from numba import njit

        def carve(idxs_ds: np.ndarray, seeds: np.ndarray, z: np.ndarray) -> np.ndarray:
            out = z.copy()
            level = np.full(z.size, np.inf)  # the running level an earlier trace carved below each cell
            for s in seeds:  # lowest first
                run = out[s]
                idx = s
                while True:
                    level[idx] = run
                    ds = idxs_ds[idx]
                    if ds == idx or level[ds] <= run:
                        break  # an outlet, or an earlier trace already carved from here at or below this level
                    if out[ds] > run:
                        out[ds] = run
                    else:
                        run = out[ds]
                    idx = ds
            return out

        _CARVE.append(njit(cache=True)(carve))
    return _CARVE[0]


def condition(dem: Dem, method: str) -> Conditioned:
    """The DEM with its depressions filled or breached (module docstring)."""
    if method not in METHODS:
        raise GdalMcpError("invalid-argument", f"unknown method {method!r}; use fill or breach")
    filled, fill_d8 = _fill(dem)
    if method == "fill":
        z = filled
    else:
        from gdal_mcp.engine.hydrology.d8 import steepest

        # the bottoms of depressions: raised by the fill, no strictly lower neighbour
        bottoms = dem.valid & (filled > dem.z) & (steepest(dem) == 0)
        seeds = np.flatnonzero(bottoms.ravel())
        seeds = seeds[np.argsort(dem.z.ravel()[seeds], kind="stable")]
        flw = flwdir(np.where(dem.valid, fill_d8, np.uint8(247)).astype(np.uint8), dem)
        flat = np.where(dem.valid, dem.z, np.inf).ravel()
        started = time.perf_counter()
        carved = _carve_kernel()(np.asarray(flw.idxs_ds, dtype=np.int64), seeds.astype(np.int64), flat)
        record("first_carve_s", time.perf_counter() - started)
        z = np.where(dem.valid, carved.reshape(dem.shape), np.nan)
    diff = np.where(dem.valid, z - dem.z, 0.0)
    return Conditioned(
        z=z,
        raised=int((diff > 0).sum()),
        lowered=int((diff < 0).sum()),
        max_change=float(np.abs(diff).max()) if diff.size else 0.0,
    )


def float32_warning(src: str, band: int, dem: Dem) -> list[str]:
    """The fill's float32 caveat, for a Float64 DEM whose values float32 cannot hold."""
    with open_raster(src) as ds:
        dtype = ds.dtypes[band - 1]
    if dtype == "float64":
        v = dem.z[dem.valid]
        if not np.array_equal(v.astype(np.float32).astype(np.float64), v):
            return [
                "the DEM is Float64 with values float32 cannot hold: the fill orders cells by float32 elevation, so "
                "depressions shallower than float32's precision may remain (convert the DEM to Float32 first to be exact)"
            ]
    return []


@wrap_gdal_errors
def dem_condition(
    src: str,
    dst: str,
    *,
    method: Method = "fill",
    band: int = 1,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[HydroRasterSummary, list[str]]:
    """Fill or breach the depressions of band `band` of `src` into `dst` (same data type and nodata)."""
    if method not in METHODS:
        raise GdalMcpError("invalid-argument", f"unknown method {method!r}; use fill or breach")
    dem = read_dem(src, band, progress)
    warnings = [*dem.warnings, *float32_warning(src, band, dem)]
    progress(0.2, f"{method}ing depressions")
    before = d8_directions(dem)
    result = condition(dem, method)
    after = d8_directions(dataclasses.replace(dem, z=result.z))
    with open_raster(src) as ds:
        dtype, nodata = ds.dtypes[band - 1], ds.nodatavals[band - 1]
    if nodata is None and not dem.valid.all():
        nodata = -9999.0 if dtype.startswith("float") else None
    out = np.where(dem.valid, result.z, nodata if nodata is not None else 0)

    def report(fraction: float, message: str = "") -> None:
        progress(0.7 + 0.3 * fraction, message)

    write_array(
        dst,
        dem,
        out,
        dtype=dtype,
        nodata=nodata,
        format=format,
        creation_options=creation_options,
        what="dem_condition",
        progress=report,
        source=src,
    )
    summary = summarize(dst)
    return (
        HydroRasterSummary(
            **summary.model_dump(),
            product=f"conditioned DEM ({method})",
            pits_before=before.pits,
            pits=after.pits,
            outlets=after.outlets,
            flat_cells=after.flat_cells,
            cells_changed=result.raised + result.lowered,
            cells_raised=result.raised,
            cells_lowered=result.lowered,
            max_change=result.max_change,
            compile_seconds=timings(),
        ),
        warnings,
    )
