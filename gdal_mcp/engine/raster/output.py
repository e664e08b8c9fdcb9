"""Writing rasters: driver inference, creation options, and the summary every write tool returns."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.drivers import raster_driver_extensions

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import disk_full
from gdal_mcp.engine.raster.info import compression_name, nodata_value
from gdal_mcp.engine.raster.inherit import inherit_options
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import Bounds, RasterSummary

# Drivers GDAL can only write through CreateCopy (no window-by-window writes).
COPY_ONLY = {
    "COG",
    "PNG",
    "JPEG",
    "GIF",
    "WEBP",
    "JP2OpenJPEG",
    "XPM",
    "BMP",
    "AAIGrid",
    "XYZ",
    "SRTMHGT",
    "KMLSUPEROVERLAY",
    "MBTiles",
    "PDF",
    "GRIB",
}


def infer_driver(path: str | os.PathLike[str], fmt: str | None) -> str:
    """The GDAL driver short name: `fmt` when given (case-insensitive), else from the extension."""
    drivers = {d.lower(): d for d in rasterio.drivers.raster_driver_extensions().values()}
    drivers.update({"cog": "COG", "gtiff": "GTiff", "vrt": "VRT", "mem": "MEM"})
    with rasterio.Env() as env:
        available = env.drivers()
    if fmt:
        name = drivers.get(fmt.lower()) or next((d for d in available if d.lower() == fmt.lower()), None)
        if not name:
            raise GdalMcpError(
                "invalid-argument",
                f"unknown raster format {fmt!r}; use a GDAL driver short name such as GTiff, COG, PNG, JPEG, netCDF, GPKG, VRT",
            )
        return name
    ext = Path(path).name.lower().split(".", 1)[-1] if "." in Path(path).name else ""
    for candidate in (ext, ext.rsplit(".", 1)[-1]):
        if candidate in raster_driver_extensions():
            return raster_driver_extensions()[candidate]
    raise GdalMcpError(
        "invalid-argument",
        f"cannot tell the format from '{Path(path).name}'; pass format= "
        "(e.g. GTiff, COG, PNG) or use a known extension (.tif, .png, .jpg, .nc, .gpkg, .vrt)",
    )


def pixel_driver(path: str | os.PathLike[str], fmt: str | None, what: str) -> str:
    """The driver of an output whose pixels a job computes: infer_driver, refusing VRT and MEM (nothing to
    reference, nothing left on disk)."""
    driver = infer_driver(path, fmt)
    if driver in ("VRT", "MEM"):
        raise GdalMcpError("unsupported", f"{what} cannot write {driver}; write GTiff or COG instead")
    return driver


# The creation options of the rasters this process wrote and has not yet summarized, by path: `summarize` lists them.
_WRITTEN: dict[str, dict[str, str]] = {}


def record_options(path: str | os.PathLike[str], options: dict[str, str]) -> None:
    """Remember the creation options `path` was written with, for `summarize` (writers that call GDAL themselves)."""
    _WRITTEN[os.path.abspath(path)] = dict(options)


def create_copy(ds: Any, dst: str, driver: str, options: dict[str, str]) -> None:
    """GDAL CreateCopy of the open dataset `ds` to `dst` (as gdal_translate), keeping its compression unless `options`
    name one (inherit.py); the options used are recorded for `summarize`."""
    options = inherit_options(driver, options, ds, dtype=ds.dtypes[0], count=ds.count)
    rasterio.shutil.copy(ds, dst, driver=driver, **options)
    record_options(dst, options)


def summarize(path: str | os.PathLike[str]) -> RasterSummary:
    """Describe a raster just written (size counts its own files: .ovr, .aux.xml, not VRT sources), with the creation
    options it was written with when one of this module's writers wrote it."""
    name = Path(path).name
    options = _WRITTEN.pop(os.path.abspath(path), {})
    with rasterio.open(path) as ds:
        size = sum(os.path.getsize(f) for f in ds.files if os.path.isfile(f) and Path(f).name.startswith(name))
        return RasterSummary(
            driver=ds.driver,
            width=ds.width,
            height=ds.height,
            count=ds.count,
            dtype=ds.dtypes[0] if ds.count else "none",
            crs=crs_label(ds.crs),
            bounds=Bounds(left=ds.bounds.left, bottom=ds.bounds.bottom, right=ds.bounds.right, top=ds.bounds.top),
            resolution=(abs(ds.transform.a), abs(ds.transform.e)),
            nodata=nodata_value(ds.nodata),
            compression=compression_name(ds),
            creation_options=options,
            file_size=size,
        )


