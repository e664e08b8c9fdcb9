"""Web map tiles from a raster: `gdal raster tile` (GDAL 3.12, the successor of gdal2tiles) writes an XYZ or TMS
directory of PNG/WEBP/JPEG tiles; GDAL's MBTiles driver writes one .mbtiles file (`gdal raster reproject` to the
exact resolution of the highest zoom level, on the tile grid, then `gdal raster overview add` for the lower levels).

Before any GDAL work the tiles are planned here exactly as `gdal raster tile` plans them (gdalalg_raster_tile.cpp:
the raster's extent in the tiling scheme's CRS from GDALSuggestedWarpOutput2, GDAL's EPSG:3857 clamp of geographic
rasters reaching the poles, the tile indices of every zoom level with GDAL's 1e-3 tile tolerance, the default
highest zoom rounded to the closest resolution): a job that would write more than `max_tiles` tiles is refused with
resource-limit, saying by how much and what to lower. Each zoom level holds about four times the tiles of the one
below it, so one more level is most of the work.

The tiling schemes offered are GDAL's built-in global ones (gcore/tilematrixset.cpp), whose grids are plain
arithmetic; the regional ones read from GDAL's data files (NZTM2000 …) and the raster's own grid are not offered.
"""

from __future__ import annotations

import math
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import rasterio

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import TilesSummary, TileZoom

#: the most tiles one call may write (an operator can change it: --max-tiles)
MAX_TILES = 100_000
TILE_SIZE = 256
#: GDAL's tolerance when it turns an extent into tile indices (GetTileIndices in gdalalg_raster_tile.cpp)
TILE_EPSILON = 1e-3
#: latitude of the edge of EPSG:3857's square world
MAX_LAT = 85.0511287798066
_HALF = 6378137 * math.pi
#: the pages `--webviewer` writes in the output directory
VIEWER_FILES = ("leaflet.html", "openlayers.html", "mapml.mapml", "stacta.json")
EXTENSIONS = {"PNG": "png", "WEBP": "webp", "JPEG": "jpg"}
#: our resampling names -> GDAL's
GDAL_RESAMPLING = {"cubic_spline": "cubicspline"}
RESAMPLINGS = ("nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average", "mode", "rms")
WEBVIEWERS = ("none", "all", "leaflet", "openlayers", "mapml", "stac")

#: (min_x, min_y, max_x, max_y) tile indices, rows counted from the top
TileRange = tuple[int, int, int, int]
Extent = tuple[float, float, float, float]


@dataclass(frozen=True)
class Scheme:
    """A tiling scheme whose zoom levels halve the resolution: level z is (width0 x height0) * 2^z tiles of
    TILE_SIZE pixels of res0 / 2^z CRS units, numbered from the top left corner (left, top)."""

    crs: str
    left: float
    top: float
    res0: float
    width0: int
    height0: int
    max_zoom: int

    def resolution(self, zoom: int) -> float:
        return self.res0 / 2**zoom

    def span(self, zoom: int) -> float:
        """Width of one tile in CRS units."""
        return self.resolution(zoom) * TILE_SIZE

    def matrix(self, zoom: int) -> tuple[int, int]:
        return self.width0 << zoom, self.height0 << zoom


#: GDAL's built-in global tiling schemes (gcore/tilematrixset.cpp), by the names `gdal raster tile` gives them
SCHEMES: dict[str, Scheme] = {
    "WebMercatorQuad": Scheme("EPSG:3857", -_HALF, _HALF, 2 * _HALF / TILE_SIZE, 1, 1, 30),
    "WorldCRS84Quad": Scheme("OGC:CRS84", -180.0, 90.0, 180.0 / TILE_SIZE, 2, 1, 29),
    "WorldMercatorWGS84Quad": Scheme("EPSG:3395", -_HALF, _HALF, 2 * _HALF / TILE_SIZE, 1, 1, 30),
    "GoogleCRS84Quad": Scheme("OGC:CRS84", -180.0, 180.0, 360.0 / TILE_SIZE, 1, 1, 30),
    "PseudoTMS_GlobalMercator": Scheme("EPSG:3857", -_HALF, _HALF, _HALF / TILE_SIZE, 2, 2, 29),
}


