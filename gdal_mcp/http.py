"""HTTP transport guards: bearer token and Origin checking (DNS-rebinding protection)."""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from fastmcp.server.auth import AccessToken, TokenVerifier


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
                body = json.dumps({"error": "forbidden_origin",
                                   "error_description": f"Origin {origin!r} is not allowed; "
                                   "start the server with --allow-origin to permit it"}).encode()
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
