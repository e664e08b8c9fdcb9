"""`Sandbox`: the workspace roots and the network switch, and one thin method per decision.

Each method calls the function of the module that holds its concern (paths, inputs, references, options, outputs,
temporaries); see the package docstring. `_resolve_gdal` is the way back into input resolution for the modules
that resolve what a dataset or an argument names (references.py, options.py).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import inputs as _inputs
from gdal_mcp.sandbox import options as _options
from gdal_mcp.sandbox import outputs as _outputs
from gdal_mcp.sandbox import paths as _paths
from gdal_mcp.sandbox import references as _references
from gdal_mcp.sandbox import remote as _remote
from gdal_mcp.sandbox import temporaries as _temporaries
from gdal_mcp.sandbox.inputs import MAX_PATTERN_MATCHES, ResolvedInput
from gdal_mcp.sandbox.outputs import WRITTEN_SCHEMES, OutputTarget
from gdal_mcp.sandbox.temporaries import SWEEP_MAX_DIRS, SWEEP_MAX_SECONDS

#: stac:// asset names a server remembers (each costs ~200 bytes)
MAX_STAC_ASSETS = 100_000


class Sandbox:
    """Decides every path. Built from the workspace roots given on the command line."""

    def __init__(
        self,
        workspaces: Iterable[os.PathLike[str] | str],
        *,
        allow_network: bool = False,
        allow_remote: Iterable[str] = (),
        bucket: str | None = None,
        scratch: os.PathLike[str] | str | None = None,
    ) -> None:
        self.roots: tuple[Path, ...] = _paths.workspace_roots(workspaces, allow_none=bucket is not None)
        #: a workspace in object storage (--workspace s3://bucket/prefix): relative paths name its objects (remote.py
        #: bucket_location); local workspaces, if any, are reached by absolute paths
        self.bucket = _remote.parse_allowed(bucket) if bucket else None
        if self.bucket is not None and self.bucket.scheme != "s3":
            raise ValueError(f"workspace {bucket}: only s3:// buckets can be workspaces")
        #: with a bucket workspace: the local directory outputs are written in before their upload (not a workspace)
        self.scratch = Path(os.path.realpath(scratch)) if scratch is not None else None
        entries = (*allow_remote, *([self.bucket.url.rstrip("/")] if self.bucket is not None else []))
        self.remote = _remote.AllowList(tuple(entries), any_location=allow_network)
        #: stac://collection/item/asset -> the asset's input, for the assets stac_search has returned (bounded, newest kept)
        self.stac_assets: OrderedDict[str, str] = OrderedDict()

    def remember_stac_asset(self, uri: str, target: str) -> None:
        """Let `uri` (stac://collection/item/asset, named in a stac_search result) stand for the asset's input; the
        input is resolved (and checked) each time it is used, like any other."""
        self.stac_assets[uri] = target
        self.stac_assets.move_to_end(uri)
        while len(self.stac_assets) > MAX_STAC_ASSETS:
            self.stac_assets.popitem(last=False)

    @classmethod
    def for_worker(cls, config: Mapping[str, object]) -> Sandbox:
        """The sandbox of a worker, from the config the server gives it (roots, the scratch directory of a local
        worker, allow_network, allow_remote with the bucket workspace, and the bucket: then there may be no roots)."""
        scratch = config.get("scratch")
        roots: list[Any] = [*cast(Iterable[Any], config["roots"]), *([scratch] if scratch else [])]
        remote: Any = config.get("allow_remote") or ()
        bucket = config.get("bucket")
        return cls(
            roots,
            allow_network=bool(config.get("allow_network")),
            allow_remote=tuple(remote),
            bucket=str(bucket) if bucket else None,
        )

    def bucket_location(self, path: str, *, what: str = "path") -> _remote.Location | None:
        """The object a workspace-relative path names in the bucket workspace; None without one (or for an absolute
        path, a GDAL path or a URL: those resolve as they always do)."""
        rel = path.strip()
        if self.bucket is None or rel.startswith(("/", "~")) or "://" in rel or _remote.is_remote(rel):
            return None
        if any(f"/{rel}".startswith(f"{root}/") for root in self.roots):
            return None  # a local workspace's file named without its leading '/' (a resource URI's path)
        while rel.startswith("./"):
            rel = rel[2:]
        rel = "" if rel in (".", "") else rel
        prefix = self.bucket.path.rstrip("/")
        key = f"{prefix}/{rel}" if prefix and rel else (prefix or rel)
        return _remote.parse(f"s3://{self.bucket.host}/{key}", what=what)

    def object_location(self, path: str, *, what: str = "path") -> _remote.Location | None:
        """The object a dataset path names, when it names one in object storage that this server writes (s3, az): in
        the bucket workspace, or an allowed s3:// or az:// location (or GDAL's /vsis3/, /vsiaz/ spelling); None for
        anything else (a local file, an http URL). out-of-root for a location the allow-list does not cover."""
        location = self.bucket_location(path, what=what)
        if location is None and _remote.is_remote(path.strip()):
            location = self.remote.check(path.strip(), what=what)
        return location if location is not None and location.scheme in WRITTEN_SCHEMES else None

    def resource_path(self, path: str) -> str:
        """The path a gdal-mcp://files/ URI names: a file of a secondary (or, beside a bucket, any) local workspace is
        shown absolute, and its URI carries it without the leading '/'."""
        absolute = "/" + path.lstrip("/")
        return absolute if any(absolute.startswith(f"{root}/") for root in self.roots) else path

    def bucket_display(self, text: str) -> str:
        """A bucket object's /vsis3/ or s3:// path as the workspace-relative path it is; other text unchanged."""
        if self.bucket is None:
            return text
        prefix = self.bucket.path.rstrip("/")
        for head in (f"/vsis3/{self.bucket.host}", f"s3://{self.bucket.host}"):
            root = f"{head}/{prefix}" if prefix else head
            if text == root:
                return "."
            if text.startswith(root + "/"):
                return text[len(root) + 1 :]
        return text

    @property
    def allow_network(self) -> bool:
        """Whether any remote location may be read (the workers then get the network)."""
        return bool(self.remote)

    # ----- display (paths.py) ----------------------------------------------------------------
    def display(self, path: os.PathLike[str] | str) -> str:
        """Workspace-relative form of a real path (absolute only for secondary workspaces), or of a bucket object."""
        text = os.fspath(path)
        if _remote.is_remote(text):  # an object of the bucket workspace: its relative path; another location: itself
            return self.bucket_display(text)
        if self.bucket is not None and os.path.isabs(text):
            return text  # beside a bucket workspace, relative names are its objects: a local file keeps its full path
        return _paths.display(self.roots, path)

    def uri(self, display: str) -> str:
        """The resource URI of a workspace file (see server/tools/resources.py); an object in storage keeps its URL."""
        return display if _remote.is_remote(display) else _paths.uri(display)

    def scrub(self, text: str) -> str:
        """Remove the server's absolute layout from a message (GDAL errors quote full paths)."""
        if self.bucket is not None:
            prefix = self.bucket.path.rstrip("/")
            for head in (f"/vsis3/{self.bucket.host}", f"s3://{self.bucket.host}"):
                root = f"{head}/{prefix}" if prefix else head
                text = text.replace(root + "/", "")
        if self.scratch is not None:
            text = text.replace(str(self.scratch) + os.sep, "")
        if self.bucket is not None:
            return text  # local paths keep their full form (display)
        return _paths.scrub(self.roots, text)

    def scrub_obj(self, obj: object) -> object:
        return _paths.scrub_obj(self.roots, obj)

    # ----- plain files (paths.py) ------------------------------------------------------------
    def resolve_dir(self, path: str, *, what: str = "path") -> tuple[Path, str]:
        return _paths.resolve_dir(self.roots, path, what=what)

    def resolve_file(self, path: str, *, what: str = "path") -> Path:
        """A plain workspace file (no GDAL syntax): for resource reads and listings. In a bucket workspace a relative
        path names an object, not a file: unsupported here (the callers that read objects ask bucket_location)."""
        if self.bucket_location(path, what=what) is not None:
            raise GdalMcpError(
                "unsupported",
                f"{what} '{path}' is an object of the bucket workspace, not a local file: the tools that take datasets "
                "read it (raster_info, vector_info …), and workspace_copy, workspace_move and workspace_delete change it",
            )
        return _paths.resolve_file(self.roots, path, what=what)

    # ----- GDAL dataset names (inputs.py) ----------------------------------------------------
    def resolve_input(self, path: str, *, what: str = "input") -> ResolvedInput:
        """Resolve a dataset name as GDAL understands it: file, /vsi chain or connection string."""
        return _inputs.resolve_input(self, path, what=what)

    def resolve_inputs(
        self, inputs: list[str] | None, pattern: str | None, *, what: str = "inputs", limit: int = MAX_PATTERN_MATCHES
    ) -> list[ResolvedInput]:
        """Several datasets: the list given, or the workspace files a glob matches (sorted), never both."""
        return _inputs.resolve_inputs(self, inputs, pattern, what=what, limit=limit)

    def glob(self, pattern: str, *, limit: int = MAX_PATTERN_MATCHES) -> list[Path]:
        """Regular files under the first workspace matching a glob ('tiles/*.tif', 'a/**/b.tif'), sorted."""
        if self.bucket is not None:
            raise GdalMcpError(
                "unsupported",
                "input_pattern is not matched in a bucket workspace yet; list the inputs (list_datasets shows them)",
            )
        return _inputs.glob(self.roots, pattern, limit=limit)

    def _resolve_gdal(self, path: str, *, base: Path | None, what: str, depth: int) -> tuple[str, list[Path], bool]:
        """(what GDAL opens, the workspace files it reaches, whether it is a network location) for a dataset name."""
        return _inputs.resolve_gdal(self, path, base=base, what=what, depth=depth)

    # ----- datasets that reference other files (references.py) -------------------------------
    def check_referenced(self, names: Iterable[str], *, what: str = "input") -> None:
        """After opening: every file GDAL says the dataset uses must be inside a workspace."""
        _references.check_referenced(self, names, what=what)

    # ----- paths inside SQL and open options (options.py) ------------------------------------
    def check_sql(self, sql: str, *, what: str = "sql", layers: Collection[str] = ()) -> None:
        """Refuse SQL (OGR SQL or the SQLite dialect) that could reach beyond the dataset it runs on; `layers`, the
        input's layer names, may be named alone even when they look like files ('nc.gpkg')."""
        _options.check_sql(self, sql, what=what, layers=layers)

    def sql_file_like_tables(self, sql: str, *, what: str = "sql") -> list[str]:
        """The unqualified table names in `sql` that look like files: check_sql accepts them only as the input's
        layer names (everything else it refuses is refused here already)."""
        return _options.sql_file_like_tables(self, sql, what=what)

    def check_open_options(self, options: Mapping[str, object] | None, *, what: str = "open_options") -> dict[str, str]:
        """Dataset open options (GDAL -oo) made safe: values naming files resolved inside the workspace."""
        return _options.check_open_options(self, options, what=what)

    @staticmethod
    def check_creation_options(options: Mapping[str, object] | None, *, what: str = "creation option") -> None:
        """Creation options (GDAL -co, -lco) write only the output asked for (options.check_creation_options)."""
        _options.check_creation_options(options, what=what)

    # ----- outputs (outputs.py, temporaries.py) ----------------------------------------------
    def sweep_stale_temporaries(self, *, max_dirs: int = SWEEP_MAX_DIRS, max_seconds: float = SWEEP_MAX_SECONDS) -> list[Path]:
        """Remove the temporary output directories left in the workspaces by gdal-mcp servers that are gone."""
        return _temporaries.sweep_stale_temporaries(self.roots, max_dirs=max_dirs, max_seconds=max_seconds)

    def resolve_output(
        self,
        path: str,
        *,
        overwrite: bool = False,
        inputs: Iterable[ResolvedInput] = (),
        what: str = "output",
        directory: bool = False,
        side_file: bool = False,
    ) -> OutputTarget:
        """Check an output path and prepare its temporary directory beside it (`directory`: the job writes a directory
        there, committed whole; `side_file`: the output is meant to be a side file of its dataset, as raster_overviews'
        external .ovr; see outputs.py)."""
        return _outputs.resolve_output(
            self, path, overwrite=overwrite, inputs=inputs, what=what, directory=directory, side_file=side_file
        )
