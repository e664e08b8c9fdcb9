"""The confinement of a Dask worker's task threads (part of the workers' side of the Dask executor, dask_worker.py):
every task runs on a thread that confined itself with Landlock before its first task, and a job's own thread (and each
of its tiles) in one more layer that may write only where the job writes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from gdal_mcp.execution.common import network_allowed

log = logging.getLogger("gdal_mcp.execution.dask_worker")


#: this process's confinement: None before WorkerSetup ran, else a description (see confinement_state)
_confinement: list[str | None] = [None]


def confinement_state() -> str | None:
    """How this Dask worker runs gdal-mcp's tasks: 'confined: …', 'unconfined: …', or None (not set up yet)."""
    return _confinement[0]


def confine_executor(worker: Any, config: dict[str, Any]) -> None:
    """Replace the worker's default executor by one whose threads confine themselves (gdal_mcp.execution.confine) before they
    take their first task: every task of this worker (jobs, tiles, anything a client submits) runs confined, while
    the worker's own event loop (its connections to the scheduler and the other workers) is not.

    A Dask worker is a running, multi-threaded process when its plugins are set up, and Landlock confines the
    calling thread and what it starts: hence per thread. Raises RuntimeError where the kernel cannot confine and the
    server did not accept running unconfined (the server's start-up then fails, naming this worker)."""
    import tempfile

    from distributed.threadpoolexecutor import ThreadPoolExecutor

    from gdal_mcp.execution import confine

    if not config.get("confine", True):
        _confinement[0] = "unconfined: the server runs with --allow-unconfined"
        return
    if confine.abi() < confine.MIN_ABI:
        _confinement[0] = confine.status()
        if config.get("allow_unconfined"):
            log.warning("Dask worker %s runs gdal-mcp's tasks UNCONFINED (%s; --allow-unconfined)", _address(), _confinement[0])
            return
        raise RuntimeError(
            f"Dask worker {_address()}: this kernel cannot confine the threads that run GDAL "
            f"({_confinement[0]}); run workers on Linux >= 5.19 with Landlock, or start the server with "
            "--allow-unconfined (see SECURITY.md)"
        )
    tmp = tempfile.mkdtemp(prefix="gdal-mcp-dask-")
    os.environ["CPL_TMPDIR"] = os.environ["PROJ_USER_WRITABLE_DIRECTORY"] = tmp
    policy = confine.worker_policy(
        config["roots"],
        tmp,
        read_only=bool(config.get("read_only")),
        network=network_allowed(config),
        proxy_port=config.get("egress_port"),
    )
    # Confine a throwaway thread first: a policy the kernel refuses fails here, at set-up, not in a task thread.
    failure: list[BaseException] = []
    probe = threading.Thread(target=lambda: _try(confine.confine, policy, failure), name="gdal-mcp-confine-check")
    probe.start()
    probe.join()
    if failure:
        raise RuntimeError(f"Dask worker {_address()}: confining its task threads failed: {failure[0]}")

    class ConfinedThreadPoolExecutor(ThreadPoolExecutor):
        """Dask's executor (secede/rejoin included) whose every thread confines itself first. (The name must hold
        "ThreadPoolExecutor": Dask runs tasks with their context variables, get_worker() among them, only then.)"""

        def _adjust_thread_count(self) -> None:
            from distributed import threadpoolexecutor as tpe

            if len(self._threads) < self._max_workers:
                t = threading.Thread(
                    target=_confined_thread,
                    args=(policy, tpe._worker, self, self._work_queue),
                    name=f"{self._thread_name_prefix}-{os.getpid()}-{next(self._counter)}",
                    daemon=True,
                )
                self._threads.add(t)
                t.start()

    old = worker.executors.get("default")
    threads = getattr(old, "_max_workers", None) or worker.state.nthreads
    worker.executors["default"] = ConfinedThreadPoolExecutor(max_workers=threads, thread_name_prefix="Dask-Confined-Threads")
    if old is not None and old is not worker.executors.get("offload"):
        old.shutdown(wait=False)
    _confinement[0] = f"confined: {confine.status()}"
    _task_tmp[0] = tmp


def _try(fn: Callable[..., Any], arg: Any, failure: list[BaseException]) -> None:
    try:
        fn(arg)
    except BaseException as e:  # noqa: BLE001 - reported by the caller
        failure.append(e)


def _confined_thread(policy: Any, run: Callable[..., Any], *args: Any) -> None:
    """A task thread: confined before it takes any task. One that cannot be confined ends its process (its nanny
    starts a fresh one): a task never runs unconfined."""
    from gdal_mcp.execution import confine

    try:
        confine.confine(policy)
    except BaseException as e:  # noqa: BLE001
        log.critical("a Dask task thread could not be confined (%s); stopping this worker", e)
        os._exit(3)
    run(*args)


def _address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except Exception:  # noqa: BLE001 - not in a worker (a direct call in a test)
        return f"pid {os.getpid()}"


#: this process's private temporary directory once its task threads are confined (confine_executor), else None
_task_tmp: list[str | None] = [None]


def _layered(fn: Callable[[], Any], writable: list[str]) -> Any:
    """fn() on a fresh thread that may write only `writable` and this worker's private temporary directory (one more
    Landlock layer: gdal_mcp.execution.confine.restrict_writes), with this thread's context variables (get_worker()). A
    task thread runs many tasks, and a Landlock layer cannot be taken off a thread: hence a thread per task. As
    fn() itself where the task threads are not confined."""
    tmp = _task_tmp[0]
    if tmp is None:
        return fn()
    from gdal_mcp.execution import confine

    return confine.on_write_layer_thread(fn, [*writable, tmp], name="gdal-mcp-dask-job")
