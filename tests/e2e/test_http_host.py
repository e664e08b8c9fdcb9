"""Host header validation over HTTP (DNS rebinding): raw requests with good and bad Host headers to a real server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gdal_mcp.cli import build_parser, settings_from_args
from gdal_mcp.server.web.guards import HostGuard
from tests.e2e.test_http import free_port, wait_listening
from tests.helpers import make_workspace

TOKEN = "host-test-token"
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
).encode()


def raw_post(port: int, host: str | None, *, version: str = "1.1", token: str | None = None) -> tuple[int, bytes]:
    """POST an initialize to /mcp with exactly this Host header (None: no Host at all); (status, body)."""
    lines = [f"POST /mcp HTTP/{version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(INITIALIZE)}",
        "Connection: close",
    ]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + INITIALIZE)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def start(ws: Path, port: int, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GDAL_MCP_", "FASTMCP_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "gdal_mcp", "--transport", "http", "--port", str(port), "--workspace", str(ws), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**base, **(env or {})},
    )


@pytest.fixture(scope="module")
def host_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("http_host"))


@pytest.fixture(scope="module")
def open_server(host_ws: Path) -> Iterator[int]:
    """No token, loopback bind, two extra names allowed on the command line."""
    port = free_port()
    proc = start(host_ws, port, "--allow-host", "gis.example.org", "--allow-host", "api.example.org:8443")
    try:
        wait_listening(port, proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def assert_misdirected(status: int, body: bytes, name: str) -> None:
    assert status == 421, body[:300]
    error = json.loads(body)
    assert error["error"] == "invalid_host"
    assert f"--allow-host {name}" in error["error_description"]


def assert_served(status: int, body: bytes) -> None:
    assert status == 200, body[:300]
    assert b'"serverInfo"' in body and b"gdal-mcp" in body  # the initialize result came back


@pytest.mark.parametrize(
    "host",
    [
        "evil.example.com",
        "evil.example.com:{port}",
        "127.0.0.1.nip.io:{port}",
        "api.example.org:8444",
        "gis.example.org.evil.com",
    ],
)
def test_foreign_host_is_misdirected(open_server: int, host: str) -> None:
    host = host.format(port=open_server)
    status, body = raw_post(open_server, host)
    assert_misdirected(status, body, host.rsplit(":", 1)[0] if host.count(":") == 1 else host)


def test_malformed_or_missing_host_is_misdirected(open_server: int) -> None:
    status, body = raw_post(open_server, "a b:x")
    assert_misdirected(status, body, "NAME")
    status, body = raw_post(open_server, None, version="1.0")  # HTTP/1.0 may omit Host; we refuse it
    assert_misdirected(status, body, "NAME")


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "LocalHost",
        "[::1]:{port}",
        "127.0.0.2:{port}",
        "gis.example.org",
        "GIS.example.org:9999",
        "api.example.org:8443",
    ],
)
def test_loopback_and_allowed_hosts_are_served(open_server: int, host: str) -> None:
    assert_served(*raw_post(open_server, host.format(port=open_server)))


def test_env_allow_list_and_host_check_before_the_token(host_ws: Path) -> None:
    port = free_port()
    proc = start(host_ws, port, env={"GDAL_MCP_ALLOW_HOST": "a.example, b.example:9000", "GDAL_MCP_TOKEN": TOKEN})
    try:
        wait_listening(port, proc)
        # A foreign Host is refused even with the right token, and before the token is looked at.
        assert_misdirected(*raw_post(port, "evil.example", token=TOKEN), "evil.example")
        assert_misdirected(*raw_post(port, "evil.example"), "evil.example")
        assert raw_post(port, "a.example")[0] == 401  # passed the Host check, stopped by the token
        assert_served(*raw_post(port, "a.example:1234", token=TOKEN))
        assert_served(*raw_post(port, "b.example:9000", token=TOKEN))
        assert_misdirected(*raw_post(port, "b.example:9001", token=TOKEN), "b.example")
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_bind_address_and_star() -> None:
    """The bind address counts as served unless it is a wildcard; '*' lets every Host through."""
    guard = HostGuard(None, (), bind_host="10.1.2.3")
    assert guard.host_allowed("10.1.2.3:8000") and guard.host_allowed("10.1.2.3")
    assert not guard.host_allowed("10.1.2.4:8000")
    for wildcard in ("0.0.0.0", "::", "[::]"):
        guard = HostGuard(None, (), bind_host=wildcard)
        assert not guard.host_allowed("0.0.0.0:8000") and not guard.host_allowed("[::]:8000")
        assert guard.host_allowed("127.0.0.1:8000")
    guard = HostGuard(None, ["*"])
    assert guard.host_allowed("anything.example:1") and guard.host_allowed("a b")


def test_allow_host_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k in list(os.environ):
        if k.startswith("GDAL_MCP_"):
            monkeypatch.delenv(k)
    args = ["--workspace", str(tmp_path)]
    assert settings_from_args(build_parser().parse_args(args)).allow_hosts == ()
    s = settings_from_args(build_parser().parse_args([*args, "--allow-host", "a.example", "--allow-host", "*"]))
    assert s.allow_hosts == ("a.example", "*")
    monkeypatch.setenv("GDAL_MCP_ALLOW_HOST", "x.example, y.example:8443,")
    assert settings_from_args(build_parser().parse_args(args)).allow_hosts == ("x.example", "y.example:8443")
    with pytest.raises(ValueError, match="not a host name"):
        settings_from_args(build_parser().parse_args([*args, "--allow-host", "http://x.example/"]))
