"""Cold start and warm latency over stdio, as an MCP host sees them.

`python -m bench.startup` spawns `python -m gdal_mcp` over stdio and times spawn → `initialize` answered →
first `raster_info` result (`--runs` times, median reported), then the p50/p95 of `--calls` sequential
warm `raster_info` calls: on one file (answered from the metadata cache after the first) and on
different files (each read by a worker). Raw JSON-RPC lines on the pipes, so the client costs little.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.load import cpu_seconds, make_workspace
from bench.measure import process_tree


class StdioServer:
    def __init__(self, ws: Path, workers: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gdal_mcp", "--workspace", str(ws), "--workers", str(workers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed stdout")
            msg = json.loads(line)
            if msg.get("id") == self._id:
                if "error" in msg or msg.get("result", {}).get("isError"):
                    raise RuntimeError(str(msg)[:300])
                return msg  # type: ignore[no-any-return]

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def initialize(self) -> None:
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench-startup", "version": "0"}},
        )
        self.notify("notifications/initialized")

    def raster_info(self, path: str) -> None:
        self.request("tools/call", {"name": "raster_info", "arguments": {"path": path}})

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pct(values: list[float], q: float) -> float:
    data = sorted(values)
    return 1000 * data[min(len(data) - 1, max(0, round(q / 100 * len(data) + 0.5) - 1))]


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="cold starts to time")
    p.add_argument("--calls", type=int, default=100, help="warm calls per kind")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)

    # Up-to-date bytecode for the package, as an installed server has after its first run: a checkout edited under
    # PYTHONDONTWRITEBYTECODE=1 would otherwise compile its changed modules on every cold start.
    compileall.compile_dir(Path(__file__).resolve().parent.parent / "gdal_mcp", quiet=1)
    ws = Path(tempfile.mkdtemp(prefix="gdal-mcp-startup-"))
    try:
        make_workspace(ws, args.runs + args.calls + 1, 0)
        time.sleep(1.1)  # older than the metadata cache's settle time
        initialized, first, server_cpu, worker_cpu = [], [], [], []
        for i in range(args.runs):
            s = StdioServer(ws, args.workers)
            s.initialize()
            initialized.append(time.perf_counter() - s.t0)
            s.raster_info(f"q{i:04d}.tif")
            first.append(time.perf_counter() - s.t0)
            pid = s.proc.pid
            server_cpu.append(cpu_seconds(pid))
            worker_cpu.append(max(cpu_seconds(w) for w in process_tree(pid) if w != pid))
            s.close()
            time.sleep(0.5)
        s = StdioServer(ws, args.workers)
        s.initialize()
        s.raster_info("q0000.tif")
        time.sleep(2.0)  # every worker warm
        same, different = [], []
        for _ in range(args.calls):
            t = time.perf_counter()
            s.raster_info("q0000.tif")
            same.append(time.perf_counter() - t)
        for i in range(args.calls):
            t = time.perf_counter()
            s.raster_info(f"q{args.runs + 1 + i:04d}.tif")
            different.append(time.perf_counter() - t)
        s.close()
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print("## Start-up and warm calls over stdio\n")
    print(
        f"`python -m bench.startup --runs {args.runs} --calls {args.calls} --workers {args.workers}` "
        f"({os.cpu_count()} CPUs, load average at the end {load}). On a busy machine the wall times mostly "
        "measure the wait for a CPU; the CPU times do not.\n"
    )
    print("| measure | median ms | min ms | max ms |\n|---|---|---|---|")
    for name, values in (
        ("spawn → initialize answered", initialized),
        ("spawn → first raster_info result", first),
        ("server process CPU at that moment", server_cpu),
        ("busiest worker's CPU at that moment", worker_cpu),
    ):
        print(f"| {name} | {1000 * statistics.median(values):.0f} | {1000 * min(values):.0f} | {1000 * max(values):.0f} |")
    print("\n| warm raster_info | p50 ms | p95 ms | max ms |\n|---|---|---|---|")
    for name, values in (("same file (cached)", same), ("a different file each call", different)):
        print(f"| {name} | {pct(values, 50):.1f} | {pct(values, 95):.1f} | {1000 * max(values):.1f} |")


if __name__ == "__main__":
    main()
