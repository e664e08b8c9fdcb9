"""cube_info, cube_aggregate, cube_series and cube_subset through an MCP client, against numpy on the same pixels.

References: a synthetic netCDF cube with known values (noleap calendar, nodata holes) whose dates the test computes
itself; the CMIP5 file tas_rectilinear_grid_2D.nc (12 monthly means of 2005) read band by band with rasterio;
pyproj.Geod for the zones' area weights.
"""

from __future__ import annotations

import base64
import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.shutil
from fastmcp import Client
from PIL import Image
from rasterio.transform import from_origin

from tests.helpers import call

TAS = 'NETCDF:"{ws}/raster/tas_rectilinear_grid_2D.nc":tas'
NOLEAP_MONTH_STARTS = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365]
T, H, W = 730, 5, 7  # two noleap years of daily steps
NODATA = -9999.0


def noleap_month(day: int) -> tuple[int, int]:
    """(year offset, month 1..12) of day `day` since 2001-01-01 in the noleap calendar."""
    year, doy = divmod(day, 365)
    return year, next(m for m in range(1, 13) if doy < NOLEAP_MONTH_STARTS[m])


@pytest.fixture(scope="module")
def synthetic(ws: Path) -> Iterator[tuple[str, np.ndarray]]:
    """cube/daily.nc: T daily steps (days since 2001-01-01, noleap) of H x W Float32 with a few nodata holes. The
    cube folder (a Zarr store of hundreds of files among it) goes when the module ends: the workspace is shared by the
    test files of the process, and a bounded catalog listing of it must still reach raster/ and vector/."""
    rng = np.random.default_rng(29)
    data = rng.normal(280, 10, size=(T, H, W)).astype("float32")
    data[5, 1, 1] = NODATA
    data[40:70, 2, 3] = NODATA  # most of February 2001 at one pixel
    (ws / "cube").mkdir(exist_ok=True)
    tif = ws / "cube" / "daily_src.tif"
    profile = dict(driver="GTiff", width=W, height=H, count=T, dtype="float32", crs="EPSG:4326")
    profile.update(transform=from_origin(10, 50, 1.0, 1.0), nodata=NODATA)
    with rasterio.open(tif, "w", **profile) as dst:
        dst.update_tags(
            NETCDF_DIM_EXTRA="{time}",
            NETCDF_DIM_time_DEF=f"{{{T},6}}",
            NETCDF_DIM_time_VALUES="{" + ",".join(str(d) for d in range(T)) + "}",
            **{"time#units": "days since 2001-01-01", "time#calendar": "noleap", "time#axis": "T"},
        )
        for b in range(T):
            dst.update_tags(b + 1, NETCDF_DIM_time=str(b), NETCDF_VARNAME="t2m")
        dst.write(data)
    rasterio.shutil.copy(tif, ws / "cube" / "daily.nc", driver="netCDF", FORMAT="NC4", COMPRESS="DEFLATE")
    tif.unlink()
    masked = np.where(data == NODATA, np.nan, data.astype("float64"))
    yield "cube/daily.nc", masked
    shutil.rmtree(ws / "cube", ignore_errors=True)


def tas_west_first(ws: Path) -> tuple[np.ndarray, float]:
    """The CMIP5 file's 12 months with its 0..360 longitudes rolled to -180..180 (the columns whose centre is at or
    east of 180 first), computed here from the file's geotransform; and the rolled grid's western edge."""
    with rasterio.open(TAS.format(ws=ws)) as ds:
        data = ds.read().astype("float64")
        left, step = ds.transform.c, ds.transform.a
    centres = left + step * (np.arange(data.shape[2]) + 0.5)
    first = int(np.flatnonzero(centres >= 180)[0])
    return np.roll(data, -first, axis=2), left + first * step - 360


def read_all(path: Path) -> tuple[np.ndarray, list[str]]:
    with rasterio.open(path) as ds:
        return ds.read().astype("float64"), list(ds.descriptions)