GDAL_TYPES = {
    "byte": "uint8",
    "int8": "int8",
    "uint16": "uint16",
    "int16": "int16",
    "uint32": "uint32",
    "int32": "int32",
    "uint64": "uint64",
    "int64": "int64",
    "float32": "float32",
    "float64": "float64",
    "uint8": "uint8",
}

#: numpy dtype name -> GDAL's type name (what `--output-data-type`, VRT dataType … take)
GDAL_TYPE_NAMES = {
    "uint8": "Byte",
    "int8": "Int8",
    "uint16": "UInt16",
    "int16": "Int16",
    "uint32": "UInt32",
    "int32": "Int32",
    "uint64": "UInt64",
    "int64": "Int64",
    "float32": "Float32",
    "float64": "Float64",
}


def parse_dtype(name: str | None) -> str | None:
    """numpy dtype name for a GDAL (Byte, Float32) or numpy (uint8, float32) type name."""
    if name is None:
        return None
    dtype = GDAL_TYPES.get(name.strip().lower())
    if dtype is None:
        raise GdalMcpError(
            "invalid-argument",
            f"output_type {name!r} is not supported; use one of Byte, Int8, UInt16, "
            "Int16, UInt32, Int32, UInt64, Int64, Float32, Float64",
        )
    return dtype


def fits(value: float, dtype: str) -> bool:
    """Whether a nodata value is representable in dtype."""
    import math

    import numpy as np

    if np.issubdtype(np.dtype(dtype), np.floating):
        return math.isnan(value) or math.isinf(value) or abs(value) <= float(np.finfo(np.dtype(dtype)).max)
    if not math.isfinite(value):
        return False
    info = np.iinfo(np.dtype(dtype))
    return info.min <= value <= info.max and float(value).is_integer()


# Candidate output types for integral values, smallest first.
INTEGER_TYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "int64", "uint64")


def smallest_dtype(values: list[float]) -> str:
    """The smallest type holding every value exactly: integers first, then float32, else float64."""
    finite = [v for v in values if not math.isnan(v)]
    if len(finite) == len(values) and all(math.isfinite(v) and float(v).is_integer() for v in values):
        for name in INTEGER_TYPES:
            info = np.iinfo(name)
            if all(info.min <= v <= info.max for v in values):
                return name
    if all(math.isnan(v) or float(np.float32(v)) == v for v in values):
        return "float32"
    return "float64"


#: the integer types whose nodata rasterio cannot declare (it goes through a double, and GDAL reads the double's text
#: as an integer: -9.223372036854776e+18 is declared -9)
WIDE_INTEGERS = ("int64", "uint64")


def declare_wide_nodata(path: str, dtype: str, nodata: float | int | None) -> None:
    """Declare a 64-bit integer output's nodata exactly, with GDAL's Int64/UInt64 setters, once its writer closed
    it: rasterio 1.5 declares -2^63 as -9 and 2^64 - 2048 as 1, and data pixels of -9 or 1 would then read as
    missing. Other types: nothing to do. `nodata` must be exact (a float holding an integer of the type)."""
    if nodata is None or dtype not in WIDE_INTEGERS or math.isnan(float(nodata)):
        return
    from gdal_mcp.engine import gdal_c

    value = int(nodata)
    name = "GDALSetRasterNoDataValueAsInt64" if dtype == "int64" else "GDALSetRasterNoDataValueAsUInt64"
    lib = gdal_c.require(name)
    handle = gdal_c.open_dataset(lib, path, update=True)
    try:
        for band in range(1, lib.GDALGetRasterCount(handle) + 1):
            if getattr(lib, name)(lib.GDALGetRasterBand(handle, band), value) != 0:
                raise GdalMcpError("gdal-error", f"cannot declare nodata {value} on {path}: {gdal_c.last_error(lib)}")
    finally:
        lib.GDALClose(handle)


def check_nodata(value: float, dtype: str) -> float:
    """A nodata value for `dtype`, or invalid-argument when the type cannot hold it."""
    if not fits(float(value), dtype):
        raise GdalMcpError(
            "invalid-argument",
            f"nodata {value} cannot be stored in {dtype}; choose a value the type "
            "can hold (e.g. 0 or 255 for Byte, -9999 for Int16/Float32) or another data type",
        )
    return float(value)


