"""Band math, like gdal_calc: an expression over named input bands, evaluated window by window.

The expression language (what an expression may contain, how it is checked and evaluated, the reductions of a
stack) is engine/raster/expression.py; this module reads the inputs, evaluates the compiled expressions over
them and writes the output.

Semantics: inputs are read as float64 (so `B - A` on Byte bands does not wrap); a pixel that is masked in
any input the expression uses (nodata, or GDAL's mask band) is nodata in the output; so is a pixel whose
result is NaN or ±inf (division by zero, log of 0 …), with a warning saying how many.

Several expressions give a multi-band output, one band per expression (its description is the expression).

Stack mode (composites of many scenes): `inputs` is a list of rasters on one grid instead of a dict of names.
The expression then sees one name, `S`, the stack of all inputs, which it reduces per pixel (median(S) …). A
pixel that is masked or NaN in an input is left out of that pixel's reduction; every reduction but count(S) is
nodata where no input is valid. The stack is streamed window by window; the window shrinks with the number of
inputs so at most STACK_VALUES stacked values are in memory.

The output grid is split into tiles (engine/tiles.py); `calc_tile` computes one tile, window by window,
wherever the executor runs it, and returns its pixels with its warning counters, which the job adds up (integers:
exact in any order). Every output pixel depends only on the input pixels at the same place, so the tiling never
changes a pixel.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import astuple, dataclass
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine import tiles
from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.drivers import BAND_SUFFIX
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.expression import (
    STACK,
    Compiled,
    Env,
    as_number,
    check_name,
    compile_expression,
    reduce_stack,
)
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    check_nodata,
    fits,
    output_tiles,
    parse_dtype,
    pixel_driver,
    summarize,
    write_tiles,
)
from gdal_mcp.engine.raster.region import bbox_window
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

# Output pixels per window; an expression holds a few float64 temporaries of this size per node level.
WINDOW_PIXELS = 1024 * 1024
DEFAULT_NODATA = -9999.0
# Relative tolerance when comparing the inputs' geotransforms.
GRID_RTOL = 1e-9
MAX_EXPRESSIONS = 100
# Stack mode: the bound on inputs, and on what one window holds in memory.
MAX_STACK_INPUTS = 1000
# Stacked values in one window: 8 Mi float64 = 64 MiB, plus a 8 MiB validity mask (median sorts in place).
STACK_VALUES = 8 * 1024 * 1024


# ---------------------------------------------------------------------------------------------- inputs


def split_band(spec: str) -> tuple[str, int]:
    """(dataset, band) of "path" or "path:band". A trailing ":<digits>" is a band only when what precedes it
    opens as a raster, so GDAL names that contain ':' (NETCDF:"f.nc":var, HDF5:"f.h5"://x) stay whole."""
    path, band = _band_suffix(spec)
    return path, band or 1


def _band_suffix(spec: str) -> tuple[str, int | None]:
    """(dataset, band) of "path:band", (spec, None) when it has no band suffix."""
    match = BAND_SUFFIX.match(spec)
    if match:
        try:
            with open_raster(match.group(1)):
                pass
        except GdalMcpError as e:
            if e.code == "out-of-root":
                raise
        else:
            return match.group(1), int(match.group(2))
    return spec, None


def _allow_open_files(count: int) -> None:
    """Raise the soft limit on open files (ulimit -n) when a stack of `count` inputs needs it, or say why not."""
    import resource

    need = count + 256  # the inputs, plus the output, sidecars and what the process already holds
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
        raise GdalMcpError(
            "resource-limit",
            f"{count} inputs need about {need} open files, more than this process "
            f"may open (ulimit -n {hard}); give fewer inputs per call",
        )


def _grid_text(ds: Any) -> str:
    t = ds.transform
    return (
        f"{ds.width}x{ds.height} pixels of {abs(t.a):.6g} x {abs(t.e):.6g}, origin ({t.c:.6f}, {t.f:.6f}), "
        f"CRS {crs_label(ds.crs) or 'none'}"
    )


def _same_grid(a: Any, b: Any) -> bool:
    if (a.width, a.height) != (b.width, b.height):
        return False
    if (a.crs is None or not a.crs.to_wkt()) != (b.crs is None or not b.crs.to_wkt()):
        return False
    if a.crs and a.crs.to_wkt() and a.crs != b.crs:
        return False
    ta, tb = a.transform, b.transform
    pixel = max(abs(ta.a), abs(ta.e), abs(ta.b), abs(ta.d))
    return all(math.isclose(x, y, rel_tol=GRID_RTOL, abs_tol=pixel * 1e-6) for x, y in zip(ta[:6], tb[:6], strict=True))


def _grid_error(first: str, ds_first: Any, name: str, ds: Any) -> GdalMcpError:
    crs = crs_label(ds_first.crs)
    fix = (
        (
            f"align it with raster_reproject input={ds.name} like={ds_first.name} (resampling nearest for classes, "
            "bilinear for continuous values) and use that output instead; tiles that lie side by side are joined with "
            "raster_mosaic, not raster_calc"
        )
        if crs
        else f"give {name} the same size and georeferencing as {first}"
    )
    return GdalMcpError(
        "invalid-argument",
        f"input {name} ({ds.name}) is not on the same grid as {first} ({ds_first.name}): {first} is "
        f"{_grid_text(ds_first)}; {name} is {_grid_text(ds)}. All inputs must share CRS, transform and size: {fix}",
    )


# ---------------------------------------------------------------------------------------------- output


def _output_nodata(dtype: str, nodata: float | None, warnings: list[str]) -> float:
    if nodata is not None:
        return check_nodata(nodata, dtype)
    if fits(DEFAULT_NODATA, dtype):
        return DEFAULT_NODATA
    info = np.iinfo(np.dtype(dtype))
    value = float(info.max if info.min == 0 else info.min)
    warnings.append(f"{dtype} cannot hold -9999: nodata is {value:g}; pass nodata= to choose another")
    return value


@dataclass
class _Counts:
    divided_by_zero: int = 0
    not_finite: int = 0
    clamped: int = 0
    hit_nodata: int = 0
    no_valid_input: int = 0


def _warnings(counts: _Counts, dtype: str, nodata: float, *, inputs: int = 0, band: str = "") -> list[str]:
    out: list[str] = []
    if counts.no_valid_input:
        out.append(
            f"{counts.no_valid_input} pixel(s) have no valid value in any of the {inputs} inputs; they are "
            "nodata in the output (count(S) is 0 there)"
        )
    if counts.divided_by_zero:
        out.append(
            f"{counts.divided_by_zero} pixel(s) divided by zero; they are nodata in the output "
            "(where(B == 0, 0, A / B) gives them a value instead)"
        )
    if counts.not_finite:
        out.append(
            f"{counts.not_finite} pixel(s) evaluated to NaN or infinity (log or sqrt of a negative number or "
            "of 0, overflow …); they are nodata in the output"
        )
    if counts.clamped:
        out.append(
            f"{counts.clamped} pixel value(s) fell outside the range of {dtype} and were clamped; choose a "
            "wider output_type or scale the expression"
        )
    if counts.hit_nodata:
        out.append(
            f"{counts.hit_nodata} valid pixel(s) computed exactly the nodata value {nodata:g} and will read as "
            "nodata; pass another nodata= to keep them"
        )
    return [f"{band}: {w}" for w in out] if band else out


# ---------------------------------------------------------------------------------------------- calc


def _expressions(expression: str | list[str]) -> list[str]:
    """One output band per expression."""
    if isinstance(expression, str):
        return [expression]
    if (
        not isinstance(expression, list | tuple)
        or not expression
        or len(expression) > MAX_EXPRESSIONS
        or not all(isinstance(e, str) for e in expression)
    ):
        raise GdalMcpError(
            "invalid-argument",
            f"expression must be one string, or a list of 1 to {MAX_EXPRESSIONS} "
            'strings that each give an output band, e.g. ["median(S)", "count(S)"]',
        )
    return list(expression)


def _compile_all(expressions: list[str], names: list[str], stacked: bool) -> list[Compiled]:
    compiled: list[Compiled] = []
    for i, text in enumerate(expressions):
        try:
            one = compile_expression(text, set(names), stack=stacked)
            if not one.names and stacked:
                raise GdalMcpError(
                    "invalid-argument",
                    f"the expression uses no reduction of the stack {STACK} of the "
                    f"inputs; write e.g. median({STACK}), mean({STACK}) or count({STACK})",
                )
            if not one.names:
                raise GdalMcpError(
                    "invalid-argument",
                    f"the expression uses none of the inputs ({', '.join(names)}); refer to them by name, e.g. A * 2",
                )
        except GdalMcpError as e:
            if len(expressions) == 1:
                raise
            raise GdalMcpError(e.code, f"expression {i + 1} of {len(expressions)} ({text[:80]!r}): {e.message}") from None
        compiled.append(one)
    return compiled


@dataclass
class _Source:
    label: str
    spec: str
    ds: Any
    band: int
    path: str = ""


def _open_source(stack: contextlib.ExitStack, label: str, spec: str, band: int | None) -> tuple[_Source, bool]:
    """The opened input and whether its band was chosen (a ":n" suffix or band=) rather than defaulted to 1."""
    path, suffix = _band_suffix(spec)
    chosen = suffix or band
    ds = stack.enter_context(open_raster(path))
    if not 1 <= (chosen or 1) <= ds.count:
        raise GdalMcpError(
            "invalid-argument",
            f"input {label}: band {chosen} does not exist; {spec} has {ds.count} "
            'band(s) (write "path:N" or pass band=N for band N)',
        )
    return _Source(label=label, spec=spec, ds=ds, band=chosen or 1, path=path), chosen is not None


@wrap_gdal_errors
def calc(
    inputs: dict[str, str] | list[str],
    expression: str | list[str],
    dst: str,
    *,
    band: int | None = None,
    output_type: str | None = None,
    nodata: float | None = None,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    bbox: list[float] | None = None,
    bbox_crs: str | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Evaluate `expression` over the bands named in `inputs` ({"A": "red.tif", "B": "bands.tif:4"}) into `dst`.

    A list of expressions writes one band each. A list of `inputs` (["a.tif", "b.tif", …]) is a stack S that
    the expression reduces per pixel (median(S), mean(S) …). `band` is the band read from every input that
    has no ":n" suffix (default 1). `bbox` (in `bbox_crs`, default the inputs' CRS) computes only the pixels of
    the inputs' grid that it touches (region.bbox_window, as raster_stats reads a bbox): the output is that window
    of the grid, and only it is read (a remote COG: only its tiles there).
    """
    warnings: list[str] = []
    expressions = _expressions(expression)
    stacked = isinstance(inputs, list | tuple)
    if stacked:
        if not inputs or not all(isinstance(p, str) for p in inputs):
            raise GdalMcpError("invalid-argument", 'inputs must list at least one raster, e.g. ["a.tif", "b.tif"]')
        if len(inputs) > MAX_STACK_INPUTS:
            raise GdalMcpError(
                "invalid-argument",
                f"{len(inputs)} inputs are more than the {MAX_STACK_INPUTS} one "
                "calculation stacks; split them into batches (sum(S) and count(S) of each batch "
                "combine exactly into a mean; a median does not)",
            )
        names: list[str] = []
    else:
        if not isinstance(inputs, dict) or not inputs:
            raise GdalMcpError(
                "invalid-argument",
                'inputs must name at least one raster, e.g. {"A": "red.tif", '
                '"B": "scene.tif:4"}, or list rasters to reduce, e.g. ["a.tif", "b.tif"] with '
                "median(S)",
            )
        names = list(inputs)
        for name in names:
            check_name(name)
    if band is not None and (isinstance(band, bool) or not isinstance(band, int) or band < 1):
        raise GdalMcpError("invalid-argument", f"band must be a band number from 1, not {band!r}")
    compiled = _compile_all(expressions, names, stacked)
    used: list[str] = []
    for one in compiled:
        used.extend(n for n in one.names if n not in used)
    unused = [n for n in names if n not in used]
    if unused:
        warnings.append(f"input(s) {', '.join(unused)} are not used by the expression and were not read")
    dtype = parse_dtype(output_type) or "float32"
    out_nodata = _output_nodata(dtype, nodata, warnings)
    driver = pixel_driver(dst, format, "calc")
    options = normalize_options(creation_options)

    with contextlib.ExitStack() as stack:
        sources: list[_Source] = []
        defaulted = 0
        if stacked:
            assert isinstance(inputs, list | tuple)
            _allow_open_files(len(inputs))
            for i, spec in enumerate(inputs):
                source, chosen = _open_source(stack, f"inputs[{i}]", spec, band)
                defaulted += not chosen and source.ds.count > 1
                sources.append(source)
        else:
            assert isinstance(inputs, dict)
            for name in used:
                source, chosen = _open_source(stack, name, inputs[name], band)
                defaulted += not chosen and source.ds.count > 1
                sources.append(source)
        ref = sources[0].ds
        for source in sources[1:]:
            if not _same_grid(ref, source.ds):
                raise _grid_error(sources[0].label, ref, source.label, source.ds)
        if defaulted:
            cube = any(src.ds.driver in ("netCDF", "Zarr", "HDF5Image") and src.ds.count > 1 for src in sources)
            warnings.append(
                f"{defaulted} of the {len(sources)} inputs have several bands; band 1 of each was read "
                '(pass band=N, or "path:N" per input, to choose another)'
                + ("; a netCDF/HDF5/Zarr variable's bands are its time steps: cube_aggregate reduces over them" if cube else "")
            )
        area = bbox_window(ref, bbox, bbox_crs)
        origin = (int(area.col_off), int(area.row_off))
        width, height = int(area.width), int(area.height)

        # Stack mode: windows of at most STACK_VALUES / inputs pixels (iter_windows may double its target).
        window_pixels = WINDOW_PIXELS
        if stacked:
            window_pixels = min(WINDOW_PIXELS, max(1, STACK_VALUES // (2 * len(sources)))) * len(expressions)
        plan = output_tiles(driver, options, width, height, bytes_per_pixel=len(expressions) * np.dtype(dtype).itemsize)
        specs = [
            CalcTile(
                sources=tuple((s.label, s.path, s.band) for s in sources),
                expressions=tuple(expressions),
                names=tuple(names),
                stacked=stacked,
                dtype=dtype,
                nodata=out_nodata,
                window=t.window,
                window_pixels=window_pixels,
                origin=origin,
            )
            for t in plan
        ]
        counts = [_Counts() for _ in compiled]

        def merge(_: int, result: tuple[np.ndarray, list[tuple[int, ...]]]) -> np.ndarray:
            """A tile's pixels, after adding its counters (integers: exact in any order)."""
            pixels, tile_counts = result
            for total, part in zip(counts, tile_counts, strict=True):
                for name, value in zip(COUNTERS, part, strict=True):
                    setattr(total, name, getattr(total, name) + value)
            return pixels

        def describe(out: Any) -> None:
            for i, text in enumerate(expressions, start=1):
                out.set_band_description(i, text.strip())

        write_tiles(
            dst,
            driver,
            options,
            width=width,
            height=height,
            count=len(expressions),
            dtype=dtype,
            crs=ref.crs,
            transform=ref.window_transform(area),
            nodata=out_nodata,
            fn=calc_tile,
            specs=specs,
            windows=[t.window for t in plan],
            progress=progress,
            what="calc",
            prepare=describe,
            pixels=merge,
            source=ref,
        )
    for i, (text, count) in enumerate(zip(expressions, counts, strict=True), start=1):
        label = f"band {i} ({text.strip()[:60]})" if len(expressions) > 1 else ""
        warnings.extend(_warnings(count, dtype, out_nodata, inputs=len(sources), band=label))
    return summarize(dst), warnings


# ---------------------------------------------------------------------------------------------- tiles

COUNTERS = ("divided_by_zero", "not_finite", "clamped", "hit_nodata", "no_valid_input")


@dataclass(frozen=True)
class CalcTile:
    """One output tile of a calculation: everything a worker needs to compute it (picklable)."""

    #: (label, path, band) of every input read, in the order the job opened them
    sources: tuple[tuple[str, str, int], ...]
    expressions: tuple[str, ...]
    #: the input names of named mode (empty in stack mode)
    names: tuple[str, ...]
    stacked: bool
    dtype: str
    nodata: float
    #: (col_off, row_off, width, height) of the tile in the output grid (the input grid, or the window of it at `origin`)
    window: tuple[int, int, int, int]
    #: output pixels (all bands) per window read inside the tile
    window_pixels: int
    #: (col, row) of the output grid's first pixel in the input grid (a bbox's window)
    origin: tuple[int, int] = (0, 0)


def calc_tile(spec: CalcTile) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The (bands, h, w) output pixels of one tile and, per expression, its counters (COUNTERS order).

    The tile is computed window by window (the window bounds the float64 temporaries and, in stack mode, the
    stacked values), exactly as the whole grid would be: every output pixel depends only on the input pixels
    at the same place."""
    compiled = _compile_all(list(spec.expressions), list(spec.names), spec.stacked)
    reductions = sorted({r for one in compiled for r in one.reductions} | {"count"}) if spec.stacked else []
    col, row, width, height = spec.window
    out = np.empty((len(compiled), height, width), dtype=spec.dtype)
    counts = [_Counts() for _ in compiled]
    with contextlib.ExitStack() as stack:
        if spec.stacked:
            _allow_open_files(len(spec.sources))
        sources = [
            _Source(label=label, spec=path, ds=stack.enter_context(open_raster(path)), band=band, path=path)
            for label, path, band in spec.sources
        ]
        for w in iter_windows(width, height, (256, 256), max(1, spec.window_pixels // len(compiled))):
            tiles.check_stop()
            r0, c0, h, ww = int(w.row_off), int(w.col_off), int(w.height), int(w.width)
            out[:, r0 : r0 + h, c0 : c0 + ww] = _compute(
                sources,
                compiled,
                reductions,
                Window(spec.origin[0] + col + c0, spec.origin[1] + row + r0, ww, h),
                spec.stacked,
                spec.dtype,
                spec.nodata,
                counts,
            )
    return out, [astuple(c) for c in counts]


def _finish(
    result: np.ndarray, masked: np.ndarray, empty: np.ndarray | None, env: Env, count: _Counts, dtype: str, out_nodata: float
) -> np.ndarray:
    """Cast one band's values to the output type; masked, NaN, ±inf and out-of-range become nodata."""
    integer = np.issubdtype(np.dtype(dtype), np.integer)
    bad = ~np.isfinite(result) & ~masked
    if bad.any():
        if empty is not None:
            count.no_valid_input += int((bad & empty).sum())
            bad_left = bad & ~empty
        else:
            bad_left = bad
        by_zero = bad_left & env.divided_by_zero
        count.divided_by_zero += int(by_zero.sum())
        count.not_finite += int((bad_left & ~by_zero).sum())
    invalid = masked | bad
    if integer:
        info = np.iinfo(np.dtype(dtype))
        rounded = np.round(result)
        count.clamped += int(((rounded < info.min) | (rounded > info.max))[~invalid].sum())
        result = np.clip(np.where(invalid, 0, rounded), info.min, info.max)
    out = result.astype(dtype)
    if not integer:
        overflow = ~np.isfinite(out) & ~invalid  # beyond Float32's range
        if overflow.any():
            count.not_finite += int(overflow.sum())
            invalid = invalid | overflow
    count.hit_nodata += int((out[~invalid] == out_nodata).sum())
    out[invalid] = out_nodata
    return out


def _compute(
    sources: list[_Source],
    compiled: list[Compiled],
    reductions: list[str],
    w: Window,
    stacked: bool,
    dtype: str,
    out_nodata: float,
    counts: list[_Counts],
) -> np.ndarray:
    """The (bands, h, w) output pixels of window `w`, adding to `counts`."""
    shape = (int(w.height), int(w.width))
    values: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    reduced: dict[str, np.ndarray] = {}
    empty = None
    if stacked:
        layers = np.empty((len(sources), shape[0] * shape[1]), dtype=np.float64)
        for layer, source in zip(layers, sources, strict=True):
            data = source.ds.read(source.band, window=w, masked=True, out_dtype="float64")
            plane = layer.reshape(shape)
            plane[...] = np.ma.getdata(data)
            plane[np.ma.getmaskarray(data)] = np.nan
        reduced = {k: v.reshape(shape) for k, v in reduce_stack(layers, reductions).items()}
        del layers
        empty = reduced["count"] == 0
    else:
        for source in sources:
            data = source.ds.read(source.band, window=w, masked=True, out_dtype="float64")
            values[source.label] = np.ma.getdata(data)
            masks[source.label] = np.ma.getmaskarray(data)
    bands = []
    for one, count in zip(compiled, counts, strict=True):
        masked = np.zeros(shape, dtype=bool)
        for name in one.names if not stacked else ():
            masked |= masks[name]
        env = Env(values=values, reduced=reduced)
        with np.errstate(all="ignore"):
            result = np.broadcast_to(as_number(one.evaluate(env)), shape).astype(np.float64)
        bands.append(_finish(result, masked, empty, env, count, dtype, out_nodata))
    return np.stack(bands)
