"""The worker pool: results, errors, cancel, timeout, a killed worker, limits, quick calls under load."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from gdal_mcp import jobs
from gdal_mcp.config import format_size
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import local as runner_module
from gdal_mcp.execution.common import classify as _classify
from gdal_mcp.execution.local import NEAR_LIMIT, LocalExecutor
from tests.faults import DiesAfterStart, DiesOnArrival, MiB, one_tile_tiff
from tests.helpers import DATA, huge_vrt

STATUS = jobs.WorkerStatusJob()


def INFO(path: object, **kwargs: object) -> jobs.RasterInfoJob:  # noqa: N802 - reads like the job it builds
    return jobs.RasterInfoJob(path=str(path), **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return huge_vrt(tmp_path_factory.mktemp("big") / "huge.vrt")


@pytest.fixture(scope="module")
def runner(big: Path):
    r = LocalExecutor(workers=1, timeout=60, max_memory=2 * 1024**3, worker_config={"roots": [str(big.parent), str(DATA)]})
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


async def busy_pid(runner: LocalExecutor) -> int:
    """The worker that took the long job (a fresh worker first imports GDAL: allow for a loaded machine)."""
    for _ in range(400):
        await asyncio.sleep(0.05)
        busy = runner.busy_pids()
        if len(busy) == 1:
            return busy[0]
    raise AssertionError("no worker became busy")


async def test_result_and_limits_of_a_warm_worker(runner: LocalExecutor) -> None:
    status = await runner.run(STATUS)
    assert status["memory_limit"] == 2 * 1024**3
    assert status["vrt_python"] == "NO"
    info = await runner.run(INFO(str(DATA / "raster" / "RGB.byte.tif")))
    assert (info.width, info.height, info.count) == (791, 718, 3)


async def test_engine_errors_keep_their_code(runner: LocalExecutor) -> None:
    with pytest.raises(GdalMcpError) as e:
        await runner.run(INFO(str(DATA / "raster" / "RGB.byte.tif"), band=7))
    assert e.value.code == "invalid-argument" and "3 band(s)" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        await runner.run(INFO(str(DATA / "bad" / "corrupt.tif"), stats=True))
    assert e.value.code == "gdal-error" and "TIFFFillTile" in e.value.message


@dataclasses.dataclass(frozen=True, kw_only=True)
class Evil(jobs.Job[int]):
    FUNC = "os:getpid"


async def test_only_engine_functions_run(runner: LocalExecutor) -> None:
    with pytest.raises(GdalMcpError) as e:
        await runner.run(Evil())
    assert e.value.code == "internal-error"


async def test_cancel_kills_the_worker_at_once(runner: LocalExecutor, big: Path) -> None:
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    pid = await busy_pid(runner)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The job alone runs past the pool's 60 s limit; the bound leaves room for a loaded CI machine (the figure is in bench/).
    while pid_alive(pid) and time.monotonic() - t0 < 5.0:
        await asyncio.sleep(0.02)
    assert not pid_alive(pid), "cancelled worker still running after 5 s"
    assert pid not in runner.pids()
    info = await runner.run(INFO(str(DATA / "raster" / "float_nan.tif")))
    assert info.width == 3


async def test_timeout_stops_the_job(runner: LocalExecutor, big: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(GdalMcpError) as e:
        await runner.run(INFO(str(big), stats=True), timeout=1.0)
    assert e.value.code == "timeout" and "--timeout" in e.value.message
    # Uninterrupted, the job runs past the pool's 60 s limit; 15 s leaves room for a loaded machine (CI took 3.2 s).
    assert time.monotonic() - t0 < 15
    assert (await runner.run(STATUS))["pid"] in runner.pids()


async def test_killed_worker_gives_internal_error_and_pool_recovers(runner: LocalExecutor, big: Path) -> None:
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    pid = await busy_pid(runner)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(GdalMcpError) as e:
        await task
    assert e.value.code == "internal-error" and "SIGKILL" in e.value.message
    info = await runner.run(INFO(str(DATA / "raster" / "RGB.byte.tif")))
    assert info.count == 3


async def test_segfaulting_worker_is_reported(runner: LocalExecutor, big: Path) -> None:
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    pid = await busy_pid(runner)
    os.kill(pid, signal.SIGSEGV)
    with pytest.raises(GdalMcpError) as e:
        await task
    assert e.value.code == "internal-error" and "SIGSEGV" in e.value.message
    assert (await runner.run(STATUS))["pid"] != pid


async def test_quick_call_answered_while_long_jobs_run(runner: LocalExecutor, big: Path) -> None:
    # workers=1: the long job holds the only general worker; the reserved one answers quick calls.
    task = asyncio.create_task(runner.run(INFO(str(big), stats=True)))
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    info = await runner.run(INFO(str(DATA / "raster" / "slope.tif")), quick=True)
    elapsed = time.monotonic() - t0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert info.width == 84
    # Behind the long job it would wait up to 60 s; the bound leaves room for a loaded machine.
    assert elapsed < 8.0, f"quick call waited {elapsed:.1f} s behind a long job"


async def test_progress_is_relayed(runner: LocalExecutor) -> None:
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
    r = LocalExecutor(workers=1, timeout=60, recycle_rss=1, worker_config={"roots": [str(DATA)]})
    try:
        first = (await r.run(STATUS, quick=True))["pid"]
        second = (await r.run(STATUS, quick=True))["pid"]
        assert first != second and first not in r.pids()
        assert len(r.pids()) == 2
    finally:
        r.close()
    lean = LocalExecutor(workers=1, timeout=60, recycle_rss=2 * 1024**3, worker_config={"roots": [str(DATA)]})
    try:
        pids = {(await lean.run(STATUS, quick=True))["pid"] for _ in range(4)}
        assert pids <= set(lean.pids())
    finally:
        lean.close()


def gdal_libraries(pid: int) -> set[str]:
    """The bundled GDAL libraries a process has loaded (rasterio's, and pyogrio's once it ran a vector job)."""
    with open(f"/proc/{pid}/maps") as fh:
        return {line.split("/")[-2] for line in fh if "/libgdal" in line}


async def test_a_worker_that_ran_vector_jobs_is_not_recycled_at_the_default_threshold() -> None:
    """pyogrio's second GDAL puts a worker well above its raster-only size: with the default recycle_rss it stays
    in the pool (no fresh worker, and GDAL import, per vector call)."""
    from gdal_mcp.config import Settings
    from gdal_mcp.server.app import App

    runner = App(Settings(workspaces=(DATA,), workers=1, confirm="never")).executor
    shapes = str(DATA / "vector" / "naturalearth_lowres.shp")
    try:
        for _ in range(2):  # the pool's two processes take turns: each runs every job kind below
            await runner.run(INFO(RGB, stats=True))
        pids = set(runner.pids())
        for job in (jobs.VectorInfoJob(path=shapes), jobs.FeaturesJob(path=shapes, limit=200)):
            for _ in range(2):
                await runner.run(job, quick=True)
        await runner.run(INFO(RGB))
        assert set(runner.pids()) == pids, "a worker was replaced after a vector call"
        for pid in pids:
            assert gdal_libraries(pid) == {"rasterio.libs", "pyogrio.libs"}, gdal_libraries(pid)
    finally:
        runner.close()


# ----- faults: workers that die while idle, before a job starts, or of memory ------------------------------
RGB = DATA / "raster" / "RGB.byte.tif"


def wait_dead(pids: list[int], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while any(pid_alive(p) for p in pids):
        assert time.monotonic() < deadline, f"processes {pids} still alive"
        time.sleep(0.01)


def vm_peak(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmPeak:"))


async def test_workers_killed_while_idle_never_get_a_job(runner: LocalExecutor) -> None:
    """The OOM killer may kill idle workers: the next calls (general and quick) must not see it."""
    await runner.run(STATUS)
    before = runner.pids()
    assert len(before) == 2  # workers=1, plus the quick worker
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    wait_dead(before)
    # Replaced without waiting for a call: the pool stays whole (and warm). A killed worker's main thread is a
    # zombie before its other threads have exited, and only then can it be reaped: until then runner.pids() still
    # lists it, so wait for the replacements, not for any two pids.
    for _ in range(300):  # replacements import GDAL; allow 15 s on a loaded machine
        if len(runner.pids()) == 2 and not set(runner.pids()) & set(before):
            break
        await asyncio.sleep(0.05)
    after = runner.pids()
    assert len(after) == 2 and not set(after) & set(before), "the pool shrank"
    info = await runner.run(INFO(RGB))
    assert info.count == 3
    status = await runner.run(STATUS, quick=True)
    assert status["pid"] in after and set(runner.pids()) == set(after)
    # Killed and called at once (the deaths may not be visible yet): still no error, on both kinds of call.
    for pid in after:
        os.kill(pid, signal.SIGKILL)
    general, quick = await asyncio.gather(runner.run(STATUS), runner.run(STATUS, quick=True))
    assert {general["pid"], quick["pid"]}.isdisjoint(after)
    assert len(runner.pids()) == 2 and not set(runner.pids()) & set(after)


async def test_a_call_right_after_every_idle_worker_was_killed_runs_on_a_fresh_one(runner: LocalExecutor) -> None:
    """Every worker killed at once and one call at once: it may be handed each dead worker in turn (they look
    alive until their threads have exited); it still runs, on a replacement, without an error."""
    for _ in range(3):
        await runner.run(STATUS, quick=True)
        killed = runner.pids()
        assert len(killed) == 2
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        status = await runner.run(STATUS)
        assert status["pid"] not in killed and status["pid"] in runner.pids()


async def test_worker_dying_before_it_takes_the_job_is_replaced_and_the_job_runs(runner: LocalExecutor, tmp_path: Path) -> None:
    flag = tmp_path / "killed"
    status = await runner.run(DiesOnArrival(flag=str(flag)))
    killed = int(flag.read_text())
    assert not pid_alive(killed), "the first worker was not killed: the test proves nothing"
    assert status["pid"] != killed and status["pid"] in runner.pids()
    assert len(runner.pids()) == 2


async def test_a_job_that_started_is_never_rerun_when_its_worker_dies(runner: LocalExecutor, tmp_path: Path) -> None:
    log = tmp_path / "runs"
    with pytest.raises(GdalMcpError) as e:
        await runner.run(DiesAfterStart(log=str(log)))
    assert e.value.code == "internal-error" and "SIGKILL" in e.value.message
    await asyncio.sleep(0.5)
    assert len(log.read_text().split()) == 1, "the job ran twice"
    assert runner.busy_pids() == [] and len(runner.pids()) == 2


@pytest.fixture(scope="module")
def one_tile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_tile_tiff(tmp_path_factory.mktemp("tile") / "one_tile.tif", size=32768)


async def test_gdal_allocation_over_the_memory_limit_is_a_resource_limit_naming_it(one_tile: Path) -> None:
    # Reading any pixel of the raster needs its single 32768 x 32768 byte tile in memory: 1 GiB > 768 MiB.
    r = LocalExecutor(workers=1, timeout=60, max_memory=768 * MiB, worker_config={"roots": [str(one_tile.parent)]})
    try:
        with pytest.raises(GdalMcpError) as e:
            await r.run(INFO(one_tile, stats=True))
        assert e.value.code == "resource-limit", e.value.message
        assert "--max-memory 768M" in e.value.message and str(32768 * 32768) in e.value.message
        assert (await r.run(STATUS))["memory_limit"] == 768 * MiB  # the worker lives on, under its limit
    finally:
        r.close()


@pytest.mark.slow
async def test_worker_killed_near_its_memory_limit_is_a_resource_limit(big: Path) -> None:
    """A worker SIGKILLed while its job uses nearly all of its --max-memory died of memory.

    The limit is calibrated on the job itself: what it uses once its memory levels off, measured on a worker
    without a limit (and measured again if, under the limit, it needs a little more or levels off lower)."""
    cfg = {"roots": [str(big.parent), str(DATA)]}

    async def settled(r: LocalExecutor) -> tuple[asyncio.Task[Any], int]:
        task = asyncio.create_task(r.run(INFO(big, stats=True)))
        pid = await busy_pid(r)
        await asyncio.sleep(3.0)  # its memory levels off within a second or two, even on a loaded machine
        return task, pid

    probe = LocalExecutor(workers=1, timeout=60, worker_config=cfg)
    try:
        task, pid = await settled(probe)
        used = vm_peak(pid)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        probe.close()
    for _ in range(3):
        limit = int(used / 0.88)  # within NEAR_LIMIT of it, with room for the job to go on
        r = LocalExecutor(workers=1, timeout=60, max_memory=limit, worker_config=cfg)
        try:
            task, pid = await settled(r)
            peak = vm_peak(pid)
            if task.done() or peak < NEAR_LIMIT * limit:  # calibrate again
                used = max(peak, int(used * 1.05)) if task.done() else peak
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                continue
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(GdalMcpError) as e:
                await task
            assert e.value.code == "resource-limit", e.value.message
            assert f"--max-memory {format_size(limit)}" in e.value.message and "SIGKILL" in e.value.message
            assert pid not in r.pids() and (await r.run(INFO(RGB))).count == 3  # the pool recovered
            return
        finally:
            r.close()
    pytest.fail("could not calibrate a memory limit the job runs near")


async def test_death_by_the_oom_killer_is_a_resource_limit(
    runner: LocalExecutor, big: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel's OOM-kill counter (/proc/vmstat oom_kill) is simulated: this machine is not run out of memory.
    counter = itertools.count(7)
    monkeypatch.setattr(runner_module, "_oom_kills", lambda: next(counter))
    task = asyncio.create_task(runner.run(INFO(big, stats=True)))
    pid = await busy_pid(runner)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(GdalMcpError) as e:
        await task
    assert e.value.code == "resource-limit" and "out-of-memory killer" in e.value.message
    assert "--max-memory 2G" in e.value.message
    monkeypatch.undo()
    assert (await runner.run(INFO(RGB))).count == 3


def test_oom_kill_counter_is_read_from_the_kernel() -> None:
    with open("/proc/vmstat") as fh:
        line = next((x for x in fh if x.startswith("oom_kill ")), None)
    if line is None:
        pytest.skip("this kernel has no oom_kill counter in /proc/vmstat (Linux < 4.13)")
    assert runner_module._oom_kills() == int(line.split()[1])


async def test_output_over_the_file_size_limit_is_a_resource_limit(tmp_path: Path) -> None:
    """A worker started under `ulimit -f`: its write fails (EFBIG) when the output reaches the limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    r = LocalExecutor(workers=1, timeout=60, worker_config={"roots": [str(DATA), str(tmp_path)]})
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))  # inherited by the workers spawned now
    try:
        r.start()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    try:
        # RGB.byte.tif holds 3 x 791 x 718 bytes (1.7 MB) of pixels: uncompressed, far over 256 KiB.
        with pytest.raises(GdalMcpError) as e:
            await r.run(jobs.ConvertRasterJob(src=str(RGB), dst=str(tmp_path / "big.tif")))
        assert e.value.code == "resource-limit", e.value.message
        assert e.value.message.startswith(
            "the output reached the largest file size allowed (File too large, the "
            f"file-size limit ulimit -f is 256K) while writing {tmp_path / 'big.tif'}"
        )
        assert list(tmp_path.iterdir()) == []  # the partial output is removed
        assert (await r.run(INFO(RGB))).count == 3
    finally:
        r.close()


async def test_the_rest_of_the_pool_starts_after_the_first_answer_or_when_every_worker_is_busy(big: Path) -> None:
    """Cold start (performance): `start(1)` spawns one worker (the server's first answer needs only it); the rest
    import GDAL once that answer is out, or as soon as a job finds every started worker busy."""
    config = {"roots": [str(big.parent), str(DATA)]}
    first = LocalExecutor(workers=2, timeout=60, worker_config=config)
    try:
        first.start(1)
        first.start(1)  # the CLI's early start and the lifespan's: one worker, not two
        assert len(first.pids()) == 1
        assert (await first.run(STATUS))["pid"] in first.pids()
        assert len(first.pids()) == 3  # two workers and the spare for quick calls
    finally:
        first.close()
    busy = LocalExecutor(workers=2, timeout=60, worker_config=config)
    try:
        busy.start(1)
        long = asyncio.create_task(busy.run(INFO(str(big), stats=True)))
        await busy_pid(busy)
        assert len(busy.pids()) == 1
        assert (await busy.run(STATUS))["pid"] in busy.pids()  # answered by a worker started for it
        assert len(busy.pids()) == 3 and not long.done()
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
    finally:
        busy.close()
