"""The workers' one way out to the network: a forward proxy on 127.0.0.1 that lets through only the remote locations
the operator allows (--allow-remote).

With an allow-list, the kernel lets a local worker connect to one TCP port, this proxy's (confine.Policy.proxy_port),
and GDAL (GDAL_HTTP_PROXY) and Python's HTTP clients (HTTP_PROXY/HTTPS_PROXY) send every request through it. So the
list holds by construction for what no argument names: a redirect from an allowed server to another one, a URL a
remote dataset names inside itself, a STAC link. The proxy decides on:

- a plain-HTTP request (absolute URL): the location itself, or, for the configured S3 endpoint (AWS_S3_ENDPOINT with
  path-style addressing), the s3://bucket/key it addresses;
- an HTTPS tunnel (CONNECT host:port): the host only (TLS hides the path; the sandbox checked the path of the
  location the tool was given): an allowed https:// host, or the object-storage host of an allowed bucket.

A refused request gets status 451 with the reason; the worker reports it as out-of-root (execution/common.py). Runs in
the server process on its own thread and event loop; never loads GDAL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Iterable
from urllib.parse import urlsplit

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.remote import AllowList, Location, parse

log = logging.getLogger("gdal_mcp.egress")

REFUSED_STATUS = 451
MAX_HEADER_BYTES = 64 * 1024
CONNECT_TIMEOUT = 30.0


def s3_endpoint() -> str | None:
    """host:port of a custom S3 endpoint addressed path-style (AWS_S3_ENDPOINT, AWS_VIRTUAL_HOSTING=FALSE)."""
    endpoint = os.environ.get("AWS_S3_ENDPOINT", "").strip()
    if not endpoint:
        return None
    if "://" not in endpoint:
        endpoint = ("https://" if os.environ.get("AWS_HTTPS", "YES").upper() != "NO" else "http://") + endpoint
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{(parts.hostname or '').lower()}:{port}"


class Decider:
    """Whether the allow-list lets a request through (the proxy's rule, testable without sockets)."""

    def __init__(self, allowed: AllowList) -> None:
        self.allowed = allowed
        self.endpoint = s3_endpoint()

    def url(self, url: str) -> str | None:
        """None when a plain-HTTP request for `url` may go; else why not."""
        try:
            loc = parse(url, what="request")
        except GdalMcpError as e:
            return e.message
        if self._covered(loc):
            return None
        parts = urlsplit(url)
        hostport = f"{(parts.hostname or '').lower()}:{parts.port or 80}"
        if self.endpoint is not None and hostport == self.endpoint:
            bucket, _, key = loc.path.partition("/")
            if bucket and self._covered_s3(bucket, key):
                return None
        return f"{loc.url.split('?', 1)[0]} is outside the allowed remote locations"

    def tunnel(self, host: str, port: int) -> str | None:
        """None when an HTTPS tunnel to host:port may open; else why not."""
        host = host.lower().strip("[]")
        for entry in self.allowed.entries:
            if entry.scheme == "https" and entry.host in (host, f"{host}:{port}") and (port == 443 or ":" in entry.host):
                return None
            if entry.scheme in ("s3", "gs", "az") and host in object_hosts(entry, self.endpoint):
                return None
        return f"{host}:{port} is not an allowed remote host"

    def _covered(self, loc: Location) -> bool:
        return any(entry.covers(loc) for entry in self.allowed.entries)

    def _covered_s3(self, bucket: str, key: str) -> bool:
        return any(entry.covers(Location("s3", bucket.lower(), key)) for entry in self.allowed.entries) or (
            not key and any(e.scheme == "s3" and e.host == bucket.lower() for e in self.allowed.entries)
        )


def object_hosts(entry: Location, endpoint: str | None) -> set[str]:
    """The HTTPS host names that serve an allowed bucket or container."""
    bucket = entry.host
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
    if entry.scheme == "s3":
        hosts = {f"{bucket}.s3.amazonaws.com", "s3.amazonaws.com"}
        if region:
            hosts |= {f"{bucket}.s3.{region}.amazonaws.com", f"s3.{region}.amazonaws.com"}
        if endpoint:
            hosts.add(endpoint.rsplit(":", 1)[0])
        return hosts
    if entry.scheme == "gs":
        return {"storage.googleapis.com", f"{bucket}.storage.googleapis.com"}
    account = os.environ.get("AZURE_STORAGE_ACCOUNT", "")
    return {f"{account}.blob.core.windows.net", f"{account}.dfs.core.windows.net"} if account else set()


class EgressProxy:
    """The proxy, started on its own thread: `port` once started; `refusals` counts what it turned away."""

    def __init__(self, allowed: AllowList) -> None:
        self.decider = Decider(allowed)
        self.port = 0
        self.refusals = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
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

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, limit=MAX_HEADER_BYTES))
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()
            loop.run_forever()
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            await self._refuse(writer, "malformed request")
            return
        if method.upper() == "CONNECT":
            host, _, port_text = target.rpartition(":")
            try:
                port = int(port_text)
            except ValueError:
                await self._refuse(writer, "malformed CONNECT target")
                return
            reason = self.decider.tunnel(host, port)
            if reason is not None:
                await self._refuse(writer, reason)
                return
            await self._tunnel(reader, writer, host.strip("[]"), port)
            return
        reason = self.decider.url(target) if target.lower().startswith("http://") else "only absolute http:// URLs"
        if reason is not None:
            await self._refuse(writer, reason)
            return
        parts = urlsplit(target)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = [h for h in lines[1:] if h and not h.lower().startswith(("proxy-", "connection:", "keep-alive:"))]
        request = f"{method} {path} {version}\r\n" + "".join(f"{h}\r\n" for h in headers) + "Connection: close\r\n\r\n"
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(parts.hostname, parts.port or 80), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError) as e:
            await self._refuse(writer, f"cannot reach {parts.hostname}: {e}", status=502)
            return
        up_writer.write(request.encode("latin-1"))
        # a request body (POST to a STAC API's /search) goes up while the answer comes back; one request per
        # connection: the answer says Connection: close, and both connections end with it
        body = asyncio.ensure_future(_pipe(reader, up_writer, eof=True))
        try:
            answer = await up_reader.readuntil(b"\r\n\r\n")
            status_line, *answer_headers = answer.decode("latin-1").split("\r\n")
            kept = [h for h in answer_headers if h and not h.lower().startswith(("connection:", "keep-alive:"))]
            writer.write(
                (status_line + "\r\n" + "".join(f"{h}\r\n" for h in kept) + "Connection: close\r\n\r\n").encode("latin-1")
            )
            await _pipe(up_reader, writer, eof=False)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            body.cancel()
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as e:
            await self._refuse(writer, f"cannot reach {host}: {e}", status=502)
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(_pipe(reader, up_writer, eof=True), _pipe(up_reader, writer, eof=True))

    async def _refuse(self, writer: asyncio.StreamWriter, reason: str, *, status: int = REFUSED_STATUS) -> None:
        if status == REFUSED_STATUS:
            self.refusals += 1
            log.warning("egress refused: %s", reason)
        body = f"gdal-mcp: {reason}\n".encode()
        writer.write(
            f"HTTP/1.1 {status} {'Refused by gdal-mcp' if status == REFUSED_STATUS else 'Bad Gateway'}\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, eof: bool) -> None:
    """Copy until the reader ends; `eof`: then half-close the writer (a tunnel's other direction may go on)."""
    try:
        while chunk := await reader.read(256 * 1024):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if eof:
            with contextlib.suppress(Exception):
                if writer.can_write_eof():
                    writer.write_eof()
                else:
                    writer.close()


def proxy_environment(port: int) -> dict[str, str]:
    """What a worker sets so GDAL and Python's HTTP clients go through the proxy."""
    url = f"http://127.0.0.1:{port}"
    return {
        "GDAL_HTTP_PROXY": f"127.0.0.1:{port}",
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": "",
        "no_proxy": "",
    }


def allowed_hosts(entries: Iterable[Location]) -> list[str]:
    return sorted({e.host for e in entries})
