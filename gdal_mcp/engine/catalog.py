"""What lies in a workspace directory, and whether GDAL sees each file as raster, vector or other."""

from __future__ import annotations

import fnmatch
import os
import warnings
from pathlib import Path

from gdal_mcp.engine import guard
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import DatasetEntry, DatasetList

MAX_SCAN = 100_000
SIDECAR_SUFFIXES = (
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


def _sidecar_of(p: Path) -> str | None:
    name = p.name.lower()
    for suf in SIDECAR_SUFFIXES:
        if name.endswith(suf) and len(name) > len(suf):
            return p.name[: -len(suf)]
    if name.endswith(".dbf") and p.with_suffix(".shp").exists():
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
        return DatasetEntry(
            path=rel,
            kind="other",
            size=size,
            detail=f"archive: open members as /vsizip/…/{path.name}/member (or /vsitar/, /vsigzip/)",
        )
    if low.endswith((".gdalg.json", ".gdalg")):
        return DatasetEntry(path=rel, kind="other", size=size, detail="GDAL pipeline file (not opened)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import rasterio

        from gdal_mcp.engine.raster.headers import check_header

        try:
            check_header(str(path))
        except GdalMcpError as e:
            return DatasetEntry(path=rel, kind="other", size=size, detail=e.message.replace(str(path), path.name))
        try:
            with rasterio.open(str(path)) as ds:
                if ds.count or ds.subdatasets:
                    detail = (
                        f"{ds.width}x{ds.height}, {ds.count} band(s) {ds.dtypes[0]}"
                        if ds.count
                        else f"{len(ds.subdatasets)} subdatasets"
                    )
                    return DatasetEntry(path=rel, kind="raster", size=size, driver=ds.driver, detail=detail)
        except Exception:  # noqa: BLE001 - not a raster; try vector next
            pass
        import pyogrio

        try:
            layers = pyogrio.list_layers(str(path))
            if len(layers):
                info = pyogrio.read_info(str(path), layer=0)
                names = ", ".join(str(n) for n in layers[:5, 0]) + (" …" if len(layers) > 5 else "")
                return DatasetEntry(
                    path=rel, kind="vector", size=size, driver=info.get("driver"), detail=f"{len(layers)} layer(s): {names}"
                )
        except Exception:  # noqa: BLE001 - not a vector either
            pass
    return DatasetEntry(path=rel, kind="other", size=size, detail="not a dataset GDAL can open")


@wrap_gdal_errors
def list_datasets(
    directory: str, pattern: str | None = None, recursive: bool = True, limit: int = 200, progress: Progress = no_progress
) -> DatasetList:
    """List files under `directory` (a real path) with their kind; entry paths are real paths."""
    base = Path(directory)
    matched: list[Path] = []
    total = 0
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
            if pattern and not (fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(rel, pattern)):
                continue
            total += 1
            if len(matched) < limit:
                matched.append(p)
        if not recursive or scanned >= MAX_SCAN:
            break
    out = []
    for i, p in enumerate(matched):
        try:
            guard.check_files([str(p)])
        except GdalMcpError:
            out.append(DatasetEntry(path=str(p), kind="other", size=0, detail="link to outside the workspace (not opened)"))
            continue
        out.append(classify(p))
        progress((i + 1) / max(1, len(matched)), f"classified {i + 1}/{len(matched)}")
    return DatasetList(path=directory, entries=out, truncated=total > len(out), remaining=total - len(out))
