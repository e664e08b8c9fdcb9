"""CRS parsing (codes, PROJ strings, WKT, names) and descriptions, shared by raster and vector engines."""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from typing import Any

from gdal_mcp.models import CRSInfo


def describe_crs(crs: Any) -> CRSInfo | None:
    """CRSInfo from anything pyproj accepts (rasterio CRS, WKT, 'EPSG:4326'); None if empty."""
    if crs is None:
        return None
    wkt = crs.to_wkt() if hasattr(crs, "to_wkt") else str(crs)
    if not wkt:
        return None
    return _describe_wkt(wkt).model_copy(deep=True)


@functools.lru_cache(maxsize=256)
def _describe_wkt(wkt: str) -> CRSInfo:
    """describe_crs by WKT, cached per worker: identifying a CRS without an EPSG code costs PROJ ~0.2 s."""
    from pyproj import CRS

    try:
        c = CRS.from_user_input(wkt)
    except Exception:  # noqa: BLE001 - unusual WKT pyproj cannot parse: still report it
        return CRSInfo(wkt=wkt)
    try:
        # 90, not pyproj's default 70: at 70 custom Albers grids (slope.tif) match unrelated codes.
        epsg = c.to_epsg(min_confidence=90)
    except Exception:  # noqa: BLE001
        epsg = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "you will likely lose information": proj4 is only a hint here
            proj4 = c.to_proj4()
    except Exception:  # noqa: BLE001
        proj4 = None
    units = c.axis_info[0].unit_name if c.axis_info else None
    return CRSInfo(epsg=epsg, name=_name(c), wkt=c.to_wkt(), proj4=proj4, is_geographic=c.is_geographic, units=units)


def _name(c: Any) -> str:
    """The CRS's name; for a custom CRS named 'unnamed' or 'unknown' (GOES, custom Albers grids), what it is:
    'custom Albers Equal Area', 'custom geographic (GRS 1980)'."""
    name = str(c.name or "")
    if name.lower() not in ("", "unnamed", "unknown", "undefined"):
        return name
    op = c.coordinate_operation
    if op is not None and op.method_name:
        return f"custom {op.method_name}"
    if c.is_geographic and c.ellipsoid is not None:
        return f"custom geographic ({c.ellipsoid.name})"
    return name or "unnamed"


def parse_crs(text: str | int, what: str = "crs") -> Any:
    """A rasterio CRS from what GIS users type: EPSG:4326, epsg:4326, 4326, OGC:CRS84, PROJ string, WKT, or a
    name from the PROJ database such as "WGS 84 / UTM zone 32N" or "ETRS89 / LAEA Europe" (see `lookup_name`).

    Never a file or a URL (gdal_mcp.crs_text): each form goes only to the parser of that form, so GDAL's
    OSRSetFromUserInput never sees text it would open as a file or fetch."""
    from rasterio.crs import CRS
    from rasterio.errors import CRSError

    from gdal_mcp.crs_text import crs_value
    from gdal_mcp.errors import GdalMcpError

    spec = crs_value(text, what)
    try:
        if spec.kind == "wkt":
            crs = CRS.from_wkt(spec.text)
        elif spec.kind == "name":
            if spec.text.upper() not in WELL_KNOWN_NAMES:
                return _from_name(spec.text, what, str(text))
            crs = CRS.from_user_input(spec.text.upper())
        else:
            crs = CRS.from_user_input(spec.text)
    except (CRSError, ValueError) as e:
        raise GdalMcpError(
            "invalid-argument",
            f"{what} {str(text)[:80]!r} is not a CRS GDAL understands ({e}); use e.g. EPSG:4326, 32618, OGC:CRS84, "
            'a name such as "WGS 84 / UTM zone 32N", a PROJ string or WKT',
        ) from None
    if not crs.to_wkt():
        raise GdalMcpError("invalid-argument", f"{what} {str(text)[:80]!r} is empty")
    return crs


#: names GDAL knows by itself (SetWellKnownGeogCS); every other name is looked up in PROJ's database
WELL_KNOWN_NAMES = frozenset({"WGS84", "WGS72", "NAD27", "NAD83", "CRS84", "CRS83", "CRS27"})


def parse_pyproj_crs(text: str | int, what: str = "crs") -> Any:
    """The same CRS as `parse_crs` (one lookup, same rules and errors), as a pyproj CRS."""
    from pyproj import CRS

    return CRS.from_user_input(parse_crs(text, what).to_string())


