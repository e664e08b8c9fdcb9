"""raster_pipeline's engine: GDAL's `gdal raster pipeline`, step by step against the separate tools' engines and the
Debian GDAL 3.6 command-line tools, plus the plan (grids before any pixel) and the failures (nothing written).

Every step gives the separate tool's pixels, a reproject followed by steps that read windows of it (clip, resize …)
too: GDAL's warped VRT is read block by block (GDAL_VRT_WARP_USE_DATASET_RASTERIO=NO), as raster_reproject reads it,
and both fix the kernel's scale for the whole grid (XSCALE/YSCALE), so a pixel's value does not depend on which window
is read. Shown below on GDAL itself: with GDAL's defaults a window of a warp differs from the whole.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.raster.clip import clip
from gdal_mcp.engine.raster.cog import cog_check
from gdal_mcp.engine.raster.convert import convert
from gdal_mcp.engine.raster.fill import fill_nodata
from gdal_mcp.engine.raster.pipeline import plan_pipeline, run_pipeline
from gdal_mcp.engine.raster.terrain import terrain
from gdal_mcp.engine.raster.warp import reproject
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")  # UTM 18N, 3 x Byte, nodata 0
DEM = str(DATA / "raster" / "jacksboro_dem.tif")  # lon/lat, Int16, no nodata


def read(path) -> tuple[np.ndarray, dict]:
    with rasterio.open(path) as ds:
        return ds.read(), {
            "crs": ds.crs,
            "transform": ds.transform,
            "shape": ds.shape,
            "nodata": ds.nodata,
            "dtype": ds.dtypes[0],
        }


def assert_identical(a, b) -> None:
    """Same grid, CRS, nodata, type and pixels (NaN equal to NaN)."""
    pa, ma = read(a)
    pb, mb = read(b)
    assert ma["shape"] == mb["shape"] and ma["crs"] == mb["crs"] and ma["dtype"] == mb["dtype"]
    assert ma["transform"].almost_equals(mb["transform"], precision=1e-9)
    assert ma["nodata"] == mb["nodata"] or (ma["nodata"] is not None and np.isnan(ma["nodata"]) and np.isnan(mb["nodata"]))
    assert pa.shape == pb.shape and np.array_equal(pa, pb, equal_nan=pa.dtype.kind == "f")


def assert_plan_is_output(result) -> None:
    """The plan's last grid is the file written."""
    last, summary = result.plan[-1], result.summary
    assert (last.width, last.height, last.count, last.dtype) == (summary.width, summary.height, summary.count, summary.dtype)
    assert last.crs == summary.crs and last.nodata == summary.nodata
    assert last.resolution == pytest.approx(summary.resolution, rel=1e-12)
    assert last.bounds.model_dump() == pytest.approx(summary.bounds.model_dump(), rel=1e-12)


@pytest.fixture(scope="module")
def projected_dem(tmp_path_factory) -> str:
    """The Jacksboro DEM in UTM 16N (the terrain steps match gdaldem on projected DEMs)."""
    path = tmp_path_factory.mktemp("dem") / "dem_utm.tif"
    reproject(DEM, str(path), dst_crs="EPSG:32616", resampling="bilinear")
    return str(path)


# ----- reproject ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("resampling", ["bilinear"])
def test_reproject_alone_is_raster_reproject_and_gdalwarp(tmp_path, resampling) -> None:
    result, _ = run_pipeline(
        RGB, str(tmp_path / "p.tif"), steps=[{"step": "reproject", "dst_crs": "EPSG:4326", "resampling": resampling}]
    )
    reproject(RGB, str(tmp_path / "s.tif"), dst_crs="EPSG:4326", resampling=resampling)
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    assert_plan_is_output(result)
    # GDAL 3.6's gdalwarp with raster_reproject's source-nodata rule (a pixel is nodata when all its bands are) and the
    # exact transformer: within one unit in >= 94 % of the pixels (measured 95.5 %; gdalwarp's default 90.3 %)
    gdal_cli(
        "gdalwarp",
        "-t_srs",
        "EPSG:4326",
        "-r",
        resampling,
        "-wo",
        "UNIFIED_SRC_NODATA=YES",
        "-et",
        "0",
        RGB,
        str(tmp_path / "c.tif"),
    )
    diff = np.abs(read(tmp_path / "p.tif")[0].astype(int) - read(tmp_path / "c.tif")[0].astype(int))
    assert (diff <= 1).mean() >= 0.94


