"""The workers' one way out to the network: a forward proxy on 127.0.0.1 that lets through only the remote locations
the operator allows (--allow-remote).

With an allow-list, the kernel lets a worker's GDAL threads connect to one TCP port, this proxy's
(confine.Policy.proxy_port), and GDAL (GDAL_HTTP_PROXY) and Python's HTTP clients (HTTP_PROXY/HTTPS_PROXY) send every
request through it. So the list holds by construction for what no argument names: a redirect from an allowed server
to another one, a URL a remote dataset names inside itself, a STAC link. The proxy decides on:

- a plain-HTTP request (absolute URL): the location itself (GET, HEAD, POST: a STAC API's search), or, for the
  configured S3 endpoint (AWS_S3_ENDPOINT, path-style), the s3://bucket/key it addresses (any method: reads and the
  uploads of engine/upload.py; a bucket-level request only to list below an allowed prefix). The request goes on
  with the Host of the decided URL and exactly its declared body (no chunked bodies, no pipelining);
- an HTTPS tunnel (CONNECT host:port): the host and port only (TLS hides the path; the sandbox checked the path of
  every location a tool was given): an allowed https:// host, a bucket's own virtual host on 443, or the custom
  endpoint's host and port. Shared path-style hosts (s3.amazonaws.com, storage.googleapis.com) serve every bucket:
  with them the prefix is the sandbox's check, not the proxy's (SECURITY.md).

Only the workers hold the proxy's token (Proxy-Authorization); connections are capped, and a request's header, and
any transfer that stalls, time out. A refused request gets status 451 with the reason; the worker reports it as
out-of-root (execution/common.py).

Two ways to run it: `EgressProxy(...).start()` on a thread of the server process (for the local workers; the server
never runs GDAL, so the thread always gets the interpreter), and `spawn(...)`, a child process (for a Dask worker,
whose GDAL threads hold the interpreter while they wait for the network). Never loads GDAL.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from urllib.parse import parse_qs, urlsplit

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.remote import AllowList, Location, parse

log = logging.getLogger("gdal_mcp.egress")

REFUSED_STATUS = 451
MAX_HEADER_BYTES = 64 * 1024
CONNECT_TIMEOUT = 30.0
HEADER_TIMEOUT = 10.0  # a client that does not finish its request header within this is dropped
IDLE_TIMEOUT = 120.0  # a transfer with no byte either way for this long is ended
MAX_CONNECTIONS = 256  # beyond this, new connections are closed at once (the server's file descriptors are finite)
READ_METHODS = frozenset({"GET", "HEAD", "POST"})
USER = "gdal-mcp"


def s3_endpoint() -> str | None:
    """host:port of a custom S3 endpoint (AWS_S3_ENDPOINT), lower-case."""
    endpoint = os.environ.get("AWS_S3_ENDPOINT", "").strip()
    if not endpoint:
        return None
    if "://" not in endpoint:
        endpoint = ("https://" if os.environ.get("AWS_HTTPS", "YES").upper() != "NO" else "http://") + endpoint
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{(parts.hostname or '').lower()}:{port}"


def azure_settings() -> dict[str, str]:
    """The fields of AZURE_STORAGE_CONNECTION_STRING (AccountName, BlobEndpoint …), keys lower-case."""
    fields = (f.partition("=") for f in os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "").split(";"))
    return {k.strip().lower(): v.strip() for k, _, v in fields if k.strip()}


def azure_endpoint() -> tuple[str, str] | None:
    """(host:port, path) of a custom Azure blob endpoint (the connection string's BlobEndpoint; Azurite's is
    http://127.0.0.1:10000/devstoreaccount1), lower-case host; None for Azure's own."""
    endpoint = azure_settings().get("blobendpoint", "")
    if not endpoint:
        return None
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{(parts.hostname or '').lower()}:{port}", parts.path.rstrip("/")


def s3_endpoint_tls() -> bool:
    """Whether the custom S3 endpoint is reached over TLS (AWS_HTTPS, or its URL's scheme)."""
    endpoint = os.environ.get("AWS_S3_ENDPOINT", "").strip().lower()
    if "://" in endpoint:
        return endpoint.startswith("https://")
    return os.environ.get("AWS_HTTPS", "YES").upper() != "NO"


#: request headers that make an object store read another object than the one the URL names (a server-side copy:
#: S3's CopyObject and UploadPartCopy, Azure's Copy Blob, Put Blob/Block From URL): the proxy decides by the URL alone
COPY_HEADERS = ("x-amz-copy-source", "x-ms-copy-source", "x-ms-source-")


#: the query keys of an Azure shared access signature (a SAS credential GDAL appends to each request)
SAS_KEYS = (
    "sv",
    "ss",
    "srt",
    "sp",
    "se",
    "st",
    "spr",
    "sig",
    "sr",
    "si",
    "sdd",
    "ses",
    "skoid",
    "sktid",
    "skt",
    "ske",
    "sks",
    "skv",
)


class Decider:
    """Whether the allow-list lets a request through (the proxy's rule, testable without sockets)."""

    def __init__(self, allowed: AllowList) -> None:
        self.allowed = allowed
        self.endpoint = s3_endpoint()
        self.azure = azure_endpoint()

    def url(self, method: str, url: str) -> str | None:
        """None when a plain-HTTP `method` request for `url` may go; else why not."""
        method = method.upper()
        parts = urlsplit(url)
        hostport = f"{(parts.hostname or '').lower()}:{parts.port or 80}"
        endpoint = hostport in (self.endpoint, self.azure[0] if self.azure else None)
        args = parse_qs(parts.query, keep_blank_values=True)
        if endpoint and any(len(v) > 1 for v in args.values()):  # prefix=ws/&prefix= : servers differ on which counts
            return "a repeated query parameter"
        try:
            # an object store's own request: its path decides (its query may carry a SAS the store checks)
            loc = parse(parts._replace(query="").geturl() if endpoint else url, what="request")
        except GdalMcpError as e:
            return e.message
        if endpoint:
            loc = Location(loc.scheme, loc.host, loc.path, parts.query)
        if self.endpoint is not None and hostport == self.endpoint:
            bucket, _, key = loc.path.partition("/")
            if bucket and key and self._covered(Location("s3", bucket.lower(), key)):
                return None
            if bucket and not key and method in ("GET", "HEAD") and self._listing_allowed(bucket, loc.query):
                return None
            return f"s3://{bucket}/{key} ({method}) is outside the allowed remote locations"
        if self.azure is not None and hostport == self.azure[0] and f"/{loc.path}".startswith(f"{self.azure[1]}/"):
            container, _, key = f"/{loc.path}".removeprefix(f"{self.azure[1]}/").partition("/")
            if container and key and self._covered(Location("az", container.lower(), key)):
                return None  # a blob's own requests (Put Blob, Put Block, Put Block List, GET, HEAD, DELETE)
            if container and not key and method in ("GET", "HEAD") and self._listing_allowed(container, loc.query, "az"):
                return None
            return f"az://{container}/{key} ({method}) is outside the allowed remote locations"
        if self._covered(loc):
            return None if method in READ_METHODS else f"{method} is not allowed to {loc.url.split('?', 1)[0]}"
        return f"{loc.url.split('?', 1)[0]} is outside the allowed remote locations"

    def tunnel(self, host: str, port: int) -> str | None:
        """None when an HTTPS tunnel to host:port may open; else why not."""
        host = host.lower().strip("[]")
        for entry in self.allowed.entries:
            if entry.scheme == "https":
                name, _, entry_port = entry.host.partition(":") if not entry.host.startswith("[") else (entry.host, "", "")
                if name.strip("[]") == host and port == int(entry_port or 443):
                    return None
            elif entry.scheme in ("s3", "gs", "az") and (host, port) in object_hosts(entry, self.endpoint):
                return None
        return f"{host}:{port} is not an allowed remote host"

    def _covered(self, loc: Location) -> bool:
        return any(entry.covers(loc) for entry in self.allowed.entries)

    def _listing_allowed(self, bucket: str, query: str, scheme: str = "s3") -> bool:
        """A bucket-level GET: only a listing (S3's list-type=2, Azure's restype=container&comp=list) whose prefix lies
        under an allowed prefix of that bucket or container."""
        args = parse_qs(query, keep_blank_values=True)
        if scheme == "az":
            if args.get("restype") != ["container"] or args.get("comp") != ["list"]:
                return False
            args = {k: v for k, v in args.items() if k not in ("restype", "comp", "include", "maxresults", *SAS_KEYS)}
        if set(args) - {
            "list-type",
            "prefix",
            "delimiter",
            "continuation-token",
            "max-keys",
            "encoding-type",
            "start-after",
            "marker",
        }:
            return False
        prefix = (args.get("prefix") or [""])[0]
        for entry in self.allowed.entries:
            if entry.scheme != scheme or entry.host != bucket.lower():
                continue
            allowed = entry.path.rstrip("/")
            if not allowed or prefix.startswith(allowed + "/"):  # not 'ws' alone: it would list 'ws-private/' too
                return True
        return False


def object_hosts(entry: Location, endpoint: str | None) -> set[tuple[str, int]]:
    """The (host, port) an allowed bucket or container is reached at over HTTPS: its own virtual host on 443, the
    custom endpoint, and (when the operator asks for path-style addressing, AWS_VIRTUAL_HOSTING=FALSE, or for
    Google Cloud Storage) the shared host."""
    bucket = entry.host
    hosts: set[tuple[str, int]] = set()
    if entry.scheme == "s3":
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
        hosts.add((f"{bucket}.s3.amazonaws.com", 443))
        if region:
            hosts.add((f"{bucket}.s3.{region}.amazonaws.com", 443))
        if os.environ.get("AWS_VIRTUAL_HOSTING", "TRUE").upper() in ("FALSE", "NO", "0"):
            hosts |= {("s3.amazonaws.com", 443)} | ({(f"s3.{region}.amazonaws.com", 443)} if region else set())
        if endpoint and s3_endpoint_tls():  # a plain-HTTP endpoint is never tunnelled: its requests are decided by path
            name, _, port = endpoint.rpartition(":")
            hosts.add((name, int(port)))
    elif entry.scheme == "gs":
        hosts |= {("storage.googleapis.com", 443), (f"{bucket}.storage.googleapis.com", 443)}
    else:
        account = os.environ.get("AZURE_STORAGE_ACCOUNT", "") or azure_settings().get("accountname", "")
        if account:
            hosts |= {(f"{account}.blob.core.windows.net", 443), (f"{account}.dfs.core.windows.net", 443)}
        custom = azure_endpoint()
        if custom is not None and urlsplit(azure_settings().get("blobendpoint", "")).scheme == "https":
            name, _, port = custom[0].rpartition(":")  # a plain-HTTP endpoint (Azurite) is decided by path, never tunnelled
            hosts.add((name, int(port)))
    return hosts


class EgressProxy:
    """The proxy on its own thread and event loop: `port` once started; `token` what its clients must present;
    `refusals` counts what it turned away."""

    def __init__(self, allowed: AllowList, *, token: str | None = None) -> None:
        self.decider = Decider(allowed)
        self.token = token or secrets.token_urlsafe(24)
        self._auth = "Basic " + base64.b64encode(f"{USER}:{self.token}".encode()).decode()
        self.port = 0
        self.refusals = 0
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gdal-mcp-egress", daemon=True)

    def start(self) -> EgressProxy:
        self._thread.start()
        if not self._ready.wait(10) or not self.port:
            raise RuntimeError("the egress proxy for the workers did not start")
        return self

    def close(self) -> None:
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(5)

    def serve_forever(self) -> None:
        """Run on this thread (the child process of `spawn`)."""
        self._run()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        loop.set_exception_handler(_quiet_loop_errors)
        try:
            server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, limit=MAX_HEADER_BYTES))
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            loop.run_forever()
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            writer.close()
            return
        self.connections += 1
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass
        finally:
            self.connections -= 1
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT)
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            await self._refuse(writer, "malformed request", status=400)
            return
        headers = [h for h in lines[1:] if h]
        fields = {h.split(":", 1)[0].strip().lower(): h.split(":", 1)[1].strip() for h in headers if ":" in h}
        if not secrets.compare_digest(fields.get("proxy-authorization", ""), self._auth):
            await self._refuse(writer, "this proxy serves gdal-mcp's workers only", status=407)
            return
        if method.upper() == "CONNECT":
            host, _, port_text = target.rpartition(":")
            try:
                port = int(port_text)
            except ValueError:
                await self._refuse(writer, "malformed CONNECT target", status=400)
                return
            reason = self.decider.tunnel(host, port)
            if reason is not None:
                await self._refuse(writer, reason)
                return
            await self._tunnel(reader, writer, host.strip("[]"), port)
            return
        if "transfer-encoding" in fields:
            await self._refuse(writer, "chunked request bodies are not relayed", status=400)
            return
        lengths = [h.split(":", 1)[1].strip() for h in headers if h.split(":", 1)[0].strip().lower() == "content-length"]
        # one plain decimal length or none: a second header, '+3' or '1_0' could be read otherwise upstream (smuggling)
        length = int(lengths[0]) if len(lengths) == 1 and lengths[0].isascii() and lengths[0].isdigit() else -1
        if not lengths:
            length = 0
        if length < 0:
            await self._refuse(writer, "bad Content-Length", status=400)
            return
        reason = self.decider.url(method, target) if target.lower().startswith("http://") else "only absolute http:// URLs"
        if reason is None and any(name.startswith(COPY_HEADERS) for name in fields):
            reason = "a server-side copy (its source is not decided by the URL)"
        if reason is not None:
            await self._refuse(writer, reason)
            return
        parts = urlsplit(target)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rsplit("@", 1)[-1]
        kept = [
            h
            for h in headers
            if h.split(":", 1)[0].strip().lower()
            not in ("host", "connection", "keep-alive", "proxy-authorization", "proxy-connection", "expect", "content-length")
        ]
        if length:
            kept.append(f"Content-Length: {length}")
        request = (
            f"{method} {path} {version}\r\nHost: {host}\r\n" + "".join(f"{h}\r\n" for h in kept) + "Connection: close\r\n\r\n"
        )
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(parts.hostname, parts.port or 80), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError) as e:
            await self._refuse(writer, f"cannot reach {parts.hostname}: {e}", status=502)
            return
        try:
            up_writer.write(request.encode("latin-1"))
            if length and fields.get("expect", "").lower() == "100-continue":
                # curl sends an upload's body only after "100 Continue", or after waiting 1 s for it: every PUT
                # (GDAL's uploads) took a second more. The request is allowed: ask for the body now (upstream gets
                # no Expect, so its answer is the final one this proxy reads below).
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            remaining = length  # exactly the declared body, nothing after it (no pipelined second request)
            while remaining:
                chunk = await asyncio.wait_for(reader.read(min(remaining, 256 * 1024)), IDLE_TIMEOUT)
                if not chunk:
                    return
                up_writer.write(chunk)
                remaining -= len(chunk)
                await up_writer.drain()
            answer = await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
            status_line, *answer_headers = answer.decode("latin-1").split("\r\n")
            kept_answer = [h for h in answer_headers if h and not h.lower().startswith(("connection:", "keep-alive:"))]
            writer.write(
                (status_line + "\r\n" + "".join(f"{h}\r\n" for h in kept_answer) + "Connection: close\r\n\r\n").encode("latin-1")
            )
            await _pipe(up_reader, writer)
        finally:
            with contextlib.suppress(Exception):
                up_writer.close()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as e:
            await self._refuse(writer, f"cannot reach {host}: {e}", status=502)
            return
        try:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer, eof=True), _pipe(up_reader, writer, eof=True))
        finally:
            with contextlib.suppress(Exception):
                up_writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, reason: str, *, status: int = REFUSED_STATUS) -> None:
        titles = {REFUSED_STATUS: "Refused by gdal-mcp", 400: "Bad Request", 407: "Proxy Authentication Required"}
        if status == REFUSED_STATUS:
            self.refusals += 1
            log.warning("egress refused: %s", reason)
        body = f"gdal-mcp: {reason}\n".encode()
        writer.write(
            f"HTTP/1.1 {status} {titles.get(status, 'Bad Gateway')}\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, eof: bool = False) -> None:
    """Copy until the reader ends or stalls for IDLE_TIMEOUT; `eof`: then half-close the writer (a tunnel's other
    direction may go on)."""
    try:
        while chunk := await asyncio.wait_for(reader.read(256 * 1024), IDLE_TIMEOUT):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError):
        pass
    finally:
        if eof:
            with contextlib.suppress(Exception):
                if writer.can_write_eof():
                    writer.write_eof()
                else:
                    writer.close()