def cast(values: Any, dtype: str) -> Any:
    """Convert pixel values as GDAL does: round to nearest (halves away from zero) and clamp to the type's range for
    integers."""
    import numpy as np

    target = np.dtype(dtype)
    if values.dtype == target:
        return values
    if np.issubdtype(target, np.integer):
        info = np.iinfo(target)
        v = values.astype("float64", copy=False)
        if not np.issubdtype(values.dtype, np.integer):
            # as GDAL: x + 0.5 (or - 0.5) truncated, so halves go away from zero (254.5 -> 255, -2.5 -> -3) where
            # numpy's round goes to even (254.5 -> 254); checked against GDAL's RasterIO in test_margins.py
            v = np.where(np.isnan(v), 0.0, v)
            v = np.trunc(v + np.copysign(0.5, v))
        return np.clip(v, info.min, info.max).astype(target)
    return values.astype(target)


def writable_driver(driver: str) -> bool:
    """Whether this driver can be written window by window (Create), not only by CreateCopy.

    rasterio refuses some Create-capable drivers in "w" mode (netCDF): those go through CreateCopy too.
    """
    from rasterio.drivers import is_blacklisted
    from rasterio.io import driver_can_create

    if driver in COPY_ONLY or is_blacklisted(driver, "w"):
        return False
    with rasterio.Env():  # driver_can_create needs the drivers registered
        return bool(driver_can_create(driver))


def output_profile(
    driver: str,
    *,
    width: int,
    height: int,
    count: int,
    dtype: str,
    crs: Any,
    transform: Any,
    nodata: float | None,
    options: dict[str, str],
) -> dict[str, Any]:
    """A rasterio write profile; GTiffs get BIGTIFF=IF_SAFER so large outputs never fail at 4 GB."""
    profile: dict[str, Any] = {
        "driver": driver,
        "width": width,
        "height": height,
        "count": count,
        "dtype": dtype,
        "crs": crs,
        "transform": transform,
    }
    if nodata is not None:
        profile["nodata"] = nodata
    if driver == "GTiff":
        profile.setdefault("BIGTIFF", "IF_SAFER")
    profile.update(options)
    return profile


def writes_in_strips(driver: str, options: dict[str, str]) -> bool:
    """Whether write_tiles writes `dst` in scanline strips: GDAL's default GTiff layout (no TILED=YES) and the
    raw formats. CreateCopy-only drivers are staged as a tiled GTiff."""
    if not writable_driver(driver):
        return False
    if driver == "GTiff":
        return str(options.get("TILED", "NO")).upper() not in ("YES", "TRUE", "ON", "1")
    return True


def output_tiles(
    driver: str, options: dict[str, str], width: int, height: int, *, bytes_per_pixel: int, halo: int = 0
) -> list[Any]:
    """The tile plan of an output write_tiles writes: square tiles, or whole-row strips when the output is
    written in strips (each strip then written once, not once per tile beside it)."""
    from gdal_mcp.engine import tiles

    return tiles.plan(width, height, bytes_per_pixel=bytes_per_pixel, halo=halo, full_width=writes_in_strips(driver, options))


def staging_options(driver: str) -> dict[str, str]:
    """Options of the intermediate GTiff written before a CreateCopy-only driver (COG, PNG …)."""
    return {
        "TILED": "YES",
        "BLOCKXSIZE": "512",
        "BLOCKYSIZE": "512",
        "COMPRESS": "ZSTD",
        "ZSTD_LEVEL": "1",
        "BIGTIFF": "IF_SAFER",
    }


def bounded_threads(options: dict[str, str], threads: int) -> dict[str, str]:
    """Let compression use up to `threads` threads; ALL_CPUS is capped to it (--workers)."""
    out = dict(options)
    value = out.get("NUM_THREADS")
    if value is None or value.upper() == "ALL_CPUS":
        out["NUM_THREADS"] = str(max(1, threads))
    return out


