"""raster_compare's engine: known changes to copies of real rasters found exactly (numpy on the same pixels), and
the raw pixel counts against Debian's gdalcompare.py (GDAL 3.6)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.raster.compare import compare
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

DEM = DATA / "raster" / "jacksboro_dem.tif"  # 403 x 344 Int16, lon/lat
RGB = DATA / "raster" / "RGB.byte.tif"  # 791 x 718 x 3 Byte, UTM, nodata 0


def copy(src, dst, change=None, **profile_changes) -> str:
    """A copy of `src` written by rasterio (other encoding: DEFLATE), `change(bands)` applied to its pixels."""
    with rasterio.open(src) as ds:
        data, profile, tags = ds.read(), ds.profile, ds.tags()
    for key in ("blockxsize", "blockysize", "tiled"):
        profile.pop(key, None)
    profile.update(compress="deflate", **profile_changes)
    if change is not None:
        data = change(data)
    with rasterio.open(dst, "w", **profile) as out:
        out.write(data)
        out.update_tags(**tags)
    return str(dst)


def pixels(path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read()


def test_same_data_in_another_encoding_is_identical(tmp_path) -> None:
    other = copy(DEM, tmp_path / "other.tif", predictor=1)
    assert os.path.getsize(other) != os.path.getsize(DEM)
    assert np.array_equal(pixels(other), pixels(DEM))  # the reference: numpy
    result, warnings = compare(other, str(DEM))
    assert result.identical and result.pixels_identical and result.differences == []
    assert [b.differing_pixels for b in result.bands] == [0]
    assert result.bands[0].window is None and result.bands[0].max_abs_difference is None


def test_a_changed_block_is_found_exactly(tmp_path) -> None:
    rng = np.random.default_rng(7)
    delta = rng.integers(1, 40, size=(30, 50)) * rng.choice([-1, 1], size=(30, 50))

    def change(bands):
        bands = bands.copy()
        bands[0, 100:130, 200:250] += delta.astype(bands.dtype)
        return bands

    changed = copy(DEM, tmp_path / "changed.tif", change)
    diff = pixels(changed).astype(float) - pixels(DEM).astype(float)  # numpy on the same pixels
    rows, cols = np.nonzero(diff[0])
    result, _ = compare(changed, str(DEM))
    band = result.bands[0]
    assert not result.identical and not result.pixels_identical and result.differences == []
    assert band.differing_pixels == rows.size == 30 * 50
    assert band.max_abs_difference == np.abs(diff).max()
    assert band.mean_abs_difference == pytest.approx(np.abs(diff[0][rows, cols]).mean())
    assert (band.window.col_off, band.window.row_off, band.window.width, band.window.height) == (200, 100, 50, 30)
    with rasterio.open(DEM) as ds:
        left, top = ds.transform @ (200, 100)
        right, bottom = ds.transform @ (250, 130)
    assert (band.bounds.left, band.bounds.top) == pytest.approx((left, top))
    assert (band.bounds.right, band.bounds.bottom) == pytest.approx((right, bottom))


def test_tolerance_keeps_only_larger_differences(tmp_path) -> None:
    src = tmp_path / "float.tif"
    copy(DEM, src, lambda b: b.astype("float32"), dtype="float32")
    ramp = np.linspace(0.1, 3.0, 60 * 40).reshape(60, 40).astype("float32")  # differences from 0.1 to 3

    def change(bands):
        bands = bands.copy()
        bands[0, 10:70, 300:340] += ramp
        return bands

    changed = copy(src, tmp_path / "changed.tif", change)
    d = np.abs(pixels(changed)[0].astype(float) - pixels(src)[0].astype(float))
    big = d > 1.5
    rows, cols = np.nonzero(big)
    result, _ = compare(changed, str(src), tolerance=1.5)
    band = result.bands[0]
    assert band.differing_pixels == int(big.sum()) and band.max_abs_difference == pytest.approx(d.max())
    assert band.mean_abs_difference == pytest.approx(d[big].mean())
    assert (band.window.row_off, band.window.height) == (rows.min(), rows.max() - rows.min() + 1)
    assert (band.window.col_off, band.window.width) == (cols.min(), cols.max() - cols.min() + 1)
    assert compare(changed, str(src), tolerance=3.5)[0].identical  # every difference within tolerance


def test_nodata_in_one_raster_only_is_a_difference(tmp_path) -> None:
    ref = copy(RGB, tmp_path / "ref.tif")  # nodata 0 on every band

    def change(bands):
        bands = bands.copy()
        bands[1, 300:310, 400:420] = 0  # valid pixels turned nodata on band 2
        return bands

    holes = copy(RGB, tmp_path / "holes.tif", change)
    a, b = pixels(holes), pixels(ref)
    mismatch = (a[1] == 0) != (b[1] == 0)
    result, _ = compare(holes, ref)
    assert [x.differing_pixels for x in result.bands] == [0, int(mismatch.sum()), 0]
    assert result.bands[1].nodata_mismatches == int(mismatch.sum()) > 0
    assert result.bands[1].max_abs_difference is None  # no pixel valid in both differs
    assert not result.identical and result.differences == []


def test_every_band_of_a_multiband_raster(tmp_path) -> None:
    def change(bands):
        bands = bands.copy()
        bands[2, 300:310, 300:320] = np.where(bands[2, 300:310, 300:320] > 0, 7, 0)
        return bands

    changed = copy(RGB, tmp_path / "changed.tif", change)
    a, b = pixels(changed).astype(int), pixels(RGB).astype(int)
    result, _ = compare(changed, str(RGB))
    assert [x.differing_pixels for x in result.bands] == [int((a[i] != b[i]).sum()) for i in range(3)]
    assert result.bands[2].differing_pixels > 0
    assert result.bands[2].max_abs_difference == np.abs(a[2] - b[2]).max()


def test_pixel_counts_match_gdalcompare_3_6(tmp_path) -> None:
    """With the tolerance at 0 and the same nodata, our count and maximum are gdalcompare.py's over raw values."""
    if shutil.which("gdalcompare.py") is None:
        pytest.skip("gdalcompare.py not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")

    def change(bands):
        bands = bands.copy()
        bands[0, 200:260, 10:90] -= 13
        bands[0, 5, 5] += 2
        return bands

    changed = copy(DEM, tmp_path / "changed.tif", change)
    out = subprocess.run(["gdalcompare.py", str(DEM), changed], capture_output=True, text=True, timeout=60).stdout
    count = int(re.search(r"Pixels Differing: (\d+)", out).group(1))
    maximum = float(re.search(r"Maximum Pixel Difference: ([\d.]+)", out).group(1))
    band = compare(changed, str(DEM))[0].bands[0]
    assert (band.differing_pixels, band.max_abs_difference) == (count, maximum) == (60 * 80 + 1, 13)


