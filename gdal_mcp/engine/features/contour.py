"""Contour lines and filled contours of a DEM: GDAL's own contour algorithm, the one gdal_contour runs.

rasterio does not expose GDAL's contour generator, so GDALContourGenerateEx is called through ctypes on
the GDAL library rasterio is linked to (as proximity.py does for GDALComputeProximity): the features are
GDAL's, line for line and vertex for vertex (on the Jacksboro DEM the GDAL bundled here, 3.10, and
Debian's gdal_contour 3.6.2 give identical features). GDAL's conventions, therefore:
- levels are `base + k * interval` (-i, -off) or the fixed `levels` (-fl);
- the grid is the pixel centres, extended by half a pixel to the raster edge with the edge values (GDAL's
  border squares), so lines run to the raster edge and polygons cover the whole raster;
- a pixel value within 1e-6 of a level is nudged up by 1e-6: it counts as above the level;
- a saddle square (two opposite corners above the level, the other two below) is always cut the same way:
  its upper-right and lower-left corners are cut off, whichever diagonal is high and whatever the centre
  value (the textbook rule, contourpy's, looks at the centre value and gives a few percent more lines);
- nodata pixels (the band's, NaN, or `nodata`, like -snodata) are left out: a square with a nodata corner
  is split in four and the lines of its valid quarters run half a pixel towards the nodata pixel;
- lines mode writes one LineString per contour line with fields ID and `attribute` (the level);
  polygons mode (-p) writes one MultiPolygon per band between two levels with fields ID, amin, amax; the
  lowest band's amin is the data minimum and the highest band's amax the data maximum (what GDAL 3.10
  writes; Debian's gdal_contour 3.6.2 writes 0 there, and the next level or the data type's maximum).

Memory: GDAL reads the band two lines at a time and writes each contour line as soon as it is finished,
so it holds only the lines crossing the current row (memory follows the contour density, not the raster
size; measured in BENCHMARKS.md). Polygons are held per band until the end, as gdal_contour does: their
memory grows with the output. GDAL writes into a temporary GeoPackage in the output's folder, which is
then streamed in Arrow batches into the requested format and removed.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import rasterio

from gdal_mcp.engine import gdal_c
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.engine.vector.opening import list_layers
from gdal_mcp.engine.vector.stream import output_layer_name, read_layer, summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

MAX_LEVELS = 100_000
# Features per Arrow batch in the copy: contour lines can hold thousands of vertices each.
BATCH_SIZE = 64
WKB = {b"ARROW:extension:name": b"geoarrow.wkb"}
# OGR's field and geometry type codes (ogr_core.h), and the temporary layer's names.
OFT_INTEGER, OFT_REAL = 0, 2
WKB_LINESTRING, WKB_MULTIPOLYGON = 2, 6
TEMP_LAYER, TEMP_LEVEL = "contour", "level"


# ---------------------------------------------------------------------------------------------- levels


def _check_level_count(data_range: tuple[float, float] | None, interval: float, base: float) -> None:
    """Refuse an interval that gives more than MAX_LEVELS levels over the data range."""
    if data_range is None:
        return
    lo, hi = data_range
    k0, k1 = math.ceil((lo - base) / interval), math.floor((hi - base) / interval)
    if k1 - k0 + 1 > MAX_LEVELS:
        raise GdalMcpError(
            "invalid-argument",
            f"interval {interval:g} gives {k1 - k0 + 1} levels over the data range "
            f"{lo:g}..{hi:g}; use a larger interval (at most {MAX_LEVELS} levels)",
        )


def _check_levels(interval: float | None, levels: list[float] | None) -> list[float] | None:
    if (interval is None) == (levels is None):
        raise GdalMcpError(
            "invalid-argument",
            "give either interval (levels every interval units, like gdal_contour "
            "-i) or levels (fixed levels, like -fl), not both and not neither",
        )
    if interval is not None:
        if not math.isfinite(interval) or interval <= 0:
            raise GdalMcpError("invalid-argument", f"interval must be a positive number (got {interval!r})")
        return None
    assert levels is not None
    if not levels or not all(math.isfinite(v) for v in levels):
        raise GdalMcpError("invalid-argument", "levels must be a non-empty list of finite numbers, e.g. [100, 200, 500]")
    if len(levels) > MAX_LEVELS:
        raise GdalMcpError("invalid-argument", f"at most {MAX_LEVELS} levels")
    return sorted(set(float(v) for v in levels))


def _data_range(ds: Any, band: int, nodata: float | None, progress: Progress, share: float) -> tuple[float, float] | None:
    """Minimum and maximum of the valid pixels (one streamed pass); None when no pixel is valid."""
    lo, hi = math.inf, -math.inf
    windows = list(iter_windows(ds.width, ds.height, ds.block_shapes[band - 1]))
    for i, window in enumerate(windows):
        values = ds.read(band, window=window, masked=False)
        valid = np.ones(values.shape, bool) if not np.issubdtype(values.dtype, np.floating) else ~np.isnan(values)
        if nodata is not None and not math.isnan(nodata):
            valid &= values != nodata
        if valid.any():
            kept = values if valid.all() else values[valid]
            lo, hi = min(lo, float(kept.min())), max(hi, float(kept.max()))
        progress(share * (i + 1) / len(windows), f"data range: read {i + 1}/{len(windows)} windows")
    return (lo, hi) if lo <= hi else None


# ---------------------------------------------------------------------------------------------- GDAL


def _number(value: float) -> str:
    return repr(float(value))


def _generate(
    src: str, band: int, work: str, options: list[str], polygons: bool, progress: Progress, start: float, span: float
) -> None:
    """GDALContourGenerateEx on band `band` of `src`, into a new GeoPackage `work` (layer TEMP_LAYER)."""
    lib = gdal_c.require("GDALContourGenerateEx")
    callback, failure = gdal_c.progress_callback(
        lambda fraction: progress(start + span * fraction, f"contouring: {fraction:.0%} of the rows")
    )

    def last_error() -> str:
        return gdal_c.last_error(lib) or "unknown error"

    fields = [("ID", OFT_INTEGER)] + ([("amin", OFT_REAL), ("amax", OFT_REAL)] if polygons else [(TEMP_LEVEL, OFT_REAL)])
    err = closed = committed = 0
    message = ""
    with rasterio.Env():
        lib.CPLErrorReset()
        source = gdal_c.open_dataset(lib, src, update=False)
        try:
            out = lib.GDALCreate(lib.GDALGetDriverByName(b"GPKG"), os.fsencode(work), 0, 0, 0, 0, None)
            if not out:
                raise GdalMcpError("gdal-error", f"GDAL cannot create the temporary GeoPackage {work}: {last_error()}")
            try:
                layer = lib.GDALDatasetCreateLayer(
                    out,
                    TEMP_LAYER.encode(),
                    None,
                    WKB_MULTIPOLYGON if polygons else WKB_LINESTRING,
                    gdal_c.strings(["SPATIAL_INDEX=NO"]),
                )
                if not layer:
                    raise GdalMcpError("gdal-error", f"GDAL cannot create a layer in {work}: {last_error()}")
                for name, kind in fields:
                    field = lib.OGR_Fld_Create(name.encode(), kind)
                    created = lib.OGR_L_CreateField(layer, field, 1)
                    lib.OGR_Fld_Destroy(field)
                    if created != 0:
                        raise GdalMcpError("gdal-error", f"GDAL cannot create the field {name}: {last_error()}")
                lib.GDALDatasetStartTransaction(out, 0)
                err = lib.GDALContourGenerateEx(
                    lib.GDALGetRasterBand(source, band), layer, gdal_c.strings(options), callback, None
                )
                message = last_error()
                if err == 0:
                    committed = lib.GDALDatasetCommitTransaction(out)
                    message = last_error()
            finally:
                closed = lib.GDALClose(out)
        finally:
            lib.GDALClose(source)
    if failure:
        raise failure[0]
    if err != 0 or committed != 0 or closed not in (0, None):
        raise GdalMcpError("gdal-error", f"GDALContourGenerateEx failed: {message}")


# ---------------------------------------------------------------------------------------------- writing


def _copy(
    work: str | None,
    dst: str,
    *,
    driver: str,
    layer: str,
    crs: str | None,
    polygons: bool,
    attribute: str,
    progress: Progress,
    start: float,
) -> int:
    """Stream GDAL's features from the temporary GeoPackage `work` (None: no feature) into `dst`; their number."""
    names = ["ID", "amin", "amax"] if polygons else ["ID", TEMP_LEVEL]
    out_names = ["ID", "amin", "amax"] if polygons else ["ID", attribute]
    schema = pa.schema(
        [
            pa.field("ID", pa.int32()),
            *[pa.field(n, pa.float64()) for n in out_names[1:]],
            pa.field("geometry", pa.binary(), metadata=WKB),
        ]
    )
    done = [0]
    failure: list[BaseException] = []
    with contextlib.ExitStack() as stack:
        stream = stack.enter_context(read_layer(work, layer=TEMP_LAYER, batch_size=BATCH_SIZE)) if work else None
        geometry = stream.geometry_column if stream else None
        total = stream.total if stream else None

        def batches() -> Iterator[pa.RecordBatch]:
            # An error raised inside the batches would reach us as GDAL's "error while accessing batch".
            try:
                for batch in stream.batches if stream else ():
                    columns = [
                        batch.column(names[0]).cast(pa.int32()),
                        *[batch.column(n).cast(pa.float64()) for n in names[1:]],
                        batch.column(geometry),
                    ]
                    done[0] += batch.num_rows
                    progress(
                        start + (0.99 - start) * min(1.0, done[0] / total) if total else start,
                        f"wrote {done[0]}" + (f"/{total}" if total else "") + " features",
                    )
                    yield pa.record_batch(columns, schema=schema)
            except BaseException as e:
                failure.append(e)
                raise

        try:
            write_layer(
                dst,
                schema,
                batches(),
                driver=driver,
                layer=layer,
                crs=crs,
                geometry_type="MultiPolygon" if polygons else "LineString",
            )
        except Exception:
            if failure:
                raise failure[0] from None
            raise
    return done[0]


