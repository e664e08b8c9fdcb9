"""Cancel on the Dask executor (issue 30): how long the workers stay busy after a heavy job is cancelled.

    .venv/bin/python -m bench.cancel                               # 1 GB source, the three cases, 3 repeats
    .venv/bin/python -m bench.cancel --size-mb 200 --repeat 1      # a quick look
    .venv/bin/python -m bench.cancel --workdir /tmp/cancel-bench   # keep the generated source there for the next run

Starts the real server (`python -m gdal_mcp --executor dask --dask-scheduler local:N`, `--workers`, default 2) over
stdio and drives it with the official `mcp` SDK. For each case and repeat it starts a heavy `raster_reproject`,
waits until the tiles run (the job's "warping …" message, then `--after` seconds), and cancels the call (the SDK
sends notifications/cancelled when the call's task is cancelled). Meanwhile every process below the server (the
Dask workers: the server itself holds local:N's scheduler and nannies) is sampled every 50 ms from /proc.

"stop" is the time from the cancel to the moment from which the workers' combined CPU rate over every following
1 s window stays below `--threshold` of one core (default 5 %; watched for `--quiet` seconds; idle Dask workers
take ~1-3 % of a core in ticks of 10 ms, which a shorter window would take for work). "clean" is the
time until the workspace holds neither the output nor any temporary output directory (`.gdal-mcp-tmp-*`: attempt
directories, spilled tiles); a leftover still there `--quiet` seconds after the stop is reported as such. "cpu
after" is the workers' CPU seconds from the cancel to the stop; "restarts" counts workers that were replaced (the
executor restarts a worker whose job has not stopped GRACE seconds after the cancel).

Cases (the source: bench.generate.make_source, 3-band uint16 DEFLATE, EPSG:32618):
- `4326`: reprojected to EPSG:4326, nearest, the output compressed as its input (tiles assembled by the job);
- `4326_raw`: the same into an uncompressed GTiff (each tile writes its pixels into the output where it ran);
- `down8`: resolution x 8 in the source's CRS, resampling "average" (few tiles, each reading 64 x its pixels).

Prints a markdown table (medians over the repeats, every repeat's figures beside). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.generate import make_source
from bench.measure import process_tree

TMP_PREFIX = ".gdal-mcp-tmp-"
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE = 0.05
WINDOW = 1.0

CASES: dict[str, dict[str, Any]] = {
    "4326": {"dst_crs": "EPSG:4326"},
    "4326_raw": {"dst_crs": "EPSG:4326", "creation_options": {"COMPRESS": "NONE"}},
    "down8": {"resolution": 80.0, "resampling": "average"},
}


def cpu_ticks(pid: int) -> int:
    """utime + stime of one process in clock ticks (its threads, dead ones included); -1 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return -1
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


class Sampler:
    """Samples the CPU ticks of every process below `server` every SAMPLE seconds, on a thread of its own: a list of
    (time, ticks used since the previous sample), and the set of worker pids seen."""

    def __init__(self, server: int) -> None:
        self.server = server
        self.samples: list[tuple[float, int]] = []
        self.pids: set[int] = set()
        self._last: dict[int, int] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def _read(self) -> int:
        used = 0
        now: dict[int, int] = {}
        for pid in process_tree(self.server):
            if pid == self.server:
                continue
            ticks = cpu_ticks(pid)
            if ticks < 0:
                continue
            now[pid] = ticks
            used += ticks - self._last.get(pid, ticks if pid in self.pids else 0)
            self.pids.add(pid)
        self._last = now
        return used

    def _run(self) -> None:
        self._read()
        while not self._stop.wait(SAMPLE):
            used = self._read()
            with self._lock:
                self.samples.append((time.monotonic(), used))

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def since(self, t0: float) -> list[tuple[float, int]]:
        with self._lock:
            return [s for s in self.samples if s[0] >= t0]

    def rate(self, t0: float, t1: float) -> float:
        """The workers' combined CPU rate (cores) between t0 and t1."""
        with self._lock:
            ticks = sum(u for t, u in self.samples if t0 < t <= t1)
        return ticks / TICK / max(t1 - t0, 1e-9)


