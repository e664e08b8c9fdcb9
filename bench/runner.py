"""Runs each case through the MCP server (stdio, official SDK) and the GDAL CLI, alternately; prints a markdown report.

Raster cases run on a generated GTiff, vector cases (named v…) on generated GeoPackages: see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.generate import Raster, make_source, make_tiles, make_warp_source
from bench.measure import MB, PeakRss, process_tree, rss_bytes, run_commands, tree_pss
from bench.rastercmp import compare_rasters
from bench.vector import POINTS, POINTS_SMALL, POLYGONS, Output, VectorInput, compare, inspect_output, make_vector

RSS_TARGET_MB = 600
RATIO_TARGET = 1.10
VECTOR_RATIO_TARGET = 1.30
FLAT_TOLERANCE = 0.25  # memory is "flat" if the peak at 1 M points is at most 25 % above the peak at 200 k
SERVER = [sys.executable, "-m", "gdal_mcp"]
DEFLATE_TILED = {"COMPRESS": "DEFLATE", "TILED": "YES"}
COG_OPTIONS = {"COMPRESS": "DEFLATE", "NUM_THREADS": "ALL_CPUS", "OVERVIEW_RESAMPLING": "NEAREST"}


def _co(options: dict[str, str]) -> list[str]:
    return [arg for k, v in options.items() for arg in ("-co", f"{k}={v}")]


@dataclass(frozen=True)
class Case:
    """One operation: the server's tool call and the equivalent CLI commands, for repetition `i`."""

    name: str
    tool: str
    arguments: Callable[[int, list[str]], dict[str, Any]]  # (i, tile names) -> tool arguments
    commands: Callable[[int, list[str]], list[list[str]]]  # (i, tile names) -> CLI commands, timed together
    ratio_target: float | None = None  # the largest server/CLI ratio of median wall times that passes
    writes: bool = True  # outputs are named out_<name>_<i>.<ext> (server) and cli_<name>_<i>.<ext> (CLI)
    cli_env: dict[str, str] = field(default_factory=dict)
    ext: str = "tif"
    source: str = "src.tif"  # the generated input; vector cases check their outputs' features against it
    out_crs: str | None = None  # vector: the CRS the output layer must have
    compare: bool = False  # raster: compare the server's and the CLI's first outputs pixel by pixel

    @property
    def vector(self) -> bool:
        return self.source.endswith(".gpkg")


def _reproject(i: int, _: list[str]) -> list[list[str]]:
    return [
        [
            "gdalwarp",
            "-overwrite",
            "-multi",
            "-wo",
            "NUM_THREADS=ALL_CPUS",
            "-t_srs",
            "EPSG:4326",
            "-r",
            "near",
            *_co(DEFLATE_TILED),
            "src.tif",
            f"cli_reproject_{i}.tif",
        ]
    ]


def _mosaic(i: int, tiles: list[str]) -> list[list[str]]:
    return [
        ["gdalbuildvrt", f"cli_mosaic_{i}.vrt", *tiles],
        ["gdal_translate", *_co(DEFLATE_TILED), f"cli_mosaic_{i}.vrt", f"cli_mosaic_{i}.tif"],
    ]


CASES = {
    c.name: c
    for c in [
        Case(
            "reproject",
            "raster_reproject",
            lambda i, _: {
                "input": "src.tif",
                "output": f"out_reproject_{i}.tif",
                "dst_crs": "EPSG:4326",
                "resampling": "nearest",
                "creation_options": DEFLATE_TILED,
                "overwrite": True,
            },
            _reproject,
            ratio_target=RATIO_TARGET,
        ),
        Case(
            "cog",
            "raster_convert",
            lambda i, _: {
                "input": "src.tif",
                "output": f"out_cog_{i}.tif",
                "format": "COG",
                "creation_options": COG_OPTIONS,
                "overwrite": True,
            },
            lambda i, _: [["gdal_translate", "-of", "COG", *_co(COG_OPTIONS), "src.tif", f"cli_cog_{i}.tif"]],
            ratio_target=RATIO_TARGET,
        ),
        Case(
            "mosaic",
            "raster_mosaic",
            lambda i, tiles: {
                "inputs": tiles,
                "output": f"out_mosaic_{i}.tif",
                "creation_options": DEFLATE_TILED,
                "overwrite": True,
            },
            _mosaic,
        ),
        Case(
            "stats",
            "raster_stats",
            lambda i, _: {"input": "src.tif"},
            lambda i, _: [["gdalinfo", "-stats", "src.tif"]],
            writes=False,
            cli_env={"GDAL_PAM_ENABLED": "NO"},
        ),
        # Hidden (--smoke): exercises the harness end to end with a tool that already exists.
        Case(
            "smoke",
            "raster_info",
            lambda i, _: {"path": "src.tif", "stats": True},
            lambda i, _: [["gdalinfo", "-stats", "src.tif"]],
            writes=False,
            cli_env={"GDAL_PAM_ENABLED": "NO"},
        ),
    ]
}
DEFAULT_CASES = ["reproject", "cog", "mosaic", "stats"]

