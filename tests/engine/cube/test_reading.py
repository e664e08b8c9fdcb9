"""The cube engine's two readers agree: GDAL's multidimensional API (one call per run of steps) and its raster view
(block by block), on netCDF-3, netCDF-4 (chunked), Zarr and a variable with a level dimension."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.shutil
from rasterio.transform import from_origin
from rasterio.windows import Window

from gdal_mcp.engine.algorithms import run
from gdal_mcp.engine.cube.source import open_cube, read_raw, read_steps

DATA = Path(__file__).resolve().parents[2] / "data" / "raster"


def write_cube(path: Path, data: np.ndarray, levels: list[float] | None = None) -> None:
    """A (time[, level], y, x) Float32 cube as netCDF-4 through GDAL (band order: time slowest, level fastest)."""
    steps = data.shape[0]
    planes = data.reshape(-1, *data.shape[-2:])
    tif = path.with_suffix(".tif")
    with rasterio.open(
        tif,
        "w",
        driver="GTiff",
        width=data.shape[-1],
        height=data.shape[-2],
        count=planes.shape[0],
        dtype="float32",
        crs="EPSG:4326",
        transform=from_origin(0, 10, 1, 1),
        nodata=-1.0,
    ) as dst:
        extra = "{time,level}" if levels else "{time}"
        tags = {
            "NETCDF_DIM_EXTRA": extra,
            "NETCDF_DIM_time_DEF": f"{{{steps},6}}",
            "NETCDF_DIM_time_VALUES": "{" + ",".join(str(d * 10) for d in range(steps)) + "}",
            "time#units": "days since 2000-01-01",
        }
        if levels:
            tags.update(
                NETCDF_DIM_level_DEF=f"{{{len(levels)},6}}", NETCDF_DIM_level_VALUES="{" + ",".join(map(str, levels)) + "}"
            )
            tags["level#units"] = "hPa"
        dst.update_tags(**tags)
        for b in range(planes.shape[0]):
            t, lv = divmod(b, len(levels)) if levels else (b, 0)
            band = {"NETCDF_DIM_time": str(t * 10), "NETCDF_VARNAME": "v"}
            if levels:
                band["NETCDF_DIM_level"] = str(levels[lv])
            dst.update_tags(b + 1, **band)
        dst.write(planes)
    rasterio.shutil.copy(tif, path, driver="netCDF", FORMAT="NC4", COMPRESS="DEFLATE")
    tif.unlink()


def both_readers(path: str, variable: str | None, **select) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with open_cube(path, variable) as (ds, cube):
        assert cube.md is not None, "the multidimensional reader should open here"
        steps = cube.select(**select)
        bands = [s.band for s in steps]
        window = Window(1, 2, ds.width - 2, ds.height - 3)
        fast = read_steps(ds, cube, bands, window)
        raw = read_raw(ds, cube, bands, window)
        md, cube.md = cube.md, None
        try:
            slow = read_steps(ds, cube, bands, window)
            assert np.array_equal(read_raw(ds, cube, bands, window), raw)
        finally:
            cube.md = md
    return fast, slow, raw


def test_readers_agree_on_the_cmip5_netcdf3_file() -> None:
    fast, slow, _ = both_readers(str(DATA / "tas_rectilinear_grid_2D.nc"), "tas", start="2005-02", end="2005-11")
    assert fast.shape == (10, 93, 190)
    np.testing.assert_array_equal(fast, slow)


def test_readers_agree_with_levels_nodata_and_zarr(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    data = rng.normal(0, 1, (6, 3, 9, 11)).astype("float32")
    data[2, 1, 4, 5] = -1.0  # nodata
    write_cube(tmp_path / "lv.nc", data, levels=[1000.0, 850.0, 500.0])
    fast, slow, raw = both_readers(str(tmp_path / "lv.nc"), None, level=850)
    np.testing.assert_array_equal(fast, slow)
    expect = data[:, 1, 2:8, 1:10].astype("float64")
    assert np.array_equal(raw, expect.astype("float32"))
    expect[expect == -1.0] = np.nan
    np.testing.assert_array_equal(fast, expect)
    run(["mdim", "convert"], [str(tmp_path / "lv.nc"), str(tmp_path / "lv.zarr"), "--of", "ZARR"])
    fast, slow, _ = both_readers(str(tmp_path / "lv.zarr"), "v", level=500, start="2000-01-11")
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_array_equal(fast[0], np.where(data[1, 2, 2:8, 1:10] == -1.0, np.nan, data[1, 2, 2:8, 1:10]))


def test_level_must_be_chosen(tmp_path: Path) -> None:
    from gdal_mcp.errors import GdalMcpError

    write_cube(tmp_path / "lv.nc", np.zeros((2, 2, 3, 4), "float32"), levels=[10.0, 20.0])
    with open_cube(str(tmp_path / "lv.nc")) as (_, cube), pytest.raises(GdalMcpError) as e:
        cube.select()
    assert "give level=" in e.value.message and "10.0, 20.0" in e.value.message


def test_symmetric_rows_leave_the_raster_view_in_charge(tmp_path: Path) -> None:
    """Rows that read the same either way up cannot tell the orientation: the raster view reads (never a guess)."""
    data = np.ones((3, 4, 5), "float32")
    write_cube(tmp_path / "flat.nc", data)
    with open_cube(str(tmp_path / "flat.nc")) as (_, cube):
        assert cube.md is None


def test_readers_agree_on_a_projected_netcdf4_file(tmp_path: Path) -> None:
    shutil.copy(DATA / "PLANET_SCOPE_3D.nc", tmp_path / "p.nc")
    fast, slow, _ = both_readers(str(tmp_path / "p.nc"), "green")
    np.testing.assert_array_equal(fast, slow)


@pytest.mark.parametrize("statistic", ["mean", "sum", "min", "max", "std", "count", "median"])
def test_packed_values_are_unpacked_before_any_statistic(tmp_path: Path, statistic: str) -> None:
    """Int16 packed with a negative scale_factor and an add_offset (as ERA-Interim's geopotential): every statistic
    is of the physical values (a negative scale swaps minimum and maximum), nodata skipped."""
    from gdal_mcp.engine.cube.aggregate import aggregate

    rng = np.random.default_rng(5)
    raw = rng.integers(-30000, 30000, (8, 4, 6)).astype("int16")
    raw[3, 2, 2] = -32767  # nodata
    tif = tmp_path / "packed.tif"
    with rasterio.open(
        tif,
        "w",
        driver="GTiff",
        width=6,
        height=4,
        count=8,
        dtype="int16",
        crs="EPSG:4326",
        transform=from_origin(0, 4, 1, 1),
        nodata=-32767,
    ) as dst:
        dst.update_tags(
            NETCDF_DIM_EXTRA="{time}",
            NETCDF_DIM_time_DEF="{8,6}",
            NETCDF_DIM_time_VALUES="{0,1,2,3,4,5,6,7}",
            **{"time#units": "days since 2000-01-01"},
        )
        for b in range(8):
            dst.update_tags(b + 1, NETCDF_DIM_time=str(b))
        dst.scales = [-1.725] * 8
        dst.offsets = [66825.5] * 8
        dst.write(raw)
    rasterio.shutil.copy(tif, tmp_path / "packed.nc", driver="netCDF", FORMAT="NC4")
    with rasterio.open(tmp_path / "packed.nc") as ds:
        assert ds.scales[0] == -1.725 and ds.offsets[0] == 66825.5 and ds.dtypes[0] == "int16"
    values = np.where(raw == -32767, np.nan, raw * -1.725 + 66825.5)
    summary, _ = aggregate(src=str(tmp_path / "packed.nc"), dst=str(tmp_path / "out.tif"), period="all", statistic=statistic)
    reducer = {"mean": np.nanmean, "sum": np.nansum, "min": np.nanmin, "max": np.nanmax, "std": np.nanstd, "median": np.nanmedian}
    expect = np.sum(~np.isnan(values), axis=0) if statistic == "count" else reducer[statistic](values, axis=0)
    with rasterio.open(tmp_path / "out.tif") as out:
        np.testing.assert_allclose(out.read(1), expect, rtol=1e-6)


def test_a_time_axis_without_dates_is_still_the_time_axis(tmp_path: Path) -> None:
    """'months since' in the standard calendar has no fixed length: cube_info lists the raw values and says why,
    periods by date are refused saying why, the whole range still reduces (period='all')."""
    from gdal_mcp.engine.cube.aggregate import aggregate
    from gdal_mcp.engine.cube.info import cube_info
    from gdal_mcp.errors import GdalMcpError

    data = np.arange(4 * 3 * 5, dtype="float32").reshape(4, 3, 5)
    write_cube(tmp_path / "m.nc", data)
    tif = tmp_path / "m.tif"
    with rasterio.open(tmp_path / "m.nc") as src:
        profile = src.profile | {"driver": "GTiff"}
        with rasterio.open(tif, "w", **profile) as dst:
            dst.write(src.read())
            tags = src.tags() | {"time#units": "months since 2000-01-01"}
            dst.update_tags(**{k: v for k, v in tags.items() if k.startswith(("NETCDF_DIM", "time#"))})
            for b in range(1, 5):
                dst.update_tags(b, **src.tags(b))
    rasterio.shutil.copy(tif, tmp_path / "months.nc", driver="netCDF", FORMAT="NC4")
    info = cube_info(str(tmp_path / "months.nc"))
    assert info.dimensions[0].kind == "time" and info.dimensions[0].values == [0.0, 10.0, 20.0, 30.0]
    assert any("'months' is not a fixed length" in w for w in info.warnings)
    with pytest.raises(GdalMcpError) as e:
        aggregate(src=str(tmp_path / "months.nc"), dst=str(tmp_path / "o.tif"))
    assert e.value.code == "invalid-argument" and "has no dates" in e.value.message and "months" in e.value.message
    summary, _ = aggregate(src=str(tmp_path / "months.nc"), dst=str(tmp_path / "o.tif"), period="all")
    with rasterio.open(tmp_path / "o.tif") as out:
        np.testing.assert_allclose(out.read(1), data.mean(axis=0), rtol=1e-6)
