"""Paths hidden in arguments that are not paths: SQL, dataset open options (GDAL -oo) and creation options
(GDAL -co, -lco).

SQL may only read the layers of its input; an open option that names a file is resolved inside the workspace
like any input (`Sandbox._resolve_gdal`, inputs.py); a creation option never names a file at all.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.inputs import NETWORK_SCHEMES

if TYPE_CHECKING:
    from gdal_mcp.sandbox.core import Sandbox

# SQL (OGR SQL and the SQLite dialect): statements that are not a plain read, functions that reach files, other
# databases, extensions or the network, and SpatiaLite's virtual-table modules over files.
SQL_FORBIDDEN_WORDS = frozenset(
    {
        "attach",
        "detach",
        "pragma",
        "insert",
        "update",
        "delete",
        "drop",
        "alter",
        "create",
        "vacuum",
        "reindex",
        "savepoint",
        "release",
        "begin",
        "commit",
        "rollback",
        "analyze",
    }
)
SQL_FORBIDDEN_FUNCTIONS = re.compile(
    r"(load_extension|ogr_datasource_load_layers|ogr_geocode(_reverse)?|readfile|writefile|edit|fsdir|"
    r"(import|export)\w*|blob(from|to)file|xb_(load|store)xml|sqlproc_\w*|storedproc_\w*|"
    r"initspatialmetadata\w*|createstylingtables|rl2_\w*)",
    re.I,
)
SQL_VIRTUAL_MODULE = re.compile(r"virtual\w*", re.I)
# Tokens after which a SELECT's FROM list ends (at the same parenthesis depth).
SQL_CLAUSE_END = frozenset(
    {"where", "group", "order", "limit", "having", "window", "union", "except", "intersect", "on", "using", "offset"}
)
_SQL_TOKEN_RE = re.compile(
    r"""(?P<space>\s+|--[^\n]*|/\*.*?(\*/|$))|(?P<str>'(?:[^']|'')*'?)|(?P<qid>"(?:[^"]|"")*"?|`(?:[^`]|``)*`?|\[[^\]]*\]?)"""
    r"""|(?P<word>[A-Za-z_\u0080-\uffff][\w$\u0080-\uffff]*)|(?P<num>\d[\w.]*)|(?P<op>.)""",
    re.S,
)
# Words in the name of a GDAL option whose value is a file or a URL GDAL reads or writes: open options (GML
# GFS_TEMPLATE, GMLAS XSD/CONFIG_FILE, OSM CONFIG_FILE, MVT METADATA_FILE …) and creation options (MRF
# DATANAME/INDEXNAME, netCDF CONFIG_FILE, JPEG 2000 GMLJP2V2_DEF, GML XSISCHEMAURI, PDF COMPOSITION_FILE …).
OPTION_FILE_WORDS = (
    "FILE",
    "TEMPLATE",
    "XSD",
    "SCHEMA",
    "PATH",
    "DIR",
    "DATANAME",
    "INDEXNAME",
    "URI",
    "URL",
    "_DEF",
    "EXTRA_IMAGES",
)
# The values such an option may still take: a switch or a number, never a name (nor inline JSON/XML listing files)
_OPTION_SWITCH_RE = re.compile(r"(?i)yes|no|true|false|on|off|[-+\d.]+")
# Open options that run SQL of their own (GeoPackage / SQLite PRELUDE_STATEMENTS can ATTACH any database).
FORBIDDEN_OPEN_OPTIONS = frozenset({"PRELUDE_STATEMENTS"})
_PATH_LIKE_RE = re.compile(r"[/\\]|^~|^[A-Za-z][A-Za-z0-9_]*:|\.[A-Za-z][A-Za-z0-9]{0,7}$")


def sql_tokens(sql: str) -> list[tuple[str, str]]:
    """(kind, text) of each SQL token outside comments: str, qid (quoted identifier), word, num, op."""
    out = []
    for m in _SQL_TOKEN_RE.finditer(sql):
        kind = m.lastgroup or "op"
        if kind != "space":
            out.append((kind, m.group(kind)))
    return out