# Issue 13: reproject of a large input, incompressible (random) and compressible (smooth), to a tiled uncompressed
# GTiff, and raster_stats on the random one. Their inputs (--warp-side) are generated only when one of them runs.
WARP_SOURCES = {"random.tif": "random", "smooth.tif": "smooth"}
TILED = {"TILED": "YES", "COMPRESS": "NONE"}  # the outputs keep a DEFLATE input's codec unless told


def _warp_case(name: str, source: str) -> Case:
    return Case(
        name,
        "raster_reproject",
        lambda i, _: {
            "input": source,
            "output": f"out_{name}_{i}.tif",
            "dst_crs": "EPSG:4326",
            "resampling": "nearest",
            "creation_options": TILED,
            "overwrite": True,
        },
        lambda i, _: [
            [
                "gdalwarp",
                "-overwrite",
                "-multi",
                "-wo",
                "NUM_THREADS=ALL_CPUS",
                "-t_srs",
                "EPSG:4326",
                "-r",
                "near",
                *_co(TILED),
                source,
                f"cli_{name}_{i}.tif",
            ]
        ],
        ratio_target=RATIO_TARGET,
        source=source,
        compare=True,
    )


CASES |= {
    c.name: c
    for c in [
        _warp_case("reproject_random", "random.tif"),
        _warp_case("reproject_smooth", "smooth.tif"),
        Case(
            "stats_random",
            "raster_stats",
            lambda i, _: {"input": "random.tif"},
            lambda i, _: [["gdalinfo", "-stats", "random.tif"]],
            writes=False,
            cli_env={"GDAL_PAM_ENABLED": "NO"},
            ratio_target=1.0,
            source="random.tif",
        ),
    ]
}
LARGE_CASES = ["reproject_random", "reproject_smooth", "stats_random"]


def _vector_convert(name: str, source: str) -> Case:
    """GPKG -> FlatGeobuf, as `ogr2ogr -f FlatGeobuf out.fgb in.gpkg`."""
    return Case(
        name,
        "vector_convert",
        lambda i, _: {"input": source, "output": f"out_{name}_{i}.fgb", "overwrite": True},
        lambda i, _: [["ogr2ogr", "-f", "FlatGeobuf", f"cli_{name}_{i}.fgb", source]],
        ratio_target=VECTOR_RATIO_TARGET,
        ext="fgb",
        source=source,
        out_crs="EPSG:4326",
    )


def _vector_reproject(name: str, source: str) -> Case:
    """EPSG:4326 -> EPSG:3857, GPKG -> GPKG, as `ogr2ogr -f GPKG -t_srs EPSG:3857 out.gpkg in.gpkg`."""
    return Case(
        name,
        "vector_reproject",
        lambda i, _: {"input": source, "output": f"out_{name}_{i}.gpkg", "dst_crs": "EPSG:3857", "overwrite": True},
        lambda i, _: [["ogr2ogr", "-f", "GPKG", "-t_srs", "EPSG:3857", f"cli_{name}_{i}.gpkg", source]],
        ratio_target=VECTOR_RATIO_TARGET,
        ext="gpkg",
        source=source,
        out_crs="EPSG:3857",
    )


