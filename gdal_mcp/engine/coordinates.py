"""Coordinates and CRS without files: describe a CRS, search PROJ's database, transform points (cs2cs)."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from gdal_mcp.engine.crs import parse_crs
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import (
    AreaOfUse,
    AxisInfo,
    CrsDescription,
    CrsMatch,
    CrsSearchResult,
    TransformResult,
)

CrsKind = Literal["projected", "geographic", "any"]
MAX_POINTS = 10_000
# Datums of current national and continental realisations: their CRSs rank before historical ones.
MODERN_DATUMS = (
    "ETRS89",
    "NAD83(2011)",
    "NAD83(CSRS)",
    "NAD83(HARN)",
    "NAD83",
    "GDA2020",
    "GDA94",
    "RGF93",
    "SIRGAS",
    "NZGD2000",
    "JGD2011",
    "JGD2000",
    "CGCS2000",
    "WGS 84",
    "ITRF",
    "KGD2002",
    "TWD97",
    "SWEREF99",
    "EUREF",
    "ETRF",
    "Hartebeesthoek94",
    "MAGNA-SIRGAS",
    "POSGAR",
    "RGFG95",
    "RGNC",
    "ISN2016",
    "ISN93",
    "LKS",
    "MGI 1901",
    "S-JTSK",
    "HTRS96",
    "ETRS89-",
)


def _pyproj_crs(text: str, what: str) -> Any:
    from pyproj import CRS

    crs = parse_crs(text, what)
    code = None
    try:
        code = crs.to_epsg()
    except Exception:  # noqa: BLE001
        code = None
    if code:
        return CRS.from_epsg(code)
    return CRS.from_wkt(crs.to_wkt())


def _kind(crs: Any) -> str:
    if crs.is_compound:
        return "compound"
    if crs.is_projected:
        return "projected"
    if crs.is_geographic:
        return "geographic"
    if crs.is_geocentric:
        return "geocentric"
    if crs.is_vertical:
        return "vertical"
    if crs.is_engineering:
        return "engineering"
    return crs.type_name.lower()


def _area(area: Any) -> AreaOfUse | None:
    if area is None:
        return None
    return AreaOfUse(name=area.name, west=area.west, south=area.south, east=area.east, north=area.north)


def describe(crs: str, progress: Progress = no_progress) -> CrsDescription:
    """Everything a person asks about a CRS: name, code, kind, datum, ellipsoid, units, axes, area of use."""
    c = _pyproj_crs(crs, "crs")
    try:
        epsg = c.to_epsg(min_confidence=90)
    except Exception:  # noqa: BLE001
        epsg = None
    ellipsoid = c.ellipsoid
    axes = [AxisInfo(name=a.name, abbreviation=a.abbrev, direction=a.direction, unit=a.unit_name) for a in c.axis_info]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            proj4 = c.to_proj4()
        except Exception:  # noqa: BLE001
            proj4 = None
    horizontal = c.sub_crs_list[0] if c.is_compound and c.sub_crs_list else c
    utm_zone = None
    if horizontal.utm_zone:
        utm_zone = horizontal.utm_zone
    return CrsDescription(
        name=c.name,
        epsg=epsg,
        authority=":".join(c.to_authority(min_confidence=90)) if c.to_authority(min_confidence=90) else None,
        kind=_kind(c),
        datum=c.datum.name if c.datum else None,
        ellipsoid=ellipsoid.name if ellipsoid else None,
        semi_major_m=ellipsoid.semi_major_metre if ellipsoid else None,
        inverse_flattening=ellipsoid.inverse_flattening if ellipsoid else None,
        projection=c.coordinate_operation.method_name if c.coordinate_operation else None,
        units=sorted({a.unit for a in axes}) if axes else [],
        axes=axes,
        axis_order="/".join(a.abbreviation or a.name for a in axes),
        utm_zone=utm_zone,
        area_of_use=_area(c.area_of_use),
        proj4=proj4,
        wkt=c.to_wkt(pretty=False),
    )


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def _size(area: Any) -> float:
    if area is None:
        return math.inf
    width = area.east - area.west
    if width < 0:  # crosses the antimeridian
        width += 360.0
    return width * (area.north - area.south)


def _pj_types(kind: CrsKind) -> list[Any]:
    from pyproj.enums import PJType

    if kind == "projected":
        return [PJType.PROJECTED_CRS]
    if kind == "geographic":
        return [PJType.GEOGRAPHIC_2D_CRS]
    return [PJType.PROJECTED_CRS, PJType.GEOGRAPHIC_2D_CRS, PJType.COMPOUND_CRS]


def search(
    query: str | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    kind: CrsKind = "any",
    limit: int = 20,
    progress: Progress = no_progress,
) -> CrsSearchResult:
    """CRSs of the EPSG database whose name matches `query` and/or whose area of use covers the lon/lat `bbox`.

    Best first: for a bbox, the WGS 84 UTM zone of its centre, then current national/regional CRSs (modern
    datums, smallest area of use first), then the rest; for text, exact names, then names starting with it,
    then names containing it (shorter first).
    """
    from pyproj.aoi import AreaOfInterest
    from pyproj.database import query_crs_info, query_utm_crs_info

    if query is None and bbox is None:
        raise GdalMcpError(
            "invalid-argument",
            "give query (a name such as 'Lambert-93' or 'UTM zone 32N'), bbox ([west, south, east, north] in degrees), or both",
        )
    if not 1 <= limit <= 200:
        raise GdalMcpError("invalid-argument", f"limit must be 1-200, got {limit}")
    aoi = None
    if bbox is not None:
        w, s, e, n = bbox
        if not (-180 <= w <= 180 and -180 <= e <= 180 and -90 <= s <= n <= 90):
            raise GdalMcpError(
                "invalid-argument",
                f"bbox {list(bbox)} is not [west, south, east, north] in degrees "
                "(longitudes -180..180, latitudes -90..90, south <= north)",
            )
        aoi = AreaOfInterest(w, s, e, n)
    infos = query_crs_info(auth_name="EPSG", pj_types=_pj_types(kind), area_of_interest=aoi, contains=aoi is not None)
    infos = [i for i in infos if not i.deprecated]
    progress(0.5, f"{len(infos)} candidates")

    q = _norm(query) if query else ""
    tokens = [t for t in (_norm(x) for x in re.split(r"[\s/,_]+", query or "")) if t]
    code_query = None
    if query:
        m = re.fullmatch(r"\s*(?:epsg\s*:?\s*)?(\d{4,6})\s*", query, re.I)
        code_query = m.group(1) if m else None

    utm_codes: list[str] = []
    if aoi is not None and kind in ("projected", "any"):
        cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2  # type: ignore[index]
        utm = query_utm_crs_info(datum_name="WGS 84", area_of_interest=AreaOfInterest(cx, cy, cx, cy))
        utm_codes = [u.code for u in utm]

    def text_rank(name: str, code: str) -> int | None:
        if not query:
            return 0
        if code_query is not None:
            return 0 if code == code_query else None
        n = _norm(name)
        if n == q:
            return 0
        if n.endswith(q) or n.startswith(q):
            return 1
        if q in n:
            return 2
        if tokens and all(t in n for t in tokens):
            return 3  # as people type it: "ETRS89 / LAEA Europe" for "ETRS89-extended / LAEA Europe"
        return None

    scored = []
    seen: set[str] = set()
    for info in infos:
        if info.code in seen:  # one CRS can be listed once per area of use
            continue
        seen.add(info.code)
        rank = text_rank(info.name, info.code)
        if rank is None:
            continue
        utm_first = 0 if info.code in utm_codes else 1
        modern = 0 if any(info.name.startswith(d) for d in MODERN_DATUMS) else 1
        if aoi is not None:
            key: tuple[Any, ...] = (rank, utm_first, modern, _size(info.area_of_use), len(info.name), int(info.code))
        else:
            key = (rank, modern, len(info.name), int(info.code))
        scored.append((key, info))
    scored.sort(key=lambda t: t[0])
    matches = [
        CrsMatch(
            crs=f"EPSG:{i.code}",
            name=i.name,
            kind=i.type.name.lower().replace("_crs", "").replace("_2d", ""),
            area_of_use=_area(i.area_of_use),
        )
        for _, i in scored[:limit]
    ]
    warnings = []
    if not matches:
        warnings.append("no CRS matched: try a shorter name (e.g. 'Lambert-93', 'UTM zone 33N', 'LAEA Europe') or a larger bbox")
    return CrsSearchResult(
        query=query,
        bbox=list(bbox) if bbox else None,
        kind=kind,
        matches=matches,
        total=len(scored),
        truncated=len(scored) > limit,
        warnings=warnings,
    )


def transform(
    points: list[tuple[float, ...]], src_crs: str, dst_crs: str, always_xy: bool = True, progress: Progress = no_progress
) -> TransformResult:
    """Transform coordinates between CRSs (like cs2cs / gdaltransform), in x/y order unless always_xy=False."""
    from pyproj import Transformer

    if not 1 <= len(points) <= MAX_POINTS:
        raise GdalMcpError("invalid-argument", f"give 1 to {MAX_POINTS} points, got {len(points)}")
    src = _pyproj_crs(src_crs, "src_crs")
    dst = _pyproj_crs(dst_crs, "dst_crs")
    dims = {len(p) for p in points}
    if not dims <= {2, 3}:
        raise GdalMcpError("invalid-argument", "each point is [x, y] or [x, y, z]")
    tr = Transformer.from_crs(src, dst, always_xy=always_xy)
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    has_z = 3 in dims
    out: list[list[float | None]] = []
    failed = 0
    if has_z:
        zs = [p[2] if len(p) == 3 else 0.0 for p in points]
        rx, ry, rz = tr.transform(xs, ys, zs, errcheck=False)
        for a, b, c in zip(rx, ry, rz, strict=True):
            ok = all(math.isfinite(v) for v in (a, b, c))
            failed += not ok
            out.append([a, b, c] if ok else [None, None, None])
    else:
        rx, ry = tr.transform(xs, ys, errcheck=False)
        for a, b in zip(rx, ry, strict=True):
            ok = math.isfinite(a) and math.isfinite(b)
            failed += not ok
            out.append([a, b] if ok else [None, None])

    def order(crs: Any) -> str:
        if always_xy:
            return "x/y (east, north; lon/lat for geographic CRSs)"
        return "/".join(f"{a.abbrev or a.name} ({a.direction})" for a in crs.axis_info) or "x/y"

    warnings = []
    if failed:
        warnings.append(f"{failed} point(s) could not be transformed (outside the CRS's domain): their coordinates are null")
    return TransformResult(
        src_crs=src.name,
        dst_crs=dst.name,
        always_xy=always_xy,
        src_axis_order=order(src),
        dst_axis_order=order(dst),
        points=out,
        operation=tr.description,
        failed=failed,
        warnings=warnings,
    )


def same_crs(a: str, b: str, progress: Progress = no_progress) -> bool:
    """Whether two CRS definitions (datasets' WKT, codes …) are the same CRS, their axis order aside; definitions
    PROJ cannot read are compared as text."""
    try:
        return bool(_pyproj_crs(a, "crs").equals(_pyproj_crs(b, "crs"), ignore_axis_order=True))
    except Exception:  # noqa: BLE001 - unparsable: compare the text
        return a == b


def wgs84_bounds(
    crs: str, bounds: tuple[float, float, float, float], progress: Progress = no_progress
) -> tuple[float, float, float, float] | None:
    """(west, south, east, north) in lon/lat of `bounds` (left, bottom, right, top) in `crs`, edges densified (21
    points each); None where PROJ cannot transform them."""
    from pyproj import CRS, Transformer

    try:
        tr = Transformer.from_crs(_pyproj_crs(crs, "crs"), CRS.from_epsg(4326), always_xy=True)
        west, south, east, north = tr.transform_bounds(*bounds, densify_pts=21)
    except Exception:  # noqa: BLE001 - a CRS PROJ cannot invert: no lon/lat extent
        return None
    if not all(math.isfinite(v) for v in (west, south, east, north)):
        return None
    return (west, south, east, north)
