"""The job board: the jobs running in workers (and the last ones finished), the last audit records and the new
outputs, as the approval console shows them; a running job can be cancelled from it.

App.execute runs every job that is not quick through `JobBoard.track(...).run(...)` when the board exists (HTTP
with --console); the console (server/web/console.py) reads the board and cancels through it. No web imports.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.server.audit import AuditLog, iso

T = TypeVar("T")
KEEP_JOBS = 20  # finished jobs kept on the page
KEEP_OUTPUTS = 20
KEEP_AUDIT = 100  # audit records kept on the page
#: the tool a call runs (set by the tool wrapper: the board names jobs by it)
CURRENT_TOOL: ContextVar[str | None] = ContextVar("gdal_mcp_current_tool", default=None)


@dataclass
class JobEntry:
    """A job running in a worker, as the console shows it; `task` is its cancel handle."""

    id: str
    tool: str
    started: float
    task: asyncio.Task[Any] | None = None
    message: str = ""
    fraction: float | None = None
    status: str = "running"  # running | finished | failed | cancelled
    ended: float | None = None
    cancelled_by: str | None = None

    def view(self) -> dict[str, Any]:
        end = self.ended or time.time()
        return {
            "id": self.id,
            "tool": self.tool,
            "started": iso(self.started),
            "status": self.status,
            "message": self.message,
            "progress": None if self.fraction is None else round(100 * self.fraction, 1),
            "seconds": round(end - self.started, 1),
        }


class Tracker:
    """One job on the board: App.execute runs the executor's run() coroutine through `run()`."""

    def __init__(self, board: JobBoard, entry: JobEntry) -> None:
        self.board = board
        self.entry = entry

    def progress(self, fraction: float, message: str) -> None:
        self.entry.fraction = fraction
        self.entry.message = message

    async def run(self, work: Awaitable[T]) -> T:
        """Run `work` as its own task (the Cancel button's handle). Cancelled from the console, the caller
        gets `cancelled` (the executor stops the job: the local one kills its worker; App.execute discards the partial output)."""
        entry = self.entry
        inner: asyncio.Task[T] = asyncio.ensure_future(work)
        entry.task = inner
        try:
            result = await inner
        except asyncio.CancelledError:
            entry.status, entry.ended = "cancelled", time.time()
            current = asyncio.current_task()
            if entry.cancelled_by is not None and inner.cancelled() and (current is None or not current.cancelling()):
                raise GdalMcpError(
                    "cancelled",
                    f"{entry.tool} was stopped from the approval console; nothing was "
                    "written. Do not retry unless the user asks for it",
                ) from None
            raise
        except BaseException:
            entry.status, entry.ended = "failed", time.time()
            raise
        finally:
            entry.task = None
            self.board.retire(entry)
        entry.status, entry.ended = "finished", time.time()
        return result


class JobBoard:
    """Running and recent jobs, the last audit records and the new outputs (fed by the audit log's listener)."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self.jobs: dict[str, JobEntry] = {}
        self.records: deque[dict[str, Any]] = deque(maxlen=KEEP_AUDIT)
        self.outputs: deque[dict[str, Any]] = deque(maxlen=KEEP_OUTPUTS)
        audit.listeners.append(self._audited)

    # ----- audit ring and outputs (AuditLog calls _audited with every record) ---------------------
    def _audited(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if record.get("outcome") == "ok":
            for out in record.get("outputs") or ():
                for old in [o for o in self.outputs if o["path"] == out]:
                    self.outputs.remove(old)  # rewritten: shown once, as the newest
                self.outputs.append({"path": out, "tool": record.get("tool"), "time": record.get("time")})

    # ----- jobs ---------------------------------------------------------------------------------
    def track(self, func: str) -> Tracker:
        """A new running job for engine function `func`, named by the tool that runs it (CURRENT_TOOL)."""
        tool = CURRENT_TOOL.get() or func.rpartition(":")[2]
        entry = JobEntry(id=secrets.token_urlsafe(6), tool=tool, started=time.time())
        self.jobs[entry.id] = entry
        return Tracker(self, entry)

    def retire(self, entry: JobEntry) -> None:
        done = [j for j in self.jobs.values() if j.status != "running" and j is not entry]
        for j in sorted(done, key=lambda j: j.ended or 0)[: -KEEP_JOBS or None]:
            del self.jobs[j.id]

    def cancel(self, jid: str, token: str | None) -> JobEntry:
        """Stop a running job (`token`: the fingerprint of the credential the person used); audited."""
        entry = self.jobs.get(jid)
        if entry is None or entry.status != "running" or entry.task is None:
            raise GdalMcpError("not-found", f"no running job {jid}")
        entry.cancelled_by = token or "console"
        entry.task.cancel()
        self.audit.write(
            tool=entry.tool,
            arguments={"job": jid, "by": "console", "token": token},
            outcome="cancel-requested",
            duration_ms=1000 * (time.time() - entry.started),
        )
        return entry

    # ----- what the page shows ------------------------------------------------------------------
    def views(self) -> list[dict[str, Any]]:
        """The jobs kept, newest first."""
        return [j.view() for j in sorted(self.jobs.values(), key=lambda j: j.started, reverse=True)]

    def recent_audit(self) -> list[dict[str, Any]]:
        """The last audit records, newest first."""
        return list(reversed(self.records))

    def recent_outputs(self) -> list[dict[str, Any]]:
        """The files written lately (each once, as of its last write), newest first."""
        return list(reversed(self.outputs))
