"""What gdalwarp leaves unsaid, said by reproject: the nodata of the new margins, and the target CRS's area of use.

A source without nodata warped by gdalwarp gets margins (output pixels no source pixel reaches) of 0, not declared
nodata: they read as data. `margin_nodata` picks a value that marks them instead: NaN for a float output, else a value
of the output type that no input pixel takes (one pass over the input, in tiles run by the executor like the warp's:
`used_values_tile`; the tiles' answers are OR-ed, so every executor picks the same value).

A projection is only accurate over its area of use (a UTM zone's 6° of longitude): `area_of_use_warning` says when the
data reach outside it, by how much, and how to find a CRS made for them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

#: the values of a 32- or 64-bit integer type a margin value is looked for among (from the preferred end)
WIDE_CANDIDATES = 4096
#: degrees the data may reach past an area of use before it is worth a word (float noise of densified bounds)
AREA_TOLERANCE = 1e-6
KM_PER_DEGREE = 111.32


@dataclass(frozen=True)
class UsedValues:
    """One tile of the scan: which candidate values of `dtype` the input's pixels in `window` take once cast to it."""

    src: str
    indexes: tuple[int, ...]
    window: tuple[int, int, int, int]  # (col_off, row_off, width, height) in the input
    dtype: str
    full: bool = False  # always the whole answer (else None when the preferred value does not occur: a quick look)


@functools.lru_cache(maxsize=16)
def candidates(dtype: str) -> np.ndarray:
    """The values of an integer type a margin may take, preferred first: the largest of an unsigned type (255 for
    Byte, the usual convention), the smallest of a signed one (-32768 for Int16, as SRTM). Every value of 8- and
    16-bit types; the WIDE_CANDIDATES at the preferred end of wider ones (for 64-bit types, ones a float holds)."""
    info = np.iinfo(np.dtype(dtype))
    span = (info.max - info.min + 1) if np.dtype(dtype).itemsize <= 2 else WIDE_CANDIDATES
    if np.dtype(dtype).itemsize == 8:
        # values a float holds exactly (every 1024th from -2^63, every 2048th below 2^64): the nodata is passed as a
        # float, and -2^63 + 1 would come back as -2^63, a value the scan may have found
        if info.min < 0:
            out = np.array([info.min + 1024 * i for i in range(span)], dtype=dtype)
        else:
            out = np.array([2**64 - 2048 * (i + 1) for i in range(span)], dtype=dtype)
        out.flags.writeable = False
        return out
    if info.min < 0:
        out = np.arange(info.min, info.min + span, dtype="int64").astype(dtype)
    else:
        out = np.arange(info.max, info.max - span, -1, dtype="int64").astype(dtype)
    out.flags.writeable = False  # shared by the calls (cached)
    return out


def used_values_tile(spec: UsedValues) -> np.ndarray | None:
    """Whether each of `candidates(spec.dtype)` occurs among the tile's pixels (all bands), cast to the output type as
    GDAL casts (rounded, clamped): a boolean array, OR-ed with the other tiles'. None, unless `spec.full`, when the
    preferred candidate does not occur (a comparison costs a tenth of the histogram: most inputs stop there)."""
    from rasterio.windows import Window

    from gdal_mcp.engine.raster.opening import open_raster
    from gdal_mcp.engine.raster.output import cast

    with open_raster(spec.src) as ds:
        data = ds.read(list(spec.indexes), window=Window(*spec.window))
    values = cast(data, spec.dtype).ravel()
    wanted = candidates(spec.dtype)
    if not spec.full and not (values == wanted[0]).any():
        return None
    if np.dtype(spec.dtype).itemsize <= 2:
        info = np.iinfo(np.dtype(spec.dtype))
        seen = np.zeros(info.max - info.min + 1, dtype=bool)
        seen[values if info.min == 0 else values.astype("int32") - info.min] = True
        return seen[wanted.astype("int64") - info.min]  # type: ignore[no-any-return]
    return np.isin(wanted, values)


def scan_window(ds: Any, georef: Any, target: Any, transform: Any, width: int, height: int) -> tuple[int, int, int, int]:
    """The part of the input the output grid covers (with a margin for resampling kernels): the whole input unless a
    geotransformed source's window can be computed."""
    full = (0, 0, ds.width, ds.height)
    if georef.method != "geotransform" or ds.transform.is_identity:
        return full
    try:
        from rasterio.warp import transform_bounds

        left, top = transform.c, transform.f
        right, bottom = left + width * transform.a, top + height * transform.e
        b = transform_bounds(target, georef.crs, min(left, right), min(top, bottom), max(left, right), max(top, bottom))
        if not all(math.isfinite(v) for v in b):
            return full
        inv = ~ds.transform
        cols, rows = zip(*(inv * (x, y) for x, y in ((b[0], b[1]), (b[0], b[3]), (b[2], b[1]), (b[2], b[3]))), strict=True)
    except Exception:  # noqa: BLE001 - PROJ cannot say: scan it all
        return full
    pad = 8  # the widest resampling kernel (lanczos) reaches a few pixels
    c0, c1 = max(0, math.floor(min(cols)) - pad), min(ds.width, math.ceil(max(cols)) + pad)
    r0, r1 = max(0, math.floor(min(rows)) - pad), min(ds.height, math.ceil(max(rows)) + pad)
    if c1 <= c0 or r1 <= r0:
        return full
    return (c0, r0, c1 - c0, r1 - r0)


