"""What lies in a workspace directory, and whether GDAL sees each file as raster, vector or other."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import unicodedata
import warnings
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from gdal_mcp.engine import guard
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import DatasetEntry, DatasetList

MAX_SCAN = 100_000
SIDECAR_SUFFIXES = (
    ".provenance.json",  # the provenance record beside an output (engine/provenance.py)
    ".aux.xml",
    ".ovr",
    ".msk",
    ".shx",
    ".prj",
    ".cpg",
    ".sbn",
    ".sbx",
    ".qix",
    ".qmd",
    ".pgw",
    ".pngw",
    ".jgw",
    ".jpgw",
    ".tfw",
    ".tifw",
    ".wld",
    ".aux",
    ".rrd",
)
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".tar.gz", ".7z", ".rar", ".gz")
#: archive members read from the archive's directory, and opened to classify them, per archive
MAX_ARCHIVE_MEMBERS = 10_000
MAX_MEMBER_OPENS = 50
#: members opened when the archive itself is listed
MAX_ARCHIVE_OPENS = 1000


def _suffix_sidecar(leaf: str) -> str | None:
    """The dataset a file name is a side file of, by its suffix alone (an .aux.xml, a .shx …)."""
    low = leaf.lower()
    for suf in SIDECAR_SUFFIXES:
        if low.endswith(suf) and len(low) > len(suf):
            return leaf[: -len(suf)]
    return None


def _sidecar_of(p: Path) -> str | None:
    side = _suffix_sidecar(p.name)
    if side is not None:
        return side
    if p.name.lower().endswith(".dbf") and p.with_suffix(".shp").exists():
        return p.with_suffix(".shp").name
    return None


def classify(path: Path) -> DatasetEntry:
    """Open the file with GDAL (raster first, then vector) to tell what it is."""
    size = path.stat().st_size if path.is_file() else 0
    rel = str(path)  # the server shows it workspace-relative
    side = _sidecar_of(path)
    if side:
        return DatasetEntry(path=rel, kind="other", size=size, detail=f"sidecar of {side}")
    low = path.name.lower()
    if low.endswith(ARCHIVE_SUFFIXES):
        return DatasetEntry(path=rel, kind="other", size=size, detail="archive (its datasets are listed after it)")
    if low.endswith((".gdalg.json", ".gdalg")):
        return DatasetEntry(path=rel, kind="other", size=size, detail="GDAL pipeline file (not opened)")
    from gdal_mcp.engine.raster.headers import check_header

    try:
        check_header(str(path))
    except GdalMcpError as e:
        return DatasetEntry(path=rel, kind="other", size=size, detail=e.message.replace(str(path), path.name))
    return open_entry(str(path), rel, size)


def open_entry(gdal_path: str, rel: str, size: int) -> DatasetEntry:
    """The entry of what GDAL opens at `gdal_path` (a file, or an archive member): raster with its CRS and
    resolution, vector with its layers and the first one's CRS, else other."""
    from gdal_mcp.engine.crs import crs_label

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import rasterio

        try:
            with rasterio.open(gdal_path) as ds:
                if ds.count or ds.subdatasets:
                    if not ds.count:
                        return DatasetEntry(
                            path=rel, kind="raster", size=size, driver=ds.driver, detail=f"{len(ds.subdatasets)} subdatasets"
                        )
                    georef = ds.crs is not None or not ds.transform.is_identity
                    return DatasetEntry(
                        path=rel,
                        kind="raster",
                        size=size,
                        driver=ds.driver,
                        detail=f"{ds.width}x{ds.height}, {ds.count} band(s) {ds.dtypes[0]}",
                        crs=crs_label(ds.crs),
                        resolution=[abs(ds.res[0]), abs(ds.res[1])] if georef else None,
                    )
        except Exception:  # noqa: BLE001 - not a raster; try vector next
            pass
        import pyogrio

        try:
            layers = pyogrio.list_layers(gdal_path)
            if len(layers):
                info = pyogrio.read_info(gdal_path, layer=0)
                names = ", ".join(str(n) for n in layers[:5, 0]) + (" …" if len(layers) > 5 else "")
                crs = info.get("crs")
                return DatasetEntry(
                    path=rel,
                    kind="vector",
                    size=size,
                    driver=info.get("driver"),
                    detail=f"{len(layers)} layer(s): {names}",
                    crs=_vector_crs(crs) if crs else None,
                )
        except Exception:  # noqa: BLE001 - not a vector either
            pass
    return DatasetEntry(path=rel, kind="other", size=size, detail=_why_not(gdal_path))


def _why_not(gdal_path: str) -> str:
    """Why GDAL opens nothing here, as raster_info would say it (engine/raster/opening.py)."""
    if gdal_path.lower().endswith((".hdf", ".hdf4", ".he4")):
        return "HDF4 file: this GDAL build has no HDF4 driver (convert it to netCDF or GeoTIFF elsewhere)"
    return "not a dataset GDAL can open"


def _vector_crs(text: str) -> str | None:
    if re.fullmatch(r"[A-Za-z]+:\d+", text):
        return text.upper()
    from gdal_mcp.engine.crs import crs_label, layer_crs

    try:
        return crs_label(layer_crs(text))
    except GdalMcpError:
        return None


