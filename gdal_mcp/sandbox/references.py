"""What a dataset names inside itself, or beside itself: files GDAL opens though no argument names them.

A VRT's (raster, warped or OGR) sources and overviews, an MRF header's data and index files, a KML super-overlay's
images, the overview file an .aux.xml names, and the side files GDAL reads beside a dataset (.prj, world file,
.aux.xml, .ovr …) when they are links. Each named file is resolved like a path given as an argument
(`Sandbox._resolve_gdal`, inputs.py) and must be an allowed workspace file. After opening, `check_referenced`
checks the files GDAL itself says the dataset uses.
"""

from __future__ import annotations

import functools
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.paths import contained

if TYPE_CHECKING:
    from gdal_mcp.sandbox.core import Sandbox

MAX_REFERENCE_DEPTH = 8
# Elements of raster VRTs, warped VRTs and OGR VRTs that name another dataset.
VRT_REFERENCE_TAGS = frozenset({"sourcefilename", "sourcedataset", "srcdatasource", "overviewfilename"})
# Elements of an MRF header that name files GDAL reads: its data and index files, the dataset it caches.
MRF_REFERENCE_TAGS = frozenset({"datafile", "indexfile", "source"})

#: a directory with more entries than this is not listed for its links: its side files are looked up one by one
LINK_SCAN_MAX_ENTRIES = 20000


@functools.lru_cache(maxsize=1024)
def _links_in(directory: str, mtime_ns: int, inode: int) -> frozenset[str] | None:
    """The names of the symbolic links in `directory` as it is at `mtime_ns` (adding, removing or renaming an entry
    changes a directory's mtime, so a cached answer is never stale); None for a directory too large to list."""
    names: set[str] = set()
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= LINK_SCAN_MAX_ENTRIES:
                    return None
                try:
                    if entry.is_symlink():
                        names.add(entry.name)
                except OSError:
                    continue
    except OSError:
        return frozenset()
    return frozenset(names)


