"""list_datasets engine: kinds, sidecars, patterns, bounds."""

from __future__ import annotations

import gzip
import tarfile
import zipfile
from pathlib import Path

import pytest
import rasterio

from gdal_mcp.engine.catalog import list_datasets
from gdal_mcp.errors import GdalMcpError
from tests.helpers import make_workspace


def rel(ws: Path, path: str) -> str:
    """A listed path relative to the workspace (archive members keep their GDAL prefix and real path)."""
    return path[len(str(ws)) + 1 :] if path.startswith(f"{ws}/") else path


def test_kinds(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    (ws / "notes.txt").write_text("hello")
    result = list_datasets(str(ws), limit=1000)
    kinds = {rel(ws, e.path): e for e in result.entries}
    assert kinds["raster/RGB.byte.tif"].kind == "raster" and kinds["raster/RGB.byte.tif"].driver == "GTiff"
    assert kinds["vector/test_gpx.gpx"].kind == "vector" and "5 layer(s)" in kinds["vector/test_gpx.gpx"].detail
    assert kinds["vector/box.dbf"].detail == "sidecar of box.shp"
    assert kinds["raster/N10W110.hgt.zip"].kind == "other" and "archive" in kinds["raster/N10W110.hgt.zip"].detail
    # the zip's member follows it, with the path that opens it (an agent could not find it before)
    names = [rel(ws, e.path) for e in result.entries]
    member = "/vsizip/" + str(ws) + "/raster/N10W110.hgt.zip/N10W110.hgt"
    assert names.index(member) == names.index("raster/N10W110.hgt.zip") + 1
    with rasterio.open(member) as ds:
        hgt = kinds[member]
        assert (hgt.kind, hgt.driver, hgt.crs) == ("raster", "SRTMHGT", "EPSG:4326") and hgt.resolution == list(map(abs, ds.res))
    with rasterio.open(ws / "raster/RGB.byte.tif") as ds:
        assert kinds["raster/RGB.byte.tif"].crs == "EPSG:32618" and kinds["raster/RGB.byte.tif"].resolution == list(ds.res)
    assert kinds["raster/slope.tif"].crs == "custom Albers Equal Area"  # not "unnamed"
    assert kinds["vector/naturalearth_lowres.shp"].crs == "EPSG:4326" and kinds["vector/box.shp"].crs == "EPSG:32618"
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


def test_archives_list_their_datasets_and_can_be_listed_alone(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    rgb, box = ws / "raster/RGB.byte.tif", ws / "vector/box"
    with zipfile.ZipFile(ws / "bundle.zip", "w") as z:
        z.write(rgb, "img/RGB.byte.tif")
        for ext in (".shp", ".shx", ".dbf", ".prj"):
            z.write(box.with_suffix(ext), "box" + ext)
        z.writestr("readme.txt", "not data")
        z.writestr("../evil.tif", "x")  # a member naming its way out is never opened
    with tarfile.open(ws / "t.tar.gz", "w:gz") as t:
        t.add(rgb, "RGB.byte.tif")
    (ws / "one.tif.gz").write_bytes(gzip.compress(rgb.read_bytes()))
    listed = list_datasets(str(ws), recursive=False, limit=1000)
    got = {rel(ws, e.path): e.kind for e in listed.entries}
    assert got == {
        "bundle.zip": "other",
        f"/vsizip/{ws}/bundle.zip/img/RGB.byte.tif": "raster",
        f"/vsizip/{ws}/bundle.zip/box.shp": "vector",  # its sidecars are not entries; readme.txt is no dataset
        "one.tif.gz": "other",
        f"/vsigzip/{ws}/one.tif.gz": "raster",
        "t.tar.gz": "other",
        f"/vsitar/{ws}/t.tar.gz/RGB.byte.tif": "raster",
    }
    for path, kind in got.items():  # each member path opens as listed, with GDAL
        if path.startswith("/vsi") and kind == "raster":
            with rasterio.open(path) as ds:
                assert ds.count == 3
    # a pattern finds members inside archives whose own name does not match it
    shp = list_datasets(str(ws), pattern="*.shp", recursive=False)
    assert [e.path for e in shp.entries] == [f"/vsizip/{ws}/bundle.zip/box.shp"]
    alone = list_datasets(str(ws / "bundle.zip"))
    assert [e.path for e in alone.entries] == [f"/vsizip/{ws}/bundle.zip/img/RGB.byte.tif", f"/vsizip/{ws}/bundle.zip/box.shp"]
    capped = list_datasets(str(ws / "bundle.zip"), limit=1)
    assert len(capped.entries) == 1 and capped.truncated and capped.remaining == 1
    with pytest.raises(GdalMcpError) as e:
        list_datasets(str(rgb))
    assert e.value.code == "invalid-argument" and "raster_info" in e.value.message
