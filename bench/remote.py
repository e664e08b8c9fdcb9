"""Remote COGs by windows (issue 27): what raster_info, a bbox raster_stats and a bbox raster_clip of a large COG over
HTTP fetch, through the real server and the official `mcp` SDK, beside the GDAL command line on the same URL.

    .venv/bin/python -m bench.remote                          # a ~1 GiB COG (3 x uint16, random), kept in --workdir
    .venv/bin/python -m bench.remote --size-mb 200            # a quicker look
    .venv/bin/python -m bench.remote --workdir /tmp/remote-bench

The COG is served by tests.remote_servers.RangeServer (HTTP/1.1, HEAD and byte ranges) in a child process on
127.0.0.1, which logs every request and the bytes it sent. The server runs as `python -m gdal_mcp --allow-remote
http://127.0.0.1:PORT`. For each call the table gives the bytes the server's log counted, their share of the file,
the figure the tool's result reported (`remote.bytes`, GDAL's network statistics) and whether they agree, then the
same for the reference: `gdalinfo`, `gdallocationinfo`-free `gdal_translate -projwin` (the clip) and
`gdalinfo -stats` on a `-projwin` VRT are not the same work, so the reference rows are gdalinfo and gdal_translate
-projwin over /vsicurl/ (Debian's gdal-bin), with the server's log as the count. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.windows import Window


def make_cog(path: Path, size_mb: float) -> None:
    """A 3-band uint16 COG of about `size_mb` MiB (random values: it compresses little), 512-px tiles, overviews."""
    side = int(math.sqrt(size_mb * (1 << 20) / 6)) // 512 * 512
    src = path.with_suffix(".src.tif")
    profile = dict(
        driver="GTiff", width=side, height=side, count=3, dtype="uint16", crs="EPSG:32633", tiled=True,
        blockxsize=512, blockysize=512, transform=rasterio.transform.from_origin(400_000, 5_400_000, 10, 10), bigtiff="YES",
    )  # fmt: skip
    rng = np.random.default_rng(7)
    with rasterio.open(src, "w", **profile) as ds:
        for row in range(0, side, 1024):
            ds.write(rng.integers(0, 1 << 16, size=(3, 1024, side), dtype=np.uint16), window=Window(0, row, side, 1024))
    subprocess.run(
        ["gdal_translate", "-q", "-of", "COG", "-co", "COMPRESS=DEFLATE", "-co", "BIGTIFF=YES", "-co", "NUM_THREADS=ALL_CPUS",
         str(src), str(path)],
        check=True,
    )  # fmt: skip
    src.unlink()


def serve(root: str, port_queue: multiprocessing.Queue, log_path: str) -> None:  # type: ignore[type-arg]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.remote_servers import RangeServer

    with RangeServer(Path(root)) as server:
        port_queue.put(server.port)
        last = 0
        while True:
            time.sleep(0.05)
            with server.log.lock:
                rows = list(server.log.entries)
            if len(rows) != last:
                tmp = Path(log_path + ".tmp")
                tmp.write_text(json.dumps(rows))
                os.replace(tmp, log_path)  # the reader never sees half a file
                last = len(rows)


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.mark = 0

    def rows(self) -> list[list]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []

    def start(self) -> None:
        time.sleep(0.2)
        self.mark = len(self.rows())

    def since(self) -> tuple[int, int]:
        time.sleep(0.3)  # the server's log file is rewritten every 50 ms
        rows = self.rows()[self.mark :]
        return len(rows), sum(r[3] for r in rows)


async def run(a: argparse.Namespace) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="gdal-mcp-remote-"))
    served, ws = work / "served", work / "ws"
    served.mkdir(parents=True, exist_ok=True)
    ws.mkdir(exist_ok=True)
    cog = served / f"cog_{a.size_mb:g}.tif"
    if not cog.exists():
        print(f"generating {cog.name}", file=sys.stderr)
        make_cog(cog, a.size_mb)
    size = cog.stat().st_size
    queue: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    log = Log(work / "requests.json")
    log.path.unlink(missing_ok=True)  # a previous run's log in a kept --workdir
    proc = multiprocessing.Process(target=serve, args=(str(served), queue, str(log.path)), daemon=True)
    proc.start()
    port = queue.get(timeout=30)
    url = f"http://127.0.0.1:{port}/{cog.name}"
    with rasterio.open(cog) as ds:
        left, top = ds.bounds.left, ds.bounds.top
    bbox = [left + 10_000, top - 15_000, left + 15_000, top - 10_000]  # 500 x 500 pixels
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
            "--allow-remote",
            f"http://127.0.0.1:{port}",
            "--max-remote-bytes",
            "0",
            "--timeout",
            "3600",
        ],  # fmt: skip
        env=env,
        cwd=os.getcwd(),
    )
    rows = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        calls = [
            ("raster_info", {"path": url}),
            ("raster_stats bbox", {"input": url, "bbox": bbox}),
            ("raster_clip bbox", {"input": url, "output": "clip.tif", "bbox": bbox, "overwrite": True}),
            ("raster_stats of the whole file", {"input": url}),
        ]
        for label, args in calls:
            log.start()
            t0 = time.perf_counter()
            r = await session.call_tool(label.split()[0], args)
            seconds = time.perf_counter() - t0
            assert not r.is_error, r.content
            reported = (r.structured_content or {}).get("remote") or {}
            requests, sent = log.since()
            rows.append((label, requests, sent, reported.get("bytes"), reported.get("requests"), seconds))
    refs = [
        ("gdalinfo", ["gdalinfo", f"/vsicurl/{url}"]),
        ("gdal_translate -projwin", ["gdal_translate", "-q", "-projwin", str(bbox[0]), str(bbox[3]), str(bbox[2]), str(bbox[1]),
                                     f"/vsicurl/{url}", str(work / "ref_clip.tif")]),
        ("gdalinfo -stats (the whole file)", ["gdalinfo", "-stats", f"/vsicurl/{url}"]),
    ]  # fmt: skip
    ref_rows = []
    for label, cmd in refs:
        log.start()
        t0 = time.perf_counter()
        subprocess.run(
            cmd, check=True, capture_output=True, env={**env, "GDAL_DISABLE_READDIR_ON_OPEN": "TRUE", "GDAL_PAM_ENABLED": "NO"}
        )
        seconds = time.perf_counter() - t0
        requests, sent = log.since()
        ref_rows.append((label, requests, sent, seconds))
    proc.terminate()
    print(f"COG: {cog.name}, {size / 2**20:.0f} MiB, {url}\n")
    print("| call | requests (server log) | bytes (server log) | share of the file | bytes reported | agree | time |")
    print("|---|---|---|---|---|---|---|")
    for label, requests, sent, rep_bytes, rep_req, seconds in rows:
        print(
            f"| {label} | {requests} (GDAL counted {rep_req}) | {sent:,} | {100 * sent / size:.2f} % | {rep_bytes:,} | "
            f"{'yes' if rep_bytes == sent else 'NO'} | {seconds:.2f} s |"
        )
    for label, requests, sent, seconds in ref_rows:
        print(f"| reference: {label} | {requests} | {sent:,} | {100 * sent / size:.2f} % | | | {seconds:.2f} s |")
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mb", type=float, default=1024)
    p.add_argument("--workdir")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