# The 200 k point convert runs just before the 1 M one, so that the two peaks are measured side by side.
SMALL_POINTS_FILE = f"points_{POINTS_SMALL // 1000}k.gpkg"
CASES |= {
    c.name: c
    for c in [
        _vector_convert("vconvert_points_200k", SMALL_POINTS_FILE),
        _vector_convert("vconvert_points", "points.gpkg"),
        _vector_convert("vconvert_polygons", "polygons.gpkg"),
        _vector_reproject("vreproject_points", "points.gpkg"),
        _vector_reproject("vreproject_polygons", "polygons.gpkg"),
    ]
}
VECTOR_CASES = ["vconvert_points_200k", "vconvert_points", "vconvert_polygons", "vreproject_points", "vreproject_polygons"]
GROUPS = {"raster": DEFAULT_CASES, "vector": VECTOR_CASES, "large": LARGE_CASES, "all": DEFAULT_CASES + VECTOR_CASES}


@dataclass
class Side:
    """Measurements of one side (server or CLI) of one case."""

    seconds: list[float] = field(default_factory=list)
    peak_rss: list[int] = field(default_factory=list)
    largest_process: list[int] = field(default_factory=list)  # peak RSS of any one process: sampled (server), wait4 (CLI)
    peak_pss: list[int] = field(default_factory=list)  # server only: summed PSS of the tree
    output_bytes: list[int] = field(default_factory=list)
    start_rss: list[int] = field(default_factory=list)  # server only: summed RSS of the tree when the call started
    inherited_rss: list[int] = field(default_factory=list)  # CLI only: the harness's own peak RSS at spawn (CliRun)
    outputs: list[Output] = field(default_factory=list)  # vector only: feature count and CRS of each output
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def peak_mb(self) -> float | None:
        return max(self.peak_rss) / MB if self.peak_rss else None


@dataclass
class Result:
    case: Case
    server: Side = field(default_factory=Side)
    cli: Side = field(default_factory=Side)
    expected_features: int | None = None  # vector: the input's feature count
    comparison: str | None = None  # raster `compare` cases: server vs CLI output, pixel by pixel (repetition 1)


# ----- the two sides ------------------------------------------------------------------------------------------


def _clean(workdir: Path, *names: str) -> None:
    """Remove outputs (and the source's PAM statistics) so every run starts alike."""
    for name in (*names, "src.tif.aux.xml", *(f"{s}.aux.xml" for s in WARP_SOURCES)):
        (workdir / name).unlink(missing_ok=True)


def _outputs(prefix: str, case: Case, i: int) -> tuple[str, ...]:
    """The output of one run, then files that may come with it (the CLI mosaic's VRT, SQLite journals)."""
    stem = f"{prefix}_{case.name}_{i}"
    if case.ext == "gpkg":
        return f"{stem}.gpkg", f"{stem}.gpkg-journal", f"{stem}.gpkg-wal", f"{stem}.gpkg-shm"
    return f"{stem}.{case.ext}", f"{stem}.vrt"


def _finish_outputs(side: Side, workdir: Path, case: Case, names: tuple[str, ...], i: int, keep: bool) -> bool:
    """Record the output's size (and, for a vector case, its feature count and CRS), then delete it unless `keep`.

    Returns False if the output is missing. The check reads the file in this process, after the timing.
    """
    path = workdir / names[0]
    size = path.stat().st_size if path.exists() else -1
    try:
        if size >= 0:
            side.output_bytes.append(size)
            if case.vector:
                try:
                    side.outputs.append(inspect_output(path, sample=i == 0))
                except Exception as e:  # noqa: BLE001 - an unreadable output fails the check, not the run
                    side.outputs.append(Output(-1, f"unreadable: {type(e).__name__}: {e}"))
    finally:
        if not keep:
            _clean(workdir, *names)
    return size >= 0


async def _server_run(
    side: Side, session: ClientSession, server_pid: int, case: Case, i: int, tiles: list[str], workdir: Path, keep: bool
) -> None:
    outputs = _outputs("out", case, i)
    _clean(workdir, *outputs)
    os.sync()
    with PeakRss(server_pid) as rss:
        t0 = time.perf_counter()
        try:
            r = await session.call_tool(case.tool, case.arguments(i, tiles), read_timeout_seconds=3700)
        except Exception as e:  # noqa: BLE001 - a broken session fails the case, not the run
            side.error = f"{type(e).__name__}: {e}"
            return
        seconds = time.perf_counter() - t0
    if r.is_error:
        payload = r.structured_content or [getattr(c, "text", c) for c in r.content]
        side.error = f"{case.tool} returned an error: {payload}"
        return
    if case.writes and not _finish_outputs(side, workdir, case, outputs, i, keep or (case.compare and i == 0)):
        side.error = f"{case.tool} reported success but {outputs[0]} does not exist"
        return
    side.seconds.append(seconds)
    side.peak_rss.append(rss.peak)
    side.largest_process.append(rss.peak_single)
    side.peak_pss.append(rss.peak_pss)
    side.start_rss.append(rss.start or 0)


