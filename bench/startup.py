"""Cold start and warm latency over stdio, as an MCP host sees them.

`python -m bench.startup` spawns `python -m gdal_mcp` over stdio and times spawn → `initialize` answered →
(with `--list`, tools/list as hosts do) → first `raster_info` result (`--runs` times, median reported), then the
p50/p95 of `--calls` sequential warm `raster_info` calls: on one file (answered from the metadata cache after the
first) and on different files (each read by a worker). Raw JSON-RPC lines on the pipes, so the client costs little.

The cold starts alternate, in the same run, with references: the same server through `scripts/serve` (`uv run`,
as the README starts it; `--uv`), another checkout's server (`--other DIR`, with its own .venv), and the floor of
any server on this stack (`--floor`): a minimal FastMCP stdio server with the tasks extension and one tool that
answers without GDAL.
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

ROOT = Path(__file__).resolve().parent.parent

#: the floor: FastMCP and its tasks extension (as gdal-mcp uses them), one tool, no GDAL
MINIMAL_SERVER = """
import os
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
os.environ.setdefault("PY_KEY_VALUE_DISABLE_BEARTYPE", "true")
from fastmcp import FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("minimal")
mcp.add_extension(TasksExtension(url="memory://minimal", name="minimal"))


@mcp.tool
def raster_info(path: str) -> dict:
    \"\"\"Echo the path.\"\"\"
    return {"path": path}