def margin_nodata(
    src: str, ds: Any, georef: Any, dtype: str, *, target: Any, transform: Any, width: int, height: int, threads: int = 1
) -> tuple[float | None, str]:
    """The nodata value for the margins of a source without one, and what to tell the caller about it (None when every
    value of the output type occurs in the input: the margins stay 0, undeclared, and the text says what to do)."""
    from gdal_mcp.engine import tiles

    kind = np.dtype(dtype)
    if kind.kind == "f":
        return float("nan"), (
            "the input has no nodata: the output's margins (pixels outside the input's footprint) are NaN, declared "
            "nodata, so that they read as missing rather than as data; pass nodata= to choose another value"
        )
    col0, row0, w, h = scan_window(ds, georef, target, transform, width, height)
    plan = tiles.plan(w, h, bytes_per_pixel=ds.count * np.dtype(ds.dtypes[0]).itemsize)
    specs = [
        UsedValues(src, tuple(range(1, ds.count + 1)), (col0 + t.window[0], row0 + t.window[1], t.window[2], t.window[3]), dtype)
        for t in plan
    ]
    wanted = candidates(dtype)
    seen = np.zeros(len(wanted), dtype=bool)
    quick: list[int] = []  # the tiles where the preferred value does not occur, answered by that alone
    # Once every candidate occurred the answer is known (no value is free): the tiles not read yet are not read (an
    # input of random values over the whole range shows them all in its first tile; the scan was a second full read
    # of the input: 3 x 18000^2 uint16, ~2 s of the reproject's 9.5 s).
    with tiles.mapped(used_values_tile, specs, local_threads=max(1, threads)) as results:
        _accumulate(seen, results, quick)
    if seen[0] and quick and not seen.all():  # the preferred value occurs: the others need every tile's whole answer
        again = [replace(specs[i], full=True) for i in sorted(quick)]
        with tiles.mapped(used_values_tile, again, local_threads=max(1, threads)) as results:
            _accumulate(seen, results, [])
    free = wanted[~seen]
    name = kind.name
    if free.size == 0:
        checked = f"every {name} value" if kind.itemsize <= 2 else f"each of the {len(wanted)} {name} values checked"
        return None, (
            f"the input has no nodata and {checked} occurs in it, so no value can mark the output's margins (pixels "
            "outside the input's footprint): they are 0, not declared nodata, and read as data; pass nodata= (input "
            "pixels of that value then read as missing too) or a wider output_type"
        )
    value = int(free[0])
    end = "largest" if np.iinfo(kind).min == 0 else "smallest"
    return float(value), (
        f"the input has no nodata: the output's margins (pixels outside the input's footprint) are {value}, declared "
        f"nodata, so that they read as missing rather than as data; {value} is the {end} {name} value no input pixel "
        "takes; pass nodata= to choose another value"
    )


def _accumulate(seen: np.ndarray, results: Any, quick: list[int]) -> None:
    """OR the tiles' answers into `seen` (the tiles answered by their preferred value alone go to `quick`) until every
    candidate occurred (the caller's tiles.mapped block then stops the tiles not done)."""
    for i, part in results:
        if part is None:
            quick.append(i)
            continue
        seen |= part
        if seen.all():
            return


def _lonlat(crs: Any, bounds: tuple[float, float, float, float]) -> tuple[float, float, float, float] | None:
    from rasterio.crs import CRS
    from rasterio.warp import transform_bounds

    try:
        out = transform_bounds(crs, CRS.from_epsg(4326), *bounds, densify_pts=21)
    except Exception:  # noqa: BLE001 - no transformation: nothing to say
        return None
    return tuple(float(v) for v in out) if all(math.isfinite(v) for v in out) else None  # type: ignore[return-value]


def area_of(crs: Any) -> Any:
    """pyproj's area of use of a rasterio CRS (west, south, east, north, name), or None."""
    from pyproj import CRS as ProjCRS

    try:
        code = crs.to_epsg()
        if code:
            return ProjCRS.from_epsg(code).area_of_use
        return ProjCRS.from_wkt(crs.to_wkt("WKT2_2019")).area_of_use
    except Exception:  # noqa: BLE001 - a CRS PROJ cannot describe has no known area
        return None


