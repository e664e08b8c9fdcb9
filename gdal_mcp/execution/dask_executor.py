"""The Dask executor (`--executor dask`): every job runs on a Dask cluster's workers, never in the server.

`DaskExecutor` has the `Executor` protocol (`gdal_mcp.execution`), as `local.LocalExecutor` does (start, close, run,
pids, busy_pids). The server imports this module, and distributed, only with --executor dask. The worker side is
gdal_mcp.execution.dask_worker.

Design:
- The Dask client is a synchronous `distributed.Client`, whose own event loop runs in a thread of its own (Dask's
  "dedicated thread"). So `start()` can connect, wait for workers and probe them before the server answers its
  first request (a refusal ends start-up with a clear message), from any thread and whatever event loop the
  server (or a test) runs. Jobs are submitted without blocking; a finished future hands its reply to the job's
  coroutine with `call_soon_threadsafe`.
- Progress: workers log Dask events on `dask_worker.PROGRESS_TOPIC`; the client subscribes to the topic once and
  routes each message to its job. The scheduler's own "all" topic reports workers that left (a job's worker died)
  and the nannies' "worker-restart-memory" topic workers restarted for exceeding their memory limit.
- Cancel and timeout: a per-job `distributed.Event` the job checks at every progress call (throttled) and
  between tiles. A job that has not stopped within `GRACE` seconds (a stuck GDAL call) gets its worker
  restarted through the worker's nanny. Only then does the caller see the error, so App.execute discards the
  output after nothing writes it any more.
- A job runs at most once (dask_worker.run_job refuses a second attempt after its worker died), writes its output
  into an attempt directory, and is submitted with retries=0.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gdal_mcp.config import format_size, local_workers
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import ProgressSink
from gdal_mcp.execution.dask_confine import confinement_state
from gdal_mcp.execution.dask_worker import (
    PROGRESS_TOPIC,
    RERUN_MESSAGE,
    WorkerSetup,
    cancel_event,
    listing,
    probe,
    run_job,
    started_event,
    worker_pid,
)
from gdal_mcp.execution.local import MEMORY_SAMPLE_INTERVAL, timeout_error
from gdal_mcp.jobs import Job

log = logging.getLogger("gdal_mcp.execution.dask_executor")


#: how long a cancelled or timed-out job may take to stop by itself before its worker is restarted
GRACE = 3.0
#: how long a worker restart (a stuck job's) may take
RESTART_TIMEOUT = 30.0
#: connecting to the scheduler, and waiting for the first worker, at start-up
CONNECT_TIMEOUT = 30.0
#: quick (metadata) jobs run before the others waiting on the cluster
QUICK_PRIORITY = 10
#: a job that ended without a reply keeps its cancel flag set this long, so an attempt Dask still starts stops
FLAG_CLEANUP_DELAY = 60.0
PROBE_PREFIX = ".gdal-mcp-probe-"
#: Dask settings of the LocalCluster local:N starts (its scheduler, nannies and workers). It has no dashboard, so
#: nobody reads the workers' profiles or the system monitor's history. Measured idle on 2 cores, local:2 took
#: 15-17 % of a core with Dask's defaults and 4 % with these (profiler off about -5 %, the event loops' tick every
#: 0.5 s instead of 20 ms -5 %, the system monitor every 2 s -2 %): CPU the tiles of a busy machine would otherwise
#: share.
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    # the nannies (threads of this server) and workers sample memory as often as the local pool does (local.py's
    # MEMORY_SAMPLE_INTERVAL), not every 0.1 s: 15 % of the server's Dask thread during a job went to it. (The local
    # pool also has an address-space rlimit behind its sampling; a Dask worker has only the nanny's, so a runaway job
    # is stopped up to 0.1 s later than with Dask's default.)
    "distributed.worker.memory.monitor-interval": f"{round(MEMORY_SAMPLE_INTERVAL * 1000)}ms",
}
#: how often a LocalCluster copies its description to the scheduler (Dask: 1 s; nobody reads it here)
LOCAL_CLUSTER_SYNC_INTERVAL = 10


class _JobGone(Exception):
    """The job's worker died while running it."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.address = address


@dataclass(eq=False)
class _JobState:
    job_id: str
    key: str
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    address: str | None = None
    pid: int | None = None
    started_at: float | None = None

    def post(self, message: dict[str, Any]) -> None:
        """From the client's thread: hand a message to the job's coroutine."""
        try:
            self.loop.call_soon_threadsafe(self._receive, message)
        except RuntimeError:
            pass  # the server's event loop is closed: nobody waits for this job any more

    def _receive(self, message: dict[str, Any]) -> None:
        if message["kind"] == "done":
            self.finished.set()
        self.queue.put_nowait(message)


