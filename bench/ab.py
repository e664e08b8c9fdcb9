"""A/B of two checkouts on the same machine at the same time: both servers up, the same calls interleaved.

`python -m bench.ab --other /path/to/other/checkout` starts this checkout's server and the other's (each with its
own `.venv`, over stdio, official `mcp` SDK client) on one workspace holding a generated source raster, then runs
each case `--pairs` times on both, alternating which goes first. On a machine whose speed drifts by ±10-20 % from
minute to minute, the ratio of two calls made one after the other says more than two separate runs of the bench.

Reported per case: the medians, the paired ratio (this / other: median, min, max) and the CPU time the servers'
workers spent (summed over the process tree, from /proc), which noise from other tenants disturbs less than wall
time. A worktree of an earlier commit makes a convenient other: `git worktree add /tmp/before <commit>` and
`uv sync` in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.generate import make_source

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "reproject": (
        "raster_reproject",
        {
            "input": "src.tif",
            "output": "out_{side}_{i}.tif",
            "dst_crs": "EPSG:4326",
            "resampling": "nearest",
            "creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"},
        },
    ),
    # uncompressed tiled output: the tiles write their own pixels (engine/raster/rawtiff.py)
    "reproject_raw": (
        "raster_reproject",
        {
            "input": "src.tif",
            "output": "raw_{side}_{i}.tif",
            "dst_crs": "EPSG:4326",
            "resampling": "nearest",
            "creation_options": {"TILED": "YES", "COMPRESS": "NONE"},  # else the DEFLATE input's codec is kept
        },
    ),
    "cog": (
        "raster_convert",
        {
            "input": "src.tif",
            "output": "cog_{side}_{i}.tif",
            "format": "COG",
            "creation_options": {"COMPRESS": "DEFLATE", "NUM_THREADS": "ALL_CPUS", "OVERVIEW_RESAMPLING": "NEAREST"},
        },
    ),
    "stats": ("raster_stats", {"input": "src.tif"}),
}


def tree_cpu(root: int) -> float:
    """User and system seconds of every process below `root` (its workers), from /proc."""
    children: dict[int, list[tuple[int, float]]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        f = text[text.rfind(")") + 2 :].split()
        children.setdefault(int(f[1]), []).append((int(name), sum(int(v) for v in f[11:15]) / tick))
    total, stack = 0.0, [root]
    while stack:
        for pid, cpu in children.get(stack.pop(), []):
            total += cpu
            stack.append(pid)
    return total


def server_pid(checkout: Path, workspace: Path) -> int | None:
    python = str(checkout / ".venv" / "bin" / "python")
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmd = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].decode() == python and b"gdal_mcp" in cmd and str(workspace).encode() in cmd:
                return int(name)
    return None


async def run(checkouts: dict[str, Path], workspace: Path, cases: list[str], pairs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    async with AsyncExitStack() as stack:
        sessions, pids = {}, {}
        for side, checkout in checkouts.items():
            params = StdioServerParameters(
                command=str(checkout / ".venv" / "bin" / "python"),
                cwd=str(checkout),
                args=[
                    "-m",
                    "gdal_mcp",
                    "--workspace",
                    str(workspace),
                    "--confirm",
                    "never",
                    "--workers",
                    "2",
                    "--timeout",
                    "3600",
                ],
                env=env,
            )
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.call_tool("raster_info", {"path": "src.tif"})
            sessions[side] = session
            pids[side] = server_pid(checkout, workspace)
        wall = {c: {s: [] for s in checkouts} for c in cases}
        cpu = {c: {s: [] for s in checkouts} for c in cases}
        for i in range(pairs):
            for case in cases:
                order = list(checkouts) if i % 2 == 0 else list(reversed(checkouts))
                for side in order:
                    tool, template = CASES[case]
                    args = json.loads(json.dumps(template).replace("{side}", side).replace("{i}", str(i)))
                    c0 = tree_cpu(pids[side]) if pids[side] else 0.0
                    t0 = time.perf_counter()
                    result = await sessions[side].call_tool(tool, args)
                    wall[case][side].append(time.perf_counter() - t0)
                    cpu[case][side].append(tree_cpu(pids[side]) - c0 if pids[side] else float("nan"))
                    if result.is_error:
                        raise SystemExit(f"{side} {tool}: {result.structured_content}")
                    if "output" in args:
                        (workspace / args["output"]).unlink(missing_ok=True)
    return {"wall": wall, "cpu": cpu}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n\n")[0])
    p.add_argument("--other", type=Path, required=True, help="the other checkout (with its own .venv)")
    p.add_argument("--cases", default="reproject,cog,stats", help=f"comma-separated: {', '.join(CASES)}")
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--size-mb", type=float, default=300, help="MiB of pixels in the source raster")
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    this = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="gdal-mcp-ab-") as tmp:
        workspace = Path(tmp)
        make_source(workspace / "src.tif", args.size_mb)
        out = asyncio.run(run({"this": this, "other": args.other.resolve()}, workspace, cases, args.pairs))
    print(
        "| case | this median s | other median s | paired ratio this/other: median (min–max) | workers' CPU "
        "this / other s (median) | pairs |\n|---|---|---|---|---|---|"
    )
    for case in cases:
        a, b = out["wall"][case]["this"], out["wall"][case]["other"]
        ratios = [x / y for x, y in zip(a, b, strict=True)]
        ca, cb = out["cpu"][case]["this"], out["cpu"][case]["other"]
        print(
            f"| {case} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | {statistics.median(ratios):.3f} "
            f"({min(ratios):.3f}–{max(ratios):.3f}) | {statistics.median(ca):.2f} / {statistics.median(cb):.2f} | "
            f"{len(ratios)} |"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
