"""What the fuzzer found, pinned down at the engine: each corrupt input fails with a stable code (never an
unexpected exception), and rasters whose bands mix data types (valid, yet refused by a multi-band rasterio
read) are read. The inputs are the test data with one field changed, as tests/fuzz/mutate.py does."""

from __future__ import annotations

import math
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import pyogrio
import pytest
import rasterio

from gdal_mcp.engine.catalog import list_datasets
from gdal_mcp.engine.preview.raster import raster_preview
from gdal_mcp.engine.preview.vector import vector_preview
from gdal_mcp.engine.raster.info import raster_info
from gdal_mcp.engine.raster.sample import sample
from gdal_mcp.engine.raster.stats import raster_stats
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.jobs import RasterInfoJob, VectorInfoJob
from tests.fuzz.mutate import DATA, _shp, _tiff, netcdf_classic, slope_vrt


def _quiet_open(path: Path | str) -> rasterio.io.DatasetReader:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rasterio.open(path)


def _tiff_entry(raw: bytes, tag: int) -> tuple[int, int]:
    """(position of the entry, offset of its data) of a TIFF tag."""
    entry = next(e for e in _tiff(raw)[2] if e.tag == tag)
    return entry.pos, entry.data_offset()


def test_bands_of_different_types_are_read_together(tmp_path: Path) -> None:
    shutil.copy(DATA / "raster" / "slope.tif", tmp_path)
    vrt = tmp_path / "slope.vrt"
    vrt.write_bytes(slope_vrt())  # band 1 Float32 (slope.tif), band 2 Float64 (scaled window of it)
    with _quiet_open(vrt) as ds:
        assert ds.dtypes == ("float32", "float64")
        with pytest.raises(ValueError, match="more than one 'dtype'"):
            ds.read([1, 2])
        refs = [ds.read(b, masked=True).astype("float64") for b in (1, 2)]  # one band at a time: the reference
        row, col = 40, 30
        x, y = ds.xy(row, col)
    stats = raster_stats(str(vrt)).bands
    for got, ref in zip(stats, refs, strict=True):
        assert got.valid_count == int(ref.count())
        assert math.isclose(got.mean, float(ref.mean()), rel_tol=1e-9)
        assert (got.min, got.max) == (float(ref.min()), float(ref.max()))
    info = raster_info(str(vrt), stats=True)
    assert [round(b.statistics.mean, 6) for b in info.bands] == [round(float(r.mean()), 6) for r in refs]
    point = sample(str(vrt), [(x, y)]).points[0]
    assert (point.row, point.col) == (row, col)
    assert point.values == [float(r[row, col]) for r in refs]
    png = raster_preview(str(vrt), bands=[1, 2, 1]).png
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("scale", "code", "where"),
    [
        (math.nan, "gdal-error", "open"),  # NaN coordinates cannot even be written as JSON numbers
        (1e308, "gdal-error", "open"),  # the far corner overflows to infinity
        (5e-324, "invalid-argument", "sample"),  # finite, but the inverse overflows: points cannot be placed
    ],
)
def test_a_geotransform_that_gives_no_finite_coordinates(tmp_path: Path, scale: float, code: str, where: str) -> None:
    raw = bytearray((DATA / "raster" / "RGB.byte.tif").read_bytes())
    _, at = _tiff_entry(bytes(raw), 33550)  # ModelPixelScale: x, y, z doubles
    raw[at : at + 8] = struct.pack("<d", scale)
    path = tmp_path / "bad.tif"
    path.write_bytes(raw)
    with _quiet_open(path) as ds:
        assert ds.transform.a == scale or (math.isnan(scale) and math.isnan(ds.transform.a))
        centre = ds.xy(ds.height // 2, 10)
    with pytest.raises(GdalMcpError) as e:
        if where == "open":
            raster_info(str(path))
        else:
            sample(str(path), [centre])
    assert e.value.code == code
    assert ("bad.tif" in e.value.message) == (where == "open") and "geotransform" in e.value.message
    if where == "sample":
        assert raster_stats(str(path)).bands[0].valid_count > 0  # the pixels themselves still read


def test_crs_text_that_is_not_utf8(tmp_path: Path) -> None:
    raw = bytearray((DATA / "raster" / "rgb1.tif").read_bytes())
    pos, at = _tiff_entry(bytes(raw), 34737)  # GeoAsciiParams: the CRS names, 'UTM Zone 18, Northern …|GCS …'
    assert raw[at : at + 4] == b"UTM "
    raw[at : at + 1] = b"\xff"
    path = tmp_path / "rgb1.tif"
    path.write_bytes(raw)
    with pytest.raises(UnicodeDecodeError):
        _quiet_open(path)  # rasterio itself fails to decode the CRS name
    with pytest.raises(GdalMcpError) as e:
        raster_info(str(path))
    assert e.value.code == "gdal-error" and "utf-8" in e.value.message


def test_a_geopackage_page_that_breaks_mid_layer(tmp_path: Path) -> None:
    raw = bytearray((DATA / "vector" / "line_zm.gpkg").read_bytes())
    page_size = int.from_bytes(raw[16:18], "big")
    raw[16 * page_size : 17 * page_size] = bytes(page_size)  # page 17 holds the layer's features
    path = tmp_path / "line_zm.gpkg"
    path.write_bytes(raw)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        sqlite3.connect(path).execute("PRAGMA integrity_check").fetchall()
    with pytest.raises(Exception, match="malformed"):
        pyogrio.read_dataframe(path)
    with pytest.raises(GdalMcpError) as e:
        vector_preview(str(path))
    assert e.value.code == "gdal-error" and "malformed" in e.value.message and "line_zm.gpkg" in e.value.message


def test_a_ring_that_does_not_close(tmp_path: Path) -> None:
    raw = bytearray((DATA / "vector" / "polygons.shp").read_bytes())
    first = next(f for f in _shp(bytes(raw)) if f.label == "rec0.coord0")  # x of the ring's first point
    raw[first.offset : first.offset + 8] = struct.pack("<d", struct.unpack("<d", raw[first.offset : first.offset + 8])[0] + 1000)
    for ext in ("shx", "dbf", "prj"):
        shutil.copy(DATA / "vector" / f"polygons.{ext}", tmp_path)
    path = tmp_path / "polygons.shp"
    path.write_bytes(raw)
    import shapely

    with pytest.raises(shapely.errors.GEOSException, match="closed linestring"):
        shapely.from_wkb(pyogrio.raw.read(path)[2])
    with pytest.raises(GdalMcpError) as e:
        vector_preview(str(path))
    assert e.value.code == "gdal-error" and "closed linestring" in e.value.message


#: what distributed sets in its parent process's environment when it starts a LocalCluster
DASK_SPAWN_ENV = ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


#: (label, value, address-space limit, whether the netCDF library bundled with rasterio 1.5 / GDAL 3.12 still dies on it
#: in a process of its own): the oversized variable count crashed rasterio 1.4's libnetcdf under a 4 GiB limit and is
#: refused cleanly by rasterio 1.5's; the dimension count still crashes it. The guard must hold for both.
NETCDF_HAZARDS = [("vars.count", 0x04000004, 4 << 30, False), ("dims.count", 536870912, -1, True)]


@pytest.mark.parametrize(("label", "value", "limit", "crashes"), NETCDF_HAZARDS)
def test_a_netcdf_header_that_would_crash_the_netcdf_library(
    tmp_path: Path, label: str, value: int, limit: int, crashes: bool
) -> None:
    raw, fields = netcdf_classic(1)
    good = tmp_path / "good.nc"
    good.write_bytes(raw)
    field = next(f for f in fields if f.label == label)
    bad = tmp_path / "grid.nc"
    bad.write_bytes(raw[: field.offset] + value.to_bytes(4, "big") + raw[field.offset + 4 :])
    # The hazard, in a process of its own: libnetcdf sizes its tables from the count and dies (SIGSEGV) when
    # the allocation fails under a worker's 4 GiB address-space limit (vars), or later when it succeeds (dims).
    crash = (
        "import resource, sys, rasterio\n"
        "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), resource.RLIM_INFINITY))\n"
        "try:\n    rasterio.open(sys.argv[1])\nexcept Exception:\n    pass\n"
    )
    # Without the variables a Dask LocalCluster leaves in this test process's environment (tests/execution/test_dask.py
    # runs first): with OMP_NUM_THREADS=1 fewer thread stacks take address space, the allocation succeeds, no crash.
    env = {k: v for k, v in os.environ.items() if k not in DASK_SPAWN_ENV}
    died = subprocess.run([sys.executable, "-c", crash, str(bad), str(limit)], capture_output=True, timeout=120, env=env)
    assert died.returncode == (-signal.SIGSEGV if crashes else 0), died.stderr[-500:]
    with pytest.raises(GdalMcpError) as e:
        raster_info(str(bad))
    assert e.value.code == "gdal-error" and str(bad) in e.value.message and f"{value}" in e.value.message
    assert raster_info(str(good)).width == 8 and raster_info(f'NETCDF:"{good}":elev').height == 6
    entries = {Path(x.path).name: x for x in list_datasets(str(tmp_path)).entries}
    assert (entries["grid.nc"].kind, entries["good.nc"].kind) == ("other", "raster")
    assert "not a valid netCDF file" in (entries["grid.nc"].detail or "")


@pytest.mark.parametrize(
    ("job", "message", "expected"),
    [
        (RasterInfoJob(path="/w/c/x.tif"), "TIFFReadDirectory: bad", "/w/c/x.tif: TIFFReadDirectory: bad"),
        (RasterInfoJob(path="/w/c/x.tif"), "GDAL cannot open /w/c/x.tif: bad", "GDAL cannot open /w/c/x.tif: bad"),
        (RasterInfoJob(path='NETCDF:"/w/c/g.nc":elev'), "g.nc: bad header", "g.nc: bad header"),
        (RasterInfoJob(path='HDF5:"/w/c/t.h5"://data'), "the data is bad", 'HDF5:"/w/c/t.h5"://data: the data is bad'),
        (VectorInfoJob(path="/vsizip//w/c/box.zip/box.shp"), "box.zip: bad", "box.zip: bad"),
        (VectorInfoJob(path="/vsizip//w/c/box.zip/box.shp"), "timed out", "/vsizip//w/c/box.zip/box.shp: timed out"),
        (VectorInfoJob(path="/vsizip//w/c/box.zip/box.shp"), "box.shp: bad", "/vsizip//w/c/box.zip/box.shp: box.shp: bad"),
    ],
)
def test_failures_name_the_file(job: RasterInfoJob | VectorInfoJob, message: str, expected: str) -> None:
    assert job.naming_input(message) == expected
