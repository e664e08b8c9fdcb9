"""Scale-out: the same raster_reproject through the server on a Dask cluster of 1 and of 2 workers (issue 14).

    .venv/bin/python -m bench.scale                          # 3 x 18300^2 uint16 (2.0 GB of pixels), local:1 vs local:2
    .venv/bin/python -m bench.scale --side 9000 --repeat 1   # a quick look
    .venv/bin/python -m bench.scale --kind smooth --workers 1,2 --local

Each configuration starts `python -m gdal_mcp --executor dask --dask-scheduler local:N` over stdio (`--local`
adds the default local worker pool as a reference) and drives it with the official `mcp` SDK: a warm-up
raster_info, then `--repeat` reprojects to EPSG:4326 (`--resampling`, default nearest; uncompressed GTiff:
striped, GDAL's default, or
tiled with `--tiled`). The wall time is the
client's. Progress notifications (one per tile, throttled to 0.2 s by the worker) split it: "tiles" runs from
the first "warped" message to the last, "assembly" from the last tile to the result (the writes still pending,
the summary, the commit), "start" from the call to the first tile (grid, queueing, the first tile); "cpu" is
the CPU time the whole machine was busy during the run (all processes and the kernel's threads; at most 2 x wall on
2 cores), "server cpu" and "workers cpu" that of the server process (which holds local:N's scheduler) and of its
worker processes, "steal" the CPU time the hypervisor took from the machine (/proc/stat). Every output is compared
with the first configuration's, pixel for pixel, after the timed runs (`--interleave`: all servers up at once, one run of each
per round). Not a test.

The machine itself is measured beside the executors (`--reference`, on by default): the same output strips
warped by the engine's `warp_tile` into memory (no server, no Dask, no writes) by one plain process, then by two
processes each taking every other strip, started together once both have opened the source. Its ratio is what
this machine gives two processes of identical tile work in that minute (a VM whose vCPUs share a host core, or a
busy host, gives less than 2x); the executors' ratio is to be read against it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import queue
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rasterio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.generate import make_warp_source

DST_CRS = "EPSG:4326"


@dataclass
class Run:
    config: str
    wall: float
    start: float
    tiles: float
    assembly: float
    tile_count: int
    digest: str
    steal: float = 0.0
    cpu: float = 0.0
    server_cpu: float = 0.0
    workers_cpu: float = 0.0


@dataclass
class Config:
    name: str
    args: list[str]
    runs: list[Run] = field(default_factory=list)


def digest(path: Path) -> str:
    """A hash of the pixels (all bands, window by window) and the grid: equal outputs, equal digests."""
    h = hashlib.sha256()
    with rasterio.open(path) as ds:
        h.update(repr((ds.width, ds.height, ds.count, ds.dtypes, tuple(ds.transform), ds.crs.to_wkt())).encode())
        for _, window in ds.block_windows(1):
            h.update(ds.read(window=window).tobytes())
    return h.hexdigest()[:16]


def cpu_times() -> tuple[float, float]:
    """CPU seconds this machine's CPUs were busy so far (user, nice, system, irq, softirq: every process and the
    kernel's own threads, such as writeback) and those the hypervisor took from them (steal), from /proc/stat;
    zeros where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:9]]
        tick = os.sysconf("SC_CLK_TCK")
        return sum(fields[i] for i in (0, 1, 2, 5, 6)) / tick, fields[7] / tick
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def tree_cpu() -> tuple[float, float]:
    """CPU seconds so far of the servers this benchmark started (the scheduler and client of local:N run in them)
    and of their descendants (the Dask workers, or the local pool's workers)."""
    import psutil

    servers = workers = 0.0
    for server in psutil.Process().children():
        for process in (server, *server.children(recursive=True)):
            try:
                t = process.cpu_times()
            except psutil.Error:
                continue
            if process is server:
                servers += t.user + t.system
            else:
                workers += t.user + t.system
    return servers, workers


