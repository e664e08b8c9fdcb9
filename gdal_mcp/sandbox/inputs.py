"""GDAL dataset names given as inputs: plain files, /vsi chains, archives, connection strings, network locations
and workspace globs, each resolved to what GDAL opens (real paths substituted) and the files it reaches.

`resolve_gdal` is the one resolver: every dataset name, and every file a dataset names inside itself
(references.py, which calls back through `Sandbox._resolve_gdal`), goes through it.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import references
from gdal_mcp.sandbox.paths import TMP_PREFIX, Roots, candidate, check_text, contained, real_file
from gdal_mcp.sandbox.references import MAX_REFERENCE_DEPTH

if TYPE_CHECKING:
    from gdal_mcp.sandbox.core import Sandbox

log = logging.getLogger("gdal_mcp.sandbox")

MAX_PATTERN_MATCHES = 10000

NETWORK_VSI = (
    "/vsicurl/",
    "/vsicurl_streaming/",
    "/vsis3/",
    "/vsis3_streaming/",
    "/vsigs/",
    "/vsigs_streaming/",
    "/vsiaz/",
    "/vsiaz_streaming/",
    "/vsiadls/",
    "/vsioss/",
    "/vsioss_streaming/",
    "/vsiswift/",
    "/vsiswift_streaming/",
    "/vsiwebhdfs/",
    "/vsihdfs/",
)
NETWORK_SCHEMES = ("http://", "https://", "ftp://", "ftps://", "s3://", "gs://", "az://", "abfs://")
ARCHIVE_VSI = ("/vsizip/", "/vsitar/", "/vsi7z/", "/vsirar/")
ARCHIVE_SUFFIXES = (
    ".zip",
    ".kmz",
    ".ods",
    ".xlsx",
    ".xlsm",
    ".docx",
    ".dwf",
    ".shz",
    ".tar",
    ".tgz",
    ".tar.gz",
    ".tar.bz2",
    ".7z",
    ".rar",
)
# Connection strings whose file part we can locate; the quoted form is preferred by GDAL.
FILE_CONNECTION_PREFIXES = frozenset(
    {
        "NETCDF",
        "HDF5",
        "HDF4_SDS",
        "HDF4_EOS",
        "HDF4_GR",
        "HDF4",
        "GPKG",
        "GTIFF_DIR",
        "NITF_IM",
        "ZARR",
        "PDF",
        "SENTINEL2",
        "RASTERLITE",
        "GRIB",
        "JP2OPENJPEG",
    }
)
# Connection strings that reach a remote service; allowed only with --allow-network.
NETWORK_CONNECTION_PREFIXES = frozenset(
    {
        "WMS",
        "WMTS",
        "WFS",
        "WCS",
        "OAPIF",
        "STACIT",
        "STACTA",
        "EEDA",
        "EEDAI",
        "DAAS",
        "NGW",
        "PLSCENES",
        "CARTO",
        "ES",
        "ELASTIC",
        "AMIGOCLOUD",
        "GOOGLESHEETS",
    }
)
_CONN_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*):(.*)$", re.S)


@dataclass(frozen=True)
class ResolvedInput:
    """A user input made safe: `gdal_path` is what GDAL opens (real paths substituted)."""

    user: str
    gdal_path: str
    display: str
    files: tuple[Path, ...] = ()
    network: bool = False


# ----- GDAL dataset names --------------------------------------------------------------
def resolve_input(sb: Sandbox, path: str, *, what: str = "input") -> ResolvedInput:
    """Resolve a dataset name as GDAL understands it: file, /vsi chain or connection string."""
    check_text(path, what)
    gdal_path, files, network = resolve_gdal(sb, path, base=None, what=what, depth=0)
    display = sb.scrub(gdal_path) if not network else sb.bucket_display(path)
    return ResolvedInput(user=path, gdal_path=gdal_path, display=display, files=tuple(files), network=network)


def resolve_inputs(
    sb: Sandbox, inputs: list[str] | None, pattern: str | None, *, what: str = "inputs", limit: int = MAX_PATTERN_MATCHES
) -> list[ResolvedInput]:
    """Several datasets: the list given, or the workspace files a glob matches (sorted), never both."""
    if (inputs is None) == (pattern is None):
        raise GdalMcpError(
            "invalid-argument",
            f"give either {what} (a list of paths) or input_pattern (a glob such as 'tiles/*.tif'), not both and not neither",
        )
    if inputs is not None:
        return [resolve_input(sb, p, what=f"{what}[{i}]") for i, p in enumerate(inputs)]
    assert pattern is not None
    return [resolve_input(sb, str(p), what="input_pattern match") for p in sb.glob(pattern, limit=limit)]


def glob(roots: Roots, pattern: str, *, limit: int = MAX_PATTERN_MATCHES) -> list[Path]:
    """Regular files under the first workspace matching a glob ('tiles/*.tif', 'a/**/b.tif'), sorted.

    The pattern is relative to the workspace: absolute patterns, '..' and GDAL syntax are refused; every
    match is checked like any other input (a symlink out of the workspace is refused by resolve_input).
    """
    check_pattern(pattern)
    root = roots[0]
    matches: list[Path] = []
    for p in root.glob(pattern):
        if p.name.startswith(TMP_PREFIX) or any(part.startswith(TMP_PREFIX) for part in p.parts):
            continue
        if p.is_file():
            matches.append(p)
            if len(matches) > limit:
                raise too_many_matches(pattern, limit)
    if not matches:
        raise no_match(pattern)
    return sorted(matches)


def too_many_matches(pattern: str, limit: int) -> GdalMcpError:
    return GdalMcpError("invalid-argument", f"input_pattern '{pattern}' matches more than {limit} files; narrow it")


def no_match(pattern: str) -> GdalMcpError:
    return GdalMcpError(
        "not-found", f"input_pattern '{pattern}' matches no file in the workspace; list_datasets shows what is there"
    )


def check_pattern(pattern: str) -> None:
    """An input_pattern is a glob relative to the workspace, with a wildcard (no URL, no '..', no GDAL syntax)."""
    check_text(pattern, "input_pattern")
    if "://" in pattern or pattern.lower().startswith(("/vsis3", "/vsicurl", "/vsigs", "/vsiaz")):
        raise GdalMcpError(
            "unsupported",
            f"input_pattern '{pattern}': globs match workspace files only; for remote objects, list them with "
            "list_datasets path=s3://bucket/prefix (pattern= filters it) and pass inputs=[…]",
        )
    pure = PurePosixPath(pattern)
    if pure.is_absolute() or pattern.startswith("~") or ".." in pure.parts or pattern.startswith("/vsi"):
        raise GdalMcpError(
            "out-of-root", f"input_pattern '{pattern}' must be a glob relative to the workspace, e.g. 'tiles/*.tif'"
        )
    if not any(ch in pattern for ch in "*?["):
        raise GdalMcpError(
            "invalid-argument",
            f"input_pattern '{pattern}' has no wildcard; give inputs=[…] for named files or a glob such as 'tiles/*.tif'",
        )


def pattern_parts(pattern: str) -> tuple[str, str]:
    """(the pattern's leading directories without wildcards, the rest of it): where to list object names, and the glob
    they are matched with there (engine/catalog.glob_match, pathlib's meaning). For a bucket workspace's input_pattern:
    'scenes/2024-*/*.tif' -> ('scenes', '2024-*/*.tif')."""
    check_pattern(pattern)
    parts = PurePosixPath(pattern).parts
    fixed = 0
    while fixed < len(parts) - 1 and not any(ch in parts[fixed] for ch in "*?["):
        fixed += 1
    if sum(part == "**" for part in parts) > MAX_RECURSIVE_WILDCARDS:
        raise GdalMcpError("invalid-argument", f"input_pattern '{pattern}': at most {MAX_RECURSIVE_WILDCARDS} '**' in a glob")
    return "/".join(parts[:fixed]), "/".join(parts[fixed:])


#: '**' components one input_pattern may hold
MAX_RECURSIVE_WILDCARDS = 3


def network(sb: Sandbox, path: str, what: str) -> tuple[str, list[Path], bool]:
    """A remote location: in GDAL's one spelling of its scheme when the operator's allow-list covers it (remote.py)."""
    location = sb.remote.check(path, what=what)
    return location.gdal_path, [], True


def network_connection(sb: Sandbox, path: str, what: str) -> tuple[str, list[Path], bool]:
    """A connection string to a remote service (WMS:, WFS:, STACIT: …): its URLs are not checked one by one, so only
    --allow-network (every location) opens it."""
    if not sb.remote.any_location:
        raise GdalMcpError(
            "unsupported",
            f"{what} '{path.split('?', 1)[0][:120]}': '{path.split(':', 1)[0]}:' connections reach services this server "
            "does not check against its allowed remote locations; read the service's files by URL instead"
            + (" (stac_search finds a STAC item's assets)" if path.upper().startswith("STAC") else ""),
        )
    return path, [], True


def resolve_gdal(sb: Sandbox, path: str, *, base: Path | None, what: str, depth: int) -> tuple[str, list[Path], bool]:
    """(what GDAL opens, the workspace files it reaches, whether it is a network location) for a dataset name."""
    if depth > MAX_REFERENCE_DEPTH:
        raise GdalMcpError("unsupported", f"{what}: datasets nest more than {MAX_REFERENCE_DEPTH} levels deep")
    low = path.lower()
    if low.startswith("stac://"):
        target = sb.stac_assets.get(path)
        if target is None:
            raise GdalMcpError(
                "not-found",
                f"{what} '{path}' names no STAC asset this server has listed; run stac_search first (each asset's uri "
                "is valid after the search that returned it), or pass the asset's input",
            )
        return resolve_gdal(sb, target, base=base, what=what, depth=depth + 1)
    if low.startswith(NETWORK_SCHEMES) or low.startswith(NETWORK_VSI) or low.startswith(("/vsicurl?", "/vsicurl_streaming?")):
        return network(sb, path, what)
    if low.startswith("/vsigzip/"):
        inner = path[len("/vsigzip/") :]
        g, files, net = resolve_gdal(sb, inner, base=base, what=what, depth=depth + 1)
        return "/vsigzip/" + g, files, net
    for prefix in ARCHIVE_VSI:
        if low.startswith(prefix):
            return resolve_archive(sb, prefix, path[len(prefix) :], base=base, what=what, depth=depth)
    if low.startswith("/vsi"):
        raise GdalMcpError(
            "unsupported",
            f"{what} '{path}' uses a GDAL virtual file system this server does not allow; "
            "supported: /vsizip/, /vsitar/, /vsigzip/, /vsi7z/, /vsirar/",
        )
    if low.startswith("file://"):
        return resolve_gdal(sb, path[len("file://") :], base=base, what=what, depth=depth + 1)
    m = _CONN_RE.match(path)
    if m and not literal_exists(sb.roots, path, base):
        return resolve_connection(sb, m.group(1), m.group(2), path, base=base, what=what, depth=depth)
    if base is None and (location := sb.bucket_location(path, what=what)) is not None:
        return network(sb, location.url, what)  # an object of the bucket workspace
    real = real_file(sb.roots, path, what=what, base=base)
    files = [real]
    if real.is_file():
        references.check_side_links(sb, real, what=what)
        files += references.vrt_references(sb, real, what=what, depth=depth)
    return str(real), files, False


def literal_exists(roots: Roots, path: str, base: Path | None) -> bool:
    try:
        real = Path(os.path.realpath(candidate(roots, path, base)))
    except (OSError, ValueError):
        return False
    return contained(roots, real) and real.exists()


def resolve_archive(
    sb: Sandbox, prefix: str, rest: str, *, base: Path | None, what: str, depth: int
) -> tuple[str, list[Path], bool]:
    if rest.startswith("{"):
        end = rest.find("}")
        if end < 0:
            raise GdalMcpError("invalid-argument", f"{what}: unbalanced '{{' in {prefix} path")
        archive, inner = rest[1:end], rest[end + 1 :].lstrip("/")
    else:
        archive, inner = split_archive(rest, what=what, prefix=prefix)
    if inner and ".." in PurePosixPath(inner).parts:
        raise GdalMcpError("invalid-argument", f"{what}: '..' is not allowed inside an archive path")
    g, files, net = resolve_gdal(sb, archive, base=base, what=what, depth=depth + 1)
    if not net and not Path(g).is_file() and not g.startswith("/vsi"):
        raise GdalMcpError("invalid-argument", f"{what}: {sb.scrub(g)} is not an archive file")
    joined = prefix + ("{" + g + "}" if rest.startswith("{") else g) + ("/" + inner if inner else "")
    return joined, files, net


def split_archive(rest: str, *, what: str, prefix: str) -> tuple[str, str]:
    if rest.lower().startswith("/vsi"):
        # A chained archive: split at the first component with an archive suffix after the chain.
        search_from = rest.find("/", 1)
    else:
        search_from = 0
    parts = rest.split("/")
    acc = 0
    for i, part in enumerate(parts):
        acc += len(part) + (1 if i else 0)
        if acc <= search_from:
            continue
        if part.lower().endswith(ARCHIVE_SUFFIXES):
            return "/".join(parts[: i + 1]), "/".join(parts[i + 1 :])
    raise GdalMcpError(
        "invalid-argument",
        f"{what}: no archive file (.zip, .tar, .tgz, .7z …) found in {prefix}{rest}; "
        f"write it as {prefix}path/to/archive.zip/member",
    )


def resolve_connection(
    sb: Sandbox, driver: str, rest: str, original: str, *, base: Path | None, what: str, depth: int
) -> tuple[str, list[Path], bool]:
    up = driver.upper()
    if up in NETWORK_CONNECTION_PREFIXES:
        return network_connection(sb, original, what)
    if up not in FILE_CONNECTION_PREFIXES:
        raise GdalMcpError(
            "unsupported",
            f"{what} '{original}': '{driver}:' connection strings are not supported "
            "(databases and services are outside the workspace); give a file path",
        )
    # Quoted file part: NETCDF:"f.nc":var, HDF5:"f.h5"://x, HDF4_EOS:EOS_GRID:"f.hdf":g:f
    q = re.search(r'"([^"]*)"', rest)
    if q and '"' in rest[q.end() :]:
        # one file per connection string: GDAL and the engine must not read a second quoted path the check did not see
        raise GdalMcpError(
            "invalid-argument",
            f"{what} '{original}': a {driver}: connection string names one file, in one pair of quotes "
            f'(e.g. {driver}:"data.nc":variable); a variable name needs no quotes',
        )
    if q:
        g, files, net = resolve_gdal(sb, q.group(1), base=base, what=what, depth=depth + 1)
        return f'{driver}:{rest[: q.start()]}"{g}"{rest[q.end() :]}', files, net
    # Unquoted: try each ':' split; GTIFF_DIR:1:file and NITF_IM:0:file put the file last.
    if up in {"GTIFF_DIR", "NITF_IM", "PDF"}:
        head, _, tail = rest.partition(":")
        g, files, net = resolve_gdal(sb, tail, base=base, what=what, depth=depth + 1)
        return f"{driver}:{head}:{g}", files, net
    segments = rest.split(":")
    last_error: GdalMcpError | None = None
    for n in range(len(segments), 0, -1):
        candidate, remainder = ":".join(segments[:n]), segments[n:]
        if not candidate:
            continue
        try:
            g, files, net = resolve_gdal(sb, candidate, base=base, what=what, depth=depth + 1)
        except GdalMcpError as e:
            if e.code == "out-of-root":
                raise
            last_error = e
            continue
        return f"{driver}:{g}" + "".join(":" + s for s in remainder), files, net
    raise last_error or GdalMcpError("invalid-argument", f"{what} '{original}': no file named in it")
