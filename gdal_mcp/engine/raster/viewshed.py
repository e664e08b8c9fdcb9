"""Viewshed: which DEM pixels an observer sees, with GDAL 3.12's `gdal raster viewshed` (one run per observer).

Each observer's viewshed is GDAL's own (the algorithm of Wang et al. 2000 as GDAL implements it), written to a
scratch GTiff beside the output with the values 2 (visible), 1 (invisible) and 0 (out of range); the output is then
written window by window from it: the caller's visible / invisible / out-of-range values for one observer, or, for
several, the number of observers seeing each pixel (cumulative visibility), summed observer by observer into an
uncompressed scratch accumulator, so memory stays a few windows wide whatever the DEM or the number of observers.

What GDAL does, and what is checked here first:
- Distances are measured in the DEM's georeferenced units and heights in its pixel values, so the DEM must be in a
  projected CRS whose units match its heights (metres and metres). On a lon/lat DEM GDAL computes in degrees: the
  earth curvature correction vanishes, east-west distances are stretched by 1/cos(latitude) relative to north-south
  and max_distance is in degrees. Measured on jacksboro_dem.tif (36.6 N, observer 25 m): 6.5 % of the pixels visible
  against 8.3 % on the same DEM in UTM over the whole DEM, 15.0 % against 17.6 % within 8 km: 15-20 % of the visible
  area missing. Refused here (unsupported), with what to do instead; nothing is reprojected behind the caller's back.
- An observer outside the DEM is only a warning in GDAL (its result is then meaningless): refused here, naming
  the DEM's bounds.
- Nodata cells are used as elevations by GDAL (it warns from a worker thread, which the caller cannot see): counted
  here over the area computed and reported as a warning.
- A rotated geotransform is not supported by GDAL's extent computation: refused.
- max_distance clamps the output to the DEM pixels within max_distance of the observer along x and y (GDAL's
  output extent); beyond it, within that box, pixels are out of range. With several observers the output is the
  union of their boxes.
- The curvature coefficient defaults to GDAL's: 0.85714 (visible light, refraction 1/7) on Earth CRSs, 1.0 on
  other bodies; 0 turns the correction off.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.windows import Window

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import _delete, pixel_driver, summarize, write_windows
from gdal_mcp.engine.raster.region import crs_text, points_in_raster_crs, select_bands
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import PixelWindow, ViewshedObserver, ViewshedResult

#: the most observers one call takes (each is one GDAL viewshed run)
MAX_OBSERVERS = 1000
#: the values of the scratch viewsheds
VISIBLE, INVISIBLE, OUT_OF_RANGE = 2, 1, 0
SCRATCH_OPTIONS = ["TILED=YES", "COMPRESS=ZSTD", "ZSTD_LEVEL=1", "BIGTIFF=IF_SAFER"]
WINDOW_PIXELS = 1024 * 1024


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GdalMcpError("invalid-argument", f"{what} must be a finite number (got {value!r})")
    return float(value)


def _check_observers(observers: Any, observer_height: float) -> list[tuple[float, float, float]]:
    if not isinstance(observers, list | tuple) or not observers:
        raise GdalMcpError("invalid-argument", "observers must be a non-empty list of [x, y] or [x, y, height]")
    if len(observers) > MAX_OBSERVERS:
        raise GdalMcpError(
            "invalid-argument", f"at most {MAX_OBSERVERS} observers per call; got {len(observers)} (split them into calls)"
        )
    out: list[tuple[float, float, float]] = []
    for i, p in enumerate(observers, start=1):
        if not isinstance(p, list | tuple) or len(p) not in (2, 3):
            raise GdalMcpError("invalid-argument", f"observer {i} is {p!r}; each observer is [x, y] or [x, y, height]")
        x, y = _finite(p[0], f"observer {i} x"), _finite(p[1], f"observer {i} y")
        h = _finite(p[2], f"observer {i} height") if len(p) == 3 else observer_height
        out.append((x, y, h))
    return out


def _check_value(value: int | None, default: int, what: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
        raise GdalMcpError("invalid-argument", f"{what} must be an integer 0..255 (got {value!r})")
    return value


def _place(ds: Any, points: list[tuple[float, float, float]], observer_crs: str | None) -> list[tuple[float, float, float]]:
    """The observers in the DEM's CRS; invalid-argument naming the DEM's bounds for one outside it."""
    xs, ys, crs = points_in_raster_crs(
        ds,
        [p[0] for p in points],
        [p[1] for p in points],
        observer_crs,
        argument="observer_crs",
        points="observers",
        raster="DEM",
    )
    inverse = ~ds.transform
    for i, (x, y) in enumerate(zip(xs, ys, strict=True), start=1):
        col, row = inverse @ (x, y) if math.isfinite(x) and math.isfinite(y) else (math.nan, math.nan)
        if not (0 <= col < ds.width and 0 <= row < ds.height):
            b = ds.bounds
            given = f"({points[i - 1][0]}, {points[i - 1][1]}" + (f" in {observer_crs})" if observer_crs else ")")
            where = f"[{b.left}, {b.bottom}, {b.right}, {b.top}] in {crs_text(ds.crs)}"
            if crs is not None and crs != ds.crs:
                from rasterio.warp import transform_bounds

                try:
                    o = transform_bounds(ds.crs, crs, *ds.bounds, densify_pts=21)
                    where += f" ([{o[0]:.6f}, {o[1]:.6f}, {o[2]:.6f}, {o[3]:.6f}] in {observer_crs})"
                except Exception:  # noqa: BLE001 - the bounds in the DEM's CRS are enough
                    pass
            raise GdalMcpError(
                "invalid-argument",
                f"observer {i} {given} lies outside the DEM, whose bounds are {where}; give observers on the DEM "
                "(x, y in observer_crs, default the DEM's CRS)",
            )
    return [(x, y, p[2]) for x, y, p in zip(xs, ys, points, strict=True)]


def _check_dem(ds: Any, warnings: list[str]) -> None:
    t = ds.transform
    if t.b != 0 or t.d != 0:
        raise GdalMcpError(
            "unsupported",
            "the DEM's geotransform is rotated, which GDAL's viewshed does not handle; warp it to a north-up grid "
            "first (raster_reproject to its own CRS)",
        )
    if ds.crs is not None and ds.crs.to_wkt():
        if ds.crs.is_geographic:
            raise GdalMcpError(
                "unsupported",
                f"the DEM is in a geographic CRS ({crs_text(ds.crs)}): GDAL's viewshed measures distances in the "
                "DEM's units, here degrees against heights in metres, which drops the earth curvature correction, "
                "stretches east-west distances and makes max_distance degrees (15-20 % of the visible area went "
                "missing in tests at 36 N). Reproject the DEM to a projected CRS in metres first (raster_reproject "
                "with dst_crs its UTM zone, e.g. EPSG:326zz north / EPSG:327zz south) and run raster_viewshed on "
                "that; observers can stay in lon/lat with observer_crs='EPSG:4326'",
            )
    else:
        warnings.append("the DEM has no CRS: distances are in its geotransform's units, which must be those of its heights")


def _scratch(dst: str, name: str) -> str:
    return str(Path(dst).with_name(f"{Path(dst).name}.{name}.tif"))


def _box(ds: Any, col: int, row: int, max_distance: float | None) -> Window:
    """About the box GDAL clamps one observer's output to (for the nodata count only; the output uses GDAL's own)."""
    if max_distance is None:
        return Window(0, 0, ds.width, ds.height)
    dx = math.ceil(max_distance / abs(ds.transform.a)) + 1
    dy = math.ceil(max_distance / abs(ds.transform.e)) + 1
    c0, r0 = max(0, col - dx), max(0, row - dy)
    c1, r1 = min(ds.width, col + dx + 1), min(ds.height, row + dy + 1)
    return Window(c0, r0, c1 - c0, r1 - r0)


def _nodata_cells(ds: Any, band: int, boxes: list[Window]) -> int:
    """DEM cells that are nodata (or NaN) within the union box of `boxes`, read window by window."""
    nodata = ds.nodatavals[band - 1]
    floating = np.issubdtype(np.dtype(ds.dtypes[band - 1]), np.floating)
    if nodata is None and not floating:
        return 0
    c0, r0 = min(int(b.col_off) for b in boxes), min(int(b.row_off) for b in boxes)
    c1 = max(int(b.col_off + b.width) for b in boxes)
    r1 = max(int(b.row_off + b.height) for b in boxes)
    count = 0
    for w in iter_windows(c1 - c0, r1 - r0, ds.block_shapes[band - 1], WINDOW_PIXELS):
        data = ds.read(band, window=Window(c0 + w.col_off, r0 + w.row_off, w.width, w.height))
        bad = np.isnan(data) if floating else np.zeros(data.shape, bool)
        if nodata is not None and not (isinstance(nodata, float) and math.isnan(nodata)):
            bad |= data == nodata
        count += int(bad.sum())
    return count


def _run_one(
    src: str,
    out: str,
    observer: tuple[float, float, float],
    *,
    band: int,
    target_height: float,
    max_distance: float | None,
    curvature_coefficient: float | None,
    progress: Progress,
    start: float,
    scale: float,
    message: str,
) -> None:
    num = algorithms.number
    argv = ["--pos", f"{num(observer[0])},{num(observer[1])},{num(observer[2])}", "--band", str(band)]
    argv += ["--target-height", num(target_height)]
    if max_distance is not None:
        argv += ["--max-distance", num(max_distance)]
    if curvature_coefficient is not None:
        argv += ["--curvature-coefficient", num(curvature_coefficient)]
    argv += ["--visible-value", str(VISIBLE), "--invisible-value", str(INVISIBLE), "--out-of-range-value", str(OUT_OF_RANGE)]
    argv += ["--output-format", "GTiff"]
    for option in SCRATCH_OPTIONS:
        argv += ["--creation-option", option]
    argv += ["--input", src, "--output", out]
    with algorithms.algorithm(["raster", "viewshed"], argv) as alg:
        alg.run(progress, message=message, start=start, scale=scale)


def _offset(ds: Any, grid: Any) -> tuple[int, int]:
    """Column and row of `ds`'s first pixel in the pixel grid of the affine `grid` (same pixel size)."""
    col, row = ~grid @ (ds.transform.c, ds.transform.f)
    return round(col), round(row)


