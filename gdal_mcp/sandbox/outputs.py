"""Outputs: where a job may write, and how what it wrote reaches its final place.

An output path must be a plain file path in a workspace. The job writes into a hidden temporary directory beside
the final place (holding an owner marker, temporaries.py), and `OutputTarget.commit` renames what it wrote into
place only when the job succeeds, never replacing a file unless overwrite was asked for (rename_noreplace).

A directory output (`directory=True`: raster_tiles' z/x/y tiles) is written whole into the temporary directory and
renamed into place in one no-replace rename; never a link, never over a file, never a workspace root, never holding
an input. With overwrite the old directory is renamed aside into the temporary directory first and removed only
after the new one is in place (put back if placing fails), so a failed or cancelled job leaves the old one whole.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import remote
from gdal_mcp.sandbox.inputs import (
    _CONN_RE,
    FILE_CONNECTION_PREFIXES,
    NETWORK_CONNECTION_PREFIXES,
    NETWORK_SCHEMES,
    ResolvedInput,
)
from gdal_mcp.sandbox.paths import TMP_PREFIX, candidate, check_text, contained
from gdal_mcp.sandbox.temporaries import OWNER_FILE, _owner_identity

if TYPE_CHECKING:
    from gdal_mcp.sandbox.core import Sandbox

log = logging.getLogger("gdal_mcp.sandbox")


def upload_plan(directory: str, name: str, destination: str) -> tuple[list[str], list[str]]:
    """(local files, their object paths) of an output the job wrote as `directory`/`name` and that goes to the object
    `destination` ('/vsis3/bucket/key'): the files beside it (its side files) first, the dataset's own file last, each
    to the key of the same name in `destination`'s folder. Regular files only: no links, no directories, no owner marker.
    Run by the worker that ran the job (execution/common.upload_output)."""
    items = sorted(
        (p for p in Path(directory).iterdir() if p.name != OWNER_FILE and p.is_file() and not p.is_symlink()),
        key=lambda p: (p.name == name, p.name),
    )
    if not items or items[-1].name != name:
        raise GdalMcpError("internal-error", f"the job wrote no file for {remote.shown(destination)}")
    folder = destination.rsplit("/", 1)[0]
    return [str(p) for p in items], [f"{folder}/{p.name}" for p in items]


@dataclass
class OutputTarget:
    """Where a job writes (`tmp_path`) and where the result lands on success (`final`).

    `overwrite`: the caller asked to replace an existing dataset of that name (and the confirmation policy let it):
    then the files of the new dataset replace those of the same names. Otherwise nothing is ever replaced: every
    file is moved into place with no-replace semantics (renameat2 RENAME_NOREPLACE), so a file that appeared in
    the meantime, or another file that shares a name the new dataset's side files take, stays as it was and the
    commit fails with already-exists, leaving nothing of the new output behind.
    """

    final: Path
    display: str
    tmp_dir: Path
    created_dirs: list[Path] = field(default_factory=list)
    overwrite: bool = False
    #: the output is a directory the job creates at tmp_path (see the module docstring)
    directory: bool = False
    #: an object-storage output ('/vsis3/bucket/key'): the job's worker writes it where it can (tmp_dir for a local
    #: worker, a directory of its own on a Dask worker) and uploads the files it wrote (`upload_plan`, the job's
    #: `upload`) instead of the server renaming them; `final` is not used
    remote: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _discarded: bool = field(default=False, init=False, repr=False, compare=False)
    _keep: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def tmp_path(self) -> Path:
        return self.tmp_dir / self.final.name

    def commit(self) -> list[Path]:
        """Move everything the job wrote (the file and its sidecars) into place; see the class docstring."""
        if self.remote is not None:
            raise GdalMcpError("internal-error", "a remote output is uploaded, not committed (App.execute)")
        if self.directory:
            return self._commit_directory()
        if not self.tmp_path.exists():
            self.discard()
            raise GdalMcpError("internal-error", f"the job wrote no file for {self.display}")
        # The dataset's own name last; never a symbolic link (a job's helper link, or one pointing anywhere).
        items = sorted(
            (p for p in self.tmp_dir.iterdir() if p.name != OWNER_FILE and not p.is_symlink()),
            key=lambda p: (p.name == self.final.name, p.name),
        )
        placed: list[tuple[Path, Path]] = []
        try:
            for item in items:
                target = self.final.parent / item.name
                if self.overwrite:
                    if target.is_dir() and not target.is_symlink() and item.is_dir():
                        shutil.rmtree(target)
                    os.replace(item, target)
                else:
                    rename_noreplace(item, target)
                placed.append((item, target))
        except FileExistsError as e:
            for item, target in reversed(placed):  # put back what this commit placed: nothing of it stays
                try:
                    rename_noreplace(target, item)
                except OSError:
                    log.warning("could not take back %s after a refused commit", target)
            self.discard()
            name = Path(e.filename or "").name or self.final.name
            shown = self.display if name == self.final.name else f"{name}' (a file the new dataset '{self.display}' also writes"
            raise GdalMcpError(
                "already-exists",
                f"output '{shown}' already exists; nothing was written. Choose "
                "another name, or pass overwrite=true to replace it",
            ) from None
        except BaseException:
            self.discard()
            raise
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        return [target for _, target in placed]

    def _commit_directory(self) -> list[Path]:
        """Rename the directory the job wrote into place (no-replace); with overwrite, the old one goes aside into the
        temporary directory first and is deleted with it only once the new one is in place. The renames hold the
        target's lock, so a discard (a cancel arriving meanwhile) never deletes a directory set aside but not yet
        replaced."""
        new = self.tmp_path
        if new.is_symlink() or not new.is_dir():
            self.discard()
            raise GdalMcpError("internal-error", f"the job wrote no directory for {self.display}")
        _drop_links(new)
        aside = self.tmp_dir / REPLACED_NAME
        error: BaseException | None = None
        with self._lock:
            if self._discarded:
                error = GdalMcpError("cancelled", f"the job was cancelled; nothing was written to {self.display}")
            else:
                moved_aside = False
                try:
                    if self.overwrite and os.path.lexists(self.final):
                        if self.final.is_symlink() or not self.final.is_dir():
                            raise FileExistsError(errno.EEXIST, "not a directory", str(self.final))
                        rename_noreplace(self.final, aside)
                        moved_aside = True
                    rename_noreplace(new, self.final)
                except BaseException as e:  # noqa: BLE001 - re-raised below, once the old directory is back
                    error = e
                    if moved_aside:
                        self._put_back(aside)
        if error is None:
            record = self.tmp_dir / (self.final.name + RECORD_SUFFIX)  # its provenance record, beside it
            if record.is_file() and not record.is_symlink():
                try:
                    (os.replace if self.overwrite else rename_noreplace)(record, self.final.parent / record.name)
                except OSError:
                    log.warning("kept the provenance record already beside %s (pass overwrite=true to replace it)", self.final)
            shutil.rmtree(self.tmp_dir, ignore_errors=True)  # the replaced directory with it, now that the new one is placed
            return [self.final]
        self.discard()
        if isinstance(error, FileExistsError):
            raise GdalMcpError(
                "already-exists",
                f"output '{self.display}' already exists (it appeared, or changed, while the job ran); nothing was "
                "written. Choose another name, or pass overwrite=true to replace a tile directory",
            ) from None
        raise error

    def _put_back(self, aside: Path) -> None:
        """After a failed directory commit: the old directory back in place; when its name has been taken meanwhile,
        beside it under a name of its own (never deleted with the temporary directory)."""
        try:
            rename_noreplace(aside, self.final)
            return
        except OSError:
            pass
        keep = self.final.with_name(f"{self.final.name}.replaced-{uuid.uuid4().hex[:8]}")
        try:
            rename_noreplace(aside, keep)
            log.error("could not put %s back after a failed commit; it is kept as %s", self.final, keep)
        except OSError:
            log.error("could not put %s back after a failed commit; it is in %s", self.final, aside)
            self._keep = True  # the temporary directory holds the old data: never delete it

    def discard(self) -> None:
        with self._lock:  # never in the middle of a directory commit's renames
            self._discarded = True
            if self._keep:
                return
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        for d in reversed(self.created_dirs):
            try:
                d.rmdir()
            except OSError:
                break


#: inside a temporary directory: the directory an overwrite replaces, until the new one is in place
REPLACED_NAME = ".replaced"


def _drop_links(root: Path) -> None:
    """Remove every symbolic link (and anything but files and directories) from a directory a job wrote: a commit
    never places links, at the top or deeper."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode) or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                os.unlink(path)


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


