"""Execution: where a job (gdal_mcp.jobs) runs. Two executors with one interface, `Executor`:

- `local.LocalExecutor` (the default): a warm pool of worker processes on this machine (`local_worker.py` is their
  side), each confined by the kernel (`confine.py`) before it starts a thread.
- `dask_executor.DaskExecutor` (--executor dask): the jobs and their tiles on a Dask cluster (`dask_worker.py` is the
  workers' side: a plugin that sets them up, the jobs' and tiles' tasks; `dask_confine.py` confines their task threads).

`common.py` is what both workers' sides share (GDAL set-up, which engine function a job may run, failure
classification). The server imports the executors, never the workers' side (tests/test_architecture.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.jobs import Job

#: receives a job's progress: (fraction in [0, 1], message)
ProgressSink = Callable[[float, str], Awaitable[None]]


class Executor(Protocol):
    """What the server needs from an executor."""

    def start(self, count: int | None = None) -> None:
        """Start (or connect to) the workers; idempotent. `count`: at least that many started, the rest later."""

    def close(self) -> None:
        """Stop the workers (or disconnect); running jobs end."""

    async def run[R](
        self, job: Job[R], *, progress: ProgressSink | None = None, quick: bool = False, timeout: float | None = None
    ) -> R:
        """Run a job; its result, or GdalMcpError with a stable code. Cancelling the call stops the job.
        `quick`: a metadata job, run before long ones."""
        ...

    def pids(self) -> list[int]:
        """The worker processes' ids (on this machine)."""
        ...

    def busy_pids(self) -> list[int]:
        """The ids of the workers running a job now."""
        ...


#: the exit status of a local worker that stopped its job for reading past --max-remote-bytes (execution/local.py)
EXIT_REMOTE_BUDGET = 75


def remote_budget_error(limit: int, used: int | None = None) -> GdalMcpError:
    from gdal_mcp.config import format_size

    figure = f" (it had fetched {format_size(used)})" if used is not None else ""
    return GdalMcpError(
        "resource-limit",
        f"the job would download more than the server's limit of {format_size(limit)} from remote locations{figure}; "
        "ask for less: a bbox (raster_stats, raster_clip, raster_calc, raster_preview take one), fewer bands, a "
        "coarser grid (raster_reproject resolution=), or ask the operator to raise --max-remote-bytes",
    )


@dataclass(frozen=True)
class WithRemote:
    """A job's result and what it read from remote locations ({requests, bytes, files}: engine/remote_io.py), as a
    worker sends it when the job read any; App.execute takes it apart (the figures go to the tool's result)."""

    value: Any
    remote: dict[str, int]


#: the remote reads of the job(s) the current tool call ran (set by App.execute, read where results are shaped)
REMOTE_READS: ContextVar[dict[str, int] | None] = ContextVar("gdal_mcp_remote_reads", default=None)
