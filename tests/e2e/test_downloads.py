"""GET/HEAD /files/<path> over HTTP: token, byte ranges, sandboxing, no resource-size cap; write results link it."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from fastmcp import Client

from gdal_mcp.sandbox import TMP_PREFIX
from tests.e2e.test_http import free_port, start, wait_listening
from tests.helpers import make_workspace

TOKEN = "download-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real HTTP server with a token, and a resource cap far below the test rasters' sizes."""
    ws = make_workspace(tmp_path_factory.mktemp("downloads"))
    (ws / f"{TMP_PREFIX}0123456789abcdef0123456789abcdef").mkdir()
    (ws / f"{TMP_PREFIX}0123456789abcdef0123456789abcdef" / "part.tif").write_bytes(b"partial")
    port = free_port()
    proc = start(ws, port, TOKEN, "--max-resource-size", "4K")
    try:
        wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}", ws
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
        assert out == b"", f"HTTP server wrote to stdout: {out[:200]!r}"


def raw_get(base: str, target: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """A GET with the request target sent exactly as given (no client-side dot-segment normalisation)."""
    host, port = base.removeprefix("http://").split(":")
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}:{port}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in headers.items()),
        "",
        "",
    ]
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall("\r\n".join(lines).encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_download_needs_the_token(served: tuple[str, Path]) -> None:
    base, ws = served
    url = f"{base}/files/raster/RGB.byte.tif"
    r = httpx2.get(url)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert httpx2.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = httpx2.get(url, headers=AUTH)
    assert r.status_code == 200 and r.content == (ws / "raster" / "RGB.byte.tif").read_bytes()
    assert r.headers["content-type"] == "image/tiff"
    assert r.headers["accept-ranges"] == "bytes" and r.headers["etag"] and r.headers["last-modified"]


def test_file_over_the_resource_cap_downloads_whole(served: tuple[str, Path]) -> None:
    base, ws = served
    data = (ws / "raster" / "RGB.byte.tif").read_bytes()
    assert len(data) > 4096 * 100  # far over --max-resource-size 4K
    with httpx2.stream("GET", f"{base}/files/raster/RGB.byte.tif", headers=AUTH) as r:
        chunks = list(r.iter_bytes())
    assert b"".join(chunks) == data and int(r.headers["content-length"]) == len(data)


async def test_resources_read_keeps_its_cap(served: tuple[str, Path]) -> None:
    base, _ = served
    async with Client(f"{base}/mcp", auth=TOKEN) as c:
        with pytest.raises(Exception, match="resource-limit"):
            await c.read_resource("gdal-mcp://files/raster/RGB.byte.tif")


def test_range_requests(served: tuple[str, Path]) -> None:
    base, ws = served
    data = (ws / "raster" / "RGB.byte.tif").read_bytes()
    url = f"{base}/files/raster/RGB.byte.tif"
    r = httpx2.get(url, headers={**AUTH, "Range": "bytes=1000-1999"})
    assert r.status_code == 206 and r.content == data[1000:2000]
    assert r.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    r = httpx2.get(url, headers={**AUTH, "Range": "bytes=-16"})  # the last 16 bytes
    assert r.status_code == 206 and r.content == data[-16:]
    r = httpx2.get(url, headers={**AUTH, "Range": f"bytes={len(data) - 5}-"})
    assert r.status_code == 206 and r.content == data[-5:]
    r = httpx2.get(url, headers={**AUTH, "Range": f"bytes={len(data) + 10}-{len(data) + 20}"})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{len(data)}"
    # If-Range with the current ETag: the range; with a stale one: the whole file
    etag = httpx2.head(url, headers=AUTH).headers["etag"]
    r = httpx2.get(url, headers={**AUTH, "Range": "bytes=0-9", "If-Range": etag})
    assert r.status_code == 206 and r.content == data[:10]
    r = httpx2.get(url, headers={**AUTH, "Range": "bytes=0-9", "If-Range": '"stale"'})
    assert r.status_code == 200 and r.content == data


def test_head(served: tuple[str, Path]) -> None:
    base, ws = served
    size = (ws / "raster" / "RGB.byte.tif").stat().st_size
    r = httpx2.head(f"{base}/files/raster/RGB.byte.tif", headers=AUTH)
    assert r.status_code == 200 and r.content == b"" and int(r.headers["content-length"]) == size
    assert httpx2.head(f"{base}/files/raster/RGB.byte.tif").status_code == 401


def test_paths_are_sandboxed(served: tuple[str, Path]) -> None:
    base, ws = served
    outside = ws.parent / "outside.txt"
    outside.write_text("secret")
    for target in (
        "/files/raster/%2e%2e/%2e%2e/outside.txt",
        "/files/../outside.txt",
        "/files/raster/../../outside.txt",
        f"/files/{outside}",
        "/files/%2Fetc%2Fpasswd",
        "/files//etc/passwd",
    ):
        status, body = raw_get(base, target, AUTH)
        assert status in (403, 404), (target, status)
        assert b"secret" not in body and b"root:" not in body, target
    status, body = raw_get(base, "/files/raster/%2e%2e/%2e%2e/outside.txt", AUTH)
    assert status == 403 and b"out-of-root" in body
    r = httpx2.get(f"{base}/files/raster/nope.tif", headers=AUTH)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not-found"
    assert httpx2.get(f"{base}/files/raster", headers=AUTH).status_code == 400  # a directory
    for target in ("/files/%2Fvsizip%2Fraster%2Fx.zip%2Fa.tif", '/files/NETCDF:"raster/x.nc":v', "/files/PG:dbname=x"):
        status, _ = raw_get(base, target, AUTH)
        assert status in (403, 404), (target, status)
    tmp = f"/files/{TMP_PREFIX}0123456789abcdef0123456789abcdef/part.tif"
    status, body = raw_get(base, tmp, AUTH)
    assert status == 404 and b"partial" not in body  # an unfinished output is not served
    # the Host guard covers the route too
    assert httpx2.get(f"{base}/files/raster/RGB.byte.tif", headers={**AUTH, "Host": "evil.example"}).status_code == 421


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_write_result_links_the_download(served: tuple[str, Path], mode: str) -> None:
    base, ws = served
    out = f"out/linked_{mode}.tif"
    async with Client(f"{base}/mcp", auth=TOKEN, mode=mode) as c:
        r = await c.call_tool("raster_convert", {"input": "raster/float_nan.tif", "output": out})
        sc = r.structured_content
        assert sc["uri"] == f"gdal-mcp://files/{out}"
        assert sc["download_url"] == f"{base}/files/{out}"
        links = [x for x in r.content if x.type == "resource_link"]
        assert len(links) == 1
        link = links[0]
        assert str(link.uri) == sc["uri"] and link.name == f"linked_{mode}.tif" and link.mime_type == "image/tiff"
        assert link.size == (ws / out).stat().st_size
        blob = (await c.read_resource(sc["uri"]))[0].blob  # small: the resource serves it too
        assert base64.b64decode(blob) == (ws / out).read_bytes()
    r = httpx2.get(sc["download_url"], headers=AUTH)
    assert r.status_code == 200 and r.content == (ws / out).read_bytes()