@dataclass(frozen=True)
class TilePlan:
    """The tiles a call covers: per zoom level, the tile range (rows from the top)."""

    scheme: Scheme
    min_zoom: int
    max_zoom: int
    ranges: dict[int, TileRange]
    extent: Extent  # in the scheme's CRS (narrowed to whole tiles of max_zoom where bbox restricts it)
    restrict: dict[str, int]  # --min-x/--max-x/--min-y/--max-y that bbox adds (tile indices of max_zoom)

    @property
    def count(self) -> int:
        return sum((x1 - x0 + 1) * (y1 - y0 + 1) for x0, y0, x1, y1 in self.ranges.values())


# ----- planning ---------------------------------------------------------------------------------
def tile_range(scheme: Scheme, extent: Extent, zoom: int) -> TileRange | None:
    """The tiles of `zoom` an extent covers, as GDAL computes them; None when it lies outside the scheme."""
    span = scheme.span(zoom)
    width, height = scheme.matrix(zoom)
    fx0 = (extent[0] - scheme.left) / span
    fy0 = (scheme.top - extent[3]) / span
    fx1 = (extent[2] - scheme.left) / span
    fy1 = (scheme.top - extent[1]) / span
    if not (fx0 <= width and fx1 >= 0 and fy0 <= height and fy1 >= 0):
        return None

    def index(value: float, size: int) -> int:
        return int(min(max(math.floor(value + TILE_EPSILON), 0), size - 1))

    return index(fx0, width), index(fy0, height), index(fx1, width), index(fy1, height)


def raster_extent(ds: Any, scheme: Scheme) -> tuple[float, Extent]:
    """(pixel size, extent) of the raster reprojected to the scheme's CRS, as GDAL suggests it
    (GDALSuggestedWarpOutput2), with `gdal raster tile`'s clamp of geographic rasters to EPSG:3857's world."""
    from rasterio.warp import calculate_default_transform

    left, bottom, right, top = ds.bounds
    width, height = ds.width, ds.height
    gt = ds.transform
    mercator = scheme.crs == "EPSG:3857"
    clamp = mercator and ds.crs.is_geographic and gt.b == 0 and gt.d == 0 and gt.e < 0 and (top > MAX_LAT or bottom < -MAX_LAT)
    if clamp:
        # gdal raster tile: gdal_translate -projwin of the rows within +/-MAX_LAT, then the northings clamped
        res_y = -gt.e
        row0 = math.floor((top - min(top, MAX_LAT)) / res_y + 0.001)
        rows = int((min(top, MAX_LAT) - max(bottom, -MAX_LAT)) / res_y + 0.5)
        top = top - row0 * res_y
        bottom = top - rows * res_y
        height = rows
    try:
        if ds.gcps[0] and gt.is_identity:
            transform, w, h = calculate_default_transform(ds.gcps[1] or ds.crs, scheme.crs, width, height, gcps=ds.gcps[0])
        else:
            transform, w, h = calculate_default_transform(ds.crs, scheme.crs, width, height, left, bottom, right, top)
    except Exception as e:  # noqa: BLE001 - PROJ cannot place the raster in that CRS
        raise GdalMcpError(
            "invalid-argument", f"the raster's extent cannot be expressed in {scheme.crs}, the tiling scheme's CRS ({e})"
        ) from None
    extent = (transform.c, transform.f + h * transform.e, transform.c + w * transform.a, transform.f)
    if clamp:
        extent = (extent[0], max(extent[1], -_HALF), extent[2], min(extent[3], _HALF))
    return float(transform.a), extent


def default_max_zoom(scheme: Scheme, resolution: float, start: int = 0) -> int:
    """The level `gdal raster tile` picks without --max-zoom: the one whose resolution is closest to the raster's."""
    previous = 0.0
    zoom = start
    res = scheme.resolution(zoom)
    while zoom <= scheme.max_zoom:
        res = scheme.resolution(zoom)
        if resolution > res or abs(resolution - res) / res <= 1e-8:
            break
        previous = res
        zoom += 1
    if zoom > scheme.max_zoom:
        raise GdalMcpError(
            "invalid-argument",
            f"no zoom level of the tiling scheme from {start} up is as coarse as the raster; lower min_zoom",
        )
    if zoom > 0 and abs(resolution - res) / res > 1e-8 and previous and previous / resolution < resolution / res:
        zoom -= 1
    return zoom


