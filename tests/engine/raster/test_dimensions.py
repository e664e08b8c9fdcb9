"""The time and level of each band of a netCDF/Zarr variable, in raster_info and raster_stats.

References: the raw coordinate values GDAL's command line (Debian gdal-bin, `gdalinfo -json`) reports per band,
the dates those values mean worked out by hand per calendar, and numpy on each band's pixels."""

from __future__ import annotations

from pathlib import Path

import pytest
import rasterio

from gdal_mcp.engine.raster.info import raster_info
from gdal_mcp.engine.raster.stats import raster_stats
from tests.cli_reference import gdal_cli, gdalinfo_json
from tests.engine.raster.multidim_rasters import as_zarr, climate_netcdf, time_stack

DAYS = [0, 31, 59, 181]
#: DAYS after 2020-01-01 (a leap year), counted by hand in each calendar
BY_CALENDAR = {
    "noleap": ["2020-01-01", "2020-02-01", "2020-03-01", "2020-07-01"],
    None: ["2020-01-01", "2020-02-01", "2020-02-29", "2020-06-30"],  # no calendar attribute: CF's standard
    "360_day": ["2020-01-01", "2020-02-02", "2020-02-30", "2020-07-02"],
}


@pytest.mark.parametrize("calendar", list(BY_CALENDAR))
def test_each_band_of_a_time_stack_has_its_date(tmp_path: Path, calendar: str | None) -> None:
    nc = time_stack(tmp_path / "monthly.nc", DAYS, calendar=calendar)
    info = raster_info(str(nc))
    assert [b.dimensions for b in info.bands] == [{"time": f"{d}T00:00:00"} for d in BY_CALENDAR[calendar]]
    (time,) = info.dimensions
    assert (time.name, time.units, time.values) == ("time", "days since 2020-01-01", "iso_datetime")
    assert time.calendar == (calendar or "standard")
    assert info.width == 5 and not any("decoded" in w for w in info.warnings)


def test_raster_stats_reports_the_same_dates_beside_the_statistics(tmp_path: Path) -> None:
    nc = time_stack(tmp_path / "monthly.nc", DAYS)
    stats = raster_stats(str(nc))
    info = raster_info(str(nc))
    with rasterio.open(nc) as ds:
        means = [float(ds.read(b).astype("float64").mean()) for b in range(1, ds.count + 1)]
    assert [b.mean for b in stats.bands] == pytest.approx(means)
    assert [b.dimensions for b in stats.bands] == [b.dimensions for b in info.bands]
    assert stats.dimensions == info.dimensions
    warmest = max(stats.bands, key=lambda b: b.mean or 0)
    assert warmest.dimensions == {"time": "2020-07-01T00:00:00"}  # band 4 holds 40, the largest value
    only = raster_stats(str(nc), bands=[3])
    assert [b.dimensions for b in only.bands] == [{"time": "2020-03-01T00:00:00"}]


def test_time_and_level_of_a_4d_variable_match_gdalinfo(tmp_path: Path) -> None:
    nc = climate_netcdf(tmp_path / "climate.nc")  # 360_day, days since 2000-01-01: 0 and 181
    name = f'NETCDF:"{nc}":ta'
    info = raster_info(name)
    reference = gdalinfo_json(name)
    raw = [(b["metadata"][""]["NETCDF_DIM_time"], b["metadata"][""]["NETCDF_DIM_level"]) for b in reference["bands"]]
    assert raw == [("0", "850"), ("0", "500"), ("181", "850"), ("181", "500")]
    # 181 days in 360_day: six 30-day months and one day -> 2000-07-02
    dates = {"0": "2000-01-01T00:00:00", "181": "2000-07-02T00:00:00"}
    assert [b.dimensions for b in info.bands] == [{"time": dates[t], "level": float(lv)} for t, lv in raw]
    assert [(d.name, d.units, d.calendar, d.values) for d in info.dimensions] == [
        ("time", "days since 2000-01-01", "360_day", "iso_datetime"),
        ("level", "hPa", None, "coordinate"),
    ]
    with rasterio.open(name) as ds:  # band 3 is time 181, level 850: value 3
        assert float(ds.read(3).mean()) == 3.0
    assert raster_stats(name, bands=[3]).bands[0].dimensions == {"time": "2000-07-02T00:00:00", "level": 850.0}


@pytest.mark.parametrize(
    "calendar,july", [("360_day", "2000-07-02"), ("noleap", "2000-07-01"), ("proleptic_gregorian", "2000-06-30")]
)
def test_a_zarr_band_is_dated_in_the_calendar_of_its_time_array(tmp_path: Path, calendar: str, july: str) -> None:
    # GDAL puts DIM_time_VALUE and DIM_time_UNIT on a Zarr band but not the calendar: it is read from the time array
    nc = climate_netcdf(tmp_path / "climate.nc", calendar=calendar)
    store = as_zarr(nc, tmp_path / "climate.zarr")
    info = raster_info(f'ZARR:"{store}":/ta')
    assert [b.dimensions["time"] for b in info.bands] == [f"{d}T00:00:00" for d in ("2000-01-01",) * 2 + (july,) * 2]
    assert [b.dimensions["level"] for b in info.bands] == [850.0, 500.0, 850.0, 500.0]
    assert info.dimensions[0].calendar == calendar and info.dimensions[1].units == "hPa"


def test_undecodable_times_stay_numbers_with_a_warning(tmp_path: Path) -> None:
    nc = time_stack(tmp_path / "m.nc", [0, 1, 2], units="months since 2000-01-01", calendar="standard")
    info = raster_info(str(nc))
    assert [b.dimensions for b in info.bands] == [{"time": 0.0}, {"time": 1.0}, {"time": 2.0}]
    assert info.dimensions[0].values == "coordinate"
    assert any("not decoded to dates" in w and "months" in w for w in info.warnings)


def test_an_ordinary_raster_has_no_dimensions() -> None:
    from tests.helpers import DATA

    info = raster_info(str(DATA / "raster" / "RGB.byte.tif"))
    assert info.dimensions == [] and all(b.dimensions == {} for b in info.bands)
    stats = raster_stats(str(DATA / "raster" / "float_nan.tif"))
    assert stats.dimensions == [] and all(b.dimensions == {} for b in stats.bands)


def test_a_dimension_without_coordinates_reports_positions(tmp_path: Path) -> None:
    vrt = tmp_path / "m.vrt"
    vrt.write_text(
        '<VRTDataset><Group name="/"><Dimension name="member" size="3"/><Dimension name="y" size="2"/>'
        '<Dimension name="x" size="2"/><Array name="v"><DataType>Float32</DataType><DimensionRef ref="member"/>'
        '<DimensionRef ref="y"/><DimensionRef ref="x"/><ConstantValue>1</ConstantValue></Array></Group></VRTDataset>'
    )
    nc = tmp_path / "members.nc"
    gdal_cli("gdalmdimtranslate", "-of", "netCDF", str(vrt), str(nc))
    reference = gdalinfo_json(str(nc))
    assert [b["metadata"][""]["NETCDF_DIM_member"] for b in reference["bands"]] == ["1", "2", "3"]  # GDAL counts from 1
    info = raster_info(str(nc))
    assert [b.dimensions for b in info.bands] == [{"member": 0}, {"member": 1}, {"member": 2}]
    assert [(d.name, d.units, d.values) for d in info.dimensions] == [("member", None, "index")]
