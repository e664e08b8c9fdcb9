"""A small load over HTTP: concurrent clients calling raster_info (bench/load.py, scaled down); no errors.

No timing is asserted (the machine is shared); bench/load.py gives the figures.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
from pathlib import Path

import rasterio

from bench.load import TOKEN, McpHttp, Phase, free_port, run_clients, start_server, wait_ready
from tests.helpers import DATA

CLIENTS, CALLS = 10, 5


async def test_ten_clients_five_calls_each_without_errors(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(DATA / "raster" / "slope.tif", ws / "q0000.tif")
    for i in range(1, 1 + CLIENTS):  # each client reads its own file, then the cached answers
        shutil.copy(ws / "q0000.tif", ws / f"q{i:04d}.tif")
    port = free_port()
    proc = start_server(ws, port, workers=1)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        await wait_ready(url, proc)
        phase = await run_clients(url, Phase("small"), [[f"q{1 + c:04d}.tif"] * CALLS for c in range(CLIENTS)], deadline=120)
        assert phase.errors == [] and len(phase.latencies) == CLIENTS * CALLS
        client = McpHttp(url, TOKEN)
        try:
            result = await client.call_tool("raster_info", {"path": "q0003.tif"})
        finally:
            await client.close()
        with rasterio.open(ws / "q0003.tif") as ds:
            assert (result["structuredContent"]["width"], result["structuredContent"]["height"]) == (ds.width, ds.height)
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 15)
