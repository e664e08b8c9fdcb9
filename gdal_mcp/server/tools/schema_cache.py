"""The tools' JSON schemas kept between starts, beside Python's bytecode cache.

FastMCP derives each tool's input and output schema from its signature with pydantic when the tool is registered:
~10 ms a tool, 0.5 s of a cold start for the 54 tools, the same on every start. The schemas are a pure function of
the source code and of the libraries that derive them, so they are kept in a file named after a fingerprint of both:
every `.py` file of gdal_mcp (path and content) and the installed distributions beside FastMCP, pydantic and the MCP
SDK (their dist-info names carry the versions, their times a reinstall), Python's version and -O level. Any change
gives another name, so a file is never stale: it is used as it is or not at all. A start that finds no file derives
the schemas as before and writes one (atomically).

Where: the package's own `__pycache__` (or under PYTHONPYCACHEPREFIX, as Python does), which Python already trusts
for the bytecode it runs. Never inside a workspace: the tools write there, so a tool output planted under the
cache's name could otherwise change what the tools' schemas tell the model. A cache directory inside a workspace
(or unreadable, or unwritable) turns the cache off, and the schemas are derived on every start. PYTHONDONTWRITEBYTECODE
does not: it is about bytecode, and containers often set it.

Each tool's schemas are kept twice: as FastMCP derives them, and as they are listed, every $ref inlined (FastMCP's
DereferenceRefsMiddleware, ~0.1 s for the 54 tools on the first tools/list; see SchemasDereferencedOnce).
Only the schemas are kept: the tool itself (its function, validation of the arguments, its result) is built from
the code on every start, exactly as FastMCP builds it (tests/server/test_schema_cache.py compares every tool).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fastmcp.server.middleware.dereference import _dereference_tool  # what DereferenceRefsMiddleware lists
from fastmcp.tools import Tool

log = logging.getLogger("gdal_mcp.server.tools")

PACKAGE = Path(__file__).resolve().parents[2]  # gdal_mcp/
PREFIX = "tool-schemas."
#: a tool's (input schema, output schema or None)
Schemas = tuple[dict[str, Any], dict[str, Any] | None]


def fingerprint(package: Path = PACKAGE) -> str:
    """sha256 of gdal_mcp's sources and of the versions of the libraries that derive the schemas (~10 ms)."""
    import fastmcp
    import mcp
    import pydantic
    import pydantic_core

    h = hashlib.sha256(f"{sys.version}\0{sys.flags.optimize}".encode())  # -OO drops the models' docstrings
    for dirpath, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = Path(dirpath, name)
            h.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
    sites = {Path(m.__file__ or "").resolve().parent.parent for m in (fastmcp, mcp, pydantic, pydantic_core)}
    for site in sorted(sites):
        with os.scandir(site) as entries:  # the versions, and when each was (re)installed
            infos = sorted((e.name, e.stat().st_mtime_ns) for e in entries if e.name.endswith(".dist-info"))
        h.update(repr(infos).encode())
    return h.hexdigest()


def cache_dir(package: Path = PACKAGE) -> Path:
    """Where Python keeps the bytecode of gdal_mcp/server/tools: its __pycache__, or under PYTHONPYCACHEPREFIX."""
    here = package / "server" / "tools"
    if sys.pycache_prefix:
        return Path(sys.pycache_prefix, *here.parts[1:])
    return here / "__pycache__"


