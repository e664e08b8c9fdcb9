"""Shared fixtures: a temporary workspace holding a copy of tests/data, and one warm server for the session."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastmcp import Client

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server

DATA = Path(__file__).parent / "data"


def make_workspace(root: Path) -> Path:
    """Copy the test data into `root` (tests write beside copies, never beside the originals)."""
    for sub in ("raster", "vector", "bad"):
        shutil.copytree(DATA / sub, root / sub, dirs_exist_ok=True)
    rgb = (root / "raster" / "RGB.byte.tif").read_bytes()
    (root / "bad" / "RGB.byte.truncated.tif").write_bytes(rgb[:500000])
    return root


def huge_vrt(path: Path, size: int = 200_000, dtype: str = "Byte") -> Path:
    """A sourceless VRT of size x size pixels: reading it all takes long, yet costs no disk."""
    path.write_text(
        f'<VRTDataset rasterXSize="{size}" rasterYSize="{size}"><VRTRasterBand dataType="{dtype}" band="1"/></VRTDataset>'
    )
    return path


@pytest.fixture(scope="session")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_workspace(tmp_path_factory.mktemp("ws"))
    huge_vrt(root / "huge.vrt")
    return root


@pytest.fixture(scope="session")
def audit_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.jsonl"


@pytest.fixture(scope="session")
def server(ws: Path, audit_path: Path) -> Iterator[tuple]:
    # confirm="never": these tests are not about confirmation (tests/e2e/test_confirm.py is), and FastMCP's
    # Client without an elicitation handler would get confirmation-required for every overwrite.
    mcp, app = build_server(Settings(workspaces=(ws,), workers=2, timeout=60, audit_log=audit_path, confirm="never"))
    yield mcp, app
    app.executor.close()


@pytest.fixture
async def client(server: tuple) -> AsyncIterator[Client]:
    async with Client(server[0]) as c:
        yield c


async def call(client: Client, tool: str, **args) -> tuple[bool, dict]:
    """(is_error, structured content) of a tool call."""
    r = await client.call_tool(tool, args, raise_on_error=False)
    return r.is_error, r.structured_content


def _data_listing() -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(DATA)): (p.stat().st_size, p.stat().st_mtime_ns) for p in DATA.rglob("*") if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def shipped_data_stays_untouched() -> Iterator[None]:
    """No test may write beside the shipped test data (a PAM .aux.xml from a CLI reference run, an output …)."""
    before = _data_listing()
    yield
    after = _data_listing()
    assert after == before, f"tests changed tests/data: {sorted(set(after.items()) ^ set(before.items()))[:10]}"
