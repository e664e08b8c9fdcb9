"""Protocol abuse on stdio, through a raw pipe to the real gdal-mcp process.

Newline-delimited JSON-RPC: unparseable JSON gets -32700, a message that is not a request gets -32600, an
unknown method -32601, blank lines are skipped, and a line over the limit is discarded while it is read
(the server's memory stays flat) and answered -32600; after each, the server keeps serving.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MiB = 1024 * 1024
LINE = 70 * MiB  # the abusive line: larger than the default 64 MiB limit


class Server:
    """gdal-mcp over a raw stdio pipe; stdout lines are parsed as JSON-RPC by a reader thread."""

    def __init__(self, ws: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gdal_mcp", "--workspace", str(ws), "--workers", "1", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 100

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))  # anything that is not JSON fails the test (reply missing)
        self.replies.put(None)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, timeout: float = 20) -> dict[str, Any]:
        msg = self.replies.get(timeout=timeout)
        assert msg is not None, "the server closed stdout"
        assert msg["jsonrpc"] == "2.0"
        return msg

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            body["params"] = params
        self.send((json.dumps(body) + "\n").encode())
        reply = self.recv()
        assert reply["id"] == self.next_id, reply
        return reply

    def quiet(self, wait: float = 0.3) -> bool:
        """True if nothing arrives within `wait` seconds."""
        try:
            msg = self.replies.get(timeout=wait)
        except queue.Empty:
            return True
        self.replies.put(msg)
        return False

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def close(self, wait: bool = True) -> None:
        assert self.proc.stdin
        if not self.proc.stdin.closed:
            self.proc.stdin.close()  # end of input: the server shuts down
        if not wait:
            return
        try:
            self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def initialize(server: Server) -> None:
    r = server.request(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    )
    assert r["result"]["serverInfo"]["name"] == "gdal-mcp"
    server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    """Two servers started together (their start-ups overlap): the default limit, and a 1 MiB limit."""
    ws = tmp_path_factory.mktemp("stdio_guard")
    pair = (Server(ws), Server(ws, "--max-message-size", "1M"))
    try:
        for s in pair:
            initialize(s)
        yield pair
    finally:
        for s in pair:
            s.close(wait=False)
        for s in pair:
            s.close()


@pytest.fixture
def server(servers: tuple[Server, Server]) -> Server:
    return servers[0]


def assert_error(reply: dict[str, Any], code: int, request_id: int | str | None) -> str:
    assert reply["id"] == request_id and reply["error"]["code"] == code, reply
    assert "result" not in reply
    return reply["error"]["message"]


def test_unparseable_json_is_a_parse_error(server: Server) -> None:
    for bad in (b'{"jsonrpc": "2.0", "id": 7, "method": "ping"\n', b"not json at all\n", b"\xff\xfe{\n"):
        server.send(bad)
        assert "not valid JSON" in assert_error(server.recv(), -32700, None)
    assert server.request("ping")["result"] == {}


def test_message_without_method_is_an_invalid_request(server: Server) -> None:
    server.send(b'{"jsonrpc": "2.0", "id": 8}\n')
    assert "method" in assert_error(server.recv(), -32600, 8)
    server.send(b'{"jsonrpc": "2.0", "id": "abc", "params": {}}\n')
    assert_error(server.recv(), -32600, "abc")
    server.send(b'{"jsonrpc": "2.0", "params": {}}\n')  # no id to echo
    assert_error(server.recv(), -32600, None)
    server.send(b'{"id": 9, "method": "ping"}\n')  # no "jsonrpc": "2.0"
    assert "jsonrpc" in assert_error(server.recv(), -32600, 9)
    server.send(b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}\n')  # an id that is no id
    assert_error(server.recv(), -32600, None)
    server.send(b"[1, 2]\n")  # a batch
    assert "batch" in assert_error(server.recv(), -32600, None)
    server.send(b'{"jsonrpc": "2.0", "id": 555, "result": {}}\n')  # a response to nothing: no reply to a reply
    assert server.quiet()
    assert server.request("ping")["result"] == {}


def test_unknown_method(server: Server) -> None:
    server.send(b'{"jsonrpc": "2.0", "id": 10, "method": "no/such/method"}\n')
    assert_error(server.recv(), -32601, 10)
    server.send(b'{"jsonrpc": "2.0", "method": "notifications/no_such"}\n')  # an unknown notification: no reply
    assert server.quiet()


def test_blank_lines_are_skipped(server: Server) -> None:
    server.send(b"\n\n   \n\t\r\n\r\n")
    assert server.quiet()
    # Blank lines between messages and a CRLF line end are fine.
    server.send(b'\n{"jsonrpc": "2.0", "id": 11, "method": "ping"}\r\n\n')
    assert server.recv() == {"jsonrpc": "2.0", "id": 11, "result": {}}


def test_valid_traffic_still_works(server: Server) -> None:
    tools = {t["name"] for t in server.request("tools/list")["result"]["tools"]}
    assert {"raster_info", "vector_info", "list_datasets"} <= tools
    # Two requests in one write, split across lines, each answered.
    server.send(b'{"jsonrpc": "2.0", "id": 12, "method": "ping"}\n{"jsonrpc": "2.0", "id": 13, "method": "ping"}\n')
    assert {server.recv()["id"], server.recv()["id"]} == {12, 13}
    # A second initialize on the same connection is still answered by the SDK.
    initialize(server)


def send_long_line(server: Server, size: int, sample: bool = False) -> int:
    """Write one `size`-byte line (no newline inside) in 1 MiB pieces; return the peak server RSS seen."""
    piece = b"x" * MiB
    head = b'{"jsonrpc": "2.0", "id": 99, "method": "ping", "params": {"pad": "'
    server.send(head)
    peak = server.rss() if sample else 0
    sent = len(head)
    while sent < size:
        n = min(MiB, size - sent)
        server.send(piece[:n])
        sent += n
        if sample:
            peak = max(peak, server.rss())
    server.send(b'"}}\n')
    return peak


def test_over_long_line_is_rejected_and_the_next_served(server: Server) -> None:
    send_long_line(server, LINE)
    message = assert_error(server.recv(timeout=60), -32600, None)
    assert str(64 * MiB) in message and "discarded" in message
    assert server.request("ping")["result"] == {}


def test_memory_stays_flat_while_a_long_line_is_discarded(servers: tuple[Server, Server]) -> None:
    """With a 1 MiB limit: a message just under it is served, one over it is refused, and reading a 70 MiB
    line costs the server no more than a few MiB (under the default limit it would hold up to 64 MiB)."""
    s = servers[1]
    pad = "y" * (MiB - 200)
    s.send((json.dumps({"jsonrpc": "2.0", "id": 20, "method": "ping", "params": {"pad": pad}}) + "\n").encode())
    assert s.recv() == {"jsonrpc": "2.0", "id": 20, "result": {}}
    s.send((json.dumps({"jsonrpc": "2.0", "id": 21, "method": "ping", "params": {"pad": pad + "y" * 400}}) + "\n").encode())
    assert str(MiB) in assert_error(s.recv(), -32600, None)

    time.sleep(0.2)
    base = s.rss()
    peak = send_long_line(s, LINE, sample=True)
    assert_error(s.recv(timeout=60), -32600, None)
    peak = max(peak, s.rss())
    growth = peak - base
    assert growth < 30 * MiB, f"server RSS grew by {growth / MiB:.1f} MiB while reading a {LINE // MiB} MiB line"
    assert s.request("ping")["result"] == {}