def archive_members(path: Path) -> tuple[str, list[tuple[str, int]]] | None:
    """(GDAL prefix, [(member, size)] of its regular files, in archive order) of a .zip, .tar(.gz) or .gz file; None
    for other files and archives Python cannot list (.7z, .rar) or cannot read."""
    import tarfile
    import zipfile

    low = path.name.lower()
    try:
        if low.endswith((".zip", ".kmz")):
            with zipfile.ZipFile(path) as z:
                infos = z.infolist()[:MAX_ARCHIVE_MEMBERS]
                return "/vsizip/", [(i.filename, i.file_size) for i in infos if not i.is_dir()]
        if low.endswith((".tar", ".tgz", ".tar.gz")):
            out: list[tuple[str, int]] = []
            with tarfile.open(path) as t:
                for m in t:
                    if m.isfile():
                        out.append((m.name, m.size))
                    if len(out) >= MAX_ARCHIVE_MEMBERS:
                        break
            return "/vsitar/", out
        if low.endswith(".gz"):
            return "/vsigzip/", [("", 0)]
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError, ValueError):
        return None
    return None


def member_entries(path: Path, pattern: str | None = None, max_opens: int = MAX_MEMBER_OPENS) -> tuple[list[DatasetEntry], int]:
    """The datasets inside an archive (sidecars and non-datasets left out), each with the GDAL path that opens it
    ('/vsizip/<archive>/<member>'), and how many archive files were not classified (past MAX_MEMBER_OPENS)."""
    listed = archive_members(path)
    if listed is None:
        return [], 0
    prefix, members = listed
    names = {name.lower() for name, _ in members}
    out: list[DatasetEntry] = []
    skipped = 0
    opened = 0
    for name, size in members:
        pure = PurePosixPath(name)
        if name and (pure.is_absolute() or ".." in pure.parts or any(p.startswith(".") for p in pure.parts)):
            continue
        if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in name):
            continue  # a name that reads as another one (the sandbox refuses it as a path anyway)
        if name and _sidecar_of(Path(name)) is not None:
            continue
        if name.lower().endswith(".dbf") and name[:-4].lower() + ".shp" in names:
            continue  # a shapefile's table
        shown = name or path.name[: -len(".gz")]  # a .gz holds one file, named like it without .gz
        if pattern and not fnmatch.fnmatch(PurePosixPath(shown).name, pattern) and not fnmatch.fnmatch(shown, pattern):
            continue
        if opened >= max_opens:
            skipped += 1
            continue
        opened += 1
        gdal_path = prefix + str(path) + ("/" + name if name else "")
        entry = open_entry(gdal_path, gdal_path, size or 0)
        if entry.kind != "other":
            out.append(entry)
    return out, skipped


@wrap_gdal_errors
def list_datasets(
    directory: str, pattern: str | None = None, recursive: bool = True, limit: int = 200, progress: Progress = no_progress
) -> DatasetList:
    """List files under `directory` (a real path) with their kind; entry paths are real paths, or the GDAL paths of
    archive members ('/vsizip/<real archive>/<member>'). The datasets inside an archive follow its entry (those
    matching `pattern` even when the archive's own name does not); `directory` may be an archive, to list its
    members alone."""
    base = Path(directory)
    if base.is_file():
        guard.check_files([str(base)])
        if archive_members(base) is None:
            raise GdalMcpError(
                "invalid-argument",
                f"{base.name} is a file, not a directory or an archive (.zip, .tar, .gz); "
                "raster_info or vector_info describes it, list_datasets lists its folder",
            )
        members, skipped = member_entries(base, pattern, max_opens=MAX_ARCHIVE_OPENS)
        shown = members[:limit]
        return DatasetList(
            path=directory,
            entries=shown,
            truncated=len(members) + skipped > len(shown),
            remaining=len(members) + skipped - len(shown),
        )
    items: list[tuple[Path, bool]] = []  # (file, whether it matches the pattern itself)
    scanned = 0
    for current, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        cur = Path(current)
        entries = sorted(files) + [d for d in dirs if d.lower().endswith(".gdb")]
        for name in entries:
            if name.startswith("."):
                continue
            scanned += 1
            p = cur / name
            rel = p.relative_to(base).as_posix()
            matches = not pattern or fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(rel, pattern)
            if matches or name.lower().endswith(ARCHIVE_SUFFIXES):
                items.append((p, matches))
        if not recursive or scanned >= MAX_SCAN:
            break
    out: list[DatasetEntry] = []
    remaining = 0
    for i, (p, matches) in enumerate(items):
        if len(out) >= limit:
            remaining += matches
            continue
        try:
            guard.check_files([str(p)])
        except GdalMcpError:
            if matches:
                out.append(DatasetEntry(path=str(p), kind="other", size=0, detail="link to outside the workspace (not opened)"))
            continue
        if matches:
            out.append(classify(p))
        if p.name.lower().endswith(ARCHIVE_SUFFIXES) and p.is_file():
            members, skipped = member_entries(p, pattern)
            room = max(0, limit - len(out))
            out += members[:room]
            remaining += len(members) - len(members[:room]) + skipped
            if skipped and matches:
                archive_entry = next(e for e in out if e.path == str(p))
                archive_entry.detail = (
                    f"archive: its first {MAX_MEMBER_OPENS} files were looked at, {skipped} more were not; "
                    "list_datasets with path set to this archive lists them all"
                )
        progress((i + 1) / max(1, len(items)), f"classified {i + 1}/{len(items)}")
    return DatasetList(path=directory, entries=out, truncated=remaining > 0, remaining=remaining)


