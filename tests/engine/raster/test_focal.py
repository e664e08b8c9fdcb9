"""raster_focal's engine (GDAL 3.12 `gdal raster neighbors`) against numpy on the same pixels.

The reference (`reference`) computes GDAL's documented rules independently, in float64, with
numpy.lib.stride_tricks.sliding_window_view: the window padded by repeating the edge rows and columns, pixels of
weight 0 and nodata pixels left out, value x weight for the rest, a nodata pixel stays nodata.

Tolerances: min, max, sum, median, range and the unique modes are exact (integer values, and floats that Float32
holds); mean and std within 1.2e-7 relative (one Float32 step, 2^-23: GDAL passes values through Float32; measured
on jacksboro_dem and topobathy: 5.9e-8). A tied mode may be any of the tied values (GDAL's order is not the
smallest nor the first in the window): the test checks it is one of them.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from numpy.lib.stride_tricks import sliding_window_view
from rasterio.transform import from_origin

from gdal_mcp.engine.raster.focal import focal
from gdal_mcp.errors import GdalMcpError

DATA = Path(__file__).resolve().parents[2] / "data" / "raster"
DEM = DATA / "jacksboro_dem.tif"
TOPOBATHY = DATA / "topobathy.tif"
RGB = DATA / "RGB.byte.tif"
STATISTICS = ["mean", "min", "max", "sum", "std", "median", "mode", "range"]
RTOL = 2.0**-23


def square(size: int) -> np.ndarray:
    return np.ones((size, size))


def circle(size: int) -> np.ndarray:
    """Pixel centres within (size - 1) / 2 pixels of the centre."""
    r = (size - 1) // 2
    dy, dx = np.mgrid[-r : r + 1, -r : r + 1]
    return (dx**2 + dy**2 <= r * r).astype(float)


def reference(a: np.ndarray, weights: np.ndarray, statistic: str, nodata: float | None = None) -> dict[str, np.ndarray]:
    """GDAL's focal rules in numpy, float64. "value": the statistic (NaN where the output is nodata); for mode also
    "tied": where several values share the top count, "winners": which window cells hold a winning value."""
    w = np.asarray(weights, dtype="float64")
    k = w.shape[0] // 2
    a = a.astype("float64")
    invalid = np.isnan(a) if nodata is None or math.isnan(nodata) else (a == nodata)
    windows = sliding_window_view(np.pad(a, k, mode="edge"), w.shape).reshape(*a.shape, -1)
    ok = ~sliding_window_view(np.pad(invalid, k, mode="edge"), w.shape).reshape(*a.shape, -1) & (w.ravel() != 0)
    vals = windows * w.ravel()
    masked = np.where(ok, vals, np.nan)
    out: dict[str, np.ndarray] = {}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: nodata
        if statistic == "sum":
            value = np.where(ok, vals, 0).sum(-1)
        elif statistic == "mean":
            value = np.where(ok, vals, 0).sum(-1) / np.where(ok, w.ravel(), 0).sum(-1)
        elif statistic == "min":
            value = np.nanmin(masked, -1)
        elif statistic == "max":
            value = np.nanmax(masked, -1)
        elif statistic == "range":
            value = np.nanmax(masked, -1) - np.nanmin(masked, -1)
        elif statistic == "std":
            value = np.nanstd(masked, -1)  # population standard deviation
        elif statistic == "median":
            value = np.nanmedian(masked, -1)
        else:  # mode
            counts = np.where(ok, ((vals[..., :, None] == vals[..., None, :]) & ok[..., None, :]).sum(-1), 0)
            winners = ok & (counts == counts.max(-1, keepdims=True))
            lowest = np.nanmin(np.where(winners, vals, np.nan), -1)
            highest = np.nanmax(np.where(winners, vals, np.nan), -1)
            value, out["tied"], out["winners"], out["vals"] = lowest, lowest != highest, winners, vals
    if statistic != "sum":
        value = np.where(ok.sum(-1) == 0, np.nan, value)  # no valid pixel in the window
    out["value"] = np.where(invalid, np.nan, value)
    return out


def assert_matches(got: np.ndarray, nodata: float | None, ref: dict[str, np.ndarray], statistic: str) -> None:
    """GDAL's output against the reference, with the tolerances of the module docstring."""
    expected = ref["value"]
    holes = np.isnan(expected)
    if nodata is None:
        assert not holes.any()
    else:
        assert np.array_equal(got[holes], np.full(holes.sum(), nodata)), "nodata where the reference has none"
        assert not (got[~holes] == nodata).any(), "valid pixels written as nodata"
    g, e = got[~holes].astype("float64"), expected[~holes]
    if statistic in ("mean", "std"):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=0)
    elif statistic == "mode":
        tied = ref["tied"][~holes]
        assert np.array_equal(g[~tied], e[~tied])  # a unique mode: exact
        won = (ref["vals"][~holes][tied] == g[tied][:, None]) & ref["winners"][~holes][tied]
        assert won.any(-1).all(), "a tied mode that is not one of the tied values"
    else:
        assert np.array_equal(g, e)