def stop_time(samples: list[tuple[float, int]], t_cancel: float, threshold: float, quiet: float) -> float | None:
    """Seconds from t_cancel to the start of the first WINDOW after which no WINDOW holds `threshold` x WINDOW of CPU
    (checked for `quiet` seconds; None: not seen yet). A forward window: a window that starts before the work ended
    still holds it, one that starts after holds only idle ticks (under threshold: not mistaken for work)."""
    times = [t for t, _ in samples]
    sums = list(itertools.accumulate((u for _, u in samples), initial=0))
    stop = t_cancel
    for i, t in enumerate(times):
        end = bisect.bisect_right(times, t + WINDOW)
        if t + WINDOW > times[-1]:
            return None  # this window is not complete yet
        busy = (sums[end] - sums[i + 1]) / TICK / WINDOW >= threshold
        if busy:
            stop = times[i + 1]
        elif t - stop >= quiet:
            return stop - t_cancel
    return None


@dataclass
class Result:
    case: str
    stop: float  # s from the cancel until the workers are idle
    clean: float | None  # s from the cancel until no output and no temporary directory (None: never, within the watch)
    cpu_after: float  # workers' CPU seconds from the cancel to the stop
    busy_before: float  # workers' CPU rate (cores) in the second before the cancel
    restarts: int
    leftovers: list[str] = field(default_factory=list)


def leftovers(ws: Path, output: Path, before: frozenset[str] = frozenset()) -> list[str]:
    """The output, if it exists, and the temporary output directories (and what they hold) not in `before`."""
    found = [str(p.relative_to(ws)) for d in ws.rglob(f"{TMP_PREFIX}*") for p in (d, *d.rglob("*"))]
    if output.exists():
        found.append(str(output.relative_to(ws)))
    return [f for f in found if f not in before]


async def run_case(
    session: ClientSession,
    sampler: Sampler,
    ws: Path,
    source: str,
    case: str,
    i: int,
    after: float,
    threshold: float,
    quiet: float,
    trace: bool = False,
) -> Result:
    output = ws / "out" / f"cancel_{case}_{i}.tif"
    started = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if (message or "").startswith("warping "):
            started.set()

    earlier = frozenset(leftovers(ws, output))  # what earlier runs left (reported there)
    arguments = {"input": source, "output": f"out/{output.name}", "overwrite": True, **CASES[case]}
    call = asyncio.create_task(
        session.call_tool("raster_reproject", arguments, read_timeout_seconds=3600, progress_callback=on_progress)  # type: ignore[arg-type]
    )
    try:
        await asyncio.wait_for(started.wait(), 300)
    except TimeoutError:
        call.cancel()
        raise RuntimeError(f"{case}: the job did not start warping within 300 s") from None
    if call.done():
        raise RuntimeError(f"{case}: the call ended before the cancel: {call.result()}")
    await asyncio.sleep(after)
    if call.done():
        raise RuntimeError(f"{case}: the call ended before the cancel (raise --size-mb): {call.result()}")
    pids_before = set(sampler.pids)
    t_cancel = time.monotonic()
    busy = sampler.rate(t_cancel - 1.0, t_cancel)
    call.cancel()
    clean: float | None = None
    # Watch until the workers have been quiet for `quiet` seconds (and the workspace is clean), at most 60 s.
    while True:
        await asyncio.sleep(0.05)
        now = time.monotonic()
        if clean is None and not leftovers(ws, output, earlier):
            clean = now - t_cancel
        stop = stop_time(sampler.since(t_cancel), t_cancel, threshold, quiet)
        if stop is not None and (clean is not None or now - t_cancel - stop >= 2 * quiet) or now - t_cancel > 60:
            break
    try:
        await call
    except asyncio.CancelledError:
        pass
    samples = sampler.since(t_cancel)
    stop = stop_time(samples, t_cancel, threshold, quiet)
    if stop is None:
        raise RuntimeError(f"{case}: the workers were still busy 60 s after the cancel")
    cpu = sum(u for t, u in samples if t <= t_cancel + stop + 1e-9) / TICK
    restarts = len(sampler.pids - pids_before)
    left = leftovers(ws, output, earlier)
    if trace:
        buckets = [sum(u for t, u in samples if k * 0.5 < t - t_cancel <= (k + 1) * 0.5) / TICK / 0.5 for k in range(20)]
        rates = " ".join(f"{b:.2f}" for b in buckets)
        print(f"{case} #{i + 1}: workers' cores per 0.5 s after the cancel: {rates}", file=sys.stderr)
    print(
        f"{case} #{i + 1}: stop {stop:.2f} s, clean {'never' if clean is None else f'{clean:.2f} s'}, "
        f"workers' cpu after the cancel {cpu:.2f} s, busy before {busy:.2f} cores, new worker processes {restarts}, "
        f"left {left}, load {os.getloadavg()[0]:.2f}",
        file=sys.stderr,
    )
    return Result(case, stop, clean, cpu, busy, restarts, left)


