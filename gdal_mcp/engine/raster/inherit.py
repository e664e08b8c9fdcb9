"""What a raster output keeps of its source's storage by default: the codec, its predictor and JPEG quality.

gdal_translate and gdalwarp write uncompressed GTiffs unless told otherwise, so a DEFLATE source came out several
times larger. Every writer of engine/raster/output.py passes its source (`source=`), and the output keeps that
source's compression, unless the caller's creation options name a COMPRESS of their own (then nothing of the codec is
inherited: the caller's choice is whole). Only GTiff and COG outputs inherit: other drivers name their codecs
differently (PNG, JPEG, netCDF, GPKG tiles), and their own defaults stay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the COMPRESS values of the GTiff and COG drivers a source's compression is carried into
_TIFF_CODECS = frozenset(
    ("LZW", "DEFLATE", "ZSTD", "LZMA", "PACKBITS", "JPEG", "WEBP", "LERC", "LERC_DEFLATE", "LERC_ZSTD", "JXL")
)
CODECS = {"GTiff": _TIFF_CODECS, "COG": _TIFF_CODECS}
#: codecs that take a PREDICTOR (libtiff's horizontal and floating-point differencing)
PREDICTED = frozenset({"LZW", "DEFLATE", "ZSTD", "LZMA"})
#: the lossless codec an output falls back to when the source's cannot hold the output (JPEG to Float32 …)
FALLBACK = "DEFLATE"


def source_compression(ds: Any) -> tuple[str | None, dict[str, str]]:
    """The codec GDAL reports for an open dataset (upper case; None: uncompressed) and its IMAGE_STRUCTURE metadata."""
    try:
        structure = {str(k).upper(): str(v) for k, v in ds.tags(ns="IMAGE_STRUCTURE").items()}
    except Exception:  # noqa: BLE001 - a driver without that domain
        structure = {}
    codec = structure.get("COMPRESSION")
    if not codec:
        value = getattr(ds, "compression", None)
        codec = str(getattr(value, "name", value)) if value else None
    if not codec or codec.upper() == "NONE":
        return None, structure
    return codec.upper(), structure


def _valid(codec: str, dtype: str, count: int) -> bool:
    """Whether GDAL's GTiff writer can encode `count` bands of `dtype` with `codec`."""
    if codec == "JPEG":
        return dtype == "uint8" and count in (1, 3)
    if codec == "WEBP":
        return dtype == "uint8" and count in (3, 4)
    if codec.startswith("LERC"):
        return dtype not in ("int64", "uint64")
    if codec == "JXL":
        return dtype in ("uint8", "uint16", "float32")
    return True


def inherit_options(driver: str, options: dict[str, str], source: Any, *, dtype: str, count: int) -> dict[str, str]:
    """`options` plus the source's compression where the caller gave no COMPRESS: the same codec, its predictor
    where the output type allows it (PREDICTOR=3 only for Float32/Float64: 2 otherwise), its JPEG quality, and the
    YCbCr photometric of a YCbCr JPEG. A codec the output cannot hold (JPEG or WEBP beyond 8-bit RGB, LERC for 64-bit
    integers) becomes DEFLATE, still lossless and compressed. `source` is an open dataset or a path; None: nothing."""
    out = dict(options)
    if source is None or driver not in CODECS or "COMPRESS" in out:
        return out
    if isinstance(source, str):
        from gdal_mcp.engine.raster.opening import open_raster

        with open_raster(source) as ds:
            codec, structure = source_compression(ds)
    else:
        codec, structure = source_compression(source)
    if codec is None:
        return out
    ycbcr = codec == "YCBCR JPEG"
    if ycbcr:
        codec = "JPEG"
    if codec not in CODECS[driver]:
        return out
    if not _valid(codec, dtype, count):
        out["COMPRESS"] = FALLBACK
        return out
    out["COMPRESS"] = codec
    predictor = structure.get("PREDICTOR")
    if codec in PREDICTED and predictor in ("2", "3") and "PREDICTOR" not in out:
        out["PREDICTOR"] = "3" if predictor == "3" and np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize >= 4 else "2"
    if codec == "JPEG":
        quality = structure.get("JPEG_QUALITY")
        key = "QUALITY" if driver == "COG" else "JPEG_QUALITY"
        if quality and quality.isdigit() and key not in out:
            out[key] = quality
        if ycbcr and driver == "GTiff" and count == 3:
            out.setdefault("PHOTOMETRIC", "YCBCR")
    return out
