"""Class 6 — inputs that ended in internal-error: raster_info on a PNG-compressed MRF (the compression reported as
a plain string), raster_edit of nodata on an MRF (a driver that cannot change it after creation). Each now gives a
result or a stable code, and nothing of the file changes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import rasterio
from mcp import ClientSession

from tests.helpers import DATA
from tests.security.helpers import workspace


def digests(ws: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in ws.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = workspace(tmp_path_factory.mktemp("internal-errors"))
    with rasterio.open(DATA / "raster" / "RGB.byte.tif") as src:
        profile = {k: v for k, v in src.profile.items() if k not in ("tiled", "blockxsize", "blockysize", "compress")}
        pixels = src.read()
    for codec in ("PNG", "JPEG", "DEFLATE"):
        with rasterio.open(ws / f"{codec.lower()}.mrf", "w", **{**profile, "driver": "MRF", "compress": codec}) as dst:
            dst.write(pixels)
    return ws


async def test_mrf_compressions_are_described(served: ClientSession, ws: Path) -> None:
    for codec in ("PNG", "JPEG", "DEFLATE"):
        r = await served.call_tool("raster_info", {"path": f"{codec.lower()}.mrf", "stats": True})
        assert not r.is_error, r.structured_content
        assert r.structured_content["driver"] == "MRF"
        with rasterio.open(ws / f"{codec.lower()}.mrf") as ds:  # the reference: the same pixels through rasterio
            mean = float(ds.read(1, masked=True).mean())  # nodata (0) excluded, as raster_info does
        assert abs(r.structured_content["bands"][0]["statistics"]["mean"] - mean) < 1e-6


async def test_an_edit_the_driver_refuses_is_unsupported_and_changes_nothing(served: ClientSession, ws: Path) -> None:
    before = digests(ws)
    for codec in ("png", "deflate"):
        r = await served.call_tool("raster_edit", {"input": f"{codec}.mrf", "nodata": 0})
        assert r.is_error and r.structured_content["error"]["code"] == "unsupported", r.structured_content
        assert "nodata" in r.structured_content["error"]["message"]
    assert digests(ws) == before
