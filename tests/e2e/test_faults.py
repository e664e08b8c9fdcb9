"""Faults of the machine, through a raw stdio pipe to the real gdal-mcp process.

- Workers killed while idle (the OOM killer does that): the next calls succeed on fresh workers.
- A job over --max-memory: resource-limit naming the limit; the server keeps serving.
- The server killed with SIGKILL mid-write: its workers stop, the final output is never touched, and the
  temporary directory it left is removed when a server next starts on the workspace (a live owner's is kept).
- A disk that fills up during a write: a clear resource-limit, no partial output, the server keeps serving.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from gdal_mcp.sandbox import OWNER_FILE, TMP_PREFIX, _owner_identity
from tests.faults import children, mount_small_tmpfs, one_tile_tiff, pid_alive, unmount
from tests.helpers import DATA, huge_vrt


class Server:
    """gdal-mcp over a raw stdio pipe, in its own process group (so the test can SIGKILL all of it)."""

    def __init__(self, *args: str, stderr: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
        self.err = open(stderr, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gdal_mcp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            env=env,
            start_new_session=True,
        )
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0
        init = self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "faults", "version": "0"}},
            timeout=60,
        )
        assert init["result"]["serverInfo"]["name"] == "gdal-mcp"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def start(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def reply(self, rid: int, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            msg = self.replies.get(timeout=max(0.1, deadline - time.monotonic()))
            assert msg is not None, "the server closed stdout"
            if msg.get("id") == rid:
                return msg

    def request(self, method: str, params: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        return self.reply(self.start(method, params), timeout)

    def call(self, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
        result = self.request("tools/call", {"name": tool, "arguments": arguments})["result"]
        return result.get("isError", False), result.get("structuredContent") or {}

    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def kill_group(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill_group()
        self.err.close()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def make(*args: str) -> Server:
        servers.append(Server(*args, stderr=tmp_path / "server.stderr"))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def wait_for(predicate: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def temporaries(root: Path) -> list[Path]:
    return sorted(root.rglob(f"{TMP_PREFIX}*"))


# ----- workers killed while idle; a job over the memory limit ----------------------------------------------
@pytest.mark.slow
def test_killed_idle_workers_and_a_job_over_the_memory_limit(start: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "raster").mkdir(parents=True)
    rgb = ws / "raster" / "RGB.byte.tif"
    rgb.write_bytes((DATA / "raster" / "RGB.byte.tif").read_bytes())
    # One 32768 x 32768 byte tile: GDAL needs 1 GiB to read any of its pixels, over a 768 MiB limit.
    one_tile_tiff(ws / "one_tile.tif", size=32768)
    server = start("--workspace", str(ws), "--workers", "2", "--max-memory", "768M")
    with rasterio.open(rgb) as ds:  # the reference: rasterio in the test process
        width = ds.width

    err, info = server.call("raster_info", path="raster/RGB.byte.tif")
    assert not err and info["width"] == width
    wait_for(lambda: len(server.workers()) == 3, 30, "2 workers and the quick one")
    idle = server.workers()
    for pid in idle:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not any(pid_alive(p) for p in idle), 10, "the killed workers to die")
    # Every kind of call succeeds at once: quick metadata, general jobs, twice over the pool's size.
    for _ in range(2):
        err, info = server.call("raster_info", path="raster/RGB.byte.tif")
        assert not err, info
        err, stats = server.call("raster_stats", input="raster/RGB.byte.tif", bands=[1])
        assert not err, stats
    wait_for(lambda: len(server.workers()) == 3, 30, "the pool to be whole again")
    assert not set(server.workers()) & set(idle)

    err, res = server.call("raster_info", path="one_tile.tif", stats=True)
    assert err and res["error"]["code"] == "resource-limit", res
    assert "--max-memory 768M" in res["error"]["message"] and str(32768 * 32768) in res["error"]["message"]
    err, info = server.call("raster_info", path="one_tile.tif")  # metadata needs no pixels: still served
    assert not err and info["width"] == 32768


# ----- a server killed mid-write ----------------------------------------------------------------------------
def fake_temporary(parent: Path, owner: dict[str, Any] | None) -> Path:
    d = parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    d.mkdir(parents=True)
    (d / "partial.tif").write_bytes(b"II*\x00partial")
    if owner is not None:
        (d / OWNER_FILE).write_text(json.dumps(owner))
    return d


def test_server_killed_mid_write_leaves_no_output_and_its_temporary_is_swept(start: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    huge_vrt(ws / "huge.vrt")  # 200000 x 200000 pixels: the write takes far longer than the test
    server = start("--workspace", str(ws), "--workers", "1")
    rid = server.start(
        "tools/call",
        {
            "name": "raster_convert",
            "arguments": {
                "input": "huge.vrt",
                "output": "out/big.tif",
                "creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"},
            },
        },
    )

    def writing() -> bool:
        return any(f.is_file() and f.name != OWNER_FILE and f.stat().st_size > 0 for d in temporaries(ws) for f in d.iterdir())

    wait_for(writing, 60, "the write to start")
    workers = server.workers()
    server.kill_group()
    assert server.proc.returncode == -signal.SIGKILL
    with pytest.raises(AssertionError, match="closed stdout"):
        server.reply(rid, timeout=5)  # no answer ever came
    # Its workers live in their own sessions; they stop as soon as the server's end of their pipe closes.
    wait_for(lambda: not any(pid_alive(p) for p in workers), 10, "the dead server's workers to stop")
    (stale,) = temporaries(ws)
    assert not (ws / "out" / "big.tif").exists(), "a killed job touched the final output"
    owner = json.loads((stale / OWNER_FILE).read_text())
    assert owner["pid"] == server.proc.pid

    live = fake_temporary(ws / "kept", _owner_identity())  # owned by this test process: alive
    unmarked = fake_temporary(ws / "kept", None)  # no marker (an older server, or one being made): kept
    reused = _owner_identity() | {"start": "1"}  # this pid, but a process that started earlier: gone
    pid_reused = fake_temporary(ws / "deep" / "er", reused)
    other_host = fake_temporary(ws / "kept", {**_owner_identity(), "pid": server.proc.pid, "host": "elsewhere"})
    lookalike = ws / "kept" / f"{TMP_PREFIX}not-ours"
    lookalike.mkdir()
    (ws / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    outside = fake_temporary(tmp_path / "outside", {**owner})  # reached only through a symlink: never followed

    again = start("--workspace", str(ws), "--workers", "1")
    err, _ = again.call("list_datasets")  # the sweep ran at start-up, before the server answered
    assert not err
    assert not stale.exists() and not pid_reused.exists()
    assert live.exists() and unmarked.exists() and other_host.exists() and lookalike.exists() and outside.exists()
    assert (ws / "huge.vrt").exists() and not (ws / "out" / "big.tif").exists()


# ----- a disk that fills up during a write -----------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small"
    reason = mount_small_tmpfs(where, "2m")
    if reason:
        pytest.skip(reason)
    yield where
    unmount(where)


@pytest.mark.parametrize("creation_options", [None, {"COMPRESS": "DEFLATE", "TILED": "YES"}], ids=["uncompressed", "deflate"])
def test_disk_full_during_a_write(start: Any, tmp_path: Path, small_disk: Path, creation_options: dict[str, str] | None) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    # 4 MB of random float32 (incompressible) to write on a 2 MB file system (a second workspace).
    with rasterio.open(
        ws / "noise.tif",
        "w",
        driver="GTiff",
        width=1000,
        height=1000,
        count=1,
        dtype="float32",
        crs="EPSG:32631",
        transform=from_origin(500000, 5000000, 10, 10),
    ) as ds:
        ds.write(np.random.default_rng(3).random((1000, 1000), dtype="float32"), 1)
    server = start("--workspace", str(ws), "--workspace", str(small_disk), "--workers", "1")
    output = str(small_disk / "out" / "noise.tif")
    args: dict[str, Any] = {"input": "noise.tif", "output": output}
    if creation_options:
        args["creation_options"] = creation_options
    err, res = server.call("raster_convert", **args)
    assert err and res["error"]["code"] == "resource-limit", res
    message = res["error"]["message"]
    assert message.startswith(
        f"the disk is full (No space left on device) while writing {output}; free space or write elsewhere"
    ), message
    assert list(small_disk.iterdir()) == [], "the partial output or its directory was left behind"
    st = os.statvfs(small_disk)
    assert st.f_bfree == st.f_blocks
    err, info = server.call("raster_info", path="noise.tif")
    assert not err and info["width"] == 1000