mcp.run(transport="stdio", show_banner=False)
"""


def server_command(kind: str, ws: Path, workers: int, other: Path | None = None) -> tuple[list[str], Path]:
    """The command line (and its working directory) of one kind of server."""
    args = ["--workspace", str(ws), "--workers", str(workers)]
    if kind == "this":
        return [sys.executable, "-m", "gdal_mcp", *args], ROOT
    if kind == "uv run":
        return [str(ROOT / "scripts" / "serve"), *args], ROOT
    if kind == "other":
        assert other is not None
        return [str(other / ".venv" / "bin" / "python"), "-m", "gdal_mcp", *args], other
    if kind == "floor":
        return [sys.executable, "-c", MINIMAL_SERVER], ROOT
    raise ValueError(kind)


class StdioServer:
    def __init__(self, ws: Path, workers: int, command: tuple[list[str], Path] | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
        argv, cwd = command or server_command("this", ws, workers)
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
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

    def list_tools(self) -> None:
        self.request("tools/list", {})

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
    p.add_argument("--runs", type=int, default=5, help="cold starts to time, of each kind")
    p.add_argument("--calls", type=int, default=100, help="warm calls per kind")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--uv", action="store_true", help="also start the server through scripts/serve (uv run)")
    p.add_argument("--floor", action="store_true", help="also time a minimal FastMCP + tasks server (the floor)")
    p.add_argument("--other", type=Path, help="also time another checkout's server (its .venv), e.g. a worktree of main")
    p.add_argument("--list", action="store_true", help="list the tools between initialize and the first call, as hosts do")
    args = p.parse_args(argv)

    # Up-to-date bytecode for the package, as an installed server has after its first run: a checkout edited under
    # PYTHONDONTWRITEBYTECODE=1 would otherwise compile its changed modules on every cold start.
    compileall.compile_dir(ROOT / "gdal_mcp", quiet=1)
    if args.other:
        compileall.compile_dir(args.other / "gdal_mcp", quiet=1)
    kinds = ["this", *(["uv run"] if args.uv else []), *(["other"] if args.other else []), *(["floor"] if args.floor else [])]
    ws = Path(tempfile.mkdtemp(prefix="gdal-mcp-startup-"))
    cold: dict[str, dict[str, list[float]]] = {k: {"init": [], "first": [], "server": [], "worker": []} for k in kinds}
    try:
        make_workspace(ws, len(kinds) * args.runs + args.calls + 1, 0)
        time.sleep(1.1)  # older than the metadata cache's settle time
        n = 0
        for _ in range(args.runs):
            for kind in kinds:  # alternating, so a change in the machine's load touches every kind alike
                s = StdioServer(ws, args.workers, server_command(kind, ws, args.workers, args.other))
                s.initialize()
                cold[kind]["init"].append(time.perf_counter() - s.t0)
                if args.list:
                    s.list_tools()
                s.raster_info(f"q{n:04d}.tif")
                n += 1
                cold[kind]["first"].append(time.perf_counter() - s.t0)
                tree = process_tree(s.proc.pid)
                # the server: the deepest python of the tree for `uv run` (uv itself, then the server it runs)
                pid = server_pid(s.proc.pid, tree)
                # under `uv run`, uv's own CPU counts too (it checks the environment before it starts the server)
                cold[kind]["server"].append(cpu_seconds(pid) + (cpu_seconds(s.proc.pid) if pid != s.proc.pid else 0.0))
                workers = [cpu_seconds(w) for w in tree if w not in (pid, s.proc.pid)]
                cold[kind]["worker"].append(max(workers, default=0.0))
                s.close()
                time.sleep(0.5)
        s = StdioServer(ws, args.workers)
        s.initialize()
        s.raster_info("q0000.tif")
        time.sleep(2.5)  # every worker warm
        same, different = [], []
        for _ in range(args.calls):
            t = time.perf_counter()
            s.raster_info("q0000.tif")
            same.append(time.perf_counter() - t)
        for i in range(args.calls):
            t = time.perf_counter()
            s.raster_info(f"q{n + 1 + i:04d}.tif")
            different.append(time.perf_counter() - t)
        s.close()
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print("## Start-up and warm calls over stdio\n")
    flags = " ".join(
        ["--uv"] * args.uv + ["--floor"] * args.floor + ["--list"] * args.list + ([f"--other {args.other}"] if args.other else [])
    )
    print(
        f"`python -m bench.startup --runs {args.runs} --calls {args.calls} --workers {args.workers} {flags}` "
        f"({os.cpu_count()} CPUs, load average at the end {load}); cold starts of each kind alternate. On a busy "
        "machine the wall times mostly measure the wait for a CPU; the CPU times do not.\n"
    )
    print(
        "| server | spawn → initialize answered, ms | spawn → "
        f"{'tools/list, then ' if args.list else ''}first raster_info result, ms (min–max) | "
        "server CPU then, ms | busiest worker's CPU then, ms |\n|---|---|---|---|---|"
    )
    names = {
        "this": "`python -m gdal_mcp`",
        "uv run": "`scripts/serve` (uv run)",
        "other": f"other: {args.other}",
        "floor": "floor: minimal FastMCP + tasks",
    }
    for kind in kinds:
        c = cold[kind]
        print(
            f"| {names[kind]} | {1000 * statistics.median(c['init']):.0f} | {1000 * statistics.median(c['first']):.0f} "
            f"({1000 * min(c['first']):.0f}–{1000 * max(c['first']):.0f}) | {1000 * statistics.median(c['server']):.0f} | "
            f"{1000 * statistics.median(c['worker']):.0f} |"
        )
    print("\n| warm raster_info | p50 ms | p95 ms | max ms |\n|---|---|---|---|")
    for name, values in (("same file (cached)", same), ("a different file each call", different)):
        print(f"| {name} | {pct(values, 50):.1f} | {pct(values, 95):.1f} | {1000 * max(values):.1f} |")


def _cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _is_server(line: list[bytes]) -> bool:
    """`python -m gdal_mcp …` or `python …/bin/gdal-mcp …` (not uv, not a worker: `-m gdal_mcp.execution…`)."""
    return (b"-m" in line and line[line.index(b"-m") + 1 : line.index(b"-m") + 2] == [b"gdal_mcp"]) or (
        len(line) > 1 and line[1].endswith(b"/gdal-mcp")
    )


def server_pid(root: int, tree: list[int]) -> int:
    """The server's process: `root` itself, or under `uv run` (uv starts the server and waits) its child."""
    return next((pid for pid in [root, *tree] if _is_server(_cmdline(pid))), root)


if __name__ == "__main__":
    main()
