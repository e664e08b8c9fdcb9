"""The Dask executor on a real LocalCluster of worker processes (2 workers, 1 thread each): metadata and write
jobs, tiles on the cluster, progress, cancel (cooperative and by restarting a stuck worker), timeout, a killed
worker, a job never run twice, the workspace probe, and the flags that choose the executor."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio

pytest.importorskip("distributed")  # the dask extra (in the dev group); the local executor needs none of this

from gdal_mcp import jobs  # noqa: E402
from gdal_mcp.cli import build_parser, settings_from_args  # noqa: E402
from gdal_mcp.config import Settings  # noqa: E402
from gdal_mcp.errors import GdalMcpError  # noqa: E402
from gdal_mcp.execution.dask_executor import GRACE, DaskExecutor  # noqa: E402
from gdal_mcp.execution.local import MEMORY_SAMPLE_INTERVAL  # noqa: E402
from gdal_mcp.sandbox import TMP_PREFIX  # noqa: E402
from gdal_mcp.server.app import App  # noqa: E402
from tests.faults import DiesAfterStart, MiB, one_tile_tiff, pid_alive  # noqa: E402
from tests.helpers import DATA, huge_vrt  # noqa: E402

GiB = 1024**3


@pytest.fixture(scope="module")
def dask_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dask_ws")
    shutil.copytree(DATA / "raster", root / "raster")
    huge_vrt(root / "huge.vrt", size=100_000)
    return root


@pytest.fixture(scope="module")
def runner(dask_ws: Path) -> Iterator[DaskExecutor]:
    r = DaskExecutor(scheduler="local:2", timeout=60, max_memory=2 * GiB, worker_config={"roots": [str(dask_ws)]})
    r.start()
    yield r
    r.close()


@pytest.fixture(scope="module")
def address(runner: DaskExecutor) -> str:
    return str(runner._cluster.scheduler_address)


@pytest.fixture(scope="module")
def app(dask_ws: Path, address: str) -> Iterator[App]:
    """A server's App on the same cluster, through its scheduler address (a second client, probed again)."""
    a = App(Settings(workspaces=(dask_ws,), executor="dask", dask_scheduler=address, timeout=60, confirm="never"))
    a.executor.start()
    yield a
    a.executor.close()


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(f"{TMP_PREFIX}*"))


async def busy_pid(runner: DaskExecutor) -> int:
    for _ in range(400):
        await asyncio.sleep(0.05)
        busy = runner.busy_pids()
        if busy:
            return busy[0]
    raise AssertionError("no worker took the job")


async def settled(runner: DaskExecutor, count: int = 2) -> list[int]:
    """The worker pids once `count` workers run (a nanny restarts a killed worker within seconds alone on the machine;
    more than 30 s was seen with four test processes on 2 cores: a worker starting imports Dask and GDAL)."""
    pids: list[int] = []
    for _ in range(900):
        pids = await asyncio.to_thread(runner.pids)
        if len(pids) == count:
            return pids
        await asyncio.sleep(0.1)
    info = await asyncio.to_thread(runner._client.scheduler_info)
    raise AssertionError(
        f"the cluster did not get back to {count} workers: pids {pids}, scheduler: "
        f"{ {a: w.get('status') for a, w in info['workers'].items()} }"
    )


# ----- choosing the executor --------------------------------------------------------------------------------
def test_flags_choose_the_executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parse = build_parser().parse_args
    s = settings_from_args(parse(["--workspace", str(tmp_path)]))
    assert (s.executor, s.dask_scheduler) == ("local", None)
    s = settings_from_args(parse(["--workspace", str(tmp_path), "--executor", "dask", "--dask-scheduler", "local:3"]))
    assert (s.executor, s.dask_scheduler) == ("dask", "local:3")
    with pytest.raises(ValueError, match="--dask-scheduler"):
        settings_from_args(parse(["--workspace", str(tmp_path), "--executor", "dask"]))
    with pytest.raises(ValueError, match="local:N"):
        settings_from_args(parse(["--workspace", str(tmp_path), "--executor", "dask", "--dask-scheduler", "local:0"]))
    monkeypatch.setenv("GDAL_MCP_EXECUTOR", "dask")
    monkeypatch.setenv("GDAL_MCP_DASK_SCHEDULER", "tcp://10.0.0.5:8786")
    s = settings_from_args(build_parser().parse_args(["--workspace", str(tmp_path)]))
    assert (s.executor, s.dask_scheduler) == ("dask", "tcp://10.0.0.5:8786")