def copy_metadata(
    ds: Any, out: Any, indexes: list[int] | None = None, *, dtype_changed: bool = False, rescaled: bool | None = None
) -> None:
    """Carry over what gdal_translate keeps: colour interpretation, descriptions, units, scale/offset (unless the
    values were rescaled; default: when the type changed), tags, palette (unless the type changed). Never
    STATISTICS_*: they would be stale."""
    rescaled = dtype_changed if rescaled is None else rescaled
    indexes = indexes or list(range(1, ds.count + 1))
    try:
        out.colorinterp = [ds.colorinterp[b - 1] for b in indexes]
    except Exception:  # noqa: BLE001 - some drivers/band counts refuse a given interpretation
        pass
    out.update_tags(**ds.tags())
    for j, b in enumerate(indexes, start=1):
        if ds.descriptions[b - 1]:
            out.set_band_description(j, ds.descriptions[b - 1])
        if ds.units[b - 1]:
            out.set_band_unit(j, ds.units[b - 1])
        tags = {k: v for k, v in ds.tags(b).items() if not k.startswith("STATISTICS_")}
        if tags:
            out.update_tags(j, **tags)
        if not dtype_changed:
            try:
                out.write_colormap(j, ds.colormap(b))
            except ValueError:
                pass  # no colour table
    if not rescaled:
        out.scales = [ds.scales[b - 1] for b in indexes]
        out.offsets = [ds.offsets[b - 1] for b in indexes]


def _delete(path: str) -> None:
    """Remove a raster this job wrote (a partial file GDAL cannot open is removed directly)."""
    if not os.path.exists(path):
        return
    try:
        rasterio.shutil.delete(path)
    except Exception:  # noqa: BLE001
        os.remove(path)


def close_checked(dataset: Any) -> None:
    """Close a dataset being written, raising GDAL's error when writing its last cached blocks fails: rasterio's
    close ignores it, so a disk that fills up then would leave an incomplete file and no error."""
    try:
        from rasterio._err import _ERROR_STACK, stack_errors  # no public way in rasterio 1.4
    except ImportError:  # pragma: no cover - another rasterio: close as it does
        dataset.close()
        return
    with stack_errors():
        dataset.close()
        errors = list(_ERROR_STACK.get())
    if errors:
        raise errors[0]  # the cause ("Write error"); what follows are its consequences


@dataclass(frozen=True)
class _Target:
    profile: dict[str, Any]
    path: str  # where the pixels are written: `dst`, or the staged GTiff beside it
    staged: bool
    options: dict[str, str]  # the creation options of `dst` (the caller's plus what it keeps of the source)

    @property
    def share(self) -> float:
        """The part of the progress the pixels take (a staged output's CreateCopy takes the rest)."""
        return 0.8 if self.staged else 1.0


@contextmanager
def _output(
    dst: str,
    driver: str,
    options: dict[str, str],
    *,
    width: int,
    height: int,
    count: int,
    dtype: str,
    crs: Any,
    transform: Any,
    nodata: float | None,
    progress: Any,
    source: Any = None,
) -> Iterator[_Target]:
    """Where a writer puts the pixels: `dst` itself, or, for drivers that can only CreateCopy (COG, PNG …), a tiled
    GTiff staged beside it and copied to `dst` when the block ends. A failure leaves no partial `dst` or staging file;
    a full disk becomes resource-limit naming the cause. `source` (an open dataset or a path): the output keeps its
    compression unless `options` name one (inherit.py); the options used are recorded for `summarize`."""
    options = inherit_options(driver, options, source, dtype=dtype, count=count)
    staged = not writable_driver(driver)
    target = _Target(
        output_profile(
            "GTiff" if staged else driver,
            width=width,
            height=height,
            count=count,
            dtype=dtype,
            crs=crs,
            transform=transform,
            nodata=nodata,
            options=staging_options(driver) if staged else options,
        ),
        str(Path(dst).with_name(Path(dst).name + ".staging.tif")) if staged else dst,
        staged,
        options,
    )
    existed = os.path.exists(dst)
    try:
        yield target
        declare_wide_nodata(target.path, dtype, nodata)
        if staged:
            progress(target.share, f"writing {driver} with GDAL CreateCopy")
            rasterio.shutil.copy(target.path, dst, driver=driver, **options)
        record_options(dst, options if staged else {k: str(v) for k, v in target.profile.items() if k.isupper()})
    except BaseException as exc:
        full = disk_full(exc, dst)  # before the partial file goes: removing it frees the disk again
        if not existed:
            _delete(dst)
        if full is not None:
            raise full from exc
        raise
    finally:
        if staged:
            _delete(target.path)


