"""raster_info engine against the verified facts of tests/data/MANIFEST.md."""

from __future__ import annotations

import pytest
import rasterio

from gdal_mcp.engine.raster.info import raster_info
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdalinfo_json, validate_cog
from tests.helpers import DATA

R = DATA / "raster"


def test_rgb_byte_structure() -> None:
    info = raster_info(str(R / "RGB.byte.tif"))
    assert (info.driver, info.width, info.height, info.count) == ("GTiff", 791, 718, 3)
    assert info.crs.epsg == 32618
    assert info.transform == pytest.approx([101985.0, 300.0379266750948, 0, 2826915.0, 0, -300.041782729805])
    assert [b.nodata for b in info.bands] == [0.0, 0.0, 0.0]
    assert [b.color_interp for b in info.bands] == ["red", "green", "blue"]
    assert info.bounds_wgs84 is not None and -79 < info.bounds_wgs84.left < -78.9
    assert not info.is_cog and any("IFD" in i for i in info.cog_issues)
    assert any("STATISTICS_" in w for w in info.warnings)


def test_exact_stats_not_the_stale_stored_ones() -> None:
    info = raster_info(str(R / "RGB.byte.tif"), stats=True)
    s = [b.statistics for b in info.bands]
    assert [x.min for x in s] == [1, 1, 1] and [x.max for x in s] == [255, 255, 255]
    assert [round(x.mean, 4) for x in s] == [44.4345, 66.0220, 71.3932]
    assert [round(x.valid_percent, 2) for x in s] == [67.40, 67.43, 67.39]
    # The file embeds STATISTICS_MEAN=29.948 for band 1; we must not report it.
    with rasterio.open(R / "RGB.byte.tif") as ds:
        assert float(ds.tags(1)["STATISTICS_MEAN"]) != pytest.approx(s[0].mean, abs=1)
    assert s[0].valid_count + s[0].nodata_count == 791 * 718


def test_stats_match_numpy_on_the_whole_array() -> None:
    info = raster_info(str(R / "slope.tif"), stats=True)
    with rasterio.open(R / "slope.tif") as ds:
        a = ds.read(1, masked=True).compressed().astype("float64")
    st = info.bands[0].statistics
    assert st.mean == pytest.approx(a.mean()) and st.std == pytest.approx(a.std())
    assert st.sum == pytest.approx(a.sum()) and st.valid_count == a.size
    assert round(st.mean, 3) == 56.813 and round(st.valid_percent, 2) == 95.12
    assert info.crs.epsg is None, "custom Albers must not be matched to an unrelated EPSG code"


def test_float_nan_nodata_south_up() -> None:
    info = raster_info(str(R / "float_nan.tif"), stats=True)
    b = info.bands[0]
    assert b.nodata == "nan" and info.crs is None
    assert info.transform == [0, 100, 0, 0, 0, 100]
    assert (round(b.statistics.min, 2), round(b.statistics.max, 2)) == (-1.88, 1.41)
    assert round(b.statistics.valid_percent, 2) == 83.33
    assert any("no CRS" in w for w in info.warnings)


def test_zipped_srtm() -> None:
    info = raster_info(f"/vsizip/{R}/N10W110.hgt.zip/N10W110.hgt", stats=True)
    assert (info.driver, info.width, info.height, info.crs.epsg) == ("SRTMHGT", 1201, 1201, 4326)
    assert info.bands[0].nodata == -32768 and info.bands[0].statistics.max == 9


