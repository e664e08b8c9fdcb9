"""Compare two rasters: GDAL 3.12's `gdal raster compare` for what differs, a streamed pass for where and how much.

GDAL's comparison (binary comparison skipped: two files holding the same data in different encodings are the same
raster) reports CRS, geotransform, size, band count, data types, nodata, descriptions, colour interpretation,
masks, overviews (their pixels too), metadata (default, RPC and geolocation domains) and subdatasets, and per band
how many pixels differ and the largest difference, over raw values. Its lines are classified here (`kind`, `band`);
a CRS line's two full WKTs become the CRSs' short names.

The pixels of the bands are then compared here, window by window (memory flat whatever the size), when both rasters
have the same size and band count: a pixel differs when |input - reference| > tolerance, or when it is valid in one
raster and nodata (or NaN, or masked) in the other; pixels nodata in both are equal. For each band: the count, how
many of those are nodata mismatches, the largest and the mean |difference| over the differing pixels valid in both,
and the box holding them (pixels and the input's CRS). When GDAL found no pixel, nodata or mask difference, nothing
can differ and that pass is skipped (unless a difference raster is written). Optionally the difference raster
input - reference is written (Float32, Float64 for 64-bit or 32-bit integer and Float64 inputs; NaN, declared as
nodata, where either is nodata).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import pixel_driver, write_windows
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import BandDifference, Bounds, CompareDifference, PixelWindow, RasterCompareResult

#: the comparisons GDAL can skip (its --skip-<name> flags)
SKIPPABLE = ("crs", "geotransform", "overview", "metadata", "rpc", "geolocation", "subdataset")
WINDOW_PIXELS = 1024 * 1024

_PIXELS = re.compile(r"^(?:Band )?(\d+): pixels differing: (\d+)$")
_MAX = re.compile(r"^(?:Band )?(\d+): maximum pixel value difference: (.+)$")
_OVERVIEW_PIXELS = re.compile(r"^(overview of band \d+(?: \d+)?): (pixels differing|maximum pixel value difference): (.+)$")
_BAND = re.compile(r"band (\d+)", re.I)


def _kind(line: str) -> str:
    low = line.lower()
    for kind, needles in (
        ("overview", ("overview",)),
        ("mask", ("mask of band", "mask flags")),
        ("crs", (" crs",)),
        ("geotransform", ("geotransform",)),
        ("band_count", ("band(s), but input dataset has",)),
        ("size", ("width is", "height is")),
        ("data_type", ("has data type",)),
        ("nodata", ("nodata value", "no data value")),
        ("description", ("has description",)),
        ("color_interpretation", ("color interpretation",)),
        ("metadata", ("metadata",)),
        ("subdataset", ("subdataset",)),
    ):
        if any(n in low for n in needles):
            return kind
    return "other"


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.inf


def classify(
    lines: list[str], tolerance: float, ref: Any, inp: Any
) -> tuple[list[CompareDifference], dict[int, tuple[int, float]]]:
    """GDAL's report lines as differences, and its per-band (pixels differing, maximum difference) of the main
    bands (compared again here, with the tolerance). Overview pixel differences within the tolerance are dropped."""
    gdal_pixels: dict[int, tuple[int, float]] = {}
    overview: dict[str, dict[str, str]] = {}
    out: list[CompareDifference] = []
    for line in lines:
        if m := _PIXELS.match(line):
            band = int(m.group(1))
            gdal_pixels[band] = (int(m.group(2)), gdal_pixels.get(band, (0, 0.0))[1])
            continue
        if m := _MAX.match(line):
            band = int(m.group(1))
            gdal_pixels[band] = (gdal_pixels.get(band, (0, 0.0))[0], _float(m.group(2)))
            continue
        if m := _OVERVIEW_PIXELS.match(line):
            overview.setdefault(m.group(1), {})[m.group(2)] = m.group(3)
        kind = _kind(line)
        message = line
        if kind == "crs" and "not equivalent" in line:
            a, b = crs_label(inp.crs), crs_label(ref.crs)
            message = f"The CRSs are not equivalent: input {a}, reference {b}" + (
                " (same name, different definitions: crs_info shows each)" if a == b else ""
            )
        band_match = _BAND.search(line)
        out.append(CompareDifference(kind=kind, band=int(band_match.group(1)) if band_match else None, message=message))  # type: ignore[arg-type]
    within = {key for key, v in overview.items() if _float(v.get("maximum pixel value difference", "inf")) <= tolerance}
    out = [d for d in out if not any(d.message.startswith(key + ": ") for key in within)]
    return out, gdal_pixels


class _Band:
    """Running statistics of one band's differences."""

    def __init__(self) -> None:
        self.count = 0
        self.mismatches = 0
        self.max = 0.0
        self.sum = 0.0
        self.valid_diffs = 0
        self.box: list[int] | None = None  # col0, row0, col1, row1 (exclusive)

    def add(self, w: Window, differ: np.ndarray, mismatch: np.ndarray, magnitude: np.ndarray) -> None:
        n = int(differ.sum())
        if not n:
            return
        self.count += n
        self.mismatches += int(mismatch.sum())
        values = magnitude[differ & ~mismatch]
        if values.size:
            self.max = max(self.max, float(values.max()))
            self.sum += float(values.sum())
            self.valid_diffs += int(values.size)
        rows = np.flatnonzero(differ.any(axis=1))
        cols = np.flatnonzero(differ.any(axis=0))
        box = [
            int(w.col_off) + int(cols[0]),
            int(w.row_off) + int(rows[0]),
            int(w.col_off) + int(cols[-1]) + 1,
            int(w.row_off) + int(rows[-1]) + 1,
        ]
        if self.box is None:
            self.box = box
        else:
            self.box = [min(self.box[0], box[0]), min(self.box[1], box[1]), max(self.box[2], box[2]), max(self.box[3], box[3])]

    def result(self, band: int, transform: Any) -> BandDifference:
        window = bounds = None
        if self.box is not None:
            c0, r0, c1, r1 = self.box
            window = PixelWindow(col_off=c0, row_off=r0, width=c1 - c0, height=r1 - r0)
            xs, ys = zip(*(transform @ (c, r) for c, r in ((c0, r0), (c1, r0), (c0, r1), (c1, r1))), strict=True)
            bounds = Bounds(left=min(xs), bottom=min(ys), right=max(xs), top=max(ys))
        return BandDifference(
            band=band,
            differing_pixels=self.count,
            nodata_mismatches=self.mismatches,
            max_abs_difference=self.max if self.valid_diffs else None,
            mean_abs_difference=self.sum / self.valid_diffs if self.valid_diffs else None,
            window=window,
            bounds=bounds,
        )