@wrap_gdal_errors
def contour(
    src: str,
    dst: str,
    *,
    interval: float | None = None,
    levels: list[float] | None = None,
    base: float = 0.0,
    band: int = 1,
    polygons: bool = False,
    attribute: str = "elev",
    nodata: float | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Contour lines (or polygons between levels) of band `band` of `src`, written to the vector file `dst`."""
    warnings: list[str] = []
    fixed = _check_levels(interval, levels)
    if not math.isfinite(base):
        raise GdalMcpError("invalid-argument", f"base must be a finite number (got {base!r})")
    if not isinstance(attribute, str) or not attribute.strip():
        raise GdalMcpError("invalid-argument", "attribute must be a non-empty field name")
    if not polygons and attribute.strip().lower() in ("id", "geometry"):
        raise GdalMcpError(
            "invalid-argument",
            f"attribute {attribute!r} is taken (the output has the fields ID and geometry); use another name, e.g. elev",
        )
    if interval is None and base != 0:
        warnings.append("base only shifts interval levels; ignored with fixed levels")
    driver = vector_driver(dst, format)
    layer = output_layer_name(dst, output_layer)
    options = ["ID_FIELD=0"] + (["ELEV_FIELD_MIN=1", "ELEV_FIELD_MAX=2", "POLYGONIZE=YES"] if polygons else ["ELEV_FIELD=1"])
    if fixed is not None:
        options.append("FIXED_LEVELS=" + ",".join(_number(v) for v in fixed))
    else:
        assert interval is not None
        options += [f"LEVEL_INTERVAL={_number(interval)}", f"LEVEL_BASE={_number(base)}"]
    with open_raster(src) as ds:
        select_bands(ds, [band])
        if ds.dtypes[band - 1].startswith("complex"):
            raise GdalMcpError("unsupported", "complex bands cannot be contoured; convert the raster first")
        if ds.transform.is_identity and not (ds.crs and ds.crs.to_wkt()):
            warnings.append("the raster has no georeferencing: contours are in pixel coordinates")
        band_nodata = ds.nodatavals[band - 1] if nodata is None else float(nodata)
        if band_nodata is not None and not math.isnan(band_nodata):  # (NaN pixels are always left out)
            options.append(f"NODATA={_number(band_nodata)}")
        crs = ds.crs.to_wkt() if ds.crs and ds.crs.to_wkt() else None
        # The data range, before GDAL starts: the level count is checked on it, and a band without a valid
        # pixel is not handed to GDAL (which refuses it in interval mode: "too many levels").
        data_range = _data_range(ds, band, band_nodata, progress, 0.1)
        if interval is not None:
            _check_level_count(data_range, interval, base)
    with contextlib.ExitStack() as stack:
        work = None
        if data_range is not None:
            folder = tempfile.mkdtemp(prefix=Path(dst).name + ".", suffix=".contour", dir=os.path.dirname(os.path.abspath(dst)))
            stack.callback(shutil.rmtree, folder, ignore_errors=True)
            work = os.path.join(folder, "contour.gpkg")
            _generate(src, band, work, options, polygons, progress, 0.1, 0.75)
        count = _copy(
            work, dst, driver=driver, layer=layer, crs=crs, polygons=polygons, attribute=attribute, progress=progress, start=0.85
        )
    if count == 0 and data_range is None:
        warnings.append(f"no {'polygon' if polygons else 'contour'}: the band has no valid pixel")
    elif count == 0 and data_range is not None:
        warnings.append(
            f"no contour: no level crosses the data range {data_range[0]:g}..{data_range[1]:g} (a pixel "
            "equal to a level counts as above it)"
        )
    progress(1.0, f"wrote {count} {'polygons' if polygons else 'contour lines'}")
    names = [n for n, _ in list_layers(dst)]
    return summarize_vector(dst, layer if layer in names else names[0]), warnings