def plan_tiles(
    ds: Any,
    scheme: Scheme,
    *,
    min_zoom: int | None,
    max_zoom: int | None,
    bbox: tuple[float, float, float, float] | None,
    bbox_crs: str | None,
) -> TilePlan:
    """The tiles `gdal raster tile` would write for this raster (GDAL's own rules, see the module docstring)."""
    if ds.crs is None:
        raise GdalMcpError(
            "invalid-argument", "the raster has no CRS, so it cannot be placed on a web map; set one with raster_edit (crs=…)"
        )
    resolution, extent = raster_extent(ds, scheme)
    if max_zoom is None:
        max_zoom = default_max_zoom(scheme, resolution, min_zoom or 0)
    if min_zoom is None:
        min_zoom = max_zoom  # GDAL's default: the raster's own level only
    for name, value in (("max_zoom", max_zoom), ("min_zoom", min_zoom)):
        if not 0 <= value <= scheme.max_zoom:
            raise GdalMcpError("invalid-argument", f"{name} must be between 0 and {scheme.max_zoom} in this tiling scheme")
    if min_zoom > max_zoom:
        raise GdalMcpError("invalid-argument", f"min_zoom ({min_zoom}) must not be above max_zoom ({max_zoom})")
    top_range = tile_range(scheme, extent, max_zoom)
    if top_range is None:
        raise GdalMcpError(
            "invalid-argument",
            f"the raster's extent {_shown(extent)} in {scheme.crs} lies outside the tiling scheme's world; check its "
            "CRS and coordinates (longitudes beyond 180 need another scheme or reprojecting first)",
        )
    x0, y0, x1, y1 = top_range
    restrict: dict[str, int] = {}
    if bbox is not None:
        x0, y0, x1, y1, extent, restrict = _restricted(ds, scheme, max_zoom, top_range, extent, bbox, bbox_crs)
    ranges = {max_zoom: (x0, y0, x1, y1)}
    for zoom in range(min_zoom, max_zoom):
        found = tile_range(scheme, extent, zoom)
        if found is not None:
            ranges[zoom] = found
    return TilePlan(scheme, min_zoom, max_zoom, dict(sorted(ranges.items())), extent, restrict)


def _restricted(
    ds: Any,
    scheme: Scheme,
    zoom: int,
    raster: TileRange,
    extent: Extent,
    bbox: tuple[float, float, float, float],
    bbox_crs: str | None,
) -> tuple[int, int, int, int, Extent, dict[str, int]]:
    """The max-zoom tiles narrowed to those `bbox` touches (GDAL's --min-x … of that level), and the extent GDAL then
    tiles the lower levels of."""
    from gdal_mcp.engine.bbox import check_bbox, transform_bbox
    from gdal_mcp.engine.crs import parse_crs

    box = check_bbox(bbox)
    source = parse_crs(bbox_crs, "bbox_crs") if bbox_crs else ds.crs
    box = transform_bbox(box, source, scheme.crs, target="tiling scheme")
    span = scheme.span(zoom)
    width, height = scheme.matrix(zoom)
    ux0 = max(0, math.floor((box[0] - scheme.left) / span))
    uy0 = max(0, math.floor((scheme.top - box[3]) / span))
    ux1 = min(width - 1, math.ceil((box[2] - scheme.left) / span) - 1)
    uy1 = min(height - 1, math.ceil((scheme.top - box[1]) / span) - 1)
    x0, y0, x1, y1 = raster
    if ux0 > x1 or uy0 > y1 or ux1 < x0 or uy1 < y0:
        raise GdalMcpError("invalid-argument", "bbox does not overlap the raster; check its coordinates and bbox_crs")
    left, bottom, right, top = extent
    restrict: dict[str, int] = {}
    if ux0 > x0:
        x0 = restrict["min-x"] = ux0
        left = scheme.left + x0 * span
    if uy0 > y0:
        y0 = restrict["min-y"] = uy0
        top = scheme.top - y0 * span
    if ux1 < x1:
        x1 = restrict["max-x"] = ux1
        right = scheme.left + (x1 + 1) * span
    if uy1 < y1:
        y1 = restrict["max-y"] = uy1
        bottom = scheme.top - (y1 + 1) * span
    return x0, y0, x1, y1, (left, bottom, right, top), restrict


