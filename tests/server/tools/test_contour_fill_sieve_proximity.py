"""raster_contour, raster_fill_nodata, raster_sieve and raster_proximity through the FastMCP client."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyogrio
import rasterio
from fastmcp import Client

from tests.helpers import call

DEM = "raster/jacksboro_dem.tif"


async def test_contour_lines_and_polygons(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_contour", input=DEM, output="out/contours.gpkg", interval=100)
    assert not err, res
    summary = res["summary"]
    assert summary["geometry_type"] == "LineString" and summary["fields"] == ["ID", "elev"]
    assert summary["crs"] == "EPSG:4326" and summary["feature_count"] > 0
    with rasterio.open(ws / DEM) as ds:
        z = ds.read(1)
    levels = set(pyogrio.read_arrow(str(ws / "out" / "contours.gpkg"))[1].column("elev").to_pylist())
    assert levels == {float(v) for v in range(100 * (int(z.min()) // 100 + 1), int(z.max()) + 1, 100)}
    err, res = await call(client, "raster_contour", input=DEM, output="out/bands.gpkg", interval=100, polygons=True)
    assert not err and res["summary"]["geometry_type"] == "MultiPolygon"
    assert res["summary"]["feature_count"] == int(z.max()) // 100 - int(z.min()) // 100 + 1
    err, res = await call(client, "raster_contour", input=DEM, output="out/none.gpkg")
    assert err and res["error"]["code"] == "invalid-argument"


async def test_fill_nodata_fills_the_holes(client: Client, ws: Path) -> None:
    with rasterio.open(ws / DEM) as ds:
        z, profile = ds.read(1), ds.profile
    z[100:120, 100:120] = -32768
    profile.update(nodata=-32768)
    (ws / "work").mkdir(exist_ok=True)
    with rasterio.open(ws / "work" / "holes.tif", "w", **profile) as out:
        out.write(z, 1)
    err, res = await call(client, "raster_fill_nodata", input="work/holes.tif", output="out/filled.tif", max_distance=50)
    assert not err, res
    with rasterio.open(ws / "out" / "filled.tif") as ds:
        filled = ds.read(1)
        assert ds.nodata == -32768 and ds.dtypes[0] == "int16"
    hole = filled[100:120, 100:120]
    around = np.concatenate([z[99, 99:121], z[120, 99:121], z[99:121, 99], z[99:121, 120]])
    assert (hole != -32768).all() and around.min() <= hole.min() and hole.max() <= around.max()
    assert np.array_equal(filled[z != -32768], z[z != -32768])  # valid pixels are kept as they were


async def test_sieve_removes_small_regions(client: Client, ws: Path) -> None:
    with rasterio.open(ws / DEM) as ds:
        classes, profile = (ds.read(1) // 100).astype("uint8"), ds.profile
    profile.update(dtype="uint8", nodata=None)
    (ws / "work").mkdir(exist_ok=True)
    with rasterio.open(ws / "work" / "classes.tif", "w", **profile) as out:
        out.write(classes, 1)
    err, res = await call(client, "raster_sieve", input="work/classes.tif", output="out/sieved.tif", threshold=20)
    assert not err, res
    err8, res8 = await call(client, "raster_polygonize", input="out/sieved.tif", output="out/sieved.gpkg")
    assert not err8
    import shapely

    meta, table = pyogrio.read_arrow(str(ws / "out" / "sieved.gpkg"))
    geoms = shapely.from_wkb(table.column(meta["geometry_name"]).to_numpy(zero_copy_only=False))
    pixel = (1 / 1200) ** 2
    assert (shapely.area(geoms) / pixel).min() >= 20 - 1e-6  # no region under the threshold is left
    err, res = await call(client, "raster_sieve", input="raster/slope.tif", output="out/x.tif", threshold=5)
    assert err and res["error"]["code"] == "unsupported"


async def test_proximity_in_metres_on_a_projected_raster(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "raster_proximity",
        input="raster/RGB.byte.tif",
        output="out/prox.tif",
        target_values=[255],
        max_distance=3000,
        nodata=-1,
    )
    assert not err, res
    assert res["summary"]["dtype"] == "float32" and res["summary"]["nodata"] == -1
    with rasterio.open(ws / "raster" / "RGB.byte.tif") as src, rasterio.open(ws / "out" / "prox.tif") as ds:
        values, dist = src.read(1), ds.read(1)
        width = src.transform.a
    assert (dist[values == 255] == 0).all()
    assert ((dist == -1) | (dist <= 3000)).all() and (dist == -1).any()
    assert np.isclose(dist[(dist > 0)].min(), width, rtol=1e-6)  # 300.04 m: one pixel
    err, res = await call(client, "raster_proximity", input=DEM, output="out/prox_deg.tif", target_values=[1000])
    assert not err and any("DEGREES" in w for w in res["warnings"])