async def settle(sampler: Sampler, threshold: float, seconds: float = 2.0, limit: float = 120.0) -> None:
    """Wait until the workers have been below `threshold` for `seconds` (a restarted worker loading GDAL …)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        await asyncio.sleep(0.25)
        now = time.monotonic()
        if now - t0 >= seconds and sampler.rate(now - seconds, now) < threshold:
            return


async def main_async(a: argparse.Namespace) -> list[Result]:
    ws = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="gdal-mcp-cancel-"))
    ws.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(ws / "out", ignore_errors=True)  # this benchmark's outputs (and what earlier runs left there)
    (ws / "out").mkdir()
    source = ws / f"source_{a.size_mb:g}.tif"
    if not source.exists():
        print(f"generating {source.name} ({a.size_mb:g} MiB of pixels)", file=sys.stderr)
        make_source(source, a.size_mb)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "gdal_mcp",
            "--workspace",
            str(ws),
            "--confirm",
            "never",
            "--timeout",
            "3600",
            "--executor",
            "dask",
            "--dask-scheduler",
            f"local:{a.workers}",
        ],
        env=env,
        cwd=os.getcwd(),
    )
    results: list[Result] = []
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        warm = await session.call_tool("raster_info", {"path": source.name})
        assert not warm.is_error, warm.content
        server = server_pid(ws)
        sampler = Sampler(server).start()
        try:
            for case in a.cases.split(","):
                for i in range(a.repeat):
                    await settle(sampler, a.threshold)
                    result = await run_case(session, sampler, ws, source.name, case, i, a.after, a.threshold, a.quiet, a.trace)
                    results.append(result)
        finally:
            sampler.stop()
    if not a.workdir:
        shutil.rmtree(ws, ignore_errors=True)
    return results


def server_pid(ws: Path) -> int:
    """The server this benchmark started: our child whose command line names the workspace."""
    for pid in process_tree(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gdal_mcp" in cmd and os.fsencode(str(ws)) in cmd:
            return pid
    raise RuntimeError("the server process was not found")


def table(results: list[Result], a: argparse.Namespace) -> str:
    lines = [
        f"Cancel on the Dask executor (local:{a.workers}, {a.size_mb:g} MiB source, cancel {a.after:g} s into the tiles, "
        f"idle = below {100 * a.threshold:g} % of a core; median of {a.repeat})",
        "",
        "| case | stop (s) | stop, each run | clean (s) | workers' CPU after the cancel (s) | busy before (cores) "
        "| new worker processes | left behind |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in dict.fromkeys(r.case for r in results):
        rows = [r for r in results if r.case == case]
        cleans = [r.clean for r in rows if r.clean is not None]
        lines.append(
            f"| {case} | {statistics.median(r.stop for r in rows):.2f} | {', '.join(f'{r.stop:.2f}' for r in rows)} | "
            f"{statistics.median(cleans):.2f}{'' if len(cleans) == len(rows) else ' (some never)'} | "
            f"{statistics.median(r.cpu_after for r in rows):.2f} | {statistics.median(r.busy_before for r in rows):.2f} | "
            f"{sum(r.restarts for r in rows)} | {sum(len(r.leftovers) for r in rows) or 'nothing'} |"
            if cleans
            else f"| {case} | {statistics.median(r.stop for r in rows):.2f} | … | never | … | … | … | "
            f"{[r.leftovers for r in rows]} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mb", type=float, default=1024, help="MiB of pixels in the generated source (default 1024)")
    p.add_argument("--workers", type=int, default=2, help="Dask workers (local:N, default 2)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    p.add_argument("--after", type=float, default=2.0, help="seconds after the first 'warping' message to cancel")
    p.add_argument("--threshold", type=float, default=0.05, help="idle: the workers' combined rate below this (cores)")
    p.add_argument("--quiet", type=float, default=3.0, help="seconds the workers must stay idle after the stop")
    p.add_argument("--trace", action="store_true", help="print the workers' CPU rate per 0.5 s after each cancel")
    p.add_argument("--workdir", help="workspace (kept, its generated source reused); default: a temporary one")
    a = p.parse_args()
    for case in a.cases.split(","):
        if case not in CASES:
            p.error(f"unknown case {case!r}")
    print(f"load before: {os.getloadavg()}", file=sys.stderr)
    results = asyncio.run(main_async(a))
    print(f"load after: {os.getloadavg()}", file=sys.stderr)
    print(table(results, a))
    sys.exit(1 if any(r.leftovers or r.clean is None for r in results) else 0)


if __name__ == "__main__":
    main()
