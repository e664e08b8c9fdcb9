"""Vector sources: listing layers and choosing one, with errors that name the alternatives."""

from __future__ import annotations

import re
import warnings

import pyogrio
from pyogrio.errors import DataSourceError

from gdal_mcp.engine.failures import remote_missing
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError

# Unsorted OSM extracts otherwise fail to scan ("Non increasing node id").
pyogrio.set_gdal_config_options({"OSM_USE_CUSTOM_INDEXING": "NO"})


#: SQLite virtual-table modules that read a file named in the table's declaration (SpatiaLite's and GDAL's own):
#: a database's schema can declare them over any file, and GDAL would list and read them as layers
FILE_MODULES = frozenset(
    {
        "virtualtext",
        "virtualshape",
        "virtualdbf",
        "virtualxl",
        "virtualogr",
        "virtualgeojson",
        "virtualgpkg",
        "virtualfdo",
        "virtualbbox",
    }
)
_VIRTUAL = re.compile(r"(?is)^\s*create\s+virtual\s+table\s+.+?\s+using\s+([\w]+)\s*(?:\((.*)\))?")
_QUOTED = re.compile(r"'((?:[^']|'')*)'|\"((?:[^\"]|\"\")*)\"")
#: a GeoJSON "crs" member of type link (its href in the member's properties, either order)
_CRS_LINK = re.compile(rb'"crs"\s*:\s*\{(?=.{0,600}?"type"\s*:\s*"link").{0,600}?"href"\s*:\s*"([^"]*)"', re.S)
SQLITE_MAGIC = b"SQLite format 3\x00"


def refuse_hidden_references(path: str) -> None:
    """Refuse, before GDAL reads it, a vector file that names other files or URLs in ways the server's path checks
    cannot see: a SQLite database (GeoPackage, SpatiaLite …) whose own schema declares virtual tables over files
    (VirtualText, VirtualShape, VirtualOGR …), and a GeoJSON whose "crs" is a link. out-of-root when what it names
    lies outside the workspace, unsupported otherwise. (The worker's confinement stops the reads regardless; this
    names the reason.)"""
    import os

    if path.startswith("/vsi") or not os.path.isfile(path):
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return
    if head.startswith(SQLITE_MAGIC):
        _refuse_virtual_tables(path)
    elif (m := _CRS_LINK.search(head)) is not None:
        href = m.group(1).decode("utf-8", "replace")
        raise GdalMcpError(
            "out-of-root" if "://" in href or href.startswith("/") else "unsupported",
            f"{os.path.basename(path)}: its \"crs\" is a link to '{href}', which this server never "
            "follows (a CRS is read from the data itself); remove the crs member or give the CRS with "
            "src_crs",
        )


def _refuse_virtual_tables(path: str) -> None:
    """Virtual tables over files, and views or triggers calling file or extension functions, in a SQLite schema."""
    import contextlib
    import sqlite3
    from urllib.parse import quote

    from gdal_mcp.engine import guard
    from gdal_mcp.sandbox import SQL_FORBIDDEN_FUNCTIONS

    try:
        uri = f"file:{quote(path)}?mode=ro&immutable=1"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as con:
            con.execute("PRAGMA trusted_schema=OFF")
            rows = con.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql LIKE '%virtual%' OR type IN ('view', 'trigger')"
            ).fetchall()
    except sqlite3.Error:
        return  # not a database Python's SQLite reads: GDAL reports it
    for kind, name, sql in rows:
        if kind in ("view", "trigger"):
            for call in re.findall(r"(\w+)\s*\(", sql or ""):
                if SQL_FORBIDDEN_FUNCTIONS.fullmatch(call):
                    raise GdalMcpError(
                        "unsupported",
                        f"{path}: {kind} '{name}' calls {call}(), which reaches "
                        "files, other databases or extensions; this server does not open it",
                    )
            continue
        m = _VIRTUAL.match(sql or "")
        if m is None or m.group(1).lower() not in FILE_MODULES:
            continue
        named = [a or b for a, b in _QUOTED.findall(m.group(2) or "")]
        guard.check_files([n for n in named if n.startswith("/")])  # out-of-root for a file outside the workspace
        raise GdalMcpError(
            "unsupported",
            f"{path}: table '{name}' is a {m.group(1)} virtual table over a file, "
            "which this server does not open; export the data to a regular table or file",
        )


def list_layers(path: str) -> list[tuple[str, str | None]]:
    """(name, geometry type) of every layer; a clear error when GDAL cannot read the source."""
    refuse_hidden_references(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layers = pyogrio.list_layers(path)
    except DataSourceError as e:
        text = str(e)
        if (missing := remote_missing(text)) is not None:
            raise missing from None
        if "not recognized as" in text or "not recognised as" in text:
            raise GdalMcpError(
                "unsupported", f"{path} is not a vector dataset GDAL can read (for rasters use raster_info)"
            ) from None
        raise GdalMcpError("gdal-error", f"GDAL cannot open {path}: {text}") from None
    return [(str(name), None if gtype in (None, "") else str(gtype)) for name, gtype in layers]


def choose_layer(path: str, layer: str | None, layers: list[tuple[str, str | None]] | None = None) -> str:
    """The layer asked for, or the only one; never silently the first of several."""
    layers = layers if layers is not None else list_layers(path)
    names = [n for n, _ in layers]
    if layer is None:
        if len(names) == 1:
            return names[0]
        if not names:
            raise GdalMcpError("invalid-argument", f"{path} has no layers")
        raise GdalMcpError("invalid-argument", f"{path} has {len(names)} layers; pass layer= one of: {', '.join(names)}")
    if layer not in names:
        raise GdalMcpError("not-found", f"layer '{layer}' not found; layers are: {', '.join(names) or '(none)'}")
    return layer


def layer_names(path: str, progress: Progress = no_progress) -> list[str]:
    """The names of the dataset's layers, nothing read from them (the server asks before it lets SQL name a layer
    whose name looks like a file, such as a GeoPackage layer called 'roads.gpkg')."""
    return [name for name, _ in list_layers(path)]


#: CSV open options: field types detected over the whole file (numbers as numbers, codes such as "01234" as text), as
#: ogr2ogr -oo AUTODETECT_TYPE=YES does. A .csvt sidecar (which every CSV this server writes has) takes precedence.
CSV_TYPES = {"AUTODETECT_TYPE": "YES", "AUTODETECT_SIZE_LIMIT": "0"}
CSV_SUFFIXES = (".csv", ".tsv", ".psv")


def open_options_for(path: str, open_options: dict[str, str] | None = None) -> dict[str, str]:
    """The open options to read `path` with: the caller's, over CSV_TYPES for a CSV file (else GDAL reads every
    CSV column as text unless a .csvt sidecar says otherwise)."""
    is_csv = path.upper().startswith("CSV:") or path.rsplit("/", 1)[-1].lower().endswith(CSV_SUFFIXES)
    return {**(CSV_TYPES if is_csv else {}), **(open_options or {})}
