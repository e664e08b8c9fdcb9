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
from tests.cli_reference import gdal_cli
from tests.helpers import DATA


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


def test_list_is_gone_the_function_always_writes(rgb) -> None:
    before = open(rgb, "rb").read()
    with pytest.raises(GdalMcpError) as e:
        overviews(rgb, "list")  # type: ignore[arg-type]
    assert e.value.code == "invalid-argument" and "raster_info" in e.value.message
    assert open(rgb, "rb").read() == before


def test_add_auto_levels(rgb) -> None:
    result = overviews(rgb, "add")
    assert result.levels == [2, 4] == factors(rgb)
    assert result.resampling == "nearest" and result.warnings == []
    with rasterio.open(rgb) as ds:
        assert [f for f in ds.files if f.endswith(".ovr")] == []  # internal


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
    assert factors(str(path)) == [2]  # the COG driver stops below 512 pixels
    with pytest.raises(GdalMcpError) as e:
        overviews(str(path), action, levels=[8])
    assert e.value.code == "unsupported" and "format=COG" in e.value.message
    assert path.read_bytes() == before


# ---------------------------------------------------------------------------------------------- external (-ro)


def _external(src: str, tmp_path, **kwargs):
    """overviews_external as the tool runs it: into a scratch dir, then the .ovr moved beside the raster."""
    import os

    from gdal_mcp.engine.raster.overviews import overviews_external

    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    name = os.path.basename(src)
    result, warnings = overviews_external(src, str(scratch / f"{name}.ovr"), **kwargs)
    assert sorted(p.name for p in scratch.iterdir()) == [f"{name}.ovr"], "only the .ovr may be left to move"
    os.replace(scratch / f"{name}.ovr", src + ".ovr")
    return result, warnings


@pytest.mark.parametrize("resampling", ["nearest", "average"])
def test_external_matches_gdaladdo_ro_and_leaves_the_file_alone(tmp_path, rgb, resampling) -> None:
    ref = tmp_path / "ref" / "RGB.byte.tif"
    ref.parent.mkdir()
    shutil.copy(rgb, ref)
    before = open(rgb, "rb").read()
    result, warnings = _external(rgb, tmp_path, levels=[2, 4, 8], resampling=resampling)
    assert open(rgb, "rb").read() == before, "the raster itself must not be rewritten"
    assert result.levels == [2, 4, 8] == factors(rgb) and any("RGB.byte.tif.ovr" in w for w in warnings)
    with rasterio.open(rgb) as ds:
        assert rgb + ".ovr" in ds.files
    gdal_cli("gdaladdo", "-ro", "-r", resampling, str(ref), "2", "4", "8")
    assert factors(str(ref)) == [2, 4, 8]
    for level in range(3):
        with rasterio.open(rgb, overview_level=level) as ours, rasterio.open(ref, overview_level=level) as cli:
            assert (ours.width, ours.height) == (cli.width, cli.height)
            assert np.array_equal(ours.read(), cli.read()), f"overview {level} differs from gdaladdo -ro"


def test_external_adds_to_an_existing_ovr_and_works_on_a_cog(tmp_path) -> None:
    path = tmp_path / "c.tif"
    rasterio.shutil.copy(DATA / "raster" / "RGB.byte.tif", path, driver="COG")
    # A COG has internal overviews: external ones cannot be added beside them.
    with pytest.raises(GdalMcpError) as e:
        _external(str(path), tmp_path)
    assert e.value.code == "invalid-argument" and "internal overviews [2]" in e.value.message
    assert not (tmp_path / "c.tif.ovr").exists()
    plain = tmp_path / "p.tif"
    shutil.copy(DATA / "raster" / "RGB.byte.tif", plain)
    _external(str(plain), tmp_path, levels=[2])
    result, _ = _external(str(plain), tmp_path, levels=[4, 8])
    assert result.levels == [2, 4, 8] == factors(str(plain))
    with pytest.raises(GdalMcpError) as e:
        _external(str(plain), tmp_path, levels=[1])
    assert e.value.code == "invalid-argument"
