"""netCDF and Zarr files with a time (and level) dimension, made inside a test.

`time_stack` writes a CF netCDF with rasterio alone (GDAL's netCDF writer turns NETCDF_DIM_EXTRA metadata into a
real time dimension and coordinate variable). `climate_netcdf` and `as_zarr` go through Debian's gdalmdimtranslate
(from a multidimensional VRT: two variables, one of them on time x level x lat x lon), so the file is written by a
GDAL other than the one under test; they skip without it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.transform import from_origin

from tests.cli_reference import gdal_cli


def time_stack(path: Path, days: list[int], *, units: str = "days since 2020-01-01", calendar: str | None = "noleap") -> Path:
    """A 5x4 Float32 netCDF on EPSG:4326 with one band per time value; band b holds the constant 10 * b."""
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.with_suffix(".src.tif")
    profile = {
        "driver": "GTiff",
        "width": 5,
        "height": 4,
        "count": len(days),
        "dtype": "float32",
        "crs": "EPSG:4326",
        "transform": from_origin(10, 50, 1, 1),
    }
    with rasterio.open(src, "w", **profile) as d:
        d.write(np.stack([np.full((4, 5), 10.0 * (b + 1), "float32") for b in range(len(days))]))
        tags = {
            "NETCDF_DIM_EXTRA": "{time}",
            "NETCDF_DIM_time_DEF": f"{{{len(days)},6}}",
            "NETCDF_DIM_time_VALUES": "{" + ",".join(str(v) for v in days) + "}",
            "time#units": units,
            "time#standard_name": "time",
        }
        if calendar is not None:
            tags["time#calendar"] = calendar
        d.update_tags(**tags)
        for b, v in enumerate(days, start=1):
            d.update_tags(b, NETCDF_DIM_time=str(v))
    rasterio.shutil.copy(src, path, driver="netCDF")
    src.unlink()
    return path


#: ta(time, level, lat, lon): band order time-major, values 1..4; pr(lat, lon) = 7
CLIMATE_VRT = """<VRTDataset>
  <Group name="/">
    <Dimension name="time" size="2" type="TEMPORAL" indexingVariable="time"/>
    <Dimension name="level" size="2" type="VERTICAL" indexingVariable="level"/>
    <Dimension name="lat" size="3" indexingVariable="lat"/>
    <Dimension name="lon" size="4" indexingVariable="lon"/>
    <Array name="time"><DataType>Float64</DataType><DimensionRef ref="time"/><InlineValues>{times}</InlineValues>
      <Attribute name="units"><DataType>String</DataType><Value>{units}</Value></Attribute>
      <Attribute name="calendar"><DataType>String</DataType><Value>{calendar}</Value></Attribute>
    </Array>
    <Array name="level"><DataType>Float64</DataType><DimensionRef ref="level"/><InlineValues>850 500</InlineValues>
      <Attribute name="units"><DataType>String</DataType><Value>hPa</Value></Attribute>
    </Array>
    <Array name="lat"><DataType>Float64</DataType><DimensionRef ref="lat"/><InlineValues>50.5 49.5 48.5</InlineValues>
      <Attribute name="units"><DataType>String</DataType><Value>degrees_north</Value></Attribute>
    </Array>
    <Array name="lon"><DataType>Float64</DataType><DimensionRef ref="lon"/><InlineValues>10.5 11.5 12.5 13.5</InlineValues>
      <Attribute name="units"><DataType>String</DataType><Value>degrees_east</Value></Attribute>
    </Array>
    <Array name="ta"><DataType>Float32</DataType>
      <DimensionRef ref="time"/><DimensionRef ref="level"/><DimensionRef ref="lat"/><DimensionRef ref="lon"/>
      <InlineValues>{ta}</InlineValues>
    </Array>
    <Array name="pr"><DataType>Float32</DataType><DimensionRef ref="lat"/><DimensionRef ref="lon"/>
      <ConstantValue>7</ConstantValue>
    </Array>
  </Group>
</VRTDataset>
"""


def climate_netcdf(path: Path, *, times: str = "0 181", units: str = "days since 2000-01-01", calendar: str = "360_day") -> Path:
    """A netCDF container of two variables (ta on time x level x lat x lon, pr on lat x lon), by gdalmdimtranslate."""
    path.parent.mkdir(parents=True, exist_ok=True)
    vrt = path.with_suffix(".mdim.vrt")
    ta = " ".join(str(v) for v in np.repeat(np.arange(1, 5), 12))
    vrt.write_text(CLIMATE_VRT.format(times=times, units=units, calendar=calendar, ta=ta))
    gdal_cli("gdalmdimtranslate", "-of", "netCDF", str(vrt), str(path))
    vrt.unlink()
    return path


def as_zarr(src: Path, path: Path) -> Path:
    """`src` rewritten as a Zarr store by gdalmdimtranslate (every array, attributes kept)."""
    gdal_cli("gdalmdimtranslate", "-of", "Zarr", str(src), str(path))
    return path
