"""Servers on 127.0.0.1 that stand in for remote data in the tests and bench/ (no internet needed): an HTTP server
with byte ranges that logs every request and the bytes it sent (the reference for GDAL's own network figures), and a
local S3 (moto in server mode)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class RequestLog:
    entries: list[tuple[str, str, int, int]] = field(default_factory=list)  # (method, path, status, body bytes sent)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *entry: object) -> None:
        with self.lock:
            self.entries.append(entry)  # type: ignore[arg-type]

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()

    def sent(self, path_suffix: str = "") -> tuple[int, int]:
        """(requests, body bytes) for paths ending with `path_suffix`."""
        with self.lock:
            rows = [e for e in self.entries if e[1].split("?")[0].endswith(path_suffix)]
        return len(rows), sum(e[3] for e in rows)


class RangeServer:
    """Serves the files under `root` at http://127.0.0.1:<port>/<relative path>, with HEAD and single byte ranges
    (what GDAL's /vsicurl/ uses); `redirects` maps a path to a Location to answer 302 with."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = RequestLog()
        self.redirects: dict[str, str] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _file(self) -> Path | None:
                rel = self.path.split("?", 1)[0].lstrip("/")
                p = (outer.root / rel).resolve()
                return p if p.is_file() and p.is_relative_to(outer.root.resolve()) else None

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

            def _answer(self, *, body: bool) -> None:
                target = outer.redirects.get(self.path.split("?", 1)[0])
                if target is not None:
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    outer.log.add(self.command, self.path, 302, 0)
                    return
                p = self._file()
                if p is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    outer.log.add(self.command, self.path, 404, 0)
                    return
                size = p.stat().st_size
                start, end, status = 0, size - 1, 200
                m = _RANGE.match(self.headers.get("Range", ""))
                if m and (m.group(1) or m.group(2)):
                    if m.group(1):
                        start = int(m.group(1))
                        end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                    else:
                        start = max(0, size - int(m.group(2)))
                    status = 206
                length = max(0, end - start + 1)
                self.send_response(status)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(length))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.end_headers()
                sent = 0
                if body and length:
                    with open(p, "rb") as fh:
                        fh.seek(start)
                        remaining = length
                        while remaining:
                            chunk = fh.read(min(remaining, 1 << 20))
                            if not chunk:
                                break
                            self.wfile.write(chunk)
                            sent += len(chunk)
                            remaining -= len(chunk)
                outer.log.add(self.command, self.path, status, sent)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> RangeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


#: the fake credentials of the local S3 (moto accepts any); tests assert they never reach an output, log or audit line
S3_KEY_ID = "AKIAGDALMCPTESTKEY01"
S3_SECRET = "gdal-mcp-test-secret-never-printed-0123456789"


@contextmanager
def local_s3(ip: str = "127.0.0.1") -> Iterator[tuple[str, dict[str, str]]]:
    """A local S3 (moto's ThreadedMotoServer) on `ip`; yields (endpoint URL, the environment GDAL and boto3 need
    to use it: endpoint, plain HTTP, path-style addressing, fake credentials)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address=ip, port=0, verbose=False)
    server.start()
    port = server._server.server_port  # type: ignore[attr-defined]
    endpoint = f"http://{ip}:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": S3_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_S3_ENDPOINT": f"{ip}:{port}",  # GDAL
        "AWS_HTTPS": "NO",
        "AWS_VIRTUAL_HOSTING": "FALSE",
        "AWS_ENDPOINT_URL": endpoint,  # boto3
    }
    _reset(endpoint)  # moto keeps its buckets per process, not per server: start empty whatever ran before here
    try:
        yield endpoint, env
    finally:
        _reset(endpoint)
        server.stop()


#: Azurite's well-known development account (its documented default; not a secret, but tests assert it never shows)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@contextmanager
def local_azurite(ip: str = "127.0.0.1") -> Iterator[tuple[str, dict[str, str]]]:
    """A local Azure Blob Storage (Azurite, installed by scripts/_references.sh; GDAL_MCP_AZURITE names its
    azurite-blob) on `ip`, in memory; yields (blob endpoint URL, the environment GDAL and the SDK need: its connection
    string). Skips the test when Azurite is not installed."""
    import shutil
    import socket
    import subprocess
    import time

    import pytest

    program = os.environ.get("GDAL_MCP_AZURITE") or shutil.which("azurite-blob")
    if not program or not os.access(program, os.X_OK):
        pytest.skip("Azurite (npm) is not installed: scripts/test installs it where npm is present")
    with socket.socket() as probe:
        probe.bind((ip, 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [program, "--blobHost", ip, "--blobPort", str(port), "--inMemoryPersistence", "--skipApiVersionCheck", "--silent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    endpoint = f"http://{ip}:{port}/{AZURITE_ACCOUNT}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection((ip, port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError(f"Azurite exited: {process.stdout.read() if process.stdout else ''}") from None
                time.sleep(0.1)
        else:
            raise RuntimeError("Azurite did not start within 60 s")
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};BlobEndpoint={endpoint};"
        )
        yield endpoint, {"AZURE_STORAGE_CONNECTION_STRING": connection}
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _reset(endpoint: str) -> None:
    """Empty the local S3 (moto's reset endpoint)."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=30).read()


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with `values` set (what the server's workers inherit), restored after."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
