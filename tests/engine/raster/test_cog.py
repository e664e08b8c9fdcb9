"""COG validation against files GDAL's COG driver writes (valid) and ones it does not."""

from __future__ import annotations

import rasterio
import rasterio.shutil

from gdal_mcp.engine.raster.cog import cog_check
from tests.helpers import DATA


def test_cog_driver_output_is_valid(tmp_path) -> None:
    out = tmp_path / "c.tif"
    rasterio.shutil.copy(DATA / "raster" / "RGB.byte.tif", out, driver="COG")
    with rasterio.open(out) as ds:
        assert cog_check(ds) == ([], [])


def test_overviews_added_after_the_data_break_the_layout(tmp_path) -> None:
    out = tmp_path / "t.tif"
    rasterio.shutil.copy(DATA / "raster" / "RGB.byte.tif", out, driver="GTiff", tiled=True)
    with rasterio.open(out, "r+") as ds:
        ds.build_overviews([2, 4])
    with rasterio.open(out) as ds:
        errors, _ = cog_check(ds)
    assert any("smaller overview" in e for e in errors)


def test_striped_file_is_not_a_cog() -> None:
    with rasterio.open(DATA / "raster" / "RGB.byte.tif") as ds:
        errors, warnings = cog_check(ds)
    assert errors and any("overviews" in w for w in warnings)