class DaskExecutor:
    """Runs jobs on a Dask cluster: `scheduler` is tcp://host:port or local:N (a LocalCluster of N processes)."""

    def __init__(
        self,
        *,
        scheduler: str,
        timeout: float = 600.0,
        max_memory: int | None = None,
        worker_config: dict[str, Any] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.timeout = timeout
        self.max_memory = max_memory
        self.worker_config = dict(worker_config or {})
        self.worker_config["max_memory"] = max_memory
        # A bucket workspace's outputs: a Dask worker writes them in a directory of its own and uploads them (Job.upload),
        # never in the server's scratch directory, which workers without a shared file system do not see
        self.worker_config.pop("scratch", None)
        self._local = local_workers(scheduler)
        self._client: Any = None
        self._cluster: Any = None
        self._closed = False
        self._start_lock = threading.Lock()
        self._jobs: dict[str, _JobState] = {}
        self._keys: dict[str, _JobState] = {}
        #: worker address -> (time, rss) of its nanny's last restart for exceeding the memory limit
        self._memory_restarts: dict[str, tuple[float, int]] = {}

    # ----- lifecycle -------------------------------------------------------------------------------
    def start(self, count: int | None = None) -> None:
        """Connect to the cluster (start it, for local:N), set up and probe its workers. Idempotent; raises
        ValueError with what to do when the cluster cannot serve this workspace."""
        with self._start_lock:
            if self._client is not None or self._closed:
                return
            try:
                self._connect()
            except BaseException:
                self._shutdown()
                raise

    def _connect(self) -> None:
        from distributed import Client

        if self._local is not None:
            import dask
            from distributed import LocalCluster

            with dask.config.set(LOCAL_CLUSTER_CONFIG):
                self._cluster = LocalCluster(
                    n_workers=self._local,
                    threads_per_worker=1,
                    processes=True,
                    memory_limit=self.max_memory or 0,
                    dashboard_address=None,
                    # no dashboard; its HTTP endpoints (health) on any free port, not 8787
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                    host="127.0.0.1",
                    scheduler_sync_interval=LOCAL_CLUSTER_SYNC_INTERVAL,
                    # for the worker processes, those a nanny restarts too (the block's
                    # settings are gone by then: a nanny copies the global ones shallowly)
                    config=dict(LOCAL_CLUSTER_CONFIG),
                )
                # Workers this server started inherit its stdout (the MCP stream over stdio): point theirs at stderr.
                self.worker_config["stdout_to_stderr"] = True
                self._client = Client(self._cluster, set_as_default=False)
        else:
            try:
                self._client = Client(self.scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
            except (OSError, TimeoutError, ValueError) as e:
                raise ValueError(
                    f"cannot reach the Dask scheduler at {self.scheduler} ({e}); start it "
                    "(dask scheduler) or correct --dask-scheduler"
                ) from None
        try:
            self._client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
        except TimeoutError:
            raise ValueError(
                f"no Dask worker joined the scheduler {self.scheduler} within {CONNECT_TIMEOUT:g} s; "
                f"start workers (dask worker {self.scheduler})"
            ) from None
        try:
            self._client.register_plugin(WorkerSetup(self.worker_config))
        except RuntimeError as e:  # a worker that cannot confine its task threads (dask_confine.confine_executor)
            raise ValueError(str(e)) from None
        self._probe()
        self._check_confinement()
        self._client.subscribe_topic(PROGRESS_TOPIC, self._on_progress)
        self._client.subscribe_topic("all", self._on_cluster_event)
        self._client.subscribe_topic("worker-restart-memory", self._on_memory_restart)
        log.info(
            "running jobs on the Dask cluster %s (%d workers)", self.scheduler, len(self._client.scheduler_info()["workers"])
        )

    def _probe(self) -> None:
        """Every worker must read, at the same path, a token file written into each workspace now (in a workspace
        this server cannot write, e.g. a read-only mount: the same directory listing)."""
        written: list[Path] = []
        expected: dict[str, str] = {}
        try:
            for root in self.worker_config.get("roots", []):
                token = secrets.token_hex(16)
                path = Path(root) / f"{PROBE_PREFIX}{token}"
                try:
                    path.write_text(token, encoding="ascii")
                except OSError:
                    expected[root] = listing(root)
                    continue
                written.append(path)
                expected[str(path)] = token
            replies = self._client.run(probe, expected)
        finally:
            for path in written:
                path.unlink(missing_ok=True)
        blind = {address: problems for address, problems in replies.items() if problems}
        if blind:
            detail = "; ".join(f"worker {address}: {', '.join(problems)}" for address, problems in sorted(blind.items()))
            raise ValueError(
                f"the Dask workers cannot see the workspace: {detail}. Workers must mount the workspace "
                "at the same path as the server (a shared file system); see docs/deployment.md"
            )

    def _check_confinement(self) -> None:
        """Every worker set up its confinement (or, with --allow-unconfined, said why it runs unconfined)."""
        states = self._client.run(confinement_state)
        for address, state in sorted(states.items()):
            if state is None:
                raise ValueError(f"the Dask worker {address} did not set up gdal-mcp (its plugin did not run)")
            if not state.startswith("confined") and not self.worker_config.get("allow_unconfined"):
                raise ValueError(f"the Dask worker {address} runs unconfined ({state}); see SECURITY.md")
            if not state.startswith("confined"):
                log.warning("Dask worker %s runs gdal-mcp's tasks UNCONFINED: %s", address, state)

    def close(self) -> None:
        with self._start_lock:
            self._closed = True
            self._shutdown()

    def _shutdown(self) -> None:
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        if client is not None:
            for topic in (PROGRESS_TOPIC, "all", "worker-restart-memory"):
                try:
                    client.unsubscribe_topic(topic)
                except Exception:  # noqa: BLE001 - never subscribed, or the scheduler is gone
                    pass
            try:
                client.close(timeout=5)
            except Exception:  # noqa: BLE001
                log.debug("closing the Dask client failed", exc_info=True)
        if cluster is not None:
            try:
                cluster.close(timeout=10)
            except Exception:  # noqa: BLE001
                log.debug("closing the local Dask cluster failed", exc_info=True)

    def pids(self) -> list[int]:
        """The process ids of the cluster's workers (meaningful on this machine only)."""
        if self._client is None:
            return []
        return sorted(int(pid) for pid in self._client.run(worker_pid, on_error="ignore").values())

    def busy_pids(self) -> list[int]:
        """Workers running a job of this server right now."""
        return [s.pid for s in list(self._jobs.values()) if s.pid is not None]

    # ----- events from the cluster (called in the client's thread) ---------------------------------------
    def _on_progress(self, event: tuple[float, dict[str, Any]]) -> None:
        message = event[1]
        state = self._jobs.get(message.get("job", "")) if isinstance(message, dict) else None
        if state is not None:
            state.post(message)

    def _on_cluster_event(self, event: tuple[float, dict[str, Any]]) -> None:
        message = event[1]
        if not isinstance(message, dict) or message.get("action") != "remove-worker" or message.get("expected"):
            return
        for key in message.get("processing-tasks", ()):
            state = self._keys.get(str(key))
            if state is not None:
                state.post({"kind": "lost", "address": message.get("worker")})

    def _on_memory_restart(self, event: tuple[float, dict[str, Any]]) -> None:
        message = event[1]
        if isinstance(message, dict) and message.get("worker"):
            self._memory_restarts[str(message["worker"])] = (time.monotonic(), int(message.get("rss") or 0))

    # ----- jobs ----------------------------------------------------------------------------------------
    def _on_cluster_loop(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> concurrent.futures.Future[Any]:
        """Run a coroutine (a scheduler call) in the client's event loop, from any thread."""
        return asyncio.run_coroutine_threadsafe(make(), self._client.loop.asyncio_loop)

    def _set_flag(self, name: str) -> concurrent.futures.Future[Any]:
        scheduler = self._client.scheduler
        return self._on_cluster_loop(lambda: scheduler.event_set(name=name))

    def _clear_flags(self, job_id: str) -> None:
        if self._client is None:
            return
        scheduler = self._client.scheduler
        for name in (cancel_event(job_id), started_event(job_id)):
            self._on_cluster_loop(lambda name=name: scheduler.event_clear(name=name))  # type: ignore[misc]

    async def run[R](
        self, job: Job[R], *, progress: ProgressSink | None = None, quick: bool = False, timeout: float | None = None
    ) -> R:
        """Run a job on the cluster; return its result or raise GdalMcpError."""
        if self._client is None:
            await asyncio.to_thread(self.start)
        if self._client is None:
            raise GdalMcpError("internal-error", "the Dask executor is closed")
        limit = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        job_id = uuid.uuid4().hex
        state = _JobState(job_id, f"gdal-mcp-job-{job_id}", loop)
        self._jobs[job_id] = state
        self._keys[state.key] = state
        future = self._client.submit(
            run_job,
            job,
            self.worker_config,
            job_id,
            key=state.key,
            pure=False,
            retries=0,
            priority=QUICK_PRIORITY if quick else 0,
        )
        future.add_done_callback(lambda f: state.post({"kind": "done", "reply": _reply(f)}))
        clean = False
        try:
            try:
                reply = await self._follow(state, progress, limit)
            except TimeoutError:
                await self._stop(state, future)
                raise timeout_error(limit) from None
            except _JobGone as gone:
                await self._stop(state, future, restart=False)
                raise await self._death_error(state, gone.address) from None
            except asyncio.CancelledError:
                # Wait (shielded) until the job stopped: the caller discards its output right after.
                await asyncio.shield(self._stop(state, future))
                raise
            clean = True
        finally:
            self._jobs.pop(job_id, None)
            self._keys.pop(state.key, None)
            if clean:
                self._clear_flags(job_id)
            else:
                loop.call_later(FLAG_CLEANUP_DELAY, self._clear_flags, job_id)
        if reply[0] == "result":
            return reply[1]  # type: ignore[no-any-return]
        if reply[0] == "error" and reply[2] == RERUN_MESSAGE and state.address is not None:
            raise await self._death_error(state, state.address)
        if reply[0] == "failed":  # Dask gave up on the task (KilledWorker), or its reply did not arrive
            raise GdalMcpError(
                "internal-error", f"the job failed on the Dask cluster ({reply[1]}); the server is still serving: retry the call"
            )
        raise GdalMcpError(reply[1], reply[2])

    async def _follow(self, state: _JobState, progress: ProgressSink | None, limit: float) -> tuple[Any, ...]:
        """Relay the job's progress until its reply; the time limit runs from when a worker took the job."""
        async with asyncio.timeout(None) as deadline:
            while True:
                message = await state.queue.get()
                kind = message["kind"]
                if kind == "started":
                    state.address, state.pid = str(message["address"]), int(message["pid"])
                    if state.started_at is None:
                        state.started_at = time.monotonic()
                        deadline.reschedule(state.loop.time() + limit)
                elif kind == "progress":
                    if progress is not None:
                        await progress(float(message["fraction"]), str(message["text"]))
                elif kind == "lost":
                    if state.address is not None and message["address"] == state.address:
                        raise _JobGone(state.address)
                elif kind == "done":
                    return message["reply"]  # type: ignore[no-any-return]

    async def _stop(self, state: _JobState, future: Any, *, restart: bool = True) -> None:
        """Stop a job the caller gave up on: raise its cancel flag; restart its worker if it has not stopped
        within GRACE seconds; drop the task (and any attempt Dask would still start)."""
        client = self._client
        if client is None:
            return
        try:
            await asyncio.wrap_future(self._set_flag(cancel_event(state.job_id)))
        except Exception:  # noqa: BLE001 - the scheduler is gone: nothing runs the job any more either
            log.warning("could not set the cancel flag of job %s", state.job_id, exc_info=True)
        if restart and state.address is not None and not state.finished.is_set():
            try:
                await asyncio.wait_for(state.finished.wait(), GRACE)
            except TimeoutError:
                log.warning(
                    "job %s did not stop within %g s of its cancel; restarting its worker %s", state.job_id, GRACE, state.address
                )
                try:
                    await asyncio.to_thread(
                        client.restart_workers, [state.address], timeout=RESTART_TIMEOUT, raise_for_error=False
                    )
                except Exception:  # noqa: BLE001
                    log.error("could not restart the Dask worker %s", state.address, exc_info=True)
        try:
            client.cancel([future])
        except Exception:  # noqa: BLE001
            pass

    async def _death_error(self, state: _JobState, address: str) -> GdalMcpError:
        """The error of a job whose worker died: resource-limit when its nanny restarted it for memory."""
        await asyncio.sleep(0.2)  # the nanny's memory event is sent before it stops the worker; let it arrive
        memory = self._memory_restarts.get(address)
        pid = f" (pid {state.pid})" if state.pid else ""
        if memory is not None and state.started_at is not None and memory[0] >= state.started_at - 1.0:
            limit = f"{format_size(self.max_memory)} per worker" if self._local and self.max_memory else "its --memory-limit"
            return GdalMcpError(
                "resource-limit",
                f"the job exceeded the Dask worker memory limit ({limit}): the nanny of worker {address}{pid} "
                f"restarted it after it used {format_size(memory[1])}; work on a smaller area, or give the "
                "workers more memory (dask worker --memory-limit, or --max-memory with --dask-scheduler local:N)",
            )
        return GdalMcpError(
            "internal-error",
            f"the Dask worker {address}{pid} died while running the job (killed, or crashed); it is not run "
            "again. The server is still serving: retry the call, and see that worker's log if it happens again",
        )


def _reply(future: Any) -> tuple[Any, ...]:
    """The reply of a finished job task (in a thread of the client)."""
    try:
        return tuple(future.result())
    except BaseException as e:  # noqa: BLE001 - KilledWorker, lost by the scheduler, a reply that does not unpickle
        # (A job the server cancelled has nobody reading its reply: a cancel seen here came from the cluster.)
        return ("failed", f"{type(e).__name__}: {e}")