@wrap_gdal_errors
def viewshed(
    src: str,
    dst: str,
    *,
    observers: list[list[float]],
    observer_crs: str | None = None,
    observer_height: float = 2.0,
    target_height: float = 0.0,
    max_distance: float | None = None,
    curvature_coefficient: float | None = None,
    visible_value: int | None = None,
    invisible_value: int | None = None,
    out_of_range_value: int | None = None,
    band: int = 1,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[ViewshedResult, list[str]]:
    """The viewshed of one observer, or the cumulative visibility of several, from band `band` of the DEM `src`."""
    warnings: list[str] = []
    height = _finite(observer_height, "observer_height")
    points = _check_observers(observers, height)
    target = _finite(target_height, "target_height")
    if max_distance is not None and _finite(max_distance, "max_distance") <= 0:
        raise GdalMcpError("invalid-argument", f"max_distance must be a positive distance (got {max_distance!r})")
    if curvature_coefficient is not None and _finite(curvature_coefficient, "curvature_coefficient") < 0:
        raise GdalMcpError("invalid-argument", "curvature_coefficient must be >= 0 (0: no curvature correction)")
    cumulative = len(points) > 1
    if cumulative and any(v is not None for v in (visible_value, invisible_value, out_of_range_value)):
        raise GdalMcpError(
            "invalid-argument",
            "visible_value, invisible_value and out_of_range_value go with a single observer; with several, each "
            "pixel holds the number of observers seeing it",
        )
    values = (
        _check_value(out_of_range_value, 0, "out_of_range_value"),
        _check_value(invisible_value, 0, "invisible_value"),
        _check_value(visible_value, 255, "visible_value"),
    )  # indexed by the scratch values OUT_OF_RANGE, INVISIBLE, VISIBLE
    driver = pixel_driver(dst, format, "raster_viewshed")
    options = normalize_options(creation_options)

    with open_raster(src) as ds:
        select_bands(ds, [band])
        if ds.dtypes[band - 1].startswith("complex"):
            raise GdalMcpError("unsupported", "a complex band is not a DEM; give an elevation band")
        _check_dem(ds, warnings)
        placed = _place(ds, points, observer_crs)
        inverse = ~ds.transform
        cells = [tuple(math.floor(v) for v in inverse @ (x, y)) for x, y, _ in placed]
        elevations: list[float | None] = []
        nodata = ds.nodatavals[band - 1]
        for col, row in cells:
            v = float(ds.read(band, window=Window(col, row, 1, 1))[0, 0])
            elevations.append(None if math.isnan(v) or (nodata is not None and v == nodata) else v)
        lost = [i for i, e in enumerate(elevations, start=1) if e is None]
        if lost:
            warnings.append(
                f"observer(s) {lost[:10]} stand on nodata DEM pixels: their viewsheds are likely wrong; fill the gaps "
                "first (raster_fill_nodata)"
            )
        holes = _nodata_cells(ds, band, [_box(ds, c, r, max_distance) for c, r in cells])
        if holes:
            warnings.append(
                f"{holes} DEM pixel(s) in the area computed are nodata: GDAL's viewshed takes them as elevations, so "
                "visibility across them is likely wrong; fill the gaps first (raster_fill_nodata)"
            )
        crs, dem_transform = ds.crs, ds.transform
        try:
            unit = ds.crs.linear_units_factor[1] if ds.crs is not None and ds.crs.to_wkt() else None
        except Exception:  # noqa: BLE001 - no linear unit
            unit = None
        pixel_area = abs(dem_transform.a * dem_transform.e) * unit * unit if unit else None

    existed = os.path.exists(dst)
    scratches: list[str] = []
    share = 0.8
    try:
        for i, p in enumerate(placed):
            scratches.append(_scratch(dst, f"viewshed{i}"))
            _run_one(
                src,
                scratches[-1],
                p,
                band=band,
                target_height=target,
                max_distance=max_distance,
                curvature_coefficient=curvature_coefficient,
                progress=progress,
                start=share * i / len(placed),
                scale=share / len(placed),
                message=f"viewshed of observer {i + 1}/{len(placed)}",
            )
        result = (_cumulative if cumulative else _single)(
            scratches, dst, driver, options, values, src, dem_transform, crs, progress, share
        )
    except BaseException:
        if not existed:
            _delete(dst)
        raise
    finally:
        for path in scratches:
            _delete(path)
    visible_each, visible, window, in_range = result
    observers_out = [
        ViewshedObserver(x=x, y=y, col=c, row=r, ground_elevation=e, height=h, visible_pixels=n)
        for (x, y, h), (c, r), e, n in zip(placed, cells, elevations, visible_each, strict=True)
    ]
    progress(1.0, "wrote viewshed")
    return (
        ViewshedResult(
            summary=summarize(dst),
            mode="cumulative" if cumulative else "single",
            observers=observers_out,
            visible_pixels=visible,
            visible_area_m2=visible * pixel_area if pixel_area is not None else None,
            in_range_pixels=in_range,
            visible_share=visible / in_range if in_range else None,
            window=window,
            warnings=warnings,
        ),
        warnings,
    )


def _window_of(ds: Any, grid: Any) -> PixelWindow:
    col, row = _offset(ds, grid)
    return PixelWindow(col_off=col, row_off=row, width=ds.width, height=ds.height)


def _single(
    scratches: list[str],
    dst: str,
    driver: str,
    options: dict[str, str],
    values: tuple[int, int, int],
    src: str,
    grid: Any,
    crs: Any,
    progress: Progress,
    share: float,
) -> tuple[list[int], int, PixelWindow, int | None]:
    """One observer: its scratch viewshed with the caller's values, window by window."""
    lookup = np.array(values, dtype=np.uint8)
    seen, in_range = [0], [0]
    with rasterio.open(scratches[0]) as vs:

        def compute(w: Window) -> Any:
            data = vs.read(1, window=w)
            seen[0] += int((data == VISIBLE).sum())
            in_range[0] += int((data != OUT_OF_RANGE).sum())
            return lookup[np.clip(data, 0, 2)]

        write_windows(
            dst,
            driver,
            options,
            width=vs.width,
            height=vs.height,
            count=1,
            dtype="uint8",
            crs=crs,
            transform=vs.transform,
            nodata=None,
            compute=compute,
            progress=lambda f, m="": progress(share + (1 - share) * f, m),
            what="viewshed",
            window_pixels=WINDOW_PIXELS,
            block=vs.block_shapes[0],
            source=src,
        )
        return [seen[0]], seen[0], _window_of(vs, grid), in_range[0]


def _cumulative(
    scratches: list[str],
    dst: str,
    driver: str,
    options: dict[str, str],
    values: tuple[int, int, int],
    src: str,
    grid: Any,
    crs: Any,
    progress: Progress,
    share: float,
) -> tuple[list[int], int, PixelWindow, int | None]:
    """Several observers: their scratch viewsheds summed into an accumulator over the union of their extents, then
    written as the number of observers seeing each pixel."""
    boxes = []
    for path in scratches:
        with rasterio.open(path) as vs:
            col, row = _offset(vs, grid)
            boxes.append((col, row, col + vs.width, row + vs.height))
    c0, r0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    width, height = max(b[2] for b in boxes) - c0, max(b[3] for b in boxes) - r0
    transform = grid @ rasterio.Affine.translation(c0, r0)
    dtype = "uint8" if len(scratches) <= 255 else "uint16"
    acc_path = _scratch(dst, "count")
    scratches.append(acc_path)  # removed with the others
    seen_each: list[int] = []
    acc_profile = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "count": 1,
        "dtype": "uint16",
        "crs": crs,
        "transform": transform,
        "TILED": "YES",
        "BIGTIFF": "IF_SAFER",
    }
    with rasterio.open(acc_path, "w+", **acc_profile) as acc:
        for i, path in enumerate(scratches[:-1]):
            seen = 0
            with rasterio.open(path) as vs:
                col, row = _offset(vs, transform)
                for w in iter_windows(vs.width, vs.height, vs.block_shapes[0], WINDOW_PIXELS):
                    visible = vs.read(1, window=w) == VISIBLE
                    seen += int(visible.sum())
                    target = Window(col + w.col_off, row + w.row_off, w.width, w.height)
                    acc.write(acc.read(1, window=target) + visible.astype("uint16"), 1, window=target)
            seen_each.append(seen)
            progress(share + 0.1 * (i + 1) / len(scratches[:-1]), f"summing viewshed {i + 1}/{len(scratches) - 1}")
        total = [0]

        def compute(w: Window) -> Any:
            data = acc.read(1, window=w)
            total[0] += int((data > 0).sum())
            return data.astype(dtype)

        write_windows(
            dst,
            driver,
            options,
            width=width,
            height=height,
            count=1,
            dtype=dtype,
            crs=crs,
            transform=transform,
            nodata=None,
            compute=compute,
            progress=lambda f, m="": progress(share + 0.1 + (1 - share - 0.1) * f, m),
            what="cumulative viewshed",
            window_pixels=WINDOW_PIXELS,
            block=acc.block_shapes[0],
            source=src,
        )
    return seen_each, total[0], PixelWindow(col_off=c0, row_off=r0, width=width, height=height), None