@functools.lru_cache(maxsize=1)
def _renameat2() -> object | None:
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename `src` to `dst` atomically unless `dst` exists (FileExistsError then, naming dst). renameat2 with
    RENAME_NOREPLACE; where the file system or C library lacks it, a hard link (which fails if dst exists) and
    an unlink for files, and a checked rename for directories."""
    import ctypes

    fn = _renameat2()
    if fn is not None:
        if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:  # type: ignore[operator]
            return
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FileExistsError(err, os.strerror(err), str(dst))
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), str(src))
    if src.is_dir() and not src.is_symlink():
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
        os.rename(src, dst)
        return
    os.link(src, dst, follow_symlinks=False)  # FileExistsError when dst exists
    os.unlink(src)


# ----- outputs ---------------------------------------------------------------------------
def check_side_files(sb: Sandbox, final: Path, what: str) -> None:
    """already-exists when a new dataset's side files (a shapefile's .dbf, a GML's .xsd …) would take the name of
    files that exist: they belong to something else, and a new output replaces nothing."""
    from gdal_mcp.formats import SIDECARS

    suffix = final.suffix.lower()
    for ext in sorted(SIDECARS.get(suffix, ())):
        for name in {f"{final.stem}.{ext}", f"{final.stem}.{ext.upper()}"}:
            side = final.parent / name
            if os.path.lexists(side):
                raise GdalMcpError(
                    "already-exists",
                    f"{what} '{sb.display(final)}' would also write '{sb.display(side)}', which already "
                    "exists (a file of another dataset?); choose another name, or pass overwrite=true to "
                    "replace both",
                )


def check_directory_output(sb: Sandbox, final: Path, path: str, *, overwrite: bool, what: str) -> None:
    """A directory output's final path: never a link (out-of-root when it points outside), never over a file or a
    workspace root; an existing directory only with overwrite."""
    if final.is_symlink():
        if not contained(sb.roots, Path(os.path.realpath(final))):
            raise GdalMcpError("out-of-root", f"{what} '{path}' is a link to outside the workspace")
        raise GdalMcpError(
            "invalid-argument",
            f"{what} '{path}' is a symbolic link; a directory is written only at a real path: choose another name",
        )
    if any(final == r or r.is_relative_to(final) for r in sb.roots):
        raise GdalMcpError("invalid-argument", f"{what} '{path}' is a workspace root (or holds one); name a new directory in it")
    if not os.path.lexists(final):
        return
    if not final.is_dir():
        raise GdalMcpError(
            "invalid-argument", f"{what} '{sb.display(final)}' is an existing file, not a directory; choose another name"
        )
    if not overwrite:
        raise GdalMcpError(
            "already-exists",
            f"{what} '{sb.display(final)}' already exists (a directory); pass overwrite=true to replace it and everything "
            "in it, or choose another name",
        )


def resolve_output(
    sb: Sandbox,
    path: str,
    *,
    overwrite: bool = False,
    inputs: Iterable[ResolvedInput] = (),
    what: str = "output",
    directory: bool = False,
    side_file: bool = False,
) -> OutputTarget:
    """Check an output path and prepare its temporary directory beside it (`directory`: the output is a directory,
    see the module docstring; `side_file`: the output is meant as a side file of a dataset, else refused as one)."""
    check_text(path, what)
    if (location := sb.bucket_location(path, what=what)) is not None:
        return remote_output(sb, location.url, overwrite=overwrite, what=what, directory=directory)
    if remote.is_remote(path):
        return remote_output(sb, path, overwrite=overwrite, what=what, directory=directory)
    low = path.lower()
    if (
        low.startswith(("/vsi", "file:"))
        or low.startswith(NETWORK_SCHEMES)
        or (
            _CONN_RE.match(path)
            and _CONN_RE.match(path).group(1).upper()  # type: ignore[union-attr]
            in FILE_CONNECTION_PREFIXES | NETWORK_CONNECTION_PREFIXES
        )
    ):
        raise GdalMcpError("unsupported", f"{what} '{path}' must be a plain file path in the workspace")
    cand = candidate(sb.roots, path)
    name = cand.name
    if name in ("", ".", "..") or (path.endswith("/") and not directory):
        kind = "a new directory" if directory else "a file, not a directory"
        raise GdalMcpError("invalid-argument", f"{what} '{path}' must name {kind}")
    if name.startswith(TMP_PREFIX):
        raise GdalMcpError("invalid-argument", f"{what} '{path}' uses a name reserved for temporary files")
    if name.lower().endswith(RECORD_SUFFIX):
        raise GdalMcpError("invalid-argument", RESERVED_RECORD.format(what=what, path=path))
    parent = Path(os.path.realpath(cand.parent))
    if not contained(sb.roots, parent):
        raise GdalMcpError("out-of-root", f"{what} '{path}' is outside the workspace; write inside it")
    final = parent / name
    if not directory and not side_file and (owner := side_file_owner(parent, name)) is not None:
        raise GdalMcpError(
            "invalid-argument",
            f"{what} '{path}': GDAL would read a file of that name as a side file of '{sb.display(owner)}' (a world file, "
            "header, PAM .aux.xml or a part of it), changing how that dataset reads; choose another name",
        )
    if directory:
        check_directory_output(sb, final, path, overwrite=overwrite, what=what)
    elif final.is_symlink():
        target = Path(os.path.realpath(final))
        if not contained(sb.roots, target):
            raise GdalMcpError("out-of-root", f"{what} '{path}' is a link to outside the workspace")
    if not directory and (final.exists() or final.is_symlink()):
        if final.is_dir():
            raise GdalMcpError("invalid-argument", f"{what} '{path}' is an existing directory")
        st = final.stat()
        if not stat.S_ISREG(st.st_mode):
            raise GdalMcpError("unsupported", f"{what} '{path}' is not a regular file")
        if not overwrite:
            raise GdalMcpError(
                "already-exists",
                f"{what} '{sb.display(final)}' already exists; pass overwrite=true to replace it or choose another name",
            )
    if not overwrite and not directory:
        check_side_files(sb, final, what)
    for inp in inputs:
        for f in inp.files:
            same = f == final or (final.exists() and f.exists() and os.path.samefile(f, final))
            if directory and Path(os.path.realpath(f)).is_relative_to(final):
                raise GdalMcpError(
                    "invalid-argument", f"{what} '{sb.display(final)}' holds an input ({sb.display(f)}); write elsewhere"
                )
            if same:
                raise GdalMcpError(
                    "invalid-argument",
                    f"{what} '{sb.display(final)}' is also an input; write to a different file",
                )
    created: list[Path] = []
    missing = []
    d = parent
    while not d.exists():
        missing.append(d)
        d = d.parent
    if missing:
        if not contained(sb.roots, Path(os.path.realpath(d))):
            raise GdalMcpError("out-of-root", f"{what} '{path}' is outside the workspace")
        for m in reversed(missing):
            m.mkdir()
            created.append(m)
    elif not parent.is_dir():
        raise GdalMcpError("invalid-argument", f"{what} '{path}': {sb.display(parent)} is not a directory")
    tmp_dir = temporary_dir(parent, f"{what} '{path}'", created)
    return OutputTarget(
        final=final, display=sb.display(final), tmp_dir=tmp_dir, created_dirs=created, overwrite=overwrite, directory=directory
    )


def side_file_owner(parent: Path, name: str) -> Path | None:
    """The existing dataset file in `parent` that a file called `name` would be a side file of (formats.NAME_SUFFIXES:
    dem.tif.aux.xml; formats.SIDE_EXTENSIONS: demo.wld beside demo.jpg, roads.dbf beside roads.shp), or None. A new
    output of such a name would change how that dataset reads (a CSV named demo.wld georeferences demo.jpg)."""
    import glob

    from gdal_mcp.formats import NAME_SUFFIXES, SIDE_EXTENSIONS

    low = name.lower()
    for suffix in NAME_SUFFIXES:
        if low.endswith(suffix) and len(name) > len(suffix):
            owner = parent / name[: -len(suffix)]
            if owner.is_file():
                return owner
    if "." not in name:
        return None
    for stem, ext in ((name.split(".", 1)[0], name.split(".", 1)[1]), tuple(name.rsplit(".", 1))):
        if ext.lower() not in SIDE_EXTENSIONS or not stem:
            continue
        for found in sorted(glob.glob(os.path.join(glob.escape(str(parent)), glob.escape(stem) + ".*")))[:64]:
            other = Path(found)
            rest = other.name[len(stem) + 1 :].lower()
            if rest in SIDE_EXTENSIONS or any(("." + rest).endswith(s) for s in NAME_SUFFIXES):
                continue  # another side file, not a dataset
            if other.name != name and other.is_file():
                return other
    return None


#: the name ending of the provenance record beside a dataset (engine/provenance.py): written only by the workers
RECORD_SUFFIX = ".provenance.json"
RESERVED_RECORD = (
    "{what} '{path}': names ending in .provenance.json are the provenance records the server writes beside each output; "
    "choose another name"
)
#: object stores outputs are uploaded to (engine/upload.py); gs:// is read only
WRITTEN_SCHEMES = ("s3", "az")
#: the name of the object an upload's first write to a folder probes the store's conditions with (engine/upload.py)
PROBE_PREFIX = ".gdal-mcp-condition-probe-"


def remote_output(sb: Sandbox, path: str, *, overwrite: bool, what: str, directory: bool) -> OutputTarget:
    """An output in object storage the allow-list covers: written into a temporary directory in the first workspace,
    then uploaded object by object, never replacing one (engine/upload.py) unless `overwrite` (the person approved it:
    each object is then replaced only in the version approved or seen just before, If-Match)."""
    location = sb.remote.check(path, what=what)
    if location.scheme not in WRITTEN_SCHEMES:
        raise GdalMcpError(
            "unsupported", f"{what} '{location.url}': outputs are written to s3:// and az:// locations only (or the workspace)"
        )
    name = location.path.rsplit("/", 1)[-1]
    if any(e.covers(location) and e.path.strip("/") == location.path.strip("/") for e in sb.remote.entries):
        raise GdalMcpError(  # the prefix itself: its side files and its folder would be beside the prefix, outside it
            "invalid-argument", f"{what} '{sb.display(location.url)}' is an allowed prefix itself: name an object below it"
        )
    if directory or not name or path.endswith("/"):
        raise GdalMcpError("invalid-argument", f"{what} '{location.url}' must name one object (a key, not a prefix)")
    if name.startswith((TMP_PREFIX, PROBE_PREFIX)) or name == OWNER_FILE:
        raise GdalMcpError("invalid-argument", f"{what} '{location.url}' uses a name reserved for temporary files")
    if name.lower().endswith(RECORD_SUFFIX):
        raise GdalMcpError("invalid-argument", RESERVED_RECORD.format(what=what, path=location.url))
    root = sb.scratch or sb.roots[0]
    tmp_dir = temporary_dir(root, f"{what} '{location.url}'", [])
    return OutputTarget(
        final=root / name, display=sb.display(location.url), tmp_dir=tmp_dir, remote=location.gdal_path, overwrite=overwrite
    )


def temporary_dir(parent: Path, shown: str, created: list[Path]) -> Path:
    """A job's temporary output directory in `parent`, holding its owner marker (temporaries.py); on failure nothing of
    it stays (nor the directories `created` for the output), and a full disk is resource-limit."""
    tmp_dir = parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    try:
        tmp_dir.mkdir()
        (tmp_dir / OWNER_FILE).write_text(json.dumps(_owner_identity()))
    except OSError as e:
        OutputTarget(final=tmp_dir, display="", tmp_dir=tmp_dir, created_dirs=created).discard()
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise GdalMcpError(
                "resource-limit", f"the disk is full ({e.strerror}) where {shown} would be written; free space or write elsewhere"
            ) from None
        raise
    return tmp_dir
