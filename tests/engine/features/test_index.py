"""dataset_index's engine (GDAL 3.12 gdal raster index / gdal vector index) against Debian's gdaltindex / ogrtindex
3.6 run on the same files from the same directory (relative paths, as the tool writes them), and GDAL's GTI driver
reading the index back as a mosaic.

Tolerances: extents within 1e-9 (same corners, same transformations: measured 0 for rasters, 4e-14 degrees for
vectors reprojected to EPSG:4326); locations identical (3.6 names the vector field LOCATION, 3.12 location).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyogrio
import pytest
import rasterio
import shapely

from gdal_mcp.engine.features.index import _locations, dataset_index
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdalinfo_json
from tests.helpers import DATA

TILES = ["raster/rgb1.tif", "raster/rgb2.tif", "raster/rgb3.tif", "raster/rgb4.tif"]
VECTORS = ["vector/points.shp", "vector/polygons.shp", "vector/lines.shp"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace-like directory holding copies of the test data the index reads."""
    for name in ("rgb1", "rgb2", "rgb3", "rgb4", "RGB.byte", "jacksboro_dem", "float_nan"):
        (tmp_path / "raster").mkdir(exist_ok=True)
        shutil.copy(DATA / "raster" / f"{name}.tif", tmp_path / "raster")
    (tmp_path / "vector").mkdir()
    for f in (DATA / "vector").iterdir():
        if f.stem in ("points", "polygons", "lines", "naturalearth_lowres", "line_zm"):
            shutil.copy(f, tmp_path / "vector")
    return tmp_path


def cli(root: Path, tool: str, *args: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not on PATH: Debian's GDAL CLI is the reference here (apt-get install gdal-bin)")
    subprocess.run([tool, *args], cwd=root, check=True, capture_output=True, timeout=120)


def rows(path: Path) -> tuple[dict, list[dict], np.ndarray]:
    """(layer info, attribute rows, geometries) of a written index."""
    meta, table = pyogrio.read_arrow(str(path))
    column = next(f.name for f in table.schema if (f.metadata or {}).get(b"ARROW:extension:name") == b"geoarrow.wkb")
    geoms = shapely.from_wkb(table.column(column).to_numpy(zero_copy_only=False))
    return meta, table.drop_columns([column]).to_pylist(), geoms


def run(root: Path, names: list[str], out: str, **kwargs):
    return dataset_index([str(root / n) for n in names], str(root / out), names=names, **kwargs)


def same_extents(ours: np.ndarray, ref: np.ndarray) -> None:
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref, strict=True):
        assert np.abs(shapely.get_coordinates(a) - shapely.get_coordinates(b)).max() <= 1e-9


