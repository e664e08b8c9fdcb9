"""Raster quicklooks: a decimated read (overviews when the file has them), a stretch, a colormap, a PNG.

Size rule (the longest side of the image, `max_size` from 1 to 4096):
- a raster (or bbox window) longer than `max_size` is read decimated straight to the image size, so the
  longest side is exactly `max_size`; GDAL reads from overviews when there are some, and the full-resolution
  raster is never held in memory;
- a smaller one is read at full resolution and enlarged by the largest whole factor that fits,
  k = max_size // longest side (at least 1), with nearest neighbour: every source pixel becomes a k x k block,
  so the longest side is at most `max_size` and within one source pixel's k of it (a 50x40 raster at
  max_size 400 becomes 400x320, a 3x2 one at 768 becomes 768x512, an 84x78 one 756x702, and a 500x300 one
  stays as it is: 768 // 500 = 1).

A scale bar (scalebar.py) is drawn in the bottom-left corner unless `scale_bar=False`; the legend states the
scale either way.

Reads use nearest-neighbour resampling, so every preview pixel is a real data value (classes stay classes;
overviews, when present, carry whatever resampling they were built with). Pixels that are nodata, masked
(mask band, alpha band) or not finite are transparent (alpha 0); in an RGB composite a pixel is transparent
when all three bands are invalid there. Images are shown north up: south-up or east-left rasters are
flipped; rotated or non-georeferenced ones are shown as stored.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
from rasterio.enums import ColorInterp, Resampling

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.preview import colormaps
from gdal_mcp.engine.preview.common import (
    DEFAULT_MAX_SIZE,
    PreviewResult,
    check_max_size,
    fmt,
    fmt_extent,
    ordinal,
    write_png,
)
from gdal_mcp.engine.preview.png import encode_png
from gdal_mcp.engine.preview.scalebar import scale_bar as draw_scale_bar
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import bbox_window, read_bands, select_bands
from gdal_mcp.errors import GdalMcpError

STRETCHES = ("percentile", "minmax", "none")
SLOW_READ_PIXELS = 64 * 1024 * 1024  # above this, a decimated read without overviews is worth a warning


def preview_shape(width: int, height: int, max_size: int) -> tuple[int, int, int]:
    """(read width, read height, enlargement factor) for a window of width x height (see the module doc)."""
    longest = max(width, height)
    if longest > max_size:
        scale = max_size / longest
        return max(1, round(width * scale)), max(1, round(height * scale)), 1
    return width, height, max(1, max_size // longest)


def _check_percentiles(percentiles) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in percentiles)
    except (TypeError, ValueError):
        raise GdalMcpError(
            "invalid-argument", f"percentiles must be two numbers [low, high] from 0 to 100, got {percentiles!r}"
        ) from None
    if not (0 <= lo < hi <= 100):
        raise GdalMcpError("invalid-argument", f"percentiles must satisfy 0 <= low < high <= 100, got [{lo}, {hi}]")
    return lo, hi


def _palette(ds, band: int) -> dict[int, tuple[int, ...]] | None:
    """The band's colour table when it is a palette band."""
    if ds.colorinterp[band - 1] != ColorInterp.palette:
        return None
    try:
        return ds.colormap(band)
    except ValueError:
        return None