async def _cli_run(side: Side, case: Case, i: int, tiles: list[str], workdir: Path, keep: bool) -> None:
    outputs = _outputs("cli", case, i)
    _clean(workdir, *outputs)
    os.sync()
    run = await asyncio.to_thread(run_commands, case.commands(i, tiles), cwd=workdir, env={**os.environ, **case.cli_env})
    if run.error:
        side.error = run.error
        return
    side.seconds.append(run.seconds)
    side.peak_rss.append(run.peak_rss)
    side.largest_process.append(run.maxrss)
    side.inherited_rss.append(run.inherited)
    if case.writes and not _finish_outputs(side, workdir, case, outputs, i, keep or (case.compare and i == 0)):
        side.error = f"{' && '.join(' '.join(c) for c in case.commands(i, tiles))} exited 0 but {outputs[0]} does not exist"


def _server_pid() -> int:
    """The gdal_mcp server: our child whose command line runs the gdal_mcp module."""
    for pid in process_tree(os.getpid())[1:]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gdal_mcp" in cmdline and b"--workspace" in cmdline:
            return pid
    raise RuntimeError("could not find the gdal_mcp server process")


def _at_rest(pid: int, when: str) -> str:
    sizes = sorted((rss_bytes(p) for p in process_tree(pid)), reverse=True)
    return (
        f"server tree at rest {when}: {len(sizes)} processes, {sum(sizes) / MB:.0f} MB summed RSS "
        f"(per process {', '.join(f'{b / MB:.0f}' for b in sizes)}), {tree_pss(pid) / MB:.0f} MB summed PSS "
        "(shared pages counted once)"
    )


def _compare_outputs(res: Result, workdir: Path, keep: bool) -> None:
    """Compare the first repetition's two outputs (kept for this, outside the timing), then delete them."""
    names = [_outputs(prefix, res.case, 0) for prefix in ("out", "cli")]
    paths = [workdir / n[0] for n in names]
    try:
        if all(p.exists() for p in paths):
            log(f"{res.case.name}: comparing the two outputs pixel by pixel")
            t0 = time.perf_counter()
            res.comparison = compare_rasters(*paths).text + f" (compared in {time.perf_counter() - t0:.0f} s)"
        else:
            res.comparison = "not compared: " + " and ".join(p.name for p in paths if not p.exists()) + " missing"
    except Exception as e:  # noqa: BLE001 - an unreadable output is reported, not fatal
        res.comparison = f"comparison failed: {type(e).__name__}: {e}"
    finally:
        if not keep:
            for n in names:
                _clean(workdir, *n)