async def reproject(
    config: Config, session: ClientSession, workdir: Path, source: str, i: int, tiled: bool, resampling: str
) -> Path:
    output = workdir / f"scale_{config.name.replace(':', '_').replace(' ', '_')}_{i}.tif"
    marks: list[tuple[float, str]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        marks.append((time.perf_counter(), message or ""))

    (c0, s0), (p0, w0), t0 = cpu_times(), tree_cpu(), time.perf_counter()
    result = await session.call_tool(
        "raster_reproject",
        {
            "input": source,
            "output": output.name,
            "dst_crs": DST_CRS,
            "resampling": resampling,
            "overwrite": True,
            # COMPRESS=NONE: an output keeps its input's codec unless told
            "creation_options": {"TILED": "YES", "COMPRESS": "NONE"} if tiled else {"COMPRESS": "NONE"},
        },
        read_timeout_seconds=3600,
        progress_callback=on_progress,
    )  # type: ignore[arg-type]
    t1 = time.perf_counter()
    if result.is_error:
        raise RuntimeError(f"{config.name}: {result.content}")
    warped = [t for t, m in marks if m.startswith("warped ")]
    counts = [m for _, m in marks if m.startswith("warping ")]
    tile_count = int(counts[0].split(" in ")[1].split()[0]) if counts and " in " in counts[0] else 0
    first, last = (warped[0], warped[-1]) if warped else (t0, t1)
    (c1, s1), (p1, w1) = cpu_times(), tree_cpu()
    run = Run(config.name, t1 - t0, first - t0, last - first, t1 - last, tile_count, "", s1 - s0, c1 - c0, p1 - p0, w1 - w0)
    config.runs.append(run)
    print(
        f"{config.name} run {i + 1}: {run.wall:.2f} s (start {run.start:.2f}, tiles {run.tiles:.2f}, "
        f"assembly {run.assembly:.2f}; {run.tile_count} tiles; cpu {run.cpu:.2f} s: server {run.server_cpu:.2f}, "
        f"workers {run.workers_cpu:.2f}; steal {run.steal:.2f} s) load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    return output


async def open_session(stack: AsyncExitStack, config: Config, workdir: Path, source: str) -> ClientSession:
    """A server for `config` over stdio, warmed up with a raster_info."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gdal_mcp", "--workspace", str(workdir), "--confirm", "never", "--timeout", "3600", *config.args],
        env=env,
    )
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    warm = await session.call_tool("raster_info", {"path": source})
    assert not warm.is_error, warm.content
    return session


async def hash_outputs(outputs: list[tuple[Run, Path]]) -> None:
    for run, output in outputs:
        run.digest = await asyncio.to_thread(digest, output)
        output.unlink()
    outputs.clear()


async def run_all(
    configs: list[Config],
    workdir: Path,
    source: str,
    repeat: int,
    tiled: bool,
    resampling: str,
    interleave: bool,
    reference: Reference | None = None,
) -> None:
    """By default one server at a time, its `repeat` runs back to back. With `interleave`, all servers up at once
    and `repeat` rounds of one run per configuration, the order rotating round by round (every configuration meets
    the machine in the same states; but each idle Dask cluster costs ~8 % of a core meanwhile). Either way the
    outputs are hashed only after the timed runs: reading 2 GB back and deleting it between runs made the next run
    slower (BENCHMARKS.md). So the disk holds `repeat` outputs at once (interleaved: of every configuration).
    The machine reference (a pair of plain-process runs) is measured once per round, or twice before each
    configuration, while no server is busy."""
    outputs: list[tuple[Run, Path]] = []
    specs = reference_specs(workdir / source) if reference is not None else []

    async def measure_machine() -> None:
        if reference is not None:
            await asyncio.to_thread(reference.measure, workdir / source, specs)

    try:
        if interleave:
            async with AsyncExitStack() as stack:
                sessions = [await open_session(stack, c, workdir, source) for c in configs]
                for r in range(repeat):
                    await measure_machine()
                    for j in range(len(configs)):
                        k = (r + j) % len(configs)
                        c = configs[k]
                        output = await reproject(c, sessions[k], workdir, source, len(c.runs), tiled, resampling)
                        outputs.append((c.runs[-1], output))
            await hash_outputs(outputs)
            return
        for c in configs:
            for _ in range(2):
                await measure_machine()
            async with AsyncExitStack() as stack:
                session = await open_session(stack, c, workdir, source)
                for i in range(repeat):
                    output = await reproject(c, session, workdir, source, i, tiled, resampling)
                    outputs.append((c.runs[-1], output))
            await hash_outputs(outputs)
    finally:
        for _, output in outputs:  # a failed run: nothing of the benchmark's outputs is left in the work directory
            output.unlink(missing_ok=True)


def report(configs: list[Config], side: int, kind: str, tiled: bool, resampling: str, interleave: bool) -> str:
    layout = "tiled (TILED=YES: square tiles)" if tiled else "striped (GDAL's default layout: whole-row strips)"
    lines = [
        f"Reproject 3 x {side}^2 uint16 ({kind}, {3 * side * side * 2 / 1e9:.2f} GB of pixels, DEFLATE input) "
        f"to {DST_CRS}, {resampling}, uncompressed {layout} GTiff; median of the runs; CPU: {os.cpu_count()} cores",
        f"({'interleaved rounds' if interleave else 'configurations one after another'}); "
        "speed-up: of the medians, and the median of the run-by-run ratios (run i against run i)",
        "",
        "| executor | wall s | start s | tiles s | assembly s | cpu s | server cpu s | workers cpu s | steal s | "
        "tiles | speed-up vs first | run by run (min–max) | pixels |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = statistics.median(r.wall for r in configs[0].runs)
    ref = configs[0].runs[0].digest
    for c in configs:
        med = {
            k: statistics.median(getattr(r, k) for r in c.runs)
            for k in ("wall", "start", "tiles", "assembly", "cpu", "server_cpu", "workers_cpu", "steal")
        }
        same = "identical" if all(r.digest == ref for r in c.runs) else "DIFFERENT"
        rounds = [a.wall / b.wall for a, b in zip(configs[0].runs, c.runs, strict=False)]
        lines.append(
            f"| {c.name} | {med['wall']:.2f} | {med['start']:.2f} | {med['tiles']:.2f} | "
            f"{med['assembly']:.2f} | {med['cpu']:.2f} | {med['server_cpu']:.2f} | {med['workers_cpu']:.2f} | "
            f"{med['steal']:.2f} | {c.runs[0].tile_count} | {base / med['wall']:.2f}x | "
            f"{statistics.median(rounds):.2f}x ({min(rounds):.2f}–{max(rounds):.2f}) | {same} |"
        )
    return "\n".join(lines)


def _reference_process(source: str, specs: list[Any], start: Any, out: Any) -> None:
    """One plain process of the machine reference: open the source, wait for the others, warp `specs`."""
    from gdal_mcp.config import Settings
    from gdal_mcp.execution import common as worker

    # the GDAL settings of the server's workers (their GDAL cache), before GDAL is first used
    worker.set_gdal_environment({"gdal_cache": Settings.gdal_cache})
    from gdal_mcp.engine import tiles
    from gdal_mcp.engine.raster.opening import open_raster
    from gdal_mcp.engine.raster.warp import warp_tile

    worker.preload()
    session = tiles.Session()
    with session.active(), open_raster(source):
        pass  # opened (and kept by the session) before the clock starts, as a warm Dask worker has it
    # One pixel-interleaved buffer for every strip, the kind of view the raw GTiff writer of the real runs hands
    # warp_tile (a fresh 64 MB array per strip costs its page faults again each time on this VM)
    import numpy as np

    _, _, width, rows = specs[0].window
    pixels = np.zeros((rows, width, len(specs[0].indexes)), dtype=specs[0].dtype)
    buffer = pixels.transpose(2, 0, 1)
    start.wait(timeout=600)  # a sibling that died before it: BrokenBarrierError here, not a hang
    t0 = time.perf_counter()
    for spec in specs:
        _, _, width, rows = spec.window
        with session.active():
            warp_tile(spec, out=buffer[:, :rows, :width])
    out.put(time.perf_counter() - t0)
    session.close()


def reference_specs(source: Path) -> list[Any]:
    """The strips of the benchmark's reproject, as the engine plans them: its grid (`target_grid`) and its tiles
    (`warp_tiles`) of a striped GTiff, nearest."""
    from rasterio.enums import Resampling

    from gdal_mcp.engine.crs import parse_crs
    from gdal_mcp.engine.raster.warp import source_georef, target_grid, warp_tiles

    with rasterio.open(source) as ds:
        georef = source_georef(ds, None, None, [])
        target = parse_crs(DST_CRS, "dst_crs")
        transform, width, height = target_grid(
            ds, georef.crs, target, resolution=None, size=None, bbox=None, bbox_crs=None, tap=False, georef=georef
        )
        _, specs = warp_tiles(
            ds,
            str(source),
            "GTiff",
            {},
            width=width,
            height=height,
            dtype=ds.dtypes[0],
            crs=target,
            transform=transform,
            src_nodata=ds.nodata,
            nodata=ds.nodata,
            resampling=Resampling.nearest,
            threads=1,
            warp_options=georef.options,
        )
        return specs


def reference_run(source: Path, specs: list[Any], processes: int) -> float:
    """Seconds `processes` plain processes take to warp `specs` (process k: strips k, k + processes, …)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_reference_process, args=(str(source), specs[k::processes], start, out)) for k in range(processes)
    ]
    for proc in procs:
        proc.start()
    times: list[float] = []
    try:
        while len(times) < processes:
            try:
                times.append(out.get(timeout=2))
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"a machine-reference process failed (exit code {dead[0]})") from None
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return max(times)


