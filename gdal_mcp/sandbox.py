"""The sandbox: the only place that turns a user path into an allowed real path.

Every tool argument, every resource read and every file a dataset refers to (VRT sources, archive
members, subdataset containers) goes through `Sandbox`. Containment is decided on canonical paths
(symlinks resolved) component by component, never by string prefix. Outputs are written to a hidden
temporary directory beside their final place and renamed into place only when the job succeeds.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from gdal_mcp.errors import GdalMcpError

log = logging.getLogger("gdal_mcp.sandbox")

MAX_PATH_LENGTH = 4096
MAX_COMPONENT_LENGTH = 255
MAX_REFERENCE_DEPTH = 8
MAX_PATTERN_MATCHES = 10000
TMP_PREFIX = ".gdal-mcp-tmp-"
RESOURCE_PREFIX = "gdal-mcp://files/"

# Kernel pseudo-filesystems: never a dataset, whatever the workspace.
FORBIDDEN_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))

NETWORK_VSI = (
    "/vsicurl/", "/vsicurl_streaming/", "/vsis3/", "/vsis3_streaming/", "/vsigs/",
    "/vsigs_streaming/", "/vsiaz/", "/vsiaz_streaming/", "/vsiadls/", "/vsioss/",
    "/vsioss_streaming/", "/vsiswift/", "/vsiswift_streaming/", "/vsiwebhdfs/", "/vsihdfs/",
)
NETWORK_SCHEMES = ("http://", "https://", "ftp://", "ftps://", "s3://", "gs://", "az://", "abfs://")
ARCHIVE_VSI = ("/vsizip/", "/vsitar/", "/vsi7z/", "/vsirar/")
ARCHIVE_SUFFIXES = (
    ".zip", ".kmz", ".ods", ".xlsx", ".xlsm", ".docx", ".dwf", ".shz",
    ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".7z", ".rar",
)
# Connection strings whose file part we can locate; the quoted form is preferred by GDAL.
FILE_CONNECTION_PREFIXES = frozenset({
    "NETCDF", "HDF5", "HDF4_SDS", "HDF4_EOS", "HDF4_GR", "HDF4", "GPKG", "GTIFF_DIR", "NITF_IM",
    "ZARR", "PDF", "SENTINEL2", "RASTERLITE", "GRIB", "JP2OPENJPEG",
})
# Connection strings that reach a remote service; allowed only with --allow-network.
NETWORK_CONNECTION_PREFIXES = frozenset({
    "WMS", "WMTS", "WFS", "WCS", "OAPIF", "STACIT", "STACTA", "EEDA", "EEDAI", "DAAS", "NGW",
    "PLSCENES", "CARTO", "ES", "ELASTIC", "AMIGOCLOUD", "GOOGLESHEETS",
})
_CONN_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*):(.*)$", re.S)
# Elements of raster VRTs, warped VRTs and OGR VRTs that name another dataset.
VRT_REFERENCE_TAGS = frozenset({"SourceFilename", "SourceDataset", "SrcDataSource", "OverviewFilename"})


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
    """Where a job writes (`tmp_path`) and where the result lands on success (`final`)."""

    final: Path
    display: str
    tmp_dir: Path
    created_dirs: list[Path] = field(default_factory=list)

    @property
    def tmp_path(self) -> Path:
        return self.tmp_dir / self.final.name

    def commit(self) -> list[Path]:
        """Move everything the job wrote (the file and its sidecars) into place."""
        placed: list[Path] = []
        if not self.tmp_path.exists():
            self.discard()
            raise GdalMcpError("internal-error", f"the job wrote no file for {self.display}")
        for item in sorted(self.tmp_dir.iterdir()):
            target = self.final.parent / item.name
            if target.is_dir() and not target.is_symlink() and item.is_dir():
                shutil.rmtree(target)
            os.replace(item, target)
            placed.append(target)
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        return placed

    def discard(self) -> None:
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        for d in reversed(self.created_dirs):
            try:
                d.rmdir()
            except OSError:
                break


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
                f"{what} '{shown}' is outside the workspace; use a path inside it "
                "(list_datasets shows what is there)",
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

    def resolve_inputs(self, inputs: list[str] | None, pattern: str | None, *, what: str = "inputs",
                       limit: int = MAX_PATTERN_MATCHES) -> list[ResolvedInput]:
        """Several datasets: the list given, or the workspace files a glob matches (sorted), never both."""
        if (inputs is None) == (pattern is None):
            raise GdalMcpError("invalid-argument", f"give either {what} (a list of paths) or input_pattern (a glob "
                               "such as 'tiles/*.tif'), not both and not neither")
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
            raise GdalMcpError("out-of-root", f"input_pattern '{pattern}' must be a glob relative to the workspace, "
                               "e.g. 'tiles/*.tif'")
        if not any(ch in pattern for ch in "*?["):
            raise GdalMcpError("invalid-argument", f"input_pattern '{pattern}' has no wildcard; give inputs=[…] for "
                               "named files or a glob such as 'tiles/*.tif'")
        root = self.roots[0]
        matches: list[Path] = []
        for p in root.glob(pattern):
            if p.name.startswith(TMP_PREFIX) or any(part.startswith(TMP_PREFIX) for part in p.parts):
                continue
            if p.is_file():
                matches.append(p)
                if len(matches) > limit:
                    raise GdalMcpError("invalid-argument", f"input_pattern '{pattern}' matches more than {limit} "
                                       "files; narrow it")
        if not matches:
            raise GdalMcpError("not-found", f"input_pattern '{pattern}' matches no file in the workspace; "
                               "list_datasets shows what is there")
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
            inner = path[len("/vsigzip/"):]
            g, files, net = self._resolve_gdal(inner, base=base, what=what, depth=depth + 1)
            return "/vsigzip/" + g, files, net
        for prefix in ARCHIVE_VSI:
            if low.startswith(prefix):
                return self._resolve_archive(prefix, path[len(prefix):], base=base, what=what, depth=depth)
        if low.startswith("/vsi"):
            raise GdalMcpError(
                "unsupported",
                f"{what} '{path}' uses a GDAL virtual file system this server does not allow; "
                "supported: /vsizip/, /vsitar/, /vsigzip/, /vsi7z/, /vsirar/",
            )
        if low.startswith("file://"):
            return self._resolve_gdal(path[len("file://"):], base=base, what=what, depth=depth + 1)
        m = _CONN_RE.match(path)
        if m and not self._literal_exists(path, base):
            return self._resolve_connection(m.group(1), m.group(2), path, base=base, what=what, depth=depth)
        real = self._real_file(path, what=what, base=base)
        files = [real]
        if real.is_file():
            files += self._vrt_references(real, what=what, depth=depth)
        return str(real), files, False

    def _literal_exists(self, path: str, base: Path | None) -> bool:
        try:
            real = Path(os.path.realpath(self._candidate(path, base)))
        except (OSError, ValueError):
            return False
        return self._contained(real) and real.exists()

    def _resolve_archive(self, prefix: str, rest: str, *, base: Path | None, what: str,
                         depth: int) -> tuple[str, list[Path], bool]:
        if rest.startswith("{"):
            end = rest.find("}")
            if end < 0:
                raise GdalMcpError("invalid-argument", f"{what}: unbalanced '{{' in {prefix} path")
            archive, inner = rest[1:end], rest[end + 1:].lstrip("/")
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
                return "/".join(parts[: i + 1]), "/".join(parts[i + 1:])
        raise GdalMcpError(
            "invalid-argument",
            f"{what}: no archive file (.zip, .tar, .tgz, .7z …) found in {prefix}{rest}; "
            f"write it as {prefix}path/to/archive.zip/member",
        )

    def _resolve_connection(self, driver: str, rest: str, original: str, *, base: Path | None, what: str,
                            depth: int) -> tuple[str, list[Path], bool]:
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
            return f'{driver}:{rest[: q.start()]}"{g}"{rest[q.end():]}', files, net
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
        if b"gdal_streamed_alg" in head or name.endswith((".gdalg.json", ".gti", ".gti.gpkg", ".gti.fgb")) or (
            b"<GDALTileIndexDataset" in head
        ):
            # Pipelines and tile indexes name their inputs in ways we cannot check before GDAL runs them.
            raise GdalMcpError("unsupported", f"{what}: {real.name} is a GDAL pipeline or tile index, which "
                               "this server does not open; use the files it refers to directly")
        if b"<VRTDataset" not in head and b"<OGRVRTDataSource" not in head:
            return []
        try:
            tree = ET.parse(real)
        except ET.ParseError as e:
            raise GdalMcpError("gdal-error", f"{what}: {real.name} is not valid VRT XML ({e})") from None
        files: list[Path] = []
        for el in tree.iter():
            tag = el.tag.split("}")[-1] if isinstance(el.tag, str) else ""
            ref = (el.text or "").strip()
            if tag not in VRT_REFERENCE_TAGS or not ref:
                continue
            relative = el.get("relativeToVRT", el.get("relativetoVRT", "0")) == "1"
            # OGR VRTs resolve SrcDataSource against the VRT's directory when relativeToVRT="1".
            ref_base = real.parent if relative or not ref.startswith("/") else None
            try:
                _, reached, _ = self._resolve_gdal(ref, base=ref_base, what=f"{what} (via {real.name})",
                                                   depth=depth + 1)
            except GdalMcpError as e:
                raise GdalMcpError(
                    "out-of-root" if e.code in ("out-of-root", "unsupported") else e.code,
                    f"{what}: {real.name} refers to '{ref}', which is not an allowed workspace file "
                    "(VRT sources must lie inside the workspace)",
                ) from None
            files += reached
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

    # ----- outputs ---------------------------------------------------------------------------
    def resolve_output(self, path: str, *, overwrite: bool = False, inputs: Iterable[ResolvedInput] = (),
                       what: str = "output") -> OutputTarget:
        """Check an output path and prepare its temporary directory beside it."""
        self._check_text(path, what)
        low = path.lower()
        if low.startswith("/vsi") or low.startswith(NETWORK_SCHEMES) or (
            _CONN_RE.match(path) and _CONN_RE.match(path).group(1).upper() in  # type: ignore[union-attr]
            FILE_CONNECTION_PREFIXES | NETWORK_CONNECTION_PREFIXES
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
                    f"{what} '{self.display(final)}' already exists; pass overwrite=true to replace it "
                    "or choose another name",
                )
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
        tmp_dir.mkdir()
        return OutputTarget(final=final, display=self.display(final), tmp_dir=tmp_dir, created_dirs=created)
