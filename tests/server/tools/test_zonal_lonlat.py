"""zonal_stats on a lon/lat raster says its means are not area-weighted when pixel areas differ much over the raster
(found by an agent run: per-country means on a global grid were silently unweighted)."""

from __future__ import annotations

import math
from pathlib import Path

import geopandas as gpd
import rasterio
import shapely
from fastmcp import Client

from tests.helpers import call


async def test_unweighted_means_on_lon_lat_are_said(client: Client, ws: Path) -> None:
    (ws / "zl").mkdir(exist_ok=True)
    warned = []
    for name in ("topobathy", "jacksboro_dem"):
        with rasterio.open(ws / "raster" / f"{name}.tif") as ds:
            box = shapely.box(*ds.bounds).buffer(-0.01)
            lats = sorted(abs(v) for v in (ds.bounds.bottom, ds.bounds.top))
        gpd.GeoDataFrame({"id": [1]}, geometry=[box], crs="EPSG:4326").to_file(ws / "zl" / f"{name}.gpkg")
        err, res = await call(client, "zonal_stats", input=f"raster/{name}.tif", zones=f"zl/{name}.gpkg")
        assert not err, res
        ratio = math.cos(math.radians(lats[0])) / math.cos(math.radians(lats[1]))
        said = [w for w in res["warnings"] if w.startswith("lon/lat raster: each pixel counts once")]
        if ratio > 1.02:  # topobathy spans about 3 degrees of latitude near 50 N: 1.06x
            assert len(said) == 1 and f"{ratio:.2f}x" in said[0], (name, res["warnings"])
            warned.append(name)
        else:  # the Jacksboro DEM spans 0.3 degrees: nothing to say
            assert not said, (name, res["warnings"])
    assert warned == ["topobathy"]
