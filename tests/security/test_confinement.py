"""The kernel's part: code that bypasses every check of the server, run in the workers the server starts (the
local pool's, its quick worker, and a Dask cluster's task threads), cannot read outside what its policy allows, nor
connect anywhere, nor write outside its job's output. And a kernel that cannot confine makes the server refuse to
start unless the operator accepts running unconfined."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gdal_mcp import jobs
from gdal_mcp.config import Settings
from gdal_mcp.execution import confine
from gdal_mcp.server.app import App
from tests.security.helpers import Canary, Secrets

pytestmark = pytest.mark.skipif(
    confine.abi() < confine.MIN_ABI,
    reason=f"this kernel has no usable Landlock "
    f"({confine.status()}); the server refuses to start here without --allow-unconfined",
)


def probe_job(ws: Path, secrets: Secrets, canary: Canary) -> jobs.ProbeAccessJob:
    return jobs.ProbeAccessJob(
        read=["/etc/passwd", "/etc/shadow", secrets.path("secret.txt"), "/proc/1/environ", str(ws / "good.tif")],
        connect=[("127.0.0.1", canary.port), ("127.0.0.1", 22)],
        write=[str(ws / "written-by-a-read-job.txt"), secrets.path("planted.txt"), "/tmp/planted-by-gdal-mcp.txt"],
    )


def assert_confined(
    result: dict[str, dict[str, str]], ws: Path, canary: Canary, hits_before: int, *, job_layer: bool = True
) -> None:
    """Reads outside, connections and writes outside are refused; with `job_layer` (local workers: a job that only
    reads runs on a thread that may not write the workspace) writes inside the workspace too."""
    reads = result["read"]
    assert reads[str(ws / "good.tif")] == "allowed", reads
    assert all(v != "allowed" for k, v in reads.items() if k != str(ws / "good.tif")), reads
    assert all(v != "allowed" for v in result["connect"].values()), result["connect"]
    inside = str(ws / "written-by-a-read-job.txt")
    assert all(v != "allowed" for k, v in result["write"].items() if job_layer or k != inside), result["write"]
    assert len(canary.hits) == hits_before


async def test_local_workers_cannot_reach_outside(tmp_path: Path, secrets: Secrets, canary: Canary) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "good.tif").write_bytes(b"II*\0")
    app = App(Settings(workspaces=(ws,), workers=1))
    assert app.confined
    try:
        hits = len(canary.hits)
        for quick in (False, True):  # a job worker and the worker for quick metadata calls
            result = await asyncio.wait_for(app.executor.run(probe_job(ws, secrets, canary), quick=quick), 60)
            assert_confined(result, ws, canary, hits)
        assert not (ws / "written-by-a-read-job.txt").exists() and not Path(secrets.path("planted.txt")).exists()
    finally:
        app.executor.close()


@pytest.mark.dask
async def test_dask_task_threads_cannot_reach_outside(
    tmp_path: Path, secrets: Secrets, canary: Canary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also the server's current directory, which `python -m` puts on the import path and Dask's workers inherit
    (a red team read a file of it through an HDF5 dataset's external storage): never in the workers' read set."""
    pytest.importorskip("distributed")
    from gdal_mcp.engine.diagnostics import probe_access
    from gdal_mcp.execution.dask_executor import DaskExecutor

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "good.tif").write_bytes(b"II*\0")
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text(secrets.token)
    monkeypatch.chdir(home)
    monkeypatch.syspath_prepend(str(home))
    runner = DaskExecutor(scheduler="local:1", timeout=60, worker_config={"roots": [str(ws)], "confine": True})
    await asyncio.to_thread(runner.start)
    try:
        hits = len(canary.hits)
        job = probe_job(ws, secrets, canary)
        job = jobs.ProbeAccessJob(read=[*job.read, str(home / "secret.txt")], connect=job.connect, write=job.write)
        result = await asyncio.wait_for(runner.run(job), 60)
        # a job runs on a thread that may write nowhere in the workspace but its output (none here)
        assert_confined(result, ws, canary, hits)
        # a plain function submitted straight to the cluster (not a gdal-mcp job at all) is confined the same way
        future = runner._client.submit(probe_access, job.read, job.connect, [str(tmp_path / "outside.txt")], pure=False)
        raw = await asyncio.to_thread(future.result, 60)
        assert raw["read"]["/etc/passwd"] != "allowed" and raw["read"][secrets.path("secret.txt")] != "allowed"
        assert all(v != "allowed" for v in raw["connect"].values()) and len(canary.hits) == hits
        assert raw["write"][str(tmp_path / "outside.txt")] != "allowed"
    finally:
        await asyncio.to_thread(runner.close)


def test_a_kernel_without_landlock_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(confine, "abi", lambda: 0)
    with pytest.raises(ValueError, match="--allow-unconfined"):
        App(Settings(workspaces=(tmp_path,)))
    app = App(Settings(workspaces=(tmp_path,), allow_unconfined=True))
    assert not app.confined and app.executor.worker_config["confine"] is False
    assert "UNCONFINED" in caplog.text


def test_version_and_health_say_whether_workers_are_confined(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    out = subprocess.run(
        [sys.executable, "-m", "gdal_mcp", "--version"], capture_output=True, text=True, env=base, timeout=60
    ).stdout
    assert f"confinement: Landlock ABI {confine.abi()}" in out


def test_the_socket_filter_and_landlock_in_this_process_kind(tmp_path: Path) -> None:
    """confine.confine on a fresh interpreter: the same policy a worker gets, checked from inside."""
    code = f"""
import os, socket
from gdal_mcp.execution import confine
confine.confine(confine.worker_policy([{str(tmp_path)!r}], None, read_only=True, network=False))
def attempt(fn):
    try:
        fn(); return "allowed"
    except OSError as e:
        return "denied"
print(attempt(lambda: open("/etc/passwd").read()), attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
      attempt(lambda: socket.socket(socket.AF_UNIX)), attempt(lambda: open({str(tmp_path / "x")!r}, "w")),
      attempt(lambda: os.listdir({str(tmp_path)!r})), attempt(lambda: os.kill(1, 0)))
"""
    out = subprocess.run(
        [sys.executable, "-P", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.stdout.split() == ["denied", "denied", "denied", "denied", "allowed", "denied"], out.stderr


def test_with_an_allow_list_a_worker_may_connect_to_the_egress_proxy_port_only(tmp_path: Path) -> None:
    """Network exfiltration around the allow-list: a worker confined with a proxy port connects to that port and to
    no other (the kernel refuses a direct connection to any server, so every request goes through the proxy)."""
    import socket

    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    proxy, other = (s.getsockname()[1] for s in listeners)
    code = f"""
import socket
from gdal_mcp.execution import confine
confine.confine(confine.worker_policy([{str(tmp_path)!r}], None, read_only=True, network=True, proxy_port={proxy}))
def attempt(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close(); return "allowed"
    except OSError as e:
        return "denied"
print(attempt({proxy}), attempt({other}))
"""
    try:
        out = subprocess.run(
            [sys.executable, "-P", "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
    finally:
        for s in listeners:
            s.close()
    assert out.stdout.split() == ["allowed", "denied"], out.stderr