def _valid(ds: Any, band: int, data: np.ndarray, w: Window) -> np.ndarray:
    valid = ds.read_masks(band, window=w) > 0
    if np.issubdtype(data.dtype, np.floating) or np.issubdtype(data.dtype, np.complexfloating):
        valid &= ~np.isnan(data)
    return valid


def _work_dtype(a: str, b: str) -> Any:
    if a.startswith("complex") or b.startswith("complex"):
        return np.complex128
    return np.float64


def _diff_dtype(a: str, b: str) -> str:
    wide = {"float64", "int32", "uint32", "int64", "uint64"}
    return "float64" if a in wide or b in wide else "float32"


@wrap_gdal_errors
def compare(
    src: str,
    reference: str,
    dst: str | None = None,
    *,
    tolerance: float = 0.0,
    skip: list[str] | None = None,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterCompareResult, list[str]]:
    """Compare the raster `src` (the input) with `reference`; with `dst`, write input - reference there."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not math.isfinite(tolerance) or tolerance < 0:
        raise GdalMcpError("invalid-argument", f"tolerance must be a number >= 0 (got {tolerance!r})")
    skip = list(skip or [])
    bad = [s for s in skip if s not in SKIPPABLE]
    if bad:
        raise GdalMcpError("invalid-argument", f"skip takes {', '.join(SKIPPABLE)} (got {bad})")
    driver = pixel_driver(dst, format, "raster_compare") if dst else None
    options = normalize_options(creation_options)
    warnings: list[str] = []

    with open_raster(src) as inp, open_raster(reference) as ref:
        if inp.count == 0 or ref.count == 0:
            raise GdalMcpError(
                "invalid-argument",
                "a dataset without raster bands cannot be compared; for a container (HDF5, netCDF) give one of its "
                "subdatasets (raster_info lists them)",
            )
        comparable = inp.width == ref.width and inp.height == ref.height and inp.count == ref.count
        if dst and not comparable:
            raise GdalMcpError(
                "invalid-argument",
                f"no difference raster: the input is {inp.width}x{inp.height} with {inp.count} band(s), the reference "
                f"{ref.width}x{ref.height} with {ref.count}; call again without output to see every difference, and "
                "align them first (raster_reproject onto the reference's grid) to compare pixels",
            )
        argv = ["--skip-binary", *[f"--skip-{s}" for s in skip], "--reference", reference, "--input", src]
        with algorithms.algorithm(["raster", "compare"], argv) as alg:
            alg.run(progress, message="gdal raster compare", scale=0.5)
            lines = [line for line in alg.string().splitlines() if line.strip()]
            warnings += alg.warnings
        differences, gdal_pixels = classify(lines, float(tolerance), ref, inp)

        bands: list[BandDifference] = []
        if comparable:
            suspect = bool(gdal_pixels) or any(d.kind in ("nodata", "mask") for d in differences)
            stats = [_Band() for _ in range(inp.count)]
            if suspect or dst:
                bands = _pixels(inp, ref, stats, float(tolerance), dst, driver, options, src, progress)
            else:
                bands = [s.result(b, inp.transform) for b, s in enumerate(stats, start=1)]
            if any(d.kind == "geotransform" for d in differences):
                warnings.append(
                    "the geotransforms differ: pixels were compared position by position (row, col), and bounds use "
                    "the input's geotransform"
                )
        else:
            warnings.append(
                "pixels not compared: the rasters differ in size or band count (see differences); align them first "
                "(raster_reproject onto the reference's grid)"
            )
    pixels_identical = all(b.differing_pixels == 0 for b in bands) if comparable else None
    progress(1.0, "compared")
    return (
        RasterCompareResult(
            input=src,
            reference=reference,
            identical=bool(pixels_identical) and not differences,
            pixels_identical=pixels_identical,
            tolerance=float(tolerance),
            differences=differences,
            bands=bands,
            warnings=warnings,
        ),
        warnings,
    )


def _pixels(
    inp: Any,
    ref: Any,
    stats: list[_Band],
    tolerance: float,
    dst: str | None,
    driver: str | None,
    options: dict[str, str],
    src: str,
    progress: Progress,
) -> list[BandDifference]:
    """The streamed pixel pass: statistics per band, and the difference raster when `dst` is given."""
    count = inp.count
    work = [_work_dtype(inp.dtypes[i], ref.dtypes[i]) for i in range(count)]
    out_dtype = "float64"
    if dst:
        if any(w is np.complex128 for w in work):
            raise GdalMcpError("unsupported", "no difference raster of complex bands; compare without output")
        out_dtype = (
            "float64" if any(_diff_dtype(a, b) == "float64" for a, b in zip(inp.dtypes, ref.dtypes, strict=True)) else "float32"
        )

    def compute(w: Window) -> Any:
        out = np.empty((count, int(w.height), int(w.width)), dtype=out_dtype) if dst else None
        for i in range(count):
            a = inp.read(i + 1, window=w)
            b = ref.read(i + 1, window=w)
            va, vb = _valid(inp, i + 1, a, w), _valid(ref, i + 1, b, w)
            both = va & vb
            with np.errstate(invalid="ignore", over="ignore"):
                d = a.astype(work[i]) - b.astype(work[i])
                magnitude = np.abs(d)
            magnitude = np.where(both, magnitude, 0.0)
            mismatch = va != vb
            stats[i].add(w, (both & (magnitude > tolerance)) | mismatch, mismatch, magnitude)
            if out is not None:
                out[i] = np.where(both, d.real, np.nan)
        return out

    block = inp.block_shapes[0]
    if dst and driver:
        write_windows(
            dst,
            driver,
            options,
            width=inp.width,
            height=inp.height,
            count=count,
            dtype=out_dtype,
            crs=inp.crs,
            transform=inp.transform,
            nodata=math.nan,
            compute=compute,
            progress=lambda f, m="": progress(0.5 + 0.5 * f, m),
            what="difference",
            window_pixels=WINDOW_PIXELS,
            block=block,
            source=src,
        )
    else:
        windows = list(iter_windows(inp.width, inp.height, block, WINDOW_PIXELS))
        for k, w in enumerate(windows, start=1):
            compute(w)
            progress(0.5 + 0.5 * k / len(windows), f"comparing pixels, window {k}/{len(windows)}")
    return [s.result(b, inp.transform) for b, s in enumerate(stats, start=1)]
