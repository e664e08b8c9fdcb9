"""GET/HEAD /files/<path> over the HTTP transport: workspace files (tool outputs) for a person or a program.

Behind the same bearer token as /mcp (or, later, an approval-console session), sandboxed like every
path, streamed from disk in chunks (no --max-resource-size cap: that cap is for resources/read, which
puts the whole file in one JSON message), with single and multiple byte ranges, ETag and Last-Modified
(Starlette's FileResponse). The Host and Origin guards wrap this route like the MCP endpoint.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import TMP_PREFIX
from gdal_mcp.server.app import App

if TYPE_CHECKING:
    from fastmcp import FastMCP

ROUTE = "/files/{path:path}"
STATUS = {"out-of-root": 403, "not-found": 404, "invalid-argument": 400, "unsupported": 400}


def console_session_ok(app: App, request: Request) -> bool:
    """Whether the request carries a valid approval-console session cookie (gdal_mcp/server/web/console.py)."""
    return app.console is not None and app.console.session(request) is not None


def _token_ok(app: App, request: Request) -> bool:
    token = app.settings.token
    if not token:
        return True  # no token configured: the server only listens on loopback (cli.serve refuses otherwise)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"success": False, "error": {"code": code, "message": message}}, status_code=status, headers=headers)


async def file_response(app: App, request: Request) -> Response:
    """The response to GET/HEAD /files/<path>."""
    if not (_token_ok(app, request) or console_session_ok(app, request)):
        return _error(
            401,
            "unauthorized",
            "send the server's token as 'Authorization: Bearer <token>'",
            {"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    path = app.sandbox.resource_path(request.path_params.get("path", ""))
    from gdal_mcp.formats import mime_type

    try:
        if any(part.startswith(TMP_PREFIX) for part in path.split("/")):
            raise GdalMcpError("not-found", f"'{path}' is an unfinished output; download it once its tool returns")
        location = app.sandbox.bucket_location(path, what="file") if app.sandbox.bucket is not None else None
        if location is not None:
            return await object_response(app, request, location.gdal_path, path)
        real = app.sandbox.resolve_file(path, what="file")
        if real.is_dir():
            raise GdalMcpError("invalid-argument", f"'{path}' is a directory; list_datasets lists it")
    except GdalMcpError as e:
        return _error(STATUS.get(e.code, 400), e.code, app.sandbox.scrub(e.message))
    return FileResponse(real, media_type=mime_type(real.name), filename=real.name, content_disposition_type="attachment")


#: bytes one worker job reads of an object being downloaded
OBJECT_CHUNK = 8 * 1024 * 1024


async def object_response(app: App, request: Request, gdal_path: str, shown: str) -> Response:
    """An object of the bucket workspace, streamed in chunks that workers read through the allow-list (whole objects;
    no byte ranges)."""
    from starlette.responses import StreamingResponse

    from gdal_mcp import jobs
    from gdal_mcp.formats import mime_type

    head = request.method == "HEAD"
    size, first = await app.execute(jobs.ReadObjectJob(path=gdal_path, length=0 if head else OBJECT_CHUNK), quick=True)
    name = shown.rsplit("/", 1)[-1]
    headers = {"Content-Length": str(size), "Content-Disposition": f'attachment; filename="{name}"'}
    if head:
        return Response(status_code=200, media_type=mime_type(name), headers=headers)

    async def chunks() -> AsyncIterator[bytes]:
        yield first
        offset = len(first)
        while offset < size:
            _, data = await app.execute(jobs.ReadObjectJob(path=gdal_path, offset=offset, length=OBJECT_CHUNK), quick=True)
            if not data:
                return
            yield data
            offset += len(data)

    return StreamingResponse(chunks(), media_type=mime_type(name), headers=headers)


def register(mcp: FastMCP, app: App) -> None:
    """Add the /files route to the server's HTTP app (custom routes are not behind FastMCP's auth: checked here)."""

    @mcp.custom_route(ROUTE, methods=["GET", "HEAD"], name="download")
    async def download(request: Request) -> Response:
        return await file_response(app, request)
