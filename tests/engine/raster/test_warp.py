"""reproject (gdalwarp): grids as gdalwarp chooses them, pixels, options, errors."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
from pyproj import Transformer

from gdal_mcp.engine.raster.warp import reproject
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.conftest import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")


def test_grid_matches_rasterio_default_and_keeps_full_extent(tmp_path) -> None:
    s, _ = reproject(RGB, str(tmp_path / "w.tif"), dst_crs="EPSG:4326")
    assert (s.width, s.height, s.crs, s.nodata) == (835, 696, "EPSG:4326", 0.0)
    # The whole source footprint (edges densified, computed independently with pyproj) lies inside the output.
    t = Transformer.from_crs(32618, 4326, always_xy=True)
    with rasterio.open(RGB) as src:
        b = src.bounds
    u = np.linspace(0, 1, 101)
    ex = np.concatenate([b.left + u * (b.right - b.left), b.left + u * (b.right - b.left), np.full(101, b.left),
                         np.full(101, b.right)])
    ey = np.concatenate([np.full(101, b.top), np.full(101, b.bottom), b.bottom + u * (b.top - b.bottom),
                         b.bottom + u * (b.top - b.bottom)])
    lon, lat = t.transform(ex, ey)
    px = s.resolution[0]
    assert s.bounds.left <= lon.min() + px and s.bounds.right >= lon.max() - px
    assert s.bounds.bottom <= lat.min() + px and s.bounds.top >= lat.max() - px
    assert s.bounds.left > lon.min() - px and s.bounds.top < lat.max() + px


def test_pixels_match_gdalwarp(tmp_path) -> None:
    reproject(RGB, str(tmp_path / "ours.tif"), dst_crs="EPSG:4326", resampling="bilinear")
    gdal_cli("gdalwarp", "-t_srs", "EPSG:4326", "-r", "bilinear", RGB, str(tmp_path / "cli.tif"))
    with rasterio.open(tmp_path / "ours.tif") as a, rasterio.open(tmp_path / "cli.tif") as b:
        assert a.shape == b.shape and a.transform == b.transform
        diff = np.abs(a.read().astype(int) - b.read().astype(int))
        assert (diff <= 1).mean() > 0.999


def test_geostationary_to_wgs84_has_the_manifest_size(tmp_path) -> None:
    s, _ = reproject(str(DATA / "raster" / "goes.tif"), str(tmp_path / "g.tif"), dst_crs="4326")
    assert (s.width, s.height) == (602, 475)


def test_resolution_tap_bbox_and_size(tmp_path) -> None:
    s, _ = reproject(RGB, str(tmp_path / "a.tif"), dst_crs="EPSG:3857", resolution=500, target_aligned_pixels=True)
    assert s.resolution == (500, 500)
    assert s.bounds.left % 500 == 0 and s.bounds.top % 500 == 0
    s, _ = reproject(RGB, str(tmp_path / "b.tif"), dst_crs="EPSG:4326", bbox=(-78, 24, -77, 25), size=[100, 50])
    assert (s.width, s.height) == (100, 50) and s.bounds.left == -78 and s.bounds.top == 25
    s, _ = reproject(RGB, str(tmp_path / "c.tif"), dst_crs="EPSG:4326", bbox=(200000, 2650000, 300000, 2750000),
                     bbox_crs="EPSG:32618", resolution=0.01)
    assert s.resolution == (0.01, 0.01) and -78.2 < s.bounds.left < -77.8


def test_nearest_preserves_values_and_nodata(tmp_path) -> None:
    reproject(RGB, str(tmp_path / "n.tif"), dst_crs="EPSG:32617", nodata=0)
    with rasterio.open(RGB) as src, rasterio.open(tmp_path / "n.tif") as out:
        assert set(np.unique(out.read(1))) <= set(np.unique(src.read(1)))
        assert out.nodata == 0


def test_src_crs_override_and_missing_crs(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        reproject(str(DATA / "raster" / "float_nan.tif"), str(tmp_path / "x.tif"), dst_crs="EPSG:4326")
    assert e.value.code == "invalid-argument" and "src_crs" in e.value.message
    s, w = reproject(str(DATA / "raster" / "float_nan.tif"), str(tmp_path / "y.tif"), dst_crs="EPSG:4326",
                     src_crs="EPSG:3857")
    assert s.crs == "EPSG:4326" and s.nodata == "nan" and not w


@pytest.mark.parametrize("kwargs", [
    {"resolution": 0.01, "size": [10, 10]}, {"target_aligned_pixels": True}, {"resampling": "nearestish"},
    {"dst_crs": "EPSG:99999999"}, {"resolution": -1}, {"size": [0, 5]},
])
def test_bad_arguments(tmp_path, kwargs) -> None:
    args = {"dst_crs": "EPSG:4326", **kwargs}
    with pytest.raises(GdalMcpError) as e:
        reproject(RGB, str(tmp_path / "bad.tif"), **args)
    assert e.value.code == "invalid-argument"


def test_cog_output(tmp_path) -> None:
    from gdal_mcp.engine.raster.cog import cog_check

    reproject(RGB, str(tmp_path / "c.tif"), dst_crs="EPSG:3857", format="COG")
    assert [p.name for p in tmp_path.iterdir()] == ["c.tif"]
    with rasterio.open(tmp_path / "c.tif") as ds:
        assert cog_check(ds)[0] == [] and ds.crs.to_epsg() == 3857
