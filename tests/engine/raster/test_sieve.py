"""Sieve against gdal_sieve.py (Debian python3-gdal) on categorical rasters derived from real data."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

import gdal_mcp.engine.raster.sieve as sieve_module
from gdal_mcp.engine.raster.sieve import sieve
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA


def elevation_classes(path, nodata: int | None = None) -> str:
    """100 m elevation classes of the Jacksboro DEM (Byte), optionally with a nodata block."""
    with rasterio.open(DATA / "raster" / "jacksboro_dem.tif") as ds:
        z, profile = ds.read(1), ds.profile
    classes = (z // 100).astype("uint8")
    if nodata is not None:
        classes[50:90, 60:120] = nodata
    profile.update(dtype="uint8", nodata=nodata)
    with rasterio.open(path, "w", **profile) as out:
        out.write(classes, 1)
    return str(path)


def read(path) -> tuple[np.ndarray, float | None, str]:
    with rasterio.open(path) as ds:
        return ds.read(1), ds.nodata, ds.dtypes[0]


@pytest.mark.parametrize(("threshold", "connectedness", "nodata"), [(10, 4, None), (50, 8, None), (30, 4, 255)])
def test_identical_to_gdal_sieve(tmp_path, threshold, connectedness, nodata) -> None:
    src = elevation_classes(tmp_path / "classes.tif", nodata)
    gdal_cli("gdal_sieve.py", "-st", str(threshold), f"-{connectedness}", src, str(tmp_path / "ref.tif"))
    summary, _ = sieve(src, str(tmp_path / "out.tif"), threshold=threshold, connectedness=connectedness)
    ours, ref = read(tmp_path / "out.tif"), read(tmp_path / "ref.tif")
    assert ours[1:] == ref[1:]
    assert np.array_equal(ours[0], ref[0])
    assert (ours[0] != read(src)[0]).sum() > 100  # regions were merged


def test_refuses_over_budget_naming_the_size(tmp_path, monkeypatch) -> None:
    src = elevation_classes(tmp_path / "classes.tif")
    monkeypatch.setattr(sieve_module, "SIEVE_BUDGET", 1000)
    with pytest.raises(GdalMcpError) as e:
        sieve(src, str(tmp_path / "out.tif"), threshold=5)
    assert e.value.code == "resource-limit" and "403 x 344" in e.value.message


def test_float_band_is_refused(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        sieve(str(DATA / "raster" / "slope.tif"), str(tmp_path / "out.tif"), threshold=5)
    assert e.value.code == "unsupported" and "output_type" in e.value.message
