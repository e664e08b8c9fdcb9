"""Execution: where a job (gdal_mcp.jobs) runs. Two executors with one interface, `Executor`:

- `local.LocalExecutor` (the default): a warm pool of worker processes on this machine (`local_worker.py` is their
  side), each confined by the kernel (`confine.py`) before it starts a thread.
- `dask_executor.DaskExecutor` (--executor dask): the jobs and their tiles on a Dask cluster (`dask_worker.py` is the
  workers' side: a plugin that sets them up and confines their task threads).

`common.py` is what both workers' sides share (GDAL set-up, which engine function a job may run, failure
classification). The server imports the executors, never the workers' side (tests/test_architecture.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

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
