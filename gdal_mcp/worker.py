"""The worker process: imports GDAL once, then runs engine jobs sent over a pipe.

Runs in a spawned process. Nothing here is imported by the server process except the entry point's
name. Messages to the server: ("progress", fraction, message), ("result", value), ("error", code,
message). stdout is pointed at stderr first, so nothing a library prints can reach the protocol.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import pickle
import sys
import time
import traceback
from typing import Any

ENGINE_PREFIX = "gdal_mcp.engine."
PROGRESS_INTERVAL = 0.2


def _configure_environment(config: dict[str, Any]) -> None:
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    set_gdal_environment(config)
    logging.basicConfig(
        level=config.get("log_level", "WARNING"),
        stream=sys.stderr,
        format="%(asctime)s gdal-mcp worker %(levelname)s %(name)s: %(message)s",
    )
    quiet_libraries()


#: environment variables a worker never inherits: the server's credentials (a job has no use for them, and what a
#: process holds in its environment a dataset could make GDAL send somewhere)
SECRET_ENV_PREFIXES = ("GDAL_MCP_",)


def set_gdal_environment(config: dict[str, Any]) -> None:
    """The GDAL and PROJ settings of a worker (this pool's, or a Dask worker's through gdal_mcp.dask_worker)."""
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
    if not config.get("allow_network"):
        # Belt and braces beside the kernel's confinement: GDAL and PROJ do not even try.
        os.environ["GDAL_HTTP_TIMEOUT"] = "1"
        os.environ["CPL_VSIL_CURL_ALLOWED_EXTENSIONS"] = ".__gdal_mcp_network_disabled__"
        os.environ["PROJ_NETWORK"] = "OFF"


def quiet_libraries() -> None:
    logging.getLogger("rasterio").setLevel(logging.CRITICAL)
    import warnings

    # Library warnings (NotGeoreferencedWarning, pyproj's PROJ.4 notes) are reported in results instead.
    warnings.simplefilter("ignore")


def _set_memory_limit(limit: int | None) -> None:
    if not limit:
        return
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _exit_with_server(conn: Any) -> None:
    """Exit as soon as the server's end of the pipe closes, even in the middle of a job.

    Workers run in their own session, so a server killed with SIGKILL cannot stop them; an orphan would
    otherwise keep writing into a temporary directory nobody will commit, with no timeout to stop it.
    """
    import select
    import threading

    fd = conn.fileno()

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLRDHUP)  # POLLHUP and POLLERR are always reported; POLLIN is not asked
        while True:
            for _, events in poller.poll():
                if events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                    os._exit(0)

    if not hasattr(select, "POLLRDHUP"):
        return  # not Linux: the worker notices when it next talks to the server
    threading.stack_size(256 * 1024)  # under RLIMIT_AS a default 8 MB thread stack is wasted limit
    threading.Thread(target=watch, name="gdal-mcp-server-watch", daemon=True).start()
    threading.stack_size(0)


_frozen_modules = [0]


def _release_memory() -> None:
    """Give freed heap back to the OS after a job, so an idle worker does not hold its peak."""
    import ctypes
    import gc

    gc.collect()
    if len(sys.modules) != _frozen_modules[0]:
        # A full collection walks every object the imports made (~25 ms with GDAL, numpy and pyproj
        # loaded: more than a metadata job itself). Survivors after a job that imported modules are
        # mostly those modules: exclude them from later collections.
        gc.freeze()
        _frozen_modules[0] = len(sys.modules)
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc


def _classify(exc: BaseException, job: Any = None, *, identify: bool = False) -> tuple[str, str]:
    """(code, message) of a failed job. A read the kernel refused (a file the dataset refers to outside what the
    worker may read) is out-of-root naming that file; a file in a format whose driver is not allowed is unsupported
    naming the driver (`identify`: only where no other job runs GDAL in this process, see drivers.refused_driver)."""
    from gdal_mcp.engine.failures import denied_by_confinement, translate

    mapped = translate(exc)
    if mapped is not None:
        denial = denied_by_confinement(exc, mapped)
        if denial is not None:
            return denial.code, denial.message
        if identify and job is not None and mapped.code in ("gdal-error", "unsupported"):
            refused = _refused_format(job)
            if refused is not None:
                return refused.code, refused.message
        return mapped.code, mapped.message
    denial = denied_by_confinement(exc, None)
    if denial is not None:
        return denial.code, denial.message
    logging.getLogger("gdal_mcp.worker").error("unexpected error in job:\n%s", traceback.format_exc())
    return "internal-error", f"unexpected {type(exc).__name__}: {str(exc).strip()}"


def _refused_format(job: Any) -> Any:
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


def engine_function(job: Any) -> Any:
    """The engine function a job names; only typed jobs naming engine functions are run."""
    from gdal_mcp.jobs import Job

    if not isinstance(job, Job):
        raise TypeError(f"refusing to run {type(job).__name__}: not a typed job")
    module_name, _, attr = job.FUNC.partition(":")
    if not module_name.startswith(ENGINE_PREFIX):
        raise ValueError(f"refusing to run {job.FUNC}: not an engine function")
    func = getattr(importlib.import_module(module_name), attr)
    drivers = sys.modules.get("gdal_mcp.engine.drivers")
    if drivers is not None:
        drivers.ensure()  # the driver allow-list still holds (the import above may have loaded pyogrio)
    return func


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


def confine_worker(config: dict[str, Any]) -> bool:
    """Confine this process to its policy (gdal_mcp.confine) before it starts any thread: the workspaces (read, and
    write unless read-only), its private temporary directory, the Python environment and system libraries (read),
    no network unless allowed. False when the server runs unconfined (--allow-unconfined on a kernel without
    Landlock); a failure to confine when required ends the worker (the server reports workers that cannot start)."""
    from gdal_mcp import confine

    if not config.get("confine", False):
        return False
    policy = confine.worker_policy(
        config["roots"], config.get("tmp"), read_only=bool(config.get("read_only")), network=bool(config.get("allow_network"))
    )
    try:
        confine.confine(policy)
    except confine.ConfinementError as e:
        sys.stderr.write(f"gdal-mcp worker: cannot confine this worker ({e}); exiting\n")
        sys.stderr.flush()
        os._exit(3)
    return True


def run_in_job_thread(func: Any, kwargs: dict[str, Any], writable: list[str]) -> Any:
    """func(**kwargs) on a thread of its own whose writes the kernel limits to `writable` (confine.restrict_writes):
    what GDAL would write anywhere else (a .gfs beside a GML, an .aux.xml beside an input) fails instead. The
    worker's main thread keeps its wider policy for the next job. Jobs that write nothing but the worker's private
    temporary directory (every job that only reads) share one thread confined that way once (_READER), which saves
    them a thread start and a Landlock layer each (~0.2 ms of a metadata call)."""
    from gdal_mcp import confine

    if len(writable) <= 1:
        reader = _READER.get(tuple(writable))
        if reader is None:
            from concurrent.futures import ThreadPoolExecutor

            reader = ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix="gdal-mcp-reader",
                initializer=confine.restrict_writes,
                initargs=(list(writable),),
            )
            _READER[tuple(writable)] = reader
        return reader.submit(lambda: func(**kwargs)).result()

    return confine.on_write_layer_thread(lambda: func(**kwargs), writable)


#: the thread that runs the jobs which only read, per set of writable paths (one: the private temporary directory)
_READER: dict[tuple[str, ...], Any] = {}


def main(conn: Any) -> None:
    """Serve jobs on `conn` until the server closes it."""
    config = pickle.loads(conn.recv_bytes())
    _configure_environment(config)
    confined = confine_worker(config)  # before any thread: Landlock confines the calling thread and what it starts
    _exit_with_server(conn)
    # Warm the raster stack before the memory limit so imports never fail on it. pyogrio (a second bundled GDAL,
    # ~90 MB resident) loads on a worker's first vector job instead: most workers never need it.
    preload(("gdal_mcp.engine.guard", "gdal_mcp.sandbox", "gdal_mcp.engine.drivers"))
    from gdal_mcp.engine import drivers

    drivers.restrict()  # the driver allow-list (gdal_mcp.formats), before any job opens a file
    from gdal_mcp.engine import guard
    from gdal_mcp.sandbox import Sandbox

    sandbox = Sandbox(config["roots"], allow_network=config.get("allow_network", False))
    guard.install(sandbox.check_referenced)
    _set_memory_limit(config.get("max_memory"))
    conn.send(("ready", os.getpid()))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the server went away
        if message is None:
            return
        conn.send(("started",))  # from here on the server never reruns the job elsewhere
        job = message
        last = [0.0]

        def progress(fraction: float, text: str = "", last: list[float] = last) -> None:
            now = time.monotonic()
            if fraction >= 1.0 or now - last[0] >= PROGRESS_INTERVAL:
                last[0] = now
                conn.send(("progress", float(min(max(fraction, 0.0), 1.0)), str(text)))

        try:
            func = engine_function(job)
            if confined:
                writable = [*([config["tmp"]] if config.get("tmp") else []), *job.writable()]
                result = run_in_job_thread(func, {**job.kwargs(), "progress": progress}, writable)
            else:
                result = func(**job.kwargs(), progress=progress)
            reply: tuple[Any, ...] = ("result", result)
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a structured reply
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                return
            reply = ("error", *_classify(exc, job, identify=True))
        del job
        _release_memory()
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("error", "resource-limit", "the result was too large for the worker's memory limit"))


if __name__ == "__main__":
    from multiprocessing.connection import Connection

    main(Connection(int(sys.argv[1])))
