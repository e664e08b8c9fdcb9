"""cube_series: a variable's time series at points (the pixel under each) or over zones (area-weighted means).

Zones are the polygons of a vector layer, reprojected to the cube's CRS; a pixel belongs to a zone when its centre
lies inside (GDAL's rasterize rule), and each pixel weighs its ground area (on lon/lat grids the geodesic area of its
row: pixels shrink towards the poles), so a zone's value is sum(area * value) / sum(area) over its valid pixels.
Steps are read in batches of bands over the smallest window holding all points and zones.
"""

from __future__ import annotations

import csv
import math
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.cube.source import Grid, open_cube, read_steps
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.pixel_areas import pixel_areas
from gdal_mcp.engine.raster.region import points_in_raster_crs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import CubeSeriesResult, CubeSeriesRow, CubeSeriesTarget

BATCH = 64
MAX_ZONE_PIXELS = 50_000_000


def _zones(
    path: str, layer: str | None, name_field: str | None, grid: Grid, touched: list[str]
) -> list[tuple[str, np.ndarray, Window]]:
    """(name, boolean mask, window) of each zone polygon on the cube's grid: the pixels whose centre it holds, or for a
    zone holding no pixel centre the pixels it touches (its name then goes into `touched`)."""
    import pyogrio.raw
    import shapely
    from rasterio.features import geometry_mask
    from rasterio.windows import from_bounds

    from gdal_mcp.engine.crs import parse_crs
    from gdal_mcp.engine.geometry_transform import reproject_densified
    from gdal_mcp.engine.vector.opening import choose_layer

    name = choose_layer(path, layer)
    meta, _, wkb, fields = pyogrio.raw.read(path, layer=name, columns=[name_field] if name_field else [])
    if name_field and name_field not in list(meta["fields"]):
        raise GdalMcpError(
            "invalid-argument", f"zones layer has no field {name_field!r}; its fields: {', '.join(meta['fields'])}"
        )
    geoms = shapely.from_wkb(wkb) if wkb is not None else []
    src_crs = parse_crs(meta["crs"], "zones CRS") if meta.get("crs") else None
    out = []
    for i, g in enumerate(geoms):
        if g is None or g.is_empty or g.geom_type not in ("Polygon", "MultiPolygon"):
            continue
        if src_crs is not None and grid.crs is not None:
            g = reproject_densified([g], src_crs, grid.crs)[0]
        if grid.crs is not None and grid.crs.is_geographic and grid.bounds.right > 180:
            g = _east_of_zero(g)  # a grid left in 0..360 (regional, across 180): western longitudes + 360
        label = str(fields[0][i]) if name_field else f"zone_{i + 1}"
        win = from_bounds(*g.bounds, transform=grid.transform).round_offsets().round_lengths()
        col0, row0 = max(0, int(win.col_off)), max(0, int(win.row_off))
        col1 = min(grid.width, int(win.col_off + win.width) + 1)
        row1 = min(grid.height, int(win.row_off + win.height) + 1)
        if col1 <= col0 or row1 <= row0:
            out.append((label, np.zeros((0, 0), bool), Window(0, 0, 0, 0)))
            continue
        w = Window(col0, row0, col1 - col0, row1 - row0)
        if w.width * w.height > MAX_ZONE_PIXELS:
            raise GdalMcpError(
                "resource-limit", f"zone {label} covers {w.width * w.height} pixels; use smaller zones or cube_subset first"
            )
        shape, transform = (int(w.height), int(w.width)), grid.window_transform(w)
        mask = ~geometry_mask([g], out_shape=shape, transform=transform)
        if not mask.any():  # smaller than a pixel (an island): the pixels it touches, rather than nothing
            mask = ~geometry_mask([g], out_shape=shape, transform=transform, all_touched=True)
            touched.append(label)
        out.append((label, mask, w))
    if not out:
        raise GdalMcpError("invalid-argument", "the zones layer has no polygons")
    return out