def test_structure_differences_are_reported_with_their_kind(tmp_path) -> None:
    def change(bands):
        return bands

    other = copy(RGB, tmp_path / "other.tif", change, nodata=255)
    with rasterio.open(other, "r+") as ds:
        ds.update_tags(SOURCE="me")
        ds.crs = "EPSG:32619"
    result, _ = compare(other, str(RGB))
    kinds = {d.kind for d in result.differences}
    assert {"crs", "nodata", "metadata"} <= kinds
    crs = next(d for d in result.differences if d.kind == "crs")
    assert crs.message == "The CRSs are not equivalent: input EPSG:32619, reference EPSG:32618"  # not two WKTs
    assert {d.band for d in result.differences if d.kind == "nodata"} == {1, 2, 3}
    assert not result.identical
    skipped, _ = compare(other, str(RGB), skip=["crs", "metadata"])
    assert not {"crs", "metadata"} & {d.kind for d in skipped.differences}


def test_different_sizes_are_not_compared_pixel_by_pixel(tmp_path) -> None:
    result, warnings = compare(str(RGB), str(DEM))
    kinds = {d.kind for d in result.differences}
    assert {"crs", "geotransform", "size", "band_count"} <= kinds
    assert result.bands == [] and result.pixels_identical is None and not result.identical
    assert any("pixels not compared" in w for w in warnings)


def test_difference_raster_is_input_minus_reference(tmp_path) -> None:
    def change(bands):
        bands = bands.copy()
        bands[0, 100:110, 100:120] = np.where(bands[0, 100:110, 100:120] > 0, bands[0, 100:110, 100:120] // 2, 0)
        bands[0, 0:5, 0:5] = 0  # nodata
        return bands

    changed = copy(RGB, tmp_path / "changed.tif", change)
    dst = tmp_path / "diff.tif"
    result, _ = compare(changed, str(RGB), str(dst))
    a, b = pixels(changed).astype("float32"), pixels(RGB).astype("float32")
    expected = np.where((a != 0) & (b != 0), a - b, np.nan)
    with rasterio.open(dst) as ds:
        out = ds.read()
        assert ds.dtypes == ("float32",) * 3 and np.isnan(ds.nodata)
    assert np.array_equal(out, expected, equal_nan=True)
    assert result.bands[0].differing_pixels == int((np.nan_to_num(expected[0]) != 0).sum() + ((a[0] == 0) != (b[0] == 0)).sum())


def test_bad_arguments_write_nothing(tmp_path) -> None:
    dst = tmp_path / "diff.tif"
    for kwargs, code in [
        ({"tolerance": -1}, "invalid-argument"),
        ({"skip": ["pixels"]}, "invalid-argument"),
        ({"dst": str(dst), "reference": str(DEM)}, "invalid-argument"),  # sizes differ: no difference raster
        ({"dst": str(tmp_path / "diff.vrt")}, "unsupported"),
    ]:
        with pytest.raises(GdalMcpError) as e:
            compare(str(RGB), **{"reference": str(RGB), **kwargs})
        assert e.value.code == code, kwargs
    assert os.listdir(tmp_path) == []