async def test_info_of_synthetic_and_real_cubes(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    err, res = await call(client, "cube_info", input=synthetic[0])
    assert not err, res
    time = res["dimensions"][0]
    assert time["kind"] == "time" and time["size"] == T and time["calendar"] == "noleap"
    assert time["values_truncated"] and time["values"][:2] == ["2001-01-01T00:00:00", "2001-01-02T00:00:00"]
    assert res["time_end"] == "2002-12-31T00:00:00"  # 729 days after 2001-01-01 in a 365-day calendar
    assert res["time_step"] == "1 day" and res["crs"] == "EPSG:4326" and res["nodata"] == NODATA
    err, res = await call(client, "cube_info", input="raster/tas_rectilinear_grid_2D.nc")
    assert not err, res
    assert res["variable"] == "tas" and [v["name"] for v in res["variables"]] == ["lon_bnds", "lat_bnds", "time_bnds", "tas"]
    assert res["time_steps"] == 12 and res["time_step"] == "1 month"
    assert (
        res["dimensions"][0]["values"][0] == "2005-01-16T12:00:00" and res["dimensions"][0]["calendar"] == "proleptic_gregorian"
    )
    assert res["crs"] == "EPSG:4326" and res["crs_source"] == "lon/lat axes" and res["units"] == "K"
    err, res = await call(client, "cube_info", input="raster/PLANET_SCOPE_3D.nc", variable="green")
    assert not err, res
    assert res["crs"] == "EPSG:32722" and res["crs_source"] == "grid_mapping" and res["time_steps"] == 2
    err, res = await call(client, "cube_info", input="raster/PLANET_SCOPE_3D.nc", variable="red")
    assert err and res["error"]["code"] == "invalid-argument" and "blue" in res["error"]["message"]


async def test_monthly_mean_equals_numpy(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    path, data = synthetic
    err, res = await call(client, "cube_aggregate", input=path, output="out/cube_monthly.tif", period="month")
    assert not err, res
    got, names = read_all(ws / "out" / "cube_monthly.tif")
    keys = [noleap_month(d) for d in range(T)]
    months = list(dict.fromkeys(keys))
    assert names == [f"{2001 + y}-{m:02d}" for y, m in months]
    for band, month in enumerate(months):
        idx = [d for d in range(T) if keys[d] == month]
        with np.errstate(invalid="ignore"):
            expect = np.nanmean(data[idx], axis=0)
        np.testing.assert_allclose(got[band], expect, rtol=1e-6)
    assert res["summary"]["periods"][1]["steps"] == 28 and res["summary"]["periods"][1]["label"] == "2001-02"
    assert not any("partly" in w for w in res["warnings"])  # every month whole


@pytest.mark.parametrize(
    ("statistic", "extra", "reducer"),
    [
        ("sum", {}, lambda a: np.nansum(a, axis=0)),
        ("std", {}, lambda a: np.nanstd(a, axis=0)),
        ("max", {}, lambda a: np.nanmax(a, axis=0)),
        ("count", {}, lambda a: np.sum(~np.isnan(a), axis=0)),
        ("percentile", {"percentile": 90}, lambda a: np.nanpercentile(a, 90, axis=0)),
    ],
)
async def test_seasonal_statistics_equal_numpy(client: Client, ws: Path, synthetic, statistic, extra, reducer) -> None:
    path, data = synthetic
    out = f"out/cube_season_{statistic}.tif"
    err, res = await call(client, "cube_aggregate", input=path, output=out, period="season", statistic=statistic, **extra)
    assert not err, res
    got, names = read_all(ws / out)

    def season(day: int) -> tuple[int, str]:
        y, m = noleap_month(day)
        name = {12: "DJF", 1: "DJF", 2: "DJF", 3: "MAM", 4: "MAM", 5: "MAM", 6: "JJA", 7: "JJA", 8: "JJA"}.get(m, "SON")
        return (y + 1 if m == 12 else y), name

    keys = [season(d) for d in range(T)]
    order = list(dict.fromkeys(keys))
    assert names[0] == "2000-12/2001-02" and names[1] == "2001-03/2001-05" and names[-1] == "2002-12/2003-02"
    assert any("2 period(s) only partly covered by the data: 2000-12/2001-02, 2002-12/2003-02 (" in w for w in res["warnings"])
    for band, key in enumerate(order):
        idx = [d for d in range(T) if keys[d] == key]
        np.testing.assert_allclose(got[band], reducer(data[idx]), rtol=1e-5, atol=1e-4)


async def test_climatology_anomaly_equals_numpy(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    """2002's monthly means minus the 2001 means of the same month (the reference period)."""
    path, data = synthetic
    err, res = await call(
        client,
        "cube_aggregate",
        input=path,
        output="out/cube_anom.nc",
        start="2002",
        end="2002",
        anomaly_reference=["2001", "2001"],
    )
    assert not err, res
    keys = [noleap_month(d) for d in range(T)]
    with rasterio.open(ws / "out" / "cube_anom.nc") as ds:
        assert ds.count == 12 and ds.tags()["time#calendar"] == "noleap"
        got = ds.read().astype("float64")
    for m in range(1, 13):
        this = np.nanmean(data[[d for d in range(T) if keys[d] == (1, m)]], axis=0)
        ref = np.nanmean(data[[d for d in range(T) if keys[d] == (0, m)]], axis=0)
        np.testing.assert_allclose(got[m - 1], this - ref, rtol=1e-5, atol=1e-4)
    err, res = await call(client, "cube_aggregate", input=path, output="out/cube_clim.tif", climatology=True, statistic="min")
    assert not err, res
    got, names = read_all(ws / "out" / "cube_clim.tif")
    assert names == [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
    for m in range(1, 13):
        np.testing.assert_allclose(got[m - 1], np.nanmin(data[[d for d in range(T) if keys[d][1] == m]], axis=0), rtol=1e-6)


async def test_real_netcdf_monthly_and_seasonal_means(client: Client, ws: Path) -> None:
    """The repository's CMIP5 file: each month's mean is its own band; seasons and the year are means of months; the
    file's 0..360 longitudes come out as -180..180."""
    months, west = tas_west_first(ws)
    err, res = await call(client, "cube_aggregate", input="raster/tas_rectilinear_grid_2D.nc", output="out/tas_m.tif")
    assert not err, res
    assert "read 'tas', the only variable of the file with a time or level dimension" in res["warnings"]
    got, names = read_all(ws / "out" / "tas_m.tif")
    assert names == [f"2005-{m:02d}" for m in range(1, 13)]
    np.testing.assert_allclose(got, months, rtol=1e-6)
    err, res = await call(
        client,
        "cube_aggregate",
        input="raster/tas_rectilinear_grid_2D.nc",
        variable="tas",
        output="out/tas_s.tif",
        period="season",
    )
    assert not err, res
    got, names = read_all(ws / "out" / "tas_s.tif")
    assert names == ["2004-12/2005-02", "2005-03/2005-05", "2005-06/2005-08", "2005-09/2005-11", "2005-12/2006-02"]
    np.testing.assert_allclose(got[0], months[0:2].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(got[2], months[5:8].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(got[4], months[11], rtol=1e-6)
    # DJF 2005 has January and February only, DJF 2006 December only: both said; the whole seasons are not
    partial = [w for w in res["warnings"] if "only partly covered" in w]
    assert len(partial) == 1 and "2004-12/2005-02, 2005-12/2006-02 (" in partial[0]
    with rasterio.open(ws / "out" / "tas_s.tif") as ds:
        assert ds.crs.to_epsg() == 4326 and ds.tags(1)["STEPS"] == "2" and ds.units == ("K",) * 5
        assert ds.bounds.left == pytest.approx(west) and west == pytest.approx(-180.9375)


async def test_series_at_a_point_equals_pixel_values(client: Client, ws: Path) -> None:
    with rasterio.open(TAS.format(ws=ws)) as ds:
        row, col = ds.index(360 - 105.0, 40.0)  # Boulder, on the file's 0..360 longitudes
        expect = ds.read()[:, row, col].astype("float64")
        first = int(np.ceil((180 - ds.transform.c) / ds.transform.a - 0.5))  # the rolled grid's column 0
        col = (col - first) % ds.width
    r = await client.call_tool(
        "cube_series",
        {"input": "raster/tas_rectilinear_grid_2D.nc", "variable": "tas", "points": [[-105.0, 40.0]], "plot": True},
        raise_on_error=False,
    )
    assert not r.is_error, r
    res = r.structured_content
    assert res["targets"][0]["row"] == row and res["targets"][0]["col"] == col
    assert [x["time"] for x in res["rows"]][:2] == ["2005-01-16T12:00:00", "2005-02-15T00:00:00"]
    np.testing.assert_allclose([x["values"][0] for x in res["rows"]], expect, rtol=1e-7)
    assert [c.type for c in r.content] == ["image", "text"], r.content
    png = r.content[0]
    assert Image.open(io.BytesIO(base64.b64decode(png.data))).size == (900, 420)
    err, res = await call(
        client,
        "cube_series",
        input="raster/tas_rectilinear_grid_2D.nc",
        variable="tas",
        points=[[10, 50]],
        start="2005-06",
        end="2005-07",
        output="out/tas_point.csv",
    )
    assert not err, res
    assert res["total_rows"] == 2 and (ws / "out" / "tas_point.csv").read_text().splitlines()[0] == "time,point_1"


async def test_series_over_zones_is_area_weighted(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    """A zone over three rows of the 1-degree synthetic grid: each row weighs its geodesic pixel area (pyproj)."""
    import geopandas as gpd
    import shapely
    from pyproj import Geod

    path, data = synthetic
    poly = shapely.box(11.0, 46.0, 14.0, 49.0)  # columns 1..3, rows 1..3 (lat 49..46)
    gpd.GeoDataFrame({"name": ["box"]}, geometry=[poly], crs="EPSG:4326").to_file(ws / "cube" / "zone.gpkg")
    err, res = await call(client, "cube_series", input=path, zones="cube/zone.gpkg", zone_field="name", end="2001-01-10")
    assert not err, res
    geod = Geod(ellps="WGS84")
    lons = list(np.linspace(11, 12, 2001))  # a pixel's top and bottom edges follow parallels: 2001 points along each

    def area(lat: float) -> float:
        return abs(geod.polygon_area_perimeter(lons + lons[::-1], [lat] * 2001 + [lat - 1] * 2001)[0])

    areas = np.array([area(lat) for lat in (49, 48, 47)])
    assert res["targets"][0]["pixels"] == 9 and res["targets"][0]["area_m2"] == pytest.approx(3 * areas.sum(), rel=1e-6)
    for day in range(10):
        block = data[day, 1:4, 1:4]
        w = np.where(np.isnan(block), 0, areas[:, None])
        expect = np.nansum(block * w) / w.sum()
        assert res["rows"][day]["values"][0] == pytest.approx(expect, rel=1e-7)


async def test_subset_netcdf_geotiff_and_per_step(client: Client, ws: Path) -> None:
    """A bbox across the prime meridian, on a file whose longitudes run 0..360: one box, west to east."""
    months, west = tas_west_first(ws)
    with rasterio.open(TAS.format(ws=ws)) as ds:
        step, top, dy = ds.transform.a, ds.transform.f, ds.transform.e
    # the bbox's pixels, rounded outwards, on the rolled grid (columns from `west`, rows from the file's top)
    c0, c1 = int(np.floor((-20 - west) / step)), int(np.ceil((30 - west) / step))
    r0, r1 = int(np.floor((60 - top) / dy)), int(np.ceil((40 - top) / dy))
    expect = months[2:8, r0:r1, c0:c1].astype("float32")
    err, res = await call(
        client,
        "cube_subset",
        input="raster/tas_rectilinear_grid_2D.nc",
        variable="tas",
        output="out/tas_sub.nc",
        start="2005-03",
        end="2005-08",
        bbox=[-20, 40, 30, 60],
    )
    assert not err, res
    assert res["summary"]["steps"] == 6 and res["summary"]["first_step"] == "2005-03-16T12:00:00"
    err, info = await call(client, "cube_info", input="out/tas_sub.nc")
    assert not err, info
    assert info["time_start"] == "2005-03-16T12:00:00" and info["time_end"] == "2005-08-16T12:00:00"
    with rasterio.open(ws / "out" / "tas_sub.nc") as ds:
        got = ds.read()
    assert got.shape[0] == 6 and got.shape[1:] == expect.shape[1:]
    np.testing.assert_array_equal(got, expect)
    err, res = await call(
        client,
        "cube_subset",
        input="raster/tas_rectilinear_grid_2D.nc",
        variable="tas",
        output="out/tas_steps",
        start="2005-11",
        per_step=True,
    )
    assert not err, res
    assert res["summary"]["files"] == ["tas_20051116.tif", "tas_20051216T120000.tif"]
    months, west = tas_west_first(ws)
    with rasterio.open(ws / "out" / "tas_steps" / "tas_20051216T120000.tif") as ds:
        np.testing.assert_array_equal(ds.read(1), months[11])
        assert ds.descriptions == ("2005-12-16T12:00:00",) and ds.crs.to_epsg() == 4326
        assert ds.bounds.left == pytest.approx(west)


async def test_cube_argument_errors(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    path, _ = synthetic
    cases = [
        ({"period": "fortnight"}, "period"),
        ({"statistic": "percentile"}, "percentile"),
        ({"start": "2003"}, "no time step"),
        ({"start": "not-a-date"}, "not a date"),
        ({"anomaly_reference": ["1990", "1991"]}, "no time step"),
        ({"climatology": True, "period": "year"}, "climatology"),
    ]
    for args, words in cases:
        err, res = await call(client, "cube_aggregate", input=path, output="out/never.tif", **args)
        assert err and res["error"]["code"] == "invalid-argument" and words in res["error"]["message"], (args, res)
    err, res = await call(client, "cube_aggregate", input="raster/PLANET_SCOPE_3D.nc", output="out/never.tif")
    assert err and "give variable=" in res["error"]["message"] and "blue, green" in res["error"]["message"]
    err, res = await call(client, "cube_aggregate", input=path, output="out/never.tif", period="JJA")
    assert err and "period='season'" in res["error"]["message"] and "start=" in res["error"]["message"]
    err, res = await call(client, "cube_aggregate", input=path, output="../escape.tif")
    assert err and res["error"]["code"] == "out-of-root"
    assert not (ws / "out" / "never.tif").exists()


async def test_zarr_cube_gives_the_same_monthly_means(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    """The synthetic cube copied to Zarr with GDAL's multidimensional API (gdal mdim convert): the calendar is read
    from the time array's attributes, and the monthly means equal numpy's."""
    from gdal_mcp.engine.algorithms import run

    path, data = synthetic
    run(["mdim", "convert"], [str(ws / path), str(ws / "cube" / "daily.zarr"), "--of", "ZARR"])
    err, info = await call(client, "cube_info", input="cube/daily.zarr")
    assert not err, info
    assert info["driver"] == "Zarr" and info["variable"] == "t2m" and info["dimensions"][0]["calendar"] == "noleap"
    err, res = await call(client, "cube_aggregate", input="cube/daily.zarr", variable="t2m", output="out/zarr_monthly.tif")
    assert not err, res
    got, names = read_all(ws / "out" / "zarr_monthly.tif")
    keys = [noleap_month(d) for d in range(T)]
    assert len(names) == 24 and names[23] == "2002-12"
    for band, month in enumerate(dict.fromkeys(keys)):
        np.testing.assert_allclose(got[band], np.nanmean(data[[d for d in range(T) if keys[d] == month]], axis=0), rtol=1e-6)
    # the Zarr copy stores latitudes ascending (south up): points, zones and subsets still land on the same pixels
    err, res = await call(client, "cube_series", input="cube/daily.zarr", variable="t2m", points=[[12.5, 48.5]], end="2001-01-05")
    assert not err, res
    assert (res["targets"][0]["row"], res["targets"][0]["col"]) == (1, 2)
    np.testing.assert_allclose([r["values"][0] for r in res["rows"]], data[:5, 1, 2], rtol=1e-6)
    err, res = await call(
        client,
        "cube_subset",
        input="cube/daily.zarr",
        variable="t2m",
        output="out/zarr_sub.tif",
        end="2001-01-03",
        bbox=[11, 46, 13, 49],
    )
    assert not err, res
    with rasterio.open(ws / "out" / "zarr_sub.tif") as ds:
        assert ds.transform.e < 0 and ds.bounds == (11.0, 46.0, 13.0, 49.0)
        np.testing.assert_array_equal(ds.read(), data[:3, 1:4, 1:3].astype("float32"))


async def test_hdf5_cube_is_read_with_its_dimension_scales(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    """A netCDF-4 file is HDF5: named .h5, GDAL's HDF5 driver opens it and gives its bands no times; the cube tools
    read the same file through the netCDF driver, which decodes the HDF5 dimension scales."""
    path, data = synthetic
    shutil.copy(ws / path, ws / "cube" / "daily.h5")
    err, info = await call(client, "cube_info", input="cube/daily.h5")
    assert not err, info
    assert info["variable"] == "t2m" and info["driver"] == "netCDF"
    assert info["time_steps"] == T and info["dimensions"][0]["calendar"] == "noleap"
    assert any("netCDF driver" in w for w in info["warnings"])
    err, res = await call(
        client, "cube_aggregate", input='HDF5:"cube/daily.h5"://t2m', output="out/h5_year.tif", period="year", statistic="median"
    )
    assert not err, res
    got, names = read_all(ws / "out" / "h5_year.tif")
    assert names == ["2001", "2002"]
    np.testing.assert_allclose(got[1], np.nanmedian(data[365:], axis=0), rtol=1e-6)


async def test_info_chunking_equals_gdalmdiminfo(client: Client, ws: Path, synthetic: tuple[str, np.ndarray]) -> None:
    """cube_info's dimension names and chunk lengths against Debian's gdalmdiminfo (GDAL 3.6) on the same file."""
    from tests.cli_reference import gdalmdiminfo_json

    path, _ = synthetic
    reference = gdalmdiminfo_json(str(ws / path), "-array", "t2m")
    err, res = await call(client, "cube_info", input=path)
    assert not err, res
    names = [d.rsplit("/", 1)[-1] if isinstance(d, str) else d["name"] for d in reference["dimensions"]]
    assert [d["name"] for d in res["dimensions"]] == names
    assert reference["block_size"][0] == 1  # chunked (deflate), one step per chunk
    assert [d["chunk"] for d in res["dimensions"]] == reference["block_size"]


async def test_series_over_countries_on_a_0_360_grid(client: Client, ws: Path) -> None:
    """Countries west of the prime meridian (Brazil, the USA) and across it (France) get their area-weighted means:
    checked against a rasterization of the same polygons on the rolled grid, with pyproj's geodesic row areas."""
    import geopandas as gpd
    from pyproj import Geod
    from rasterio.features import geometry_mask
    from rasterio.transform import Affine

    months, west = tas_west_first(ws)
    with rasterio.open(TAS.format(ws=ws)) as ds:
        transform = Affine(ds.transform.a, 0, west, 0, ds.transform.e, ds.transform.f)
    countries = gpd.read_file(ws / "vector" / "naturalearth_lowres.shp")
    (ws / "cube").mkdir(exist_ok=True)
    countries[countries["name"].isin(["Brazil", "France", "United States of America"])].to_file(ws / "cube" / "three.gpkg")
    err, res = await call(
        client,
        "cube_series",
        input="raster/tas_rectilinear_grid_2D.nc",
        variable="tas",
        zones="cube/three.gpkg",
        zone_field="name",
    )
    assert not err, res
    geod = Geod(ellps="WGS84")
    lats = transform.f + transform.e * np.arange(months.shape[1] + 1)
    lons = list(np.linspace(0, transform.a, 201))
    rows = np.array(
        [
            abs(geod.polygon_area_perimeter(lons + lons[::-1], [a] * 201 + [b] * 201)[0])
            for a, b in zip(lats[:-1], lats[1:], strict=True)
        ]
    )
    for i, target in enumerate(res["targets"]):
        geom = countries.loc[countries["name"] == target["name"], "geometry"].iloc[0]
        inside = ~geometry_mask([geom], out_shape=months.shape[1:], transform=transform)
        assert target["pixels"] == inside.sum() > 20, target
        weights = inside * rows[:, None]
        expect = (months * weights).sum(axis=(1, 2)) / weights.sum()
        np.testing.assert_allclose([r["values"][i] for r in res["rows"]], expect, rtol=1e-6)
    assert res["warnings"] == []


async def test_a_zone_smaller_than_a_pixel_takes_the_pixels_it_touches(
    client: Client, ws: Path, synthetic: tuple[str, np.ndarray]
) -> None:
    """An island inside one 1-degree pixel holds no pixel centre: its series is that pixel's values, said in a warning
    (24 of Natural Earth's countries were null on the CMIP5 grid); a zone off the cube stays null."""
    import geopandas as gpd
    import shapely

    path, data = synthetic
    islands = gpd.GeoDataFrame(
        {"name": ["islet", "far"]},
        geometry=[shapely.box(12.2, 48.2, 12.4, 48.4), shapely.box(100, 0, 101, 1)],
        crs="EPSG:4326",
    )
    islands.to_file(ws / "cube" / "islands.gpkg")
    err, res = await call(client, "cube_series", input=path, zones="cube/islands.gpkg", zone_field="name", end="2001-01-05")
    assert not err, res
    # the islet lies in the pixel of column 2 (12..13 E) and row 1 (49..48 N)
    np.testing.assert_allclose([r["values"][0] for r in res["rows"]], data[:5, 1, 2], rtol=1e-6)
    assert [r["values"][1] for r in res["rows"]] == [None] * 5
    assert any("islet" in w and "touch" in w for w in res["warnings"]) and any(
        "far" in w and "outside" in w for w in res["warnings"]
    )


async def test_band_math_on_a_cube_says_it_read_one_step(client: Client, ws: Path) -> None:
    """raster_calc on a netCDF variable reads its band 1 (January) unless told: it says so and names cube_aggregate
    (an agent's 'A - 273.15' wrote January alone without a word)."""
    err, res = await call(
        client,
        "raster_calc",
        expression="A - 273.15",
        inputs={"A": 'NETCDF:"raster/tas_rectilinear_grid_2D.nc":tas'},
        output="out/tas_c.tif",
    )
    assert not err, res
    assert any("band 1 of each was read" in w and "cube_aggregate" in w for w in res["warnings"]), res["warnings"]