#: objects listed from a bucket before the listing stops (its entries are classified up to `limit`)
MAX_REMOTE_LISTED = 100_000


@wrap_gdal_errors
def list_remote(
    prefix: str, pattern: str | None = None, recursive: bool = True, limit: int = 200, progress: Progress = no_progress
) -> DatasetList:
    """List the objects below `prefix` (a /vsis3/ path the sandbox allowed) with their kind, as list_datasets does a
    directory: GDAL lists the bucket (ListObjectsV2, through the egress proxy), and each object matching `pattern` is
    opened by GDAL to classify it (a header read: a few kilobytes of a COG). Entry paths are /vsis3/ paths."""
    base = prefix.rstrip("/")
    found, total = _objects(
        base, recursive, limit, lambda name, leaf: not pattern or fnmatch.fnmatch(leaf, pattern) or fnmatch.fnmatch(name, pattern)
    )
    from gdal_mcp.engine.drivers import REFERENCING_DRIVERS, identified

    out = []
    for i, (name, size) in enumerate(found):
        path = f"{base}/{name}"
        driver = identified(path)
        if driver in REFERENCING_DRIVERS:  # names other files inside it: not opened remotely (drivers.py)
            out.append(
                DatasetEntry(path=path, kind="other", size=size, driver=driver, detail="remote VRT-like dataset: not opened")
            )
        else:
            out.append(open_entry(path, path, size))
        progress((i + 1) / max(1, len(found)), f"classified {i + 1}/{len(found)}")
    return DatasetList(path=base, entries=out, truncated=total > len(out), remaining=total - len(out))


def remote_names(prefix: str, pattern: str, limit: int = 1000, progress: Progress = no_progress) -> list[str]:
    """The names (relative to `prefix`, a /vsis3/ path the sandbox allowed) of the objects below it that the glob
    `pattern` matches (glob_match), sorted; at most limit + 1 (the caller says a pattern matched too many). Nothing is
    opened: an input_pattern in a bucket workspace (server/results.resolve_inputs)."""
    parts = tuple(pattern.split("/"))

    def matching(name: str, leaf: str) -> bool:
        return glob_match(parts, tuple(name.split("/")))

    found, _ = _objects(prefix.rstrip("/"), True, limit + 1, matching)
    progress(1.0, f"listed {len(found)} objects")
    return sorted(name for name, _ in found)


#: object names with more '/'-separated levels are not matched by a glob (the match's work grows with them)
MAX_GLOB_LEVELS = 64


def glob_match(pattern: tuple[str, ...], name: tuple[str, ...]) -> bool:
    """Whether an object name (its '/'-separated levels) matches a glob with pathlib's meaning: each level by
    fnmatch (case-sensitive; '*' and '?' within a level, '[…]' a class), '**' any number of levels. In time linear in
    levels x pattern parts (no backtracking regex over whole names)."""
    if len(name) > MAX_GLOB_LEVELS:
        return False

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(name)
        if pattern[i] == "**":
            return match(i + 1, j) or (j < len(name) and match(i, j + 1))
        return j < len(name) and fnmatch.fnmatchcase(name[j], pattern[i]) and match(i + 1, j + 1)

    return match(0, 0)


def _objects(base: str, recursive: bool, limit: int, keep: Callable[[str, str], bool]) -> tuple[list[tuple[str, int]], int]:
    """(name, size) of the first `limit` objects below `base` that `keep(name, leaf)` keeps (no directories, hidden
    names or side files), and how many it keeps in all (MAX_REMOTE_LISTED listed at most)."""
    from gdal_mcp.engine import gdal_c

    listed = gdal_c.list_files(base, recursive=recursive, limit=MAX_REMOTE_LISTED)
    if listed is None:
        raise GdalMcpError("not-found", f"nothing is listed at {base} (no such bucket or prefix, or listing it was refused)")
    objects = [(name, size) for name, size, _, _ in listed]
    names = {name for name, _ in objects}
    found: list[tuple[str, int]] = []
    total = 0
    for name, size in objects:
        leaf = name.rsplit("/", 1)[-1]
        # side files by their suffix, and a shapefile's .dbf by its .shp among the listed names (not on a local disk)
        dbf_of_shp = leaf.lower().endswith(".dbf") and any(name[:-4] + ext in names for ext in (".shp", ".SHP"))
        if leaf.startswith(".") or _suffix_sidecar(leaf) is not None or dbf_of_shp or not keep(name, leaf):
            continue
        total += 1
        if len(found) < limit:
            found.append((name, size))
    return found, total