def _cell(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula (a zone named '=HYPERLINK(…)'): prefixed with an apostrophe
    when it starts with = + - @ or a tab/carriage return (OWASP's CSV injection rule); numbers are written as numbers."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _east_of_zero(g: Any) -> Any:
    """A lon/lat geometry with its parts west of 0 moved by +360 (for a grid whose longitudes run 0..360)."""
    import shapely
    from shapely.affinity import translate

    west = shapely.intersection(g, shapely.box(-540.0, -90.0, 0.0, 90.0))
    east = shapely.intersection(g, shapely.box(0.0, -90.0, 540.0, 90.0))
    return shapely.union(east, translate(west, xoff=360.0)) if not west.is_empty else g


def series(
    src: str,
    variable: str | None = None,
    points: list[tuple[float, float]] | None = None,
    points_crs: str | None = None,
    zones: str | None = None,
    zones_layer: str | None = None,
    zone_field: str | None = None,
    start: str | None = None,
    end: str | None = None,
    level: float | str | None = None,
    max_rows: int = 1000,
    dst: str | None = None,
    plot: bool = False,
    progress: Progress = no_progress,
) -> CubeSeriesResult:
    """The time series of `variable` at `points` or averaged over `zones`; every row to `dst` (CSV) when given."""
    if (points is None) == (zones is None):
        raise GdalMcpError("invalid-argument", "give points ([[x, y], …]) or zones (a polygon layer), one of them")
    with open_cube(src, variable) as (ds, cube):
        warnings = list(cube.warnings)
        steps = cube.select(start, end, level)
        grid = cube.grid
        crs = grid.crs
        targets: list[CubeSeriesTarget] = []
        cells: list[tuple[int, int] | None] = []
        zone_masks: list[tuple[str, np.ndarray, Window]] = []
        if points is not None:
            xs, ys, _ = points_in_raster_crs(
                grid,
                [p[0] for p in points],
                [p[1] for p in points],
                points_crs,
                argument="points_crs",
                points="points",
                raster="cube",
            )
            inverse = ~grid.transform
            geographic = crs is not None and crs.is_geographic
            for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
                c, r = inverse * (x, y) if math.isfinite(x) and math.isfinite(y) else (-1, -1)
                col, row = math.floor(c), math.floor(r)
                inside = 0 <= col < ds.width and 0 <= row < ds.height
                for shift in (360.0, -360.0) if geographic and not inside and math.isfinite(x) else ():
                    c, r = inverse * (x + shift, y)  # longitudes 0..360 in the file, -180..180 given (or the reverse)
                    col, row = math.floor(c), math.floor(r)
                    inside = 0 <= col < ds.width and 0 <= row < ds.height
                    if inside:
                        break
                cells.append((row, col) if inside else None)
                targets.append(
                    CubeSeriesTarget(
                        name=f"point_{i + 1}",
                        x=points[i][0],
                        y=points[i][1],
                        row=row if inside else None,
                        col=col if inside else None,
                        inside=inside,
                    )
                )
            outside = sum(1 for c in cells if c is None)
            if outside:
                warnings.append(f"{outside} point(s) lie outside the cube: their values are null")
            statistic = "value"
        else:
            touched: list[str] = []
            zone_masks = _zones(zones, zones_layer, zone_field, grid, touched)  # type: ignore[arg-type]
            areas = pixel_areas(grid)
            warnings += areas.warnings
            weights = []
            for label, mask, win in zone_masks:
                a = areas.for_window(win) if mask.size else None
                w = np.broadcast_to(a, mask.shape) * mask if a is not None else mask.astype(float)
                weights.append(w)
                targets.append(
                    CubeSeriesTarget(name=label, pixels=int(mask.sum()), area_m2=float(w.sum()) if a is not None else None)
                )
            if touched:
                warnings.append(
                    f"{len(touched)} zone(s) hold no pixel centre (smaller than a pixel): their values are of the pixels "
                    f"they touch, area-weighted ({', '.join(touched[:10])}{' …' if len(touched) > 10 else ''})"
                )
            empty = [t.name for t in targets if not t.pixels]
            if empty:
                warnings.append(f"zone(s) {', '.join(empty[:10])} lie outside the cube: their values are null")
            statistic = "area-weighted mean" if areas.method != "none" else "mean (no CRS: pixels weigh alike)"
        # one window holding every point / zone, read a batch of steps at a time
        spans = [(r, c, r + 1, c + 1) for cell in cells if cell for r, c in [cell]]
        spans += [
            (int(w.row_off), int(w.col_off), int(w.row_off + w.height), int(w.col_off + w.width))
            for _, m, w in zone_masks
            if m.size
        ]
        values = np.full((len(steps), len(targets)), np.nan)
        if spans:
            r0, c0 = min(s[0] for s in spans), min(s[1] for s in spans)
            r1, c1 = max(s[2] for s in spans), max(s[3] for s in spans)
            big = (r1 - r0) * (c1 - c0) > 4_000_000
            for i in range(0, len(steps), BATCH):
                bands = [s.band for s in steps[i : i + BATCH]]
                if big:
                    block = None
                else:
                    block = read_steps(ds, cube, bands, Window(c0, r0, c1 - c0, r1 - r0))
                for j, cell in enumerate(cells):
                    if cell is None:
                        continue
                    if block is None:
                        px = read_steps(ds, cube, bands, Window(cell[1], cell[0], 1, 1))[:, 0, 0]
                    else:
                        px = block[:, cell[0] - r0, cell[1] - c0]
                    values[i : i + len(bands), j] = px
                for j, (_, mask, win) in enumerate(zone_masks):
                    if not mask.size or not mask.any():
                        continue
                    if block is None:
                        data = read_steps(ds, cube, bands, win)
                    else:
                        ro, co = int(win.row_off) - r0, int(win.col_off) - c0
                        data = block[:, ro : ro + int(win.height), co : co + int(win.width)]
                    w = weights[j]
                    valid = ~np.isnan(data) & (w > 0)
                    total = np.where(valid, w, 0).sum(axis=(1, 2))
                    with np.errstate(invalid="ignore", divide="ignore"):
                        values[i : i + len(bands), j] = np.where(valid, data * w, 0).sum(axis=(1, 2)) / total
                progress(min(1.0, (i + len(bands)) / len(steps)), "cube_series: reading time steps")
        times = [s.time or f"band {s.band}" for s in steps]
        rows = [
            CubeSeriesRow(time=t, values=[None if math.isnan(v) else float(v) for v in row])
            for t, row in zip(times, values.tolist(), strict=True)
        ]
        if dst:
            with open(dst, "w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(["time", *[_cell(t.name) for t in targets]])
                for row in rows:
                    writer.writerow([_cell(row.time), *["" if v is None else repr(v) for v in row.values]])
        png = b""
        if plot:
            from gdal_mcp.engine.cube.plot import line_chart

            png = line_chart(
                times, values, [t.name for t in targets], title=f"{cube.variable or 'value'} ({ds.units[0] or 'no unit'})"
            )
        return CubeSeriesResult(
            path=src,
            variable=cube.variable,
            level=steps[0].level if cube.level_dim else None,
            units=ds.units[0] or None,
            statistic=statistic,
            targets=targets,
            rows=rows[:max_rows],
            total_rows=len(rows),
            truncated=len(rows) > max_rows,
            output=dst or None,
            plot_png=png,
            warnings=warnings,
        )
