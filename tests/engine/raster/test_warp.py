"""reproject (gdalwarp): grids as gdalwarp chooses them, pixels, options, errors."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
from pyproj import Transformer

from gdal_mcp.engine.raster.warp import reproject
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")


def test_grid_matches_rasterio_default_and_keeps_full_extent(tmp_path) -> None:
    s, _ = reproject(RGB, str(tmp_path / "w.tif"), dst_crs="EPSG:4326")
    assert (s.width, s.height, s.crs, s.nodata) == (835, 696, "EPSG:4326", 0.0)
    # The whole source footprint (edges densified, computed independently with pyproj) lies inside the output.
    t = Transformer.from_crs(32618, 4326, always_xy=True)
    with rasterio.open(RGB) as src:
        b = src.bounds
    u = np.linspace(0, 1, 101)
    ex = np.concatenate(
        [b.left + u * (b.right - b.left), b.left + u * (b.right - b.left), np.full(101, b.left), np.full(101, b.right)]
    )
    ey = np.concatenate(
        [np.full(101, b.top), np.full(101, b.bottom), b.bottom + u * (b.top - b.bottom), b.bottom + u * (b.top - b.bottom)]
    )
    lon, lat = t.transform(ex, ey)
    px = s.resolution[0]
    assert s.bounds.left <= lon.min() + px and s.bounds.right >= lon.max() - px
    assert s.bounds.bottom <= lat.min() + px and s.bounds.top >= lat.max() - px
    assert s.bounds.left > lon.min() - px and s.bounds.top < lat.max() + px


@pytest.mark.parametrize("resampling", ["nearest", "bilinear", "cubic"])
def test_pixels_match_gdalwarp(tmp_path, resampling) -> None:
    """Against gdalwarp's exact transformer (-et 0): ours (GDAL's approximate transformer, 0.125 pixel, over blocks of
    512 x 128) is at least as close as gdalwarp's default (the same approximation over whole rows, so larger errors).
    Measured on this Landsat scene: bilinear mean |ours - exact| 0.25, gdalwarp 0.59; within 1: 95.5 % vs 90.3 %."""
    reproject(RGB, str(tmp_path / "ours.tif"), dst_crs="EPSG:4326", resampling=resampling)
    common = ["-t_srs", "EPSG:4326", "-r", resampling, "-wo", "UNIFIED_SRC_NODATA=YES"]
    gdal_cli("gdalwarp", *common, RGB, str(tmp_path / "cli.tif"))
    gdal_cli("gdalwarp", *common, "-et", "0", RGB, str(tmp_path / "exact.tif"))
    with (
        rasterio.open(tmp_path / "ours.tif") as a,
        rasterio.open(tmp_path / "cli.tif") as b,
        rasterio.open(tmp_path / "exact.tif") as e,
    ):
        assert a.shape == b.shape == e.shape and a.transform == b.transform == e.transform
        exact = e.read().astype(int)
        ours, cli = np.abs(a.read().astype(int) - exact), np.abs(b.read().astype(int) - exact)
        assert ours.mean() <= cli.mean() and (ours <= 1).mean() >= (cli <= 1).mean()
        assert (ours <= 1).mean() > (0.98 if resampling == "nearest" else 0.94)


def test_geostationary_to_wgs84_has_the_manifest_size(tmp_path) -> None:
    s, _ = reproject(str(DATA / "raster" / "goes.tif"), str(tmp_path / "g.tif"), dst_crs="4326")
    assert (s.width, s.height) == (602, 475)


def test_resolution_tap_bbox_and_size(tmp_path) -> None:
    s, _ = reproject(RGB, str(tmp_path / "a.tif"), dst_crs="EPSG:3857", resolution=500, target_aligned_pixels=True)
    assert s.resolution == (500, 500)
    assert s.bounds.left % 500 == 0 and s.bounds.top % 500 == 0
    s, _ = reproject(RGB, str(tmp_path / "b.tif"), dst_crs="EPSG:4326", bbox=(-78, 24, -77, 25), size=[100, 50])
    assert (s.width, s.height) == (100, 50) and s.bounds.left == -78 and s.bounds.top == 25
    s, _ = reproject(
        RGB,
        str(tmp_path / "c.tif"),
        dst_crs="EPSG:4326",
        bbox=(200000, 2650000, 300000, 2750000),
        bbox_crs="EPSG:32618",
        resolution=0.01,
    )
    assert s.resolution == (0.01, 0.01) and -78.2 < s.bounds.left < -77.8


def test_nearest_preserves_values_and_nodata(tmp_path) -> None:
    reproject(RGB, str(tmp_path / "n.tif"), dst_crs="EPSG:32617", nodata=0)
    with rasterio.open(RGB) as src, rasterio.open(tmp_path / "n.tif") as out:
        assert set(np.unique(out.read(1))) <= set(np.unique(src.read(1)))
        assert out.nodata == 0


def test_src_crs_override_and_missing_crs(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        reproject(str(DATA / "raster" / "float_nan.tif"), str(tmp_path / "x.tif"), dst_crs="EPSG:4326")
    assert e.value.code == "invalid-argument" and "src_crs" in e.value.message
    s, w = reproject(str(DATA / "raster" / "float_nan.tif"), str(tmp_path / "y.tif"), dst_crs="EPSG:4326", src_crs="EPSG:3857")
    assert s.crs == "EPSG:4326" and s.nodata == "nan" and not w


@pytest.mark.parametrize(
    "kwargs",
    [
        {"resolution": 0.01, "size": [10, 10]},
        {"target_aligned_pixels": True},
        {"resampling": "nearestish"},
        {"dst_crs": "EPSG:99999999"},
        {"resolution": -1},
        {"size": [0, 5]},
    ],
)
def test_bad_arguments(tmp_path, kwargs) -> None:
    args = {"dst_crs": "EPSG:4326", **kwargs}
    with pytest.raises(GdalMcpError) as e:
        reproject(RGB, str(tmp_path / "bad.tif"), **args)
    assert e.value.code == "invalid-argument"


def test_cog_output(tmp_path) -> None:
    from gdal_mcp.engine.raster.cog import cog_check

    reproject(RGB, str(tmp_path / "c.tif"), dst_crs="EPSG:3857", format="COG")
    assert [p.name for p in tmp_path.iterdir()] == ["c.tif"]
    with rasterio.open(tmp_path / "c.tif") as ds:
        assert cog_check(ds)[0] == [] and ds.crs.to_epsg() == 3857


# ----- GCPs and RPCs (a copy of RGB.byte.tif georeferenced by GCPs only; an RPC-only image) ---------------------
def _same_as_cli(ours, cli, *, tolerance: int = 1, share: float = 0.995) -> None:
    with rasterio.open(ours) as a, rasterio.open(cli) as b:
        assert a.crs == b.crs and (a.width, a.height) == (b.width, b.height)
        assert a.transform.almost_equals(b.transform, precision=1e-6 * max(abs(b.transform.c), 1))
        diff = np.abs(a.read().astype(int) - b.read().astype(int))
        assert (diff <= tolerance).mean() >= share


@pytest.mark.parametrize(
    ("transformer", "cli_args", "bend"),
    [
        (None, [], 0.0),
        ("polynomial_1", ["-order", "1"], 0.0),
        ("polynomial_2", ["-order", "2"], 3000.0),
        ("tps", ["-tps"], 3000.0),
    ],
)
def test_gcp_source_lands_where_gdalwarp_does(tmp_path, transformer, cli_args, bend) -> None:
    from tests.engine.raster.gcp_rasters import gcp_copy

    src = gcp_copy(tmp_path / "gcp.tif", bend=bend)
    s, w = reproject(str(src), str(tmp_path / "ours.tif"), dst_crs="EPSG:32618", gcp_transformer=transformer)
    gdal_cli("gdalwarp", *cli_args, "-t_srs", "EPSG:32618", str(src), str(tmp_path / "cli.tif"))
    _same_as_cli(tmp_path / "ours.tif", tmp_path / "cli.tif")
    assert s.crs == "EPSG:32618"
    if bend == 0.0:  # the GCPs are exact: the grid is (nearly) the original one, not pixel coordinates 0..N
        with rasterio.open(RGB) as orig:
            assert s.bounds.left == pytest.approx(orig.bounds.left, abs=2 * 300)
            assert s.bounds.top == pytest.approx(orig.bounds.top, abs=2 * 300)


def test_gcp_source_without_dst_crs_stays_in_the_gcp_crs(tmp_path) -> None:
    from tests.engine.raster.gcp_rasters import gcp_copy

    src = gcp_copy(tmp_path / "gcp.tif")
    s, _ = reproject(str(src), str(tmp_path / "ours.tif"))
    gdal_cli("gdalwarp", str(src), str(tmp_path / "cli.tif"))
    _same_as_cli(tmp_path / "ours.tif", tmp_path / "cli.tif")
    assert s.crs == "EPSG:32618"


def test_rpc_source_lands_where_gdalwarp_rpc_does(tmp_path) -> None:
    from tests.engine.raster.gcp_rasters import rpc_raster

    src = rpc_raster(tmp_path / "rpc.tif")
    with rasterio.open(src) as ds:
        assert ds.nodata is None
        values = set(np.unique(ds.read()).tolist())
    s, _ = reproject(str(src), str(tmp_path / "ours.tif"), dst_crs="EPSG:4326")
    # The margins are declared nodata with a value no source pixel holds; gdalwarp told that -dstnodata says which.
    assert s.nodata is not None and s.nodata not in values
    nd = f"{s.nodata:g}"
    gdal_cli("gdalwarp", "-rpc", "-t_srs", "EPSG:4326", "-dstnodata", nd, str(src), str(tmp_path / "cli.tif"))
    _same_as_cli(tmp_path / "ours.tif", tmp_path / "cli.tif")
    assert 9.85 < s.bounds.left < 9.95 and 45.05 < s.bounds.top < 45.12
    s, _ = reproject(str(src), str(tmp_path / "utm.tif"), dst_crs="EPSG:32632", gcp_transformer="rpc")
    gdal_cli("gdalwarp", "-rpc", "-t_srs", "EPSG:32632", "-dstnodata", nd, str(src), str(tmp_path / "cli_utm.tif"))
    _same_as_cli(tmp_path / "utm.tif", tmp_path / "cli_utm.tif")


def test_gcp_transformer_the_input_cannot_use(tmp_path) -> None:
    from tests.engine.raster.gcp_rasters import gcp_copy

    with pytest.raises(GdalMcpError) as e:
        reproject(RGB, str(tmp_path / "x.tif"), dst_crs="EPSG:4326", gcp_transformer="rpc")
    assert e.value.code == "invalid-argument" and "RPC" in e.value.message
    src = gcp_copy(tmp_path / "gcp.tif", n=2)  # 4 GCPs: enough for order 1 only
    with pytest.raises(GdalMcpError) as e:
        reproject(str(src), str(tmp_path / "y.tif"), dst_crs="EPSG:4326", gcp_transformer="polynomial_2")
    assert e.value.code == "invalid-argument" and "6 GCPs" in e.value.message


# ----- margins without nodata, like=, src_nodata, output_type, the grid guard -------------------------------------
def test_margins_without_nodata_are_warned_about(tmp_path) -> None:
    with rasterio.open(RGB) as src:
        profile = {**src.profile, "nodata": None}
        data = src.read()
    plain = tmp_path / "plain.tif"
    with rasterio.open(plain, "w", **profile) as out:
        out.write(data)
    _, w = reproject(str(plain), str(tmp_path / "a.tif"), dst_crs="EPSG:4326")
    assert any("nodata=" in x for x in w), w
    _, w = reproject(str(plain), str(tmp_path / "b.tif"), dst_crs="EPSG:4326", nodata=0)
    assert not any("nodata=" in x for x in w)
    # Inside the source footprint there is no margin, hence no warning.
    _, w = reproject(str(plain), str(tmp_path / "c.tif"), dst_crs="EPSG:32618", bbox=(150000, 2650000, 200000, 2700000))
    assert not any("nodata=" in x for x in w), w


def test_like_copies_the_template_grid_as_gdalwarp_te_ts(tmp_path) -> None:
    ref = tmp_path / "ref.tif"
    reproject(RGB, str(ref), dst_crs="EPSG:3857", resolution=[700, 500], bbox=(-8700000, 2800000, -8600000, 2900000))
    s, _ = reproject(RGB, str(tmp_path / "ours.tif"), like=str(ref), resampling="bilinear")
    with rasterio.open(ref) as r:
        b = r.bounds
        gdal_cli(
            "gdalwarp",
            "-t_srs",
            "EPSG:3857",
            "-te",
            *map(str, (b.left, b.bottom, b.right, b.top)),
            "-ts",
            str(r.width),
            str(r.height),
            "-r",
            "bilinear",
            RGB,
            str(tmp_path / "cli.tif"),
        )
        assert (s.width, s.height) == (r.width, r.height) and s.crs == "EPSG:3857"
    _same_as_cli(tmp_path / "ours.tif", tmp_path / "cli.tif")


def test_resample_in_the_source_crs_with_src_nodata_and_output_type(tmp_path) -> None:
    s, _ = reproject(
        RGB, str(tmp_path / "ours.tif"), resolution=600, resampling="average", src_nodata=255, output_type="Float32", nodata=-1
    )
    gdal_cli(
        "gdalwarp",
        "-tr",
        "600",
        "600",
        "-r",
        "average",
        "-srcnodata",
        "255",
        "-dstnodata",
        "-1",
        "-ot",
        "Float32",
        RGB,
        str(tmp_path / "cli.tif"),
    )
    assert (s.crs, s.dtype, s.nodata) == ("EPSG:32618", "float32", -1.0)
    with rasterio.open(tmp_path / "ours.tif") as a, rasterio.open(tmp_path / "cli.tif") as b:
        assert a.transform.almost_equals(b.transform) and a.shape == b.shape
        assert np.allclose(a.read(), b.read(), atol=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"like": "REF", "resolution": 10}, "like"),
        ({}, "dst_crs"),
        ({"dst_crs": "EPSG:4326", "resolution": 10}, "degrees"),
        ({"dst_crs": "EPSG:3857", "resolution": 1, "max_pixels": 10**6}, "--max-pixels"),
    ],
)
def test_grid_arguments_refused_with_what_to_do(tmp_path, kwargs, words) -> None:
    if kwargs.get("like") == "REF":
        kwargs = {**kwargs, "like": RGB}
    with pytest.raises(GdalMcpError) as e:
        reproject(RGB, str(tmp_path / "x.tif"), **kwargs)
    assert e.value.code == "invalid-argument" and words in e.value.message, e.value.message


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_a_64_bit_integer_output_declares_its_nodata_exactly(tmp_path, dtype) -> None:
    """Silent data loss regression: rasterio declares a 64-bit integer band's nodata through a double, and GDAL read
    -9.2e18 back as -9 (2^64 - 1 as 1): the margins were not nodata, and every data pixel of -9 or 1 was. The margin
    value of a 64-bit output is one a float holds, declared with GDAL's Int64/UInt64 setters; checked with Debian's
    gdalinfo (another GDAL) and raster_edit setting it again."""
    from rasterio.transform import from_origin

    from gdal_mcp.engine.raster.edit import edit
    from tests.cli_reference import gdalinfo_json

    src = tmp_path / "src.tif"
    values = (np.arange(40000).reshape(200, 200) % 50).astype(dtype)  # 1 and (int64) 0..49 are data
    with rasterio.open(
        src, "w", driver="GTiff", width=200, height=200, count=1, dtype=dtype, crs="EPSG:32618",
        transform=from_origin(300000, 3000000, 90, 90),
    ) as ds:  # fmt: skip
        ds.write(values, 1)
    out = tmp_path / "out.tif"
    summary, _ = reproject(str(src), str(out), dst_crs="EPSG:4326")
    declared = gdalinfo_json(str(out))["bands"][0]["noDataValue"]
    expected = -(2**63) if dtype == "int64" else 2**64 - 2048
    assert int(declared) == expected and summary.nodata == float(expected)
    with rasterio.open(out) as ds:
        pixels = ds.read(1)
    margins = pixels == np.array(expected, dtype=dtype)
    assert 0.01 < margins.mean() < 0.5  # the margins hold it, and only they: the data keep their 1s
    assert (pixels[~margins] == 1).sum() > 0 and set(np.unique(pixels[~margins]).tolist()) <= set(range(50))
    edit(str(out), nodata=float(2**62))
    assert int(gdalinfo_json(str(out))["bands"][0]["noDataValue"]) == 2**62


def test_a_resolution_in_the_wrong_units_is_measured_against_the_area(tmp_path) -> None:
    """Model-facing defect (an agent-style run): resolution=300 on EPSG:4326 said "the area is about 300 x 300
    degrees, so about 0.3 degrees gives ~1000 pixels", and 0.3 then made an 8x7 raster without a word. The hint
    now gives the area's real size (pyproj's transform of the input's bounds as the reference) and a resolution
    that fits it; a resolution 100 times coarser than the input's detail is warned about, a moderate one is not."""
    import re

    from pyproj import Transformer

    with rasterio.open(RGB) as ds:
        b, crs = ds.bounds, ds.crs
    left, bottom, right, top = Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform_bounds(*b)
    with pytest.raises(GdalMcpError) as e:
        reproject(RGB, str(tmp_path / "a.tif"), dst_crs="EPSG:4326", resolution=300)
    area = [float(v) for v in re.search(r"area is about ([\d.]+) x ([\d.]+) degrees", e.value.message).groups()]
    assert area == pytest.approx([right - left, top - bottom], rel=0.02), e.value.message
    suggested = float(re.search(r"so about ([\d.e-]+) degrees gives", e.value.message).group(1))
    assert suggested == pytest.approx(min(area) / 1000, rel=0.01)
    summary, warnings = reproject(RGB, str(tmp_path / "b.tif"), dst_crs="EPSG:4326", resolution=0.3)
    assert (summary.width, summary.height) == (8, 7)
    assert any("8x7 pixels" in w and "coarse" in w and "degrees" in w for w in warnings), warnings
    _, warnings = reproject(RGB, str(tmp_path / "c.tif"), dst_crs="EPSG:4326", resolution=0.01)
    assert not any("coarse" in w for w in warnings), warnings
