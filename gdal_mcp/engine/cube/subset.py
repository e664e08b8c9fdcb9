"""cube_subset: a smaller cube (a time range, one level, a bbox) as netCDF, a GeoTIFF stack, or a GeoTIFF per step.

Pixels are copied unchanged (in the source's data type, with its nodata, scale and offset), window by window and
step by step, so memory does not grow with the number of steps. A netCDF output keeps the time axis (the steps'
own times, in the source's units and calendar); a GeoTIFF stack names each band by its step's time.
"""

from __future__ import annotations

import os
import re

import rasterio
from rasterio.windows import Window, from_bounds

from gdal_mcp.engine.cube.aggregate import write_netcdf
from gdal_mcp.engine.cube.source import Cube, Grid, Step, encode_time, open_cube, read_raw, windows
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.output import record_options, summarize
from gdal_mcp.engine.raster.region import bbox_in_crs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import CubeSubsetSummary

BUDGET = 128 * 2**20
MAX_FILES = 5000


def _window(grid: Grid, bbox: tuple[float, float, float, float] | None, bbox_crs: str | None) -> Window:
    full = Window(0, 0, grid.width, grid.height)
    if bbox is None:
        return full
    box = bbox_in_crs(grid, bbox, bbox_crs)
    w = from_bounds(*box, transform=grid.transform)
    col0, row0 = max(0, int(w.col_off)), max(0, int(w.row_off))
    col1 = min(grid.width, int(-(-(w.col_off + w.width) // 1)))
    row1 = min(grid.height, int(-(-(w.row_off + w.height) // 1)))
    if col1 <= col0 or row1 <= row0:
        b = grid.bounds
        raise GdalMcpError(
            "invalid-argument", f"bbox does not overlap the cube, whose bounds are [{b.left}, {b.bottom}, {b.right}, {b.top}]"
        )
    return Window(col0, row0, col1 - col0, row1 - row0)


def _file_name(variable: str | None, step: Step, taken: set[str]) -> str:
    """<variable>_<time>.tif, from the variable's last name component and the step's time reduced to letters, digits
    and '-' for a year before 0 (never a path: a variable's name comes from the file or the caller); a name already
    taken gets the step's band number."""
    base = re.sub(r"[^0-9A-Za-z_.-]+", "_", (variable or "step").replace("\\", "/").rsplit("/", 1)[-1]).strip("._-") or "step"
    time = step.time or f"band{step.band}"
    sign = "m" if time.startswith("-") else ""
    stamp = sign + re.sub(r"[^0-9A-Za-z]+", "", time.lstrip("-").replace("T00:00:00", ""))
    name = f"{base}_{stamp}.tif"
    if name.lower() in taken:
        name = f"{base}_{stamp}_band{step.band}.tif"
    taken.add(name.lower())
    return name


def subset(
    src: str,
    dst: str = "",
    variable: str | None = None,
    start: str | None = None,
    end: str | None = None,
    level: float | str | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    per_step: bool = False,
    progress: Progress = no_progress,
) -> tuple[CubeSubsetSummary, list[str]]:
    """Copy the steps of `variable` within [start, end] at `level` inside `bbox` to `dst`."""
    netcdf = dst.lower().endswith((".nc", ".nc4"))
    with open_cube(src, variable) as (ds, cube):
        warnings = list(cube.warnings)
        steps = cube.select(start, end, level)
        grid = cube.grid
        win = _window(grid, bbox, bbox_crs)
        if grid.crs_source == "lon/lat axes":
            warnings.append("the file has no grid_mapping; its longitude/latitude axes are written as EPSG:4326")
        first = steps[0].band
        nodata = ds.nodatavals[first - 1]
        profile = {
            "driver": "GTiff",
            "width": int(win.width),
            "height": int(win.height),
            "dtype": ds.dtypes[first - 1],
            "crs": grid.crs,
            "transform": grid.window_transform(win),
            "nodata": nodata,
            "compress": "deflate",
            "bigtiff": "if_safer",
        }
        if win.width >= 256 and win.height >= 256:
            profile.update(tiled=True, blockxsize=256, blockysize=256)
        pieces = windows(int(win.height), int(win.width), 8, BUDGET)
        files: list[str] = []
        if per_step:
            if len(steps) > MAX_FILES:
                raise GdalMcpError(
                    "resource-limit", f"{len(steps)} steps would be {len(steps)} files (at most {MAX_FILES}); narrow start/end"
                )
            os.makedirs(dst, exist_ok=True)
            taken: set[str] = set()
            for i, step in enumerate(steps):
                name = _file_name(cube.variable, step, taken)
                target = os.path.join(dst, name)
                if os.path.dirname(target) != dst.rstrip("/") or os.path.lexists(target):
                    raise GdalMcpError("internal-error", f"cube_subset: step file {name!r} is not a new file of the output")
                with rasterio.open(target, "w", count=1, **profile) as out:
                    _copy(ds, cube, out, [step], win, pieces)
                    out.set_band_description(1, step.time or f"band {step.band}")
                    out.update_tags(1, TIME=step.time or "", LEVEL="" if step.level is None else str(step.level))
                    _scale(ds, out, [step])
                files.append(name)
                progress((i + 1) / len(steps), f"cube_subset: {name}")
            return _summary(cube, steps, files=files), warnings
        tif = f"{dst}.stack.tif" if netcdf else dst
        if netcdf and cube.time_units is None:
            raise GdalMcpError("unsupported", "the variable has no time axis to write to netCDF; write a GeoTIFF (.tif)")
        try:
            with rasterio.open(tif, "w", count=len(steps), interleave="band", **profile) as out:
                for i in range(0, len(steps), 16):
                    batch = steps[i : i + 16]
                    _copy(ds, cube, out, batch, win, pieces, first_index=i + 1)
                    progress(min(1.0, (i + len(batch)) / len(steps)), "cube_subset: copying steps")
                for i, step in enumerate(steps):
                    out.set_band_description(i + 1, step.time or f"band {step.band}")
                    out.update_tags(i + 1, TIME=step.time or "", LEVEL="" if step.level is None else str(step.level))
                _scale(ds, out, steps)
            if netcdf:
                values = [encode_time(cube.time_units, cube.calendar, s.key) for s in steps]  # type: ignore[arg-type]
                write_netcdf(tif, dst, cube, values)
            else:
                record_options(dst, {"COMPRESS": "DEFLATE"})
        finally:
            if netcdf and os.path.exists(tif):
                os.remove(tif)
        summary = _summary(cube, steps, raster=summarize(dst))
        return summary, warnings


def _summary(cube: Cube, steps: list[Step], **written: object) -> CubeSubsetSummary:
    """What was written: the steps' span and level, and the files (per_step) or the raster's summary."""
    return CubeSubsetSummary(
        variable=cube.variable,
        steps=len(steps),
        first_step=steps[0].time,
        last_step=steps[-1].time,
        level=steps[0].level if cube.level_dim else None,
        **written,  # type: ignore[arg-type]
    )


def _copy(
    ds: object, cube: Cube, out: object, steps: list[Step], win: Window, pieces: list[Window], first_index: int = 1
) -> None:
    bands = [s.band for s in steps]
    for piece in pieces:
        src_win = Window(win.col_off + piece.col_off, win.row_off + piece.row_off, piece.width, piece.height)
        data = read_raw(ds, cube, bands, src_win)
        out.write(data, list(range(first_index, first_index + len(bands))), window=piece)  # type: ignore[attr-defined]


def _scale(ds: object, out: object, steps: list[Step]) -> None:
    scales = [ds.scales[s.band - 1] for s in steps]  # type: ignore[attr-defined]
    offsets = [ds.offsets[s.band - 1] for s in steps]  # type: ignore[attr-defined]
    if any(v != 1.0 for v in scales) or any(v != 0.0 for v in offsets):
        out.scales = scales  # type: ignore[attr-defined]
        out.offsets = offsets  # type: ignore[attr-defined]
    units = [ds.units[s.band - 1] or "" for s in steps]  # type: ignore[attr-defined]
    if any(units):
        out.units = units  # type: ignore[attr-defined]
