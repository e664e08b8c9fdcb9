"""Proximity against gdal_proximity.py (Debian python3-gdal) on categorical rasters derived from real data."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.raster.proximity import proximity
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA


def classes(path, source: str, divisor: int) -> str:
    """Byte classes of band 1 of a real raster (value // divisor)."""
    with rasterio.open(DATA / "raster" / source) as ds:
        z, profile = ds.read(1), ds.profile
    profile.update(dtype="uint8", nodata=None, count=1)
    with rasterio.open(path, "w", **profile) as out:
        out.write((z // divisor).astype("uint8"), 1)
    return str(path)


def read(path) -> tuple[np.ndarray, float | None, str]:
    with rasterio.open(path) as ds:
        return ds.read(1), ds.nodata, ds.dtypes[0]


CASES = [
    ([], {}),
    (["-values", "3,7", "-distunits", "PIXEL"], {"target_values": [3, 7], "distance_units": "pixel"}),
    (
        ["-values", "9", "-ot", "Byte", "-distunits", "PIXEL", "-maxdist", "50"],
        {"target_values": [9], "output_type": "Byte", "distance_units": "pixel", "max_distance": 50},
    ),
    (
        ["-values", "8", "-ot", "UInt16", "-distunits", "PIXEL", "-maxdist", "20", "-nodata", "9999"],
        {"target_values": [8], "output_type": "UInt16", "distance_units": "pixel", "max_distance": 20, "nodata": 9999},
    ),
]


@pytest.mark.parametrize(("cli", "kwargs"), CASES)
def test_identical_to_gdal_proximity_on_a_geographic_raster(tmp_path, cli, kwargs) -> None:
    src = classes(tmp_path / "classes.tif", "jacksboro_dem.tif", 100)
    gdal_cli("gdal_proximity.py", src, str(tmp_path / "ref.tif"), *cli)
    summary, warnings = proximity(src, str(tmp_path / "out.tif"), **kwargs)
    ours, ref = read(tmp_path / "out.tif"), read(tmp_path / "ref.tif")
    assert ours[2] == ref[2]
    assert np.array_equal(ours[0], ref[0])
    assert ours[1] == kwargs.get("nodata")  # declared only when given (gdal_proximity.py declares none)
    if kwargs.get("distance_units", "geo") == "geo":
        assert any("DEGREES" in w for w in warnings)


def test_geo_units_on_a_projected_raster(tmp_path) -> None:
    src = classes(tmp_path / "classes.tif", "RGB.byte.tif", 64)
    gdal_cli("gdal_proximity.py", src, str(tmp_path / "ref.tif"), "-values", "3", "-distunits", "GEO")
    summary, warnings = proximity(src, str(tmp_path / "out.tif"), target_values=[3])
    ours, ref = read(tmp_path / "out.tif")[0], read(tmp_path / "ref.tif")[0]
    # GDAL 3.12 rounds the distance on these not-quite-square pixels (300.038 x 300.042 m) by a Float32 step
    # differently from GDAL 3.6's gdal_proximity.py in a few pixels: equal to within two Float32 steps
    assert np.array_equal(ours == 0, ref == 0) and np.allclose(ours, ref, rtol=2**-22, atol=0)
    assert not any("DEGREES" in w for w in warnings)
    # metres: one pixel from a target is the pixel width (300.04 m), as the geotransform says
    with rasterio.open(src) as ds:
        values, width = ds.read(1), ds.transform.a
    assert (ours[values == 3] == 0).all()
    near = ours[(ours > 0) & (ours < 1.5 * width)]
    assert np.isclose(near.min(), width, rtol=1e-6)


def test_cog_output_and_bad_type(tmp_path) -> None:
    src = classes(tmp_path / "classes.tif", "jacksboro_dem.tif", 100)
    summary, _ = proximity(src, str(tmp_path / "out.tif"), format="COG", distance_units="pixel")
    assert summary.driver == "GTiff" and not list(tmp_path.glob("*.staging*"))
    with pytest.raises(GdalMcpError) as e:
        proximity(src, str(tmp_path / "bad.tif"), output_type="Int64")
    assert e.value.code == "unsupported"
