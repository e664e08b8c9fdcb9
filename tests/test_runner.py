"""The worker pool: results, errors, cancel, timeout, a killed worker, limits, quick calls under load."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from pathlib import Path

import pytest

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.runner import Runner
from gdal_mcp.worker import _classify
from tests.conftest import DATA, huge_vrt

STATUS = jobs.WorkerStatusJob()


def INFO(path: object, **kwargs: object) -> jobs.RasterInfoJob:  # noqa: N802 - reads like the job it builds
    return jobs.RasterInfoJob(path=str(path), **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return huge_vrt(tmp_path_factory.mktemp("big") / "huge.vrt")


@pytest.fixture(scope="module")
def runner(big: Path):
    r = Runner(workers=1, timeout=60, max_memory=2 * 1024**3,
               worker_config={"roots": [str(big.parent), str(DATA)]})
    r.start()
    yield r
    r.close()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def busy_pid(runner: Runner) -> int:
    """The worker that took the long job."""
    for _ in range(50):
        await asyncio.sleep(0.05)
        busy = runner.busy_pids()
        if len(busy) == 1:
            return busy[0]
    raise AssertionError("no worker became busy")


async def test_result_and_limits_of_a_warm_worker(runner: Runner) -> None:
    status = await runner.run(STATUS)
    assert status["memory_limit"] == 2 * 1024**3
    assert status["vrt_python"] == "NO"
    info = await runner.run(INFO(str(DATA / "raster" / "RGB.byte.tif")))
    assert (info.width, info.height, info.count) == (791, 718, 3)


async def test_engine_errors_keep_their_code(runner: Runner) -> None:
    with pytest.raises(GdalMcpError) as e:
        await runner.run(INFO(str(DATA / "raster" / "RGB.byte.tif"), band=7))
    assert e.value.code == "invalid-argument" and "3 band(s)" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        await runner.run(INFO(str(DATA / "bad" / "corrupt.tif"), stats=True))
    assert e.value.code == "gdal-error" and "TIFFFillTile" in e.value.message


@dataclasses.dataclass(frozen=True, kw_only=True)
class Evil(jobs.Job[int]):
    FUNC = "os:getpid"


async def test_only_engine_functions_run(runner: Runner) -> None:
    with pytest.raises(GdalMcpError) as e:
        await runner.run(Evil())
    assert e.value.code == "internal-error"


async def test_cancel_kills_the_worker_within_a_second(runner: Runner, big: Path) -> None:
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    pid = await busy_pid(runner)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    while pid_alive(pid) and time.monotonic() - t0 < 1.0:
        await asyncio.sleep(0.02)
    assert not pid_alive(pid), "cancelled worker still running after 1 s"
    assert pid not in runner.pids()
    info = await runner.run(INFO(str(DATA / "raster" / "float_nan.tif")))
    assert info.width == 3


async def test_timeout_stops_the_job(runner: Runner, big: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(GdalMcpError) as e:
        await runner.run(INFO(str(big), stats=True), timeout=1.0)
    assert e.value.code == "timeout" and "--timeout" in e.value.message
    assert time.monotonic() - t0 < 3
    assert (await runner.run(STATUS))["pid"] in runner.pids()


async def test_killed_worker_gives_internal_error_and_pool_recovers(runner: Runner, big: Path) -> None:
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    pid = await busy_pid(runner)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(GdalMcpError) as e:
        await task
    assert e.value.code == "internal-error" and "SIGKILL" in e.value.message
    info = await runner.run(INFO(str(DATA / "raster" / "RGB.byte.tif")))
    assert info.count == 3


async def test_segfaulting_worker_is_reported(runner: Runner, big: Path) -> None:
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    pid = await busy_pid(runner)
    os.kill(pid, signal.SIGSEGV)
    with pytest.raises(GdalMcpError) as e:
        await task
    assert e.value.code == "internal-error" and "SIGSEGV" in e.value.message
    assert (await runner.run(STATUS))["pid"] != pid


async def test_quick_call_answered_while_long_jobs_run(runner: Runner, big: Path) -> None:
    # workers=1: the long job holds the only general worker; the reserved one answers quick calls.
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    info = await runner.run(INFO(str(DATA / "raster" / "slope.tif")), quick=True)
    elapsed = time.monotonic() - t0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert info.width == 84
    assert elapsed < 2.0, f"quick call waited {elapsed:.1f} s behind a long job"


async def test_progress_is_relayed(runner: Runner) -> None:
    seen: list[tuple[float, str]] = []

    async def sink(fraction: float, message: str) -> None:
        seen.append((fraction, message))

    await runner.run(INFO(str(DATA / "raster" / "RGB.byte.tif"), stats=True), progress=sink)
    assert seen and seen[-1][0] == 1.0 and "statistics" in seen[-1][1]


def test_memory_errors_are_resource_limits() -> None:
    assert _classify(MemoryError())[0] == "resource-limit"

    class CPLE_OutOfMemoryError(Exception):  # noqa: N801 - the name rasterio gives GDAL's error
        pass

    CPLE_OutOfMemoryError.__module__ = "rasterio._err"
    code, message = _classify(CPLE_OutOfMemoryError("Cannot allocate 1600000000 bytes"))
    assert code == "resource-limit" and "Cannot allocate" in message
    assert _classify(GdalMcpError("not-found", "x")) == ("not-found", "x")
    assert _classify(ValueError("boom"))[0] == "internal-error"


async def test_worker_holding_too_much_memory_is_recycled(big: Path) -> None:
    r = Runner(workers=1, timeout=60, recycle_rss=1, worker_config={"roots": [str(DATA)]})
    try:
        first = (await r.run(STATUS, quick=True))["pid"]
        second = (await r.run(STATUS, quick=True))["pid"]
        assert first != second and first not in r.pids()
        assert len(r.pids()) == 2
    finally:
        r.close()
    lean = Runner(workers=1, timeout=60, recycle_rss=2 * 1024**3, worker_config={"roots": [str(DATA)]})
    try:
        pids = {(await lean.run(STATUS, quick=True))["pid"] for _ in range(4)}
        assert pids <= set(lean.pids())
    finally:
        lean.close()