def _shown(extent: Extent) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in extent) + "]"


def check_count(plan: TilePlan, max_tiles: int) -> None:
    """resource-limit when the plan has more tiles than `max_tiles`, naming the count, the limit and what fits."""
    count = plan.count
    if count <= max_tiles:
        return
    per_zoom = {z: (r[2] - r[0] + 1) * (r[3] - r[1] + 1) for z, r in plan.ranges.items()}
    fits = None
    total = 0
    for zoom in sorted(per_zoom):
        total += per_zoom[zoom]
        if total > max_tiles:
            break
        fits = zoom
    top = f"zoom {plan.max_zoom} alone has {per_zoom[plan.max_zoom]}"
    hint = (
        f"lower max_zoom to {fits} or less (zoom {plan.min_zoom}-{fits} fits)"
        if fits is not None
        else f"{top}: tile a smaller area with bbox"
    )
    raise GdalMcpError(
        "resource-limit",
        f"zoom {plan.min_zoom}-{plan.max_zoom} would write {count} tiles, over the limit of {max_tiles} per call "
        f"({top}; each level has about 4x the tiles of the one below); {hint}, raise min_zoom, or tile a smaller "
        "area with bbox (several calls for several areas)",
    )


# ----- the engine function ---------------------------------------------------------------------
@wrap_gdal_errors
def raster_tiles(
    *,
    src: str,
    dst: str,
    tile_format: Literal["PNG", "WEBP", "JPEG"] = "PNG",
    tiling_scheme: str = "WebMercatorQuad",
    convention: Literal["xyz", "tms"] = "xyz",
    min_zoom: int | None = None,
    max_zoom: int | None = None,
    resampling: str = "cubic",
    webviewer: str = "none",
    skip_blank: bool = False,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    max_tiles: int = MAX_TILES,
    threads: int = 1,
    progress: Progress = no_progress,
) -> tuple[TilesSummary, list[str]]:
    """Tiles of `src` in `dst`: a directory (z/x/y.ext) or, when `dst` ends in .mbtiles, one MBTiles file.

    Planned first (plan_tiles) and refused over `max_tiles`; GDAL then streams tile by tile, reporting progress
    through `progress` (a cancel raised there stops it)."""
    mbtiles = dst.lower().endswith(".mbtiles")
    scheme = SCHEMES.get(tiling_scheme)
    if scheme is None:
        raise GdalMcpError("invalid-argument", f"tiling_scheme must be one of {', '.join(SCHEMES)}")
    if tile_format not in EXTENSIONS:
        raise GdalMcpError("invalid-argument", f"tile_format must be one of {', '.join(EXTENSIONS)}")
    if resampling not in RESAMPLINGS:
        raise GdalMcpError("invalid-argument", f"resampling must be one of {', '.join(RESAMPLINGS)}")
    if webviewer not in WEBVIEWERS:
        raise GdalMcpError("invalid-argument", f"webviewer must be one of {', '.join(WEBVIEWERS)}")
    if convention not in ("xyz", "tms"):
        raise GdalMcpError("invalid-argument", "convention must be xyz or tms")
    if mbtiles and tiling_scheme != "WebMercatorQuad":
        raise GdalMcpError(
            "invalid-argument", "an MBTiles file holds WebMercatorQuad tiles only; drop tiling_scheme or write a directory"
        )
    if mbtiles and webviewer != "none":
        raise GdalMcpError("invalid-argument", "viewer pages go with a tile directory, not an MBTiles file; set webviewer='none'")
    with open_raster(src) as ds:
        _check_pixels(ds)
        plan = plan_tiles(ds, scheme, min_zoom=min_zoom, max_zoom=max_zoom, bbox=bbox, bbox_crs=bbox_crs)
        paletted = ds.count == 1 and _has_colormap(ds)
    check_count(plan, max_tiles)
    gdal_resampling = GDAL_RESAMPLING.get(resampling, resampling)
    threads = max(1, threads)
    if mbtiles:
        warnings = _write_mbtiles(src, dst, plan, tile_format, gdal_resampling, threads, progress, alpha=not paletted)
        zooms = _mbtiles_zooms(dst)
        size = os.path.getsize(dst)
        viewers: list[str] = []
        convention = "tms"  # the MBTiles specification counts rows from the bottom
    else:
        argv = [
            "--output-format",
            tile_format,
            "--tiling-scheme",
            tiling_scheme,
            "--min-zoom",
            str(plan.min_zoom),
            "--max-zoom",
            str(plan.max_zoom),
            "--convention",
            convention,
            "--resampling",
            gdal_resampling,
            "--webviewer",
            webviewer,
            "--num-threads",
            str(threads),
            "--parallel-method",
            "thread",  # never spawn or fork: a confined worker runs no program
        ]
        for key, value in plan.restrict.items():
            argv += [f"--{key}", str(value)]
        if skip_blank:
            argv.append("--skip-blank")
        # in an Env: rasterio's GDAL_DATA (the viewers' templates) set, also where no Env encloses the call
        with rasterio.Env(), algorithms.algorithm(["raster", "tile"], [*argv, src, dst]) as alg:
            alg.run(progress, message="writing tiles")
            warnings = list(alg.warnings)
        zooms, size = _directory_zooms(Path(dst), EXTENSIONS[tile_format])
        viewers = [name for name in VIEWER_FILES if (Path(dst) / name).is_file()]
        size += sum((Path(dst) / name).stat().st_size for name in viewers)
    progress(1.0, "tiles written")
    summary = TilesSummary(
        container="mbtiles" if mbtiles else "directory",
        tiling_scheme=tiling_scheme,
        convention=convention,
        tile_format=tile_format,
        tile_size=TILE_SIZE,
        min_zoom=plan.min_zoom,
        max_zoom=plan.max_zoom,
        tiles=sum(z.tiles for z in zooms),
        planned_tiles=plan.count,
        zooms=zooms,
        bounds_wgs84=_wgs84(plan),
        path_template=None if mbtiles else "{z}/{x}/{y}." + EXTENSIONS[tile_format],
        viewers=viewers,
        file_size=size,
    )
    return summary, warnings


