"""cube_aggregate: a statistic of a variable over time, per period (month, season, year …) or climatological slot,
optionally as anomalies against a reference period; written as a GeoTIFF stack (a band per period) or netCDF.

Streamed: the grid is cut into windows whose working set stays under a fixed budget whatever the number of time
steps. For the statistics that combine piecewise (mean, sum, min, max, std, count) a period's steps are read in
batches of at most BATCH bands and folded into running accumulators; a median or percentile needs all of a
period's values at a pixel, so its windows shrink as periods grow. Memory therefore does not grow with the number
of time steps (only the time spent does).

Values: nodata and NaN are skipped (a pixel with no valid value in a period is NaN); scale and offset are applied
first (values are physical, e.g. K not packed integers). std is the population standard deviation (ddof 0), as
numpy's default; percentiles are numpy's linear interpolation.

Anomalies: each period's statistic minus the mean of the same statistic over the reference period's periods of the
same slot (a month minus the mean of that calendar month's values over the reference years; a season the same
season; a year or custom span minus the mean over all reference spans).
"""

from __future__ import annotations

import os
import warnings as warnings_module
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.windows import Window

from gdal_mcp.engine.cube.periods import Group, group_steps, partial_periods, reference_slots
from gdal_mcp.engine.cube.source import Cube, encode_time, open_cube, read_steps, read_values, windows
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.output import record_options, summarize
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import CubeAggregateSummary, CubePeriod

Statistic = Literal["mean", "sum", "min", "max", "std", "count", "median", "percentile"]
BUDGET = 192 * 2**20  # bytes of working set per window (the server and its idle workers take ~300 MB more)
BATCH = 32  # bands read at once for the piecewise statistics


@dataclass
class _Acc:
    """Running sum, count, M2 (Chan et al.), min and max of one period at each pixel of a window."""

    n: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def empty(cls, shape: tuple[int, int]) -> _Acc:
        return cls(np.zeros(shape), np.zeros(shape), np.zeros(shape), np.full(shape, np.inf), np.full(shape, -np.inf))

    def add(self, block: np.ndarray) -> None:
        """Fold a batch (n, h, w) of float64 values (NaN = none) in; `block` is used as scratch space."""
        valid = ~np.isnan(block)
        nb = valid.sum(axis=0).astype(float)
        self.lo = np.fmin(self.lo, np.fmin.reduce(block, axis=0))  # fmin skips NaN (all NaN: lo stays)
        self.hi = np.fmax(self.hi, np.fmax.reduce(block, axis=0))
        np.copyto(block, 0.0, where=~valid)
        del valid
        with np.errstate(invalid="ignore", divide="ignore"):
            mb = np.where(nb > 0, block.sum(axis=0) / np.maximum(nb, 1), 0.0)
            block -= mb  # deviations; the slots without a value hold -mb, taken back out below
            block *= block
            m2b = block.sum(axis=0) - (block.shape[0] - nb) * mb * mb
            n = self.n + nb
            delta = mb - self.mean
            self.mean = np.where(n > 0, self.mean + delta * nb / np.maximum(n, 1), 0.0)
            self.m2 = self.m2 + m2b + delta**2 * self.n * nb / np.maximum(n, 1)
        self.n = n

    def result(self, statistic: str) -> np.ndarray:
        empty = self.n == 0
        if statistic == "count":
            return self.n.copy()
        if statistic == "mean":
            out = self.mean.copy()
        elif statistic == "sum":
            out = self.mean * self.n
        elif statistic == "std":
            out = np.sqrt(self.m2 / np.maximum(self.n, 1))
        elif statistic == "min":
            out = self.lo.copy()
        else:
            out = self.hi.copy()
        out[empty] = np.nan
        return out


