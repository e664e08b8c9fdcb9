"""raster_terrain through an MCP client: the gdaldem options added for issue 11 (color-relief, hillshade modes,
Zevenbergen-Thorne, aspect options), and lon/lat DEMs with ground distances per row (issue 25)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import rasterio
from fastmcp import Client
from pyproj import Proj, Transformer
from rasterio.transform import from_origin

from tests.helpers import call

RAMP = [[-1500, 8, 29, 88], [0, 29, 145, 192], [300, 86, 153, 62], [2200, 255, 255, 255]]


async def test_color_relief_with_a_json_ramp_and_alpha(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "raster_terrain",
        input="raster/topobathy.tif",
        output="out/relief.tif",
        product="color-relief",
        colors=RAMP,
        color_mode="nearest",
        alpha=True,
    )
    assert not err, res
    assert res["summary"]["count"] == 4 and res["summary"]["dtype"] == "uint8" and res["warnings"] == []
    with rasterio.open(ws / "raster" / "topobathy.tif") as src, rasterio.open(ws / "out" / "relief.tif") as out:
        dem, rgba = src.read(1), out.read()
    # Independent nearest-entry lookup; a tie (the DEM has 150 m, halfway between 0 and 300) goes to the upper
    # entry, as in gdaldem.
    xs = np.array([e[0] for e in RAMP], dtype=float)
    distance = np.abs(dem[..., None].astype(float) - xs)
    nearest = len(RAMP) - 1 - distance[..., ::-1].argmin(axis=-1)
    assert (dem == 150).any()
    expected = np.array([[*e[1:], 255] for e in RAMP], dtype=np.uint8)[nearest]
    assert np.array_equal(np.moveaxis(rgba, 0, -1), expected)


async def test_color_relief_named_ramp_and_errors(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "raster_terrain",
        input="raster/jacksboro_dem.tif",
        output="out/elev.png",
        product="color-relief",
        colors="elevation",
    )
    assert not err, res
    assert res["summary"]["driver"] == "PNG" and res["summary"]["count"] == 3
    err, res = await call(client, "raster_terrain", input="raster/jacksboro_dem.tif", output="out/x.tif", product="color-relief")
    assert err and res["error"]["code"] == "invalid-argument" and "colors" in res["error"]["message"]
    err, res = await call(
        client,
        "raster_terrain",
        input="raster/jacksboro_dem.tif",
        output="out/x.tif",
        product="color-relief",
        colors=[["150%", 1, 2, 3]],
    )
    assert err and res["error"]["code"] == "invalid-argument" and "0%..100%" in res["error"]["message"]
    err, res = await call(
        client, "raster_terrain", input="raster/jacksboro_dem.tif", output="out/x.tif", product="hillshade", hillshade_mode="soft"
    )
    assert err and res["error"]["code"] == "invalid-argument"


async def test_hillshade_mode_algorithm_and_aspect_options(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "raster_terrain",
        input="raster/jacksboro_dem.tif",
        output="out/md.tif",
        product="hillshade",
        hillshade_mode="multidirectional",
        algorithm="ZevenbergenThorne",
    )
    assert not err, res
    assert res["summary"]["dtype"] == "uint8"
    err, res = await call(client, "raster_terrain", input="raster/jacksboro_dem.tif", output="out/az.tif", product="aspect")
    assert not err, res
    err, res = await call(
        client,
        "raster_terrain",
        input="raster/jacksboro_dem.tif",
        output="out/trig.tif",
        product="aspect",
        trigonometric=True,
        zero_for_flat=True,
    )
    assert not err, res
    with rasterio.open(ws / "out" / "az.tif") as a, rasterio.open(ws / "out" / "trig.tif") as t:
        azimuth, trig, nodata = a.read(1), t.read(1), a.nodata
    sloped = azimuth != nodata
    # trigonometric = 90 - azimuth (mod 360); flat pixels (nodata as an azimuth) are 0 with zero_for_flat
    d = np.abs((90 - azimuth[sloped]) % 360 - trig[sloped]) % 360
    assert np.minimum(d, 360 - d).max() < 1e-3
    flat = ~sloped & (trig != nodata)
    assert flat.sum() > 0 and (trig[flat] == 0).all()


async def test_lon_lat_dem_gets_ground_distances_per_row(client: Client, ws: Path) -> None:
    """A plane rising 0.1 m per metre eastwards (5.71 deg), defined in metres on a local transverse Mercator (pyproj)
    and sampled on a lon/lat grid at 50 deg N: slope and aspect as on a projected grid, where gdaldem's single
    factor (scale=111120) makes every pixel gentler than 5 deg."""
    (ws / "terrain_lonlat").mkdir(exist_ok=True)
    west, north, step = 7.95, 50.05, 0.0005
    rows, cols = np.mgrid[0:200, 0:200]
    lon, lat = west + (cols + 0.5) * step, north - (rows + 0.5) * step
    tm = "+proj=tmerc +lat_0=50 +lon_0=8 +k=1 +ellps=WGS84 +units=m"
    east, _ = Transformer.from_crs("EPSG:4326", tm, always_xy=True).transform(lon, lat)
    profile = {"driver": "GTiff", "width": 200, "height": 200, "count": 1, "dtype": "float32", "crs": "EPSG:4326"}
    with rasterio.open(ws / "terrain_lonlat" / "plane.tif", "w", **profile, transform=from_origin(west, north, step, step)) as d:
        d.write((300 + 0.1 * east).astype("float32"), 1)

    results = {}
    for product, extra in (("slope", {}), ("aspect", {}), ("gdaldem_slope", {"scale": 111120})):
        err, res = await call(
            client,
            "raster_terrain",
            input="terrain_lonlat/plane.tif",
            output=f"out/lonlat_{product}.tif",
            product=product.removeprefix("gdaldem_"),
            **extra,
        )
        assert not err, res
        with rasterio.open(ws / "out" / f"lonlat_{product}.tif") as out:
            results[product] = (out.read(1)[1:-1, 1:-1].astype(float), res["warnings"])
    slope, notes = results["slope"]
    assert any("per row" in w and "WGS 84" in w for w in notes), notes
    assert np.abs(slope - math.degrees(math.atan(0.1))).max() < 0.01 and (slope > 5).all()
    # Downhill is grid west; true north is the meridian convergence (pyproj) away from grid north.
    aspect, notes = results["aspect"]
    assert any("per row" in w for w in notes), notes
    convergence = Proj(tm).get_factors(lon, lat).meridian_convergence[1:-1, 1:-1]
    d = np.abs(aspect - (270 + convergence)) % 360
    assert np.minimum(d, 360 - d).max() < 0.01
    gdaldem_slope, notes = results["gdaldem_slope"]
    assert notes == [] and (gdaldem_slope < 5).all()
