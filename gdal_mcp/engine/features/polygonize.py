"""Raster regions to polygons, like gdal_polygonize: GDAL's polygonizer, streamed into a vector file.

`rasterio.features.shapes` is given the band itself (`rasterio.band`), so GDALPolygonize reads it line by
line and the raster is never held in memory; what GDAL holds is the polygons being built (proportional to
the output, as with gdal_polygonize). The validity mask is a band too:
- by default the band's own mask (nodata, alpha, per-dataset mask), exposed through a VRT whose source is
  `mask,<band>`, so it is read line by line as well;
- with `mask=`, a temporary Byte GTiff written window by window: non-zero pixels of the mask raster (and,
  unless nodata_excluded=False, valid pixels of the band).
The (polygon, value) pairs are written in Arrow batches through stream.write_layer.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings as pywarnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal
from xml.sax.saxutils import escape

import numpy as np
import pyarrow as pa
import rasterio
import rasterio.features
import rasterio.shutil
from rasterio.enums import MaskFlags
from rasterio.errors import NotGeoreferencedWarning

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import output_profile, staging_options
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS, iter_windows
from gdal_mcp.engine.vector.opening import list_layers
from gdal_mcp.engine.vector.stream import summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

BATCH_SIZE = 10_000
# Types GDAL's polygonizer takes through rasterio (int32 buffer for integers, float32 for floats).
SUPPORTED = ("uint8", "int8", "uint16", "int16", "int32", "float32", "float64")
WKB = {b"ARROW:extension:name": b"geoarrow.wkb"}


def _mask_vrt(ds: Any, band: int) -> str:
    """A one-band VRT (XML text) whose pixels are the band's GDAL mask (0 = invalid, 255 = valid)."""
    return (
        f'<VRTDataset rasterXSize="{ds.width}" rasterYSize="{ds.height}">'
        '<VRTRasterBand dataType="Byte" band="1"><SimpleSource>'
        f'<SourceFilename relativeToVRT="0">{escape(ds.name)}</SourceFilename>'
        f"<SourceBand>mask,{band}</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"
    )


def _remove(path: str) -> None:
    """Delete a temporary raster (and its sidecars); a file GDAL cannot open is removed directly."""
    if not os.path.exists(path):
        return
    try:
        rasterio.shutil.delete(path)
    except Exception:  # noqa: BLE001 - an empty or partial file
        os.remove(path)


def _write_mask(ds: Any, band: int, mask_path: str, with_band_mask: bool, path: str) -> None:
    """A Byte GTiff at `path`: 1 where the mask raster is non-zero (and the band valid), else 0."""
    with open_raster(mask_path) as m:
        if m.count == 0:
            raise GdalMcpError("invalid-argument", "the mask raster has no bands")
        if (m.width, m.height) != (ds.width, ds.height):
            raise GdalMcpError(
                "invalid-argument",
                f"the mask raster is {m.width} x {m.height} pixels but the input is "
                f"{ds.width} x {ds.height}; the mask must have the same grid (warp or clip it first)",
            )
        profile = output_profile(
            "GTiff",
            width=ds.width,
            height=ds.height,
            count=1,
            dtype="uint8",
            crs=ds.crs,
            transform=ds.transform,
            nodata=None,
            options=staging_options("GTiff"),
        )
        block = ds.block_shapes[band - 1]
        with rasterio.open(path, "w", **profile) as out:
            for w in iter_windows(ds.width, ds.height, block, DEFAULT_WINDOW_PIXELS):
                values = m.read(1, window=w)
                keep = values != 0
                if np.issubdtype(values.dtype, np.floating):
                    keep &= ~np.isnan(values)
                if with_band_mask:
                    keep &= ds.read_masks(band, window=w) != 0
                out.write(keep.astype("uint8"), 1, window=w)


