"""gdal-mcp over streamable HTTP: bearer token, Origin checks, refusal to bind publicly without a token."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from fastmcp import Client

from tests.helpers import make_workspace

TOKEN = "s3cret-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(ws: Path, port: int, token: str | None, *extra: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    env["GDAL_MCP_CONFIRM"] = "never"  # the overwrite below is not about confirmation (test_confirm.py is)
    if token:
        env["GDAL_MCP_TOKEN"] = token
    return subprocess.Popen(
        [sys.executable, "-m", "gdal_mcp", "--transport", "http", "--port", str(port), "--workspace", str(ws), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


class StderrLog:
    """A server's stderr, read as it comes (a pipe nobody reads would block the server), with the approval console's
    one-time login links it printed (what the person running the server sees)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        import threading

        self.lines: list[str] = []
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.lines.append(line.decode(errors="replace"))

    def login_links(self) -> list[str]:
        import re

        return [m.group(0) for line in self.lines if (m := re.search(r"http://\S+/console/login\?key=\S+", line))]


def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("server did not start listening")


@pytest.fixture(scope="module")
def http_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("http"))


@pytest.fixture(scope="module")
def with_token(http_ws: Path) -> Iterator[str]:
    port = free_port()
    proc = start(http_ws, port, TOKEN, "--allow-origin", "https://gis.example.org")
    try:
        wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
        assert out == b"", f"HTTP server wrote to stdout: {out[:200]!r}"


def post(url: str, headers: dict[str, str]) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    return httpx2.post(url, json=body, headers={"Accept": "application/json, text/event-stream", **headers})


def test_missing_or_wrong_token_is_401(with_token: str) -> None:
    assert post(with_token, {}).status_code == 401
    assert post(with_token, {"Authorization": "Bearer wrong"}).status_code == 401
    assert post(with_token, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_healthz_answers_without_token_and_tells_nothing(with_token: str) -> None:
    health = with_token.removesuffix("/mcp") + "/healthz"
    r = httpx2.get(health)  # what the Dockerfile's HEALTHCHECK asks, without a token
    assert r.status_code == 200 and r.json() == {"status": "ok", "confined": True}
    assert r.headers["cache-control"] == "no-store"
    assert httpx2.get(health, headers={"Authorization": "Bearer wrong"}).json() == {"status": "ok", "confined": True}
    # no other path is opened by it, and the Host guard still applies
    assert httpx2.get(health + "/x").status_code == 404
    assert httpx2.post(health).status_code == 405
    assert httpx2.get(health, headers={"Host": "evil.example.com"}).status_code == 421
    assert post(with_token, {}).status_code == 401


def test_foreign_origin_is_403(with_token: str) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert post(with_token, {**auth, "Origin": "https://evil.example.com"}).status_code == 403
    assert post(with_token, {**auth, "Origin": "null"}).status_code == 403
    assert post(with_token, {**auth, "Origin": "http://localhost:3000"}).status_code == 200
    assert post(with_token, {**auth, "Origin": "http://127.0.0.1:6274"}).status_code == 200
    assert post(with_token, {**auth, "Origin": "https://gis.example.org"}).status_code == 200


async def test_client_with_token_calls_tools(with_token: str, http_ws: Path) -> None:
    async with Client(with_token, auth=TOKEN) as c:
        r = await c.call_tool("raster_info", {"path": "raster/slope.tif", "stats": True})
        assert r.structured_content["bands"][0]["statistics"]["valid_count"] > 0
        r = await c.call_tool("raster_convert", {"input": "raster/float_nan.tif", "output": "out/http.tif", "overwrite": True})
        blob = (await c.read_resource(r.structured_content["uri"]))[0].blob
        assert base64.b64decode(blob) == (http_ws / "out" / "http.tif").read_bytes()
        r = await c.call_tool("raster_info", {"path": "/etc/passwd"}, raise_on_error=False)
        assert r.is_error and r.structured_content["error"]["code"] == "out-of-root"


async def test_without_token_on_loopback_is_open(http_ws: Path) -> None:
    port = free_port()
    proc = start(http_ws, port, None)
    try:
        wait_listening(port, proc)
        async with Client(f"http://127.0.0.1:{port}/mcp") as c:
            assert "list_datasets" in {t.name for t in await c.list_tools()}
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_public_bind_without_token_is_refused(http_ws: Path) -> None:
    proc = start(http_ws, free_port(), None, "--host", "0.0.0.0")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and out == b""
    assert b"GDAL_MCP_TOKEN" in err