def write_windows(
    dst: str,
    driver: str,
    options: dict[str, str],
    *,
    width: int,
    height: int,
    count: int,
    dtype: str,
    crs: Any,
    transform: Any,
    nodata: float | None,
    compute: Any,
    progress: Any,
    what: str,
    window_pixels: int,
    block: tuple[int, int] = (256, 256),
    prepare: Any = None,
    source: Any = None,
) -> None:
    """The one window-by-window raster writer: `compute(window)` returns (h, w) or (count, h, w) pixels.

    Drivers that can only CreateCopy (COG, PNG …) get a tiled GTiff staged beside `dst`, then copied.
    `prepare(dataset)` may set metadata (colour interpretation, descriptions) before pixels are written.
    `source` (the input, open or a path): the output keeps its compression unless `options` name one.
    A failed write leaves no partial `dst` or staging file behind.
    """
    from gdal_mcp.engine.raster.windows import iter_windows

    wins = list(iter_windows(width, height, block, max(1, window_pixels // max(1, count))))
    with _output(
        dst,
        driver,
        options,
        width=width,
        height=height,
        count=count,
        dtype=dtype,
        crs=crs,
        transform=transform,
        nodata=nodata,
        progress=progress,
        source=source,
    ) as target:
        with rasterio.open(target.path, "w", **target.profile) as out:
            if prepare is not None:
                prepare(out)
            for i, w in enumerate(wins, start=1):
                data = compute(w)
                if data.ndim == 2:
                    out.write(data, 1, window=w)
                else:
                    out.write(data, window=w)
                progress(target.share * i / len(wins), f"{what} window {i}/{len(wins)}")
            close_checked(out)
    if target.staged:
        progress(1.0, f"wrote {driver}")


def write_tiles(
    dst: str,
    driver: str,
    options: dict[str, str],
    *,
    width: int,
    height: int,
    count: int,
    dtype: str,
    crs: Any,
    transform: Any,
    nodata: float | None,
    fn: Any,
    specs: list[Any],
    windows: list[tuple[int, int, int, int]],
    progress: Any,
    what: str,
    prepare: Any = None,
    pixels: Any = None,
    start: str | None = None,
    source: Any = None,
    concurrent: int = 1,
) -> None:
    """The one tile assembler: `fn(specs[i])` (a tile function run by the executor through `tiles.map_tiles`)
    returns the (count, h, w) pixels of `windows[i]` (col_off, row_off, width, height), written there as each
    tile arrives, in any order. Progress after every tile (on a cluster that is where a cancel arrives).

    CreateCopy-only drivers (COG, PNG …) get a tiled GTiff staged beside `dst`, then copied (overviews and all).
    `prepare(dataset)` may set metadata before pixels are written; `start` is the first progress message (what the
    job is about to do). `source` (the input, open or a path): the output keeps its compression unless `options` name
    one. `concurrent`: how many tiles the local executor runs at once (tiles.map_tiles' local_threads; each holds its
    pixels until written), each thread through its own run of neighbouring tiles (contiguous: the tiles are written
    in any order). A failure leaves no partial `dst` or staging file.
    """
    from rasterio.windows import Window

    from gdal_mcp.engine import tiles
    from gdal_mcp.engine.raster import rawtiff

    total = len(specs)
    with _output(
        dst,
        driver,
        options,
        width=width,
        height=height,
        count=count,
        dtype=dtype,
        crs=crs,
        transform=transform,
        nodata=nodata,
        progress=progress,
        source=source,
    ) as target:
        raw = None
        # (tiles write a raw GTiff where they run: only where they all see the output's directory)
        if not target.staged and rawtiff.eligible(driver, target.options) and tiles.share_files():
            raw = rawtiff.create(target.path, target.profile, prepare)
            if raw is not None and not all(raw.fits(w) for w in windows):
                os.remove(target.path)
                raw = None
        if raw is not None:
            _write_raw(
                raw,
                fn,
                specs,
                windows,
                target=target,
                progress=progress,
                what=what,
                start=start or f"{what} 0/{total} tiles",
                pixels=pixels,
                concurrent=concurrent,
            )
            progress(1.0, f"wrote {driver}")
            return
        with rasterio.open(target.path, "w", **target.profile) as out:
            if prepare is not None:
                prepare(out)
            progress(0.0, start or f"{what} 0/{total} tiles")
            writer = _TileWriter(out)
            try:
                # the block's end stops the tiles not done (an error, a cancel), then the writer finishes
                with tiles.mapped(fn, specs, local_threads=concurrent, contiguous=True) as results:
                    try:
                        for done, (i, data) in enumerate(results, start=1):
                            if pixels is not None:  # a tile function that also returns counters: pixels(i, result)
                                data = pixels(i, data)
                            col, row, w, h = windows[i]
                            writer.write(data if data.ndim == 3 else data[np.newaxis], Window(col, row, w, h))
                            del data
                            progress(target.share * done / total, f"{what} {done}/{total} tiles")
                    except BaseException:
                        writer.dropping = True  # the output is discarded: no more writes while the tiles stop
                        raise
            finally:
                writer.finish()  # before `out` is closed, whatever happened
            close_checked(out)
    progress(1.0, f"wrote {driver}")


def _write_raw(
    raw: Any,
    fn: Any,
    specs: list[Any],
    windows: list[tuple[int, int, int, int]],
    *,
    target: _Target,
    progress: Any,
    what: str,
    start: str,
    pixels: Any = None,
    concurrent: int = 1,
) -> None:
    """write_tiles into an uncompressed GTiff (rawtiff): each tile writes its own pixels where it ran, nothing
    comes back to this process but, for a tile function that also returns counters (`pixels` given), those:
    `pixels(i, (None, *counters))`. Where the executor can reach every process afterwards, tiles write in the
    background and every process is flushed at the end: the bytes written must add up to the bytes the tiles
    produced (a worker that died with writes queued would otherwise leave holes)."""
    from gdal_mcp.engine import tiles
    from gdal_mcp.engine.raster import rawtiff

    tiles.check_tile_function(fn)
    background = tiles.reaches_everywhere()
    wrapped = [
        rawtiff.RawTile(
            fn.__module__, fn.__name__, spec, (win[0], win[1], win[2], win[3]), raw, background, counters=pixels is not None
        )
        for spec, win in zip(specs, windows, strict=True)
    ]
    progress(0.0, start)
    expected = 0
    flushed = False
    try:
        # the block's end stops the tiles not done (an error, a cancel) before the flush below
        with tiles.mapped(rawtiff.write_tile, wrapped, local_threads=concurrent, contiguous=True) as results:
            for done, (i, result) in enumerate(results, start=1):
                if pixels is not None:
                    result, rest = result
                    pixels(i, rest)
                expected += result
                progress(target.share * done / len(specs), f"{what} {done}/{len(specs)} tiles")
        if background:
            reports = tiles.everywhere(rawtiff.flush, raw.key)
            flushed = True
            for _, code, message in reports:
                if message is not None:
                    raise OSError(code, message) if code else GdalMcpError("internal-error", message)
            if sum(r[0] for r in reports) != expected:
                raise GdalMcpError(
                    "internal-error",
                    f"{expected - sum(r[0] for r in reports)} bytes of tiles "
                    "were not written (a worker stopped before writing them); run the job again",
                )
    finally:
        if background and not flushed:
            try:
                tiles.everywhere(rawtiff.flush, raw.key)  # the writes under way end before the file goes
            except Exception:  # noqa: BLE001 - already failing
                pass
    rawtiff.finish(target.path, target.profile.get("nodata"))


class _TileWriter:
    """Writes tiles into `out` on a thread of its own, so the next tile is computed (GDAL releases the GIL) while
    this one is written. One tile waits at most: memory stays bounded; a write error surfaces at the next tile."""

    def __init__(self, out: Any) -> None:
        import queue
        import threading

        self.out = out
        self.queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue(maxsize=1)
        self.failure: list[BaseException] = []
        #: the output is being discarded (an error, a cancel): tiles not yet written are not (a tile write may compress
        #: and flush blocks for a second: measured 1.1 s after a cancel of a DEFLATE reproject, the job's last CPU)
        self.dropping = False
        self.thread = threading.Thread(target=self._run, name="tile-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            if not self.failure and not self.dropping:
                try:
                    self.out.write(item[0], window=item[1])
                except BaseException as exc:  # noqa: BLE001 - raised in the job's thread
                    self.failure.append(exc)
            del item

    def write(self, data: Any, window: Any) -> None:
        if self.failure:
            raise self.failure[0]
        self.queue.put((data, window))

    def finish(self) -> None:
        """Wait for the tiles handed over to be written (unless `dropping`); raise the first write error."""
        self.queue.put(None)
        self.thread.join()
        if self.failure:
            raise self.failure[0]
