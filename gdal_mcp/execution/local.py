"""The local executor: all GDAL work runs in a warm pool of worker processes, never in the server.

A job is a typed job specification (gdal_mcp.jobs). The executor relays its progress, enforces
the per-job timeout, kills the worker on cancel or timeout (a fresh one replaces it), and turns a
worker that dies into a structured error while the server keeps serving.

`workers` processes take any job; one extra process only takes quick (metadata) jobs, so a quick
call is answered promptly while long jobs occupy the others.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import gdal_mcp
from gdal_mcp.config import format_size
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import EXIT_REMOTE_BUDGET, ProgressSink, remote_budget_error
from gdal_mcp.jobs import Job

log = logging.getLogger("gdal_mcp.execution.local")

_relay_fd: list[int] = []
_relay_lock = threading.Lock()
#: the longest line relayed whole (a longer one is cut into pieces of this size)
RELAY_LINE = 64 * 1024


def worker_output() -> int:
    """The write end of a pipe that every worker's stdout and stderr go to: a thread of this process copies each line
    to its stderr with credentials redacted (credentials.redact, redact_queries), so GDAL's own messages (a warning
    quoting a URL with an Azure SAS, say) never print a secret. One pipe for the process's lifetime."""
    with _relay_lock:
        if not _relay_fd:
            read_end, write_end = os.pipe()
            threading.Thread(target=_relay, args=(read_end,), name="gdal-mcp-worker-output", daemon=True).start()
            _relay_fd.append(write_end)
        return _relay_fd[0]


def _relay(fd: int) -> None:
    from gdal_mcp.credentials import redact, redact_queries

    with open(fd, "rb") as source:
        while line := source.readline(RELAY_LINE):
            text = line.decode("utf-8", "replace")
            try:
                os.write(sys.stderr.fileno(), redact(redact_queries(text)).encode("utf-8", "replace"))
            except (OSError, ValueError):  # no stderr (closed): the line is dropped, the workers go on
                pass


_PACKAGE_PARENT = str(Path(gdal_mcp.__file__).resolve().parent.parent)  # where `python -m gdal_mcp...` finds it
#: how often a running job's address space is sampled (to tell an out-of-memory death from another)
MEMORY_SAMPLE_INTERVAL = 0.2
#: a worker that dies after using this share of its --max-memory limit died of memory
NEAR_LIMIT = 0.85
#: how long a fresh worker may take to import GDAL before it counts as broken (not part of a job's --timeout)
READY_TIMEOUT = 120.0
#: how often idle workers are checked for deaths (then replaced at once)
HEALTH_INTERVAL = 1.0


class _NotStarted(Exception):
    """The worker died before it took the job: nothing ran, so the job may go to another worker."""


def _address_space(pid: int | None) -> tuple[int, int] | None:
    """(VmSize, VmPeak) of a process in bytes: what RLIMIT_AS limits, now and at its highest."""
    if pid is None:
        return None
    size = peak = 0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    size = int(line.split()[1]) * 1024
                elif line.startswith("VmPeak:"):
                    peak = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return (size, peak) if size else None


