"""Shared fixtures: a temporary workspace holding a copy of tests/data, and one warm server for the session; and the
markers every test gets from where it lives (plain helpers are in tests/helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastmcp import Client

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, huge_vrt, make_workspace

TESTS = Path(__file__).parent
#: markers given by directory (first part of the path under tests/) or by module name
BY_DIRECTORY = {"e2e": "e2e", "security": "security"}
BY_MODULE = {"test_dask.py": "dask"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """e2e/security/dask by where a test lives, so `-m "not e2e"` and the like select without a decorator per test."""
    for item in items:
        try:
            parts = item.path.relative_to(TESTS).parts
        except ValueError:
            continue
        for marker in (BY_DIRECTORY.get(parts[0]), BY_MODULE.get(parts[-1])):
            if marker:
                item.add_marker(marker)


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


def _data_listing() -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(DATA)): (p.stat().st_size, p.stat().st_mtime_ns) for p in DATA.rglob("*") if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def shipped_data_stays_untouched() -> Iterator[None]:
    """No test may write beside the shipped test data (a PAM .aux.xml from a CLI reference run, an output …)."""
    before = _data_listing()
    yield
    after = _data_listing()
    assert after == before, f"tests changed tests/data: {sorted(set(after.items()) ^ set(before.items()))[:10]}"
