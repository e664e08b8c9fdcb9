"""A CRS argument is a value, never a file or a URL: the one check of what users (and agents) type as a CRS.

GDAL's OSRSetFromUserInput and PROJ accept far more than values: a file name (whose content they read), an http(s)
or ftp URL (which they fetch), PROJ `+init=` files and grid files, WKT PARAMETERFILE references. Every CRS argument
of every tool goes through `crs_value` — in the server, as the parameter types' validator, and again in the engine's
one parser (gdal_mcp.engine.crs.parse_crs), which then hands each form only to the parser of that form.

Accepted: an authority code (EPSG:4326, 4326, ESRI:102003, IAU_2015:30100, OGC:CRS84, EPSG:4326+5773), an OGC URN
(urn:ogc:def:crs:EPSG::4326) or OGC definition URL (http://www.opengis.net/def/crs/EPSG/0/4326, turned into its
code, never fetched), WKT (1 or 2), PROJJSON, a PROJ string (+proj=utm +zone=32 …), or a name from PROJ's database
("WGS 84 / UTM zone 32N"). GDAL-free: the server imports it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from gdal_mcp.errors import GdalMcpError

MAX_CRS_LENGTH = 65536
#: authorities PROJ's database knows (codes of others are not values PROJ can resolve)
AUTHORITIES = frozenset({"EPSG", "ESRI", "IAU_2015", "IGNF", "NKG", "NRCAN", "OGC", "PROJ", "IAU"})
WKT_KEYWORDS = frozenset(
    {
        "GEOGCS",
        "PROJCS",
        "GEOCCS",
        "VERT_CS",
        "LOCAL_CS",
        "COMPD_CS",
        "FITTED_CS",
        "GEOGCRS",
        "GEODCRS",
        "GEODETICCRS",
        "GEOGRAPHICCRS",
        "PROJCRS",
        "PROJECTEDCRS",
        "VERTCRS",
        "VERTICALCRS",
        "COMPOUNDCRS",
        "BOUNDCRS",
        "ENGCRS",
        "ENGINEERINGCRS",
        "PARAMETRICCRS",
        "TIMECRS",
        "DERIVEDPROJCRS",
        "BASEGEOGCRS",
        "BASEGEODCRS",
    }
)
_CODE = re.compile(r"(?i)^([a-z][a-z0-9_]*):{1,2}([a-z0-9_.]+(?:\+[a-z0-9_.]+)?)$")
_OGC_URL = re.compile(r"(?i)^https?://www\.opengis\.net/def/crs/([a-z0-9_]+)/[a-z0-9_.]+/([a-z0-9_.]+)/?$")
_OGC_GML = re.compile(r"(?i)^https?://www\.opengis\.net/gml/srs/epsg\.xml#(\d+)$")
_URN = re.compile(r"(?i)^urn:ogc:def:crs[a-z0-9:,._+-]*$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")
_WKT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*[\[(]")
_PARAMETERFILE = re.compile(r'(?i)\bPARAMETERFILE\s*[\[(]\s*"(?:[^"]|"")*"\s*,\s*"((?:[^"]|"")*)"')
_PROJ_INIT = re.compile(r"(?i)^(epsg|esri|ignf):[a-z0-9_]+$")
#: PROJ keys whose value names a file
_PROJ_FILE_KEYS = frozenset(
    {"nadgrids", "geoidgrids", "grids", "file", "hgrids", "vgrids", "xy_grids", "z_grids", "ellps_file", "init"}
)
#: a file-name extension at the end of a name: a name ending like this was meant as a file
_FILE_SUFFIX = re.compile(
    r"(?i)\.(prj|wkt|json|xml|gml|txt|tif|tiff|vrt|shp|gpkg|geojson|aux|qpj|esriwkt|proj4|"
    r"nc|h5|jp2|csv|db|sqlite|zip|gz|tar)$"
)

Kind = Literal["code", "urn", "wkt", "projjson", "proj", "name"]


@dataclass(frozen=True)
class CrsValue:
    """A CRS argument made safe: its form, and the text to parse (an OGC URL turned into AUTH:CODE, a number into
    EPSG:number)."""

    kind: Kind
    text: str


def _refuse(what: str, text: str, why: str) -> GdalMcpError:
    return GdalMcpError(
        "invalid-argument",
        f"{what} {text[:80]!r}: {why}. A CRS is given as a value: EPSG:4326, "
        '4326, OGC:CRS84, a name such as "WGS 84 / UTM zone 32N", a PROJ string or WKT (to use a '
        "dataset's CRS, read it with raster_info or vector_info and pass its EPSG code or WKT)",
    )


def _path_like(value: str) -> bool:
    if value.startswith(("/", "~", "./", "../", "\\")) or "\\" in value or "/vsi" in value.lower():
        return True
    if re.search(r"(?<! )/|/(?! )", value):  # a slash that is not " / " between the words of a CRS name
        return True
    return bool(_FILE_SUFFIX.search(value))


def crs_value(text: str | int, what: str = "crs") -> CrsValue:
    """The CRS argument `text` as a value; invalid-argument for anything GDAL or PROJ would read as a file or
    fetch as a URL, or that is no CRS form at all."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise _refuse(what, str(text), "not text")
    value = str(text).strip()
    if not value:
        raise GdalMcpError("invalid-argument", f'{what} is empty; use e.g. EPSG:4326, 32618 or "WGS 84 / UTM zone 32N"')
    if "\x00" in value or len(value) > MAX_CRS_LENGTH:
        raise _refuse(what, value, "a NUL byte, or longer than any CRS definition")
    if value.isdigit():
        return CrsValue("code", f"EPSG:{value}")
    if m := _OGC_URL.match(value):
        return _code(what, value, m.group(1), m.group(2))
    if m := _OGC_GML.match(value):
        return CrsValue("code", f"EPSG:{m.group(1)}")
    if _URL.match(value) and not value.lower().startswith("urn:"):
        raise _refuse(what, value, "a URL, which this server never fetches for a CRS")
    if _URN.match(value):
        return CrsValue("urn", value)
    if m := _CODE.match(value):
        return _code(what, value, m.group(1), m.group(2))
    if value.startswith("{"):
        return CrsValue("projjson", _projjson(what, value))
    if value.startswith("+") or re.match(r"(?i)^proj=", value):
        return CrsValue("proj", _proj_string(what, value))
    if (m := _WKT.match(value)) and m.group(1).upper() in WKT_KEYWORDS:
        for ref in _PARAMETERFILE.findall(value):
            if _path_like(ref) or _URL.match(ref):
                raise _refuse(what, value, f"its PARAMETERFILE names a file or URL ('{ref[:60]}')")
        return CrsValue("wkt", value)
    if _path_like(value):
        raise _refuse(what, value, "a file path; a CRS argument is never read from a file")
    if len(value) > 200 or any(ch in value for ch in '[]{}<>"=;'):
        raise _refuse(what, value, "not a CRS name, code, PROJ string or WKT")
    return CrsValue("name", value)