def _sql_name(kind: str, text: str) -> str:
    """The name a token stands for: quotes removed ('' and "" unescaped)."""
    if kind == "str":
        return text[1:-1].replace("''", "'") if len(text) > 1 and text.endswith("'") else text[1:]
    if kind == "qid":
        close = {"[": "]"}.get(text[0], text[0])
        inner = text[1:-1] if len(text) > 1 and text.endswith(close) else text[1:]
        return inner.replace(close * 2, close) if close != "]" else inner
    return text


# ----- paths inside SQL and open options ---------------------------------------------------
def check_sql(
    sb: Sandbox, sql: str, *, what: str = "sql", layers: Collection[str] = (), file_like: list[str] | None = None
) -> None:
    """Refuse SQL (OGR SQL or the SQLite dialect) that could reach beyond the dataset it runs on.

    GDAL opens any data source named as a table qualifier ("other.shp"."layer", JOIN 'x.gpkg'.layer) or
    given to ogr_datasource_load_layers(); SQLite can ATTACH databases and load extensions; SpatiaLite
    builds may have file functions (ImportSHP, BlobFromFile …) and virtual tables over files. A name of
    a path outside the workspace is `out-of-root`; any other such construct is `invalid-argument`.

    A table named alone (no qualifier) that looks like a file ("nc.gpkg", 'a/b.shp') is refused too, unless it is
    exactly one of `layers`, the input's own layer names: GDAL reads an unqualified table from the input's layers
    only, so the input's layer called 'nc.gpkg' is that layer, never a file (a qualified name stays refused whatever
    the layers are called). `file_like`: collect such names there instead of refusing them (sql_file_like_tables).
    """
    if not isinstance(sql, str) or not sql.strip():
        raise GdalMcpError("invalid-argument", f"{what} is empty")
    if "\x00" in sql:
        raise GdalMcpError("invalid-argument", f"{what} contains a NUL byte")
    tokens = sql_tokens(sql)
    in_from = [False]  # per parenthesis depth: inside a FROM list
    expect_table = False
    for i, (kind, text) in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
        low = text.lower()
        if kind == "word" and low in SQL_FORBIDDEN_WORDS:
            raise GdalMcpError("invalid-argument", f"{what} must be a read-only SELECT; '{text}' is not allowed")
        if kind in ("word", "qid") and nxt[1] == "(" and SQL_FORBIDDEN_FUNCTIONS.fullmatch(_sql_name(kind, text)):
            if low == "ogr_datasource_load_layers" and i + 2 < len(tokens) and tokens[i + 2][0] == "str":
                sql_source(sb, _sql_name(*tokens[i + 2]), what)
            raise GdalMcpError(
                "invalid-argument",
                f"{what} may not call {_sql_name(kind, text)}(): it reaches files, other databases, extensions or the network",
            )
        if kind == "word" and SQL_VIRTUAL_MODULE.fullmatch(text):
            raise GdalMcpError("invalid-argument", f"{what} may not use SpatiaLite's {text} (a virtual table over a file)")
        if text == "(":
            in_from.append(False)
            expect_table = False
            continue
        if text == ")":
            if len(in_from) > 1:
                in_from.pop()
            continue
        if kind == "word" and low in ("from", "join"):
            in_from[-1] = True
            expect_table = True
            continue
        if kind == "word" and low in SQL_CLAUSE_END:
            in_from[-1] = False
        if text == "," and in_from[-1]:
            expect_table = True
            continue
        if expect_table and kind in ("word", "qid", "str"):
            expect_table = False
            name = _sql_name(kind, text)
            if nxt[1] == "." and i + 2 < len(tokens) and tokens[i + 2][0] in ("word", "qid", "str"):
                if name.lower() not in ("main", "temp"):
                    sql_source(sb, name, what)  # "datasource"."layer": another data source
            elif kind != "word" and _PATH_LIKE_RE.search(name) and name not in layers:
                spelt = next((n for n in layers if n.lower() == name.lower()), None)
                if spelt is not None:
                    raise GdalMcpError(
                        "invalid-argument", f"{what} names '{name}': the input's layer is '{spelt}'; spell it exactly so"
                    )
                if file_like is None:
                    sql_source(sb, name, what)
                else:
                    file_like.append(name)
            continue
        if (
            kind in ("str", "qid")
            and nxt[1] == "."
            and i + 2 < len(tokens)
            and _PATH_LIKE_RE.search(_sql_name(kind, text))
            and in_from[-1]
        ):
            sql_source(sb, _sql_name(kind, text), what)
        expect_table = False


