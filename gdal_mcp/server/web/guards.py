"""HTTP transport guards: bearer token, and Host and Origin checking (DNS-rebinding protection)."""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fastmcp.server.auth import AccessToken, TokenVerifier

if TYPE_CHECKING:
    from fastmcp import FastMCP

HEALTH_ROUTE = "/healthz"


def register_health(mcp: FastMCP, confined: bool = True) -> None:
    """GET /healthz: {"status": "ok", "confined": true} without a token, for container and load-balancer health
    checks.

    It says only that the HTTP server answers and whether the processes that run GDAL are confined by the kernel
    (false: the operator started it with --allow-unconfined on a kernel without Landlock): no version, workspace,
    job or worker detail. The Host and Origin guards wrap it like every route (a probe sends a loopback Host or an
    --allow-host name).
    """
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    @mcp.custom_route(HEALTH_ROUTE, methods=["GET"], name="healthz")
    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "confined": confined}, headers={"Cache-Control": "no-store"})


class StaticBearerToken(TokenVerifier):
    """Accepts exactly one shared token (GDAL_MCP_TOKEN), compared in constant time."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="gdal-mcp-client", scopes=[])
        return None


def is_loopback_host(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host in ("localhost", "localhost.localdomain") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_unspecified_host(host: str) -> bool:
    """True for a wildcard bind address (0.0.0.0, ::) or an empty one."""
    host = host.strip().strip("[]")
    if not host:
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header (or an --allow-host entry) as (lower-case name, port or None); None if malformed.

    'Example.org:8000' -> ('example.org', 8000), '[::1]:80' -> ('::1', 80), '::1' -> ('::1', None).
    A trailing dot (fully qualified name) is dropped.
    """
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end == -1:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, port_text = value.split(":")
    else:  # a name without port, or a bare IPv6 address
        name, port_text = value, None
    name = name.rstrip(".")
    if not name or any(c.isspace() or c in "/@?#" for c in name):
        return None
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def _json_error(status: int, error: str, description: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = json.dumps({"error": error, "error_description": description}).encode()
    return (
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        },
        {"type": "http.response.body", "body": body},
    )


class HostGuard:
    """ASGI middleware: a request whose Host header names a host this server does not serve gets 421.

    A DNS-rebinding page reaches a loopback server under the attacker's own name, which the browser
    sends as Host; checking it defeats the attack even when the browser sends no Origin. Allowed: loopback
    names and addresses (any port), the bind address unless it is a wildcard (0.0.0.0, ::), and each
    --allow-host entry (a name allows any port, 'name:port' that port only, '*' every host).
    """

    def __init__(self, app: Any, allowed_hosts: Iterable[str] = (), bind_host: str | None = None) -> None:
        self.app = app
        entries = [h for h in allowed_hosts if h.strip()]
        self.allow_all = any(h.strip() == "*" for h in entries)
        self.allowed: set[tuple[str, int | None]] = set()
        for entry in [*entries, *([bind_host] if bind_host and not is_unspecified_host(bind_host) else [])]:
            parsed = split_host(entry) if entry.strip() != "*" else None
            if parsed is not None:
                self.allowed.add(parsed)

    def host_allowed(self, value: str) -> bool:
        if self.allow_all:
            return True
        parsed = split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        return is_loopback_host(name) or (name, None) in self.allowed or (name, port) in self.allowed

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            host = None
            for name, value in scope.get("headers", []):
                if name == b"host":
                    host = value.decode("latin-1")
                    break
            if host is None or not self.host_allowed(host):
                shown = repr(host) if host is not None else "(missing)"
                name = split_host(host or "")
                hint = f"--allow-host {name[0]}" if name else "--allow-host NAME"
                start, body = _json_error(
                    421,
                    "invalid_host",
                    f"Host {shown} is not served here (DNS-rebinding protection): use a loopback address, or "
                    f"start the server with {hint} (GDAL_MCP_ALLOW_HOST) if clients reach it by that name",
                )
                await send(start)
                await send(body)
                return
        await self.app(scope, receive, send)


class OriginGuard:
    """ASGI middleware: a request whose Origin is neither loopback nor allow-listed gets 403.

    Requests without an Origin header (non-browser clients) pass; browsers always send one, which is
    what a DNS-rebinding page would have to use.
    """

    def __init__(self, app: Any, allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = {o.strip().rstrip("/").lower() for o in allowed_origins if o.strip()}

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.allowed or "*" in self.allowed:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return is_loopback_host(parts.hostname)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            origin = None
            for name, value in scope.get("headers", []):
                if name == b"origin":
                    origin = value.decode("latin-1")
                    break
            if origin is not None and not self.origin_allowed(origin):
                start, body = _json_error(
                    403,
                    "forbidden_origin",
                    f"Origin {origin!r} is not allowed; start the server with --allow-origin to permit it",
                )
                await send(start)
                await send(body)
                return
        await self.app(scope, receive, send)