def _group_value(ds: Any, cube: Cube, group: Group, window: Window, statistic: str, percentile: float | None) -> np.ndarray:
    bands = [s.band for s in group.steps]
    shape = (int(window.height), int(window.width))
    if statistic in ("median", "percentile"):
        data = read_steps(ds, cube, bands, window)
        q = 50.0 if statistic == "median" else float(percentile)  # type: ignore[arg-type]
        valid = ~np.isnan(data)
        out = np.full(shape, np.nan)
        has = valid.any(axis=0)
        if has.any():
            out[has] = np.nanpercentile(data[:, has], q, axis=0)
        return out
    if statistic != "std":
        fast = _linear(ds, cube, bands, window, statistic)
        if fast is not None:
            return fast
    acc = _Acc.empty(shape)
    for i in range(0, len(bands), BATCH):
        acc.add(read_steps(ds, cube, bands[i : i + BATCH], window))
    return acc.result(statistic)


def _linear(ds: Any, cube: Cube, bands: list[int], window: Window, statistic: str) -> np.ndarray | None:
    """sum, mean, count, min or max folded on the values as stored (one pass or two per batch, no float64 copy of
    them), the scale and offset applied once to the result (they commute with these statistics); None when the
    bands' scales differ (then the general path)."""
    shape = (int(window.height), int(window.width))
    n = np.zeros(shape)
    total = np.zeros(shape)
    extreme: np.ndarray | None = None
    scale = offset = None
    for i in range(0, len(bands), BATCH):
        read = read_values(ds, cube, bands[i : i + BATCH], window)
        if read is None or (scale is not None and (read[1], read[2]) != (scale, offset)):
            return None
        block, scale, offset = read
        if statistic in ("min", "max"):
            low = (statistic == "min") == (scale >= 0)  # a negative scale turns the stored minimum into the maximum
            reduced = np.fmin.reduce(block, axis=0) if low else np.fmax.reduce(block, axis=0)
            extreme = reduced if extreme is None else np.fmin(extreme, reduced) if low else np.fmax(extreme, reduced)
            n += block.shape[0] - np.isnan(block).sum(axis=0)
            continue
        # one pass: the sum of every pixel's steps (NaN where a step is missing), then only those pixels again
        sums = block.sum(axis=0, dtype="float64")
        gaps = np.isnan(sums)
        n += block.shape[0]
        if gaps.any():
            part = block[:, gaps]  # the pixels with a missing step (a copy of those only)
            missing = np.isnan(part)
            n[gaps] -= missing.sum(axis=0)
            sums[gaps] = np.where(missing, 0.0, part).sum(axis=0, dtype="float64")
        if statistic != "count":
            total += sums
    assert scale is not None and offset is not None
    with np.errstate(invalid="ignore", divide="ignore"):
        if statistic == "count":
            return n
        if statistic == "sum":
            out = total * scale + offset * n
        elif statistic == "mean":
            out = total / n * scale + offset
        else:
            assert extreme is not None
            out = extreme.astype("float64") * scale + offset
    out[n == 0] = np.nan
    return out


def _midpoint(cube: Cube, group: Group) -> float:
    a, b = group.steps[0].key, group.steps[-1].key
    assert a is not None and b is not None and cube.time_units is not None
    return (encode_time(cube.time_units, cube.calendar, a) + encode_time(cube.time_units, cube.calendar, b)) / 2