class ToolSchemas:
    """The tools' schemas of this source and these libraries: `get` those already derived, `put` new ones, `save`
    writes the file if anything was new. `path` None: no cache (every schema derived, nothing written)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        #: by tool name: its schemas as derived, and as listed (every $ref inlined: SchemasDereferencedOnce)
        self.known: dict[str, tuple[Schemas, Schemas]] = self._load() if path is not None else {}
        self.new = False

    @classmethod
    def for_server(cls, roots: Sequence[Path], package: Path = PACKAGE) -> ToolSchemas:
        """The cache of this checkout, or none where a workspace holds its directory (see the module's docstring).

        `roots`: the sandbox's canonical workspace roots. Held or not is decided by identity (device and inode of
        the directory and each of its parents), not by spelling: a case-insensitive file system or a bind mount
        names one directory in several ways."""
        try:
            where = cache_dir(package).resolve()
            workspaces = {_identity(Path(r)): r for r in roots if Path(r).exists()}
            for d in (where, *where.parents):
                held = workspaces.get(_identity(d)) if d.exists() else None
                if held is not None:
                    log.warning(
                        "tool schemas not cached: %s is inside the workspace %s (so is the server's own code: "
                        "a workspace should not hold the installation)",
                        where,
                        held,
                    )
                    return cls(None)
            return cls(where / f"{PREFIX}{sys.implementation.cache_tag}.{fingerprint(package)[:32]}.json")
        except Exception as e:  # noqa: BLE001 - a cache: the server starts without it
            log.info("tool schemas not cached: %s", e)
            return cls(None)

    def _load(self) -> dict[str, tuple[Schemas, Schemas]]:
        assert self.path is not None
        try:
            tools = json.loads(self.path.read_bytes())["tools"]
            known = {
                name: ((entry["input"], entry["output"]), (entry["listed_input"], entry["listed_output"]))
                for name, entry in tools.items()
            }
            if all(_schemas(d) and _schemas(listed) for d, listed in known.values()):
                return known
            log.warning("ignoring the malformed tool-schema cache %s", self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.info("tool schemas not cached: %s", e)
        except Exception as e:  # noqa: BLE001 - malformed (or nested past the recursion limit): derived instead
            log.warning("ignoring the unreadable tool-schema cache %s: %s", self.path, e)
        return {}

    def get(self, name: str) -> Schemas | None:
        """The tool's schemas as FastMCP derives them, or None (each is asked once: this start's own copy)."""
        known = self.known.get(name)
        return None if known is None else known[0]

    def put(self, tool: Tool) -> None:
        """The schemas FastMCP derived for a tool, and as they are listed (copies: the tool keeps its own)."""
        listed = _dereference_tool(tool)
        self.known[tool.name] = _copy((tool.parameters, tool.output_schema)), _copy((listed.parameters, listed.output_schema))
        self.new = True

    def listed(self, tool: Tool) -> Tool | None:
        """The tool as FastMCP's DereferenceRefsMiddleware lists it (every $ref inlined), if this is the tool whose
        schemas are here; else None."""
        known = self.known.get(tool.name)
        if known is None or known[0] != (tool.parameters, tool.output_schema):
            return None
        (_, _), (listed_input, listed_output) = known
        return tool.model_copy(update={"parameters": listed_input, "output_schema": listed_output})

    def save(self) -> None:
        """Write the file if a schema was derived on this start (atomically; the other fingerprints' files go)."""
        if self.path is None or not self.new:
            return
        body = {
            "tools": {
                name: {"input": i, "output": o, "listed_input": li, "listed_output": lo}
                for name, ((i, o), (li, lo)) in sorted(self.known.items())
            }
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tool-schemas-", dir=self.path.parent)
            try:
                os.fchmod(fd, Path(__file__).stat().st_mode & 0o666)  # readable as the sources are, as Python's .pyc
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(body, f, separators=(",", ":"))
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            for old in _others(self.path):
                with contextlib.suppress(OSError):
                    old.unlink()
            self.new = False
        except OSError as e:
            log.info("tool schemas not cached: %s", e)


def _schemas(pair: Schemas) -> bool:
    return isinstance(pair[0], dict) and (pair[1] is None or isinstance(pair[1], dict))


def _copy(pair: Schemas) -> Schemas:
    return json.loads(json.dumps(pair[0])), json.loads(json.dumps(pair[1]))


def _identity(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


def _others(path: Path) -> Iterable[Path]:
    """This interpreter's files of other fingerprints (another Python sharing the sources keeps its own)."""
    return (p for p in path.parent.glob(f"{PREFIX}{sys.implementation.cache_tag}.*.json") if p.name != path.name)