def _check_pixels(ds: Any) -> None:
    """Tiles are images: 8-bit, 1 to 4 bands (grey, grey+alpha, RGB, RGBA)."""
    if any(dtype != "uint8" for dtype in ds.dtypes):
        raise GdalMcpError(
            "invalid-argument",
            f"web tiles are 8-bit images and this raster is {ds.dtypes[0]}: make an 8-bit rendering first "
            "(raster_convert with output_type='Byte' and scale=true, or raster_terrain hillshade / color-relief), "
            "then tile that",
        )
    if not 1 <= ds.count <= 4:
        raise GdalMcpError(
            "invalid-argument",
            f"web tiles hold 1 to 4 bands (grey, grey+alpha, RGB, RGBA) and this raster has {ds.count}: write the "
            "bands to show first (raster_convert with bands=[…])",
        )


def _has_colormap(ds: Any) -> bool:
    try:
        return bool(ds.colormap(1))
    except ValueError:  # rasterio: no color table
        return False


def _write_mbtiles(
    src: str,
    dst: str,
    plan: TilePlan,
    tile_format: str,
    resampling: str,
    threads: int,
    progress: Progress,
    *,
    alpha: bool = True,
) -> list[str]:
    """GDAL's MBTiles driver: the raster warped onto the whole tiles of max_zoom at that level's exact resolution (so
    the driver takes that level as is), then one overview per lower level. `alpha`: transparent outside the data (a
    paletted raster keeps its color table instead, as `gdal raster tile` does)."""
    scheme = plan.scheme
    lowest = max(0, plan.max_zoom - max(_tiles_across(plan.ranges[plan.max_zoom])).bit_length())
    if plan.min_zoom < lowest:
        raise GdalMcpError(
            "invalid-argument",
            f"an MBTiles file of this area can hold zoom levels {lowest}-{plan.max_zoom}: at zoom {lowest} it fits in "
            f"one tile, and GDAL's MBTiles driver builds no smaller levels; set min_zoom to {lowest} or more, or "
            "write a tile directory",
        )
    x0, y0, x1, y1 = plan.ranges[plan.max_zoom]
    span = scheme.span(plan.max_zoom)
    res = algorithms.number(scheme.resolution(plan.max_zoom))
    box = (scheme.left + x0 * span, scheme.top - (y1 + 1) * span, scheme.left + (x1 + 1) * span, scheme.top - y0 * span)
    argv = [
        "--dst-crs",
        "EPSG:3857",
        "--resolution",
        f"{res},{res}",
        "--bbox",
        ",".join(algorithms.number(v) for v in box),
        "--resampling",
        resampling,
        "--output-format",
        "MBTiles",
        "--creation-option",
        f"TILE_FORMAT={tile_format}",
        "--num-threads",
        str(threads),
    ]
    if alpha and tile_format != "JPEG":
        argv.append("--add-alpha")  # transparent outside the data (JPEG has no alpha)
    base = (x1 - x0 + 1) * (y1 - y0 + 1)
    share = base / plan.count
    warnings: list[str] = []
    levels = [str(2**k) for k in range(1, plan.max_zoom - plan.min_zoom + 1)]
    with rasterio.Env(GDAL_PAM_ENABLED="NO"):  # no .aux.xml beside the file: one file is the output
        with algorithms.algorithm(["raster", "reproject"], [*argv, src, dst]) as alg:
            alg.run(progress, message=f"writing zoom {plan.max_zoom}", scale=share)
            warnings += alg.warnings
        if levels:
            args = ["--resampling", resampling, "--levels", ",".join(levels), dst]
            with algorithms.algorithm(["raster", "overview", "add"], args) as alg:
                alg.run(progress, message=f"writing zoom {plan.min_zoom}-{plan.max_zoom - 1}", start=share, scale=1 - share)
                warnings += [w for w in alg.warnings if w not in warnings]
    return warnings