def aggregate(
    src: str,
    dst: str,
    variable: str | None = None,
    statistic: Statistic = "mean",
    percentile: float | None = None,
    period: str = "month",
    climatology: bool = False,
    start: str | None = None,
    end: str | None = None,
    level: float | str | None = None,
    reference: tuple[str, str] | None = None,
    progress: Progress = no_progress,
) -> tuple[CubeAggregateSummary, list[str]]:
    """Reduce `variable` over time per `period` (or per slot of the year with `climatology`) into one band per group."""
    if statistic == "percentile" and (percentile is None or not 0 <= percentile <= 100):
        raise GdalMcpError("invalid-argument", "statistic='percentile' needs percentile= a number from 0 to 100")
    if statistic != "percentile" and percentile is not None:
        raise GdalMcpError("invalid-argument", "percentile= goes with statistic='percentile'; omit it")
    netcdf = dst.lower().endswith((".nc", ".nc4"))
    if netcdf and climatology:
        raise GdalMcpError("unsupported", "a climatology has no time axis for a netCDF file; write a GeoTIFF (.tif) instead")
    with open_cube(src, variable) as (ds, cube):
        warnings = list(cube.warnings)
        steps = cube.select(start, end, level)
        if period.strip().lower() != "all" or reference is not None:
            cube.require_dates(f"period={period!r}" + (" and anomaly_reference" if reference else ""))
        groups = group_steps(steps, period, cube.calendar, climatology)
        ref_groups: list[Group] = []
        slot_kind = ""
        if reference is not None:
            if statistic == "count":
                raise GdalMcpError("invalid-argument", "an anomaly of a count means nothing; drop reference or pick a statistic")
            ref_steps = cube.select(reference[0], reference[1], level)
            ref_groups = group_steps(ref_steps, period, cube.calendar)
            slot_kind = reference_slots(period, climatology)
            have = {g.slot for g in ref_groups}
            missing = sorted({g.slot for g in groups} - have) if slot_kind else []
            if missing:
                raise GdalMcpError(
                    "invalid-argument",
                    f"the reference period {reference[0]}..{reference[1]} has no data for {', '.join(missing[:12])}; "
                    "widen it so that it covers every month/season/day the output has",
                )
        # bytes per pixel of a window's working set: a batch read (its own type, then float64, one mask byte) and the
        # accumulators; a percentile holds a whole period, which numpy copies twice while it partitions
        if statistic in ("median", "percentile"):
            longest = max(len(g.steps) for g in (*groups, *ref_groups))
            per_pixel = 8 * 3 * longest + 64
        else:
            per_pixel = BATCH * (8 + 8 + 1) + 6 * 8
        slots = sorted({g.slot for g in ref_groups})
        per_pixel += 16 * len(slots)
        dtype = "float64" if any(ds.dtypes[s.band - 1] == "float64" for s in steps) else "float32"
        tif = dst if not netcdf else f"{dst}.stack.tif"
        profile = {
            "driver": "GTiff",
            "width": ds.width,
            "height": ds.height,
            "count": len(groups),
            "dtype": dtype,
            "crs": cube.grid.crs,
            "transform": cube.grid.transform,
            "nodata": float("nan"),
            "tiled": True,
            "blockxsize": 256,
            "blockysize": 256,
            "compress": "deflate",
            "interleave": "band",
            "bigtiff": "if_safer",
        }
        if ds.width < 256 or ds.height < 256:
            profile.update(tiled=False, blockxsize=None, blockysize=None)
            profile = {k: v for k, v in profile.items() if v is not None}
        wins = windows(ds.height, ds.width, per_pixel, BUDGET)
        work = len(wins) * (len(groups) + len(ref_groups))
        done = 0
        try:
            with rasterio.open(tif, "w", **profile) as out:
                for win in wins:
                    ref: dict[str, np.ndarray] = {}
                    if ref_groups:
                        sums: dict[str, list[np.ndarray]] = {}
                        for g in ref_groups:
                            sums.setdefault(g.slot if slot_kind else "", []).append(
                                _group_value(ds, cube, g, win, statistic, percentile)
                            )
                            done += 1
                            progress(done / work, f"cube_aggregate: reference {g.label}")
                        with np.errstate(invalid="ignore"), warnings_module.catch_warnings():
                            warnings_module.simplefilter("ignore", RuntimeWarning)  # an all-NaN pixel stays NaN
                            ref = {k: np.nanmean(np.stack(v), axis=0) for k, v in sums.items()}
                    for i, g in enumerate(groups):
                        value = _group_value(ds, cube, g, win, statistic, percentile)
                        if ref:
                            value = value - ref[g.slot if slot_kind else ""]
                        out.write(value.astype(dtype), i + 1, window=win)
                        done += 1
                        progress(done / work, f"cube_aggregate: {g.label}")
                for i, g in enumerate(groups):
                    out.set_band_description(i + 1, g.label)
                    out.update_tags(
                        i + 1, PERIOD=g.label, FIRST_STEP=g.start or "", LAST_STEP=g.end or "", STEPS=str(len(g.steps))
                    )
                unit = "count" if statistic == "count" else (ds.units[steps[0].band - 1] or ds.tags(steps[0].band).get("units"))
                if unit:
                    out.units = [unit] * len(groups)
                out.update_tags(
                    STATISTIC=statistic if statistic != "percentile" else f"percentile {percentile:g}",
                    VARIABLE=cube.variable or "",
                    ANOMALY_REFERENCE=f"{reference[0]}/{reference[1]}" if reference else "",
                )
            if netcdf:
                _to_netcdf(tif, dst, cube, groups, statistic)
            else:
                record_options(dst, {"COMPRESS": "DEFLATE"})
        finally:
            if netcdf and os.path.exists(tif):
                os.remove(tif)
        summary = CubeAggregateSummary(
            raster=summarize(dst),
            variable=cube.variable,
            statistic=statistic if statistic != "percentile" else f"p{percentile:g}",
            period=period,
            climatology=climatology,
            anomaly_reference=f"{reference[0]}/{reference[1]}" if reference else None,
            level=steps[0].level if cube.level_dim else None,
            calendar=cube.calendar,
            periods=[
                CubePeriod(band=i + 1, label=g.label, first_step=g.start, last_step=g.end, steps=len(g.steps))
                for i, g in enumerate(groups)
            ],
        )
        partial = partial_periods(steps, period, cube.calendar)
        if partial and not climatology:
            warnings.append(
                f"{len(partial)} period(s) only partly covered by the data: {', '.join(partial[:8])}"
                f"{' …' if len(partial) > 8 else ''} (their statistic is of the steps there are; narrow start/end to "
                "whole periods to leave them out)"
            )
        elif partial:
            warnings.append(
                f"the climatology includes {len(partial)} partly covered period(s) ({', '.join(partial[:8])}"
                f"{' …' if len(partial) > 8 else ''}); narrow start/end to whole periods to leave them out"
            )
        return summary, warnings


