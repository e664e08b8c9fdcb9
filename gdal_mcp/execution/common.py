"""What the local and the Dask executors' workers share: the GDAL and PROJ set-up of a worker, which engine function a
job may run, the modules warmed before the first job, and the classification of a failure into a stable code.

Runs only in worker processes (it loads GDAL on demand); the server never imports it.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from gdal_mcp.engine.failures import gdal_message
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import WithRemote, confine, remote_budget_error
from gdal_mcp.execution.egress import REFUSED_STATUS
from gdal_mcp.jobs import Job

ENGINE_PREFIX = "gdal_mcp.engine."
#: jobs that move bytes or list names without opening a dataset (no format is interpreted)
BYTES_ONLY = frozenset(
    {
        "gdal_mcp.engine.upload:read_object",
        "gdal_mcp.engine.upload:delete_objects",
        "gdal_mcp.engine.catalog:list_remote",
        "gdal_mcp.engine.catalog:remote_names",
        "gdal_mcp.engine.objects:describe",
        "gdal_mcp.engine.objects:fetch",
        "gdal_mcp.engine.objects:delete",
    }
)
#: least time between two progress messages of a job (the last one, 1.0, always goes)
PROGRESS_INTERVAL = 0.2


#: environment variables a worker never inherits: the server's credentials (a job has no use for them, and what a
#: process holds in its environment a dataset could make GDAL send somewhere)
SECRET_ENV_PREFIXES = ("GDAL_MCP_",)


def network_allowed(config: dict[str, Any]) -> bool:
    """Whether a worker may connect at all: only when the operator allows remote locations (--allow-remote, or
    --allow-network for every one). The kernel's confinement gives the worker no TCP otherwise."""
    return bool(config.get("allow_network") or config.get("allow_remote"))