def _features(
    shapes: Iterator[tuple[dict, Any]], schema: pa.Schema, integer: bool, progress: Progress, counter: list[int]
) -> Iterator[pa.RecordBatch]:
    """(GeoJSON polygon, value) pairs as Arrow batches of (value, WKB geometry)."""
    import shapely
    import shapely.geometry

    geoms: list[Any] = []
    values: list[Any] = []

    def batch() -> pa.RecordBatch:
        wkb = shapely.to_wkb(np.array(geoms, dtype=object), flavor="iso")
        out = pa.record_batch([pa.array(values, type=schema.field(0).type), pa.array(wkb, type=pa.binary())], schema=schema)
        counter[0] += len(values)
        geoms.clear()
        values.clear()
        progress(0.5, f"wrote {counter[0]} polygons")
        return out

    for geom, value in shapes:
        geoms.append(shapely.geometry.shape(geom))
        values.append(int(value) if integer else float(value))
        if len(geoms) >= BATCH_SIZE:
            yield batch()
    if geoms:
        yield batch()


@wrap_gdal_errors
def polygonize(
    src: str,
    dst: str,
    *,
    band: int = 1,
    mask: str | None = None,
    connectivity: Literal[4, 8] = 4,
    field: str = "value",
    nodata_excluded: bool = True,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Polygons of the connected regions of equal value of one band, written to the vector file `dst`."""
    warnings: list[str] = []
    if connectivity not in (4, 8) or isinstance(connectivity, bool):
        raise GdalMcpError("invalid-argument", f"connectivity must be 4 (edges) or 8 (edges and corners), got {connectivity!r}")
    if not isinstance(field, str) or not field.strip():
        raise GdalMcpError("invalid-argument", "field must be a non-empty name for the value attribute")
    driver = vector_driver(dst, format)
    layer = output_layer or Path(dst).stem
    with open_raster(src) as ds, contextlib.ExitStack() as stack:
        select_bands(ds, [band])
        dtype = ds.dtypes[band - 1]
        if dtype not in SUPPORTED:
            raise GdalMcpError(
                "unsupported",
                f"band {band} is {dtype}; GDAL's polygonizer takes 8-, 16- and signed "
                "32-bit integers and floats: convert the raster first (raster_convert output_type)",
            )
        integer = np.issubdtype(np.dtype(dtype), np.integer)
        if dtype == "float64":
            warnings.append("GDAL polygonizes floating-point bands in float32: values are rounded to float32")
        if ds.transform.is_identity and not ds.gcps[0]:
            warnings.append("the raster has no georeferencing: polygons are in pixel coordinates")
        has_mask = ds.mask_flag_enums[band - 1] != [MaskFlags.all_valid]
        mask_band = None
        if mask is not None:
            fd, tmp = tempfile.mkstemp(prefix=Path(dst).name + ".", suffix=".mask.tif", dir=os.path.dirname(os.path.abspath(dst)))
            os.close(fd)
            stack.callback(_remove, tmp)
            progress(0.0, "writing the polygonize mask")
            _write_mask(ds, band, mask, nodata_excluded and has_mask, tmp)
            mask_band = rasterio.band(stack.enter_context(rasterio.open(tmp)), 1)
        elif nodata_excluded and has_mask:
            with pywarnings.catch_warnings():
                pywarnings.simplefilter("ignore", NotGeoreferencedWarning)  # the mask VRT needs no georeferencing
                mask_band = rasterio.band(stack.enter_context(rasterio.open(_mask_vrt(ds, band))), 1)
        progress(0.05, f"polygonizing band {band} ({connectivity}-connected)")
        schema = pa.schema(
            [pa.field(field, pa.int64() if integer else pa.float64()), pa.field("geometry", pa.binary(), metadata=WKB)]
        )
        shapes = rasterio.features.shapes(
            rasterio.band(ds, band), mask=mask_band, connectivity=connectivity, transform=ds.transform
        )
        counter = [0]
        failure: list[BaseException] = []

        def guarded() -> Iterator[pa.RecordBatch]:
            # An error raised inside the batches would reach us as GDAL's "error while accessing batch".
            try:
                yield from _features(shapes, schema, integer, progress, counter)
            except BaseException as e:
                failure.append(e)
                raise

        crs = ds.crs.to_wkt() if ds.crs and ds.crs.to_wkt() else None
        try:
            write_layer(dst, schema, guarded(), driver=driver, layer=layer, crs=crs, geometry_type="Polygon")
        except Exception:
            if failure:
                raise failure[0] from None
            raise
    progress(1.0, f"wrote {counter[0]} polygons")
    names = [n for n, _ in list_layers(dst)]
    return summarize_vector(dst, layer if layer in names else names[0]), warnings
