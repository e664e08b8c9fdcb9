"""Terrain products from a DEM, like gdaldem: hillshade, slope, aspect, roughness, TRI, TPI (color-relief: relief.py).

The formulas are gdaldem's (GDAL 3.x apps/gdaldem_lib.cpp): Horn's 3x3 gradient (or Zevenbergen & Thorne's
4-neighbour one, `algorithm`) for hillshade, slope and aspect; the hillshade modes standard, combined,
multidirectional (four lights weighted by aspect) and igor; Riley's TRI (the default since GDAL 3.3), TPI
as the centre minus the mean of its 8 neighbours, roughness as the largest difference within the 3x3
window. Output, nodata and edges follow gdaldem:

- hillshade is Byte with nodata 0 (lit pixels are 1..255, Igor's as gdaldem computes them 0..255);
  slope, aspect, TRI, TPI and roughness are Float32 with nodata -9999;
- a pixel is nodata when its centre is nodata, and, unless `compute_edges`, when any neighbour is nodata
  or lies outside the raster (so the outermost rows and columns are nodata);
- with `compute_edges` missing neighbours are replaced by the centre value, and neighbours beyond the
  raster are extrapolated linearly (2·edge − next) as gdaldem does (its corners reuse the edge column);
- aspect is an azimuth (0 = north, clockwise), or with `trigonometric` an angle counter-clockwise from
  east; flat pixels are nodata, or 0 with `zero_for_flat`;
- distances: on a projected DEM the geotransform's steps times `scale` (gdaldem's -s, default 1); aspect takes
  none (gdaldem assumes square pixels). On a lon/lat DEM, unless `scale` is given, each row gets its own
  ground distances from the CRS's ellipsoid (`LonLatGrid`): east-west the arc of its parallel (radius
  N(lat)·cos(lat)) over one column step, north-south the meridian arc between the rows above and below, halved;
  so hillshade, slope and aspect are those of a projected grid of the same pixels (gdaldem's -s 111120 makes an
  east-west pixel 1/cos(lat) too long: slopes far too low away from the equator). TRI, TPI and roughness are
  elevation differences within the 3x3 window: they take no distances, in gdaldem as here.

Four deliberate differences: with `zero_for_flat` the edges and nodata pixels stay nodata (-9999; gdaldem
writes 0 there too and declares no nodata, which makes them look like flat or north-facing pixels); NaN
elevations always count as nodata (gdaldem lets NaN flow into the result when the band declares no
nodata); arithmetic is done in float64 (gdaldem reads Float32); lon/lat DEMs take ground distances per row
(above; `scale` gives gdaldem's single factor back).
The output grid is split into tiles (engine/tiles.py, a one-pixel halo), each computed by `terrain_tile`
wherever the executor runs it, window by window; each window is read with a one-pixel halo. Every output pixel
depends only on its 3x3 neighbourhood and the raster's own edges, so the tiling never changes a pixel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine import tiles
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    output_tiles,
    pixel_driver,
    summarize,
    write_tiles,
)
from gdal_mcp.engine.raster.relief import COLOR_MODES, NAMED_RAMPS, ColorMode, color_relief
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

Product = Literal["hillshade", "slope", "aspect", "roughness", "tri", "tpi", "color-relief"]
PRODUCTS: tuple[str, ...] = ("hillshade", "slope", "aspect", "roughness", "tri", "tpi", "color-relief")
Algorithm = Literal["Horn", "ZevenbergenThorne"]
ALGORITHMS: tuple[str, ...] = ("Horn", "ZevenbergenThorne")
HillshadeMode = Literal["standard", "combined", "multidirectional", "igor"]
HILLSHADE_MODES: tuple[str, ...] = ("standard", "combined", "multidirectional", "igor")
# Metres per degree: gdaldem's documented -s value for lon/lat DEMs with elevations in metres (the fallback for a
# lon/lat CRS without an ellipsoid).
METRES_PER_DEGREE = 111120.0
TERRAIN_NODATA = -9999.0
HILLSHADE_NODATA = 0
# Output pixels per window (tests lower it to exercise many windows); the 3x3 arithmetic holds ~10
# float64 arrays of this size at once.
WINDOW_PIXELS = 1024 * 1024
OUTPUT_BLOCK = (256, 256)

# The 3x3 neighbourhood as gdaldem numbers it:  0 1 2 / 3 4 5 / 6 7 8 (row 0 is north).
Neighbours = list[np.ndarray]
# A pixel step: one number for the whole raster, or one per output row ((h, 1), lon/lat DEMs).
Step = float | np.ndarray


# ---------------------------------------------------------------------------------------------- formulas


def _horn(n: Neighbours, ewres: Step, nsres: Step) -> tuple[np.ndarray, np.ndarray]:
    """gdaldem's Horn gradient: x = -dz/d(column), y = -dz/d(row), each over one step of the geotransform
    (with north-up rasters nsres < 0, so y is dz/d(north))."""
    x = ((n[0] + 2 * n[3] + n[6]) - (n[2] + 2 * n[5] + n[8])) / (8 * ewres)
    y = ((n[6] + 2 * n[7] + n[8]) - (n[0] + 2 * n[1] + n[2])) / (8 * nsres)
    return x, y


def _zevenbergen_thorne(n: Neighbours, ewres: Step, nsres: Step) -> tuple[np.ndarray, np.ndarray]:
    """gdaldem's Zevenbergen & Thorne (1987) gradient: central differences of the 4 edge neighbours."""
    return (n[3] - n[5]) / (2 * ewres), (n[7] - n[1]) / (2 * nsres)


