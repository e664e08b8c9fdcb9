"""Overviews on copies of the test data: list, add (auto / explicit / average), delete, errors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import rasterio
import rasterio.shutil
from rasterio.windows import Window

from gdal_mcp.engine.raster.overviews import auto_levels, overviews
from gdal_mcp.errors import GdalMcpError
from tests.conftest import DATA


@pytest.fixture
def rgb(tmp_path) -> str:
    path = tmp_path / "RGB.byte.tif"
    shutil.copy(DATA / "raster" / "RGB.byte.tif", path)
    return str(path)


def factors(path: str) -> list[int]:
    with rasterio.open(path) as ds:
        return sorted(ds.overviews(1))


def test_auto_levels_follow_gdaladdo() -> None:
    assert auto_levels(791, 718) == [2, 4]  # 396x359 is still > 256, 198x180 is not
    assert auto_levels(256, 100) == []
    assert auto_levels(257, 10) == [2]
    assert auto_levels(1024, 1024) == [2, 4]
    assert auto_levels(1025, 1) == [2, 4, 8]


def test_list_is_read_only(rgb) -> None:
    before = open(rgb, "rb").read()
    result = overviews(rgb)
    assert (result.action, result.levels, result.resampling) == ("list", [], None)
    assert open(rgb, "rb").read() == before


def test_add_auto_levels(rgb) -> None:
    result = overviews(rgb, "add")
    assert result.levels == [2, 4] == factors(rgb)
    assert result.resampling == "nearest" and result.warnings == []
    with rasterio.open(rgb) as ds:
        assert [f for f in ds.files if f.endswith(".ovr")] == []  # internal
    assert overviews(rgb, "list").levels == [2, 4]


def test_add_explicit_levels_after_auto_with_another_method(rgb) -> None:
    overviews(rgb, "add")
    result = overviews(rgb, "add", levels=[2, 4, 8], resampling="average")
    assert result.levels == [2, 4, 8] == factors(rgb)
    with rasterio.open(rgb, overview_level=2) as o:
        assert (o.width, o.height) == (99, 90)


def test_average_values_match_a_numpy_mean(tmp_path) -> None:
    # An even-sized piece of RGB.byte.tif, so each overview pixel is exactly one 2x2 block.
    path = tmp_path / "piece.tif"
    with rasterio.open(DATA / "raster" / "RGB.byte.tif") as ds:
        window = Window(100, 100, 512, 256)
        data = ds.read(window=window)
        profile = ds.profile | {"width": 512, "height": 256, "transform": ds.window_transform(window)}
    with rasterio.open(path, "w", **profile) as out:
        out.write(data)
    assert overviews(str(path), "add", levels=[2], resampling="average").levels == [2]
    with rasterio.open(path, overview_level=0) as o:
        block = o.read(window=Window(64, 32, 64, 64))
    src = data[:, 64:192, 128:256].astype("float64").reshape(3, 64, 2, 64, 2)
    valid = src != 0  # nodata 0 is left out of the average
    count = valid.sum(axis=(2, 4))
    mean = np.where(count > 0, (src * valid).sum(axis=(2, 4)) / np.maximum(count, 1), 0)
    assert (count == 4).any() and ((count > 0) & (count < 4)).any()  # both full and partial blocks are checked
    assert np.array_equal(block, np.floor(mean + 0.5).astype("uint8"))


def test_delete(rgb) -> None:
    overviews(rgb, "add", levels=[2, 4, 8])
    with rasterio.open(rgb) as ds:
        checksum = ds.checksum(1)
    result = overviews(rgb, "delete")
    assert result.action == "delete" and result.levels == [] == factors(rgb)
    assert any("does not shrink" in w for w in result.warnings)
    with rasterio.open(rgb) as ds:
        assert ds.checksum(1) == checksum == 25420  # MANIFEST checksum of band 1
    again = overviews(rgb, "delete")
    assert again.levels == [] and again.warnings == ["the raster had no overviews"]
    assert overviews(rgb, "add", levels=[2]).levels == [2]  # the file is still writable


@pytest.mark.parametrize("levels", [[1], [0, 2], [2, 3.5], [2, "4"], [True], [], [2000], "some"])
def test_bad_levels(rgb, levels) -> None:
    with pytest.raises(GdalMcpError) as e:
        overviews(rgb, "add", levels=levels)
    assert e.value.code == "invalid-argument"
    assert factors(rgb) == []


def test_bad_resampling(rgb) -> None:
    with pytest.raises(GdalMcpError) as e:
        overviews(rgb, "add", resampling="max")
    assert e.value.code == "invalid-argument" and "average" in e.value.message


def test_read_only_format_is_unsupported(tmp_path) -> None:
    for name in ("gadas-export.png", "gadas-export.pgw", "gadas-export.png.aux.xml"):
        shutil.copy(DATA / "raster" / name, tmp_path / name)
    before = (tmp_path / "gadas-export.png").read_bytes()
    with pytest.raises(GdalMcpError) as e:
        overviews(str(tmp_path / "gadas-export.png"), "add")
    assert e.value.code == "unsupported" and "GTiff or COG" in e.value.message
    assert (tmp_path / "gadas-export.png").read_bytes() == before


@pytest.mark.parametrize("action", ["add", "delete"])
def test_a_cog_is_refused_not_broken(tmp_path, action) -> None:
    path = tmp_path / "c.tif"
    rasterio.shutil.copy(DATA / "raster" / "RGB.byte.tif", path, driver="COG")
    before = path.read_bytes()
    assert overviews(str(path)).levels == [2]  # the COG driver stops below 512 pixels
    with pytest.raises(GdalMcpError) as e:
        overviews(str(path), action, levels=[8])
    assert e.value.code == "unsupported" and "format=COG" in e.value.message
    assert path.read_bytes() == before
