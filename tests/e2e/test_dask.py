"""gdal-mcp on a Dask cluster of separate processes (`dask scheduler`, two `dask worker`s with nannies), over stdio,
driven by the official MCP SDK: reproject and flow accumulation (pixel-identical to the local executor's), mosaic, stats,
a cancel, and a worker killed with SIGKILL mid-job (a clear error, then the server serves the next call)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio

pytest.importorskip("distributed")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from gdal_mcp.sandbox import TMP_PREFIX  # noqa: E402
from tests.e2e.test_all_tools import server_pid  # noqa: E402
from tests.faults import children  # noqa: E402
from tests.helpers import huge_vrt, make_workspace  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A scheduler and two workers, each its own process, as a deployment would start them."""
    home = tmp_path_factory.mktemp("dask")
    scheduler_file = home / "scheduler.json"
    log = open(home / "cluster.log", "wb")  # noqa: SIM115 - closed below
    procs = [
        subprocess.Popen(
            [
                PY,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=_env(),
            start_new_session=True,
        )
    ]
    try:
        for _ in range(300):
            if scheduler_file.exists() and scheduler_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for name in ("w1", "w2"):
            procs.append(
                subprocess.Popen(
                    [
                        PY,
                        "-m",
                        "distributed.cli.dask_worker",
                        address,
                        "--nthreads",
                        "1",
                        "--memory-limit",
                        "2GiB",
                        "--no-dashboard",
                        "--name",
                        name,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=_env(),
                    start_new_session=True,
                )
            )
        yield address, procs[1:]
    finally:
        for p in procs:  # each in its own session: the group holds the nanny, its worker and resource tracker
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            p.wait(15)
        log.close()


def params(ws: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY, args=["-m", "gdal_mcp", "--workspace", str(ws), "--confirm", "never", *extra], env=_env()
    )


def worker_processes(nannies: list[subprocess.Popen[bytes]]) -> list[int]:
    """The worker processes that run tasks: the nannies' children started by multiprocessing's spawn (not its
    resource tracker)."""

    def spawned(pid: int) -> bool:
        try:
            return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    return [pid for n in nannies for pid in children(n.pid) if spawned(pid)]


def cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError):
        return 0


async def busiest(pids: list[int]) -> int:
    before = {p: cpu_ticks(p) for p in pids}
    await asyncio.sleep(0.5)
    return max(pids, key=lambda p: cpu_ticks(p) - before[p])


def leftovers(root: Path) -> list[Path]:
    return list(root.rglob(f"{TMP_PREFIX}*"))


@pytest.mark.slow
async def test_tools_on_a_dask_cluster_of_separate_processes(
    cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path
) -> None:
    address, nannies = cluster
    ws = make_workspace(tmp_path / "ws")
    huge_vrt(ws / "huge.vrt", size=100_000)
    local_ws = make_workspace(tmp_path / "local")
    reproject = {"input": "raster/RGB.byte.tif", "output": "out/rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}

    # flow accumulation: numba (pyflwdir) compiles in confined task threads, its cache in their private directory
    accumulate = {"input": "raster/jacksboro_dem.tif", "output": "out/acc.tif", "measure": "km2"}

    async with stdio_client(params(local_ws)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        r = await session.call_tool("raster_reproject", reproject)
        assert not r.is_error, r.structured_content
        r = await session.call_tool("flow_accumulation", accumulate)
        assert not r.is_error, r.structured_content

    async with (
        stdio_client(params(ws, "--executor", "dask", "--dask-scheduler", address)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()

        # raster_reproject: pixel-identical to the local executor's output
        r = await session.call_tool("raster_reproject", reproject)
        assert not r.is_error, r.structured_content
        with rasterio.open(ws / "out" / "rgb_4326.tif") as a, rasterio.open(local_ws / "out" / "rgb_4326.tif") as b:
            assert (a.crs, a.transform, a.nodata, a.shape, a.count) == (b.crs, b.transform, b.nodata, b.shape, b.count)
            assert np.array_equal(a.read(), b.read())

        # raster_mosaic: the four tiles of RGB.byte.tif give back its pixels
        r = await session.call_tool(
            "raster_mosaic", {"inputs": [f"raster/rgb{i}.tif" for i in (1, 2, 3, 4)], "output": "out/mosaic.tif"}
        )
        assert not r.is_error, r.structured_content
        with rasterio.open(ws / "out" / "mosaic.tif") as m, rasterio.open(ws / "raster" / "RGB.byte.tif") as o:
            assert m.shape == o.shape and np.array_equal(m.read(), o.read())

        r = await session.call_tool("flow_accumulation", accumulate)
        assert not r.is_error, r.structured_content
        with rasterio.open(ws / "out" / "acc.tif") as a, rasterio.open(local_ws / "out" / "acc.tif") as b:
            assert np.array_equal(a.read(), b.read())

        # raster_stats against numpy on the same pixels
        r = await session.call_tool("raster_stats", {"input": "raster/RGB.byte.tif"})
        assert not r.is_error, r.structured_content
        with rasterio.open(ws / "raster" / "RGB.byte.tif") as ds:
            data = ds.read(masked=True)
        for band, stats in zip(data, r.structured_content["bands"], strict=True):
            assert stats["valid_count"] == band.count()
            assert stats["mean"] == pytest.approx(float(band.mean()), rel=1e-12)
            assert (stats["min"], stats["max"]) == (float(band.min()), float(band.max()))

        # a cancel (the SDK sends notifications/cancelled when its read timeout passes): nothing is left
        with pytest.raises(Exception):  # noqa: B017 - the SDK's timeout error type is not part of its API
            await session.call_tool(
                "raster_convert",
                {"input": "huge.vrt", "output": "out/cancelled.tif", "creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"}},
                read_timeout_seconds=2.0,
            )
        for _ in range(100):
            if not leftovers(ws) and not (ws / "out" / "cancelled.tif").exists():
                break
            await asyncio.sleep(0.1)
        assert not leftovers(ws) and not (ws / "out" / "cancelled.tif").exists()

        # a worker killed (SIGKILL) mid-job: a clear error, and the server serves the next call
        pids = worker_processes(nannies)
        assert len(pids) == 2, pids
        call = asyncio.create_task(session.call_tool("raster_info", {"path": "huge.vrt", "stats": True}))
        await asyncio.sleep(1.0)
        victim = await busiest(pids)
        os.kill(victim, signal.SIGKILL)
        r = await asyncio.wait_for(call, 60)
        assert r.is_error
        error = r.structured_content["error"]
        assert error["code"] == "internal-error" and f"pid {victim}" in error["message"], error
        r = await session.call_tool("raster_info", {"path": "raster/slope.tif"})
        assert not r.is_error and r.structured_content["width"] == 84

        # all that ran on the cluster: the server process itself never loaded GDAL, PROJ or GEOS
        assert gdal_in(server_pid(ws)) == []


def gdal_in(pid: int) -> list[str]:
    """GDAL, PROJ and GEOS libraries (or the wheels bundling them) mapped into a process (numpy may be: Dask's
    client uses it)."""
    marks = ("libgdal", "libproj", "libgeos", "/rasterio/", "/pyogrio/", "/shapely/", "/pyproj/")
    return sorted(
        {
            line.split()[-1]
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if ".so" in line and any(m in line for m in marks)
        }
    )