def _code(what: str, value: str, authority: str, code: str) -> CrsValue:
    auth = authority.upper()
    if auth not in AUTHORITIES:
        raise _refuse(what, value, f"{authority} is not an authority of CRS codes (EPSG, ESRI, IAU_2015, IGNF, OGC …)")
    return CrsValue("code", f"{auth}:{code}")


def _projjson(what: str, value: str) -> str:
    try:
        doc = json.loads(value)
    except ValueError as e:
        raise _refuse(what, value, f"not valid PROJJSON ({e})") from None
    if not isinstance(doc, dict):
        raise _refuse(what, value, "PROJJSON must be a JSON object")
    stack: list[object] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and (_URL.match(item) or item.startswith(("/", "~", "\\")) or "/vsi" in item):
            raise _refuse(what, value, f"it names a file or URL ('{item[:60]}')")
    return value


def _proj_string(what: str, value: str) -> str:
    for token in value.split():
        key, _, arg = token.lstrip("+").partition("=")
        if key.lower() == "init":
            if not _PROJ_INIT.match(arg):
                raise _refuse(what, value, "+init= may only name an EPSG, ESRI or IGNF code (never a file)")
            continue
        if _URL.match(arg) or any(ch in arg for ch in "/\\~") or (key.lower() in _PROJ_FILE_KEYS and ".." in arg):
            raise _refuse(what, value, f"+{key}= names a file or URL ('{arg[:60]}')")
    return value