@pytest.mark.parametrize("resampling", ["bilinear", "nearest"])  # nearest: raster_reproject fills (fill_only)
def test_margins_get_the_nodata_raster_reproject_picks(tmp_path, resampling) -> None:
    steps = [{"step": "reproject", "dst_crs": "EPSG:32616", "resampling": resampling}]
    plan = plan_pipeline(DEM, steps=steps, output_name="p.tif")
    result, warnings = run_pipeline(DEM, str(tmp_path / "p.tif"), steps=steps)
    summary, _ = reproject(DEM, str(tmp_path / "s.tif"), dst_crs="EPSG:32616", resampling=resampling)
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    # the value marks the margins and no data pixel: -32768 is the smallest Int16 the DEM never takes (numpy)
    dem = read(DEM)[0]
    assert plan.plan[-1].nodata == result.summary.nodata == summary.nodata == -32768.0 and not (dem == -32768).any()
    out = read(tmp_path / "p.tif")[0]
    assert (out == -32768).sum() > 0.05 * out.size and any("margins" in w for w in warnings)


@pytest.mark.parametrize("resampling", ["nearest", "bilinear"])
def test_reproject_then_window_steps_are_the_separate_tools(tmp_path, resampling) -> None:
    """A reproject then a clip, a resize or a band selection: the separate tools' pixels, bit for bit; and nearest's
    choice within one source pixel of pyproj's exact one (each pixel holds its source index, row * W + col)."""
    from pyproj import Transformer

    w, h = 500, 400
    src = tmp_path / "index.tif"
    origin = from_origin(300000, 3000000, 90, 90)
    rng = np.random.default_rng(1)
    with rasterio.open(
        src, "w", driver="GTiff", width=w, height=h, count=2, dtype="uint32", crs="EPSG:32618", transform=origin, nodata=2**32 - 1
    ) as ds:
        ds.write((np.arange(h)[:, None] * w + np.arange(w)[None, :]).astype("uint32"), 1)
        ds.write(rng.integers(0, 1000, (h, w)).astype("uint32"), 2)
    bbox = [-76.9, 26.8, -76.6, 27.05]
    reproject_step = {"step": "reproject", "dst_crs": "EPSG:4326", "resampling": resampling}
    result, _ = run_pipeline(str(src), str(tmp_path / "p.tif"), steps=[reproject_step, {"step": "clip", "bbox": bbox}])
    reproject(str(src), str(tmp_path / "s1.tif"), dst_crs="EPSG:4326", resampling=resampling)
    clip(str(tmp_path / "s1.tif"), str(tmp_path / "s.tif"), bbox=tuple(bbox))
    assert_plan_is_output(result)
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    run_pipeline(
        str(src), str(tmp_path / "r.tif"), steps=[reproject_step, {"step": "resize", "size": [333, 222], "resampling": "average"}]
    )
    convert(str(tmp_path / "s1.tif"), str(tmp_path / "rs.tif"), size=[333, 222], resampling="average")
    assert_identical(tmp_path / "r.tif", tmp_path / "rs.tif")
    run_pipeline(str(src), str(tmp_path / "b.tif"), steps=[reproject_step, {"step": "select", "bands": [2]}])
    convert(str(tmp_path / "s1.tif"), str(tmp_path / "bs.tif"), bands=[2])
    assert_identical(tmp_path / "b.tif", tmp_path / "bs.tif")
    if resampling != "nearest":
        return
    (p, _), meta = read(tmp_path / "p.tif")
    rows, cols = np.mgrid[0 : p.shape[0], 0 : p.shape[1]]
    lon, lat = meta["transform"] * (cols + 0.5, rows + 0.5)
    east, north = Transformer.from_crs(4326, 32618, always_xy=True).transform(lon, lat)
    c, r = ~origin * (east, north)
    exact = (np.floor(r).astype(np.int64), np.floor(c).astype(np.int64))
    pr, pc = p.astype(np.int64) // w, p.astype(np.int64) % w
    assert ((pr == exact[0]) & (pc == exact[1])).mean() >= 0.95  # measured 0.97
    assert (np.maximum(abs(pr - exact[0]), abs(pc - exact[1])) <= 1).all()