def run(src: Path | str, dst: Path, **kwargs) -> tuple[np.ndarray, float | None, Any, list[str]]:
    result, notes = focal(str(src), str(dst), **kwargs)
    with rasterio.open(dst) as ds:
        return ds.read(), ds.nodata, result, notes


def write(path: Path, a: np.ndarray, *, nodata: float | None = None, crs: str | None = "EPSG:32615", res: float = 10.0) -> Path:
    profile = {"driver": "GTiff", "width": a.shape[1], "height": a.shape[0], "count": 1, "dtype": a.dtype.name}
    profile.update(transform=from_origin(500000, 4000000, res, res), nodata=nodata)
    if crs:
        profile["crs"] = crs
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(a, 1)
    return path


@pytest.fixture(scope="module")
def holes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """Int16 40 x 30 with nodata holes: scattered pixels, a block, the whole first row, a corner."""
    rng = np.random.default_rng(7)
    a = rng.integers(0, 12, (30, 40)).astype("int16") * 5  # few distinct values: modes and medians with ties
    a[rng.random(a.shape) < 0.15] = -9999
    a[10:16, 20:26] = -9999
    a[0, :] = -9999
    a[-3:, -3:] = -9999
    return write(tmp_path_factory.mktemp("focal") / "holes.tif", a, nodata=-9999), a


