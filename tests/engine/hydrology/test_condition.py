"""dem_condition on closed depressions with analytic answers: fill raises a depression to its pour point, breach
carves a channel from its bottom through the dam at the bottom's elevation; either way every cell then drains."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.hydrology.condition import dem_condition
from gdal_mcp.engine.hydrology.flow import flow_direction
from gdal_mcp.errors import GdalMcpError
from tests.engine.hydrology.dems import read, write_dem
from tests.helpers import DATA

PROFILE = [9.0, 8.0, 7.0, 3.0, 6.0, 5.0, 4.0, 2.0, 1.0]  # a channel falling east, a pool at 3 behind a dam at 6


def channel() -> np.ndarray:
    """A one-cell-wide channel along row 2 between 100 m walls, with the PROFILE's pool and dam."""
    z = np.full((5, len(PROFILE)), 100.0)
    z[2] = PROFILE
    return z


def test_fill_raises_the_pool_to_its_pour_point(tmp_path):
    src = write_dem(tmp_path / "c.tif", channel())
    summary, _ = dem_condition(src, str(tmp_path / "f.tif"), method="fill")
    out = read(tmp_path / "f.tif")
    expected = channel()
    expected[2, 3] = 6.0  # the pool's lowest way out is over the dam (6 m)
    assert np.array_equal(out, expected)
    assert summary.cells_changed == summary.cells_raised == 1 and summary.cells_lowered == 0
    assert summary.max_change == 3.0


def test_breach_carves_the_dam_down_to_the_pool(tmp_path):
    src = write_dem(tmp_path / "c.tif", channel())
    summary, _ = dem_condition(src, str(tmp_path / "b.tif"), method="breach")
    out = read(tmp_path / "b.tif")
    expected = channel()
    expected[2, 4:7] = 3.0  # the dam and the cells below it down to the first lower cell (2 m)
    assert np.array_equal(out, expected)
    assert summary.cells_changed == summary.cells_lowered == 3 and summary.cells_raised == 0
    assert summary.max_change == 3.0


@pytest.mark.parametrize("method", ["fill", "breach"])
def test_conditioned_real_dem_drains_everywhere(tmp_path, method):
    src = str(DATA / "raster" / "jacksboro_dem.tif")
    summary, _ = dem_condition(src, str(tmp_path / "c.tif"), method=method)
    with rasterio.open(tmp_path / "c.tif") as ds, rasterio.open(src) as orig:
        assert ds.dtypes[0] == orig.dtypes[0] and ds.crs == orig.crs and ds.transform == orig.transform
        z, z0 = ds.read(1).astype(float), orig.read(1).astype(float)
    diff = z - z0
    assert (diff >= 0).all() if method == "fill" else (diff <= 0).all()
    assert summary.cells_changed == int((diff != 0).sum()) > 0
    assert summary.max_change == np.abs(diff).max()
    d8_summary, _ = flow_direction(str(tmp_path / "c.tif"), str(tmp_path / "d8.tif"), condition="none")
    assert d8_summary.pits == 0


def test_unknown_method_is_refused(tmp_path):
    src = write_dem(tmp_path / "c.tif", channel())
    with pytest.raises(GdalMcpError) as e:
        dem_condition(src, str(tmp_path / "x.tif"), method="smooth")  # type: ignore[arg-type]
    assert e.value.code == "invalid-argument"


@pytest.mark.parametrize("method", ["fill", "breach"])
def test_the_summary_counts_the_pits_before_and_after(tmp_path, method):
    """Three single-cell pits punched into a plane falling east (so that nothing else is a pit): three before,
    none after either method."""
    from tests.engine.hydrology.dems import plane

    z = plane((12, 15), 90.0)  # falling east: every cell drains east, the east column are outlets
    for r, c in ((3, 4), (6, 9), (9, 2)):
        z[r, c] -= 5.0
    src = write_dem(tmp_path / "pits.tif", z)
    summary, _ = dem_condition(src, str(tmp_path / "out.tif"), method=method)
    assert summary.pits_before == 3 and summary.pits == 0