def test_why_windows_of_a_warp_differ(tmp_path) -> None:
    """The cause, shown on GDAL itself: a clipped window of a warped dataset equals the whole warp's pixels with the
    exact transformer and a fixed kernel scale, or with blocks warped on their own and a fixed scale, and differs with
    GDAL's defaults (approximate transformer and kernel scale per chunk, the chunk being the window read)."""
    base = ["read", RGB, "!", "reproject", "--dst-crs", "EPSG:4326", "-r", "bilinear"]

    def window_equals_whole(extra: list[str], tag: str) -> float:
        algorithms.run(["raster", "pipeline"], [*base, *extra, "!", "write", str(tmp_path / f"{tag}_all.tif")])
        algorithms.run(
            ["raster", "pipeline"],
            [*base, *extra, "!", "clip", "--window", "100,100,300,300", "!", "write", str(tmp_path / f"{tag}_w.tif")],
        )
        whole, window = read(tmp_path / f"{tag}_all.tif")[0], read(tmp_path / f"{tag}_w.tif")[0]
        return float((whole[:, 100:400, 100:400] == window).mean())

    assert window_equals_whole(["--et", "0", "--wo", "XSCALE=1", "--wo", "YSCALE=1"], "exact") == 1.0
    assert window_equals_whole([], "default") < 0.99  # measured 0.62 on this noisy Landsat scene
    # what run_pipeline and raster_reproject do: blocks warped on their own, a fixed scale
    with rasterio.Env(GDAL_VRT_WARP_USE_DATASET_RASTERIO="NO"):
        assert (
            window_equals_whole(["--wo", "XSCALE=1", "--wo", "YSCALE=1", "!", "clip", "--window", "0,0,835,696"], "blocks") == 1.0
        )


# ----- clip, resize, select, set-type ----------------------------------------------------------------------------------
def _box(c0, r0, c1, r1) -> list[float]:
    """A bbox from fractional pixel coordinates of RGB.byte.tif."""
    with rasterio.open(RGB) as ds:
        t = ds.transform
    (x0, y0), (x1, y1) = t * (c0, r0), t * (c1, r1)
    return [x0, y1, x1, y0]


@pytest.mark.parametrize(
    ("box", "all_touched"),
    [
        ((10.6, 20.3, 213.2, 125.4), False),  # projwin: 3 rounding cases at once
        ((10.6, 20.3, 213.2, 125.4), True),
        ((-5, -5, 100.4, 99.6), False),  # past the raster's edge: limited, with a warning
    ],
)
def test_clip_is_raster_clip(tmp_path, box, all_touched) -> None:
    bbox = _box(*box)
    result, warnings = run_pipeline(
        RGB, str(tmp_path / "p.tif"), steps=[{"step": "clip", "bbox": bbox, "all_touched": all_touched}]
    )
    summary, clip_warnings = clip(RGB, str(tmp_path / "s.tif"), bbox=tuple(bbox), all_touched=all_touched)
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    assert_plan_is_output(result)
    assert [w.split(": ", 1)[1] for w in warnings] == clip_warnings
    if box[0] < 0:
        assert any("past the raster's edge" in w for w in warnings)


def test_clip_in_another_crs_and_like(tmp_path) -> None:
    bbox = (-78.5, 23.6, -77.2, 25.0)
    run_pipeline(RGB, str(tmp_path / "p.tif"), steps=[{"step": "clip", "bbox": list(bbox), "bbox_crs": "EPSG:4326"}])
    clip(RGB, str(tmp_path / "s.tif"), bbox=bbox, bbox_crs="EPSG:4326")
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    # like= a raster: its bounds in its CRS
    run_pipeline(RGB, str(tmp_path / "like.tif"), steps=[{"step": "clip", "like": str(tmp_path / "s.tif")}])
    assert_identical(tmp_path / "like.tif", tmp_path / "s.tif")