def test_raster_index_matches_gdaltindex_and_opens_as_a_gti_mosaic(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, warnings = run(root, TILES, "tiles.gpkg")
    cli(root, "gdaltindex", "ref.gpkg", *TILES)
    _, ours, geoms = rows(root / "tiles.gpkg")
    _, ref, ref_geoms = rows(root / "ref.gpkg")
    assert [r["location"] for r in ours] == [r["location"] for r in ref] == TILES
    same_extents(geoms, ref_geoms)
    assert result.dataset_type == "raster" and result.inputs == result.indexed == 4 and result.reprojected_to is None
    assert result.summary.fields == ["location"] and not result.not_indexed
    # The index is a GDAL mosaic (GTI driver), its relative locations read from the workspace root: the four tiles
    # were cut from RGB.byte.tif, so the mosaic is that raster again, pixel for pixel.
    with rasterio.Env() as env:
        if "GTI" not in env.drivers():
            pytest.skip("this process's GDAL has no GTI driver registered")
    monkeypatch.chdir(root)
    with rasterio.open("GTI:tiles.gpkg") as mosaic, rasterio.open("raster/RGB.byte.tif") as whole:
        assert mosaic.bounds == whole.bounds and mosaic.shape == whole.shape
        assert np.array_equal(mosaic.read(), whole.read())


def test_mixed_crs_reprojected_to_the_first_like_gdaltindex_t_srs(root: Path) -> None:
    names = ["raster/rgb1.tif", "raster/jacksboro_dem.tif"]
    result, warnings = run(root, names, "mixed.gpkg")
    assert result.reprojected_to and any("reprojected to the first input's" in w for w in warnings)
    wkt = subprocess.run(
        ["gdalsrsinfo", "--single-line", "-o", "wkt1", "raster/rgb1.tif"], cwd=root, capture_output=True, text=True
    ).stdout.strip() if shutil.which("gdalsrsinfo") else ""  # fmt: skip
    cli(root, "gdaltindex", "-t_srs", wkt, "-src_srs_name", "src_srs", "ref.gpkg", *names)
    meta, ours, geoms = rows(root / "mixed.gpkg")
    _, ref, ref_geoms = rows(root / "ref.gpkg")
    assert [r["location"] for r in ours] == [r["location"] for r in ref] == names
    assert [r["src_srs"] for r in ours] == [r["src_srs"] for r in ref]
    same_extents(geoms, ref_geoms)
    # dst_crs given: every extent in it, src_srs kept even for a single CRS.
    result, _ = run(root, TILES[:2], "ll.gpkg", dst_crs="EPSG:4326")
    meta, ours, geoms = rows(root / "ll.gpkg")
    assert result.reprojected_to == "EPSG:4326" and meta["crs"] == "EPSG:4326" and "src_srs" in ours[0]
    assert all(-80 < x < -76 for x in shapely.get_coordinates(geoms)[:, 0])


def test_vector_index_matches_ogrtindex(root: Path) -> None:
    result, _ = run(root, VECTORS, "v.gpkg")
    cli(root, "ogrtindex", "ref.gpkg", *VECTORS)
    _, ours, geoms = rows(root / "v.gpkg")
    _, ref, ref_geoms = rows(root / "ref.gpkg")
    assert [r["location"] for r in ours] == [r["LOCATION"] for r in ref] == [f"{n},0" for n in VECTORS]
    same_extents(geoms, ref_geoms)
    assert result.dataset_type == "vector"
    # Different CRSs and schemas, reprojected to lon/lat: ogrtindex -t_srs (with -accept_different_schemas).
    names = ["vector/points.shp", "vector/line_zm.gpkg", "vector/naturalearth_lowres.shp"]
    result, _ = run(root, names, "ll.gpkg", dst_crs="EPSG:4326")
    cli(root, "ogrtindex", "-t_srs", "EPSG:4326", "-src_srs_name", "src_srs", "-accept_different_schemas", "ref2.gpkg", *names)
    _, ours, geoms = rows(root / "ll.gpkg")
    _, ref, ref_geoms = rows(root / "ref2.gpkg")
    assert [r["location"] for r in ours] == [r["LOCATION"] for r in ref] == [f"{n},0" for n in names]
    assert [r["src_srs"] for r in ours] == [r["src_srs"] for r in ref]
    same_extents(geoms, ref_geoms)
    # layers: only the layers named; the inputs without one reported (GDAL alone fails when the first has none).
    result, warnings = run(root, ["vector/points.shp", "vector/line_zm.gpkg"], "one.gpkg", layers=["line_zm"])
    assert result.indexed == 1 and result.not_indexed == ["vector/points.shp"]
    assert [r["location"] for r in rows(root / "one.gpkg")[1]] == ["vector/line_zm.gpkg,0"]


def test_metadata_fields_and_other_formats(root: Path) -> None:
    with rasterio.open(root / TILES[0], "r+") as ds:
        ds.update_tags(TIFFTAG_DATETIME="2024:05:01 10:00:00")
    result, _ = run(root, TILES[:2], "md.fgb", metadata_fields=["TIFFTAG_DATETIME", "NO_SUCH_ITEM"])
    _, ours, _ = rows(root / "md.fgb")  # (FlatGeobuf orders features along its spatial index)
    expected = {TILES[0]: gdalinfo_json(str(root / TILES[0]))["metadata"][""]["TIFFTAG_DATETIME"], TILES[1]: None}
    assert {r["location"]: r["TIFFTAG_DATETIME"] for r in ours} == expected and {r["NO_SUCH_ITEM"] for r in ours} == {None}
    assert result.summary.driver == "FlatGeobuf"
    # A shapefile: WKT longer than a DBF field is written as a PROJ string (as GDAL's AUTO format does).
    run(root, ["raster/rgb1.tif", "raster/jacksboro_dem.tif"], "mixed.shp")
    _, ours, _ = rows(root / "mixed.shp")
    assert ours[0]["src_srs"].startswith("+proj=utm") and ours[1]["src_srs"] == "EPSG:4326"
    assert not [p for p in root.iterdir() if p.name.startswith(".stage")]


def test_never_writes_a_path_that_is_no_input(root: Path) -> None:
    inputs, names = [str(root / TILES[0])], [TILES[0]]
    assert _locations([inputs[0], inputs[0] + ",3"], inputs, names) == ([TILES[0], TILES[0] + ",3"], inputs * 2)
    for stray in ("/etc/passwd", str(root / TILES[1]), inputs[0] + ",x", None):
        with pytest.raises(GdalMcpError) as e:
            _locations([stray], inputs, names)
        assert e.value.code == "internal-error"
    # Whatever is indexed, the file holds no byte of the real directory.
    run(root, TILES, "tiles.gpkg", metadata_fields=["AREA_OR_POINT"])
    assert str(root).encode() not in (root / "tiles.gpkg").read_bytes()


def test_refusals_write_nothing(root: Path) -> None:
    cases = [
        (["raster/rgb1.tif", "raster/float_nan.tif"], {}, "have no CRS"),
        (["raster/float_nan.tif"], {"dst_crs": "EPSG:4326"}, "have no CRS"),
        (TILES, {"layers": ["x"]}, "layers applies to vector"),
        (VECTORS, {"metadata_fields": ["A"]}, "metadata_fields applies to rasters"),
        (TILES, {"metadata_fields": ["location"]}, "would replace"),
        (TILES, {"metadata_fields": ["a b"]}, "not a usable field name"),
        (TILES, {"dataset_type": "table"}, "raster or vector"),
        (VECTORS, {"layers": ["nope"]}, "no input has a layer named nope"),
    ]
    for names, kwargs, text in cases:
        with pytest.raises(GdalMcpError) as e:
            run(root, names, "bad.gpkg", **kwargs)
        assert e.value.code == "invalid-argument" and text in e.value.message, (kwargs, e.value.message)
        assert not (root / "bad.gpkg").exists()
    assert not [p for p in root.iterdir() if p.name.startswith(".stage")]
