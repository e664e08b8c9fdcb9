"""Reclassify a band: value ranges or exact values to new values, streamed window by window.

Ranges are [min, max): min inclusive, max exclusive, except the last range, which is closed so the
top of the data (e.g. slope 90) is not lost; a null min or max is open-ended. The first matching
range wins. Pixels no rule matches get `default`: "nodata", "keep" (their own value) or a number.
Nodata pixels of the input stay nodata.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rasterio.enums import MaskFlags

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    cast,
    check_nodata,
    fits,
    parse_dtype,
    pixel_driver,
    smallest_dtype,
    summarize,
    write_windows,
)
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

MAX_RULES = 10_000


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GdalMcpError("invalid-argument", f"{what} must be a number, got {value!r}")
    if math.isnan(value):
        raise GdalMcpError("invalid-argument", f"{what} must not be NaN")
    return float(value)


def parse_classes(classes: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
    """[(lo, hi, value)] from [{"min", "max", "value"}]; null bounds are open-ended."""
    if not isinstance(classes, list) or not classes or len(classes) > MAX_RULES:
        raise GdalMcpError(
            "invalid-argument",
            f"classes must be a list of 1 to {MAX_RULES} ranges such as "
            '[{"min": 0, "max": 5, "value": 1}, {"min": 5, "max": 15, "value": 2}]',
        )
    out = []
    for i, c in enumerate(classes):
        if not isinstance(c, dict) or "value" not in c or set(c) - {"min", "max", "value"}:
            raise GdalMcpError("invalid-argument", f"classes[{i}] must have value and optional min/max, got {c!r}")
        lo = -math.inf if c.get("min") is None else _number(c["min"], f"classes[{i}].min")
        hi = math.inf if c.get("max") is None else _number(c["max"], f"classes[{i}].max")
        if lo > hi:
            raise GdalMcpError("invalid-argument", f"classes[{i}]: min {lo} is above max {hi}")
        out.append((lo, hi, _number(c["value"], f"classes[{i}].value")))
    return out


def parse_mapping(mapping: dict[str, Any]) -> dict[float, float]:
    if not isinstance(mapping, dict) or not mapping or len(mapping) > MAX_RULES:
        raise GdalMcpError(
            "invalid-argument", f'mapping must map 1 to {MAX_RULES} values to new values, e.g. {{"11": 1, "12": 1, "21": 2}}'
        )
    out: dict[float, float] = {}
    for k, v in mapping.items():
        try:
            key = float(k)
        except (TypeError, ValueError):
            raise GdalMcpError("invalid-argument", f"mapping key {k!r} is not a number") from None
        out[key] = _number(v, f"mapping[{k!r}]")
    return out


def _choose_nodata(values: list[float], dtype: str) -> float:
    """A nodata value for dtype that no class produces."""
    if np.issubdtype(np.dtype(dtype), np.floating):
        return math.nan
    info = np.iinfo(np.dtype(dtype))
    taken = set(values)
    for candidate in (info.max, info.min, -9999, 0):
        if fits(candidate, dtype) and float(candidate) not in taken:
            return float(candidate)
    raise GdalMcpError("invalid-argument", f"every {dtype} value is used by a class: give output_type with more room")


@wrap_gdal_errors
def reclassify(
    src: str,
    dst: str,
    *,
    classes: list[dict[str, Any]] | None = None,
    mapping: dict[str, Any] | None = None,
    default: str | float = "nodata",
    band: int = 1,
    output_type: str | None = None,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Reclassify `band` of `src` into `dst` (one band)."""
    if (classes is None) == (mapping is None):
        raise GdalMcpError("invalid-argument", "give classes (value ranges) or mapping (exact values), not both")
    ranges = parse_classes(classes) if classes is not None else None
    exact = parse_mapping(mapping) if mapping is not None else None
    if not (default in ("nodata", "keep") or (isinstance(default, int | float) and not isinstance(default, bool))):
        raise GdalMcpError("invalid-argument", f'default must be "nodata", "keep" or a number, got {default!r}')
    warnings: list[str] = []
    driver = pixel_driver(dst, format, "reclassify")
    options = normalize_options(creation_options)

    with open_raster(src) as ds:
        if not 1 <= band <= ds.count:
            raise GdalMcpError("invalid-argument", f"band {band} does not exist: the raster has {ds.count} band(s)")
        in_dtype = ds.dtypes[band - 1]
        in_nodata = ds.nodatavals[band - 1]
        new_values = [r[2] for r in ranges] if ranges is not None else list(exact.values())  # type: ignore[union-attr]
        candidates = list(new_values)
        if isinstance(default, int | float):
            candidates.append(float(default))
        if default == "keep":
            info_values = (
                [float(np.iinfo(in_dtype).min), float(np.iinfo(in_dtype).max)]
                if np.issubdtype(np.dtype(in_dtype), np.integer)
                else [0.5]
            )
            candidates += info_values
        dtype = parse_dtype(output_type) or smallest_dtype(candidates)
        lossy = [
            v
            for v in candidates
            if not fits(v, dtype) or (np.issubdtype(np.dtype(dtype), np.integer) and not float(v).is_integer())
        ]
        if lossy and output_type is not None:
            raise GdalMcpError(
                "invalid-argument",
                f"output_type {output_type} cannot hold the values {lossy[:5]}; choose a larger type or leave output_type unset",
            )
        masked_input = MaskFlags.all_valid not in ds.mask_flag_enums[band - 1]
        needs_nodata = default == "nodata" or masked_input
        out_nodata: float | None = None
        if needs_nodata:
            if in_nodata is not None and fits(in_nodata, dtype) and float(in_nodata) not in new_values:
                out_nodata = float(in_nodata)
            else:
                out_nodata = _choose_nodata(candidates, dtype)
                warnings.append(f"unmatched and nodata pixels are written as nodata {out_nodata:g}, a value no class produces")
            check_nodata(out_nodata, dtype)
        counts = {"matched": 0, "default": 0}

        def compute(w: Any) -> np.ndarray:
            data = ds.read(band, window=w, masked=True)
            values = data.data.astype("float64", copy=False)
            invalid = np.ma.getmaskarray(data) | np.isnan(values)
            out = np.full(values.shape, np.nan)
            done = np.zeros(values.shape, dtype=bool)
            if ranges is not None:
                last = len(ranges) - 1
                for i, (lo, hi, value) in enumerate(ranges):
                    inside = (values >= lo) & ((values <= hi) if i == last else (values < hi)) & ~done & ~invalid
                    out[inside] = value
                    done |= inside
            else:
                keys = np.array(list(exact), dtype="float64")  # type: ignore[arg-type]
                vals = np.array(list(exact.values()), dtype="float64")  # type: ignore[union-attr]
                order = np.argsort(keys)
                keys, vals = keys[order], vals[order]
                pos = np.clip(np.searchsorted(keys, values), 0, len(keys) - 1)
                hit = (keys[pos] == values) & ~invalid
                out[hit] = vals[pos[hit]]
                done = hit
            rest = ~done & ~invalid
            counts["matched"] += int(done.sum())
            counts["default"] += int(rest.sum())
            if default == "keep":
                out[rest] = values[rest]
            elif default != "nodata":
                out[rest] = float(default)
            nodata_here = invalid | (rest if default == "nodata" else np.zeros_like(rest))
            if out_nodata is not None:
                out[nodata_here] = out_nodata
            return cast(out, dtype)

        write_windows(
            dst,
            driver,
            options,
            width=ds.width,
            height=ds.height,
            count=1,
            dtype=dtype,
            crs=ds.crs,
            transform=ds.transform,
            nodata=out_nodata,
            compute=compute,
            progress=progress,
            what="reclassified",
            window_pixels=DEFAULT_WINDOW_PIXELS,
            source=ds,
        )
    if counts["default"]:
        fate = {"nodata": "set to nodata", "keep": "kept"}.get(str(default), f"set to {default}")
        warnings.append(f"{counts['default']} valid pixel(s) matched no class and were {fate} (default={default!r})")
    return summarize(dst), warnings
