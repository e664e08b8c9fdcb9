"""The attacker's bench (module-scoped fixtures): a directory of secrets outside the workspace, a loopback canary
that counts every connection, and one server on a module's workspace (`served`). The workspace, the real MCP client
to attack with, and `attack` itself are plain helpers in tests/security/helpers.py.

Every attack asserts the same three things (SECURITY.md): the call is refused with a stable code (never
internal-error), no byte of an outside secret appears in anything the client gets back, no connection reaches the
canary; and the server answers the next call.
"""

from __future__ import annotations

import shutil
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import ClientSession

from tests.helpers import DATA
from tests.security.helpers import Canary, Secrets, shared_session


@pytest.fixture(scope="module")
def canary() -> Iterator[Canary]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    c = Canary(srv.getsockname()[1])

    def accept() -> None:
        while True:
            try:
                conn, addr = srv.accept()
            except OSError:
                return
            c.hits.append(addr)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield c
    srv.close()


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Secrets:
    d = tmp_path_factory.mktemp("outside")
    token = "SECRET" + uuid.uuid4().hex
    (d / "secret.txt").write_text(f"{token}\n" * 64)
    (d / "secret.csv").write_text(f"id,name,WKT\n1,{token},POINT (1 2)\n")
    (d / "secret.prj").write_text(
        f'GEOGCS["{token}",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],'
        'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]]'
    )
    (d / "secret.idx").write_bytes((0).to_bytes(8, "big") + (64).to_bytes(8, "big"))
    for ext in ("shp", "shx", "dbf", "prj"):
        shutil.copy(DATA / "vector" / f"points.{ext}", d / f"secret.{ext}")
    shutil.copy(DATA / "raster" / "RGB.byte.tif", d / "secret.tif")
    return Secrets(d, token)


@pytest.fixture(scope="module")
async def served(ws: Path) -> AsyncIterator[ClientSession]:
    """One real server (stdio) on the module's `ws` for the module's tests that attack it with default options."""
    async with shared_session(ws) as s:
        yield s