@dataclass
class Reference:
    one: list[float] = field(default_factory=list)
    two: list[float] = field(default_factory=list)

    def measure(self, source: Path, specs: list[Any]) -> None:
        one, two = reference_run(source, specs, 1), reference_run(source, specs, 2)
        self.one.append(one)
        self.two.append(two)
        print(
            f"machine reference: {len(specs)} strips, 1 process {one:.2f} s, 2 processes {two:.2f} s "
            f"({one / two:.2f}x) load {os.getloadavg()[0]:.1f}",
            file=sys.stderr,
        )

    def report(self) -> str:
        if not self.one:
            return ""
        ratios = [a / b for a, b in zip(self.one, self.two, strict=True)]
        return (
            f"Machine reference (plain processes, `warp_tile` into memory, no server, no Dask, no writes; "
            f"{len(self.one)} pairs): 1 process {statistics.median(self.one):.2f} s, 2 processes "
            f"{statistics.median(self.two):.2f} s: {statistics.median(ratios):.2f}x "
            f"({min(ratios):.2f}–{max(ratios):.2f})"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", type=int, default=18300, help="side of the 3-band uint16 input (18300: 2.0 GB)")
    p.add_argument("--kind", choices=["random", "smooth"], default="random")
    p.add_argument("--workers", default="1,2", help="Dask cluster sizes to run, in order (default 1,2)")
    p.add_argument("--local", action="store_true", help="also run the default local executor (--workers 2)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--resampling", default="nearest", help="nearest (default), bilinear, cubic …")
    p.add_argument("--tiled", action="store_true", help="write a tiled GTiff (square tiles) instead of a striped one")
    p.add_argument(
        "--interleave",
        action="store_true",
        help="all servers up at once, one run of each per round (default: one server at a time)",
    )
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None, help="append the report to this file")
    p.add_argument(
        "--no-reference",
        dest="reference",
        action="store_false",
        help="skip the machine reference (plain processes warping the same strips)",
    )
    a = p.parse_args(argv)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="gdal-mcp-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    source = f"scale_{a.kind}_{a.side}.tif"
    made = not (workdir / source).exists()
    try:
        if made:
            print(f"writing {source} …", file=sys.stderr)
            make_warp_source(workdir / source, a.side, a.kind)
        configs = [
            Config(f"dask local:{n}", ["--executor", "dask", "--dask-scheduler", f"local:{n}"])
            for n in (int(x) for x in a.workers.split(","))
        ]
        if a.local:
            configs.append(Config("local pool", ["--workers", "2"]))
        reference = Reference() if a.reference and not a.tiled and a.resampling == "nearest" else None
        asyncio.run(run_all(configs, workdir, source, a.repeat, a.tiled, a.resampling, a.interleave, reference))
        text = report(configs, a.side, a.kind, a.tiled, a.resampling, a.interleave)
        if reference is not None:
            text += "\n\n" + reference.report()
        print(text)
        if a.markdown:
            with open(a.markdown, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
    finally:
        if a.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        elif made:
            (workdir / source).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
