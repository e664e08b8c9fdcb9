"""raster_viewshed and raster_compare through the FastMCP client: results against Debian's gdal_viewshed (GDAL 3.6)
and numpy, error codes, and nothing written on failure."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from pyproj import Transformer
from rasterio.transform import from_origin
from rasterio.warp import Resampling, reproject

from tests.cli_reference import gdal_cli
from tests.helpers import call

UTM = "EPSG:32616"
WORK = Path("work") / "viewshed"
OUT = Path("out") / "viewshed"


@pytest.fixture
def utm_dem(ws: Path) -> str:
    """jacksboro_dem.tif in UTM 16N at 90 m, inside the workspace (once per session)."""
    rel = WORK / "dem_utm.tif"
    if not (ws / rel).exists():
        (ws / WORK).mkdir(parents=True, exist_ok=True)
        z = np.zeros((289, 289), dtype="float32")
        transform = from_origin(733000, 4066000, 90, 90)
        with rasterio.open(ws / "raster" / "jacksboro_dem.tif") as src:
            reproject(rasterio.band(src, 1), z, dst_transform=transform, dst_crs=UTM, resampling=Resampling.bilinear)
        with rasterio.open(
            ws / rel, "w", driver="GTiff", width=289, height=289, count=1, dtype="float32", crs=UTM, transform=transform
        ) as out:
            out.write(z, 1)
    return str(rel)


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


async def test_viewshed_of_a_lon_lat_observer_agrees_with_gdal_viewshed(client: Client, ws: Path, utm_dem: str) -> None:
    x, y = 746045, 4053035
    lon, lat = Transformer.from_crs(UTM, "EPSG:4326", always_xy=True).transform(x, y)
    gdal_cli(
        "gdal_viewshed", "-ox", str(x), "-oy", str(y), "-oz", "25", "-md", "5000", str(ws / utm_dem), str(ws / WORK / "ref.tif")
    )
    err, res = await call(
        client,
        "raster_viewshed",
        input=utm_dem,
        output=str(OUT / "single.tif"),
        observers=[[lon, lat]],
        observer_crs="EPSG:4326",
        observer_height=25,
        max_distance=5000,
    )
    assert not err, res
    assert res["output"] == "out/viewshed/single.tif" and res["uri"].endswith("out/viewshed/single.tif")
    assert res["mode"] == "single" and res["summary"]["dtype"] == "uint8" and res["summary"]["crs"] == UTM
    out, ref = read(ws / OUT / "single.tif"), read(ws / WORK / "ref.tif")
    assert out.shape == ref.shape and (out == ref).mean() >= 0.995  # GDAL 3.6 vs 3.12, 25 m observer
    assert res["visible_pixels"] == int((out == 255).sum())
    assert res["observers"][0]["x"] == pytest.approx(x, abs=1e-3) and res["observers"][0]["height"] == 25
    # several observers: the count of observers seeing each pixel
    err, res = await call(
        client,
        "raster_viewshed",
        input=utm_dem,
        output=str(OUT / "count.tif"),
        observers=[[x, y, 25], [x + 900, y, 25]],
        max_distance=5000,
    )
    assert not err, res
    count = read(ws / OUT / "count.tif")
    assert res["mode"] == "cumulative" and count.max() == 2 and res["visible_pixels"] == int((count > 0).sum())


async def test_viewshed_refusals_write_nothing(client: Client, ws: Path, utm_dem: str) -> None:
    err, res = await call(
        client, "raster_viewshed", input="raster/jacksboro_dem.tif", output=str(OUT / "ll.tif"), observers=[[-84.2, 36.6]]
    )
    assert err and res["error"]["code"] == "unsupported" and "raster_reproject" in res["error"]["message"]
    err, res = await call(client, "raster_viewshed", input=utm_dem, output=str(OUT / "far.tif"), observers=[[0, 0]])
    assert err and res["error"]["code"] == "invalid-argument" and "bounds" in res["error"]["message"]
    err, res = await call(
        client,
        "raster_viewshed",
        input=utm_dem,
        output=str(OUT / "two.tif"),
        observers=[[746000, 4053000], [740000, 4060000]],
        visible_value=1,
    )
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(client, "raster_viewshed", input=utm_dem, output=str(OUT / "x.tif"), observers=[[1, 2, 3, 4]])
    assert err and res["error"]["code"] == "invalid-argument"  # the schema: [x, y] or [x, y, height]
    assert not any((ws / OUT / name).exists() for name in ("ll.tif", "far.tif", "two.tif", "x.tif"))


async def test_compare_finds_a_changed_block(client: Client, ws: Path) -> None:
    (ws / WORK).mkdir(parents=True, exist_ok=True)
    src = ws / "raster" / "jacksboro_dem.tif"
    shutil.copy(src, ws / WORK / "same.tif")
    with rasterio.open(src) as ds:
        z, profile = ds.read(1), ds.profile
    changed = z.copy()
    changed[20:40, 50:60] += 3
    with rasterio.open(ws / WORK / "changed.tif", "w", **profile) as out:
        out.write(changed, 1)
        out.update_tags(AREA_OR_POINT="Area")

    err, res = await call(client, "raster_compare", input=str(WORK / "same.tif"), reference="raster/jacksboro_dem.tif")
    assert not err and res["identical"] and res["pixels_identical"], res
    err, res = await call(client, "raster_compare", input=str(WORK / "changed.tif"), reference="raster/jacksboro_dem.tif")
    assert not err, res
    band = res["bands"][0]
    assert res["input"] == "work/viewshed/changed.tif" and res["reference"] == "raster/jacksboro_dem.tif"
    assert not res["identical"] and band["differing_pixels"] == int((changed != z).sum()) == 200
    assert band["max_abs_difference"] == 3 and band["window"] == {"col_off": 50, "row_off": 20, "width": 10, "height": 20}
    assert res["output"] is None

    err, res = await call(
        client,
        "raster_compare",
        input=str(WORK / "changed.tif"),
        reference="raster/jacksboro_dem.tif",
        output=str(OUT / "diff.tif"),
    )
    assert not err and res["output"] == "out/viewshed/diff.tif", res
    diff = read(ws / OUT / "diff.tif")
    assert np.array_equal(diff, (changed.astype("float32") - z.astype("float32")))
    err, res = await call(
        client, "raster_compare", input=str(WORK / "changed.tif"), reference="raster/jacksboro_dem.tif", tolerance=3
    )
    assert not err and res["identical"] and res["bands"][0]["differing_pixels"] == 0

    err, res = await call(client, "raster_compare", input="raster/RGB.byte.tif", reference="raster/jacksboro_dem.tif")
    assert not err and res["pixels_identical"] is None and res["bands"] == []
    assert {"crs", "geotransform", "size", "band_count"} <= {d["kind"] for d in res["differences"]}
    err, res = await call(
        client,
        "raster_compare",
        input="raster/RGB.byte.tif",
        reference="raster/jacksboro_dem.tif",
        ignore=["crs", "geotransform"],
    )
    assert not err and {d["kind"] for d in res["differences"]} == {"size", "band_count"}
    err, res = await call(
        client, "raster_compare", input="raster/RGB.byte.tif", reference="raster/jacksboro_dem.tif", output=str(OUT / "no.tif")
    )
    assert err and res["error"]["code"] == "invalid-argument" and not (ws / OUT / "no.tif").exists()
    err, res = await call(client, "raster_compare", input="raster/RGB.byte.tif", reference="raster/RGB.byte.tif", format="GTiff")
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(client, "raster_compare", input="raster/RGB.byte.tif", reference="../outside.tif")
    assert err and res["error"]["code"] in ("out-of-root", "not-found")


async def test_annotations_and_read_only(client: Client, server: tuple, ws: Path, monkeypatch) -> None:
    """--read-only refuses a difference raster and a viewshed (raster_compare without output reads only: the other
    tests run it). The session's server, switched to read-only for this test."""
    tools = {t.name: t for t in await client.list_tools()}
    assert tools["raster_viewshed"].annotations.read_only_hint is False
    assert tools["raster_compare"].annotations.read_only_hint is False  # it may write its output
    app = server[1]
    monkeypatch.setattr(app, "settings", dataclasses.replace(app.settings, read_only=True))
    args = {"input": "raster/RGB.byte.tif", "reference": "raster/RGB.byte.tif", "output": "ro.tif"}
    err, res = await call(client, "raster_compare", **args)
    assert err and res["error"]["code"] == "read-only"
    err, res = await call(client, "raster_viewshed", input="raster/RGB.byte.tif", output="ro.tif", observers=[[0, 0]])
    assert err and res["error"]["code"] == "read-only"
    assert not (ws / "ro.tif").exists()