def _oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot (None: not known)."""
    try:
        with open("/proc/vmstat") as fh:
            for line in fh:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection
    started: float = field(default_factory=time.monotonic)
    ready: bool = False
    running: bool = False
    #: highest address space seen during the current job, and the process's VmPeak when it began
    job_peak: int = 0
    peak_before: int = 0
    oom_kills_before: int | None = None

    def begin_job(self) -> None:
        sample = _address_space(self.pid)
        self.job_peak = sample[0] if sample else 0
        self.peak_before = sample[1] if sample else 0
        self.oom_kills_before = _oom_kills()

    def sample_memory(self) -> None:
        sample = _address_space(self.pid)
        if sample is None:
            return
        size, peak = sample
        # VmPeak only ever grows: above its value at the start, it was reached during this job.
        self.job_peak = max(self.job_peak, size, peak if peak > self.peak_before else 0)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.wait(timeout=2)
        except Exception:  # noqa: BLE001 - already gone
            pass
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass

    async def recv(self) -> Any:
        """Wait for the next message without blocking the event loop."""
        loop = asyncio.get_running_loop()
        fd = self.conn.fileno()
        while not self.conn.poll():
            readable = asyncio.Event()
            loop.add_reader(fd, readable.set)
            try:
                await readable.wait()
            finally:
                loop.remove_reader(fd)
        return self.conn.recv()


class LocalExecutor:
    """Pool of warm GDAL worker processes."""

    def __init__(
        self,
        *,
        workers: int = 2,
        timeout: float = 600.0,
        max_memory: int | None = None,
        worker_config: dict[str, Any] | None = None,
        recycle_rss: int | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.timeout = timeout
        self.worker_config = dict(worker_config or {})
        self.worker_config["max_memory"] = max_memory
        self.recycle_rss = recycle_rss
        self._idle: asyncio.Queue[_Worker] | None = None
        self._general: asyncio.Semaphore | None = None
        self._all: set[_Worker] = set()
        self._busy: set[_Worker] = set()
        self._closed = False
        self._unspawned = 0  # workers start() has yet to spawn
        self._health: asyncio.TimerHandle | None = None
        self._tmp: str | None = None

    # ----- lifecycle ---------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        # A fresh interpreter (not multiprocessing's spawn) so the parent's __main__ is never re-imported;
        # its stdout is our stderr, so nothing it prints can reach the protocol stream.
        parent, child = socket.socketpair()
        env = dict(os.environ)
        # glibc reserves 64 MiB of address space per thread arena; under RLIMIT_AS that is wasted limit.
        env.setdefault("MALLOC_ARENA_MAX", "2")
        # Arrow's own allocator keeps freed memory; with the system one, malloc_trim returns it after a job.
        env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        # -P: the current directory is not put on the import path (it may be a workspace, whose files are data).
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "gdal_mcp.execution.local_worker", str(child.fileno())],
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=worker_output(),
            stderr=worker_output(),
            env=env,
            start_new_session=True,
        )
        child.close()
        conn = Connection(parent.detach())
        conn.send_bytes(pickle.dumps(self.worker_config))
        w = _Worker(proc, conn)
        self._all.add(w)
        log.debug("spawned worker pid %s", proc.pid)
        return w

    def start(self, count: int | None = None) -> None:
        """Spawn the warm workers (imports happen in the background). With `count`, at least that many for now
        and the rest on the next start(): the server spawns one before its own imports, so the two overlap, and the
        rest after its first answer (or when every started worker is busy, or the server's REST_OF_POOL_AFTER), so
        their imports do not take the CPU the server and the first job need on a small machine."""
        if self._idle is None:
            self._idle = asyncio.Queue()
            self._general = asyncio.Semaphore(self.workers)
            self._unspawned = self.workers + 1
            if not self.worker_config.get("tmp"):
                # The workers' private temporary directory: the only place outside the workspaces they may write.
                self._tmp = tempfile.mkdtemp(prefix="gdal-mcp-workers-")
                self.worker_config["tmp"] = self._tmp
        spawned = self.workers + 1 - self._unspawned
        # `count`: at least that many spawned in all (the CLI's early start(1) and the lifespan's are one worker)
        n = self._unspawned if count is None else max(0, min(count - spawned, self._unspawned))
        for _ in range(0 if self._closed else n):
            self._idle.put_nowait(self._spawn())
            self._unspawned -= 1

    def close(self) -> None:
        self._closed = True
        if self._health is not None:
            self._health.cancel()
        self._close_workers()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _close_workers(self) -> None:
        for w in list(self._all):
            try:
                if w.alive():
                    w.conn.send(None)
            except Exception:  # noqa: BLE001
                pass
        deadline = time.monotonic() + 1.0
        for w in list(self._all):
            try:
                w.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.kill()
        self._all.clear()

    def pids(self) -> list[int]:
        return [w.pid for w in self._all if w.pid is not None and w.alive()]

    def busy_pids(self) -> list[int]:
        """Workers running a job right now (they have taken it: killing one now fails that job)."""
        return [w.pid for w in self._busy if w.pid is not None and w.running]

    def _replace(self, dead: _Worker) -> None:
        """Kill `dead` (if it still runs) and start a fresh worker in its place: the pool never shrinks."""
        dead.kill()
        self._all.discard(dead)
        self._refill()

    def _refill(self) -> None:
        if self._closed or self._idle is None:
            return
        try:
            self._idle.put_nowait(self._spawn())
        except OSError as e:  # fork or socket failed (memory or process limits): try again shortly
            log.error("could not start a worker process (%s); trying again in 1 s", e)
            try:
                asyncio.get_running_loop().call_later(1.0, self._refill)
            except RuntimeError:
                pass  # no event loop: the next job's start() or replacement spawns one

    def _check_idle(self) -> None:
        """Every HEALTH_INTERVAL: replace the idle workers that died (the out-of-memory killer picks idle
        workers too) without waiting for a job to find them, so the pool stays whole and warm."""
        self._health = None
        if self._closed:
            return
        try:
            for w in list(self._all - self._busy):
                if not w.alive():
                    log.warning("worker %s died while idle (%s); starting a fresh one", w.pid, _exit_text(w.process.returncode))
                    self._replace(w)
        except Exception:  # noqa: BLE001 - the check must keep running whatever one replacement did
            log.exception("health check of the idle workers failed; trying again in %s s", HEALTH_INTERVAL)
        finally:
            if not self._closed:
                self._health = asyncio.get_running_loop().call_later(HEALTH_INTERVAL, self._check_idle)

    async def _take_idle(self) -> _Worker:
        """An idle worker that is alive: one that died while idle is never handed a job; it is replaced
        (if the health check has not done so yet) and the next one is taken."""
        assert self._idle is not None
        if self._health is None and not self._closed:
            self._health = asyncio.get_running_loop().call_later(HEALTH_INTERVAL, self._check_idle)
        for _ in range(2 * (self.workers + 1)):
            w = await self._idle.get()
            if w.alive():
                return w
            if w in self._all:  # not replaced yet
                log.warning("worker %s died while idle (%s); starting a fresh one", w.pid, _exit_text(w.process.returncode))
                self._replace(w)
        raise GdalMcpError(
            "internal-error", "the worker processes keep dying as soon as they start; the server's log (stderr) says why"
        )

    async def _wait_ready(self, w: _Worker) -> None:
        if w.ready:
            return
        msg = await w.recv()
        if not (isinstance(msg, tuple) and msg and msg[0] == "ready"):
            raise RuntimeError(f"worker sent {msg!r} before ready")
        w.ready = True

    # ----- jobs ----------------------------------------------------------------------------
    async def run[R](
        self, job: Job[R], *, progress: ProgressSink | None = None, quick: bool = False, timeout: float | None = None
    ) -> R:
        """Run a job in a worker; return its result or raise GdalMcpError."""
        if self._idle is None:
            self.start()
        assert self._idle is not None and self._general is not None
        if self._unspawned and self._idle.empty():
            self._start_rest()  # every warm worker is busy: the rest of the pool now, not after this job
        limit = self.timeout if timeout is None else timeout
        try:
            if quick:
                return await self._run_on_worker(job, progress, limit)
            async with self._general:
                return await self._run_on_worker(job, progress, limit)
        finally:
            if self._unspawned:
                self._start_rest()  # the first answer is out: the rest of the pool imports GDAL now

    def _start_rest(self) -> None:
        """The workers start() has yet to spawn; a failure (no process or file left) is logged, never the job's."""
        try:
            self.start()
        except OSError:
            log.warning("could not start the rest of the worker pool; it is tried again with the next job", exc_info=True)

    async def _run_on_worker[R](self, job: Job[R], progress: ProgressSink | None, limit: float) -> R:
        """Run `job` on an idle worker.

        A worker that died before it took the job (killed while idle, or between hand-out and start) is
        replaced and the job goes to the next idle worker, without the caller seeing it. A job that had
        started when its worker died is never run again (it may have had effects): the caller gets an error.

        Several idle workers may have died at once (the OOM killer, a killed process group) and still look
        alive: a SIGKILLed worker's process can only be reaped once all its threads have exited, a few ms
        later. Each one found dead is replaced, so after at most the pool's size of them the next is fresh.
        """
        attempts = self.workers + 2
        for attempt in range(1, attempts + 1):
            w = await self._take_idle()
            try:
                return await self._attempt(w, job, progress, limit)
            except _NotStarted:
                if attempt == attempts:
                    raise self._death_error(w) from None
                log.warning(
                    "worker %s died before it took %s (%s); running it on a fresh worker",
                    w.pid,
                    job.FUNC,
                    _exit_text(w.process.returncode),
                )
        raise AssertionError("unreachable")

    async def _sample_memory(self, w: _Worker) -> None:
        while True:
            await asyncio.sleep(MEMORY_SAMPLE_INTERVAL)
            w.sample_memory()

    async def _attempt[R](self, w: _Worker, job: Job[R], progress: ProgressSink | None, limit: float) -> R:
        assert self._idle is not None
        healthy = started = False
        self._busy.add(w)
        sampler = asyncio.create_task(self._sample_memory(w))
        try:
            # A fresh worker (a replacement) first imports GDAL: that is not the job's time.
            async with asyncio.timeout(READY_TIMEOUT):
                await self._wait_ready(w)
            w.begin_job()
            async with asyncio.timeout(limit):
                w.conn.send(job)
                while True:
                    msg = await w.recv()
                    kind = msg[0]
                    if kind == "started":  # the worker took the job: from here on it is never rerun
                        started = w.running = True
                        continue
                    if kind == "progress":
                        if progress is not None:
                            await progress(msg[1], msg[2])
                        continue
                    healthy = True
                    if kind == "result":
                        return msg[1]  # type: ignore[no-any-return]
                    raise GdalMcpError(msg[1], msg[2])
        except TimeoutError:
            if not w.ready:
                raise GdalMcpError(
                    "internal-error",
                    f"a worker process did not start within {READY_TIMEOUT:g} s "
                    "(the machine may be overloaded); retry, and see the server's log",
                ) from None
            raise timeout_error(limit) from None
        except (EOFError, OSError):
            if not started:
                raise _NotStarted from None
            raise self._death_error(w) from None
        finally:
            sampler.cancel()
            w.running = False
            self._busy.discard(w)
            if healthy and not self._bloated(w):
                self._idle.put_nowait(w)
            elif healthy:
                log.debug("recycling worker %s: resident memory stayed above %s bytes", w.pid, self.recycle_rss)
                self._replace(w)
            else:
                # Cancelled, timed out or crashed: kill it so nothing keeps running, start a fresh one.
                self._replace(w)

    def _bloated(self, w: _Worker) -> bool:
        """Whether an idle worker still holds more resident memory than allowed (then it is replaced)."""
        if not self.recycle_rss or w.pid is None:
            return False
        try:
            with open(f"/proc/{w.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024 > self.recycle_rss
        except OSError:
            return False
        return False

    def _death_error(self, w: _Worker) -> GdalMcpError:
        try:
            code = w.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            w.kill()
            code = w.process.returncode
        memory = self._memory_death(w, code)
        if memory is not None:
            return memory
        if code == EXIT_REMOTE_BUDGET and self.worker_config.get("max_remote_bytes"):
            return remote_budget_error(int(self.worker_config["max_remote_bytes"]))
        if code is not None and code < 0:
            name = _exit_text(code)
            if code == -signal.SIGXFSZ:
                return GdalMcpError(
                    "resource-limit",
                    "the job's output grew past the file-size limit the server "
                    "runs under (ulimit -f, SIGXFSZ); write a smaller output or raise that limit",
                )
            if name == "SIGKILL":
                return GdalMcpError(
                    "internal-error",
                    "the worker was killed (SIGKILL, e.g. by the system's out-of-memory killer); the server is "
                    "still serving: retry, or work on a smaller area",
                )
            return GdalMcpError(
                "internal-error",
                f"the worker crashed ({name}); the server is still serving, retry or report the input that caused it",
            )
        return GdalMcpError("internal-error", f"the worker exited unexpectedly (exit code {code}); retry the call")

    def _memory_death(self, w: _Worker, code: int | None) -> GdalMcpError | None:
        """resource-limit when the worker died of memory: the kernel's out-of-memory killer struck while it
        ran (SIGKILL), or it died after using nearly all of its --max-memory (an allocation failed where
        nothing could report it)."""
        limit = self.worker_config.get("max_memory")
        limit_text = f"--max-memory {format_size(limit)}" if limit else "no --max-memory limit set"
        if code == -signal.SIGKILL and w.oom_kills_before is not None and (_oom_kills() or 0) > w.oom_kills_before:
            used = f" while it used {format_size(w.job_peak)}" if w.job_peak else ""
            return GdalMcpError(
                "resource-limit",
                f"the machine ran out of memory and the system's out-of-memory killer stopped the worker{used} "
                f"(worker limit: {limit_text}); work on a smaller area, or lower --max-memory or --workers so "
                "the workers fit in the machine's memory",
            )
        if limit and code not in (None, 0) and w.job_peak >= NEAR_LIMIT * limit:
            return GdalMcpError(
                "resource-limit",
                f"the job exceeded the worker memory limit {limit_text}: the worker was stopped "
                f"({_exit_text(code)}) after using {format_size(w.job_peak)} of it; work on a smaller area, "
                "or start the server with a larger --max-memory",
            )
        return None


def timeout_error(limit: float) -> GdalMcpError:
    """The error of a job stopped at its time limit (either executor)."""
    return GdalMcpError(
        "timeout",
        f"the job did not finish within {limit:g} s and was stopped; work on a smaller "
        "area or start the server with a larger --timeout",
    )


def _exit_text(code: int | None) -> str:
    """'SIGKILL', 'exit code 1' or 'still running' for a worker's return code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