def _gradient(n: Neighbours, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """x, y as gdaldem's hillshade sees them: gradient x z_factor."""
    gradient = _horn if p["algorithm"] == "Horn" else _zevenbergen_thorne
    x, y = gradient(n, p["ewres"], p["nsres"])
    return x * p["z"], y * p["z"]


def _raw_differences(n: Neighbours, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The aspect's differences: dx grows eastwards, dy southwards. gdaldem's take no distances (square pixels,
    north up); on a lon/lat DEM they are the ground gradient of each row's own distances."""
    if p["ground"]:
        gradient = _horn if p["algorithm"] == "Horn" else _zevenbergen_thorne
        x, y = gradient(n, p["ewres"], p["nsres"])
        return -x, -y
    if p["algorithm"] == "Horn":
        return (n[2] + 2 * n[5] + n[8]) - (n[0] + 2 * n[3] + n[6]), (n[6] + 2 * n[7] + n[8]) - (n[0] + 2 * n[1] + n[2])
    return n[5] - n[3], n[7] - n[1]


def _slope(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    x, y = _gradient(n, p)
    gradient = np.hypot(x, y)
    if p["percent"]:
        return 100.0 * gradient
    return np.degrees(np.arctan(gradient))


def _hillshade(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    x, y = _gradient(n, p)
    mode = p["hillshade_mode"]
    alt, az = math.radians(p["altitude"]), math.radians(p["azimuth"])
    sin_alt, cos_alt = math.sin(alt), math.cos(alt)
    xx_plus_yy = x * x + y * y
    if mode == "igor":
        return _igor(n, p, np.sqrt(xx_plus_yy))
    if mode == "multidirectional":
        # USGS OF 92-422: lights at 225, 270, 315 and 360 degrees, weighted by sin^2(aspect - azimuth);
        # the azimuth is not used.
        k = math.cos(math.radians(225)) * cos_alt
        lights = [
            np.maximum(sin_alt + (x - y) * k, 0),
            np.maximum(sin_alt - x * cos_alt, 0),
            np.maximum(sin_alt + (x + y) * k, 0),
            np.maximum(sin_alt - y * cos_alt, 0),
        ]
        w225 = 0.5 * xx_plus_yy - x * y
        weights = [w225, x * x, xx_plus_yy - w225, y * y]
        shade = sum((w * v for w, v in zip(weights, lights, strict=True)), np.zeros_like(x)) / xx_plus_yy
        value = 1.0 + 127.0 * shade / np.sqrt(1 + xx_plus_yy)
        return np.where(xx_plus_yy == 0, 1.0 + 254.0 * sin_alt, value)
    cang = (sin_alt - (y * math.cos(az) - x * math.sin(az)) * cos_alt) / np.sqrt(1 + xx_plus_yy)
    if mode == "combined":
        # slope-combined shading: the angle to the light, darkened by the slope
        cang = 1 - np.arccos(np.clip(cang, -1, 1)) * np.arctan(np.sqrt(xx_plus_yy)) / ((math.pi * math.pi) / 4)
    return np.where(cang <= 0, 1.0, 1.0 + 254.0 * cang)


def _igor(n: Neighbours, p: dict[str, Any], gradient: np.ndarray) -> np.ndarray:
    """Igor Sevastyanov's hillshading (as gdaldem -igor): darker with slope, lighter facing the light."""
    slope_strength = np.degrees(np.arctan(gradient)) / 90
    dx, dy = _raw_differences(n, p)
    aspect = np.arctan2(dy, -dx)
    # DifferenceBetweenAngles(aspect, 3/2 pi - azimuth, 2 pi)
    diff = np.abs(
        np.mod(aspect, 2 * math.pi) - math.fmod(3 * math.pi / 2 - math.radians(p["azimuth"]), 2 * math.pi) % (2 * math.pi)
    )
    diff = np.where(diff > math.pi, 2 * math.pi - diff, diff)
    return 255.0 * (1.0 - slope_strength * (1 - diff / math.pi))


def _aspect(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    dx, dy = _raw_differences(n, p)
    # gdaldem turns the angle into Float32 before making it an azimuth; doing the same keeps a
    # due-north pixel at 0 rather than 359.99999.
    angle = np.degrees(np.arctan2(dy, -dx)).astype(np.float32)
    if p["trigonometric"]:
        aspect = np.where(angle < 0, angle + np.float32(360), angle)
    else:
        aspect = np.where(angle > 90, np.float32(450) - angle, np.float32(90) - angle)
    aspect[aspect == 360] = 0
    aspect[(dx == 0) & (dy == 0)] = 0 if p["zero_for_flat"] else np.nan  # flat: nodata unless zero_for_flat
    return aspect


def _tri(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    """Riley et al. (1999): square root of the summed squared differences to the centre."""
    return np.sqrt(sum(((n[k] - n[4]) ** 2 for k in (0, 1, 2, 3, 5, 6, 7, 8)), np.zeros_like(n[4])))


def _tpi(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    return n[4] - sum((n[k] for k in (0, 1, 2, 3, 5, 6, 7, 8)), np.zeros_like(n[4])) / 8


def _roughness(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    return np.maximum.reduce(n) - np.minimum.reduce(n)


FORMULAS: dict[str, Callable[[Neighbours, dict[str, Any]], np.ndarray]] = {
    "hillshade": _hillshade,
    "slope": _slope,
    "aspect": _aspect,
    "tri": _tri,
    "tpi": _tpi,
    "roughness": _roughness,
}


def _apply(padded: np.ndarray, product: str, params: dict[str, Any], compute_edges: bool) -> np.ndarray:
    """The product for the interior of `padded` (a block with a one-pixel ring); NaN marks nodata in and out."""
    h, w = padded.shape[0] - 2, padded.shape[1] - 2
    n = [padded[r : r + h, c : c + w] for r in range(3) for c in range(3)]
    missing = np.isnan(padded)
    if not missing.any():
        invalid = None
    elif compute_edges:
        # gdaldem: a missing neighbour takes the centre's value.
        n = [np.where(missing[k // 3 : k // 3 + h, k % 3 : k % 3 + w], n[4], v) if k != 4 else v for k, v in enumerate(n)]
        invalid = missing[1:-1, 1:-1]
    else:
        invalid = missing[0:h, 0:w].copy()
        for k in range(1, 9):
            invalid |= missing[k // 3 : k // 3 + h, k % 3 : k % 3 + w]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = FORMULAS[product](n, params)
    out = np.asarray(out, dtype=np.float64)
    if invalid is not None:
        out[invalid] = np.nan
    return out


# ---------------------------------------------------------------------------------------------- windows


def _read(ds: Any, band: int, window: Window, nodata: float | None) -> np.ndarray:
    data = ds.read(band, window=window)
    missing = np.isnan(data) if data.dtype.kind == "f" else np.zeros(data.shape, dtype=bool)
    if nodata is not None and not math.isnan(nodata):
        missing |= data == nodata
    out = data.astype(np.float64)
    out[missing] = np.nan
    return out


def _window_values(
    ds: Any, band: int, w: Window, nodata: float | None, product: str, params: dict[str, Any], compute_edges: bool
) -> np.ndarray:
    """Product values (NaN = nodata) for output window `w`, read with a one-pixel halo."""
    width, height = ds.width, ds.height
    col, row, wh, ww = int(w.col_off), int(w.row_off), int(w.height), int(w.width)
    if width < 2 or height < 2:
        return np.full((wh, ww), np.nan)  # every pixel is an edge pixel and gdaldem cannot extrapolate
    r0, r1 = max(0, row - 1), min(height, row + wh + 1)
    c0, c1 = max(0, col - 1), min(width, col + ww + 1)
    padded = np.full((wh + 2, ww + 2), np.nan)
    pr, pc = r0 - (row - 1), c0 - (col - 1)
    padded[pr : pr + r1 - r0, pc : pc + c1 - c0] = _read(ds, band, Window(c0, r0, c1 - c0, r1 - r0), nodata)
    left, right = col == 0, col + ww == width
    grid: LonLatGrid | None = params.get("lonlat")
    if grid is not None:
        ew, ns = grid.steps(row, wh)
        params = {**params, "ewres": ew[:, None], "nsres": ns[:, None]}
    if compute_edges:
        # Columns beyond the raster: linear extrapolation (NaN if either source pixel is nodata).
        if left:
            padded[:, 0] = 2 * padded[:, 1] - padded[:, 2]
        if right:
            padded[:, -1] = 2 * padded[:, -2] - padded[:, -3]
    out = _apply(padded, product, params, compute_edges)
    if compute_edges:
        # The first and last raster rows: gdaldem extrapolates the missing row and repeats the edge
        # column at the corners (instead of extrapolating it).
        for top, at_edge, centre, inner in ((True, row == 0, 1, 2), (False, row + wh == height, wh, wh - 1)):
            if not at_edge:
                continue
            rows = padded[[centre, inner]].copy()
            if left:
                rows[:, 0] = rows[:, 1]
            if right:
                rows[:, -1] = rows[:, -2]
            beyond = 2 * rows[0] - rows[1]
            block = np.stack([beyond, rows[0], rows[1]] if top else [rows[1], rows[0], beyond])
            one = params if grid is None else {**params, "ewres": ew[centre - 1, None], "nsres": ns[centre - 1, None]}
            out[centre - 1] = _apply(block, product, one, compute_edges)[0]
    return out


# ---------------------------------------------------------------------------------------------- lon/lat DEMs


@dataclass(frozen=True)
class LonLatGrid:
    """The rows of a north-up lon/lat DEM on its CRS's ellipsoid: `steps` gives each row's ground distances."""

    ellipsoid: str
    a: float  # semi-major axis, metres
    f: float  # flattening
    top: float  # latitude of the grid's top edge, radians (geotransform f)
    dlat: float  # one row, radians (geotransform e: negative when north is up)
    dlon: float  # one column, radians (geotransform a)

    @classmethod
    def of(cls, crs: Any, transform: Any) -> LonLatGrid | None:
        """The grid of a raster in the geographic CRS `crs` (rasterio); None when the CRS has no ellipsoid."""
        from pyproj import CRS

        try:
            c = CRS.from_wkt(crs.to_wkt())
            geod, ellipsoid = c.get_geod(), c.ellipsoid
        except Exception:  # noqa: BLE001 - a CRS pyproj cannot read: the caller falls back to gdaldem's -s
            return None
        if geod is None or ellipsoid is None:
            return None
        unit = c.axis_info[0].unit_conversion_factor if c.axis_info else math.pi / 180  # radians per CRS unit
        return cls(ellipsoid.name, geod.a, geod.f, transform.f * unit, transform.e * unit, transform.a * unit)

    def latitudes(self, rows: np.ndarray) -> np.ndarray:
        """Latitude (radians, not clipped) of the centres of `rows`."""
        return self.top + self.dlat * (rows + 0.5)

    def parallel_radius(self, lat: np.ndarray) -> np.ndarray:
        """Radius of the parallel at `lat`: N(lat)·cos(lat), the prime vertical radius N = a / sqrt(1 - e² sin²)."""
        e2 = self.f * (2 - self.f)
        return self.a * np.cos(lat) / np.sqrt(1 - e2 * np.sin(lat) ** 2)

    def meridian_arc(self, lat: np.ndarray) -> np.ndarray:
        """Signed distance from the equator along the meridian (Helmert's series in the third flattening n,
        to n^4: well under a millimetre on the Earth's ellipsoids)."""
        n = self.f / (2 - self.f)
        n2, n3, n4 = n * n, n**3, n**4
        mean = self.a / (1 + n) * (1 + n2 / 4 + n4 / 64)
        return mean * (
            lat
            + (-1.5 * n + 9 / 16 * n3) * np.sin(2 * lat)
            + (15 / 16 * n2 - 15 / 32 * n4) * np.sin(4 * lat)
            - 35 / 48 * n3 * np.sin(6 * lat)
            + 315 / 512 * n4 * np.sin(8 * lat)
        )

    def steps(self, row: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(east-west, north-south) ground steps in metres of rows row..row+count-1, signed like the geotransform's:
        east-west the parallel's arc over one column, north-south half the meridian arc between the row above and
        the row below (exact for a surface that is linear in ground distance). A row whose centre is not strictly
        between the poles gets NaN (its pixels are nodata)."""
        lat = self.latitudes(np.arange(row - 1, row + count + 1, dtype=np.float64))
        half_pi = math.pi / 2
        arc = self.meridian_arc(np.clip(lat, -half_pi, half_pi))
        centre = lat[1:-1]
        ew = np.where(np.abs(centre) < half_pi, self.parallel_radius(centre) * self.dlon, np.nan)
        return ew, (arc[2:] - arc[:-2]) / 2

    def describe(self, height: int, product: str) -> str:
        """The note the result carries: what was done, with the pixel's ground size at the top and bottom rows."""
        ew, ns = self.steps(0, height)
        finite = np.flatnonzero(np.isfinite(ew))  # rows centred on a pole have no east-west distance
        first, last = (finite[0], finite[-1]) if finite.size else (0, height - 1)
        ends = np.abs(ew[[first, last]])
        lat = np.degrees(self.latitudes(np.array([first, last], dtype=np.float64)))

        def where(k: int) -> str:
            return f"{ends[k]:.4g} m at {abs(lat[k]):.3f}°{'N' if lat[k] >= 0 else 'S'}"

        text = (
            f"lon/lat DEM: ground distances per row from the {self.ellipsoid} ellipsoid (a pixel is {where(0)} to "
            f"{where(1)} east-west, {abs(float(np.nanmean(ns))):.4g} m north-south), so {product} is that of a "
            "projected grid of the same pixels"
        )
        if product != "aspect":
            text += "; elevations are taken as metres (z_factor=0.3048 for feet)"
        return text + "; scale=111120 instead reproduces gdaldem -s 111120 (one factor for both axes)"


# ---------------------------------------------------------------------------------------------- checks


def _check_number(
    name: str, value: float, *, low: float | None = None, high: float | None = None, positive: bool = False
) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or (positive and v <= 0) or (low is not None and v < low) or (high is not None and v > high):
        need = (
            "a positive number"
            if positive
            else f"a number between {low:g} and {high:g}"
            if low is not None and high is not None
            else "a finite number"
        )
        raise GdalMcpError("invalid-argument", f"{name} must be {need} (got {value!r})")
    return v


def _distances(ds: Any, scale: float | None, product: str, warnings: list[str]) -> tuple[float, LonLatGrid | None]:
    """gdaldem's -s (horizontal units per vertical unit, default 1), or on a lon/lat DEM with no `scale` the
    per-row ground distances of its ellipsoid (then the scale is 1: the steps are metres already)."""
    uses_scale = product in ("hillshade", "slope")
    crs = ds.crs
    geographic = crs is not None and bool(crs.to_wkt()) and crs.is_geographic
    if scale is not None:
        value = _check_number("scale", scale, positive=True)
        if product == "aspect" and geographic:
            warnings.append(
                "scale is given, so aspect is gdaldem's: from elevation differences alone, as if the pixels were square; "
                "leave scale out to take each row's ground distances on this lon/lat DEM"
            )
        elif not uses_scale:
            warnings.append(f"scale only changes hillshade and slope; it has no effect on {product}")
        return value, None
    if product not in ("hillshade", "slope", "aspect") or crs is None or not crs.to_wkt():
        return 1.0, None
    if geographic:
        grid = LonLatGrid.of(crs, ds.transform)
        if grid is None:
            if not uses_scale:
                return 1.0, None
            warnings.append(
                f"the DEM's CRS is geographic (degrees) without an ellipsoid: using scale={METRES_PER_DEGREE:g} metres per "
                "degree (gdaldem's suggested -s) on both axes; reproject the DEM to a projected CRS for exact distances"
            )
            return METRES_PER_DEGREE, None
        warnings.append(grid.describe(ds.height, product))
        return 1.0, grid
    if not uses_scale:
        return 1.0, None
    try:
        unit, factor = crs.linear_units_factor
    except Exception:  # noqa: BLE001 - a CRS without linear units: nothing to suggest
        return 1.0, None
    if factor and not math.isclose(factor, 1.0):
        warnings.append(
            f"the CRS's unit is {unit} ({factor:g} m), not metre; {product} assumes elevations are in "
            f"{unit} too. If they are in metres pass scale={factor:g}"
        )
    return 1.0, None


def _unused(
    product: str, z_factor: float, azimuth: float, altitude: float, slope_units: str, extra: dict[str, Any], warnings: list[str]
) -> None:
    if z_factor != 1.0 and product not in ("hillshade", "slope"):
        reason = (
            "aspect does not depend on it"
            if product == "aspect"
            else "colours follow the elevations as they are"
            if product == "color-relief"
            else f"{product} is in the DEM's elevation units, as gdaldem computes it"
        )
        warnings.append(f"z_factor only applies to hillshade and slope; ignored ({reason})")
    if (azimuth != 315.0 or altitude != 45.0) and product != "hillshade":
        warnings.append(f"azimuth and altitude only apply to hillshade; ignored for {product}")
    elif product == "hillshade" and azimuth != 315.0 and extra["hillshade_mode"] == "multidirectional":
        warnings.append("azimuth is ignored by the multidirectional hillshade (lights at 225, 270, 315 and 360)")
    elif product == "hillshade" and altitude != 45.0 and extra["hillshade_mode"] == "igor":
        warnings.append("altitude is ignored by Igor's hillshade")
    if slope_units != "degrees" and product != "slope":
        warnings.append(f"slope_units only applies to slope; ignored for {product}")
    used_by = {
        "algorithm": ("hillshade", "slope", "aspect"),
        "hillshade_mode": ("hillshade",),
        "zero_for_flat": ("aspect",),
        "trigonometric": ("aspect",),
        "colors": ("color-relief",),
        "color_mode": ("color-relief",),
        "alpha": ("color-relief",),
        "compute_edges": PRODUCTS[:-1],
    }
    defaults = {
        "algorithm": "Horn",
        "hillshade_mode": "standard",
        "zero_for_flat": False,
        "trigonometric": False,
        "colors": None,
        "color_mode": "interpolate",
        "alpha": False,
        "compute_edges": False,
    }
    for name, products in used_by.items():
        if extra[name] != defaults[name] and product not in products:
            warnings.append(f"{name} only applies to {', '.join(products)}; ignored for {product}")


# ---------------------------------------------------------------------------------------------- terrain


@wrap_gdal_errors
def terrain(
    src: str,
    dst: str,
    *,
    product: Product,
    band: int = 1,
    z_factor: float = 1.0,
    azimuth: float = 315.0,
    altitude: float = 45.0,
    slope_units: Literal["degrees", "percent"] = "degrees",
    scale: float | None = None,
    algorithm: Algorithm = "Horn",
    hillshade_mode: HillshadeMode = "standard",
    zero_for_flat: bool = False,
    trigonometric: bool = False,
    colors: str | list[Any] | None = None,
    color_mode: ColorMode = "interpolate",
    alpha: bool = False,
    compute_edges: bool = False,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Compute one terrain product of band `band` of the DEM `src` into `dst`, as gdaldem does."""
    warnings: list[str] = []
    for name, value, allowed in (
        ("product", product, PRODUCTS),
        ("algorithm", algorithm, ALGORITHMS),
        ("hillshade_mode", hillshade_mode, HILLSHADE_MODES),
        ("color_mode", color_mode, COLOR_MODES),
    ):
        if value not in allowed:
            raise GdalMcpError("invalid-argument", f"unknown {name} {value!r}; use one of {', '.join(allowed)}")
    if slope_units not in ("degrees", "percent"):
        raise GdalMcpError("invalid-argument", f"slope_units must be 'degrees' or 'percent' (got {slope_units!r})")
    relief = product == "color-relief"
    if relief and colors is None:
        raise GdalMcpError(
            "invalid-argument",
            "color-relief needs colors: a ramp name ("
            + ", ".join(NAMED_RAMPS)
            + ') or a list such as [[0, 0, 128, 0], [500, 255, 255, 0], ["100%", 255, 255, 255]]',
        )
    z = _check_number("z_factor", z_factor, positive=True)
    az = _check_number("azimuth", azimuth, low=0.0, high=360.0)
    alt = _check_number("altitude", altitude, low=0.0, high=90.0)
    extra = {
        "algorithm": algorithm,
        "hillshade_mode": hillshade_mode,
        "zero_for_flat": zero_for_flat,
        "trigonometric": trigonometric,
        "colors": colors,
        "color_mode": color_mode,
        "alpha": alpha,
        "compute_edges": compute_edges,
    }
    _unused(product, z, az, alt, slope_units, extra, warnings)
    driver = pixel_driver(dst, format, "terrain")
    options = normalize_options(creation_options)

    with open_raster(src) as ds:
        if not 1 <= band <= ds.count:
            raise GdalMcpError("invalid-argument", f"band {band} does not exist; the raster has {ds.count} band(s)")
        nodata = ds.nodatavals[band - 1]
        if relief:
            assert colors is not None
            color_relief(
                src,
                ds,
                band,
                dst,
                driver,
                options,
                nodata=nodata,
                colors=colors,
                mode=color_mode,
                alpha=alpha,
                warnings=warnings,
                progress=progress,
            )
            return summarize(dst), warnings
        t = ds.transform
        if t.b or t.d:
            raise GdalMcpError(
                "unsupported", "the DEM's geotransform is rotated or sheared; warp it to a north-up grid first (raster_reproject)"
            )
        if ds.transform.is_identity and not (ds.crs and ds.crs.to_wkt()):
            warnings.append("the DEM has no georeferencing: pixels are taken as 1 x 1 elevation units")
        params = {
            "ewres": t.a,
            "nsres": t.e,
            "z": z,
            "azimuth": az,
            "altitude": alt,
            "percent": slope_units == "percent",
            "algorithm": algorithm,
            "hillshade_mode": hillshade_mode,
            "zero_for_flat": zero_for_flat,
            "trigonometric": trigonometric,
        }
        factor, grid = _distances(ds, scale, product, warnings)
        params["ewres"] *= factor
        params["nsres"] *= factor
        params["lonlat"], params["ground"] = grid, grid is not None
        hillshade = product == "hillshade"
        out_dtype = "uint8" if hillshade else "float32"
        out_nodata = float(HILLSHADE_NODATA) if hillshade else TERRAIN_NODATA
        plan = output_tiles(driver, options, ds.width, ds.height, bytes_per_pixel=np.dtype(out_dtype).itemsize, halo=1)
        specs = [
            TerrainTile(
                path=src,
                band=band,
                nodata=nodata,
                product=product,
                params=params,
                compute_edges=compute_edges,
                dtype=out_dtype,
                out_nodata=out_nodata,
                window=t.window,
                window_pixels=WINDOW_PIXELS,
                block=OUTPUT_BLOCK,
            )
            for t in plan
        ]
        write_tiles(
            dst,
            driver,
            options,
            width=ds.width,
            height=ds.height,
            count=1,
            dtype=out_dtype,
            crs=ds.crs,
            transform=ds.transform,
            nodata=out_nodata,
            fn=terrain_tile,
            specs=specs,
            windows=[t.window for t in plan],
            progress=progress,
            what=product,
            source=ds,
        )
    return summarize(dst), warnings


@dataclass(frozen=True)
class TerrainTile:
    """One output tile of a terrain product (picklable: what a worker needs to compute it)."""

    path: str
    band: int
    nodata: float | None
    product: str
    params: dict[str, Any]
    compute_edges: bool
    dtype: str
    out_nodata: float
    #: (col_off, row_off, width, height) in the DEM's grid
    window: tuple[int, int, int, int]
    window_pixels: int
    block: tuple[int, int]


def terrain_tile(spec: TerrainTile) -> np.ndarray:
    """The (h, w) output pixels of one tile, computed window by window, each window read with its one-pixel halo
    (the raster's own edges handled as gdaldem does, wherever the tile lies)."""
    col, row, width, height = spec.window
    out = np.empty((height, width), dtype=spec.dtype)
    with open_raster(spec.path) as ds:
        for w in iter_windows(width, height, spec.block, spec.window_pixels):
            tiles.check_stop()
            r0, c0, h, ww = int(w.row_off), int(w.col_off), int(w.height), int(w.width)
            values = _window_values(
                ds, spec.band, Window(col + c0, row + r0, ww, h), spec.nodata, spec.product, spec.params, spec.compute_edges
            )
            missing = np.isnan(values)
            if spec.product == "hillshade":
                # gdaldem hands GDAL a Float32 that GDAL writes to Byte as (GByte)(clamp(v) + 0.5f), in float32
                shade = np.clip(values.astype(np.float32), 0, 255)
                values = np.floor(shade + np.float32(0.5)).astype(np.float64)
            values[missing] = spec.out_nodata
            out[r0 : r0 + h, c0 : c0 + ww] = values.astype(spec.dtype)
    return out