def test_clip_like_a_vector_file(tmp_path) -> None:
    """like= a vector file: its extent in its CRS (here Web Mercator over the lon/lat DEM), as raster_clip's bbox."""
    import pyogrio
    import shapely
    from pyproj import Transformer

    to_mercator = Transformer.from_crs(4326, 3857, always_xy=True)
    area = shapely.transform(
        shapely.Polygon([(-84.35, 36.5), (-84.2, 36.52), (-84.15, 36.68), (-84.3, 36.65)]),
        lambda xy: np.column_stack(to_mercator.transform(xy[:, 0], xy[:, 1])),
    )
    path = tmp_path / "area.geojson"
    pyogrio.write_dataframe(_frame(area), path, driver="GeoJSON")
    run_pipeline(DEM, str(tmp_path / "p.tif"), steps=[{"step": "clip", "like": str(path)}])
    clip(DEM, str(tmp_path / "s.tif"), bbox=area.bounds, bbox_crs="EPSG:3857")
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    assert read(tmp_path / "p.tif")[1]["shape"] != read(DEM)[1]["shape"]


def _frame(geometry):
    import geopandas

    return geopandas.GeoDataFrame({"id": [1]}, geometry=[geometry], crs="EPSG:3857")


@pytest.mark.parametrize("resampling", ["nearest", "cubic", "average"])
def test_select_resize_set_type_are_raster_convert_and_gdal_translate(tmp_path, resampling) -> None:
    steps = [
        {"step": "select", "bands": [3, 1]},
        {"step": "resize", "size": [300, 280], "resampling": resampling},
        {"step": "set-type", "output_type": "Int16"},
    ]
    result, _ = run_pipeline(RGB, str(tmp_path / "p.tif"), steps=steps)
    convert(RGB, str(tmp_path / "s.tif"), bands=[3, 1], size=[300, 280], resampling=resampling, output_type="Int16")
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    assert_plan_is_output(result)
    gdal_cli(
        "gdal_translate",
        "-b",
        "3",
        "-b",
        "1",
        "-outsize",
        "300",
        "280",
        "-r",
        resampling,
        "-ot",
        "Int16",
        RGB,
        str(tmp_path / "c.tif"),
    )
    assert_identical(tmp_path / "p.tif", tmp_path / "c.tif")


def test_resize_to_a_resolution(tmp_path) -> None:
    steps = [
        {"step": "resize", "resolution": [700, 650], "resampling": "bilinear"},
        {"step": "set-type", "output_type": "Float32"},
    ]
    run_pipeline(RGB, str(tmp_path / "p.tif"), steps=steps)
    convert(RGB, str(tmp_path / "s.tif"), resolution=[700, 650], resampling="bilinear", output_type="Float32")
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    gdal_cli("gdal_translate", "-tr", "700", "650", "-r", "bilinear", "-ot", "Float32", RGB, str(tmp_path / "c.tif"))
    assert_identical(tmp_path / "p.tif", tmp_path / "c.tif")


# ----- fill-nodata, terrain -------------------------------------------------------------------------------------------
def test_fill_nodata_is_raster_fill_nodata_and_gdal_fillnodata(tmp_path) -> None:
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:300, 0:260]
    a = (np.sin(x / 17) * 50 + np.cos(y / 23) * 40 + rng.normal(0, 2, (300, 260))).astype("float32")
    a[rng.random(a.shape) < 0.2] = -9999
    a[100:140, 50:120] = -9999
    src = tmp_path / "holes.tif"
    profile = {"driver": "GTiff", "width": 260, "height": 300, "count": 2, "dtype": "float32", "nodata": -9999}
    with rasterio.open(src, "w", **profile, crs="EPSG:32633", transform=from_origin(500000, 4000000, 10, 10)) as ds:
        ds.write(a, 1)
        ds.write(a * 2, 2)
    step = {"step": "fill-nodata", "band": 2, "max_distance": 10, "smoothing_iterations": 2}
    result, _ = run_pipeline(str(src), str(tmp_path / "p.tif"), steps=[step])
    fill_nodata(str(src), str(tmp_path / "s.tif"), band=2, max_distance=10, smoothing_iterations=2)
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    assert_plan_is_output(result)
    gdal_cli("gdal_fillnodata.py", "-b", "2", "-md", "10", "-si", "2", str(src), str(tmp_path / "c.tif"))
    assert np.array_equal(read(tmp_path / "p.tif")[0], read(tmp_path / "c.tif")[0])
    assert (read(tmp_path / "p.tif")[0] != -9999).all()  # every hole was within 10 pixels of data