def sql_file_like_tables(sb: Sandbox, sql: str, *, what: str = "sql") -> list[str]:
    """The unqualified table names of `sql` that look like files ('nc.gpkg'): check_sql accepts them only when
    they are layers of the input, so the caller asks for its layer names when there are any. Everything else
    check_sql refuses is refused here already."""
    found: list[str] = []
    check_sql(sb, sql, what=what, file_like=found)
    return found


def sql_source(sb: Sandbox, name: str, what: str) -> None:
    """A data source named inside SQL: always refused; out-of-root when it lies outside the workspace."""
    outside = False
    try:
        sb._resolve_gdal(name, base=None, what=what, depth=0)
    except GdalMcpError as e:
        outside = e.code == "out-of-root"
    if outside:
        raise GdalMcpError(
            "out-of-root", f"{what} names '{name}', which is outside the workspace; SQL may only read the layers of its input"
        )
    raise GdalMcpError(
        "invalid-argument",
        f"{what} names another data source ('{name}'); SQL may only read the "
        "layers of its input. To combine datasets use vector_join, vector_overlay or vector_merge",
    )


def check_open_options(sb: Sandbox, options: Mapping[str, object] | None, *, what: str = "open_options") -> dict[str, str]:
    """Dataset open options (GDAL -oo) made safe: values naming files resolved inside the workspace."""
    out: dict[str, str] = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key):
            raise GdalMcpError("invalid-argument", f"{what}: {key!r} is not an option name (letters, digits, _)")
        if key.upper() in FORBIDDEN_OPEN_OPTIONS:
            raise GdalMcpError("invalid-argument", f"{what}: {key} runs SQL of its own and is not allowed")
        text = ("YES" if value else "NO") if isinstance(value, bool) else str(value)
        if "\x00" in text:
            raise GdalMcpError("invalid-argument", f"{what}: {key} contains a NUL byte")
        names_file = any(w in key.upper() for w in OPTION_FILE_WORDS) and not _OPTION_SWITCH_RE.fullmatch(text)
        if text and (names_file or re.search(r"[/\\]", text) or text.lower().startswith(NETWORK_SCHEMES)):
            text, _, _ = sb._resolve_gdal(text, base=None, what=f"{what} {key}", depth=0)
        out[key] = text
    return out


def check_creation_options(options: Mapping[str, object] | None, *, what: str = "creation option") -> None:
    """Creation options (GDAL -co, -lco) write only the output asked for: one that names a file or URL — by its
    name (OPTION_FILE_WORDS, unless its value is a switch such as GMLJP2V2_DEF=YES) or by a value that is a path
    or URL — is invalid-argument before any work starts."""
    for key, value in (options or {}).items():
        text = ("YES" if value else "NO") if isinstance(value, bool) else str(value)
        if any(w in str(key).upper() for w in OPTION_FILE_WORDS) and not _OPTION_SWITCH_RE.fullmatch(text.strip()):
            raise GdalMcpError(
                "invalid-argument",
                f"{what} {key} names a file or URL; this server writes only the "
                "output it is asked for (leave the option out, or give it YES/NO)",
            )
        if text.startswith(("/", "~", "\\")) or "://" in text or "../" in text or "..\\" in text:
            raise GdalMcpError(
                "invalid-argument", f"{what} {key}={text[:60]!r} is a path or URL; option values are settings, never files"
            )
