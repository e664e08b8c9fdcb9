"""Cloud Optimized GeoTIFF validation: the checks of GDAL's validate_cloud_optimized_geotiff.py."""

from __future__ import annotations

import os
import re


def _int_tag(ds, key: str, *, ovr: int | None = None) -> int | None:
    try:
        value = ds.get_tag_item(key, "TIFF", bidx=1, ovr=ovr)
    except Exception:  # noqa: BLE001 - tag absent on this level
        return None
    return int(value) if value not in (None, "") else None


def _expected_main_ifd(path: str) -> int | None:
    """Offset the main IFD must have: right after the header and the optional ghost area."""
    if not os.path.isfile(path):
        return None  # inside an archive: cannot read the raw header cheaply
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if head[:2] not in (b"II", b"MM"):
        return None
    big = head[2:4] in (b"+\x00", b"\x00+")
    pos = 16 if big else 8
    m = re.match(rb"GDAL_STRUCTURAL_METADATA_SIZE=(\d{6}) bytes\n", head[pos:])
    if m:
        pos += len(m.group(0)) + int(m.group(1))
        pos += pos % 2  # IFDs are word-aligned
    return pos


def cog_check(ds) -> tuple[list[str], list[str]]:
    """(errors, warnings) as GDAL's validator reports them; no errors means a valid COG."""
    if ds.driver != "GTiff":
        return [f"driver is {ds.driver}, not GTiff"], []
    errors: list[str] = []
    warnings: list[str] = []
    block_h, block_w = ds.block_shapes[0]
    factors = ds.overviews(1)
    if any(f.lower().endswith(".ovr") for f in ds.files):
        errors.append("overviews are in an external .ovr file; they should be internal")
    if ds.width > 512 or ds.height > 512:
        if block_w == ds.width and block_w > 1024:
            errors.append("larger than 512x512 but not tiled")
        if not factors:
            warnings.append("larger than 512x512 without internal overviews (recommended for a COG)")
    main_ifd = _int_tag(ds, "IFD_OFFSET")
    expected = _expected_main_ifd(ds.name)
    if main_ifd is not None and expected is not None and main_ifd != expected:
        errors.append(f"the main IFD is at offset {main_ifd}, not at the start of the file ({expected})")
    previous = main_ifd
    for i in range(len(factors)):
        ovr_ifd = _int_tag(ds, "IFD_OFFSET", ovr=i)
        if ovr_ifd is not None and previous is not None and ovr_ifd < previous:
            errors.append(f"the IFD of overview {i} comes before the previous IFD")
        previous = ovr_ifd if ovr_ifd is not None else previous
    # Tile data in file order: smallest overview first, full resolution last.
    levels = [(f"overview {i}", _int_tag(ds, "BLOCK_OFFSET_0_0", ovr=i)) for i in reversed(range(len(factors)))]
    levels.append(("full-resolution image", _int_tag(ds, "BLOCK_OFFSET_0_0")))
    prev = None
    for name, off in levels:
        if not off:
            continue
        if prev is not None and off < prev:
            errors.append(f"the first tile of the {name} comes before that of a smaller overview")
        prev = off
    return errors, warnings
