"""list_datasets engine: kinds, sidecars, patterns, bounds."""

from __future__ import annotations

from pathlib import Path

from gdal_mcp.engine.catalog import list_datasets
from tests.helpers import make_workspace


def test_kinds(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    (ws / "notes.txt").write_text("hello")
    result = list_datasets(str(ws), limit=1000)
    kinds = {Path(e.path).relative_to(ws).as_posix(): e for e in result.entries}
    assert kinds["raster/RGB.byte.tif"].kind == "raster" and kinds["raster/RGB.byte.tif"].driver == "GTiff"
    assert kinds["vector/test_gpx.gpx"].kind == "vector" and "5 layer(s)" in kinds["vector/test_gpx.gpx"].detail
    assert kinds["vector/box.dbf"].detail == "sidecar of box.shp"
    assert kinds["raster/N10W110.hgt.zip"].kind == "other" and "/vsizip/" in kinds["raster/N10W110.hgt.zip"].detail
    assert kinds["notes.txt"].kind == "other"
    assert kinds["bad/RGB.byte.truncated.tif"].kind == "other"
    assert not result.truncated and result.remaining == 0


def test_pattern_limit_and_hidden_files(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    (ws / ".gdal-mcp-tmp-x").mkdir()
    (ws / ".gdal-mcp-tmp-x" / "partial.tif").write_bytes(b"x")
    result = list_datasets(str(ws), pattern="*.tif", limit=3)
    assert len(result.entries) == 3 and result.truncated
    all_tifs = list_datasets(str(ws), pattern="*.tif", limit=1000)
    assert result.remaining == len(all_tifs.entries) - 3
    assert not any("partial" in e.path for e in all_tifs.entries)
    flat = list_datasets(str(ws), recursive=False)
    assert flat.entries == []
