"""A scale bar for previews: how long one image pixel is on the ground at the image centre, a round length to show,
and the bar with its label drawn in the bottom-left corner of the RGBA image (a 5x7 pixel font: no font library).

Ground length of an image pixel, measured east-west (along the image's rows) at the image centre:
- projected CRS: the pixel's length in the CRS's linear unit, converted to metres; when the projection's scale at
  the image centre differs from 1 by more than `MAX_MAP_SCALE_ERROR` (Web Mercator away from the equator, say),
  the geodesic length instead, as for lon/lat;
- geographic CRS (lon/lat): the geodesic length on the CRS's ellipsoid (pyproj.Geod) of one pixel's step along
  the parallel through the image centre, so the bar is true there (plate carrée stretches it elsewhere).

The bar's length is the largest 1, 2 or 5 x 10^n metres that fits in a quarter of the image's width, drawn as a
black bar under its label ("500 m", "2 km") on a white panel; the panel is left out, and only the legend states the
scale, when it would not fit in the image.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gdal_mcp.models import ScaleBar

MAX_BAR_FRACTION = 0.25  # of the image's width
MAX_MAP_SCALE_ERROR = 0.01  # beyond this the projection's own metres are not ground metres
PANEL_OPACITY = 0.8  # white panel behind the bar and its label, blended over the image
INK = (0, 0, 0)

# 5x7 glyphs, one string of 5 characters per row ('#' = ink).
GLYPHS = {
    "0": [" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "],
    "1": ["  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "],
    "2": [" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"],
    "3": ["#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "],
    "4": ["   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "],
    "5": ["#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "],
    "6": ["  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "],
    "7": ["#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "],
    "8": [" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "],
    "9": [" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "],
    ".": ["     ", "     ", "     ", "     ", "     ", " ##  ", " ##  "],
    "k": ["#    ", "#    ", "#  # ", "# #  ", "##   ", "# #  ", "#  # "],
    "m": ["     ", "     ", "## # ", "# # #", "# # #", "# # #", "# # #"],
    "c": ["     ", "     ", " ### ", "#    ", "#    ", "#   #", " ### "],
    " ": ["     "] * 7,
}


def glyph_mask(text: str, scale: int) -> np.ndarray:
    """The text as a boolean (7 * scale, 6 * scale * len - scale) array: 5x7 glyphs one pixel apart, enlarged."""
    rows = []
    for r in range(7):
        rows.append(" ".join(GLYPHS[ch][r] for ch in text))
    small = np.array([[c == "#" for c in row] for row in rows], dtype=bool)
    return np.repeat(np.repeat(small, scale, axis=0), scale, axis=1)


def nice_length(metres: float) -> float:
    """The largest 1, 2 or 5 x 10^n not above `metres` (> 0)."""
    exp = math.floor(math.log10(metres))
    for step in (5, 2, 1):
        value = step * 10.0**exp
        if value <= metres * (1 + 1e-12):
            return float(f"{value:.12g}")
    return float(f"{10.0 ** (exp - 1) * 5:.12g}")  # float noise in log10: one step down


def label(metres: float) -> str:
    """'5 km', '200 m', '50 cm', '2 mm' (`metres` a 1, 2 or 5 x 10^n)."""
    for unit, size in (("km", 1000.0), ("m", 1.0), ("cm", 0.01), ("mm", 0.001)):
        if metres >= size * (1 - 1e-9):
            return f"{float(f'{metres / size:.12g}'):g} {unit}"
    return f"{float(f'{metres / 0.001:.12g}'):g} mm"


def _pyproj_crs(crs: Any) -> Any:
    from pyproj import CRS

    if crs is None:
        return None
    text = crs.to_wkt() if hasattr(crs, "to_wkt") else crs
    if not text:
        return None
    try:
        return CRS.from_user_input(text)
    except Exception:  # noqa: BLE001 - a CRS PROJ cannot read: no scale bar
        return None


def _geodesic_per_pixel(crs: Any, centre: tuple[float, float], step: tuple[float, float]) -> float | None:
    """Geodesic metres of one image pixel's step at `centre` (both in `crs` coordinates, x then y)."""
    from pyproj import Transformer

    geodetic = crs.geodetic_crs
    if geodetic is None:
        return None
    to_geo = Transformer.from_crs(crs, geodetic, always_xy=True)
    xs = [centre[0] - step[0] / 2, centre[0] + step[0] / 2]
    ys = [centre[1] - step[1] / 2, centre[1] + step[1] / 2]
    lons, lats = to_geo.transform(xs, ys)
    factor = geodetic.axis_info[0].unit_conversion_factor if geodetic.axis_info else math.pi / 180  # radians per unit
    lons, lats = [math.degrees(v * factor) for v in lons], [math.degrees(v * factor) for v in lats]
    if not all(math.isfinite(v) for v in (*lons, *lats)):
        return None
    _, _, dist = crs.get_geod().inv(lons[0], lats[0], lons[1], lats[1])
    return float(dist) if dist > 0 else None


