"""convert (gdal_translate): lossless copies, COG, bands, projwin, types, nodata, scaling."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.raster.cog import cog_check
from gdal_mcp.engine.raster.convert import convert
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")


def read(path) -> tuple[np.ndarray, dict]:
    with rasterio.open(path) as ds:
        return ds.read(), ds.profile


def test_gtiff_copy_is_lossless_and_keeps_georeferencing(tmp_path) -> None:
    summary, warnings = convert(RGB, str(tmp_path / "o.tif"), options={"COMPRESS": "DEFLATE", "TILED": True})
    a, pa = read(RGB)
    b, pb = read(tmp_path / "o.tif")
    assert (a == b).all() and pb["transform"] == pa["transform"] and pb["crs"] == pa["crs"]
    assert pb["nodata"] == 0 and pb["compress"] == "deflate" and pb["tiled"]
    assert summary.crs == "EPSG:32618" and not warnings
    with rasterio.open(tmp_path / "o.tif") as ds:
        assert [c.name for c in ds.colorinterp] == ["red", "green", "blue"]
        assert "STATISTICS_MEAN" not in ds.tags(1), "stale statistics must not be copied"


def test_cog_is_valid_with_overviews(tmp_path) -> None:
    convert(RGB, str(tmp_path / "c.tif"), format="COG", options={"OVERVIEW_RESAMPLING": "AVERAGE"})
    with rasterio.open(tmp_path / "c.tif") as ds:
        assert cog_check(ds)[0] == [] and ds.overviews(1) == [2]
        assert (ds.read() == read(RGB)[0]).all()


def test_cog_from_a_subset_goes_through_staging(tmp_path) -> None:
    convert(RGB, str(tmp_path / "c.tif"), format="COG", bands=[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tif"], "staging file left behind"
    with rasterio.open(tmp_path / "c.tif") as ds:
        assert ds.count == 1 and cog_check(ds)[0] == []


def test_bands_and_projwin(tmp_path) -> None:
    box = (175000.0, 2700000.0, 250000.0, 2750000.0)
    convert(RGB, str(tmp_path / "p.tif"), bands=[3, 1], projwin=box)
    with rasterio.open(RGB) as src, rasterio.open(tmp_path / "p.tif") as out:
        col0, row0 = ~src.transform * (box[0], box[3])
        c, r = int(np.floor(col0 + 0.001)), int(np.floor(row0 + 0.001))
        assert out.transform.c == pytest.approx(src.transform.c + c * src.transform.a)
        expect = src.read([3, 1], window=((r, r + out.height), (c, c + out.width)))
        assert (out.read() == expect).all()
        assert out.width == int(np.floor((box[2] - box[0]) / src.transform.a + 0.5))


def test_projwin_matches_gdal_translate(tmp_path) -> None:
    convert(RGB, str(tmp_path / "ours.tif"), projwin=(175000, 2700000, 250000, 2750000))
    gdal_cli("gdal_translate", "-projwin", "175000", "2750000", "250000", "2700000", RGB, str(tmp_path / "cli.tif"))
    a, pa = read(tmp_path / "ours.tif")
    b, pb = read(tmp_path / "cli.tif")
    assert a.shape == b.shape and pa["transform"] == pb["transform"] and (a == b).all()


def test_projwin_in_another_crs_and_outside(tmp_path) -> None:
    s, _ = convert(RGB, str(tmp_path / "ll.tif"), projwin=(-78.5, 24.0, -77.5, 25.0), projwin_crs="EPSG:4326")
    assert 300 < s.width < 400
    with pytest.raises(GdalMcpError) as e:
        convert(RGB, str(tmp_path / "x.tif"), projwin=(0, 0, 10, 10))
    assert e.value.code == "invalid-argument" and "bounds" in e.value.message


def test_output_type_scale_and_nodata(tmp_path) -> None:
    convert(RGB, str(tmp_path / "f.tif"), bands=[1], output_type="Float32", scale=[0, 255, 0, 1], nodata=-1)
    with rasterio.open(RGB) as src, rasterio.open(tmp_path / "f.tif") as out:
        a = src.read(1, masked=True)
        b = out.read(1)
        assert out.dtypes[0] == "float32" and out.nodata == -1
        assert np.allclose(b[~a.mask], a.compressed() / 255.0)
        assert (b[a.mask] == -1).all()


def test_scale_true_uses_exact_source_range(tmp_path) -> None:
    convert(str(DATA / "raster" / "slope.tif"), str(tmp_path / "s.tif"), output_type="Byte", scale=True)
    with rasterio.open(tmp_path / "s.tif") as out, rasterio.open(DATA / "raster" / "slope.tif") as src:
        valid = ~src.read(1, masked=True).mask
        b = out.read(1)[valid]
        assert b.min() == 0 and b.max() == 255


def test_int_conversion_rounds_and_clamps(tmp_path) -> None:
    convert(str(DATA / "raster" / "slope.tif"), str(tmp_path / "i.tif"), output_type="Byte")
    with rasterio.open(tmp_path / "i.tif") as out, rasterio.open(DATA / "raster" / "slope.tif") as src:
        a = src.read(1)
        b = out.read(1)
        assert (b == np.clip(np.round(a), 0, 255)).all()


def test_png_and_bad_arguments(tmp_path) -> None:
    s, _ = convert(RGB, str(tmp_path / "q.png"))
    assert s.driver == "PNG"
    for kwargs, code in [
        ({"bands": [4]}, "invalid-argument"),
        ({"output_type": "Complex64"}, "invalid-argument"),
        ({"format": "NoSuchDriver"}, "invalid-argument"),
        ({"scale": [1, 1]}, "invalid-argument"),
    ]:
        with pytest.raises(GdalMcpError) as e:
            convert(RGB, str(tmp_path / "bad.tif"), **kwargs)
        assert e.value.code == code
    with pytest.raises(GdalMcpError) as e:
        convert(RGB, str(tmp_path / "noext"))
    assert e.value.code == "invalid-argument" and "format=" in e.value.message


def test_netcdf_subdataset_and_vsizip_inputs(tmp_path) -> None:
    s, _ = convert(f'HDF5:"{DATA}/raster/two-subs.h5"://data2', str(tmp_path / "h.tif"))
    assert (s.width, s.height, s.dtype) == (3, 3, "float64")
    s, _ = convert(f"/vsizip/{DATA}/raster/N10W110.hgt.zip/N10W110.hgt", str(tmp_path / "z.tif"))
    assert (s.width, s.crs) == (1201, "EPSG:4326")


def test_cog_overview_resampling(tmp_path) -> None:
    convert(RGB, str(tmp_path / "n.tif"), format="COG", overview_resampling="nearest")
    convert(RGB, str(tmp_path / "a.tif"), format="COG", overview_resampling="average")
    with rasterio.open(tmp_path / "n.tif") as n, rasterio.open(tmp_path / "a.tif") as a, rasterio.open(RGB) as src:
        full = src.read(1)
        nearest = n.read(1, out_shape=(n.height // 2, n.width // 2))  # served from the overview
        assert set(np.unique(nearest)) <= set(np.unique(full))
        assert not np.array_equal(nearest, a.read(1, out_shape=(a.height // 2, a.width // 2)))
    _, warnings = convert(RGB, str(tmp_path / "g.tif"), overview_resampling="average")
    assert any("COG overviews only" in w for w in warnings)


def test_gcps_are_kept_as_gdal_translate_keeps_them(tmp_path) -> None:
    from tests.engine.raster.gcp_rasters import gcp_copy

    src = gcp_copy(tmp_path / "g.tif")
    convert(str(src), str(tmp_path / "ours.tif"), bands=[1], output_type="UInt16")
    convert(str(src), str(tmp_path / "half.tif"), size=[396, 359], resampling="average")
    gdal_cli("gdal_translate", "-b", "1", "-ot", "UInt16", str(src), str(tmp_path / "cli.tif"))
    gdal_cli("gdal_translate", "-outsize", "396", "359", "-r", "average", str(src), str(tmp_path / "cli_half.tif"))
    for ours, cli in (("ours.tif", "cli.tif"), ("half.tif", "cli_half.tif")):
        with rasterio.open(tmp_path / ours) as a, rasterio.open(tmp_path / cli) as b:
            (ga, ca), (gb, cb) = a.gcps, b.gcps
            assert len(ga) == len(gb) == 36 and ca == cb
            for p, q in zip(ga, gb, strict=True):
                assert (p.row, p.col, p.x, p.y) == pytest.approx((q.row, q.col, q.x, q.y), abs=1e-6)
            assert (a.read() == b.read()).all()


def test_rpcs_are_kept_and_shifted_by_a_subset(tmp_path) -> None:
    from tests.engine.raster.gcp_rasters import rpc_raster

    src = rpc_raster(tmp_path / "r.tif")
    convert(str(src), str(tmp_path / "ours.tif"), size=[100, 75], resampling="bilinear")
    gdal_cli("gdal_translate", "-outsize", "100", "75", "-r", "bilinear", str(src), str(tmp_path / "cli.tif"))
    with rasterio.open(tmp_path / "ours.tif") as a, rasterio.open(tmp_path / "cli.tif") as b:
        ra, rb = a.tags(ns="RPC"), b.tags(ns="RPC")
        for key in ("LINE_OFF", "SAMP_OFF", "LINE_SCALE", "SAMP_SCALE", "LAT_OFF", "LONG_OFF"):
            assert float(ra[key]) == pytest.approx(float(rb[key])), key


@pytest.mark.parametrize(
    ("kwargs", "cli"),
    [
        ({"resolution": 900}, ["-tr", "900", "900"]),
        ({"resolution": [450, 600], "resampling": "bilinear"}, ["-tr", "450", "600", "-r", "bilinear"]),
        ({"size": [200, 150], "resampling": "cubic"}, ["-outsize", "200", "150", "-r", "cubic"]),
        ({"size": [1582, 1436], "resampling": "nearest"}, ["-outsize", "1582", "1436"]),
        (
            {"resolution": 600, "resampling": "average", "projwin": (175000.0, 2700000.0, 250000.0, 2750000.0)},
            ["-tr", "600", "600", "-r", "average", "-projwin", "175000", "2750000", "250000", "2700000"],
        ),
    ],
)
def test_resample_without_reprojecting_matches_gdal_translate(tmp_path, kwargs, cli) -> None:
    s, _ = convert(RGB, str(tmp_path / "ours.tif"), **kwargs)
    gdal_cli("gdal_translate", *cli, RGB, str(tmp_path / "cli.tif"))
    with rasterio.open(tmp_path / "ours.tif") as a, rasterio.open(tmp_path / "cli.tif") as b:
        assert (a.width, a.height) == (b.width, b.height)
        assert a.transform.almost_equals(b.transform, precision=1e-6)
        diff = np.abs(a.read().astype(int) - b.read().astype(int))
        assert (diff <= 1).mean() > 0.999, f"{(diff > 1).sum()} pixels differ by more than 1"


@pytest.mark.parametrize("kwargs", [{"resolution": 200000}, {"size": [1, 500]}, {"resolution": 0.5}])
def test_grid_guard_names_the_units(tmp_path, kwargs) -> None:
    with pytest.raises(GdalMcpError) as e:
        convert(RGB, str(tmp_path / "x.tif"), max_pixels=10**6, **kwargs)
    assert e.value.code == "invalid-argument"
    assert "metres" in e.value.message or "2x2" in e.value.message
