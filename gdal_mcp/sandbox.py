"""The sandbox: the only place that turns a user path into an allowed real path.

Every tool argument, every resource read and every file a dataset refers to (VRT sources, archive
members, subdataset containers) goes through `Sandbox`. Containment is decided on canonical paths
(symlinks resolved) component by component, never by string prefix. Outputs are written to a hidden
temporary directory beside their final place and renamed into place only when the job succeeds.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import re
import shutil
import socket
import stat
import time
import unicodedata
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from gdal_mcp.errors import GdalMcpError

log = logging.getLogger("gdal_mcp.sandbox")

MAX_PATH_LENGTH = 4096
MAX_COMPONENT_LENGTH = 255
MAX_REFERENCE_DEPTH = 8
MAX_PATTERN_MATCHES = 10000
TMP_PREFIX = ".gdal-mcp-tmp-"
TMP_DIR_RE = re.compile(re.escape(TMP_PREFIX) + r"[0-9a-f]{32}")
# Inside each temporary directory: which server process made it (never moved into place by commit).
OWNER_FILE = ".gdal-mcp-owner"
# Start-up sweep of stale temporary directories: a bounded walk, so a huge workspace cannot stall start-up.
SWEEP_MAX_DIRS = 20000
SWEEP_MAX_SECONDS = 3.0
RESOURCE_PREFIX = "gdal-mcp://files/"

# Kernel pseudo-filesystems: never a dataset, whatever the workspace.
FORBIDDEN_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))

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
# Elements of raster VRTs, warped VRTs and OGR VRTs that name another dataset.
VRT_REFERENCE_TAGS = frozenset({"sourcefilename", "sourcedataset", "srcdatasource", "overviewfilename"})
# Elements of an MRF header that name files GDAL reads: its data and index files, the dataset it caches.
MRF_REFERENCE_TAGS = frozenset({"datafile", "indexfile", "source"})
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


@dataclass(frozen=True)
class ResolvedInput:
    """A user input made safe: `gdal_path` is what GDAL opens (real paths substituted)."""

    user: str
    gdal_path: str
    display: str
    files: tuple[Path, ...] = ()
    network: bool = False


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

    @property
    def tmp_path(self) -> Path:
        return self.tmp_dir / self.final.name

    def commit(self) -> list[Path]:
        """Move everything the job wrote (the file and its sidecars) into place; see the class docstring."""
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

    def discard(self) -> None:
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        for d in reversed(self.created_dirs):
            try:
                d.rmdir()
            except OSError:
                break


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


def _read_small(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read(4096).strip()
    except OSError:
        return None


def _process_start(pid: int) -> str | None:
    """When a running process started (field 22 of /proc/<pid>/stat); None if it does not run (a zombie
    does not run)."""
    text = _read_small(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X", "x"):
        return None
    return fields[19] if len(fields) > 19 else ""


def _owner_identity() -> dict[str, object]:
    """Who makes a temporary directory: this process, told apart from a later one reusing its pid, on this
    machine (boot) and in this pid namespace (containers sharing a volume)."""
    return dict(_identity(os.getpid()))


@functools.lru_cache(maxsize=4)
def _identity(pid: int) -> dict[str, object]:
    ns = ""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pass
    return {
        "pid": pid,
        "start": _process_start(pid) or "",
        "boot": _read_small("/proc/sys/kernel/random/boot_id") or "",
        "ns": ns,
        "host": socket.gethostname(),
    }


def _owner_gone(owner: dict[str, object]) -> bool:
    """True only when the process that made a temporary directory certainly no longer runs."""
    me = _owner_identity()
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or owner.get("host") != me["host"]:
        return False  # unreadable, or made on another machine sharing this file system: cannot tell
    if owner.get("boot") and me["boot"] and owner["boot"] != me["boot"]:
        return True  # this machine restarted since: every process of that boot is gone
    if owner.get("ns") != me["ns"]:
        return False  # another pid namespace (container): its pids mean nothing here
    if os.path.exists("/proc/self/stat"):
        start = _process_start(pid)
        # Gone, or its pid now belongs to a process that started later.
        return start is None or bool(owner.get("start") and start and start != owner["start"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _stale_temporary(tmp: str) -> bool:
    """Whether `tmp` is a temporary output directory whose owner process is gone."""
    try:
        fd = os.open(os.path.join(tmp, OWNER_FILE), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd) as fh:
            owner = json.loads(fh.read(4096))
    except (OSError, ValueError):
        return False  # no readable marker (an older server, or one being made right now): keep it
    return isinstance(owner, dict) and _owner_gone(owner)


class Sandbox:
    """Decides every path. Built from the workspace roots given on the command line."""

    def __init__(self, workspaces: Iterable[os.PathLike[str] | str], *, allow_network: bool = False) -> None:
        roots: list[Path] = []
        for w in workspaces:
            p = Path(w).expanduser()
            if not p.is_dir():
                raise ValueError(f"workspace {w} is not a directory")
            real = Path(os.path.realpath(p))
            if any(real == t or real.is_relative_to(t) for t in FORBIDDEN_TREES):
                raise ValueError(f"workspace {w} lies in a system pseudo-filesystem")
            if real not in roots:
                roots.append(real)
        if not roots:
            raise ValueError("at least one workspace is required")
        self.roots: tuple[Path, ...] = tuple(roots)
        self.allow_network = allow_network

    # ----- display -------------------------------------------------------------------------
    def display(self, path: os.PathLike[str] | str) -> str:
        """Workspace-relative form of a real path (absolute only for secondary workspaces)."""
        p = Path(path)
        for i, root in enumerate(self.roots):
            if p == root or p.is_relative_to(root):
                rel = p.relative_to(root).as_posix()
                if i == 0:
                    return rel if rel != "." else "."
                return str(p)
        return p.name or str(p)

    def uri(self, display: str) -> str:
        """The resource URI of a workspace file (see tools/resources.py)."""
        from urllib.parse import quote

        return RESOURCE_PREFIX + quote(display.lstrip("/"))

    def scrub(self, text: str) -> str:
        """Remove the server's absolute layout from a message (GDAL errors quote full paths)."""
        text = re.sub(re.escape(TMP_PREFIX) + r"[0-9a-f]{32}/", "", text)
        first = str(self.roots[0])
        text = text.replace(first + os.sep, "").replace(first, ".")
        return text

    def scrub_obj(self, obj: object) -> object:
        if isinstance(obj, str):
            return self.scrub(obj)
        if isinstance(obj, dict):
            return {k: self.scrub_obj(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.scrub_obj(v) for v in obj]
        return obj

    # ----- plain files ---------------------------------------------------------------------
    def _check_text(self, path: str, what: str) -> None:
        if not isinstance(path, str) or path == "":
            raise GdalMcpError("invalid-argument", f"{what} is empty; give a workspace-relative path")
        if "\x00" in path:
            raise GdalMcpError("invalid-argument", f"{what} contains a NUL byte")
        if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in path):
            # Control and format characters (a right-to-left override …) make a name read as another one in an
            # approval question, the console or the audit log.
            raise GdalMcpError("invalid-argument", f"{what} contains a control or formatting character; use a plain file name")
        if len(path) > MAX_PATH_LENGTH:
            raise GdalMcpError("invalid-argument", f"{what} is longer than {MAX_PATH_LENGTH} characters")
        if any(len(part) > MAX_COMPONENT_LENGTH for part in path.split("/")):
            raise GdalMcpError("invalid-argument", f"{what} has a path component over {MAX_COMPONENT_LENGTH} characters")

    def _candidate(self, path: str, base: Path | None = None) -> Path:
        p = Path(path).expanduser() if path.startswith("~") else Path(path)
        if not p.is_absolute():
            p = (base or self.roots[0]) / p
        return p

    def _contained(self, real: Path) -> bool:
        if any(real == t or real.is_relative_to(t) for t in FORBIDDEN_TREES):
            return False
        return any(real == r or real.is_relative_to(r) for r in self.roots)

    def _real_file(self, path: str, *, what: str, base: Path | None = None, shown: str | None = None) -> Path:
        """Canonical path of an existing, contained, regular file or directory."""
        shown = shown if shown is not None else path
        real = Path(os.path.realpath(self._candidate(path, base)))
        if not self._contained(real):
            raise GdalMcpError(
                "out-of-root",
                f"{what} '{shown}' is outside the workspace; use a path inside it (list_datasets shows what is there)",
            )
        try:
            st = real.stat()
        except FileNotFoundError:
            raise GdalMcpError(
                "not-found", f"{what} '{shown}' does not exist; list_datasets shows what the workspace holds"
            ) from None
        except OSError as e:
            raise GdalMcpError("not-found", f"{what} '{shown}' cannot be read ({e.strerror})") from None
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise GdalMcpError("unsupported", f"{what} '{shown}' is not a regular file (device, FIFO or socket)")
        return real

    def resolve_dir(self, path: str, *, what: str = "path") -> tuple[Path, str]:
        self._check_text(path, what)
        real = self._real_file(path, what=what)
        if not real.is_dir():
            raise GdalMcpError("invalid-argument", f"{what} '{path}' is a file, not a directory")
        return real, self.display(real)

    def resolve_file(self, path: str, *, what: str = "path") -> Path:
        """A plain workspace file (no GDAL syntax): for resource reads and listings."""
        self._check_text(path, what)
        return self._real_file(path, what=what)

    # ----- GDAL dataset names --------------------------------------------------------------
    def resolve_input(self, path: str, *, what: str = "input") -> ResolvedInput:
        """Resolve a dataset name as GDAL understands it: file, /vsi chain or connection string."""
        self._check_text(path, what)
        gdal_path, files, network = self._resolve_gdal(path, base=None, what=what, depth=0)
        display = self.scrub(gdal_path) if not network else path
        return ResolvedInput(user=path, gdal_path=gdal_path, display=display, files=tuple(files), network=network)

    def resolve_inputs(
        self, inputs: list[str] | None, pattern: str | None, *, what: str = "inputs", limit: int = MAX_PATTERN_MATCHES
    ) -> list[ResolvedInput]:
        """Several datasets: the list given, or the workspace files a glob matches (sorted), never both."""
        if (inputs is None) == (pattern is None):
            raise GdalMcpError(
                "invalid-argument",
                f"give either {what} (a list of paths) or input_pattern (a glob such as 'tiles/*.tif'), not both and not neither",
            )
        if inputs is not None:
            return [self.resolve_input(p, what=f"{what}[{i}]") for i, p in enumerate(inputs)]
        assert pattern is not None
        return [self.resolve_input(str(p), what="input_pattern match") for p in self.glob(pattern, limit=limit)]

    def glob(self, pattern: str, *, limit: int = MAX_PATTERN_MATCHES) -> list[Path]:
        """Regular files under the first workspace matching a glob ('tiles/*.tif', 'a/**/b.tif'), sorted.

        The pattern is relative to the workspace: absolute patterns, '..' and GDAL syntax are refused; every
        match is checked like any other input (a symlink out of the workspace is refused by resolve_input).
        """
        self._check_text(pattern, "input_pattern")
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
        root = self.roots[0]
        matches: list[Path] = []
        for p in root.glob(pattern):
            if p.name.startswith(TMP_PREFIX) or any(part.startswith(TMP_PREFIX) for part in p.parts):
                continue
            if p.is_file():
                matches.append(p)
                if len(matches) > limit:
                    raise GdalMcpError(
                        "invalid-argument", f"input_pattern '{pattern}' matches more than {limit} files; narrow it"
                    )
        if not matches:
            raise GdalMcpError(
                "not-found", f"input_pattern '{pattern}' matches no file in the workspace; list_datasets shows what is there"
            )
        return sorted(matches)

    def _network(self, path: str, what: str) -> tuple[str, list[Path], bool]:
        if not self.allow_network:
            raise GdalMcpError(
                "unsupported",
                f"{what} '{path}' is a network location; this server reads only workspace files "
                "(start it with --allow-network to permit remote data)",
            )
        log.warning("network access allowed by --allow-network: %s", path)
        return path, [], True

    def _resolve_gdal(self, path: str, *, base: Path | None, what: str, depth: int) -> tuple[str, list[Path], bool]:
        if depth > MAX_REFERENCE_DEPTH:
            raise GdalMcpError("unsupported", f"{what}: datasets nest more than {MAX_REFERENCE_DEPTH} levels deep")
        low = path.lower()
        if low.startswith(NETWORK_SCHEMES) or low.startswith(NETWORK_VSI):
            return self._network(path, what)
        if low.startswith("/vsigzip/"):
            inner = path[len("/vsigzip/") :]
            g, files, net = self._resolve_gdal(inner, base=base, what=what, depth=depth + 1)
            return "/vsigzip/" + g, files, net
        for prefix in ARCHIVE_VSI:
            if low.startswith(prefix):
                return self._resolve_archive(prefix, path[len(prefix) :], base=base, what=what, depth=depth)
        if low.startswith("/vsi"):
            raise GdalMcpError(
                "unsupported",
                f"{what} '{path}' uses a GDAL virtual file system this server does not allow; "
                "supported: /vsizip/, /vsitar/, /vsigzip/, /vsi7z/, /vsirar/",
            )
        if low.startswith("file://"):
            return self._resolve_gdal(path[len("file://") :], base=base, what=what, depth=depth + 1)
        m = _CONN_RE.match(path)
        if m and not self._literal_exists(path, base):
            return self._resolve_connection(m.group(1), m.group(2), path, base=base, what=what, depth=depth)
        real = self._real_file(path, what=what, base=base)
        files = [real]
        if real.is_file():
            self._check_side_links(real, what=what)
            files += self._vrt_references(real, what=what, depth=depth)
        return str(real), files, False

    def _check_side_links(self, real: Path, *, what: str) -> None:
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
            if os.path.islink(candidate) and not self._contained(Path(os.path.realpath(candidate))):
                raise GdalMcpError(
                    "out-of-root",
                    f"{what} '{self.display(real)}': its side file '{name}' is a link "
                    "to a file outside the workspace; refusing to read it",
                )
        pam = real.parent / (real.name + ".aux.xml")
        if pam.is_file():
            self._pam_references(real, pam, what=what)

    def _pam_references(self, real: Path, pam: Path, *, what: str) -> None:
        """A dataset's .aux.xml may name an overview file (OVERVIEWS domain, OVERVIEW_FILE) GDAL then opens: it
        must be a workspace file."""
        try:
            st = pam.stat()
        except OSError:
            return
        for ref in _overview_files(str(pam), st.st_mtime_ns, st.st_size):
            self._reference(
                ref,
                real.parent,
                what=what,
                depth=MAX_REFERENCE_DEPTH - 1,
                refused=f"{what} '{self.display(real)}': its {pam.name} names the overview file '{ref}', which is not "
                "an allowed workspace file",
            )

    def _reference(self, ref: str, base: Path | None, *, what: str, depth: int, refused: str) -> list[Path]:
        """A file (or URL) a dataset names inside itself, resolved like a path given as an argument: the files it
        reaches; out-of-root with `refused` when it is not an allowed workspace file (not-found etc. as they are)."""
        try:
            _, reached, _ = self._resolve_gdal(ref, base=base, what=what, depth=depth)
        except GdalMcpError as e:
            raise GdalMcpError("out-of-root" if e.code in ("out-of-root", "unsupported") else e.code, refused) from None
        return reached

    def _literal_exists(self, path: str, base: Path | None) -> bool:
        try:
            real = Path(os.path.realpath(self._candidate(path, base)))
        except (OSError, ValueError):
            return False
        return self._contained(real) and real.exists()

    def _resolve_archive(
        self, prefix: str, rest: str, *, base: Path | None, what: str, depth: int
    ) -> tuple[str, list[Path], bool]:
        if rest.startswith("{"):
            end = rest.find("}")
            if end < 0:
                raise GdalMcpError("invalid-argument", f"{what}: unbalanced '{{' in {prefix} path")
            archive, inner = rest[1:end], rest[end + 1 :].lstrip("/")
        else:
            archive, inner = self._split_archive(rest, what=what, prefix=prefix)
        if inner and ".." in PurePosixPath(inner).parts:
            raise GdalMcpError("invalid-argument", f"{what}: '..' is not allowed inside an archive path")
        g, files, net = self._resolve_gdal(archive, base=base, what=what, depth=depth + 1)
        if not net and not Path(g).is_file() and not g.startswith("/vsi"):
            raise GdalMcpError("invalid-argument", f"{what}: {self.scrub(g)} is not an archive file")
        joined = prefix + ("{" + g + "}" if rest.startswith("{") else g) + ("/" + inner if inner else "")
        return joined, files, net

    @staticmethod
    def _split_archive(rest: str, *, what: str, prefix: str) -> tuple[str, str]:
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

    def _resolve_connection(
        self, driver: str, rest: str, original: str, *, base: Path | None, what: str, depth: int
    ) -> tuple[str, list[Path], bool]:
        up = driver.upper()
        if up in NETWORK_CONNECTION_PREFIXES:
            return self._network(original, what)
        if up not in FILE_CONNECTION_PREFIXES:
            raise GdalMcpError(
                "unsupported",
                f"{what} '{original}': '{driver}:' connection strings are not supported "
                "(databases and services are outside the workspace); give a file path",
            )
        # Quoted file part: NETCDF:"f.nc":var, HDF5:"f.h5"://x, HDF4_EOS:EOS_GRID:"f.hdf":g:f
        q = re.search(r'"([^"]*)"', rest)
        if q:
            g, files, net = self._resolve_gdal(q.group(1), base=base, what=what, depth=depth + 1)
            return f'{driver}:{rest[: q.start()]}"{g}"{rest[q.end() :]}', files, net
        # Unquoted: try each ':' split; GTIFF_DIR:1:file and NITF_IM:0:file put the file last.
        if up in {"GTIFF_DIR", "NITF_IM", "PDF"}:
            head, _, tail = rest.partition(":")
            g, files, net = self._resolve_gdal(tail, base=base, what=what, depth=depth + 1)
            return f"{driver}:{head}:{g}", files, net
        segments = rest.split(":")
        last_error: GdalMcpError | None = None
        for n in range(len(segments), 0, -1):
            candidate, remainder = ":".join(segments[:n]), segments[n:]
            if not candidate:
                continue
            try:
                g, files, net = self._resolve_gdal(candidate, base=base, what=what, depth=depth + 1)
            except GdalMcpError as e:
                if e.code == "out-of-root":
                    raise
                last_error = e
                continue
            return f"{driver}:{g}" + "".join(":" + s for s in remainder), files, net
        raise last_error or GdalMcpError("invalid-argument", f"{what} '{original}': no file named in it")

    # ----- datasets that reference other files ---------------------------------------------
    def _vrt_references(self, real: Path, *, what: str, depth: int) -> list[Path]:
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
            return self._kml_overlays(real, what=what, depth=depth)
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
            files += self._reference(
                ref,
                ref_base,
                what=f"{what} (via {real.name})",
                depth=depth + 1,
                refused=f"{what}: {real.name} refers to '{ref}', which is not an allowed workspace file (the files a "
                "dataset names must lie inside the workspace)",
            )
        return files

    def _kml_overlays(self, real: Path, *, what: str, depth: int) -> list[Path]:
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
                files += self._reference(
                    ref,
                    real.parent,
                    what=what,
                    depth=depth + 1,
                    refused=f"{what}: {real.name} overlays '{ref}', which is not an allowed workspace file",
                )
        return files

    def check_referenced(self, names: Iterable[str], *, what: str = "input") -> None:
        """After opening: every file GDAL says the dataset uses must be inside a workspace."""
        for name in names:
            if not name or name.startswith("/vsimem/"):
                continue
            try:
                self._resolve_gdal(name, base=None, what=what, depth=0)
            except GdalMcpError as e:
                if e.code == "not-found":
                    continue  # listed sidecars that do not exist are harmless
                raise GdalMcpError(
                    "out-of-root",
                    f"{what} refers to a file outside the workspace ({Path(name).name}); refusing to read it",
                ) from None

    # ----- paths inside SQL and open options ---------------------------------------------------
    def check_sql(self, sql: str, *, what: str = "sql") -> None:
        """Refuse SQL (OGR SQL or the SQLite dialect) that could reach beyond the dataset it runs on.

        GDAL opens any data source named as a table qualifier ("other.shp"."layer", JOIN 'x.gpkg'.layer) or
        given to ogr_datasource_load_layers(); SQLite can ATTACH databases and load extensions; SpatiaLite
        builds may have file functions (ImportSHP, BlobFromFile …) and virtual tables over files. A name of
        a path outside the workspace is `out-of-root`; any other such construct is `invalid-argument`.
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
                    self._sql_source(_sql_name(*tokens[i + 2]), what)
                raise GdalMcpError(
                    "invalid-argument",
                    f"{what} may not call {_sql_name(kind, text)}(): it reaches "
                    "files, other databases, extensions or the network",
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
                        self._sql_source(name, what)  # "datasource"."layer": another data source
                elif kind != "word" and _PATH_LIKE_RE.search(name):
                    self._sql_source(name, what)
                continue
            if (
                kind in ("str", "qid")
                and nxt[1] == "."
                and i + 2 < len(tokens)
                and _PATH_LIKE_RE.search(_sql_name(kind, text))
                and in_from[-1]
            ):
                self._sql_source(_sql_name(kind, text), what)
            expect_table = False

    def _sql_source(self, name: str, what: str) -> None:
        """A data source named inside SQL: always refused; out-of-root when it lies outside the workspace."""
        outside = False
        try:
            self._resolve_gdal(name, base=None, what=what, depth=0)
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

    def check_open_options(self, options: Mapping[str, object] | None, *, what: str = "open_options") -> dict[str, str]:
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
                text, _, _ = self._resolve_gdal(text, base=None, what=f"{what} {key}", depth=0)
            out[key] = text
        return out

    @staticmethod
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

    # ----- outputs ---------------------------------------------------------------------------
    def sweep_stale_temporaries(self, *, max_dirs: int = SWEEP_MAX_DIRS, max_seconds: float = SWEEP_MAX_SECONDS) -> list[Path]:
        """Remove the temporary output directories left in the workspaces by gdal-mcp servers that are gone.

        A server killed mid-write (SIGKILL, power loss) cannot clean up after itself. Only a directory named
        like a temporary one, holding an owner marker whose process no longer runs, is removed; nothing else
        is touched (final outputs are only ever renamed into place by a live server). The walk is breadth
        first, does not follow symlinks, and stops after `max_dirs` directories or `max_seconds`.
        """
        from collections import deque

        removed: list[Path] = []
        deadline = time.monotonic() + max_seconds
        pending: deque[str] = deque(str(r) for r in self.roots)
        visited = 0
        while pending:
            if visited >= max_dirs or time.monotonic() > deadline:
                log.info("stale temporary sweep stopped after %d directories (%d left unvisited)", visited, len(pending))
                break
            d = pending.popleft()
            visited += 1
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue
            for entry in entries:
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                if TMP_DIR_RE.fullmatch(entry.name):
                    if _stale_temporary(entry.path):
                        shutil.rmtree(entry.path, ignore_errors=True)
                        log.warning("removed %s, the temporary output of a gdal-mcp server that is gone", entry.path)
                        removed.append(Path(entry.path))
                elif not any(Path(entry.path) == t for t in FORBIDDEN_TREES):
                    pending.append(entry.path)
        return removed

    def _check_side_files(self, final: Path, what: str) -> None:
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
                        f"{what} '{self.display(final)}' would also write '{self.display(side)}', which already "
                        "exists (a file of another dataset?); choose another name, or pass overwrite=true to "
                        "replace both",
                    )

    def resolve_output(
        self, path: str, *, overwrite: bool = False, inputs: Iterable[ResolvedInput] = (), what: str = "output"
    ) -> OutputTarget:
        """Check an output path and prepare its temporary directory beside it."""
        self._check_text(path, what)
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
        cand = self._candidate(path)
        name = cand.name
        if name in ("", ".", "..") or path.endswith("/"):
            raise GdalMcpError("invalid-argument", f"{what} '{path}' must name a file, not a directory")
        if name.startswith(TMP_PREFIX):
            raise GdalMcpError("invalid-argument", f"{what} '{path}' uses a name reserved for temporary files")
        parent = Path(os.path.realpath(cand.parent))
        if not self._contained(parent):
            raise GdalMcpError("out-of-root", f"{what} '{path}' is outside the workspace; write inside it")
        final = parent / name
        if final.is_symlink():
            target = Path(os.path.realpath(final))
            if not self._contained(target):
                raise GdalMcpError("out-of-root", f"{what} '{path}' is a link to outside the workspace")
        if final.exists() or final.is_symlink():
            if final.is_dir():
                raise GdalMcpError("invalid-argument", f"{what} '{path}' is an existing directory")
            st = final.stat()
            if not stat.S_ISREG(st.st_mode):
                raise GdalMcpError("unsupported", f"{what} '{path}' is not a regular file")
            if not overwrite:
                raise GdalMcpError(
                    "already-exists",
                    f"{what} '{self.display(final)}' already exists; pass overwrite=true to replace it or choose another name",
                )
        if not overwrite:
            self._check_side_files(final, what)
        for inp in inputs:
            for f in inp.files:
                same = f == final or (final.exists() and f.exists() and os.path.samefile(f, final))
                if same:
                    raise GdalMcpError(
                        "invalid-argument",
                        f"{what} '{self.display(final)}' is also an input; write to a different file",
                    )
        created: list[Path] = []
        missing = []
        d = parent
        while not d.exists():
            missing.append(d)
            d = d.parent
        if missing:
            if not self._contained(Path(os.path.realpath(d))):
                raise GdalMcpError("out-of-root", f"{what} '{path}' is outside the workspace")
            for m in reversed(missing):
                m.mkdir()
                created.append(m)
        elif not parent.is_dir():
            raise GdalMcpError("invalid-argument", f"{what} '{path}': {self.display(parent)} is not a directory")
        tmp_dir = parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        try:
            tmp_dir.mkdir()
            (tmp_dir / OWNER_FILE).write_text(json.dumps(_owner_identity()))
        except OSError as e:
            OutputTarget(final=final, display="", tmp_dir=tmp_dir, created_dirs=created).discard()
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise GdalMcpError(
                    "resource-limit",
                    f"the disk is full ({e.strerror}) where {what} '{path}' would be written; free space or write elsewhere",
                ) from None
            raise
        return OutputTarget(final=final, display=self.display(final), tmp_dir=tmp_dir, created_dirs=created, overwrite=overwrite)
