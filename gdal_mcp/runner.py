"""The runner: all GDAL work runs in a warm pool of worker processes, never in the server.

A job is a typed job specification (gdal_mcp.jobs). The runner relays its progress, enforces
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
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.jobs import Job, R

log = logging.getLogger("gdal_mcp.runner")

ProgressSink = Callable[[float, str], Awaitable[None]]
_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection
    started: float = field(default_factory=time.monotonic)
    ready: bool = False

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


class Runner:
    """Pool of warm GDAL worker processes."""

    def __init__(self, *, workers: int = 2, timeout: float = 600.0, max_memory: int | None = None,
                 worker_config: dict[str, Any] | None = None, recycle_rss: int | None = None) -> None:
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
        proc = subprocess.Popen(
            [sys.executable, "-m", "gdal_mcp.worker", str(child.fileno())],
            pass_fds=[child.fileno()], stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), env=env,
            start_new_session=True,
        )
        child.close()
        conn = Connection(parent.detach())
        conn.send_bytes(pickle.dumps(self.worker_config))
        w = _Worker(proc, conn)
        self._all.add(w)
        log.debug("spawned worker pid %s", proc.pid)
        return w

    def start(self) -> None:
        """Spawn the warm workers (imports happen in the background)."""
        if self._idle is not None:
            return
        self._idle = asyncio.Queue()
        self._general = asyncio.Semaphore(self.workers)
        for _ in range(self.workers + 1):
            self._idle.put_nowait(self._spawn())

    def close(self) -> None:
        self._closed = True
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
        """Workers running a job right now."""
        return [w.pid for w in self._busy if w.pid is not None]

    def _replace(self, dead: _Worker) -> None:
        dead.kill()
        self._all.discard(dead)
        if not self._closed and self._idle is not None:
            self._idle.put_nowait(self._spawn())

    async def _wait_ready(self, w: _Worker) -> None:
        if w.ready:
            return
        msg = await w.recv()
        if not (isinstance(msg, tuple) and msg and msg[0] == "ready"):
            raise RuntimeError(f"worker sent {msg!r} before ready")
        w.ready = True

    # ----- jobs ----------------------------------------------------------------------------
    async def run(self, job: Job[R], *, progress: ProgressSink | None = None,
                  quick: bool = False, timeout: float | None = None) -> R:
        """Run a job in a worker; return its result or raise GdalMcpError."""
        if self._idle is None:
            self.start()
        assert self._idle is not None and self._general is not None
        limit = self.timeout if timeout is None else timeout
        if quick:
            return await self._run_on_worker(job, progress, limit)
        async with self._general:
            return await self._run_on_worker(job, progress, limit)

    async def _run_on_worker(self, job: Job[R], progress: ProgressSink | None, limit: float) -> R:
        assert self._idle is not None
        w = await self._idle.get()
        healthy = False
        self._busy.add(w)
        try:
            async with asyncio.timeout(limit):
                await self._wait_ready(w)
                w.conn.send(job)
                while True:
                    msg = await w.recv()
                    kind = msg[0]
                    if kind == "progress":
                        if progress is not None:
                            await progress(msg[1], msg[2])
                        continue
                    healthy = True
                    if kind == "result":
                        return msg[1]  # type: ignore[no-any-return]
                    raise GdalMcpError(msg[1], msg[2])
        except TimeoutError:
            raise GdalMcpError(
                "timeout",
                f"the job did not finish within {limit:g} s and was stopped; work on a smaller area "
                "or start the server with a larger --timeout",
            ) from None
        except (EOFError, OSError, BrokenPipeError):
            raise self._death_error(w) from None
        finally:
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
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if name == "SIGKILL":
                return GdalMcpError(
                    "internal-error",
                    "the worker was killed (SIGKILL, e.g. by the system's out-of-memory killer); the server is "
                    "still serving: retry, or work on a smaller area",
                )
            return GdalMcpError("internal-error", f"the worker crashed ({name}); the server is still serving, "
                                "retry or report the input that caused it")
        return GdalMcpError("internal-error", f"the worker exited unexpectedly (exit code {code}); retry the call")
