"""Load over HTTP: many concurrent clients making quick metadata calls, then quick calls beside heavy jobs.

`python -m bench.load` starts the real server (`python -m gdal_mcp --transport http`, with a token) on a
free loopback port, and drives it with raw MCP 2026-07-28 requests (httpx2, one connection pool per
client), then with the official MCP Python SDK's client (a ClientSession each, handshake era). Phases:

1. cold: `--clients` clients × `--calls` `raster_info` calls, every call on a different file, so none is
   answered from the metadata cache (what the workers sustain);
2. cached: the same calls again (the answers are now cached: what the server itself sustains);
3. and 4. the same two through `--sdk-clients` SDK sessions (opened before the clock starts; each lists the tools
   once, on its first call, to check results against the output schemas, as the SDK does);
5. beside heavy jobs: two `raster_stats` on a generated large raster kept running, while one client makes
   `--quick-calls` sequential `raster_info` calls on files not read before, then the same again cached.

CPU per call is charged from the start of each phase's clock to its last call, for the server process, its
workers and this load generator (the clients) separately.

Every figure is printed; `--markdown FILE` also writes them as a report section. All traffic goes to
127.0.0.1, and every phase is bounded in calls and in time (`--deadline`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

PROTOCOL = "2026-07-28"
TOKEN = "bench-load-token"


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)  # seconds, successful calls
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    server_cpu: float = 0.0  # CPU seconds of the server process during the phase
    workers_cpu: float = 0.0  # CPU seconds of its worker processes (those alive at the end)
    client_cpu: float = 0.0  # CPU seconds of this load generator
    open_seconds: float = 0.0  # time to open every client's session before the clock started
    sessions_cpu: list[float] = field(default_factory=list)  # the server's CPU seconds per session opened

    @property
    def calls(self) -> int:
        return len(self.latencies) + len(self.errors)

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        data = sorted(self.latencies)
        return 1000 * data[min(len(data) - 1, max(0, round(q / 100 * len(data) + 0.5) - 1))]

    def row(self) -> str:
        rate = len(self.latencies) / self.seconds if self.seconds else float("nan")
        n = max(1, self.calls)
        cpu = (
            (f"{1000 * self.server_cpu / n:.1f} / {1000 * self.workers_cpu / n:.1f} / {1000 * self.client_cpu / n:.1f}")
            if self.client_cpu
            else "—"
        )
        return (
            f"| {self.name} | {self.calls} | {len(self.errors)} | {rate:.0f} | {self.pct(50):.0f} | "
            f"{self.pct(95):.0f} | {self.pct(99):.0f} | {1000 * max(self.latencies, default=float('nan')):.0f} | "
            f"{cpu} |"
        )


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return 0.0
    fields = data[data.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class CpuMeter:
    """CPU seconds of the server, of its workers and of this process, between two readings."""

    def __init__(self, server_pid: int) -> None:
        from bench.measure import process_tree

        self.server_pid = server_pid
        self._tree = process_tree

    def read(self) -> tuple[float, float, float]:
        workers = sum(cpu_seconds(p) for p in self._tree(self.server_pid) if p != self.server_pid)
        return cpu_seconds(self.server_pid), workers, time.process_time()

    def charge(self, phase: Phase, before: tuple[float, float, float]) -> None:
        after = self.read()
        phase.server_cpu, phase.workers_cpu, phase.client_cpu = (a - b for a, b in zip(after, before, strict=True))


class McpHttp:
    """A minimal stateless (2026-07-28) MCP client over streamable HTTP."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.http = httpx2.AsyncClient(
            timeout=120,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": PROTOCOL,
            },
        )
        self._id = 0

    async def request(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        self._id += 1
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientInfo": {"name": "bench-load", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        }
        headers = {"Mcp-Method": method}
        if name is not None:
            headers["Mcp-Name"] = name
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        r = await self.http.post(self.url, content=json.dumps(body), headers=headers)
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
        text = r.text
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            for line in text.splitlines():
                if line.startswith("data:"):
                    msg = json.loads(line[5:])
                    if msg.get("id") == self._id:
                        return msg  # type: ignore[no-any-return]
            raise RuntimeError(f"no response in the event stream: {text[:200]}")
        return r.json()  # type: ignore[no-any-return]

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        msg = await self.request("tools/call", {"name": tool, "arguments": arguments}, name=tool)
        if "error" in msg:
            raise RuntimeError(f"JSON-RPC error {msg['error']}")
        result = msg["result"]
        if result.get("isError"):
            raise RuntimeError(f"tool error: {json.dumps(result.get('structuredContent'))[:300]}")
        return result  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self.http.aclose()


class McpSdk:
    """The official MCP Python SDK's client (ClientSession over streamable HTTP): the handshake era (initialize,
    then a session id on every request, and the SSE stream the SDK opens), as most hosts speak it today."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self._stack: contextlib.AsyncExitStack | None = None
        self.session: Any = None

    async def open(self) -> None:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        stack = contextlib.AsyncExitStack()
        http = await stack.enter_async_context(
            # verify=False: plain http on loopback; it spares each client loading the CA bundle (~20 ms of CPU)
            httpx2.AsyncClient(timeout=120, headers={"Authorization": f"Bearer {self.token}"}, verify=False)
        )
        read, write = await stack.enter_async_context(streamable_http_client(self.url, http_client=http))
        self.session = await stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        self._stack = stack

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        result = await self.session.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(f"tool error: {json.dumps(result.structured_content)[:300]}")
        return result

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_workspace(ws: Path, files: int, heavy_mb: int) -> Path | None:
    """`files` small GeoTIFFs (q0000.tif …) and, if heavy_mb > 0, a large raster for the heavy jobs."""
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin

    first = ws / "q0000.tif"
    with rasterio.open(
        first,
        "w",
        driver="GTiff",
        width=256,
        height=256,
        count=1,
        dtype="uint8",
        crs="EPSG:32618",
        transform=from_origin(500000, 4500000, 10, 10),
        tiled=True,
    ) as ds:
        ds.write(np.arange(256 * 256, dtype=np.uint32).reshape(1, 256, 256).astype("uint8"))
    for i in range(1, files):
        shutil.copyfile(first, ws / f"q{i:04d}.tif")
    if heavy_mb <= 0:
        return None
    from bench.generate import make_source

    return make_source(ws / "heavy.tif", heavy_mb).path


def start_server(ws: Path, port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    env["GDAL_MCP_TOKEN"] = TOKEN
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gdal_mcp",
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workspace",
            str(ws),
            "--workers",
            str(workers),
            "--timeout",
            "600",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )


async def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    client = McpHttp(url, TOKEN)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise SystemExit(f"the server exited: {err[-2000:]}")
            try:
                await client.call_tool("raster_info", {"path": "q0000.tif"})
                return
            except (httpx2.HTTPError, RuntimeError, OSError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await client.close()


async def run_clients(
    url: str, phase: Phase, paths: list[list[str]], deadline: float, sdk: bool = False, meter: CpuMeter | None = None
) -> Phase:
    """One client per list in `paths`, each calling raster_info on its paths in turn, all at once. With `sdk`, each
    client is an official SDK ClientSession, its session opened (initialize) before the clock starts. With `meter`,
    the CPU the phase used (from the start of the clock to the last call) is charged to it."""
    start = asyncio.Event()
    ready: list[bool] = []

    async def client(mine: list[str]) -> None:
        c: McpHttp | McpSdk = McpSdk(url, TOKEN) if sdk else McpHttp(url, TOKEN)
        try:
            if isinstance(c, McpSdk):
                await c.open()
            ready.append(True)
            await start.wait()
            for p in mine:
                t0 = time.perf_counter()
                try:
                    await c.call_tool("raster_info", {"path": p})
                    phase.latencies.append(time.perf_counter() - t0)
                except Exception as e:  # noqa: BLE001 - counted and reported
                    phase.errors.append(f"{type(e).__name__}: {e}"[:300])
        finally:
            await c.close()

    opening = meter.read() if meter is not None else None
    tasks = [asyncio.create_task(client(m)) for m in paths]
    opened = time.perf_counter()
    while len(ready) < len(paths) and time.perf_counter() - opened < deadline and not all(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    phase.open_seconds = time.perf_counter() - opened
    await asyncio.sleep(0.2)  # every client ready before the clock starts
    before = meter.read() if meter is not None else None
    if sdk and opening is not None and before is not None:
        phase.sessions_cpu = [(before[0] - opening[0]) / len(paths)] * len(paths)
    t0 = time.perf_counter()
    start.set()
    done, pending = await asyncio.wait(tasks, timeout=deadline)
    phase.seconds = time.perf_counter() - t0
    if meter is not None and before is not None:
        meter.charge(phase, before)  # closing the sessions (after their last call) counts; opening them does not
    for t in pending:
        t.cancel()
        phase.errors.append("deadline")
    return phase


async def beside_heavy(url: str, paths: list[str], heavy: str, deadline: float) -> tuple[Phase, Phase, int]:
    """Sequential quick calls (cold, then cached) while two raster_stats jobs keep running."""
    cold, cached = Phase("quick, cold, 2 heavy jobs running"), Phase("quick, cached, 2 heavy jobs running")
    stop = asyncio.Event()
    finished = [0]

    async def heavy_loop() -> None:
        c = McpHttp(url, TOKEN)
        try:
            while not stop.is_set():
                await c.call_tool("raster_stats", {"input": heavy})
                finished[0] += 1
        except asyncio.CancelledError:
            pass
        finally:
            await c.close()

    heavies = [asyncio.create_task(heavy_loop()) for _ in range(2)]
    await asyncio.sleep(2.0)  # both heavy jobs are reading pixels now
    c = McpHttp(url, TOKEN)
    end = time.monotonic() + deadline
    try:
        for phase in (cold, cached):
            t0 = time.perf_counter()
            for p in paths:
                if time.monotonic() > end:
                    phase.errors.append("deadline")
                    break
                s = time.perf_counter()
                try:
                    await c.call_tool("raster_info", {"path": p})
                    phase.latencies.append(time.perf_counter() - s)
                except Exception as e:  # noqa: BLE001
                    phase.errors.append(f"{type(e).__name__}: {e}"[:300])
                await asyncio.sleep(0.02)  # a person's or an agent's pace, not a flood
            phase.seconds = time.perf_counter() - t0
    finally:
        await c.close()
        stop.set()
        for t in heavies:
            t.cancel()
        await asyncio.gather(*heavies, return_exceptions=True)
    return cold, cached, finished[0]


async def measure(args: argparse.Namespace, ws: Path, heavy: Path | None) -> list[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = start_server(ws, port, args.workers)
    lines: list[str] = []
    try:
        t0 = time.perf_counter()
        await wait_ready(url, proc)
        lines.append(f"- server ready (first raster_info answered) {time.perf_counter() - t0:.2f} s after spawn")
        n = args.clients * args.calls
        names = [f"q{1 + i:04d}.tif" for i in range(n)]  # q0000 was the warm-up call
        per_client = [names[c * args.calls : (c + 1) * args.calls] for c in range(args.clients)]
        meter = CpuMeter(proc.pid)
        phases = []
        for label in ("cold (uncached)", "cached") if args.clients else ():
            phase = Phase(f"raw {PROTOCOL}: {args.clients} clients × {args.calls}, {label}")
            phases.append(await run_clients(url, phase, per_client, args.deadline, meter=meter))
        sdk_phases = []
        if args.sdk_clients:
            # The same calls through the official SDK (a session each), on files of their own: uncached, then cached.
            m = args.sdk_clients * args.calls
            base = 1 + n + 2 * args.quick_calls
            names = [f"q{base + i:04d}.tif" for i in range(m)]
            sdk_paths = [names[c * args.calls : (c + 1) * args.calls] for c in range(args.sdk_clients)]
            for label in ("cold (uncached)", "cached"):
                phase = Phase(f"SDK sessions (2025-11-25): {args.sdk_clients} clients × {args.calls}, {label}")
                sdk_phases.append(await run_clients(url, phase, sdk_paths, args.deadline, sdk=True, meter=meter))
            phases += sdk_phases
        heavy_runs = 0
        if heavy is not None:
            quick = [f"q{1 + n + i:04d}.tif" for i in range(args.quick_calls)]
            cold, cached, heavy_runs = await beside_heavy(url, quick, heavy.name, args.deadline)
            phases += [cold, cached]
        lines += [
            "",
            "| phase | calls | errors | calls/s | p50 ms | p95 ms | p99 ms | max ms | CPU ms per call: "
            "server / workers / clients |",
            "|---|---|---|---|---|---|---|---|---|",
            *(p.row() for p in phases),
        ]
        with open("/proc/loadavg") as f:
            lines.append(f"\nLoad average at the end (other work on the machine counts here): {f.read().split()[:3]}")
        if heavy is not None:
            lines.append(f"\n{heavy_runs} raster_stats job(s) on `{heavy.name}` completed during the last two phases.")
        errors = [e for p in phases for e in p.errors]
        if errors:
            lines.append(f"\nFirst errors: {errors[:3]}")
        verdict = []
        for p in phases[: len(phases) - (2 if heavy is not None else 0)]:
            rate = len(p.latencies) / p.seconds if p.seconds else 0.0
            opened = (
                f"; {len(p.sessions_cpu)} sessions opened in {p.open_seconds:.1f} s, server CPU "
                f"{1000 * sum(p.sessions_cpu) / max(1, len(p.sessions_cpu)):.1f} ms per session (initialize)"
                if p.sessions_cpu
                else ""
            )
            verdict.append(
                f"{p.name}: errors {len(p.errors)}, {rate:.0f} calls/s (target ≥ 150), p95 {p.pct(95):.0f} ms "
                f"(target ≤ 500){opened}"
            )
        if heavy is not None:
            verdict.append(
                f"beside heavy jobs: p95 {phases[-2].pct(95):.0f} ms uncached, {phases[-1].pct(95):.0f} ms cached (target ≤ 150)"
            )
        lines.append("\n" + "; ".join(verdict) + ".")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--calls", type=int, default=20, help="raster_info calls per client")
    p.add_argument("--sdk-clients", type=int, default=50, help="official SDK clients (a session each; 0: skip)")
    p.add_argument("--quick-calls", type=int, default=100, help="quick calls beside the heavy jobs (each phase)")
    p.add_argument("--heavy-mb", type=int, default=300, help="MiB of pixels in the heavy jobs' raster (0: skip)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--deadline", type=float, default=300, help="seconds a phase may take before it is stopped")
    p.add_argument("--workdir", type=Path, help="where the inputs go (default: a fresh temporary directory)")
    p.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = p.parse_args(argv)

    own = args.workdir is None
    ws = Path(tempfile.mkdtemp(prefix="gdal-mcp-load-")) if own else args.workdir
    ws.mkdir(parents=True, exist_ok=True)
    try:
        total = 1 + (args.clients + args.sdk_clients) * args.calls + 2 * args.quick_calls
        print(f"generating {total} small rasters and a {args.heavy_mb} MiB raster in {ws} …", file=sys.stderr)
        heavy = make_workspace(ws, total, args.heavy_mb)
        time.sleep(1.1)  # the metadata cache does not keep answers about files changed in the last second
        lines = asyncio.run(measure(args, ws, heavy))
    finally:
        if own:
            shutil.rmtree(ws, ignore_errors=True)
    header = [
        "## Load over HTTP",
        "",
        f"`python -m bench.load --clients {args.clients} --calls {args.calls} --quick-calls {args.quick_calls} "
        f"--heavy-mb {args.heavy_mb} --workers {args.workers}` on {os.cpu_count()} CPUs "
        f"({platform.platform()}); the clients (raw MCP {PROTOCOL} over httpx2, then official MCP SDK sessions, all in "
        "one process) share the machine with the server. Latency is per call, as the client sees it.",
        "",
    ]
    report = "\n".join(header + lines) + "\n"
    print(report)
    if args.markdown:
        args.markdown.write_text(report)


if __name__ == "__main__":
    main()