def _from_name(value: str, what: str, text: str) -> Any:
    """A rasterio CRS for a name: a PROJ database name (exact, then a unique partial match)."""
    from pyproj import CRS as ProjCRS
    from rasterio.crs import CRS

    try:  # PROJ's own exact lookup of names and aliases ("ETRS89 / LAEA Europe" is an alias of EPSG:3035)
        found = ProjCRS.from_user_input(value)
    except Exception:  # noqa: BLE001 - not an exact name
        found = None
    if found is not None:
        auth = found.to_authority(min_confidence=100)
        if not auth:
            return CRS.from_wkt(found.to_wkt())
        code = f"{auth[0]}:{auth[1]}"
    else:
        code = lookup_name(value, what)
    try:
        return CRS.from_user_input(code)
    except Exception:  # noqa: BLE001 - an authority GDAL does not resolve by code: go through WKT
        return CRS.from_wkt(ProjCRS.from_user_input(code).to_wkt())


def _compact(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


@functools.lru_cache(maxsize=1)
def _names() -> tuple[tuple[str, str, str, str, bool, int], ...]:
    """(compact name, 'AUTH:code', display name, type, deprecated, rank) for every CRS name and alias in proj.db."""
    import os
    import sqlite3

    import pyproj
    from pyproj.database import query_crs_info

    rows: list[tuple[str, str, str, str, bool, int]] = []
    official: dict[str, tuple[str, str, bool]] = {}
    for info in query_crs_info():
        code = f"{info.auth_name}:{info.code}"
        kind = info.type.name
        official[code] = (info.name, kind, info.deprecated)
        rows.append((_compact(info.name), code, info.name, kind, info.deprecated, _rank(info.auth_name, kind)))
    try:
        db = os.path.join(pyproj.datadir.get_data_dir(), "proj.db")
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            aliases = con.execute(
                "SELECT auth_name, code, alt_name FROM alias_name WHERE table_name IN "
                "('geodetic_crs', 'projected_crs', 'vertical_crs', 'compound_crs')"
            ).fetchall()
    except Exception:  # noqa: BLE001 - aliases are a convenience; names alone still work
        aliases = []
    for auth, number, alias in aliases:
        code = f"{auth}:{number}"
        if code in official:
            name, kind, deprecated = official[code]
            rows.append((_compact(alias), code, name, kind, deprecated, _rank(auth, kind)))
    return tuple(rows)


def _rank(auth: str, kind: str) -> int:
    """Preference among equal matches: EPSG before other authorities, 2D CRSs before 3D / geocentric ones."""
    flat = kind in ("PROJECTED_CRS", "GEOGRAPHIC_2D_CRS", "COMPOUND_CRS")
    return (0 if auth == "EPSG" else 2) + (0 if flat else 1)


def lookup_name(text: str, what: str = "crs") -> str:
    """'AUTH:code' of the CRS named `text` in the PROJ database; invalid-argument when none or several match.

    Case, spaces, underscores and punctuation are ignored ("wgs84 utm zone 32n", "WGS_1984_UTM_Zone_32N"). An
    exact match wins; otherwise every word of `text` must occur in the name or one of its aliases
    ("UTM zone 32N WGS 84" finds EPSG:32632), and the match must be unique. Deprecated CRSs count only when
    nothing current matches.
    """
    from gdal_mcp.errors import GdalMcpError

    key = _compact(text)
    words = [w for w in re.split(r"[^0-9a-z]+", text.lower()) if w]
    if not key:
        raise GdalMcpError("invalid-argument", f"{what} {text[:80]!r} is not a CRS; use e.g. EPSG:4326")
    rows = _names()
    hits = [r for r in rows if r[0] == key] or [r for r in rows if all(w in r[0] for w in words)]
    hits = [r for r in hits if not r[4]] or hits
    best = min((r[5] for r in hits), default=0)
    unique = {r[1]: r for r in hits if r[5] == best}
    codes = sorted(unique.values(), key=lambda r: (len(r[2]), r[2], r[1]))
    if len(codes) == 1:
        return codes[0][1]
    if not codes:
        raise GdalMcpError(
            "invalid-argument",
            f"{what} {text[:80]!r} is neither a CRS code, PROJ string or WKT nor "
            "the name of a CRS in the PROJ database; use e.g. EPSG:4326, 32632 or a name such as "
            '"WGS 84 / UTM zone 32N" (the crs_search tool finds codes by name or place)',
        )
    shown = "; ".join(f"{r[1]} {r[2]}" for r in codes[:10])
    more = f" (and {len(codes) - 10} more)" if len(codes) > 10 else ""
    raise GdalMcpError(
        "invalid-argument",
        f"{what} {text[:80]!r} matches {len(codes)} CRSs: {shown}{more}; pass the code (e.g. {codes[0][1]}) or the full name",
    )


def crs_label(crs: Any) -> str | None:
    """EPSG:n when the CRS has a code, else its name; None without a CRS."""
    if crs is None or not crs.to_wkt():
        return None
    info = describe_crs(crs)
    if info is None:
        return None
    return f"EPSG:{info.epsg}" if info.epsg else info.name


def layer_crs(meta_crs: str | None) -> Any:
    """The rasterio CRS of a vector layer from its metadata (None when it has none)."""
    return parse_crs(meta_crs, "layer CRS") if meta_crs else None
