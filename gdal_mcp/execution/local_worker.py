"""The local executor's worker process: imports GDAL once, then runs engine jobs sent over a pipe.

Runs in a spawned process. Nothing here is imported by the server process except the entry point's
name. Messages to the server: ("progress", fraction, message), ("result", value), ("error", code,
message). stdout is pointed at stderr first, so nothing a library prints can reach the protocol.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import time
from typing import Any

from gdal_mcp.credentials import load_profiles
from gdal_mcp.execution import EXIT_REMOTE_BUDGET
from gdal_mcp.execution.common import (
    PROGRESS_INTERVAL,
    classify,
    engine_function,
    job_progress,
    network_allowed,
    preload,
    quiet_libraries,
    readdir_mode,
    remote_finish,
    remote_start,
    set_gdal_environment,
    upload_output,
    watch_remote_budget,
    with_provenance,
)


def _configure_environment(config: dict[str, Any]) -> None:
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    set_gdal_environment(config)
    if config.get("tmp"):
        # A relative name GDAL opens (a VRT's relativeToVRT="0" source in a remote dataset) resolves here, in this
        # worker's empty private directory, not in the server's working directory (its checkout, its environment)
        os.chdir(config["tmp"])
    logging.basicConfig(
        level=config.get("log_level", "WARNING"),
        stream=sys.stderr,
        format="%(asctime)s gdal-mcp worker %(levelname)s %(name)s: %(message)s",
    )
    quiet_libraries()


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


def confine_worker(config: dict[str, Any]) -> bool:
    """Confine this process to its policy (gdal_mcp.execution.confine) before it starts any thread: the workspaces (read, and
    write unless read-only), its private temporary directory, the Python environment and system libraries (read),
    no network unless allowed. False when the server runs unconfined (--allow-unconfined on a kernel without
    Landlock); a failure to confine when required ends the worker (the server reports workers that cannot start)."""
    from gdal_mcp.execution import confine

    if not config.get("confine", False):
        return False
    policy = confine.worker_policy(
        [*config["roots"], *([config["scratch"]] if config.get("scratch") else [])],
        config.get("tmp"),
        read_only=bool(config.get("read_only")),
        network=network_allowed(config),
        proxy_port=config.get("egress_port"),
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
    from gdal_mcp.execution import confine

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


def _stop_for_remote_budget(used: int) -> None:
    """The job read past --max-remote-bytes while running: end this worker at once (a read in progress cannot be
    interrupted otherwise). The server reports resource-limit for this exit status and starts a fresh worker; the
    job's output is discarded like any failed job's."""
    sys.stderr.write(f"gdal-mcp worker: the job fetched {used} bytes from remote locations, past --max-remote-bytes\n")
    sys.stderr.flush()
    os._exit(EXIT_REMOTE_BUDGET)


def main(conn: Any) -> None:
    """Serve jobs on `conn` until the server closes it."""
    config = pickle.loads(conn.recv_bytes())
    try:
        # the operator's AWS profiles, read while this process still may (its HOME and its confinement change next)
        profiles = load_profiles(config)
    except ValueError as e:
        sys.stderr.write(f"gdal-mcp worker: {e}; exiting\n")
        sys.stderr.flush()
        os._exit(3)
    _configure_environment(config)
    confined = confine_worker(config)  # before any thread: Landlock confines the calling thread and what it starts
    _exit_with_server(conn)
    # Warm the raster stack before the memory limit so imports never fail on it. pyogrio (a second bundled GDAL,
    # ~90 MB resident) loads on a worker's first vector job instead: most workers never need it.
    preload(("gdal_mcp.engine.guard", "gdal_mcp.sandbox", "gdal_mcp.engine.drivers"))
    from gdal_mcp.engine import drivers

    drivers.set_path_options(profiles)  # a bucket's own credentials, in both GDALs
    drivers.restrict()  # the driver allow-list (gdal_mcp.formats), before any job opens a file
    from gdal_mcp.engine import guard
    from gdal_mcp.sandbox import Sandbox

    sandbox = Sandbox.for_worker(config)
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

        running = [True]
        try:
            remote_start(config)  # before engine_function: identifying a remote input's format reads it too
            readdir = os.environ.get("GDAL_DISABLE_READDIR_ON_OPEN")
            mode = readdir_mode(job)  # remote data: a folder listing instead of ~40 side-file probes per open
            if mode is not None:
                os.environ["GDAL_DISABLE_READDIR_ON_OPEN"] = mode
            try:
                func = with_provenance(job, engine_function(job))

                def still_running(flag: list[bool] = running) -> bool:
                    return flag[0]

                watch_remote_budget(config, still_running, _stop_for_remote_budget)
                own = job_progress(job, progress)
                if confined:
                    writable = [*([config["tmp"]] if config.get("tmp") else []), *job.writable()]
                    result = run_in_job_thread(func, {**job.kwargs(), "progress": own}, writable)
                else:
                    result = func(**job.kwargs(), progress=own)
                if job.upload:  # its output goes to object storage: uploaded from here, where it was written
                    upload_output(job, progress)
            finally:
                running[0] = False
                if readdir is not None:
                    os.environ["GDAL_DISABLE_READDIR_ON_OPEN"] = readdir
            reply: tuple[Any, ...] = ("result", remote_finish(result, config))
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a structured reply
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                return
            reply = ("error", *classify(exc, job, identify=True))
        del job
        _release_memory()
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("error", "resource-limit", "the result was too large for the worker's memory limit"))


if __name__ == "__main__":
    from multiprocessing.connection import Connection

    main(Connection(int(sys.argv[1])))