def area_of_use_warning(
    target: Any,
    source_crs: Any,
    transform: Any,
    width: int,
    height: int,
    source_bounds: tuple[float, float, float, float] | None,
) -> str | None:
    """A warning when the data written (the output grid, within the source's bounds when known) reach outside the
    target CRS's area of use; None inside it, for a CRS without a known area, or when the CRS does not change."""
    from gdal_mcp.engine.crs import crs_label

    if source_crs is not None and target == source_crs:
        return None
    area = area_of(target)
    if area is None:
        return None
    left, top = transform.c, transform.f
    right, bottom = left + width * transform.a, top + height * transform.e
    data = _lonlat(target, (min(left, right), min(top, bottom), max(left, right), max(top, bottom)))
    if data is None:
        return None
    if source_bounds is not None and source_crs is not None:
        src = _lonlat(source_crs, source_bounds)
        if src is not None and src[0] <= src[2] and data[0] <= data[2]:
            meet = (max(data[0], src[0]), max(data[1], src[1]), min(data[2], src[2]), min(data[3], src[3]))
            if meet[0] < meet[2] and meet[1] < meet[3]:
                data = meet
    west, south, east, north = data
    a_west, a_east = area.west, area.east
    if a_west > a_east:  # the area crosses the antimeridian: count its longitudes on from a_west
        a_east += 360
    if west > east:  # the data cross it
        east += 360
    # the data's longitudes a turn to either side, whichever lies nearest the area
    shift = min((-360.0, 0.0, 360.0), key=lambda k: max(a_west - west - k, 0) + max(east + k - a_east, 0))
    west, east = west + shift, east + shift
    outside = {
        "west": a_west - west,
        "east": east - a_east,
        "south": area.south - south,
        "north": north - area.north,
    }
    if max(outside.values()) <= AREA_TOLERANCE:
        return None
    mid = math.cos(math.radians((south + north) / 2))
    parts = []
    for side, deg in outside.items():
        if deg > AREA_TOLERANCE:
            km = deg * KM_PER_DEGREE * (mid if side in ("west", "east") else 1.0)
            parts.append(f"{deg:.3g}° (about {km:.3g} km) {side}")
    span_lon, span_lat = max(east - west, 1e-12), max(north - south, 1e-12)
    inside_lon = max(0.0, min(east, a_east) - max(west, a_west))
    inside_lat = max(0.0, min(north, area.north) - max(south, area.south))
    share = 1 - (inside_lon / span_lon) * (inside_lat / span_lat)
    box = [round(v, 4) for v in data]
    name = (area.name or "").split(". ")[0].rstrip(".")  # EPSG's first sentence; the list of countries follows
    where = "partly outside" if share < 0.999 else "outside"
    return (
        f"the data lie {where} the area of use of {crs_label(target)} ({name}: lon {area.west:g} to "
        f"{area.east:g}, lat {area.south:g} to {area.north:g}): they reach {', '.join(parts)} of it "
        f"({share:.0%} of their lon/lat extent lies outside), where the projection's distortion grows; the data span "
        f"lon {box[0]} to {box[2]}, lat {box[1]} to {box[3]}: crs_search with bbox={box} lists CRSs made for them"
    )


def ballpark_warning(source_crs: Any, target: Any, source_bounds: tuple[float, float, float, float] | None) -> str | None:
    """A warning when PROJ has no datum transformation between the two CRSs for the data's area and treats the
    datums as the same (a 'ballpark' operation: tens to hundreds of metres off, silently), naming the better
    operation that exists when only its grid is missing; None otherwise."""
    if source_crs is None or target is None or source_crs == target:
        return None
    try:
        from pyproj import CRS, Transformer
        from pyproj.aoi import AreaOfInterest
        from pyproj.transformer import TransformerGroup

        src, dst = CRS.from_user_input(source_crs.to_wkt()), CRS.from_user_input(target.to_wkt())
        box = _lonlat(source_crs, source_bounds) if source_bounds is not None else None
        area: Any = AreaOfInterest(*box) if box is not None and box[0] <= box[2] else None
        t = Transformer.from_crs(src, dst, always_xy=True, area_of_interest=area)
        if "ballpark" not in (t.description or "").lower():
            return None
        missing = [op for op in TransformerGroup(src, dst, area_of_interest=area).unavailable_operations]
        better = f"; a better one exists ({missing[0].name}) but needs a PROJ grid this machine does not have" if missing else ""
        return (
            f"no datum transformation between {src.name} and {dst.name} is known for this area: PROJ used a "
            f"'ballpark' one (the datums treated as the same), so positions may be off by tens to hundreds of metres"
            f"{better}; check the result against data in the target datum"
        )
    except Exception:  # noqa: BLE001 - a warning never fails a job
        return None
