"""raster_pipeline against the separate tools and the GDAL CLI: reproject + clip + COG of the generated input.

    .venv/bin/python -m bench.pipeline                      # ~1 GB of pixels (src.tif of `python -m bench`), once
    .venv/bin/python -m bench.pipeline --size-mb 100        # quick look

Three ways to the same COG, timed in one run (one server, warmed up first; the order of the three alternates with
--repeat): (a) `raster_pipeline` (reproject to EPSG:4326, nearest, then clip, into a COG) through the server;
(b) the separate tools through the server, one after another: `raster_reproject` (DEFLATE, tiled) then `raster_clip`
into the COG; (c) Debian's GDAL CLI: `gdalwarp` then `gdal_translate -projwin -of COG`. The clip box is the warped
extent less 10 % on each side, in lon/lat. Every COG gets COMPRESS=DEFLATE, NUM_THREADS=ALL_CPUS,
OVERVIEW_RESAMPLING=NEAREST. Targets (the issue's): (a) <= 0.8 x (b) and (a) <= 1.0 x (c). After the first round,
outside the timing, the outputs are compared pixel by pixel (bench/rastercmp.py): (a) vs (b), (b) vs (c).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.generate import make_source
from bench.measure import MB, PeakRss, run_commands, tree_pss
from bench.rastercmp import compare_rasters
from bench.runner import COG_OPTIONS, DEFLATE_TILED, SERVER, _co, _server_pid, _version, log

PIPELINE_TARGET = 0.8  # (a) / (b)
CLI_TARGET = 1.0  # (a) / (c)
SIDES = ("pipeline", "separate", "cli")


@dataclass
class Side:
    seconds: list[float] = field(default_factory=list)
    peak_pss: list[int] = field(default_factory=list)
    peak_rss: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None


def clip_box(src: Path) -> list[float]:
    """The warped extent of `src` in lon/lat, less 10 % on each side."""
    import rasterio
    from rasterio.warp import transform_bounds

    with rasterio.open(src) as ds:
        west, south, east, north = transform_bounds(ds.crs, "EPSG:4326", *ds.bounds)
    dx, dy = (east - west) / 10, (north - south) / 10
    return [west + dx, south + dy, east - dx, north - dy]


async def _call(session: ClientSession, pid: int, calls: list[tuple[str, dict[str, Any]]], side: Side) -> None:
    with PeakRss(pid) as rss:
        t0 = time.perf_counter()
        for tool, args in calls:
            r = await session.call_tool(tool, args, read_timeout_seconds=3700)  # type: ignore[arg-type]
            if r.is_error:
                side.error = f"{tool}: {r.structured_content}"
                return
        seconds = time.perf_counter() - t0
    side.seconds.append(seconds)
    side.peak_rss.append(rss.peak)
    side.peak_pss.append(rss.peak_pss)


def _remove(work: Path, *names: str) -> None:
    for name in names:
        (work / name).unlink(missing_ok=True)


async def run(work: Path, repeat: int, cli: bool, bbox: list[float]) -> tuple[dict[str, Side], list[str]]:
    sides = {s: Side() for s in SIDES}
    notes: list[str] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=SERVER[0], args=[*SERVER[1:], "--workspace", str(work), "--timeout", "3600", "--workers", "2"], env=env
    )
    pipeline = [
        ("raster_pipeline", {
            "input": "src.tif",
            "output": "a_pipeline.tif",
            "steps": [{"step": "reproject", "dst_crs": "EPSG:4326", "resampling": "nearest"}, {"step": "clip", "bbox": bbox}],
            "format": "COG",
            "creation_options": COG_OPTIONS,
            "overwrite": True,
        })
    ]  # fmt: skip
    separate = [
        ("raster_reproject", {
            "input": "src.tif", "output": "b_warped.tif", "dst_crs": "EPSG:4326", "resampling": "nearest",
            "creation_options": DEFLATE_TILED, "overwrite": True,
        }),
        ("raster_clip", {
            "input": "b_warped.tif", "output": "b_separate.tif", "bbox": bbox, "format": "COG",
            "creation_options": COG_OPTIONS, "overwrite": True,
        }),
    ]  # fmt: skip
    commands = [
        ["gdalwarp", "-overwrite", "-multi", "-wo", "NUM_THREADS=ALL_CPUS", "-t_srs", "EPSG:4326", "-r", "near",
         *_co(DEFLATE_TILED), "src.tif", "c_warped.tif"],
        ["gdal_translate", "-projwin", *(str(v) for v in (bbox[0], bbox[3], bbox[2], bbox[1])), "-of", "COG",
         *_co(COG_OPTIONS), "c_warped.tif", "c_cli.tif"],
    ]  # fmt: skip
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        pid = _server_pid()
        await session.call_tool("raster_info", {"path": "src.tif"})
        await asyncio.sleep(2.0)  # the other worker finishes importing GDAL
        notes.append(f"server tree at rest after warm-up: {tree_pss(pid) / MB:.0f} MB summed PSS")
        for i in range(repeat):
            for who in SIDES if i % 2 == 0 else SIDES[::-1]:
                side = sides[who]
                if side.error or (who == "cli" and not cli):
                    continue
                _remove(work, "src.tif.aux.xml", *(f"{p}_{n}.tif" for p in "abc" for n in ("pipeline", "separate", "cli")))
                os.sync()
                log(f"{who}: run {i + 1}/{repeat}")
                if who == "pipeline":
                    await _call(session, pid, pipeline, side)
                elif who == "separate":
                    await _call(session, pid, separate, side)
                else:
                    done = await asyncio.to_thread(run_commands, commands, cwd=work)
                    if done.error:
                        side.error = done.error
                    else:
                        side.seconds.append(done.seconds)
                        side.peak_rss.append(done.peak_rss)
                _remove(work, "b_warped.tif", "c_warped.tif")
                log(f"  {side.seconds[-1]:.1f} s" if side.seconds and not side.error else f"  FAILED: {side.error}")
                if i == 0 and (work / _output(who)).exists():  # kept for the comparison after the runs
                    os.replace(work / _output(who), work / f"first_{_output(who)}")
        notes.append(f"server tree at rest after the runs: {tree_pss(pid) / MB:.0f} MB summed PSS")
    for pair in (("pipeline", "separate"), ("separate", "cli")):
        paths = [work / f"first_{_output(s)}" for s in pair]
        if all(p.exists() for p in paths):
            log(f"comparing {pair[0]} and {pair[1]} pixel by pixel")
            text = compare_rasters(*paths).text.replace("server vs CLI", f"{pair[0]} vs {pair[1]}")
            notes.append(text)
    return sides, notes


def _output(side: str) -> str:
    return {"pipeline": "a_pipeline.tif", "separate": "b_separate.tif", "cli": "c_cli.tif"}[side]


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "—" if v is None else format(v, spec)


def report(sides: dict[str, Side], notes: list[str], size: str, load: tuple[float, float], repeat: int) -> tuple[str, bool]:
    a, b, c = (sides[s].median for s in SIDES)
    to_b = a / b if a and b else None
    to_c = a / c if a and c else None
    ok = to_b is not None and to_b <= PIPELINE_TARGET and (to_c is None or to_c <= CLI_TARGET)
    lines = [
        f"# raster_pipeline benchmark — {time.strftime('%Y-%m-%d %H:%M:%S')}",
        "",
        f"- input: {size}; {repeat} run(s) per side; load average {load[0]:.2f} before, {load[1]:.2f} after "
        f"({os.cpu_count()} CPUs, shared machine)",
        f"- server: `python -m gdal_mcp --workers 2` ({_version([*SERVER, '--version'])})",
        f"- CLI: {_version(['gdalinfo', '--version'])}",
        "",
        "| side | median s | runs s | peak PSS MB (server tree) / peak RSS MB (CLI) |",
        "|---|---|---|---|",
    ]
    labels = ("(a) raster_pipeline", "(b) raster_reproject + raster_clip", "(c) gdalwarp + gdal_translate")
    for who, label in zip(SIDES, labels, strict=True):
        s = sides[who]
        mem = max(s.peak_pss or s.peak_rss) / MB if (s.peak_pss or s.peak_rss) else None
        lines.append(f"| {label} | {_fmt(s.median)} | {[round(t, 1) for t in s.seconds]} | {_fmt(mem, '.0f')} |")
    lines += [
        "",
        f"- (a) / (b) = {_fmt(to_b)} (target <= {PIPELINE_TARGET}: "
        f"{'PASS' if to_b is not None and to_b <= PIPELINE_TARGET else 'FAIL'})",
        f"- (a) / (c) = {_fmt(to_c)} (target <= {CLI_TARGET}: "
        f"{'n/a' if to_c is None else 'PASS' if to_c <= CLI_TARGET else 'FAIL'})",
    ]
    lines += [f"- {who} error: `{sides[who].error}`" for who in SIDES if sides[who].error]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.pipeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mb", type=float, default=1000, help="MiB of pixels in src.tif (default 1000)")
    p.add_argument("--repeat", type=int, default=1, help="runs per side (default 1)")
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--no-cli", action="store_true")
    p.add_argument("--markdown", type=Path, default=None)
    a = p.parse_args(argv)
    own = a.workdir is None
    work = Path(tempfile.mkdtemp(prefix="gdal_mcp_pipeline_")) if own else a.workdir
    work.mkdir(parents=True, exist_ok=True)
    cli = not a.no_cli and all(shutil.which(t) for t in ("gdalwarp", "gdal_translate"))
    try:
        log(f"generating ~{a.size_mb:g} MiB of pixels in {work}")
        src = make_source(work / "src.tif", a.size_mb)
        size = f"`src.tif` {src.width} × {src.height} × 3 uint16, EPSG:32618, tiled 256, DEFLATE ({src.pixel_bytes / MB:.0f} MB)"
        before = os.getloadavg()[0]
        sides, notes = asyncio.run(run(work, a.repeat, cli, clip_box(work / "src.tif")))
        text, ok = report(sides, notes, size, (before, os.getloadavg()[0]), a.repeat)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    print(text)
    if a.markdown:
        a.markdown.write_text(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