def test_executor_dask_without_a_scheduler_is_a_clear_cli_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    out = subprocess.run(
        [sys.executable, "-m", "gdal_mcp", "--workspace", str(tmp_path), "--executor", "dask"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "--executor dask needs --dask-scheduler" in out.stderr


def test_the_local_executor_never_imports_distributed(tmp_path: Path) -> None:
    code = (
        "import sys; from gdal_mcp.config import Settings; from gdal_mcp.server.build import build_server; "
        f"build_server(Settings(workspaces=({str(tmp_path)!r},))); "
        "print([m for m in ('distributed', 'dask') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", f"a local server imports {out.stdout.strip()}: stdio users pay its start-up"


def test_jobs_name_the_paths_a_worker_checks_again() -> None:
    job = jobs.CalcJob(inputs={"a": "/w/a.tif", "b": "/w/b.tif"}, expression="a + b", dst="/w/.tmp/out.tif")
    assert job.paths() == ["/w/a.tif", "/w/b.tif", "/w/.tmp/out.tif"]
    job2 = jobs.ZonalJob(raster="/w/r.tif", zones="/w/z.gpkg")
    assert job2.paths() == ["/w/r.tif", "/w/z.gpkg"]
    assert jobs.MosaicJob(inputs=["/w/1.tif", "/w/2.tif"], dst="/w/m.tif").paths() == ["/w/1.tif", "/w/2.tif", "/w/m.tif"]


# ----- jobs on the cluster ---------------------------------------------------------------------------------
async def test_quick_metadata_job_runs_on_a_worker_set_up_like_ours(runner: DaskExecutor, dask_ws: Path) -> None:
    path = dask_ws / "raster" / "RGB.byte.tif"
    info = await runner.run(jobs.RasterInfoJob(path=str(path)), quick=True)
    with rasterio.open(path) as ds:
        assert (info.width, info.height, info.count) == (ds.width, ds.height, ds.count)
    status = await runner.run(jobs.WorkerStatusJob())
    assert status["pid"] in runner.pids() and status["pid"] != os.getpid()
    assert status["vrt_python"] == "NO"  # the worker plugin's GDAL environment
    assert status["memory_limit"] is None  # no address-space rlimit: Dask's nanny limits memory
    assert_workers_set_up(runner)


def _worker_settings(dask_worker: Any) -> tuple[object, object, object, object, bool]:
    """Run in a Dask worker (Client.run hands it the worker): the settings a local:N cluster gives it, and whether the
    tile modules are imported."""
    import sys

    import dask

    from gdal_mcp.execution.dask_worker import TILE_MODULES

    return (
        dask.config.get("distributed.worker.profile.enabled"),
        dask.config.get("distributed.admin.tick.interval"),
        dask.config.get("distributed.admin.system-monitor.interval"),
        dask_worker.memory_manager.memory_monitor_interval,
        all(m in sys.modules for m in TILE_MODULES),
    )


def assert_workers_set_up(runner: DaskExecutor) -> None:
    """Every worker of the local cluster (those the nannies restarted too): no profiler, slow ticks and system
    monitor, memory sampled as often as the local pool does (LOCAL_CLUSTER_CONFIG), the tile modules imported when
    it joined (WorkerSetup); the nannies (in this process) sample their worker's memory at that pace too."""
    replies = runner._client.run(_worker_settings)
    assert len(replies) == 2
    assert set(replies.values()) == {(False, "500ms", "2s", MEMORY_SAMPLE_INTERVAL, True)}, replies
    nannies = list(runner._cluster.workers.values())
    assert len(nannies) == 2
    assert {n.memory_manager.memory_monitor_interval for n in nannies} == {MEMORY_SAMPLE_INTERVAL}
    assert {n.periodic_callbacks["memory_monitor"].callback_time for n in nannies} == {MEMORY_SAMPLE_INTERVAL * 1000}


async def test_paths_are_checked_again_on_the_worker(runner: DaskExecutor) -> None:
    # The server's sandbox would never build this job; the worker refuses it on its own.
    with pytest.raises(GdalMcpError) as e:
        await runner.run(jobs.RasterInfoJob(path="/etc/hostname"))
    assert e.value.code == "out-of-root"


async def test_engine_errors_keep_their_code(runner: DaskExecutor, dask_ws: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        await runner.run(jobs.RasterInfoJob(path=str(dask_ws / "raster" / "RGB.byte.tif"), band=7))
    assert e.value.code == "invalid-argument" and "3 band(s)" in e.value.message


def _small_tiles(on: bool) -> None:
    """On a worker: tiles of 128 px (RGB.byte.tif reprojected becomes dozens of tiles), or the real plan back."""
    from gdal_mcp.engine import tiles

    original = getattr(tiles, "_original_plan", None) or tiles.plan
    tiles._original_plan = original  # type: ignore[attr-defined]
    tiles.plan = functools.partial(original, tile_bytes=1) if on else original
    tiles.TILE_ALIGN = 128 if on else 512


@pytest.fixture
def small_tiles(runner: DaskExecutor, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from gdal_mcp.engine import tiles

    runner._client.run(_small_tiles, True)
    monkeypatch.setattr(tiles, "TILE_ALIGN", 128)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=1))
    yield
    runner._client.run(_small_tiles, False)


async def test_tiled_write_job_committed_by_app_pixel_identical_to_local(
    app: App, dask_ws: Path, tmp_path: Path, small_tiles: None
) -> None:
    from gdal_mcp.engine.raster.warp import reproject

    src = str(dask_ws / "raster" / "RGB.byte.tif")
    target = app.sandbox.resolve_output("out/rgb_4326.tif")
    job = jobs.ReprojectRasterJob(
        src=src, dst=str(target.tmp_path), dst_crs="EPSG:4326", options={"COMPRESS": "DEFLATE", "TILED": "YES"}
    )
    seen: list[str] = []

    class Ctx:
        async def report_progress(self, progress: float, total: float, message: str) -> None:
            seen.append(message)

    summary, _ = await app.execute(job, ctx=Ctx(), output=target)
    out = dask_ws / "out" / "rgb_4326.tif"
    assert summary.width > 0 and out.is_file() and leftovers(dask_ws) == []
    tiles_done = [m for m in seen if m.startswith("warped ") and m.endswith(" tiles")]
    total = int(tiles_done[-1].split("/")[1].split()[0])
    assert total > 20, f"the job ran in {total} tiles: the cluster path was not exercised"
    # The same engine function run here, one tile after another, with the same plan: the same pixels.
    reference = tmp_path / "local.tif"
    reproject(src, str(reference), dst_crs="EPSG:4326", options={"COMPRESS": "DEFLATE", "TILED": "YES"})
    with rasterio.open(out) as a, rasterio.open(reference) as b:
        assert (a.crs, a.transform, a.nodata, a.shape) == (b.crs, b.transform, b.nodata, b.shape)
        assert np.array_equal(a.read(), b.read())


def _spill_bytes(n: int) -> int:
    """On a worker: set SPILL_BYTES (the size above which tile arrays travel as files), return the old value."""
    from gdal_mcp.execution import dask_worker

    old, dask_worker.SPILL_BYTES = dask_worker.SPILL_BYTES, n
    return old


def _spilled() -> int:
    from gdal_mcp.execution import dask_worker

    return dask_worker.spilled[0]


async def test_tile_arrays_travel_as_files_and_none_is_left(
    app: App, runner: DaskExecutor, dask_ws: Path, tmp_path: Path, small_tiles: None
) -> None:
    """Every tile array spilled to a .npy in the job's attempt directory (SPILL_BYTES 0): the same pixels as a local
    run, every file read back and removed, nothing left beside the committed output."""
    from gdal_mcp.engine.raster.warp import reproject

    src = str(dask_ws / "raster" / "RGB.byte.tif")
    target = app.sandbox.resolve_output("out/rgb_spilled.tif")
    options = {"TILED": "YES", "COMPRESS": "DEFLATE"}  # compressed: assembled by the job, not written raw
    job = jobs.ReprojectRasterJob(src=src, dst=str(target.tmp_path), dst_crs="EPSG:4326", options=options)
    before = sum(runner._client.run(_spilled).values())
    old = runner._client.run(_spill_bytes, 0)
    try:
        await app.execute(job, output=target)
    finally:
        runner._client.run(_spill_bytes, next(iter(old.values())))
    out = dask_ws / "out" / "rgb_spilled.tif"
    assert sum(runner._client.run(_spilled).values()) - before > 20, "the tiles did not travel as files"
    assert out.is_file() and leftovers(dask_ws) == []
    assert not [p for p in dask_ws.rglob("*.npy")], "a spilled tile was left behind"
    reproject(src, str(tmp_path / "local.tif"), dst_crs="EPSG:4326", options=options)
    with rasterio.open(out) as a, rasterio.open(tmp_path / "local.tif") as b:
        assert np.array_equal(a.read(), b.read())


async def test_uncompressed_outputs_are_written_by_the_tiles_on_the_workers(
    app: App, runner: DaskExecutor, dask_ws: Path, tmp_path: Path, small_tiles: None
) -> None:
    """A plain GTiff (GDAL's default striped layout) is written by the tile tasks where they ran, in the background,
    flushed on every worker at the end (Client.run): no tile array comes back to the job (none spilled, even with
    SPILL_BYTES 0), the pixels are the local run's, and nothing is left beside the committed output."""
    from gdal_mcp.engine.raster.warp import reproject

    src = str(dask_ws / "raster" / "RGB.byte.tif")
    target = app.sandbox.resolve_output("out/rgb_raw.tif")
    job = jobs.ReprojectRasterJob(src=src, dst=str(target.tmp_path), dst_crs="EPSG:4326", nodata=0)
    before = sum(runner._client.run(_spilled).values())
    old = runner._client.run(_spill_bytes, 0)
    seen: list[str] = []

    class Ctx:
        async def report_progress(self, progress: float, total: float, message: str) -> None:
            seen.append(message)

    try:
        await app.execute(job, ctx=Ctx(), output=target)
    finally:
        runner._client.run(_spill_bytes, next(iter(old.values())))
    assert sum(runner._client.run(_spilled).values()) == before, "tile arrays came back to the job"
    done = [m for m in seen if m.startswith("warped ") and m.endswith(" tiles")]
    assert int(done[-1].split("/")[1].split()[0]) > 3, done[-1:]
    out = dask_ws / "out" / "rgb_raw.tif"
    assert out.is_file() and leftovers(dask_ws) == []
    reproject(src, str(tmp_path / "local.tif"), dst_crs="EPSG:4326", nodata=0)
    with rasterio.open(out) as a, rasterio.open(tmp_path / "local.tif") as b:
        assert (a.nodata, a.transform, a.block_shapes) == (b.nodata, b.transform, b.block_shapes)
        assert np.array_equal(a.read(), b.read())


async def test_reprojected_margins_of_an_input_without_nodata_match_the_local_run(
    runner: DaskExecutor, dask_ws: Path, tmp_path: Path, small_tiles: None
) -> None:
    """The nodata value chosen for the margins of an input without one (a scan of its values in tiles, run on the
    workers) and the pixels: those of a local run, whatever the order the tiles came back in."""
    from gdal_mcp.engine.raster.warp import reproject

    (dask_ws / "tiled").mkdir(exist_ok=True)
    src = dask_ws / "tiled" / f"{tmp_path.name}_plain.tif"
    with rasterio.open(dask_ws / "raster" / "RGB.byte.tif") as rgb:
        profile = {**rgb.profile, "nodata": None}
        data = np.where(rgb.read() == 250, 249, rgb.read())
    data[:, 100:110, 300:310] = 254
    data[:, :8, :8] = 255  # in the first tile only (the collar, 0 else): the others are scanned again in full
    expected = max(set(range(256)) - set(np.unique(data).tolist()))
    assert expected == 250
    with rasterio.open(src, "w", **profile) as out:
        out.write(data)
    on_cluster = dask_ws / "tiled" / f"{tmp_path.name}_warped.tif"
    summary, warnings = await runner.run(jobs.ReprojectRasterJob(src=str(src), dst=str(on_cluster), dst_crs="EPSG:4326"))
    assert summary.nodata == 250.0 and any("250" in w and "declared nodata" in w for w in warnings), warnings
    reproject(str(src), str(tmp_path / "local.tif"), dst_crs="EPSG:4326")
    with rasterio.open(on_cluster) as a, rasterio.open(tmp_path / "local.tif") as b:
        assert (a.nodata, a.transform, a.shape) == (b.nodata, b.transform, b.shape)
        assert np.array_equal(a.read(), b.read()) and (a.read() == 250).any()


@pytest.mark.parametrize(
    "make",
    [
        lambda ws, dst: jobs.TerrainJob(src=str(ws / "raster" / "jacksboro_dem.tif"), dst=dst, product="hillshade"),
        lambda ws, dst: jobs.CalcJob(
            inputs={"a": str(ws / "raster" / "RGB.byte.tif")}, expression="a * 2 + 1", dst=dst, output_type="Float32"
        ),
        lambda ws, dst: jobs.MosaicJob(inputs=[str(ws / "raster" / f"rgb{i}.tif") for i in (1, 2, 3, 4)], dst=dst),
    ],
    ids=["terrain", "calc", "mosaic"],
)
async def test_other_tiled_jobs_on_the_cluster_match_the_local_run(
    runner: DaskExecutor, dask_ws: Path, tmp_path: Path, small_tiles: None, make: Any
) -> None:
    import importlib

    (dask_ws / "tiled").mkdir(exist_ok=True)
    on_cluster = dask_ws / "tiled" / f"{tmp_path.name}.tif"
    job = make(dask_ws, str(on_cluster))
    seen: list[str] = []

    async def sink(fraction: float, message: str) -> None:
        seen.append(message)

    await runner.run(job, progress=sink)
    assert any(m.endswith(" tiles") and int(m.split("/")[-1].split()[0]) > 1 for m in seen), seen[-3:]
    module, _, name = job.FUNC.partition(":")
    here = make(dask_ws, str(tmp_path / "local.tif"))
    getattr(importlib.import_module(module), name)(**here.kwargs(), progress=lambda *a: None)
    with rasterio.open(on_cluster) as a, rasterio.open(tmp_path / "local.tif") as b:
        assert (a.crs, a.transform, a.shape, a.dtypes) == (b.crs, b.transform, b.shape, b.dtypes)
        assert np.array_equal(a.read(), b.read(), equal_nan=True)


def _tile_sides(align: int, side: int) -> tuple[int, int]:
    """On a worker (and here): tiles of at most `side` px aligned to `align`, whatever their byte budget (the
    reductions' too); the old values back."""
    from gdal_mcp.engine import tiles

    old = tiles.TILE_ALIGN, tiles.MAX_TILE_SIDE
    tiles.TILE_ALIGN, tiles.MAX_TILE_SIDE = align, side
    return old


async def test_thresholds_and_area_weights_on_the_cluster_match_the_local_run(
    runner: DaskExecutor, dask_ws: Path, tmp_path: Path
) -> None:
    """raster_stats (thresholds, weights="area": float sums merged in tile order) and zonal_stats thresholds over
    64-px tiles spread on the cluster's workers: the local run's numbers to the last bit, the counts numpy's."""
    import pyogrio.raw
    import shapely
    from affine import Affine

    from gdal_mcp.engine.features.zonal import zonal_stats
    from gdal_mcp.engine.raster.stats import raster_stats
    from tests.engine.raster.test_stats_thresholds import geod_row_areas

    (dask_ws / "thr").mkdir(exist_ok=True)
    rng = np.random.default_rng(13)
    a = (rng.random((300, 260)) * 100).astype("float32")
    a[rng.random(a.shape) < 0.05] = -1
    raster = dask_ws / "thr" / "lonlat.tif"
    with rasterio.open(
        raster, "w", driver="GTiff", width=260, height=300, count=1, dtype="float32", nodata=-1, crs="EPSG:4326",
        transform=Affine(0.25, 0, -20, 0, -0.25, 70), tiled=True, blockxsize=64, blockysize=64,
    ) as ds:  # fmt: skip
        ds.write(a, 1)
    zones = dask_ws / "thr" / "zones.gpkg"
    pyogrio.raw.write(
        str(zones), shapely.to_wkb(np.asarray([shapely.box(-15.1, 10.1, 40.3, 65.2)])), [np.arange(1)], ["n"],
        geometry_type="Polygon", crs="EPSG:4326",
    )  # fmt: skip
    stats_job = jobs.RasterStatsJob(path=str(raster), thresholds=[25.0, 50.0], weights="area", percentiles=[10, 50, 90])
    zonal_job = jobs.ZonalJob(raster=str(raster), zones=str(zones), stats=["count", "mean"], thresholds=[50.0])
    seen: list[str] = []

    async def sink(fraction: float, message: str) -> None:
        seen.append(message)

    old = runner._client.run(_tile_sides, 64, 64)
    here = _tile_sides(64, 64)
    try:
        on_cluster = await runner.run(stats_job, progress=sink)
        zonal_cluster, _ = await runner.run(zonal_job)
        local = raster_stats(**stats_job.kwargs())
        zonal_local, _ = zonal_stats(**zonal_job.kwargs())
    finally:
        runner._client.run(_tile_sides, *next(iter(old.values())))
        _tile_sides(*here)
    assert any(m.endswith("tile 25/25") for m in seen), seen[-3:]  # 5 x 5 tiles of 64 px
    assert on_cluster == local and zonal_cluster.rows == zonal_local.rows
    valid = a != -1
    assert [t.above.count for t in on_cluster.bands[0].thresholds] == [int((valid & (a > t)).sum()) for t in (25, 50)]
    weights = np.broadcast_to(geod_row_areas(Affine(0.25, 0, -20, 0, -0.25, 70), 300)[:, None], a.shape)[valid]
    assert on_cluster.bands[0].mean == pytest.approx(np.average(a[valid].astype("float64"), weights=weights), rel=1e-7)


async def test_progress_messages_arrive(runner: DaskExecutor, dask_ws: Path) -> None:
    vrt = huge_vrt(dask_ws / "medium.vrt", size=12_000)
    seen: list[tuple[float, str]] = []

    async def sink(fraction: float, message: str) -> None:
        seen.append((fraction, message))

    await runner.run(jobs.RasterInfoJob(path=str(vrt), stats=True), progress=sink)
    fractions = [f for f, _ in seen]
    assert len(seen) >= 2 and fractions == sorted(fractions) and fractions[-1] == 1.0
    assert all("window" in m for _, m in seen), seen[:3]


# ----- stopping jobs ---------------------------------------------------------------------------------------
BIG_CONVERT = {"creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"}}


async def test_cancel_stops_a_long_job_between_windows_and_leaves_nothing(app: App, runner: DaskExecutor, dask_ws: Path) -> None:
    pids = await settled(runner)
    target = app.sandbox.resolve_output("out/cancelled.tif")
    job = jobs.ConvertRasterJob(src=str(dask_ws / "huge.vrt"), dst=str(target.tmp_path), options=BIG_CONVERT["creation_options"])
    progressed = asyncio.Event()

    class Ctx:
        async def report_progress(self, progress: float, total: float, message: str) -> None:
            progressed.set()

    task = asyncio.create_task(app.execute(job, ctx=Ctx(), output=target))
    await asyncio.wait_for(progressed.wait(), 60)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t0 < GRACE, "the job did not stop at its next progress call"
    assert leftovers(dask_ws) == [] and not (dask_ws / "out" / "cancelled.tif").exists()
    assert await asyncio.to_thread(runner.pids) == pids, "a worker was restarted: the cancel was not cooperative"
    info = await runner.run(jobs.RasterInfoJob(path=str(dask_ws / "raster" / "slope.tif")))
    assert info.width == 84


def _running_tiles() -> int:
    """On a worker: how many tile tasks of gdal-mcp jobs run in this process now."""
    from gdal_mcp.execution import dask_worker

    return sum(dask_worker._stops.running.values())


async def running_tiles(runner: DaskExecutor) -> int:
    return sum((await asyncio.to_thread(runner._client.run, _running_tiles)).values())


async def test_cancel_stops_the_running_tiles_on_every_worker_and_leaves_nothing(
    app: App, runner: DaskExecutor, dask_ws: Path
) -> None:
    """A reproject whose tiles each average 256 source pixels into every output pixel (a tile: minutes of one
    GDAL read, were it read at once): cancelled while its tiles run on both workers, the tiles end within a second
    or so (counted on the workers: no tile task of the job runs any more), no worker is restarted, nothing is left."""
    pids = await settled(runner)
    side = 16 * 3072  # the output: 3072^2 at 16 x the pixel size, tiles of 2560^2 (Byte), 4 tiles
    vrt = dask_ws / "slow_tiles.vrt"
    vrt.write_text(
        f'<VRTDataset rasterXSize="{side}" rasterYSize="{side}"><SRS>EPSG:32618</SRS>'
        "<GeoTransform>500000, 10, 0, 4500000, 0, -10</GeoTransform>"
        '<VRTRasterBand dataType="Byte" band="1"/></VRTDataset>'
    )
    target = app.sandbox.resolve_output("out/cancelled_tiles.tif")
    job = jobs.ReprojectRasterJob(
        src=str(vrt), dst=str(target.tmp_path), resolution=160.0, resampling="average", options=BIG_CONVERT["creation_options"]
    )
    task = asyncio.create_task(app.execute(job, output=target))
    for _ in range(600):
        if await running_tiles(runner) >= 2:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the job's tiles did not start on both workers")
    await asyncio.sleep(0.5)  # well inside their first tiles
    assert await running_tiles(runner) >= 2 and not task.done()
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    while await running_tiles(runner) and time.monotonic() - t0 < 30:
        await asyncio.sleep(0.05)
    stopped = time.monotonic() - t0
    # by themselves, before the server's grace for a stuck job ran out (1-2 s on an idle machine, 2.5 s seen loaded)
    assert stopped < GRACE, f"the cancelled job's tiles ran on for {stopped:.1f} s"
    assert leftovers(dask_ws) == [] and not (dask_ws / "out" / "cancelled_tiles.tif").exists()
    assert await asyncio.to_thread(runner.pids) == pids, "a worker was restarted: the tiles did not stop by themselves"
    info = await runner.run(jobs.RasterInfoJob(path=str(dask_ws / "raster" / "slope.tif")))
    assert info.width == 84


@pytest.mark.slow
async def test_a_stuck_job_gets_its_worker_restarted(app: App, runner: DaskExecutor, dask_ws: Path) -> None:
    await settled(runner)
    # COG from a plain source is one GDAL CreateCopy call: no progress call, so no cancel check, until it ends.
    target = app.sandbox.resolve_output("out/stuck.tif")
    job = jobs.ConvertRasterJob(src=str(dask_ws / "huge.vrt"), dst=str(target.tmp_path), format="COG")
    task = asyncio.create_task(app.execute(job, output=target))
    pid = await busy_pid(app.executor)  # type: ignore[arg-type]
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    elapsed = time.monotonic() - t0
    assert GRACE <= elapsed < GRACE + 20
    assert not pid_alive(pid), "the stuck worker still runs"
    assert leftovers(dask_ws) == [] and not (dask_ws / "out" / "stuck.tif").exists()
    await settled(runner)
    assert (await runner.run(jobs.RasterInfoJob(path=str(dask_ws / "raster" / "slope.tif")))).width == 84
    assert_workers_set_up(runner)  # the restarted worker too


async def test_timeout_stops_the_job(runner: DaskExecutor, dask_ws: Path) -> None:
    await settled(runner)
    t0 = time.monotonic()
    with pytest.raises(GdalMcpError) as e:
        await runner.run(jobs.RasterInfoJob(path=str(dask_ws / "huge.vrt"), stats=True), timeout=1.0)
    assert e.value.code == "timeout" and "--timeout" in e.value.message
    assert time.monotonic() - t0 < 1.0 + GRACE
    assert runner.busy_pids() == []


async def test_killed_worker_mid_job_is_a_clear_error_and_the_next_job_runs(runner: DaskExecutor, dask_ws: Path) -> None:
    await settled(runner)
    task = asyncio.create_task(runner.run(jobs.RasterInfoJob(path=str(dask_ws / "huge.vrt"), stats=True)))
    pid = await busy_pid(runner)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(GdalMcpError) as e:
        await asyncio.wait_for(task, 30)
    assert e.value.code == "internal-error"
    assert "Dask worker tcp://" in e.value.message and f"pid {pid}" in e.value.message and "retry" in e.value.message
    info = await runner.run(jobs.RasterInfoJob(path=str(dask_ws / "raster" / "slope.tif")))
    assert info.width == 84
    await settled(runner)


async def test_a_job_whose_worker_died_is_never_run_again(runner: DaskExecutor, dask_ws: Path) -> None:
    await settled(runner)
    log = dask_ws / f"runs-{uuid.uuid4().hex}"  # in the workspace: a confined worker writes nowhere else
    with pytest.raises(GdalMcpError) as e:
        await asyncio.wait_for(runner.run(DiesAfterStart(log=str(log))), 60)
    assert e.value.code == "internal-error" and "died" in e.value.message
    await asyncio.sleep(1.0)  # Dask hands the task to the other worker: that attempt must refuse to run
    assert len(log.read_text().split()) == 1, "the job ran twice"
    log.unlink()
    await settled(runner)


@pytest.mark.slow
async def test_a_worker_its_nanny_stops_for_memory_gives_a_resource_limit(tmp_path: Path) -> None:
    # Reading any pixel of this raster needs its single 32768 x 32768 byte tile in memory: 1 GiB > 640 MiB.
    tile = one_tile_tiff(tmp_path / "one_tile.tif", size=32768)
    r = DaskExecutor(scheduler="local:1", timeout=60, max_memory=640 * MiB, worker_config={"roots": [str(tmp_path)]})
    await asyncio.to_thread(r.start)
    try:
        with pytest.raises(GdalMcpError) as e:
            await asyncio.wait_for(r.run(jobs.RasterInfoJob(path=str(tile), stats=True)), 60)
        assert e.value.code == "resource-limit", e.value.message
        assert "640M per worker" in e.value.message and "tcp://" in e.value.message
        status = await asyncio.wait_for(r.run(jobs.WorkerStatusJob()), 60)  # the nanny started a fresh worker
        assert status["pid"] in await asyncio.to_thread(r.pids)
    finally:
        await asyncio.to_thread(r.close)


# ----- start-up probe --------------------------------------------------------------------------------------
def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(
    not _unshare_works(),
    reason="needs `unshare -m` (root or user namespaces) to start a worker that sees another file system at the workspace's path",
)
def test_probe_refuses_workers_that_do_not_see_the_workspace(tmp_path: Path) -> None:
    """A real blind worker: started in its own mount namespace with an empty tmpfs mounted over the workspace
    (what a worker without the shared mount sees: a directory of the same name, other contents)."""
    from distributed import LocalCluster

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("server side")
    with LocalCluster(
        n_workers=0,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
    ) as cluster:
        worker = subprocess.Popen(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                f'mount -t tmpfs none "{ws}" && exec "$0" -m distributed.cli.dask_worker '
                f'"$1" --nthreads 1 --no-nanny --no-dashboard --name blind',
                sys.executable,
                cluster.scheduler_address,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            runner = DaskExecutor(scheduler=cluster.scheduler_address, worker_config={"roots": [str(ws)]})
            with pytest.raises(ValueError) as e:
                runner.start()
            message = str(e.value)
            assert "cannot see the workspace" in message and str(ws) in message
            assert "worker tcp://" in message and "same path" in message
            assert list(ws.iterdir()) == [ws / "a.txt"], "the probe file was left behind"
            runner.close()
        finally:
            worker.kill()  # the worker itself (unshare and sh exec it; no nanny)
            worker.wait(10)


def test_probe_of_a_workspace_the_server_cannot_write_compares_listings(tmp_path: Path) -> None:
    from gdal_mcp.execution.dask_worker import listing, probe

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "dem.tif").write_bytes(b"x")
    (tmp_path / "b").mkdir()
    expected = {str(tmp_path / "a"): listing(str(tmp_path / "a"))}
    assert probe(expected) == []
    (tmp_path / "a" / "dem.tif").rename(tmp_path / "b" / "dem.tif")  # what a worker with another mount sees
    assert probe(expected) == [f"{tmp_path / 'a'}: holds other content (a different file system is mounted at that path)"]
    assert "No such file" in probe({str(tmp_path / "gone"): "token"})[0]


def test_unreachable_scheduler_is_a_clear_start_up_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gdal_mcp.execution import dask_executor as dask_runner

    monkeypatch.setattr(dask_runner, "CONNECT_TIMEOUT", 2.0)
    runner = DaskExecutor(scheduler="tcp://127.0.0.1:9", worker_config={"roots": [str(tmp_path)]})
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        runner.start()
    runner.close()


def test_a_job_waits_for_its_stopped_tiles_within_the_servers_grace() -> None:
    """After a cancel the job waits (TILE_STOP_WAIT) for its running tiles, then discards its output: both must end
    before the server's GRACE restarts the worker (a restart would cost every job on that worker)."""
    from gdal_mcp.execution import dask_executor, dask_worker

    assert dask_worker.TILE_STOP_WAIT + 1.0 <= dask_executor.GRACE