def ground_per_pixel(crs: Any, centre: tuple[float, float], step: tuple[float, float]) -> tuple[float, str, str] | None:
    """(metres per image pixel, method, how it was measured) at the image centre; None without a usable CRS.

    `step` is one image pixel along the image's rows, in the CRS's coordinates.
    """
    crs = _pyproj_crs(crs)
    if crs is None or not all(math.isfinite(v) for v in (*centre, *step)) or math.hypot(*step) == 0:
        return None
    if crs.is_geographic:
        geodesic = _geodesic_per_pixel(crs, centre, step)
        if geodesic is None:
            return None
        ellipsoid = crs.ellipsoid.name if crs.ellipsoid else "its ellipsoid"
        return geodesic, "geodesic", f"geodesic metres on {ellipsoid} east-west at the image centre"
    axis = crs.axis_info[0] if crs.axis_info else None
    if axis is None or not axis.unit_conversion_factor or axis.unit_name in ("unknown", None):
        return None
    map_metres = math.hypot(*step) * axis.unit_conversion_factor
    unit = axis.unit_name
    how = (
        "measured in the CRS's metres"
        if unit == "metre"
        else f"measured in the CRS's unit, {unit} ({axis.unit_conversion_factor:.10g} m each)"
    )
    try:
        geodesic = _geodesic_per_pixel(crs, centre, step) if crs.is_projected else None
    except Exception:  # noqa: BLE001 - a projection PROJ cannot invert here: keep its own metres
        geodesic = None
    if geodesic is not None and abs(map_metres / geodesic - 1) > MAX_MAP_SCALE_ERROR:
        return (
            geodesic,
            "geodesic",
            f"geodesic metres east-west at the image centre (there the projection stretches distances "
            f"{map_metres / geodesic:.3g}x, so its own metres would mislead)",
        )
    return map_metres, "map units", how


def scale_bar(
    rgba: np.ndarray, crs: Any, centre: tuple[float, float], step: tuple[float, float], *, draw: bool = True
) -> tuple[ScaleBar | None, str]:
    """Measure, choose and (with `draw`) paint the bar in place; returns the bar and a legend sentence."""
    height, width = rgba.shape[:2]
    try:
        ground = ground_per_pixel(crs, centre, step)
    except Exception:  # noqa: BLE001 - PROJ cannot place the centre: the preview goes on without a bar
        ground = None
    if ground is None:
        return None, "No scale bar: the data has no CRS with a known unit (or PROJ cannot place the image centre)."
    per_px, method, how = ground
    length = nice_length(per_px * width * MAX_BAR_FRACTION)
    px = max(1, round(length / per_px))
    text = label(length)
    s = 2 if min(width, height) >= 256 else 1
    glyphs = glyph_mask(text, s)
    margin, pad, gap, thick = 4 * s, 3 * s, 2 * s, 3 * s
    panel_w = max(px, glyphs.shape[1]) + 2 * pad
    panel_h = pad + glyphs.shape[0] + gap + thick + pad
    fits = panel_w + 2 * margin <= width and panel_h + 2 * margin <= height // 2
    box = None
    if draw and fits:
        x0, y0 = margin, height - margin - panel_h
        panel = rgba[y0 : y0 + panel_h, x0 : x0 + panel_w]
        panel[..., :3] = np.rint(panel[..., :3] * (1 - PANEL_OPACITY) + 255 * PANEL_OPACITY).astype(np.uint8)
        panel[..., 3] = 255
        ty, tx = pad, pad
        panel[ty : ty + glyphs.shape[0], tx : tx + glyphs.shape[1], :3][glyphs] = INK
        by = pad + glyphs.shape[0] + gap
        panel[by : by + thick, pad : pad + px, :3] = INK
        box = (x0, y0, panel_w, panel_h)
    bar = ScaleBar(
        label=text,
        length_m=length,
        length_px=px,
        metres_per_pixel=per_px,
        method=method,  # type: ignore[arg-type]
        box=box,
    )
    where = "bottom left" if box else ("not drawn: the image is too small for it" if draw else "not drawn: scale_bar=false")
    return bar, f"Scale bar ({where}): {text} = {px} image px; 1 image px = {per_px:.4g} m, {how}."
