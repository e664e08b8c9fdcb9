"""A dataset as the files it is: the file a path names and its side files (a shapefile's .dbf/.shx/.prj …, an
.aux.xml, .ovr or .msk, a world file), for copying, moving and deleting it as one (the workspace_* tools).

Which files belong to a dataset, by name in its directory:
- its format's own side files (formats.SIDECARS: `<stem>.<ext>`, e.g. roads.dbf for roads.shp);
- files named after its full name (formats.NAME_SUFFIXES: dem.tif.aux.xml, dem.tif.ovr, dem.tif.msk);
- other side files GDAL reads beside any dataset (formats.SIDE_EXTENSIONS: dem.tfw, dem.prj, dem.hdr …), but only
  when no other dataset shares the stem (dem.tif beside dem.shp: a dem.prj belongs to either, so it is left alone
  and reported as such).
Letter case does not matter (ROADS.DBF belongs to roads.shp). Only regular files; a link is moved or deleted as the
link itself, never followed, and copied only when it stays in the workspace (the input's resolution checks that).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.outputs import OutputTarget, rename_noreplace
from gdal_mcp.sandbox.paths import TMP_PREFIX, candidate, contained

if TYPE_CHECKING:
    from gdal_mcp.sandbox.core import Sandbox


@dataclass(frozen=True)
class DatasetFiles:
    """The files of one dataset: `main` (the file the path names) first in `files`; `shared`: side files that may
    belong to another dataset of the same stem (left alone)."""

    main: Path
    files: tuple[Path, ...]
    shared: tuple[Path, ...] = field(default=())

    def renamed(self, final: Path) -> list[tuple[Path, str]]:
        """Each file with its name for a dataset named `final` (roads.dbf -> streets.dbf for streets.shp,
        dem.tif.aux.xml -> height.tif.aux.xml)."""
        old_name, old_stem = self.main.name, _stem(self.main.name)
        new_name, new_stem = final.name, _stem(final.name)
        out: list[tuple[Path, str]] = []
        for f in self.files:
            if f == self.main:
                out.append((f, new_name))
            elif f.name.lower().startswith(old_name.lower() + "."):
                out.append((f, new_name + f.name[len(old_name) :]))
            else:
                out.append((f, new_stem + f.name[len(old_stem) :]))
        return out


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else name


def dataset_files(sb: Sandbox, path: str, *, what: str = "input") -> DatasetFiles:
    """The files of the dataset `path` names: a plain workspace file (no GDAL syntax), with its side files."""
    real = sb.resolve_file(path, what=what)  # exists, and its real path is in the workspace
    if candidate(sb.roots, path).is_symlink():
        raise GdalMcpError(
            "unsupported", f"{what} '{path}' is a symbolic link: the workspace_* tools work on the files themselves"
        )
    if real.is_dir() and not real.is_symlink():
        raise GdalMcpError(
            "unsupported",
            f"{what} '{sb.display(real)}' is a directory (a File Geodatabase, a Zarr store …): the workspace_* tools "
            "copy, move and delete datasets that are files",
        )
    if real.name.startswith(TMP_PREFIX):
        raise GdalMcpError("invalid-argument", f"{what} '{path}' is a temporary file of a write in progress")
    by_name = {e.name: e for e in real.parent.iterdir()}
    own, maybe, other = members(real.name, by_name)
    files = [real, *(by_name[n] for n in own)]
    maybe_files = [by_name[n] for n in maybe]
    for f in files + maybe_files:
        if f.is_dir() and not f.is_symlink():
            raise GdalMcpError("unsupported", f"{what} '{sb.display(real)}': its side file '{f.name}' is a directory")
    if other:
        return DatasetFiles(main=real, files=tuple(files), shared=tuple(maybe_files))
    return DatasetFiles(main=real, files=tuple(files + maybe_files))


def members(name: str, names: Iterable[str]) -> tuple[list[str], list[str], bool]:
    """The side files of the dataset file `name` among the other `names` of its folder (the rule in the module
    docstring; a local directory or a bucket's folder alike): (its own side files, the loose ones GDAL reads beside
    any dataset, whether another dataset shares its stem, which makes the loose ones shared), each sorted."""
    from gdal_mcp.formats import NAME_SUFFIXES, SIDE_EXTENSIONS, SIDECARS

    stem = _stem(name).lower()
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    own_names = {f"{stem}.{ext}".lower() for ext in SIDECARS.get(suffix, ())}
    own_names |= {(name + s).lower() for s in NAME_SUFFIXES}
    loose = {f"{stem}.{ext}".lower() for ext in SIDE_EXTENSIONS} - own_names
    own: list[str] = []
    maybe: list[str] = []
    other = False
    for entry in sorted(names):
        low = entry.lower()
        if entry == name or not low.startswith(stem + "."):
            continue
        if low in own_names:
            own.append(entry)
        elif low in loose:
            maybe.append(entry)
        elif low.startswith(name.lower() + ".") or entry.startswith(TMP_PREFIX):
            continue  # dem.tif.<something> no format names: neither its side file nor another dataset
        else:
            other = True  # another dataset of the same stem (dem.shp beside dem.tif)
    return own, maybe, other


def copy_dataset(sb: Sandbox, source: DatasetFiles, target: OutputTarget) -> list[Path]:
    """Copy the dataset's files into the output's temporary directory under the output's names, then commit them
    (no-replace, or replacing with the output's overwrite): a failure leaves nothing of the copy behind. A side file
    that is a link is copied as the file it points to, only when that lies in the workspace."""
    try:
        for f, name in source.renamed(target.final):
            real = Path(os.path.realpath(f))
            if not contained(sb.roots, real):
                raise GdalMcpError(
                    "out-of-root", f"'{sb.display(f)}' is a link to a file outside the workspace; nothing was copied"
                )
            shutil.copy2(real, target.tmp_dir / name)
    except GdalMcpError:
        target.discard()
        raise
    except OSError as e:
        target.discard()
        raise GdalMcpError("gdal-error", f"copying {source.main.name} failed: {e.strerror or e}") from None
    return target.commit()


def move_dataset(sb: Sandbox, source: DatasetFiles, final: Path, *, overwrite: bool) -> list[Path]:
    """Rename the dataset's files to `final`'s names (same directory or another in the workspace). Without
    `overwrite` nothing is replaced (no-replace renames); a failure part-way puts back what was moved."""
    moves = [(f, final.parent / name) for f, name in source.renamed(final)]
    done: list[tuple[Path, Path]] = []
    try:
        for src, dst in moves:
            if overwrite:
                os.replace(src, dst)
            else:
                rename_noreplace(src, dst)
            done.append((src, dst))
    except OSError as e:
        for src, dst in reversed(done):
            try:
                rename_noreplace(dst, src)
            except OSError:
                pass
        if isinstance(e, FileExistsError):
            raise GdalMcpError(
                "already-exists",
                f"'{sb.display(Path(e.filename or final))}' already exists; nothing was moved. Choose another name, or "
                "pass overwrite=true to replace it",
            ) from None
        raise GdalMcpError("gdal-error", f"moving {source.main.name} failed ({e.strerror or e}); nothing was moved") from None
    return [dst for _, dst in moves]


def delete_dataset(source: DatasetFiles) -> list[Path]:
    """Delete the dataset's files (side files first, the file itself last)."""
    removed: list[Path] = []
    for f in sorted(source.files, key=lambda p: p == source.main):
        try:
            f.unlink()
        except FileNotFoundError:
            continue
        except OSError as e:
            raise GdalMcpError("gdal-error", f"deleting {f.name} failed: {e.strerror or e}") from None
        removed.append(f)
    return removed
