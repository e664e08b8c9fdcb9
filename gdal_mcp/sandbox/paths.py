"""Workspace roots and plain paths: which real paths are inside a workspace, and how a path is shown.

Containment is decided on canonical paths (symlinks resolved) component by component, never by string prefix.
Everything here works on the tuple of canonical workspace roots (`Sandbox.roots`), the first being the one
relative paths start from and the one messages show paths relative to.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from gdal_mcp.errors import GdalMcpError

MAX_PATH_LENGTH = 4096
MAX_COMPONENT_LENGTH = 255
TMP_PREFIX = ".gdal-mcp-tmp-"
TMP_DIR_RE = re.compile(re.escape(TMP_PREFIX) + r"[0-9a-f]{32}")
RESOURCE_PREFIX = "gdal-mcp://files/"

# Kernel pseudo-filesystems: never a dataset, whatever the workspace.
FORBIDDEN_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))

#: the canonical workspace roots, the first one first
Roots = tuple[Path, ...]


def workspace_roots(workspaces: Iterable[os.PathLike[str] | str], *, allow_none: bool = False) -> Roots:
    """The canonical roots of the workspaces given on the command line (duplicates once); `allow_none`: there may be
    none (the workspace is a bucket)."""
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
    if not roots and not allow_none:
        raise ValueError("at least one workspace is required")
    return tuple(roots)


# ----- display -------------------------------------------------------------------------
#: archive file systems whose path is the archive's (real) path then the member's
ARCHIVE_DISPLAY_PREFIXES = ("/vsizip/", "/vsitar/", "/vsigzip/", "/vsi7z/", "/vsirar/")


def display(roots: Roots, path: os.PathLike[str] | str) -> str:
    """Workspace-relative form of a real path (absolute only for secondary workspaces); an archive member's GDAL path
    ('/vsizip/<real archive>/<member>') keeps its prefix before the archive's relative path."""
    text = os.fspath(path)
    for prefix in ARCHIVE_DISPLAY_PREFIXES:
        if text.startswith(prefix + "/"):
            return prefix + display(roots, text[len(prefix) :])
    p = Path(path)
    for i, root in enumerate(roots):
        if p == root or p.is_relative_to(root):
            rel = p.relative_to(root).as_posix()
            if i == 0:
                return rel if rel != "." else "."
            return str(p)
    return p.name or str(p)


def uri(display: str) -> str:
    """The resource URI of a workspace file (see server/tools/resources.py)."""
    from urllib.parse import quote

    return RESOURCE_PREFIX + quote(display.lstrip("/"))


#: a job's temporary output directory inside a path (scrubbed out of messages)
_TEMPORARY_DIR = re.compile(re.escape(TMP_PREFIX) + r"[0-9a-f]{32}/")


def scrub(roots: Roots, text: str) -> str:
    """Remove the server's absolute layout from a message (GDAL errors quote full paths)."""
    if TMP_PREFIX in text:  # every string of every result comes here: the pattern only where it can match
        text = _TEMPORARY_DIR.sub("", text)
    if not roots:
        return text
    first = str(roots[0])
    text = text.replace(first + os.sep, "").replace(first, ".")
    return text


def scrub_obj(roots: Roots, obj: object) -> object:
    if isinstance(obj, str):
        return scrub(roots, obj)
    if isinstance(obj, dict):
        return {k: scrub_obj(roots, v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub_obj(roots, v) for v in obj]
    return obj


# ----- plain files ---------------------------------------------------------------------
def check_text(path: str, what: str) -> None:
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


def candidate(roots: Roots, path: str, base: Path | None = None) -> Path:
    p = Path(path).expanduser() if path.startswith("~") else Path(path)
    if not p.is_absolute():
        if base is None and not roots:
            return Path("/nonexistent-workspace") / p  # no local workspace (a bucket is): contained nowhere
        p = (base or roots[0]) / p
    return p


def key_dir() -> Path:
    """Where the server keeps the key its provenance records are signed with ($XDG_STATE_HOME/gdal-mcp, else
    ~/.local/state/gdal-mcp): never a path any tool may name, whatever the workspace (server/provenance.py)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(os.path.realpath(os.path.join(state, "gdal-mcp")))


def contained(roots: Roots, real: Path) -> bool:
    if any(real == t or real.is_relative_to(t) for t in (*FORBIDDEN_TREES, key_dir())):
        return False
    return any(real == r or real.is_relative_to(r) for r in roots)


def real_file(roots: Roots, path: str, *, what: str, base: Path | None = None, shown: str | None = None) -> Path:
    """Canonical path of an existing, contained, regular file or directory."""
    shown = shown if shown is not None else path
    real = Path(os.path.realpath(candidate(roots, path, base)))
    if not contained(roots, real):
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


def resolve_dir(roots: Roots, path: str, *, what: str = "path") -> tuple[Path, str]:
    check_text(path, what)
    real = real_file(roots, path, what=what)
    if not real.is_dir():
        raise GdalMcpError("invalid-argument", f"{what} '{path}' is a file, not a directory")
    return real, display(roots, real)


def resolve_file(roots: Roots, path: str, *, what: str = "path") -> Path:
    """A plain workspace file (no GDAL syntax): for resource reads and listings."""
    check_text(path, what)
    return real_file(roots, path, what=what)