def set_gdal_environment(config: dict[str, Any]) -> None:
    """The GDAL and PROJ settings of a worker (this pool's, or a Dask worker's through gdal_mcp.execution.dask_worker)."""
    # GDAL reads these at first use; set before rasterio/pyogrio load their bundled GDALs.
    for name in [n for n in os.environ if n.startswith(SECRET_ENV_PREFIXES)]:
        del os.environ[name]
    os.environ["GDAL_VRT_ENABLE_PYTHON"] = "NO"
    # No driver plugins from anywhere (GDAL would dlopen every library in its plugin directories).
    os.environ["GDAL_DRIVER_PATH"] = "disable"
    # Reading a .gz must not write a .properties index beside it (read tools write nothing).
    os.environ["CPL_VSIL_GZIP_WRITE_PROPERTIES"] = "NO"
    tmp = config.get("tmp")
    if tmp:  # the worker's private temporary directory (the only place outside the workspaces it may write)
        for name in ("TMPDIR", "CPL_TMPDIR", "PROJ_USER_WRITABLE_DIRECTORY", "HOME"):
            os.environ[name] = tmp
    os.environ["GDAL_CACHEMAX"] = str(max(16, config.get("gdal_cache", 256 * 1024**2) // 1024**2))
    # TRUE, not EMPTY_DIR: no directory listing (slow in folders of thousands of tiles), yet GDAL still probes the
    # sidecars by name, so a PNG/JPEG georeferenced by its .aux.xml or world file keeps its CRS and transform.
    os.environ.setdefault("GDAL_DISABLE_READDIR_ON_OPEN", "TRUE")
    os.environ["CPL_LOG_ERRORS"] = "OFF"
    if not network_allowed(config):
        # Belt and braces beside the kernel's confinement: GDAL and PROJ do not even try.
        os.environ["GDAL_HTTP_TIMEOUT"] = "1"
        os.environ["CPL_VSIL_CURL_ALLOWED_EXTENSIONS"] = ".__gdal_mcp_network_disabled__"
        os.environ["PROJ_NETWORK"] = "OFF"
    else:
        # Requests and bytes per remote file, for each job's result and its byte budget (engine/remote_io.py)
        os.environ["CPL_VSIL_NETWORK_STATS_ENABLED"] = "YES"
        if config.get("egress_port"):  # every request through the allow-list's proxy (execution/egress.py)
            from gdal_mcp.execution.egress import proxy_environment

            os.environ.update(proxy_environment(int(config["egress_port"]), str(config["egress_token"])))
        if not config.get("allow_network"):
            os.environ["PROJ_NETWORK"] = "OFF"  # PROJ's grid CDN is not among the allowed locations


#: GDAL's paths in object storage, whose folders it lists in one request
OBJECT_STORAGE = ("/vsis3/", "/vsigs/", "/vsiaz/", "/vsiadls/", "/vsioss/", "/vsiswift/")


def readdir_mode(job: Job[Any]) -> str | None:
    """GDAL_DISABLE_READDIR_ON_OPEN for a job whose datasets are all remote: FALSE when all lie in object storage (one
    listing of each folder tells GDAL which side files exist: a PNG's .aux.xml with its CRS, a GeoTIFF's .ovr), else
    EMPTY_DIR (an HTTP server is not listed: every side file would be a probe, ~40 HEAD requests per open, and remote
    data over HTTP carries none); None for any other job (the worker's default, TRUE)."""
    from gdal_mcp.sandbox.remote import is_remote

    # what it reads: not its output (written new), nor where a VRT output will live (a directory named, never opened)
    skip = {job.output_path(), job.upload, job.kwargs().get("vrt_dir")}
    paths = [p for p in job.paths() if p not in skip]
    if not paths or not all(is_remote(p) or p.startswith(("/vsizip//vsi", "/vsitar//vsi", "/vsigzip//vsi")) for p in paths):
        return None
    return "FALSE" if all(p.startswith(OBJECT_STORAGE) for p in paths) else "EMPTY_DIR"


@contextlib.contextmanager
def remote_readdir(job: Job[Any]) -> Iterator[None]:
    """readdir_mode(job) on this thread, for a Dask worker whose threads run other tasks meanwhile (the local worker,
    one job per process, sets it in its environment)."""
    mode = readdir_mode(job)
    if mode is None:
        yield
        return
    from gdal_mcp.engine import gdal_c

    lib = gdal_c.require("CPLSetThreadLocalConfigOption")
    lib.CPLSetThreadLocalConfigOption(b"GDAL_DISABLE_READDIR_ON_OPEN", mode.encode())
    try:
        yield
    finally:
        lib.CPLSetThreadLocalConfigOption(b"GDAL_DISABLE_READDIR_ON_OPEN", None)


def remote_start(config: dict[str, Any] | None = None) -> None:
    """Before a job: its remote reads are counted from zero, against its budget, and nothing another job read (or
    found missing: a job that failed never reached remote_finish) is served from GDAL's cache."""
    from gdal_mcp.engine import remote_io

    remote_io.reset()
    remote_io.clear_cache()
    remote_io.set_budget((config or {}).get("max_remote_bytes"))


def remote_finish(result: Any, config: dict[str, Any]) -> Any:
    """After a job: its result with what it fetched remotely (WithRemote, when it fetched anything), and a job that
    fetched more than the budget fails with resource-limit. GDAL's cache of remote bytes is dropped (the next job may
    read an object that has changed)."""
    from gdal_mcp.engine import remote_io

    figures = remote_io.totals()
    remote_io.clear_cache()
    limit = config.get("max_remote_bytes")
    if figures is not None and limit and figures.bytes > limit:
        raise remote_budget_error(limit, figures.bytes)
    return result if figures is None else WithRemote(result, figures.model_dump())


#: the share of the progress of a job with an upload (Job.upload) that its upload takes
UPLOAD_SHARE = 0.1


def job_progress(job: Job[Any], progress: Callable[[float, str], None]) -> Callable[[float, str], None]:
    """The progress callback the engine function gets: `progress` itself, or, for a job whose worker then uploads
    its output, scaled to leave the last UPLOAD_SHARE to the upload (a client's progress never goes back)."""
    if not job.upload:
        return progress

    def scaled(fraction: float, text: str = "") -> None:
        progress(fraction * (1 - UPLOAD_SHARE), text)

    return scaled


def with_provenance(job: Job[Any], func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` (the job's engine function), then the provenance record of the file it wrote, beside it in the job's
    directory (engine/provenance.py), when the server asked for one (Job.provenance). Runs in the job's own thread:
    the record is written where the job may write, and committed or uploaded with the output."""
    output = job.output_path()
    changed = job.modifies()
    context = job.provenance
    if not context or (output is None and not (len(changed) == 1 and context.get("record_dir"))):
        return func

    def recorded(**kwargs: Any) -> Any:
        import time

        from gdal_mcp.engine import provenance

        provenance.KEY.set(bytes.fromhex(str(context.get("key") or "")))  # this thread's: the job's own
        started = time.time()
        if output is None:  # a file changed in place: its record before, and its digest before the change
            before = {changed[0]: (provenance.digest(changed[0], context.get("digests")), provenance.earlier_record(changed[0]))}
        result = func(**kwargs)
        if output is None:
            to = os.path.join(str(context["record_dir"]), os.path.basename(changed[0]) + provenance.RECORD_SUFFIX)
            provenance.record(
                context, output=changed[0], inputs=job.input_paths(), kwargs=kwargs, result=result, started=started,
                before=before, to=to,
            )  # fmt: skip
        elif os.path.isfile(output) or (os.path.isdir(output) and not os.path.islink(output)):  # a file, or tiles
            provenance.record(
                context, output=output, inputs=job.input_paths(), kwargs=kwargs, result=result, started=started,
                md5=bool(job.upload),
            )  # fmt: skip
        return result

    return recorded


def upload_output(job: Job[Any], progress: Callable[[float, str], None]) -> list[str]:
    """After a job with `upload` (its output goes to object storage): the files it wrote beside its output, uploaded
    by this worker (engine/upload.py: each object whole, never replacing one unless the job's `replace` says so;
    nothing stays of a failed upload). The objects written."""
    from gdal_mcp.engine.upload import upload
    from gdal_mcp.sandbox.outputs import upload_plan

    dst = job.output_path()
    assert job.upload and dst
    sources, targets = upload_plan(os.path.dirname(dst), os.path.basename(dst), job.upload)

    def share(fraction: float, message: str = "") -> None:
        progress(1 - UPLOAD_SHARE + UPLOAD_SHARE * fraction, message)

    from gdal_mcp.sandbox.temporaries import upload_journal

    return upload(sources, targets, share, journal=upload_journal(os.path.dirname(dst)), replace=job.replace)


#: how often a running job's remote reads are measured against the budget
BUDGET_INTERVAL = 0.05


def watch_remote_budget(config: dict[str, Any], running: Callable[[], bool], stop: Callable[[int], None]) -> Any:
    """A thread that measures the job's remote reads every BUDGET_INTERVAL while `running()` and calls `stop(bytes)`
    once they pass --max-remote-bytes; None when there is nothing to watch."""
    import threading

    from gdal_mcp.engine import remote_io

    limit = config.get("max_remote_bytes")
    if not limit or not remote_io.enabled():
        return None

    def watch() -> None:
        while running():
            figures = remote_io.totals()
            if figures is not None and figures.bytes > limit:
                stop(figures.bytes)
                return
            time.sleep(BUDGET_INTERVAL)

    thread = threading.Thread(target=watch, name="gdal-mcp-remote-budget", daemon=True)
    thread.start()
    return thread


def quiet_libraries() -> None:
    logging.getLogger("rasterio").setLevel(logging.CRITICAL)
    import warnings

    # Library warnings (NotGeoreferencedWarning, pyproj's PROJ.4 notes) are reported in results instead.
    warnings.simplefilter("ignore")


def classify(exc: BaseException, job: Job[Any] | None = None, *, identify: bool = False) -> tuple[str, str]:
    """(code, message) of a failed job (_classify), with every credential of the environment redacted from the
    message (GDAL quotes a remote server's error response, which can name the access key)."""
    from gdal_mcp.credentials import redact

    text = str(exc)
    if re.search(rf"\b{REFUSED_STATUS}\b", text) and re.search(r"http|curl|response", text, re.I):
        return "out-of-root", redact(
            "a request went outside the remote locations this server may read (a redirect to another host, or a URL "
            f"the dataset names) and was refused; read data at an allowed location. GDAL said: {text.strip()[:300]}"
        )
    code, message = _classify(exc, job, identify=identify)
    return code, redact(message)


def _classify(exc: BaseException, job: Job[Any] | None = None, *, identify: bool = False) -> tuple[str, str]:
    """(code, message) of a failed job. A read the kernel refused (a file the dataset refers to outside what the
    worker may read) is out-of-root naming that file; a file in a format whose driver is not allowed is unsupported
    naming the driver (`identify`: only where no other job runs GDAL in this process, see drivers.refused_driver)."""
    from gdal_mcp.engine.failures import translate

    mapped = translate(exc)
    if mapped is not None:
        denial = denied_by_confinement(exc, mapped)
        if denial is not None:
            return denial.code, denial.message
        if identify and job is not None and mapped.code in ("gdal-error", "unsupported"):
            refused = refused_format(job)
            if refused is not None:
                return refused.code, refused.message
        return mapped.code, mapped.message
    denial = denied_by_confinement(exc, None)
    if denial is not None:
        return denial.code, denial.message
    logging.getLogger("gdal_mcp.execution").error("unexpected error in job:\n%s", traceback.format_exc())
    return "internal-error", f"unexpected {type(exc).__name__}: {str(exc).strip()}"


def refused_format(job: Job[Any]) -> GdalMcpError | None:
    """unsupported, naming the driver, when the job's input is in a format the allow-list refused (asked only after
    a failure: a file an allowed driver opened never gets here)."""
    from gdal_mcp.engine import drivers
    from gdal_mcp.errors import GdalMcpError
    from gdal_mcp.jobs import INPUT_FIELDS

    kwargs = job.kwargs()
    for key in INPUT_FIELDS:
        path = kwargs.get(key)
        if isinstance(path, str) and path:
            name = drivers.refused_driver(path)
            if name is not None:
                return GdalMcpError(
                    "unsupported",
                    f"{path}: GDAL's {name} format, which this server does not open "
                    f"(the {name} driver is not among those it allows; README lists the formats)",
                )
    return None


def engine_function(job: object) -> Callable[..., Any]:
    """The engine function a job names; only typed jobs naming engine functions are run. A job reading a remote
    dataset in a format that names other files inside it (VRT, OGR VRT …) is refused here (drivers.py)."""
    from gdal_mcp.jobs import Job

    if not isinstance(job, Job):
        raise TypeError(f"refusing to run {type(job).__name__}: not a typed job")
    module_name, _, attr = job.FUNC.partition(":")
    if not module_name.startswith(ENGINE_PREFIX):
        raise ValueError(f"refusing to run {job.FUNC}: not an engine function")
    func: Callable[..., Any] = getattr(importlib.import_module(module_name), attr)
    drivers = sys.modules.get("gdal_mcp.engine.drivers")
    if drivers is not None:
        drivers.ensure()  # the driver allow-list still holds (the import above may have loaded pyogrio)
        if job.FUNC not in BYTES_ONLY:
            drivers.refuse_remote_references([p for p in job.paths() if p != job.upload])  # not the object it writes
    return func


#: a path in a message: not the "//host/…" of a URL (":" or "/" before it)
_PATH_IN_TEXT = re.compile(r"(?<![\w.:/])(/[^\s'\"`()<>,;:]+)")
DENIED_TEXTS = ("permission denied", "operation not permitted")


def denied_by_confinement(exc: BaseException, mapped: GdalMcpError | None) -> GdalMcpError | None:
    """out-of-root, naming the file, for a failure the kernel's confinement caused: GDAL (or a library) was refused a
    file outside what this worker may read (a reference inside a dataset that the server's checks did not see), or
    a network connection. A failure whose message names a file outside what the worker may read is one (the dataset
    referred to it); so is a permission error naming no file at all. None when this worker is not confined, or the
    failure is another one."""
    policy = confine.active_policy()
    if policy is None or (mapped is not None and mapped.code not in ("gdal-error", "not-found", "unsupported")):
        return None
    text = mapped.message if mapped is not None else gdal_message(exc)
    names = [getattr(exc, "filename", None)] if isinstance(exc, OSError) else []
    names += _PATH_IN_TEXT.findall(text)
    paths = [n.rstrip(".") for n in names if isinstance(n, str) and n.startswith("/") and not n.startswith("/vsi")]
    outside = [p for p in paths if not confine.readable(policy, p)]
    if outside:
        return GdalMcpError(
            "out-of-root",
            f"the dataset refers to '{outside[0]}', which is outside the workspace: "
            "this server cannot read it (refused by the kernel's confinement). Use data whose "
            "files all lie in the workspace",
        )
    code = exc.errno if isinstance(exc, OSError) else None
    denied = code in (errno.EACCES, errno.EPERM) or any(t in text.lower() for t in DENIED_TEXTS)
    if denied and not paths:
        return GdalMcpError(
            "out-of-root",
            f"the dataset refers to a file or network address outside the workspace, "
            f"which this server cannot reach (refused by the kernel's confinement: {text})",
        )
    return None


#: imported before a worker reports ready: what a metadata job (raster_info, the usual first call) needs, so the
#: first call does not wait ~0.2 s for them (the server is still importing FastMCP while the first worker does this)
PRELOAD = ("gdal_mcp.jobs", "gdal_mcp.engine.failures", "gdal_mcp.engine.raster.info")


def preload(modules: tuple[str, ...] = ()) -> None:
    """Import the raster stack, PRELOAD and `modules`, and open PROJ's database, with the collector off (its passes
    over the imports' objects cost ~40 ms); they are frozen out of later collections."""
    gc.disable()
    try:
        import numpy  # noqa: F401
        import rasterio  # noqa: F401

        for name in (*PRELOAD, *modules):
            importlib.import_module(name)
        try:
            import pyproj

            pyproj.CRS.from_epsg(4326)  # opens PROJ's database, ~30 ms of the first job that reads a CRS otherwise
        except Exception:  # noqa: BLE001 - a broken PROJ is reported by the jobs that need it, not by a dead worker
            pass
        gc.freeze()
    finally:
        gc.enable()