async def run_cases(
    results: list[Result],
    workdir: Path,
    tiles: list[str],
    repeat: int,
    cli: bool,
    keep: bool,
    notes: list[str],
    warmup: tuple[str, dict[str, Any]] = ("raster_info", {"path": "src.tif"}),
) -> None:
    """Start the server once, warm it up with one `warmup` (tool, arguments) call, then run every case `repeat`
    times per side."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=SERVER[0], args=[*SERVER[1:], "--workspace", str(workdir), "--timeout", "3600", "--workers", "2"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        pid = _server_pid()
        warm = await session.call_tool(*warmup)  # waits for a warm worker
        if warm.is_error:
            notes.append(f"warm-up {warmup[0]} failed: {warm.structured_content}")
        await asyncio.sleep(2.0)  # let the other workers finish importing GDAL
        notes.append(_at_rest(pid, "after warm-up"))
        for res in results:
            case = res.case
            for i in range(repeat):
                log(f"{case.name}: repetition {i + 1}/{repeat}")
                server_first = i % 2 == 0  # ABBA order: neither side always runs on the other's page cache
                for who in ("server", "cli") if server_first else ("cli", "server"):
                    if who == "server" and res.server.error is None:
                        await _server_run(res.server, session, pid, case, i, tiles, workdir, keep)
                    elif who == "cli" and cli and res.cli.error is None:
                        await _cli_run(res.cli, case, i, tiles, workdir, keep)
                if case.compare and i == 0:
                    await asyncio.to_thread(_compare_outputs, res, workdir, keep)
                if res.server.error and (res.cli.error or not cli):
                    break
            for who, side in (("server", res.server), ("CLI", res.cli)):
                if side.error:
                    log(f"{case.name}: {who} FAILED: {side.error}")
        notes.append(_at_rest(pid, "after the last case"))


# ----- report ---------------------------------------------------------------------------------------------------


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "—" if v is None else format(v, spec)


def _verdict(res: Result) -> tuple[str, bool]:
    """Target column text and whether everything passed."""
    s, c = res.server, res.cli
    if s.error:
        return "FAILED (server error)", False
    parts, ok = [], True
    target = res.case.ratio_target
    if target is not None:
        if s.median is not None and c.median:
            good = s.median / c.median <= target
            parts.append(f"ratio <= {target:.2f} {'PASS' if good else 'FAIL'}")
            ok &= good
        else:
            parts.append(f"ratio <= {target:.2f} n/a ({'CLI failed' if c.error else 'no CLI'})")
    # The target is the tree's summed PSS (issue 13: shared libraries counted once); summed RSS counts GDAL once
    # per worker process, so it is reported beside it but not judged.
    pss = max(s.peak_pss) / MB if s.peak_pss else s.peak_mb
    good = pss is not None and pss <= RSS_TARGET_MB
    parts.append(f"PSS <= {RSS_TARGET_MB} MB {'PASS' if good else 'FAIL'}")
    ok &= good
    if res.case.vector:
        good = not _vector_problems(res)
        parts.append(f"features {'OK' if good else 'FAIL'}")
        ok &= good
    return "; ".join(parts), ok


def _vector_problems(res: Result) -> list[str]:
    """What is wrong with a vector case's outputs: feature counts, CRS, and server vs CLI on a sample."""
    problems = []
    for who, side in (("server", res.server), ("CLI", res.cli)):
        counts = [o.features for o in side.outputs]
        if any(n != res.expected_features for n in counts):
            problems.append(f"{who} wrote {counts} features, the input has {res.expected_features}")
        crs = sorted({str(o.crs) for o in side.outputs})
        if crs and crs != [res.case.out_crs]:
            problems.append(f"{who} output CRS {crs}, expected {res.case.out_crs}")
    text, same = compare(*(side.outputs[0] if side.outputs else None for side in (res.server, res.cli)))
    if not same:
        problems.append(text)
    return problems