def _tiles_across(r: TileRange) -> tuple[int, int]:
    return r[2] - r[0] + 1, r[3] - r[1] + 1


def _mbtiles_zooms(path: str) -> list[TileZoom]:
    """What the MBTiles file holds, per zoom level (its rows are counted from the bottom, as the specification says)."""
    db = sqlite3.connect(Path(os.path.abspath(path)).as_uri() + "?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT zoom_level, COUNT(*), MIN(tile_column), MAX(tile_column), MIN(tile_row), MAX(tile_row) "
            "FROM tiles GROUP BY zoom_level ORDER BY zoom_level"
        ).fetchall()
    finally:
        db.close()
    return [TileZoom(zoom=z, tiles=n, min_x=a, max_x=b, min_y=c, max_y=d) for z, n, a, b, c, d in rows]


def _directory_zooms(root: Path, ext: str) -> tuple[list[TileZoom], int]:
    """The tiles the directory holds (z/x/y.ext), per zoom level, and their bytes."""
    zooms: list[TileZoom] = []
    size = 0
    suffix = "." + ext
    for zdir in sorted((p for p in root.iterdir() if p.name.isdigit() and p.is_dir()), key=lambda p: int(p.name)):
        count, xs, ys = 0, [], []
        for xdir in zdir.iterdir():
            if not (xdir.name.isdigit() and xdir.is_dir()):
                continue
            for entry in os.scandir(xdir):
                if entry.name.endswith(suffix) and entry.name[: -len(suffix)].isdigit():
                    count += 1
                    xs.append(int(xdir.name))
                    ys.append(int(entry.name[: -len(suffix)]))
                    size += entry.stat().st_size
        if count:
            zooms.append(TileZoom(zoom=int(zdir.name), tiles=count, min_x=min(xs), max_x=max(xs), min_y=min(ys), max_y=max(ys)))
    return zooms, size


def _wgs84(plan: TilePlan) -> tuple[float, float, float, float] | None:
    """The tiled extent in lon/lat degrees."""
    from rasterio.warp import transform_bounds

    try:
        west, south, east, north = transform_bounds(plan.scheme.crs, "EPSG:4326", *plan.extent, densify_pts=21)
    except Exception:  # noqa: BLE001 - a summary field, not worth failing the job for
        return None
    values = (west, south, east, north)
    return tuple(round(v, 9) for v in values) if all(math.isfinite(v) for v in values) else None  # type: ignore[return-value]