def _choose_bands(ds, bands: list[int] | None, colormap: str | None) -> tuple[list[int], list[str]]:
    """The bands to draw (one or three) and warnings about the choice."""
    notes: list[str] = []
    if bands is not None:
        indexes = select_bands(ds, bands)
        if len(indexes) not in (1, 3):
            raise GdalMcpError(
                "invalid-argument",
                f"bands must be one band (drawn with a colormap) or three "
                f"(drawn as red, green, blue), got {len(indexes)}: {indexes}",
            )
    else:
        select_bands(ds, None)  # a clear error for band-less containers (HDF5, netCDF)
        interp = list(ds.colorinterp)
        colour = {ci: i + 1 for i, ci in reversed(list(enumerate(interp)))}
        alpha = [i + 1 for i, ci in enumerate(interp) if ci == ColorInterp.alpha]
        data = [b for b in range(1, ds.count + 1) if b not in alpha]
        if colormap is None and all(c in colour for c in (ColorInterp.red, ColorInterp.green, ColorInterp.blue)):
            indexes = [colour[ColorInterp.red], colour[ColorInterp.green], colour[ColorInterp.blue]]
        elif colormap is None and len(data) >= 3:
            indexes = data[:3]
            if len(data) > 3:
                notes.append(
                    f"the raster has {len(data)} bands without red/green/blue colour interpretation; "
                    f"showing bands {indexes} as red, green, blue (pass bands=[a, b, c] for others, or "
                    "bands=[n] for one band)"
                )
        else:
            indexes = data[:1] or [1]
            if len(data) > 1:
                notes.append(
                    f"showing band {indexes[0]} of {len(data)} through a colormap (pass bands=[n] for "
                    "another, or three bands for an RGB composite)"
                )
    if colormap is not None and len(indexes) != 1:
        raise GdalMcpError(
            "invalid-argument", "colormap applies to a single band; pass bands=[n] with it, or omit colormap for an RGB composite"
        )
    for b in indexes:
        kind = np.dtype(ds.dtypes[b - 1]).kind
        if kind not in "uifb":
            raise GdalMcpError(
                "unsupported",
                f"band {b} is {ds.dtypes[b - 1]}; previews need real-valued bands (convert complex data to its amplitude first)",
            )
    return indexes, notes


def _stretch(
    values: np.ndarray, invalid: np.ndarray, stretch: str, q: tuple[float, float]
) -> tuple[np.ndarray, tuple[float, float] | None]:
    """LUT indexes 0..255 of one band and the data values at the two ends (None without valid pixels).

    `values` is a float64 copy the function may overwrite (large previews keep one band copy at a time).
    """
    valid = values[~invalid]
    if valid.size == 0:
        return np.zeros(values.shape, dtype=np.uint8), None
    if stretch == "percentile":
        lo, hi = (float(v) for v in np.percentile(valid, q, overwrite_input=True))
    elif stretch == "minmax":
        lo, hi = float(valid.min()), float(valid.max())
    else:
        lo, hi = 0.0, 255.0
    del valid
    if hi > lo:
        values -= lo
        values *= 255.0
        values /= hi - lo  # (v - lo) * 255 / (hi - lo), in place
        np.clip(np.rint(values, out=values), 0, 255, out=values)
        values[invalid] = 0
        out = values.astype(np.uint8)
    else:  # a single value: it and what lies below go to the low end, anything above to the high end
        out = np.where(~invalid & (values > lo), 255, 0).astype(np.uint8)
    return out, (lo, hi)


def _extent(transform, width: int, height: int) -> tuple[float, float, float, float]:
    xs, ys = zip(*(transform @ (c, r) for c in (0, width) for r in (0, height)), strict=True)
    return float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys))