def _to_netcdf(tif: str, dst: str, cube: Cube, groups: list[Group], statistic: str) -> None:
    """The stack as a CF netCDF variable with a time dimension (each period at the midpoint of its steps)."""
    if cube.time_units is None:
        raise GdalMcpError("unsupported", "the variable has no time axis to write to netCDF; write a GeoTIFF (.tif)")
    write_netcdf(tif, dst, cube, [_midpoint(cube, g) for g in groups])


def write_netcdf(tif: str, dst: str, cube: Cube, values: list[float]) -> None:
    """The GeoTIFF stack `tif` (a band per time) as a CF netCDF variable with a time dimension of `values` (in the
    cube's time units and calendar)."""
    assert cube.time_units is not None
    name = (cube.variable or "value").replace(" ", "_")
    with rasterio.open(tif, "r+") as ds:
        ds.update_tags(
            NETCDF_DIM_EXTRA="{time}",
            NETCDF_DIM_time_DEF=f"{{{len(values)},6}}",
            NETCDF_DIM_time_VALUES="{" + ",".join(repr(v) for v in values) + "}",
            **{
                "time#units": cube.time_units,
                "time#calendar": cube.calendar or "standard",
                "time#standard_name": "time",
                "time#axis": "T",
            },
        )
        for i, v in enumerate(values):
            extra = {"units": ds.units[i]} if ds.units[i] else {}  # the netCDF driver writes band items as attributes
            ds.update_tags(i + 1, NETCDF_DIM_time=repr(v), NETCDF_VARNAME=name, **extra)
    options = {"FORMAT": "NC4", "COMPRESS": "DEFLATE"}
    rasterio.shutil.copy(tif, dst, driver="netCDF", **options)
    record_options(dst, options)
