"""Coordinates and CRS without files: describe a CRS, search PROJ's database, transform points (cs2cs)."""

from __future__ import annotations

import math
import re
import unicodedata
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
BBox = tuple[float, float, float, float]
MAX_POINTS = 10_000
# Name prefixes of current national and continental systems: datums of current realisations ("ETRS89",
# "NAD83", "GDA2020") and current national grids on older datums ("OSGB36 / British National Grid"). Their CRSs rank
# before historical ones (NTF, ED50, Lisbon 1890 …).
CURRENT_SYSTEMS = (
    "ETRS89",
    "NAD83(2011)",
    "NAD83(CSRS)",
    "NAD83(HARN)",
    "NAD83(MA11)",
    "NAD83(PA11)",
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
    "LUREF",
    "CH1903+",
    "RDN2008",
    "IRENET95",
    "REGCAN95",
    "PTRA08",
    "TUREF",
    "Slovenia 1996",
    "Estonian Coordinate System of 1997",
    "BGS2005",
    "MOLDREF99",
    "KOSOVAREF01",
    "UCS-2000",
    "GSK-2011",
    "Mexico ITRF",
    "CR05",
    "PRS92",
    "DGN95",
    "SRGI2013",
    "GDM2000",
    "SVY21",
    "ONGD",
    "GR96",
    "RGAF09",
    "RGR92",
    "RGM04",
    "RGSPM06",
    "RGPF",
    "RGTAAF07",
    "RGWF96",
    "OSGB36 / British National Grid",
    "Amersfoort / RD New",
    "BD72 / Belgian Lambert 72",
    "MGI / Austria",
    "HD72 / EOV",
    "GGRS87 / Greek Grid",
    "Pulkovo 1942(58) / Stereo70",
    "Israel 1993 / Israeli TM Grid",
    "Hong Kong 1980 Grid System",
)
# An area of use covering this share of a bbox counts as containing it: people's bboxes of a country differ from
# EPSG's by a few hundredths of a degree.
NEARLY_CONTAINS = 0.9


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
    """Lower case without accents, spaces or punctuation: 'Lambert-93' = 'lambert 93', 'Métropole' = 'metropole'."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "", plain.lower())


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


def _lon_spans(west: float, east: float) -> list[tuple[float, float]]:
    """A longitude range as one span, or two when it crosses the antimeridian (west > east)."""
    return [(west, east)] if west <= east else [(west, 180.0), (-180.0, east)]


def _bbox_share(area: Any, bbox: BBox) -> float | None:
    """The share of `bbox` inside an area of use: 1.0 when the area contains it, None when they do not overlap.

    Either may cross the antimeridian. A bbox of zero width or height (a line, a point) counts in the dimensions
    it has."""
    w, s, e, n = bbox
    if area.south > n or area.north < s:
        return None
    spans, area_spans = _lon_spans(w, e), _lon_spans(area.west, area.east)
    if not any(min(b1, a1) >= max(b0, a0) for b0, b1 in spans for a0, a1 in area_spans):
        return None
    if area.south <= s and n <= area.north and all(any(a0 <= b0 and b1 <= a1 for a0, a1 in area_spans) for b0, b1 in spans):
        return 1.0
    width = sum(b1 - b0 for b0, b1 in spans)
    lon_in = sum(max(0.0, min(b1, a1) - max(b0, a0)) for b0, b1 in spans for a0, a1 in area_spans)
    lat_in = min(n, area.north) - max(s, area.south)
    share = (lon_in / width if width > 0 else 1.0) * (lat_in / (n - s) if n > s else 1.0)
    return share if share > 0 else None  # touching along an edge is not overlapping


def _utm_code(bbox: BBox) -> str:
    """EPSG code of the WGS 84 / UTM zone of the bbox centre, as EPSG defines the zones: 6° of longitude from
    180°W (no Norway or Svalbard exceptions), north or south by the centre's latitude; UPS beyond 84°N or 80°S."""
    w, s, e, n = bbox
    cx = (w + e) / 2 if w <= e else (w + e + 360.0) / 2
    cx = cx - 360.0 if cx >= 180.0 else cx
    cy = (s + n) / 2
    if cy > 84.0:
        return "32661"  # WGS 84 / UPS North (N,E)
    if cy < -80.0:
        return "32761"  # WGS 84 / UPS South (N,E)
    zone = min(int((cx + 180.0) // 6) + 1, 60)
    return str((32600 if cy >= 0 else 32700) + zone)


_KIND_ORDER = {"PROJECTED_CRS": 0, "GEOGRAPHIC_2D_CRS": 1}  # then compound


def _text_rank(info: Any, query: str | None) -> int | None:
    """How `info` matches `query`: 0 EPSG code or exact name, 1 name starts or ends with it, 2 name contains it,
    3 name contains all its words, 4 only the name of the area of use contains it (a place: 'Portugal'); None
    when it does not match. 0 for everything without a query."""
    if not query:
        return 0
    m = re.fullmatch(r"\s*(?:epsg\s*:?\s*)?(\d{4,6})\s*", query, re.I)
    if m:
        return 0 if info.code == m.group(1) else None
    q, n = _norm(query), _norm(info.name)
    if n == q:
        return 0
    if n.endswith(q) or n.startswith(q):
        return 1
    if q in n:
        return 2
    tokens = [t for t in (_norm(x) for x in re.split(r"[\s/,_]+", query)) if t]
    if tokens and all(t in n for t in tokens):
        return 3  # as people type it: "ETRS89 / LAEA Europe" for "ETRS89-extended / LAEA Europe"
    if info.area_of_use is not None and q in _norm(info.area_of_use.name):
        return 4
    return None


def _modern(name: str) -> bool:
    return any(name.startswith(d) for d in CURRENT_SYSTEMS)


def _describe_area(info: Any) -> str:
    a = info.area_of_use
    return f"EPSG:{info.code} {info.name} (area of use: {a.name} [{a.west}, {a.south}, {a.east}, {a.north}])"


def search(
    query: str | None = None,
    bbox: BBox | None = None,
    kind: CrsKind = "any",
    limit: int = 20,
    progress: Progress = no_progress,
) -> CrsSearchResult:
    """Current (not deprecated) EPSG CRSs whose name or area-of-use name matches `query` and/or whose area of use
    overlaps the lon/lat `bbox`, best first.

    Order: an EPSG code or exact name; for a bbox, the WGS 84 UTM zone of its centre (`_utm_code`); projected,
    then geographic, then compound CRSs; current systems (CURRENT_SYSTEMS) before older ones; then by how the text
    matches (`_text_rank`; with a bbox only: in the name before in the area-of-use name); for a bbox, areas of use
    containing at least NEARLY_CONTAINS of it first, smaller areas first, then the others, larger shares of the
    bbox first; then shorter names.
    """
    from pyproj.database import query_crs_info

    query = query if query and _norm(query) else None
    if query is None and bbox is None:
        raise GdalMcpError(
            "invalid-argument",
            "give query (a CRS name such as 'Lambert-93' or 'UTM zone 32N', a country or region such as 'Portugal', "
            "or an EPSG code), bbox ([west, south, east, north] in lon/lat degrees), or both",
        )
    if not 1 <= limit <= 200:
        raise GdalMcpError("invalid-argument", f"limit must be 1-200, got {limit}")
    if bbox is not None:
        w, s, e, n = bbox
        if not (-180 <= w <= 180 and -180 <= e <= 180 and -90 <= s <= n <= 90):
            raise GdalMcpError(
                "invalid-argument",
                f"bbox {list(bbox)} is not [west, south, east, north] in degrees "
                "(longitudes -180..180, west > east crosses the antimeridian; latitudes -90..90, south <= north)",
            )
    wanted = {t.name for t in _pj_types(kind)}
    utm = _utm_code(bbox) if bbox is not None and kind != "geographic" else None
    best: dict[str, tuple[tuple[Any, ...], Any, float | None]] = {}
    elsewhere: dict[str, Any] = {}  # matching the text but not the kind or the bbox: for the hint
    for info in query_crs_info(auth_name="EPSG", pj_types=_pj_types("any")):
        rank = _text_rank(info, query) if not info.deprecated else None
        if rank is None:
            continue
        share = _bbox_share(info.area_of_use, bbox) if bbox is not None and info.area_of_use is not None else None
        if info.type.name not in wanted or (bbox is not None and share is None):
            elsewhere.setdefault(info.code, info)
            continue
        text = rank if bbox is None else min(rank, 1) + (rank == 4)  # with a bbox: exact, in the name, in the area's
        head = (rank != 0, info.code != utm, _KIND_ORDER.get(info.type.name, 2), not _modern(info.name), text)
        if share is not None:  # one CRS is listed once per area of use: it keeps its best
            near = share >= NEARLY_CONTAINS  # then smaller areas first; below, larger shares first
            key: tuple[Any, ...] = (
                *head,
                not near,
                0.0 if near else -share,
                _size(info.area_of_use),
                len(info.name),
                int(info.code),
            )
        else:
            key = (*head, len(info.name), int(info.code))
        if info.code not in best or key < best[info.code][0]:
            best[info.code] = (key, info, share)
    progress(0.8, f"{len(best)} CRSs match")
    ranked = sorted(best.values(), key=lambda t: t[0])
    matches = [
        CrsMatch(
            crs=f"EPSG:{i.code}",
            name=i.name,
            kind=i.type.name.lower().replace("_crs", "").replace("_2d", ""),
            area_of_use=_area(i.area_of_use),
            bbox_share=None if share is None else 1.0 if share == 1.0 else math.floor(share * 1000) / 1000,  # 1: contains
        )
        for _, i, share in ranked[:limit]
    ]
    warnings = []
    if not matches:
        warnings.append(_no_match_hint(query, bbox, kind, [i for c, i in elsewhere.items() if c not in best]))
    elif bbox is not None and ranked[0][1].code == utm:
        width = sum(b - a for a, b in _lon_spans(bbox[0], bbox[2]))
        if width > 6:
            whole = next((i for _, i, sh in ranked[1:] if sh == 1.0 and i.type.name == "PROJECTED_CRS"), None)
            warnings.append(
                f"the bbox is {width:g}° wide, more than one UTM zone (6°): {ranked[0][1].name} (first) distorts away "
                "from its central meridian; for the whole bbox a CRS whose area of use contains it (bbox_share 1) "
                "is better" + (f", e.g. EPSG:{whole.code} {whole.name}" if whole else "")
            )
    return CrsSearchResult(
        query=query,
        bbox=list(bbox) if bbox else None,
        kind=kind,
        matches=matches,
        total=len(ranked),
        truncated=len(ranked) > limit,
        warnings=warnings,
    )


def _no_match_hint(query: str | None, bbox: BBox | None, kind: CrsKind, elsewhere: list[Any]) -> str:
    """What to change when nothing matched, from what did match the text elsewhere."""
    wanted = {t.name for t in _pj_types(kind)}
    if query is not None and bbox is not None:
        outside = sorted((i for i in elsewhere if i.type.name in wanted and i.area_of_use is not None), key=lambda i: len(i.name))
        if outside:
            return (
                f"{len(outside)} {'' if kind == 'any' else kind + ' '}CRSs match {query!r} but none has an area of use "
                f"overlapping bbox {list(bbox)}, e.g. {_describe_area(outside[0])}: check that bbox is [west, south, "
                "east, north] in lon/lat degrees around the place, or leave bbox out to search by name alone"
            )
    if query is not None and elsewhere:
        other = sorted(elsewhere, key=lambda i: len(i.name))[0]
        kinds = sorted({i.type.name.lower().replace("_crs", "").replace("_2d", "") for i in elsewhere})
        return (
            f"no {kind} CRS matches {query!r}, but {len(elsewhere)} of kind {', '.join(kinds)} do "
            f"(e.g. EPSG:{other.code} {other.name}): use kind='any'"
        )
    if query is not None:
        return (
            f"no CRS name, EPSG code or area-of-use name matches {query!r}: try part of a CRS name ('Lambert-93', "
            "'UTM zone 33N', 'LAEA Europe') or fewer words, a country or region name ('Portugal', 'Texas'), an EPSG "
            "code"
            + (", or leave query out to list the CRSs for the bbox" if bbox else ", or give bbox to list the CRSs of a place")
        )
    return (
        f"no {kind} CRS has an area of use overlapping bbox {list(bbox or [])}: check that it is [west, south, east, north] "
        "in lon/lat degrees"
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