@pytest.mark.parametrize(
    "step",
    [
        {"step": "hillshade", "hillshade_mode": "multidirectional", "compute_edges": True},
        {"step": "hillshade", "hillshade_mode": "igor", "z_factor": 2.0, "algorithm": "ZevenbergenThorne"},
        {"step": "slope", "slope_units": "percent"},
        {"step": "aspect", "trigonometric": True},
        {"step": "tri", "compute_edges": True},
    ],
    ids=lambda s: "-".join(str(v) for v in s.values()),
)
def test_terrain_steps_are_raster_terrain(tmp_path, projected_dem, step) -> None:
    run_pipeline(projected_dem, str(tmp_path / "p.tif"), steps=[step])
    kwargs = {k: v for k, v in step.items() if k != "step"}
    terrain(projected_dem, str(tmp_path / "s.tif"), product=step["step"], **kwargs)
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")


def test_hillshade_is_gdaldem(tmp_path, projected_dem) -> None:
    run_pipeline(projected_dem, str(tmp_path / "p.tif"), steps=[{"step": "hillshade", "z_factor": 1.5, "azimuth": 200.0}])
    if shutil.which("gdaldem") is None:
        pytest.skip("gdaldem not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    command = ["gdaldem", "hillshade", projected_dem, str(tmp_path / "c.tif"), "-q", "-z", "1.5", "-az", "200"]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    assert np.array_equal(read(tmp_path / "p.tif")[0], read(tmp_path / "c.tif")[0])


def test_reproject_then_hillshade_reads_the_whole_warp(tmp_path) -> None:
    """gdaldem reads its source in whole rows: the warp behind it is raster_reproject's, pixel for pixel."""
    steps = [{"step": "reproject", "dst_crs": "EPSG:32616", "resampling": "bilinear"}, {"step": "hillshade"}]
    result, _ = run_pipeline(DEM, str(tmp_path / "p.tif"), steps=steps)
    reproject(DEM, str(tmp_path / "r.tif"), dst_crs="EPSG:32616", resampling="bilinear")
    terrain(str(tmp_path / "r.tif"), str(tmp_path / "s.tif"), product="hillshade")
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    assert_plan_is_output(result)


def test_lonlat_terrain_warns(tmp_path) -> None:
    plan = plan_pipeline(DEM, steps=[{"step": "slope"}], output_name="p.tif")
    assert any("lon/lat" in w and "reproject" in w for w in plan.warnings)


# ----- COG -----------------------------------------------------------------------------------------------------------
def test_cog_is_raster_reprojects_cog(tmp_path) -> None:
    """A COG through a staged GTiff and GDAL's COG driver, as the separate tools write one: same pixels, same
    overviews, a valid COG, no staging file left."""
    steps = [{"step": "reproject", "dst_crs": "EPSG:4326", "resampling": "bilinear"}]
    options = {"COMPRESS": "DEFLATE", "BLOCKSIZE": "256"}
    result, _ = run_pipeline(RGB, str(tmp_path / "p.tif"), steps=steps, format="COG", options=options)
    reproject(RGB, str(tmp_path / "s.tif"), dst_crs="EPSG:4326", resampling="bilinear", format="COG", options=options)
    assert_identical(tmp_path / "p.tif", tmp_path / "s.tif")
    with rasterio.open(tmp_path / "p.tif") as p, rasterio.open(tmp_path / "s.tif") as s:
        assert cog_check(p)[0] == [] and p.overviews(1) == s.overviews(1) == [2, 4]  # to one 256-pixel block
        assert np.array_equal(
            p.read(out_shape=(3, p.height // 2, p.width // 2)), s.read(out_shape=(3, s.height // 2, s.width // 2))
        )
        assert p.profile["compress"] == "deflate" and p.block_shapes[0] == (256, 256)
    assert sorted(os.listdir(tmp_path)) == ["p.tif", "s.tif"]
    assert result.summary.creation_options["COMPRESS"] == "DEFLATE"
    assert result.estimated_bytes == int(result.plan[-1].width * result.plan[-1].height * 3 * 4 / 3)


# ----- plan -----------------------------------------------------------------------------------------------------------
def test_plan_gives_each_steps_grid_without_writing(tmp_path) -> None:
    steps = [
        {"step": "reproject", "dst_crs": "EPSG:32616", "resolution": 50},
        {"step": "clip", "bbox": [740000, 4040000, 760000, 4060000]},
        {"step": "fill-nodata"},
        {"step": "set-type", "output_type": "Float32"},
        {"step": "slope"},
    ]
    before = sorted(os.listdir(tmp_path))
    plan = plan_pipeline(DEM, steps=steps, output_name="out.tif")
    assert sorted(os.listdir(tmp_path)) == before and plan.plan_only and plan.summary is None
    assert [g.step for g in plan.plan] == ["read", "reproject", "clip", "fill-nodata", "set-type", "slope"]
    assert [g.index for g in plan.plan] == [None, 0, 1, 2, 3, 4]
    read_, warped, clipped, filled, typed, sloped = plan.plan
    assert (read_.width, read_.height, read_.crs, read_.dtype) == (403, 344, "EPSG:4326", "int16")
    assert warped.crs == "EPSG:32616" and warped.resolution == (50.0, 50.0) and warped.nodata == -32768.0
    assert clipped.bounds.left <= 740000 < clipped.bounds.left + 50 and clipped.width == 400 and clipped.height == 400
    assert filled.dtype == "int16" and typed.dtype == "float32" and sloped.dtype == "float32" and sloped.nodata == -9999.0
    result, _ = run_pipeline(DEM, str(tmp_path / "out.tif"), steps=steps)
    assert result.plan == plan.plan
    assert_plan_is_output(result)
    assert plan.estimated_bytes == 400 * 400 * 4


# ----- failures: invalid-argument naming the step, nothing written ---------------------------------------------------
@pytest.mark.parametrize(
    ("steps", "needle"),
    [
        ([{"step": "reproject", "dst_crs": "EPSG:4326"}, {"step": "blur"}], "steps[1] (blur): unknown step 'blur'"),
        ([{"step": "read", "input": "x.tif"}], "steps[0] (read): 'read' is not a step here"),
        ([{"step": "clip", "bbox": [0, 0, 1, 1], "colour": 1}], "steps[0] (clip): unknown argument(s) colour"),
        ([{"step": "resize", "size": [10, 10], "resolution": 5}], "steps[0] (resize): give resolution or size, not both"),
        ([{"step": "select", "bands": [1]}, {"step": "select", "bands": [2]}], "steps[1] (select): band(s) [2] do not exist"),
        ([{"step": "set-type", "output_type": "Float32"}, {"step": "clip", "bbox": [0, 0, 1, 1]}], "steps[1] (clip): bbox"),
        ([{"step": "reproject", "dst_crs": "EPSG:999999"}], "steps[0] (reproject): dst_crs"),
        ([{"step": "resize", "size": [10, 10], "resampling": "sum"}], "steps[0] (resize): resampling 'sum' cannot resize"),
        ([], "non-empty list"),
    ],
)
def test_bad_steps_name_their_index(tmp_path, steps, needle) -> None:
    with pytest.raises(GdalMcpError) as e:
        run_pipeline(RGB, str(tmp_path / "out.tif"), steps=steps)
    assert e.value.code == "invalid-argument" and needle in e.value.message
    assert os.listdir(tmp_path) == []


def test_max_pixels_is_checked_before_any_pixel(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        run_pipeline(RGB, str(tmp_path / "o.tif"), steps=[{"step": "resize", "size": [4000, 4000]}], max_pixels=10**6)
    assert e.value.code == "invalid-argument" and "--max-pixels" in e.value.message and "steps[0] (resize)" in e.value.message
    assert os.listdir(tmp_path) == []


class Stop(Exception):
    pass


@pytest.mark.parametrize(("fmt", "at"), [("GTiff", 0.0), ("COG", 0.7)])
def test_a_cancel_stops_gdal_and_leaves_nothing(tmp_path, fmt, at) -> None:
    """Stopped while GDAL computes the pixels (or, for a COG, while the COG driver copies the staged GTiff)."""
    seen: list[float] = []

    def progress(fraction: float, message: str = "") -> None:
        seen.append(fraction)
        if fraction > at and message.startswith(("running", "writing COG")):
            raise Stop

    steps = [{"step": "select", "bands": [2, 1]}, {"step": "set-type", "output_type": "Float32"}]
    with pytest.raises(Stop):
        run_pipeline(RGB, str(tmp_path / "o.tif"), steps=steps, format=fmt, progress=progress)
    assert os.listdir(tmp_path) == [] and any(0 < f < 1 for f in seen)