@pytest.fixture(scope="module")
def dem_block(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """The top 120 rows of jacksboro_dem (lon/lat Int16), as a GeoTIFF of their own: quicker than the whole DEM."""
    with rasterio.open(DEM) as ds:
        window = rasterio.windows.Window(0, 0, ds.width, 120)
        a, profile = ds.read(1, window=window), ds.profile
        profile.update(height=120, transform=ds.window_transform(window))
    path = tmp_path_factory.mktemp("focal-dem") / "dem_block.tif"
    with rasterio.open(path, "w", **profile) as out:
        out.write(a, 1)
    return path, a


@pytest.mark.parametrize("statistic", STATISTICS)
def test_dem_square_3(statistic: str, dem_block, tmp_path: Path) -> None:
    src, a = dem_block
    got, nodata, result, _ = run(src, tmp_path / "out.tif", statistic=statistic, output_type="Float64")
    assert_matches(got[0], nodata, reference(a, square(3), statistic), statistic)
    assert (result.window.size, result.window.cells) == (3, 9)


@pytest.mark.parametrize("statistic", STATISTICS)
def test_topobathy_circle_5(statistic: str, tmp_path: Path) -> None:
    with rasterio.open(TOPOBATHY) as ds:
        a = ds.read(1)
    got, nodata, result, _ = run(TOPOBATHY, tmp_path / "out.tif", statistic=statistic, shape="circle", size=5)
    assert got.dtype == np.float32  # the default output type
    assert_matches(got[0], nodata, reference(a, circle(5), statistic), statistic)
    assert (result.window.size, result.window.cells) == (5, 13)


@pytest.mark.parametrize("shape", ["square", "circle"])
@pytest.mark.parametrize("statistic", STATISTICS)
def test_nodata_holes_are_left_out_and_stay_nodata(statistic: str, shape: str, holes, tmp_path: Path) -> None:
    src, a = holes
    got, nodata, _, _ = run(src, tmp_path / "out.tif", statistic=statistic, shape=shape, size=5)
    assert nodata == -9999
    assert_matches(got[0], nodata, reference(a, square(5) if shape == "square" else circle(5), statistic, -9999), statistic)


def test_nan_is_nodata_in_float_bands(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(100, 20, (25, 30)).astype("float32")
    a[rng.random(a.shape) < 0.2] = np.nan
    undeclared, declared = write(tmp_path / "nan.tif", a), write(tmp_path / "nan_nodata.tif", a, nodata=math.nan)
    for src, statistic in ((undeclared, "mean"), (undeclared, "range"), (declared, "median"), (declared, "max")):
        got, nodata, result, _ = run(src, tmp_path / f"{src.stem}-{statistic}.tif", statistic=statistic)
        assert nodata is not None and math.isnan(nodata) and result.summary.nodata == "nan"
        # NaN holes stay NaN (GDAL alone would fill them: it compares the centre to a NaN nodata with ==)
        expected = reference(a, square(3), statistic, math.nan)
        assert np.array_equal(np.isnan(got[0]), np.isnan(expected["value"]))
        ok = ~np.isnan(expected["value"])
        np.testing.assert_allclose(got[0][ok], expected["value"][ok], rtol=RTOL, atol=0)


def test_edges_repeat_the_outer_rows_and_columns(tmp_path: Path) -> None:
    ones = write(tmp_path / "ones.tif", np.ones((6, 7), "uint8"))
    got, _, _, _ = run(ones, tmp_path / "sum.tif", statistic="sum", size=3)
    assert (got == 9).all()  # corners too: 9, not the 4 pixels of the raster a corner window covers
    got, _, _, _ = run(ones, tmp_path / "circle.tif", statistic="sum", shape="circle", size=5)
    assert (got == 13).all()
    ramp = write(tmp_path / "ramp.tif", np.tile(np.arange(7, dtype="int16") * 10, (6, 1)))
    got, _, _, _ = run(ramp, tmp_path / "mean.tif", statistic="mean", size=3)
    assert got[0, 0, 0] == pytest.approx((0 + 0 + 10) / 3) and got[0, 0, -1] == pytest.approx((50 + 60 + 60) / 3)


def test_custom_kernels(holes, dem_block, tmp_path: Path) -> None:
    gaussian = [[1, 2, 1], [2, 4, 2], [1, 2, 1]]
    dem, a = dem_block
    got, nodata, result, _ = run(dem, tmp_path / "gauss.tif", statistic="mean", kernel=gaussian)
    assert_matches(got[0], nodata, reference(a, np.array(gaussian), "mean"), "mean")
    assert (result.window.size, result.window.cells) == (3, 9)
    # a ring (centre weight 0) and weights other than 1 on the raster with holes: value x weight, nodata left out
    ring = [[1, 1, 1, 1, 1], [1, 0, 0, 0, 1], [1, 0, 0, 0, 1], [1, 0, 0, 0, 1], [1, 1, 1, 2, 1]]
    src, h = holes
    for statistic in ("max", "median", "sum"):
        got, nodata, _, _ = run(src, tmp_path / f"ring-{statistic}.tif", statistic=statistic, kernel=ring)
        assert_matches(got[0], nodata, reference(h, np.array(ring), statistic, -9999), statistic)
    # a valid pixel whose window holds no valid pixel: nodata (sum: 0)
    lonely = np.full((7, 7), -1, "int16")
    lonely[3, 3] = 5
    src = write(tmp_path / "lonely.tif", lonely, nodata=-1)
    got, _, _, _ = run(src, tmp_path / "lonely-max.tif", statistic="max", kernel=ring)
    assert (got == -1).all()
    got, _, _, _ = run(src, tmp_path / "lonely-sum.tif", statistic="sum", kernel=ring)
    assert got[0, 3, 3] == 0 and (np.delete(got.ravel(), 3 * 7 + 3) == -1).all()


def test_range_is_streamed_through_temporary_files(holes, tmp_path: Path) -> None:
    src, a = holes
    out = tmp_path / "range" / "range.tif"
    out.parent.mkdir()
    got, nodata, _, _ = run(src, out, statistic="range", shape="circle", size=7, output_type="Int16")
    assert got.dtype == np.int16 and nodata == -9999
    assert_matches(got[0], nodata, reference(a, circle(7), "range", -9999), "range")
    assert sorted(p.name for p in out.parent.iterdir()) == ["range.tif"]  # the max and min files are gone


def test_nodata_other_than_the_inputs_is_written_into_the_holes(holes, tmp_path: Path) -> None:
    src, a = holes
    for statistic in ("mean", "range"):
        got, nodata, result, _ = run(src, tmp_path / f"{statistic}.tif", statistic=statistic, nodata=-1)
        assert nodata == -1 and result.summary.nodata == -1
        assert_matches(got[0], -1, reference(a, square(3), statistic, -9999), statistic)
        assert not (got == -9999).any()
    # into Int16, the window-by-window pass rounds as GDAL does (GDAL itself writes the input's nodata: the reference)
    by_gdal, _, _, _ = run(src, tmp_path / "gdal.tif", statistic="mean", output_type="Int16")
    ours, _, _, _ = run(src, tmp_path / "ours.tif", statistic="mean", output_type="Int16", nodata=-1)
    assert np.array_equal(np.where(by_gdal == -9999, -1, by_gdal), ours)
    means = reference(a, square(3), "mean", -9999)["value"]
    assert (np.abs(np.mod(means, 1) - 0.5) < 1e-9).sum() > 10  # halves to round: the rule is exercised


def test_results_equal_to_nodata_are_reported(tmp_path: Path) -> None:
    ones = write(tmp_path / "ones.tif", np.ones((6, 7), "uint8"))
    got, nodata, _, notes = run(ones, tmp_path / "range.tif", statistic="range", nodata=0, output_type="Byte")
    assert nodata == 0 and (got == 0).all()  # every range is 0: all of them read as nodata, and the warning says so
    assert any(f"{6 * 7} pixels have a valid result equal to the nodata value 0" in n for n in notes), notes


def test_integer_output_rounds(dem_block, tmp_path: Path) -> None:
    src, a = dem_block
    got, _, _, _ = run(src, tmp_path / "mean.tif", statistic="mean", output_type="Int16")
    # 9 integers never average to a half: no rounding tie, so numpy's rounding is GDAL's
    assert got.dtype == np.int16 and np.array_equal(got[0], np.round(reference(a, square(3), "mean")["value"]))


def test_radius_in_metres_on_a_projected_raster(holes, tmp_path: Path) -> None:
    src, a = holes  # 10 m pixels
    got, nodata, result, notes = run(src, tmp_path / "sq.tif", statistic="max", radius=25)
    assert (result.window.size, result.window.cells, result.window.pixel_size_m) == (5, 25, (10.0, 10.0))
    assert_matches(got[0], nodata, reference(a, square(5), "max", -9999), "max")
    got, nodata, result, notes = run(src, tmp_path / "circle.tif", statistic="min", radius=25, shape="circle")
    dy, dx = np.mgrid[-2:3, -2:3]
    disc = ((dx * 10.0) ** 2 + (dy * 10.0) ** 2 <= 25.0**2).astype(float)  # pixel centres within 25 m: 21 of them
    assert result.window.cells == 21 == int(disc.sum()) and not notes
    assert_matches(got[0], nodata, reference(a, disc, "min", -9999), "min")


def test_radius_on_a_lonlat_raster_uses_the_middle_latitude(tmp_path: Path) -> None:
    with rasterio.open(DEM) as ds:
        a, t, height = ds.read(1), ds.transform, ds.height
    got, nodata, result, notes = run(DEM, tmp_path / "out.tif", statistic="max", radius=300, shape="circle")
    # the WGS 84 ellipsoid's radii of curvature at the middle latitude: an arc of one pixel east and north
    phi = math.radians(t.f + t.e * height / 2)
    a_axis, f = 6378137.0, 1 / 298.257223563
    e2 = f * (2 - f)
    n_radius = a_axis / math.sqrt(1 - e2 * math.sin(phi) ** 2)
    m_radius = a_axis * (1 - e2) / (1 - e2 * math.sin(phi) ** 2) ** 1.5
    expected = (n_radius * math.cos(phi) * math.radians(t.a), m_radius * math.radians(-t.e))
    assert result.window.pixel_size_m == pytest.approx(expected, rel=1e-6)
    nx, ny = math.floor(300 / expected[0]), math.floor(300 / expected[1])  # 4 and 3 pixels
    n = max(nx, ny)
    dy, dx = np.mgrid[-n : n + 1, -n : n + 1]
    disc = ((dx * expected[0]) ** 2 + (dy * expected[1]) ** 2 <= 300.0**2).astype(float)
    assert result.window.size == 2 * n + 1 == 9 and result.window.cells == int(disc.sum())
    # the reference on a block of the DEM with n pixels of real neighbours around it (quicker than the whole DEM)
    block = reference(a[100 - n : 180 + n, 150 - n : 250 + n], disc, "max")["value"][n:-n, n:-n]
    assert np.array_equal(got[0][100:180, 150:250], block)
    assert any("lon/lat" in w and "middle latitude" in w for w in notes)


def test_bands_are_selected_in_order(tmp_path: Path) -> None:
    with rasterio.open(RGB) as ds:  # a 160 x 120 block of RGB.byte.tif (UTM, nodata 0 at the collar)
        window = rasterio.windows.Window(0, 200, 160, 120)
        rgb, profile = ds.read(window=window), ds.profile
        profile.update(width=160, height=120, transform=ds.window_transform(window))
    with rasterio.open(tmp_path / "rgb.tif", "w", **profile) as out:
        out.write(rgb)
    got, nodata, result, _ = run(tmp_path / "rgb.tif", tmp_path / "out.tif", statistic="median", bands=[3, 1], output_type="Byte")
    assert got.shape[0] == 2 == result.summary.count and nodata == profile["nodata"] == 0
    for out_band, band in ((0, 3), (1, 1)):
        expected = reference(rgb[band - 1], square(3), "median", 0)
        # medians of an even count end in .5: GDAL rounds them half up into Byte
        expected["value"] = np.floor(expected["value"] + 0.5)
        assert_matches(got[out_band], nodata, expected, "median")
    got, nodata, result, notes = run(
        tmp_path / "rgb.tif", tmp_path / "range.tif", statistic="range", bands=[2], output_type="Byte"
    )
    assert got.shape[0] == 1 and nodata == 0
    expected = reference(rgb[1], square(3), "range", 0)
    flat = expected["value"] == 0  # a range of 0 is the nodata value 0: it reads as nodata, and a warning counts them
    assert any(f"{flat.sum()} pixels have a valid result equal to the nodata value 0" in n for n in notes), notes
    expected["value"][flat] = np.nan
    assert_matches(got[0], nodata, expected, "range")


def test_wide_input_types_warn_of_float32(tmp_path: Path) -> None:
    a = np.full((5, 5), 1e8, "float64")
    a[2, 2] = 1e8 + 1
    got, _, _, notes = run(write(tmp_path / "f64.tif", a), tmp_path / "out.tif", statistic="max", output_type="Float64")
    assert any("Float32" in w and "float64" in w for w in notes)
    assert (got == 1e8).all()  # GDAL's Float32 cannot tell 1e8 + 1 from 1e8: what the warning says


def test_png_output_through_createcopy(holes, tmp_path: Path) -> None:
    src, a = holes  # nodata -9999 into a Byte PNG with nodata 0: neighbors, then calc writes the PNG
    got, nodata, result, _ = run(src, tmp_path / "out.png", statistic="max", output_type="Byte", nodata=0)
    assert result.summary.driver == "PNG" and nodata == 0
    assert_matches(got[0], 0, reference(a, square(3), "max", -9999), "max")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"size": 4}, "odd"),
        ({"size": 1}, "odd"),
        ({"size": 101}, "odd"),
        ({"kernel": []}, "kernel"),
        ({"kernel": [[1, 1], [1, 1]]}, "odd"),
        ({"kernel": [[1, 1, 1], [1, 1]]}, "square"),
        ({"kernel": [[0, 0, 0], [0, 0, 0], [0, 0, 0]]}, "0 weights"),
        ({"kernel": [[1, -1, 0], [0, 0, 0], [0, 0, 0]]}, "sum of the kernel"),
        ({"kernel": [[1, 1, 1], [1, float("nan"), 1], [1, 1, 1]]}, "finite"),
        ({"statistic": "variance"}, "unknown statistic"),
        ({"shape": "hexagon"}, "unknown shape"),
        ({"size": 3, "radius": 30.0}, "only one"),
        ({"kernel": [[1, 1, 1], [1, 1, 1], [1, 1, 1]], "shape": "circle"}, "shape"),
        ({"radius": -5.0}, "positive"),
        ({"radius": 4.0}, "smaller than a pixel"),
        ({"radius": 600.0}, "at most 99"),
        ({"output_type": "Byte"}, "cannot be stored in Byte"),
        ({"output_type": "Byte", "nodata": 300.0}, "cannot be stored"),
        ({"bands": [2]}, "do not exist"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(kwargs: dict, needle: str, holes, tmp_path: Path) -> None:
    src, _ = holes
    dst = tmp_path / "out.tif"
    with pytest.raises(GdalMcpError) as e:
        focal(str(src), str(dst), **kwargs)
    assert e.value.code == "invalid-argument" and needle in e.value.message, e.value.message
    assert not dst.exists() and list(tmp_path.iterdir()) == []


def test_radius_needs_a_crs(tmp_path: Path) -> None:
    src = write(tmp_path / "nocrs.tif", np.ones((5, 5), "uint8"), crs=None)
    with pytest.raises(GdalMcpError) as e:
        focal(str(src), str(tmp_path / "out.tif"), radius=30.0)
    assert e.value.code == "invalid-argument" and "no CRS" in e.value.message
    assert not (tmp_path / "out.tif").exists()
