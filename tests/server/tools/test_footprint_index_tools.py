"""raster_footprint and dataset_index through the MCP client, in the confined workers: the footprint against the
validity mask polygonized independently (rasterio.features.shapes + shapely), the index against Debian's gdaltindex
3.6 run in the workspace on the same relative paths. Neither file may hold the server's real directory."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyogrio
import pytest
import rasterio
import rasterio.features
import shapely
from fastmcp import Client
from shapely.geometry import shape

from tests.helpers import call

RGB = "raster/RGB.byte.tif"


def geometries(path: Path) -> tuple[list[dict], np.ndarray]:
    _, table = pyogrio.read_arrow(str(path))
    column = next(f.name for f in table.schema if (f.metadata or {}).get(b"ARROW:extension:name") == b"geoarrow.wkb")
    return table.drop_columns([column]).to_pylist(), shapely.from_wkb(table.column(column).to_numpy(zero_copy_only=False))


async def test_footprint_of_the_rgb_collar(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_footprint", input=RGB, output="out/footprint/rgb.gpkg", max_points=None)
    assert not err, res
    with rasterio.open(ws / RGB) as ds:
        mask, transform = ds.dataset_mask(), ds.transform
    ref = shapely.union_all([shape(g) for g, _ in rasterio.features.shapes(mask, mask=mask > 0, transform=transform)])
    _, geoms = geometries(ws / "out/footprint/rgb.gpkg")
    ours = shapely.union_all(geoms)
    assert ours.symmetric_difference(ref).area / ref.area < 1e-9  # the exact pixel outline
    assert res["output"] == "out/footprint/rgb.gpkg" and res["uri"].endswith("out/footprint/rgb.gpkg")
    assert res["area"] == pytest.approx(ref.area, rel=1e-9) and res["area_units"] == "metre"
    assert res["summary"]["crs"] == "EPSG:32618" and res["summary"]["fields"] == []  # no location field
    assert str(ws).encode() not in (ws / "out/footprint/rgb.gpkg").read_bytes()
    # In lon/lat, simplified (tolerance in degrees), at most 20 points; the same ground area within 0.5 %.
    area_m2 = res["area_m2"]
    err, res = await call(
        client,
        "raster_footprint",
        input=RGB,
        output="out/footprint/rgb_ll.geojson",
        dst_crs="EPSG:4326",
        simplify=0.001,
        max_points=20,
    )
    assert not err, res
    assert res["summary"]["crs"] == "EPSG:4326" and res["area_units"] == "degree"
    assert res["area_m2"] == pytest.approx(area_m2, rel=0.005)
    assert shapely.get_num_coordinates(shapely.union_all(geometries(ws / "out/footprint/rgb_ll.geojson")[1])) <= 25
    ext = res["summary"]["extent"]
    assert -79.1 < ext["left"] < ext["right"] < -76.5 and 23.5 < ext["bottom"] < ext["top"] < 25.6
    # Refusals: an existing output, a bad argument, a path out of the workspace; nothing written.
    err, res = await call(client, "raster_footprint", input=RGB, output="out/footprint/rgb.gpkg")
    assert err and res["error"]["code"] == "already-exists"
    err, res = await call(client, "raster_footprint", input=RGB, output="out/footprint/bad.gpkg", bands=[9])
    assert err and res["error"]["code"] == "invalid-argument" and "band" in res["error"]["message"]
    err, res = await call(client, "raster_footprint", input="../outside.tif", output="out/footprint/bad.gpkg")
    assert err and res["error"]["code"] in ("out-of-root", "not-found")
    assert not (ws / "out/footprint/bad.gpkg").exists()


async def test_index_of_tiles_matches_gdaltindex(client: Client, ws: Path, tmp_path: Path) -> None:
    err, res = await call(client, "dataset_index", input_pattern="raster/rgb?.tif", output="out/index/tiles.gpkg")
    assert not err, res
    tiles = [f"raster/rgb{i}.tif" for i in range(1, 5)]
    if shutil.which("gdaltindex") is None:
        pytest.skip("gdaltindex not on PATH: Debian's GDAL CLI is the reference here (apt-get install gdal-bin)")
    subprocess.run(["gdaltindex", str(tmp_path / "ref.gpkg"), *tiles], cwd=ws, check=True, capture_output=True, timeout=120)
    ours, geoms = geometries(ws / "out/index/tiles.gpkg")
    ref, ref_geoms = geometries(tmp_path / "ref.gpkg")
    assert [r["location"] for r in ours] == [r["location"] for r in ref] == tiles
    for a, b in zip(geoms, ref_geoms, strict=True):
        assert np.abs(shapely.get_coordinates(a) - shapely.get_coordinates(b)).max() <= 1e-9
    assert res["dataset_type"] == "raster" and res["indexed"] == 4 and res["reprojected_to"] is None
    assert res["output"] == "out/index/tiles.gpkg"
    raw = (ws / "out/index/tiles.gpkg").read_bytes()
    assert str(ws).encode() not in raw and b".gdal-mcp" not in raw  # no real or temporary path inside

    # Vector datasets in several CRSs: reprojected to the first one's, each one's CRS in src_srs.
    err, res = await call(
        client,
        "dataset_index",
        inputs=["vector/points.shp", "vector/naturalearth_lowres.shp"],
        output="out/index/vectors.fgb",
    )
    assert not err, res
    rows, _ = geometries(ws / "out/index/vectors.fgb")
    assert sorted(r["location"] for r in rows) == ["vector/naturalearth_lowres.shp,0", "vector/points.shp,0"]
    assert res["dataset_type"] == "vector" and res["reprojected_to"] and "src_srs" in res["summary"]["fields"]
    assert any("reprojected" in w for w in res["warnings"])
    assert str(ws).encode() not in (ws / "out/index/vectors.fgb").read_bytes()


async def test_index_refusals_write_nothing(client: Client, ws: Path) -> None:
    cases = [
        ({"inputs": ["raster/rgb1.tif"], "input_pattern": "raster/*.tif"}, "invalid-argument"),
        ({"input_pattern": "raster/rgb?.tif", "layers": ["a"]}, "invalid-argument"),
        ({"inputs": ["raster/rgb1.tif"], "metadata_fields": ["src_srs"]}, "invalid-argument"),
        ({"inputs": ["raster/no_such.tif"]}, "not-found"),
        ({"input_pattern": "raster/*.nothing"}, "not-found"),
    ]
    for args, code in cases:
        err, res = await call(client, "dataset_index", output="out/index/bad.gpkg", **args)
        assert err and res["error"]["code"] == code, (args, res)
    assert not (ws / "out/index/bad.gpkg").exists()