def test_hdf5_container_lists_its_subdatasets_and_no_placeholder_grid() -> None:
    info = raster_info(str(R / "two-subs.h5"))
    reference = gdalinfo_json(str(R / "two-subs.h5"))
    assert reference["size"] == [512, 512] and reference["bands"] == []  # GDAL's placeholder size for a container
    assert (info.kind, info.count, info.width, info.height) == ("container", 0, None, None)
    assert (info.transform, info.bounds, info.resolution, info.bounds_wgs84) == (None, None, None, None)
    listed = reference["metadata"]["SUBDATASETS"]
    assert [(s.path, s.description) for s in info.subdatasets] == [
        (listed[f"SUBDATASET_{n}_NAME"], listed[f"SUBDATASET_{n}_DESC"]) for n in (1, 2)
    ]
    assert info.subdatasets[0].path.endswith("://data") and "3x3" in (info.subdatasets[0].description or "")
    assert not info.is_cog and "container" in info.cog_issues[0] and info.cog_note is None
    sub = raster_info(info.subdatasets[0].path)
    assert (sub.kind, sub.width, sub.height, sub.bands[0].dtype) == ("raster", 3, 3, "float64")


def test_netcdf_container_of_two_variables(tmp_path) -> None:
    from tests.engine.raster.multidim_rasters import climate_netcdf

    nc = climate_netcdf(tmp_path / "climate.nc")
    info = raster_info(str(nc))
    reference = gdalinfo_json(str(nc))
    listed = reference["metadata"]["SUBDATASETS"]
    assert info.kind == "container" and reference["bands"] == []
    assert [(s.path, s.description) for s in info.subdatasets] == [
        (listed[f"SUBDATASET_{n}_NAME"], listed[f"SUBDATASET_{n}_DESC"]) for n in (1, 2)
    ]
    assert [s.description for s in info.subdatasets] == [
        "[3x4] pr (32-bit floating-point)",
        "[2x2x3x4] ta (32-bit floating-point)",
    ]
    assert (info.width, info.height, info.transform, info.bounds) == (None, None, None, None)
    ta = raster_info(info.subdatasets[1].path)
    assert (ta.kind, ta.width, ta.height, ta.count) == ("raster", 4, 3, 4)
    assert ta.transform == pytest.approx(reference_transform(info.subdatasets[1].path))
    with_stats = raster_info(str(nc), stats=True)
    assert any("open one of the subdatasets" in w for w in with_stats.warnings)


def reference_transform(name: str) -> list[float]:
    return gdalinfo_json(name)["geoTransform"]


def test_stale_statistics_warning_only_without_fresh_ones() -> None:
    stale = "STATISTICS_* metadata, which may be stale"
    assert any(stale in w for w in raster_info(str(R / "RGB.byte.tif")).warnings)
    fresh = raster_info(str(R / "RGB.byte.tif"), stats=True)
    assert fresh.bands[0].statistics is not None and not any(stale in w for w in fresh.warnings)
    assert not any(stale in w for w in raster_info(str(R / "slope.tif")).warnings)  # stores none


def _gtiff(path, width: int, height: int, **profile) -> str:
    import numpy as np
    from rasterio.transform import from_origin

    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=width,
        height=height,
        count=1,
        dtype="uint8",
        crs="EPSG:4326",
        transform=from_origin(0, 10, 0.01, 0.01),
        **profile,
    ) as d:
        d.write(np.arange(width * height, dtype="uint64").reshape(1, height, width).astype("uint8"))
    return str(path)


@pytest.mark.parametrize(
    "width,height,profile,valid,note",
    [
        (300, 200, {}, True, "within 512x512"),  # small, untiled, no overviews: valid as it is
        (500, 512, {"tiled": True, "blockxsize": 256, "blockysize": 256}, True, "without overviews"),
        (900, 700, {}, True, "strips up to 1024 px"),  # larger but stripped at most 1024 px wide: accepted
        (1100, 20, {}, False, None),  # wider than 1024 and untiled: not a COG
    ],
)
def test_cog_validity_says_why_tiles_or_overviews_are_not_needed(tmp_path, width, height, profile, valid, note) -> None:
    path = _gtiff(tmp_path / "c.tif", width, height, **profile)
    info = raster_info(path)
    reference_valid, report = validate_cog(path)
    assert info.is_cog == reference_valid == valid, report
    if note is None:
        assert info.cog_note is None and any("not tiled" in i for i in info.cog_issues)
    else:
        assert info.cog_note is not None and note in info.cog_note
        assert "validate_cloud_optimized_geotiff" in info.cog_note
    assert info.tiled == bool(profile.get("tiled"))