def _quiet_loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """accept() failing (out of file descriptors) must not flood the server's stderr: one line per minute."""
    now = time.monotonic()
    if now - _last_loop_error[0] >= 60:
        _last_loop_error[0] = now
        log.warning("egress proxy: %s", context.get("message") or context.get("exception"))


_last_loop_error = [-1e9]


def proxy_environment(port: int, token: str) -> dict[str, str]:
    """What a worker sets so GDAL and Python's HTTP clients go through the proxy, with its token."""
    url = f"http://{USER}:{token}@127.0.0.1:{port}"
    return {
        "GDAL_HTTP_PROXY": f"127.0.0.1:{port}",
        "GDAL_HTTP_PROXYUSERPWD": f"{USER}:{token}",
        "GDAL_PROXY_AUTH": "BASIC",
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": "",
        "no_proxy": "",
    }


def spawn(entries: Iterable[str]) -> tuple[subprocess.Popen[bytes], int, str]:
    """The proxy as a child process of this one (a Dask worker): (process, port, token). It ends with its parent."""
    token = secrets.token_urlsafe(24)
    env = {**os.environ, "GDAL_MCP_EGRESS": json.dumps({"allow": list(entries), "token": token, "parent": os.getpid()})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gdal_mcp.execution.egress"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.isdigit():
        proc.kill()
        raise RuntimeError("the egress proxy process did not start")
    return proc, int(line), token


def _main() -> None:
    spec = json.loads(os.environ.pop("GDAL_MCP_EGRESS"))
    proxy = EgressProxy(AllowList(tuple(spec["allow"])), token=spec["token"])
    parent = int(spec["parent"])

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    # the port on this child's own stdout, a pipe to the Dask worker that spawned it (never the MCP stream)
    threading.Thread(target=lambda: (proxy._ready.wait(10), os.write(1, f"{proxy.port}\n".encode())), daemon=True).start()
    proxy.serve_forever()


if __name__ == "__main__":
    _main()
