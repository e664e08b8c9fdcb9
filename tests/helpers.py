"""Plain helpers shared by the tests (fixtures live in conftest.py): the shipped test data, a writable copy of it,
a huge sourceless raster, and a tool call that returns what the client got."""

from __future__ import annotations

import shutil
from pathlib import Path

from fastmcp import Client

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


async def call(client: Client, tool: str, **args) -> tuple[bool, dict]:
    """(is_error, structured content) of a tool call."""
    r = await client.call_tool(tool, args, raise_on_error=False)
    return r.is_error, r.structured_content