@functools.lru_cache(maxsize=1024)
def _overview_files(pam: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The OVERVIEW_FILE items of an .aux.xml as it is at (mtime, size); () when it cannot be parsed (GDAL ignores
    such a file too) or is too large to be a PAM file."""
    if size > 16 * 1024 * 1024:
        return ()
    try:
        tree = ET.parse(pam)
    except (OSError, ET.ParseError):
        return ()
    refs = []
    for el in tree.iter():
        if _local_name(el) == "mdi" and {k.lower(): v for k, v in el.attrib.items()}.get("key", "").upper() == "OVERVIEW_FILE":
            if (el.text or "").strip():
                refs.append((el.text or "").strip())
    return tuple(refs)


def _local_name(el: ET.Element) -> str:
    """An XML element's name without its namespace, in lower case (GDAL reads VRT and KML names in any case)."""
    return el.tag.split("}")[-1].lower() if isinstance(el.tag, str) else ""


def check_referenced(sb: Sandbox, names: Iterable[str], *, what: str = "input") -> None:
    """After opening: every file GDAL says the dataset uses must be inside a workspace."""
    for name in names:
        if not name or name.startswith("/vsimem/"):
            continue
        try:
            sb._resolve_gdal(name, base=None, what=what, depth=0)
        except GdalMcpError as e:
            if e.code == "not-found":
                continue  # listed sidecars that do not exist are harmless
            raise GdalMcpError(
                "out-of-root",
                f"{what} refers to a file outside the workspace ({Path(name).name}); refusing to read it",
            ) from None


def check_side_links(sb: Sandbox, real: Path, *, what: str) -> None:
    """A side file GDAL reads beside a dataset (its .prj, world file, .aux.xml, .ovr …) must not be a link out of
    the workspace: GDAL would follow it though no path names it (formats.SIDE_EXTENSIONS, NAME_SUFFIXES).

    Every metadata call resolves its input (in the server, and again in the worker's guard), so this must cost
    next to nothing: the links of a directory are listed once per state of the directory (_links_in)."""
    from gdal_mcp.formats import NAME_SUFFIXES, SIDE_EXTENSIONS

    parent = str(real.parent)
    try:
        st = os.stat(parent)
    except OSError:
        return
    links = _links_in(parent, st.st_mtime_ns, st.st_ino)
    if links is not None and not links:
        return  # the common case: no links in the directory at all
    stem = real.name.rsplit(".", 1)[0]
    names = {f"{stem}.{ext}" for ext in SIDE_EXTENSIONS} | {real.name + suffix for suffix in NAME_SUFFIXES}
    names |= {n.upper() for n in names}
    for name in (names & links) if links is not None else names:
        candidate = os.path.join(parent, name)
        if os.path.islink(candidate) and not contained(sb.roots, Path(os.path.realpath(candidate))):
            raise GdalMcpError(
                "out-of-root",
                f"{what} '{sb.display(real)}': its side file '{name}' is a link "
                "to a file outside the workspace; refusing to read it",
            )
    pam = real.parent / (real.name + ".aux.xml")
    if pam.is_file():
        pam_references(sb, real, pam, what=what)


def pam_references(sb: Sandbox, real: Path, pam: Path, *, what: str) -> None:
    """A dataset's .aux.xml may name an overview file (OVERVIEWS domain, OVERVIEW_FILE) GDAL then opens: it
    must be a workspace file."""
    try:
        st = pam.stat()
    except OSError:
        return
    for ref in _overview_files(str(pam), st.st_mtime_ns, st.st_size):
        reference(
            sb,
            ref,
            real.parent,
            what=what,
            depth=MAX_REFERENCE_DEPTH - 1,
            refused=f"{what} '{sb.display(real)}': its {pam.name} names the overview file '{ref}', which is not "
            "an allowed workspace file",
        )


def reference(sb: Sandbox, ref: str, base: Path | None, *, what: str, depth: int, refused: str) -> list[Path]:
    """A file (or URL) a dataset names inside itself, resolved like a path given as an argument: the files it
    reaches; out-of-root with `refused` when it is not an allowed workspace file (not-found etc. as they are)."""
    try:
        _, reached, _ = sb._resolve_gdal(ref, base=base, what=what, depth=depth)
    except GdalMcpError as e:
        raise GdalMcpError("out-of-root" if e.code in ("out-of-root", "unsupported") else e.code, refused) from None
    return reached


# ----- datasets that reference other files ---------------------------------------------
def vrt_references(sb: Sandbox, real: Path, *, what: str, depth: int) -> list[Path]:
    """Check every dataset a VRT (raster, warped or OGR) names; return the files it reaches."""
    try:
        with open(real, "rb") as fh:
            head = fh.read(2048)
    except OSError:
        return []
    name = real.name.lower()
    if (
        b"gdal_streamed_alg" in head
        or name.endswith((".gdalg.json", ".gti", ".gti.gpkg", ".gti.fgb"))
        or (b"<GDALTileIndexDataset" in head)
    ):
        # Pipelines and tile indexes name their inputs in ways we cannot check before GDAL runs them.
        raise GdalMcpError(
            "unsupported",
            f"{what}: {real.name} is a GDAL pipeline or tile index, which "
            "this server does not open; use the files it refers to directly",
        )
    low_head = head.lower()
    is_mrf = b"<mrf_meta" in low_head
    if name.endswith(".kml") and b"<kml" in low_head:
        return kml_overlays(sb, real, what=what, depth=depth)
    if b"<vrtdataset" not in low_head and b"<ogrvrtdatasource" not in low_head and not is_mrf:
        return []
    try:
        tree = ET.parse(real)
    except ET.ParseError as e:
        raise GdalMcpError("gdal-error", f"{what}: {real.name} is not valid VRT XML ({e})") from None
    files: list[Path] = []
    for el in tree.iter():
        # GDAL reads VRT element and attribute names in any letter case (CPLGetXMLNode): so does this.
        tag = _local_name(el)
        ref = (el.text or "").strip()
        if tag == "pixelfunctionlanguage" and ref.lower() == "python":
            raise GdalMcpError(
                "unsupported",
                f"{what}: {real.name} has a pixel function in Python, which this "
                "server never runs; use raster_calc for band math",
            )
        if tag not in (MRF_REFERENCE_TAGS if is_mrf else VRT_REFERENCE_TAGS) or not ref:
            continue
        attrs = {k.lower(): v for k, v in el.attrib.items()}
        relative = attrs.get("relativetovrt", "0") == "1" or is_mrf  # MRF: relative to its header
        # OGR VRTs resolve SrcDataSource against the VRT's directory when relativeToVRT="1".
        ref_base = real.parent if relative or not ref.startswith("/") else None
        files += reference(
            sb,
            ref,
            ref_base,
            what=f"{what} (via {real.name})",
            depth=depth + 1,
            refused=f"{what}: {real.name} refers to '{ref}', which is not an allowed workspace file (the files a "
            "dataset names must lie inside the workspace)",
        )
    return files


def kml_overlays(sb: Sandbox, real: Path, *, what: str, depth: int) -> list[Path]:
    """The images a KML's ground overlays name (read by GDAL's KML super-overlay driver): local files must be
    workspace files (a URL is the network's business: refused by the workers' confinement unless allowed).
    Other hrefs (icons, network links) GDAL's vector drivers do not follow."""
    try:
        if real.stat().st_size > 16 * 1024 * 1024:
            return []
        tree = ET.parse(real)
    except (OSError, ET.ParseError):
        return []
    files: list[Path] = []
    for overlay in tree.iter():
        if _local_name(overlay) != "groundoverlay":
            continue
        for el in overlay.iter():
            ref = (el.text or "").strip()
            if _local_name(el) != "href" or not ref:
                continue
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", ref) and not ref.lower().startswith("file://"):
                continue
            files += reference(
                sb,
                ref,
                real.parent,
                what=what,
                depth=depth + 1,
                refused=f"{what}: {real.name} overlays '{ref}', which is not an allowed workspace file",
            )
    return files