def _flat(results: list[Result]) -> tuple[list[str], bool]:
    """The memory section: the point convert at 200 k and at 1 M points, side by side, with the verdict."""
    by_name = {r.case.name: r for r in results}
    small, big = by_name.get("vconvert_points_200k"), by_name.get("vconvert_points")
    if small is None or big is None or not small.server.peak_rss or not big.server.peak_rss:
        return [], True
    lines = [
        "",
        f"## Memory: point convert at {small.expected_features:,} vs {big.expected_features:,} points",
        "",
        f"Rule: flat if the server's peak RSS at {big.expected_features:,} points is at most {FLAT_TOLERANCE:.0%} above "
        f"its peak at {small.expected_features:,}, both for the whole process tree (the table's figure) and for its "
        "largest process (the worker doing the job). PSS and the growth during the call (peak minus the tree's RSS "
        "when the call started) are given for information.",
        "",
        "| points | server peak RSS MB | largest process MB | server peak PSS MB | growth during call MB | CLI peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for r in (small, big):
        s = r.server
        growth = max(p - q for p, q in zip(s.peak_rss, s.start_rss, strict=True)) / MB
        lines.append(
            f"| {r.expected_features:,} | {_fmt(s.peak_mb, '.0f')} | {max(s.largest_process) / MB:.0f} "
            f"| {max(s.peak_pss) / MB:.0f} | {growth:.0f} | {_fmt(r.cli.peak_mb, '.0f')} |"
        )
    tree = max(big.server.peak_rss) / max(small.server.peak_rss)
    single = max(big.server.largest_process) / max(small.server.largest_process)
    pss = max(big.server.peak_pss) / max(small.server.peak_pss)
    flat = tree <= 1 + FLAT_TOLERANCE and single <= 1 + FLAT_TOLERANCE
    cli = ""
    if big.cli.peak_mb and small.cli.peak_mb:
        cli = f"; for comparison, the CLI's peak ×{big.cli.peak_mb / small.cli.peak_mb:.2f}"
    lines += [
        "",
        f"Verdict: **{'FLAT' if flat else 'NOT FLAT'}**: peak RSS at {big.expected_features:,} / at "
        f"{small.expected_features:,} points ×{tree:.2f} (tree), ×{single:.2f} (largest process); PSS ×{pss:.2f}{cli}.",
    ]
    return lines, flat


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / (1 << 20)
    return 0.0


def _version(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"
    return "; ".join(out.splitlines())


def _vector_stack() -> str:
    """The libraries the server's vector engine uses (same interpreter as the server)."""
    import pyogrio
    import pyproj
    import shapely

    return (
        f"vector engine: pyogrio {pyogrio.__version__} (GDAL {pyogrio.__gdal_version_string__}), "
        f"shapely {shapely.__version__} (GEOS {shapely.geos_version_string}), pyproj {pyproj.__version__} "
        f"(PROJ {pyproj.proj_version_str})"
    )


def report(
    results: list[Result],
    src: Raster | None,
    tiles: list[Raster],
    repeat: int,
    cli: str | None,
    notes: list[str],
    vectors: Sequence[VectorInput] = (),
    warp_sources: Sequence[Raster] = (),
) -> tuple[str, bool]:
    """The markdown report and whether every case met its targets."""
    lines = [
        f"# gdal-mcp benchmark — {datetime.now().astimezone().isoformat(timespec='seconds')}",
        "",
        f"- machine: {os.cpu_count()} CPUs ({_cpu_model()}), {_ram_gib():.1f} GiB RAM, {platform.platform()}",
        "- server: `python -m gdal_mcp --workers 2 --timeout 3600` over stdio "
        f"(official `mcp` SDK client) — {_version([*SERVER, '--version'])}" + (f"; {_vector_stack()}" if vectors else ""),
        f"- CLI: {cli or 'not found on PATH: server side only (apt-get install gdal-bin)'}",
    ]
    if src is not None:
        lines.append(
            f"- input: `src.tif` {src.width} × {src.height} × 3 uint16, tiled 256, DEFLATE, EPSG:32618: "
            f"{src.pixel_bytes / MB:.0f} MB of pixels, {src.path.stat().st_size / MB:.0f} MB on disk"
            + (f"; mosaic: 4 overlapping tiles, {sum(t.pixel_bytes for t in tiles) / MB:.0f} MB of pixels" if tiles else "")
        )
    lines += [
        f"- input: `{w.path.name}` {w.width} × {w.height} × 3 uint16 ({WARP_SOURCES[w.path.name]} values), "
        f"tiled 512, DEFLATE level 1{', PREDICTOR=2' if WARP_SOURCES[w.path.name] == 'smooth' else ''}, "
        f"EPSG:32633: {w.pixel_bytes / MB:.0f} MB of pixels, "
        f"{w.path.stat().st_size / MB:.0f} MB on disk"
        for w in warp_sources
    ]
    lines += [f"- vector input: {v.describe()}" for v in vectors]
    lines += [
        f"- {repeat} repetition(s) per side, alternating server/CLI (ABBA); wall time is the median, peak RSS the maximum "
        "over repetitions of the summed VmRSS of the process tree sampled every 50 ms (MB = MiB); PSS counts the "
        "pages of shared libraries (GDAL is loaded in every worker) once instead of once per process",
        "",
        "| case | server median s | CLI median s | ratio server/CLI | server peak RSS MB | server peak PSS MB "
        "| CLI peak RSS MB | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    all_ok = True
    for res in results:
        s, c = res.server, res.cli
        ratio = s.median / c.median if s.median is not None and c.median else None
        verdict, ok = _verdict(res)
        all_ok &= ok
        pss = max(s.peak_pss) / MB if s.peak_pss else None
        lines.append(
            f"| {res.case.name} | {_fmt(s.median)} | {_fmt(c.median)} | {_fmt(ratio)} | {_fmt(s.peak_mb, '.0f')} "
            f"| {_fmt(pss, '.0f')} | {_fmt(c.peak_mb, '.0f')} | {verdict} |"
        )
    flat_lines, flat = _flat(results)
    lines += flat_lines
    all_ok &= flat
    lines += ["", "## Details", ""]
    for res in results:
        s, c = res.server, res.cli
        detail = [f"server s {[round(t, 2) for t in s.seconds]}", f"CLI s {[round(t, 2) for t in c.seconds]}"]
        if s.largest_process:
            detail.append(f"largest server process {max(s.largest_process) / MB:.0f} MB (sampled)")
        if s.start_rss:
            growth = max(p - q for p, q in zip(s.peak_rss, s.start_rss, strict=True)) / MB
            detail.append(f"server tree grew by {growth:.0f} MB during the call (peak minus RSS at the start)")
        if c.largest_process:
            if max(c.largest_process) > max(c.inherited_rss):
                detail.append(f"CLI ru_maxrss {max(c.largest_process) / MB:.0f} MB (wait4)")
            else:
                detail.append(
                    f"CLI ru_maxrss not meaningful ({max(c.largest_process) / MB:.0f} MB: not above the "
                    f"harness's own peak, {max(c.inherited_rss) / MB:.0f} MB, which a child inherits)"
                )
        if s.output_bytes or c.output_bytes:
            sizes = [[round(b / MB) for b in side.output_bytes] for side in (s, c)]
            detail.append(f"output MB server {sizes[0]}, CLI {sizes[1]}")
        if res.comparison:
            detail.append(res.comparison)
        if res.case.vector and (s.outputs or c.outputs):
            counts = [[o.features for o in side.outputs] for side in (s, c)]
            crs = [sorted({str(o.crs) for o in side.outputs}) for side in (s, c)]
            detail.append(
                f"features server {counts[0]}, CLI {counts[1]} (input {res.expected_features}); CRS server {crs[0]}, CLI {crs[1]}"
            )
            detail.append(compare(*(side.outputs[0] if side.outputs else None for side in (s, c)))[0])
        lines.append(f"- **{res.case.name}** (`{res.case.tool}`): " + "; ".join(detail))
        if res.case.vector:
            lines += [f"  - output check: {p}" for p in _vector_problems(res)]
        lines += [f"  - {who} error: `{side.error}`" for who, side in (("server", s), ("CLI", c)) if side.error]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n", all_ok


# ----- entry point ----------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _case_names(text: str) -> list[str]:
    """Case names from a comma-separated list of cases and groups (raster, vector, all), in order, without repeats."""
    names = [n for part in text.split(",") if part.strip() for n in GROUPS.get(part.strip(), [part.strip()])]
    return list(dict.fromkeys(names))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description="Benchmark gdal-mcp (over stdio) against the GDAL CLI.")
    p.add_argument("--size-mb", type=float, default=1000, help="MiB of pixels in the source raster (default 1000)")
    p.add_argument("--points", type=int, default=POINTS, help=f"points in points.gpkg (default {POINTS:,})")
    p.add_argument("--polygons", type=int, default=POLYGONS, help=f"polygons in polygons.gpkg (default {POLYGONS:,})")
    p.add_argument(
        "--warp-side",
        type=int,
        default=18000,
        help="side of random.tif and smooth.tif, the inputs of the `large` cases (default 18000)",
    )
    p.add_argument(
        "--reuse-inputs",
        action="store_true",
        help="reuse random.tif/smooth.tif already in --workdir if they have --warp-side (not removed at the end)",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per side and case (default 3)")
    p.add_argument(
        "--cases",
        default="raster",
        help=f"comma-separated cases or groups: raster ({','.join(DEFAULT_CASES)}; the default), "
        f"vector ({','.join(VECTOR_CASES)}), all (raster and vector), large ({','.join(LARGE_CASES)}; "
        "opt-in, not in all)",
    )
    p.add_argument("--workdir", type=Path, help="work directory (default: a fresh temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the inputs and outputs instead of removing them")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report to FILE")
    p.add_argument("--no-cli", action="store_true", help="skip the GDAL CLI side even if it is installed")
    p.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.cases = ["smoke"] if args.smoke else _case_names(args.cases)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown or not args.cases:
        p.error(
            f"unknown case(s) {unknown}; choose from {','.join(GROUPS['all'] + LARGE_CASES)} or the groups {','.join(GROUPS)}"
        )
    if args.repeat < 1 or args.size_mb <= 0 or args.points < 1 or args.polygons < 1 or args.warp_side < 64:
        p.error("--repeat, --size-mb, --points and --polygons must be positive, --warp-side at least 64")
    return args


def _cli_version(cases: list[Case]) -> str:
    """`gdalinfo --version` for raster cases, `ogrinfo --version` for vector cases (both when both run)."""
    raster, vector = any(not c.vector for c in cases), any(c.vector for c in cases)
    if raster and not vector:
        return _version(["gdalinfo", "--version"])
    parts = [f"{_version(['gdalinfo', '--version'])} (`gdalinfo --version`)"] if raster else []
    return "; ".join([*parts, f"{_version(['ogrinfo', '--version'])} (`ogrinfo --version`)"])


def _side_of(path: Path) -> int | None:
    """The side of an existing square 3-band uint16 input, None if it is missing or not one."""
    if not path.exists():
        return None
    import rasterio

    try:
        with rasterio.open(path) as ds:
            ok = ds.width == ds.height and ds.count == 3 and ds.dtypes[0] == "uint16"
            return ds.width if ok else None
    except rasterio.errors.RasterioIOError:
        return None


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    cases = [CASES[name] for name in args.cases]
    needed = {cmd[0] for case in cases for cmd in case.commands(0, [])}
    missing = sorted(c for c in needed if shutil.which(c) is None)
    cli = None if args.no_cli or missing else _cli_version(cases)
    if missing and not args.no_cli:
        log(f"GDAL CLI not found on PATH ({', '.join(missing)}): measuring the server side only")

    own_dir = args.workdir is None or not args.workdir.exists()
    workdir = Path(tempfile.mkdtemp(prefix="gdal-mcp-bench-")) if args.workdir is None else args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    src: Raster | None = None
    tiles: list[Raster] = []
    warp_sources: list[Raster] = []
    vectors: dict[str, VectorInput] = {}
    sizes = {
        "points.gpkg": ("Point", args.points, 1),
        SMALL_POINTS_FILE: ("Point", POINTS_SMALL, 2),
        "polygons.gpkg": ("Polygon", args.polygons, 3),
    }
    written: list[str] = []  # inputs this run generated (removed at the end from a directory it did not create)
    try:
        t0 = time.perf_counter()
        if any(c.source == "src.tif" for c in cases):
            log(f"generating ~{args.size_mb:g} MiB of pixels in {workdir}")
            written.append("src.tif")
            src = make_source(workdir / "src.tif", args.size_mb)
            if any(c.name == "mosaic" for c in cases):
                written += [f"tile{k}.tif" for k in range(1, 5)]
                tiles = make_tiles(src, workdir)
        for name in dict.fromkeys(c.source for c in cases if c.source in WARP_SOURCES):
            path = workdir / name
            if args.reuse_inputs and _side_of(path) == args.warp_side:
                log(f"reusing {path} ({args.warp_side}² × 3)")
                warp_sources.append(Raster(path, args.warp_side, args.warp_side))
                continue
            log(f"generating {name}: {args.warp_side}² × 3 uint16, {WARP_SOURCES[name]} values, in {workdir}")
            written.append(name)
            warp_sources.append(make_warp_source(path, args.warp_side, WARP_SOURCES[name]))
        for name in dict.fromkeys(c.source for c in cases if c.vector):
            geometry_type, count, seed = sizes[name]
            log(f"generating {name}: {count:,} {geometry_type.lower()}s in {workdir}")
            written += [name, f"{name}-journal", f"{name}-wal", f"{name}-shm"]
            vectors[name] = make_vector(workdir / name, geometry_type, count, seed)
        log(f"generated in {time.perf_counter() - t0:.1f} s")
        results = [Result(c, expected_features=vectors[c.source].count if c.vector else None) for c in cases]
        notes: list[str] = []
        rasters = [r.path.name for r in ([src] if src else []) + warp_sources]
        warmup = ("raster_info", {"path": rasters[0]}) if rasters else ("vector_info", {"path": next(iter(vectors))})
        asyncio.run(
            run_cases(results, workdir, [t.path.name for t in tiles], args.repeat, cli is not None, args.keep, notes, warmup)
        )
        text, ok = report(results, src, tiles, args.repeat, cli, notes, list(vectors.values()), warp_sources)
    finally:
        if args.keep:
            log(f"kept {workdir}")
        elif own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            _clean(workdir, *written)
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)
    sys.exit(0 if ok else 1)
