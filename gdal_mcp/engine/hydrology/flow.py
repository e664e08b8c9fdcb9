"""flow_direction and flow_accumulation, and the routing every hydrology tool starts from (`route`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.hydrology.condition import Conditioned, condition, float32_warning
from gdal_mcp.engine.hydrology.d8 import Directions, d8_directions
from gdal_mcp.engine.hydrology.grid import CODES, NODATA, PIT, Dem, accumulate, flwdir, read_dem, timings, write_array
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.output import summarize
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import HydroRasterSummary

Conditioning = Literal["none", "fill", "breach"]
InputType = Literal["dem", "flow_direction"]
Units = Literal["cells", "m2", "km2"]
CONDITIONINGS = ("none", "fill", "breach")
VALID_CODES = frozenset([*CODES.tolist(), PIT, 255, NODATA])


@dataclass
class Routing:
    """A grid's D8 directions, ready for pyflwdir, and how they were made."""

    dem: Dem
    d8: np.ndarray
    directions: Directions | None = None  # None: read from a flow-direction raster
    conditioned: Conditioned | None = None
    warnings: list[str] = field(default_factory=list)
    _flw: Any = None

    @property
    def flw(self) -> Any:
        if self._flw is None:
            self._flw = flwdir(self.d8, self.dem)
        return self._flw

    def accumulation(self, units: str) -> np.ndarray:
        """Cells (or area in m² / km²) draining through each cell, the cell itself included; NaN on nodata."""
        if units not in ("cells", "m2", "km2"):
            raise GdalMcpError("invalid-argument", f"unknown units {units!r}; use cells, m2 or km2")
        values = self.dem.valid.astype(np.float64) if units == "cells" else self.dem.area_grid()
        if units == "km2":
            values = values / 1e6
        return np.where(self.dem.valid, accumulate(self.flw, values.ravel()).reshape(self.dem.shape), np.nan)

    def fields(self) -> dict[str, Any]:
        """The HydroRasterSummary fields that say how the directions were made."""
        out: dict[str, Any] = {"compile_seconds": timings()}
        if self.directions is not None:
            out |= {"outlets": self.directions.outlets, "pits": self.directions.pits, "flat_cells": self.directions.flat_cells}
        if self.conditioned is not None:
            c = self.conditioned
            out |= {
                "cells_changed": c.raised + c.lowered,
                "cells_raised": c.raised,
                "cells_lowered": c.lowered,
                "max_change": c.max_change,
            }
        return out


def route(
    src: str, *, band: int = 1, condition_method: str = "fill", input_type: str = "dem", progress: Progress = no_progress
) -> Routing:
    """D8 directions of `src`: of the DEM after conditioning (`condition_method`: none, fill, breach), or read from a
    flow-direction raster (`input_type='flow_direction'`, ESRI codes)."""
    if input_type not in ("dem", "flow_direction"):
        raise GdalMcpError("invalid-argument", f"unknown input_type {input_type!r}; use dem or flow_direction")
    if condition_method not in CONDITIONINGS:
        raise GdalMcpError("invalid-argument", f"unknown condition {condition_method!r}; use none, fill or breach")
    if input_type == "flow_direction":
        dem = read_dem(src, band, progress, what="flow-direction raster")
        values = dem.z[dem.valid]
        bad = ~np.isin(values, list(VALID_CODES))
        if bad.any():
            raise GdalMcpError(
                "invalid-argument",
                f"the input is not a D8 flow-direction raster: it holds {float(values[bad][0]):g}, not one of the codes 1, "
                "2, 4, …, 128 (0 or 255 pit, 247 nodata); pass a flow_direction output, or input_type='dem' for a DEM",
            )
        d8 = np.where(dem.valid, np.nan_to_num(dem.z, nan=NODATA), NODATA).astype(np.uint8)
        d8[d8 == 255] = PIT
        dem.valid &= d8 != NODATA
        return Routing(dem=dem, d8=d8, warnings=list(dem.warnings))
    dem = read_dem(src, band, progress)
    warnings = list(dem.warnings)
    conditioned = None
    if condition_method != "none":
        progress(0.1, f"conditioning the DEM ({condition_method})")
        warnings += float32_warning(src, band, dem)
        conditioned = condition(dem, condition_method)
        dem.z = conditioned.z
    progress(0.3, "computing D8 flow directions")
    directions = d8_directions(dem)
    warnings += directions.notes()
    return Routing(dem=dem, d8=directions.d8, directions=directions, conditioned=conditioned, warnings=warnings)


def _report(progress: Progress, start: float) -> Progress:
    def report(fraction: float, message: str = "") -> None:
        progress(start + (1 - start) * fraction, message)

    return report


@wrap_gdal_errors
def flow_direction(
    src: str,
    dst: str,
    *,
    band: int = 1,
    condition: Conditioning = "fill",
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[HydroRasterSummary, list[str]]:
    """D8 flow directions of the DEM `src` (UInt8, ESRI codes; 247 nodata) into `dst`."""
    routing = route(src, band=band, condition_method=condition, progress=progress)
    write_array(
        dst,
        routing.dem,
        routing.d8,
        dtype="uint8",
        nodata=NODATA,
        format=format,
        creation_options=creation_options,
        what="flow_direction",
        progress=_report(progress, 0.7),
        source=src,
    )
    summary = summarize(dst)
    return HydroRasterSummary(**summary.model_dump(), product="D8 flow direction", **routing.fields()), routing.warnings


@wrap_gdal_errors
def flow_accumulation(
    src: str,
    dst: str,
    *,
    band: int = 1,
    input_type: InputType = "dem",
    condition: Conditioning = "fill",
    units: Units = "cells",
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[HydroRasterSummary, list[str]]:
    """Upstream cells or area of every cell of `src` (a DEM, or a D8 raster) into `dst`."""
    if units not in ("cells", "m2", "km2"):
        raise GdalMcpError("invalid-argument", f"unknown units {units!r}; use cells, m2 or km2")
    routing = route(src, band=band, condition_method=condition, input_type=input_type, progress=progress)
    if input_type == "flow_direction" and condition != "fill":
        routing.warnings.append("condition applies to a DEM only; the flow directions were used as given")
    progress(0.5, "accumulating flow")
    acc = routing.accumulation(units)
    cells = units == "cells"
    nodata = 0 if cells else -9999.0
    out = np.where(routing.dem.valid, acc, nodata)
    write_array(
        dst,
        routing.dem,
        out,
        dtype="uint32" if cells else "float64",
        nodata=nodata,
        format=format,
        creation_options=creation_options,
        what="flow_accumulation",
        progress=_report(progress, 0.7),
        source=src,
    )
    summary = summarize(dst)
    return (
        HydroRasterSummary(
            **summary.model_dump(),
            product=f"flow accumulation ({units}, the cell itself included)",
            max_accumulation=float(np.nanmax(acc)),
            **routing.fields(),
        ),
        routing.warnings,
    )