def test_png_and_jpeg_georeferenced_by_sidecars() -> None:
    png = raster_info(str(R / "gadas-export.png"))
    assert (png.width, png.height, png.count) == (968, 475, 4)
    assert png.transform[0] == pytest.approx(7698736.858, abs=1e-3)
    assert png.transform[3] == pytest.approx(1325082.668, abs=1e-3)
    jpg = raster_info(str(R / "demo.jpg"))
    assert (jpg.width, jpg.height, jpg.crs.epsg) == (970, 472, 4326)
    assert jpg.transform == pytest.approx([69.1589, 0.021938, 0, 11.8187, 0, -0.021938], abs=1e-4)


def test_geostationary_has_no_wgs84_bounds_but_a_warning() -> None:
    info = raster_info(str(R / "goes.tif"))
    assert info.crs.proj4 and "+proj=geos" in info.crs.proj4
    assert info.bounds_wgs84 is None and any("WGS84" in w for w in info.warnings)


def test_esri_wkt_and_tiles_without_epsg() -> None:
    esri = raster_info(str(R / "test_esri_wkt.tif"), stats=True)
    assert esri.crs.epsg is None and "Albers" in esri.crs.name
    assert (esri.bands[0].statistics.min, esri.bands[0].statistics.max) == (1, 4)
    tile = raster_info(str(R / "rgb1.tif"))
    assert (tile.width, tile.height, tile.crs.epsg) == (400, 400, None)


def test_band_selection_and_errors() -> None:
    info = raster_info(str(R / "RGB.byte.tif"), band=2)
    assert [b.index for b in info.bands] == [2]
    with pytest.raises(GdalMcpError) as e:
        raster_info(str(R / "RGB.byte.tif"), band=4)
    assert e.value.code == "invalid-argument"


def test_bad_inputs_have_clear_codes(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        raster_info(str(DATA / "bad" / "corrupt.tif"), stats=True)
    assert e.value.code == "gdal-error"
    truncated = tmp_path / "t.tif"
    truncated.write_bytes((R / "RGB.byte.tif").read_bytes()[:500000])
    with pytest.raises(GdalMcpError) as e:
        raster_info(str(truncated))
    assert e.value.code == "gdal-error" and "TIFFReadDirectory" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        raster_info(str(DATA / "vector" / "trio.geojson"))
    assert e.value.code == "unsupported" and "vector_info" in e.value.message


def test_corrupt_file_metadata_still_reads() -> None:
    info = raster_info(str(DATA / "bad" / "corrupt.tif"))
    assert (info.width, info.height, info.count, info.crs.epsg) == (1024, 1024, 3, 3857)


def test_gcps_and_rpcs_are_reported_as_gdalinfo_shows_them(tmp_path) -> None:
    import shutil
    import subprocess

    from tests.engine.raster.gcp_rasters import gcp_copy, rpc_raster

    g = raster_info(str(gcp_copy(tmp_path / "g.tif", n=5)))
    r = raster_info(str(rpc_raster(tmp_path / "r.tif")))
    assert g.gcps is not None and (g.gcps.count, g.gcps.crs, g.rpc) == (25, "EPSG:32618", False)
    assert r.gcps is None and r.rpc is True
    assert not any("no CRS" in w for w in g.warnings + r.warnings)
    assert raster_info(str(R / "RGB.byte.tif")).gcps is None
    if shutil.which("gdalinfo") is None:
        pytest.skip("gdalinfo not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    out = subprocess.run(["gdalinfo", str(tmp_path / "g.tif")], capture_output=True, text=True, check=True).stdout
    assert out.count("GCP[") == g.gcps.count
    out = subprocess.run(["gdalinfo", str(tmp_path / "r.tif")], capture_output=True, text=True, check=True).stdout
    assert "RPC Metadata" in out