@wrap_gdal_errors
def raster_preview(
    path: str,
    *,
    bands: list[int] | None = None,
    stretch: Literal["percentile", "minmax", "none"] = "percentile",
    percentiles: tuple[float, float] = (2, 98),
    colormap: str | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    scale_bar: bool = True,
    dst: str | None = None,
    progress: Progress = no_progress,
) -> PreviewResult:
    """A PNG quicklook of a raster (RGBA; nodata transparent) and a legend that says how to read it.

    Default bands: red/green/blue-interpreted bands, else bands 1, 2, 3 as an RGB composite when there are
    three or more, else band 1 through `colormap` (gray by default) or its own colour table (palette bands).
    Each band is stretched linearly between the `percentiles` of its valid preview pixels ("percentile"),
    their min and max ("minmax"), or taken as is and clipped to 0..255 ("none").
    """
    check_max_size(max_size)
    if stretch not in STRETCHES:
        raise GdalMcpError("invalid-argument", f"stretch must be one of {', '.join(STRETCHES)}, got {stretch!r}")
    q = _check_percentiles(percentiles)
    if colormap is not None:
        colormaps.canonical_name(colormap)
    progress(0.0, "preview: opening")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NotGeoreferencedWarning, pyproj's PROJ-string remarks
        with open_raster(path) as ds:
            indexes, notes = _choose_bands(ds, bands, colormap)
            window = bbox_window(ds, bbox, bbox_crs)
            win_w, win_h = int(window.width), int(window.height)
            read_w, read_h, k = preview_shape(win_w, win_h, max_size)
            if win_w * win_h > SLOW_READ_PIXELS and not ds.overviews(indexes[0]) and ds.driver != "VRT":
                notes.append(
                    "the raster has no overviews, so this preview read most of its blocks; "
                    "building overviews (raster_overviews) makes previews of it fast"
                )
            progress(0.1, f"preview: reading {read_w}x{read_h} pixels of a {win_w}x{win_h} window")
            arr = read_bands(
                ds, indexes, window=window, out_shape=(len(indexes), read_h, read_w), resampling=Resampling.nearest, masked=True
            )
            palette = _palette(ds, indexes[0]) if len(indexes) == 1 and colormap is None else None
            transform = ds.window_transform(window)
            pixel_space = ds.transform.is_identity
            has_gcps = bool(ds.gcps[0])
            crs = crs_label(ds.crs)
            crs_wkt = ds.crs.to_wkt() if ds.crs is not None and not pixel_space else None
            dtypes = [ds.dtypes[b - 1] for b in indexes]
            interp = [ds.colorinterp[b - 1].name for b in indexes]
    progress(0.7, "preview: colouring")

    data = np.ma.getdata(arr)
    invalid = np.ma.getmaskarray(arr).copy()
    if data.dtype.kind == "f":
        invalid |= ~np.isfinite(data)
    del arr

    def band_values(j: int) -> np.ndarray:  # one band at a time in float64 (4096² px: 134 MB each)
        return data[j].astype(np.float64)

    ranges: list[tuple[float, float] | None] = []
    data_ranges: list[tuple[float, float] | None] = []

    def minmax(values: np.ndarray, bad: np.ndarray) -> tuple[float, float] | None:
        valid = values[~bad]
        return (float(valid.min()), float(valid.max())) if valid.size else None

    rgba = np.zeros((read_h, read_w, 4), dtype=np.uint8)
    cmap_name: str | None = None
    if len(indexes) == 3:
        mode = "rgb"
        for j in range(3):
            values = band_values(j)
            data_ranges.append(minmax(values, invalid[j]))  # before _stretch, which overwrites values
            idx, rng = _stretch(values, invalid[j], stretch, q)
            rgba[..., j] = idx
            ranges.append(rng)
        transparent = invalid.all(axis=0)
    elif palette is not None:
        mode = "palette"
        entries = min(max(palette) + 1, 1 << 16)
        table = np.zeros((entries, 4), dtype=np.uint8)
        for code, colour in palette.items():
            if 0 <= code < entries:
                table[code] = (tuple(colour) + (255,) * 4)[:4]
        band = band_values(0)
        inside = ~invalid[0] & (band >= 0) & (band < entries) & (band == np.floor(band))
        codes = np.where(inside, band, 0).astype(np.int64)
        rgba[:] = table[codes]
        transparent = ~inside | (rgba[..., 3] == 0)
        ranges.append(minmax(band, invalid[0]))
        data_ranges.append(ranges[-1])
    else:
        base, reverse = colormaps.canonical_name(colormap or "gray")
        cmap_name = base + ("_r" if reverse else "")
        mode = "gray" if cmap_name == "gray" else "colormap"
        values = band_values(0)
        data_ranges.append(minmax(values, invalid[0]))  # before _stretch, which overwrites values
        idx, rng = _stretch(values, invalid[0], stretch, q)
        del values
        rgba[..., :3] = colormaps.lut(cmap_name)[idx]
        ranges.append(rng)
        transparent = invalid[0]
    rgba[..., 3] = np.where(transparent, 0, rgba[..., 3] if mode == "palette" else 255)
    rgba[transparent] = 0

    rotated = transform.b != 0 or transform.d != 0
    if not pixel_space and not rotated:
        if transform.e > 0:
            rgba = rgba[::-1]
        if transform.a < 0:
            rgba = rgba[:, ::-1]
    if k > 1:
        rgba = np.repeat(np.repeat(rgba, k, axis=0), k, axis=1)
    height, width = rgba.shape[:2]
    extent = _extent(transform, win_w, win_h)
    # One image pixel along the image's rows, in CRS units: win_w / width source columns (flips keep its length).
    across = win_w / width
    bar, bar_text = draw_scale_bar(
        rgba,
        crs_wkt,
        tuple(transform @ (win_w / 2, win_h / 2)),  # type: ignore[arg-type]
        (transform.a * across, transform.d * across),
        draw=scale_bar,
    )

    # -- the legend and warnings
    warn = list(notes)
    for b, rng in zip(indexes, ranges, strict=True):
        if rng is None:
            warn.append(
                f"band {b} has no valid pixel in the preview (all nodata, masked or NaN): it is transparent"
                if mode != "rgb"
                else f"band {b} has no valid pixel in the preview; it is drawn as 0"
            )
        elif rng[0] == rng[1] and mode != "palette":
            warn.append(
                f"band {b}: the stretch range is the single value {fmt(rng[0])} (the band is constant, or "
                "nearly so at these percentiles); try stretch='minmax' or other percentiles"
            )
    if rotated:
        warn.append("the raster's geotransform is rotated or sheared: the preview shows rows and columns as stored, not north up")
    if pixel_space and has_gcps:
        warn.append("the raster is georeferenced by GCPs only: the preview is not rectified (warp it first for a map)")

    if stretch == "percentile":
        how = f"stretched linearly between the {ordinal(q[0])} and {ordinal(q[1])} percentile of its valid preview pixels"
    elif stretch == "minmax":
        how = "stretched linearly between the min and max of its valid preview pixels"
    else:
        how = "taken as is (values clipped to 0..255, no stretch)"

    def span(rng: tuple[float, float] | None) -> str:
        return "no valid pixels" if rng is None else f"{fmt(rng[0])} to {fmt(rng[1])}"

    if mode == "rgb":
        names = ", ".join(
            f"{c} = band {b} ({span(r)})" for c, b, r in zip(("red", "green", "blue"), indexes, ranges, strict=True)
        )
        seen = "; ".join(f"band {b} {span(r)}" for b, r in zip(indexes, data_ranges, strict=True))
        text = (
            f"RGB composite: {names}; each band {how}, values beyond clipped to 0 or 255. Values of the preview's pixels: {seen}."
        )
    elif mode == "palette":
        text = (
            f"Band {indexes[0]} ({dtypes[0]}, values {span(ranges[0])}) drawn with the raster's own colour "
            f"table ({len(palette or {})} entries); pass colormap= to stretch the raw values instead."
        )
    else:
        ends = (
            "no valid pixels"
            if ranges[0] is None
            else f"low end = {fmt(ranges[0][0])}, high end = {fmt(ranges[0][1])}; values beyond get the end colours "
            f"(the preview's pixels range from {span(data_ranges[0])})"
        )
        text = (
            f"Band {indexes[0]} ({dtypes[0]}, colour interpretation {interp[0]}) drawn with colormap "
            f"{colormaps.describe(cmap_name or 'gray')}, {how}: {ends}."
        )
    if pixel_space:
        where = (
            f"Not georeferenced: extent {fmt_extent(extent)} is in pixel coordinates (column, row), "
            "shown as stored (row 0 at the top)."
        )
    else:
        where = (
            f"CRS {crs or 'none (no CRS; coordinates are the geotransform’s)'}; extent {fmt_extent(extent)} "
            f"(minx, miny, maxx, maxy){'' if rotated else ', north up'}."
        )
    if k > 1:
        scale = f"Image {width}x{height} px: the {win_w}x{win_h} pixel window at full resolution, each pixel enlarged to {k}x{k}."
    else:
        scale = (
            f"Image {width}x{height} px from a {win_w}x{win_h} pixel window (1 image px ≈ "
            f"{fmt(round(win_w / read_w, 2))} source px, nearest neighbour)."
        )
    share = float(transparent.mean()) * 100.0
    nodata = (
        f"Transparent (alpha 0) = nodata, masked or NaN pixels ({fmt(round(share, 1))}% of the image)."
        if share > 0
        else "No nodata, masked or NaN pixels in view (the image is fully opaque)."
    )
    legend = " ".join([text, where, scale, nodata, bar_text])
    progress(0.9, "preview: encoding PNG")
    png = encode_png(rgba, text={"Description": legend, "Software": "gdal-mcp"})
    written = write_png(dst, png) if dst is not None else None
    progress(1.0, "preview: done")
    return PreviewResult(
        png=png,
        width=width,
        height=height,
        mode=mode,
        bands_used=indexes,
        value_range=ranges,
        data_range=data_ranges,
        colormap=cmap_name,
        crs=crs,
        extent=extent,
        window=(int(window.col_off), int(window.row_off), win_w, win_h),
        source_pixels_per_pixel=(win_w / read_w) / k,
        scale_bar=bar,
        legend=legend,
        dst=written,
        warnings=warn,
    )
