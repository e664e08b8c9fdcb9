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
the summary, the commit), "start" from the call to the first tile (grid, queueing, the first tile). Every output
is compared with the first configuration's, pixel for pixel. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

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


async def run_config(config: Config, workdir: Path, source: str, repeat: int, tiled: bool, resampling: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "gdal_mcp", "--workspace", str(workdir),
                                                                 "--confirm", "never", "--timeout", "3600",
                                                                 *config.args], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        warm = await session.call_tool("raster_info", {"path": source})
        assert not warm.is_error, warm.content
        for i in range(repeat):
            output = workdir / f"scale_{config.name.replace(':', '_')}_{i}.tif"
            marks: list[tuple[float, str]] = []

            async def on_progress(progress: float, total: float | None, message: str | None,
                                  marks: list[tuple[float, str]] = marks) -> None:
                marks.append((time.perf_counter(), message or ""))

            t0 = time.perf_counter()
            result = await session.call_tool(
                "raster_reproject",
                {"input": source, "output": output.name, "dst_crs": DST_CRS, "resampling": resampling,
                 "overwrite": True, **({"creation_options": {"TILED": "YES"}} if tiled else {})},
                read_timeout_seconds=3600, progress_callback=on_progress)  # type: ignore[arg-type]
            t1 = time.perf_counter()
            if result.is_error:
                raise RuntimeError(f"{config.name}: {result.content}")
            warped = [t for t, m in marks if m.startswith("warped ")]
            counts = [m for _, m in marks if m.startswith("warping ")]
            tile_count = int(counts[0].split(" in ")[1].split()[0]) if counts and " in " in counts[0] else 0
            first, last = (warped[0], warped[-1]) if warped else (t0, t1)
            run = Run(config.name, t1 - t0, first - t0, last - first, t1 - last, tile_count,
                      await asyncio.to_thread(digest, output))
            config.runs.append(run)
            print(f"{config.name} run {i + 1}: {run.wall:.2f} s (start {run.start:.2f}, tiles {run.tiles:.2f}, "
                  f"assembly {run.assembly:.2f}; {run.tile_count} tiles) load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr)
            output.unlink()


def report(configs: list[Config], side: int, kind: str, tiled: bool, resampling: str) -> str:
    layout = "tiled (TILED=YES: square tiles)" if tiled else "striped (GDAL's default layout: whole-row strips)"
    lines = [f"Reproject 3 x {side}^2 uint16 ({kind}, {3 * side * side * 2 / 1e9:.2f} GB of pixels, DEFLATE input) "
             f"to {DST_CRS}, {resampling}, uncompressed {layout} GTiff; median of the runs; CPU: {os.cpu_count()} cores",
             "", "| executor | wall s | start s | tiles s | assembly s | tiles | speed-up vs first | pixels |",
             "|---|---|---|---|---|---|---|---|"]
    base = statistics.median(r.wall for r in configs[0].runs)
    ref = configs[0].runs[0].digest
    for c in configs:
        med = {k: statistics.median(getattr(r, k) for r in c.runs) for k in ("wall", "start", "tiles", "assembly")}
        same = "identical" if all(r.digest == ref for r in c.runs) else "DIFFERENT"
        lines.append(f"| {c.name} | {med['wall']:.2f} | {med['start']:.2f} | {med['tiles']:.2f} | "
                     f"{med['assembly']:.2f} | {c.runs[0].tile_count} | {base / med['wall']:.2f}x | {same} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", type=int, default=18300, help="side of the 3-band uint16 input (18300: 2.0 GB)")
    p.add_argument("--kind", choices=["random", "smooth"], default="random")
    p.add_argument("--workers", default="1,2", help="Dask cluster sizes to run, in order (default 1,2)")
    p.add_argument("--local", action="store_true", help="also run the default local executor (--workers 2)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--resampling", default="nearest", help="nearest (default), bilinear, cubic …")
    p.add_argument("--tiled", action="store_true", help="write a tiled GTiff (square tiles) instead of a striped one")
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None, help="append the report to this file")
    a = p.parse_args(argv)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="gdal-mcp-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    source = f"scale_{a.kind}_{a.side}.tif"
    made = not (workdir / source).exists()
    try:
        if made:
            print(f"writing {source} …", file=sys.stderr)
            make_warp_source(workdir / source, a.side, a.kind)
        configs = [Config(f"dask local:{n}", ["--executor", "dask", "--dask-scheduler", f"local:{n}"])
                   for n in (int(x) for x in a.workers.split(","))]
        if a.local:
            configs.append(Config("local pool", ["--workers", "2"]))
        for c in configs:
            asyncio.run(run_config(c, workdir, source, a.repeat, a.tiled, a.resampling))
        text = report(configs, a.side, a.kind, a.tiled, a.resampling)
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
