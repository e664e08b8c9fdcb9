"""vector_interpolate (engine/features/interpolate.py, GDAL 3.12 `gdal vector grid`) against independent references:
Debian's gdal_grid (GDAL 3.6) on the same points and grid, numpy inverse-distance weights at the pixel centres, a
plane that linear interpolation must reproduce, and Voronoi cells that nearest must draw.

Measured: gdal_grid 3.6 and GDAL 3.12 give bit-identical pixels for every method compared here (the same kernels,
pixel values at pixel centres in both; -txe/-tye are the grid's outer edges in both), so the tolerance against
gdal_grid is 0. GDAL's invdist power=2 kernel computes in float32 (SSE), so against float64 numpy it agrees to a median
of 1e-4 and up to 9e-4 next to a point (float32 coordinate differences over tiny distances; values span 25): the
tolerance there is 5e-3 (median 5e-4), and the pixel-corner convention would be off by more than 0.5.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import shapely

from gdal_mcp.engine.features import interpolate as interp
from gdal_mcp.engine.features.interpolate import interpolate
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

gpd = pytest.importorskip("geopandas")

EXTENT = (0.0, 0.0, 100.0, 50.0)
SIZE = [40, 20]


def _points(path: Path, n: int = 60, seed: int = 1, crs: str = "EPSG:32631", **columns: Any) -> tuple[np.ndarray, ...]:
    """n random points in EXTENT with a value field `val`; (x, y, val)."""
    rng = np.random.default_rng(seed)
    x, y, z = rng.uniform(0, 100, n), rng.uniform(0, 50, n), rng.uniform(-5, 20, n)
    gdf = gpd.GeoDataFrame({"val": z, "name": [f"p{i}" for i in range(n)], **columns}, geometry=shapely.points(x, y), crs=crs)
    gdf.to_file(path)
    return x, y, z


def _read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


def _gdal_grid(src: Path, dst: Path, algorithm: str, *args: str, extent: tuple[float, ...] = EXTENT, size=SIZE) -> np.ndarray:
    if shutil.which("gdal_grid") is None:
        pytest.skip("gdal_grid not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    minx, miny, maxx, maxy = (str(v) for v in extent)
    subprocess.run(
        ["gdal_grid", "-q", "-a", algorithm, "-txe", minx, maxx, "-tye", miny, maxy, "-outsize", str(size[0]), str(size[1]),
         "-ot", "Float32", *args, str(src), str(dst)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return _read(dst)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ----- against gdal_grid (GDAL 3.6) ---------------------------------------------------------------------------
CASES = [
    ("invdist", {}, "invdist:power=2:smoothing=0"),
    ("invdist", {"power": 3.0, "smoothing": 1.5}, "invdist:power=3:smoothing=1.5"),
    ("invdist", {"radius": 15.0, "min_points": 2, "max_points": 8}, "invdist:radius1=15:radius2=15:min_points=2:max_points=8"),
    ("invdistnn", {"radius": 8.0, "max_points": 6}, "invdistnn:radius=8:max_points=6"),
    ("nearest", {}, "nearest"),
    ("average", {"radius": 12.0}, "average:radius1=12:radius2=12"),
    ("linear", {}, "linear"),
    ("count", {"radius": 10.0}, "count:radius1=10:radius2=10"),
    ("range", {"radius": 10.0, "min_points": 2}, "range:radius1=10:radius2=10:min_points=2"),
]


def test_methods_equal_gdal_grid_36(tmp_path: Path) -> None:
    """Same points, same -txe/-tye/-outsize, same algorithm string: identical pixels (nodata pixels included)."""
    src = tmp_path / "pts.gpkg"
    _points(src)
    for i, (method, kw, algorithm) in enumerate(CASES):
        z = {} if method == "count" else {"z_field": "val"}
        summary, _ = interpolate(str(src), str(tmp_path / f"ours{i}.tif"), method=method, size=SIZE, bbox=EXTENT, **z, **kw)
        assert summary.dtype == "float32" and (summary.width, summary.height) == tuple(SIZE)
        ours = _read(tmp_path / f"ours{i}.tif")
        # GDAL 3.6 has no NaN default: give both the same nodata explicitly
        ref = _gdal_grid(src, tmp_path / f"ref{i}.tif", algorithm + ":nodata=nan", *(["-zfield", "val"] if z else []))
        np.testing.assert_array_equal(ours, ref, err_msg=f"{method} {kw}")
        if "radius" in kw and method != "count":
            assert np.isnan(ours).any(), f"{method}: the radius must leave some pixels empty in this test"


def test_points_shp_and_where_equal_gdal_grid(tmp_path: Path) -> None:
    """The shipped 3-point shapefile (z = id) and a where filter on a GeoPackage, as gdal_grid -where does it."""
    shp = tmp_path / "points.shp"
    for part in DATA.glob("vector/points.*"):
        shutil.copy(part, tmp_path / part.name)
    minx, miny, maxx, maxy = 244900.0, 999300.0, 246300.0, 1000400.0
    interpolate(str(shp), str(tmp_path / "ours.tif"), z_field="id", size=[28, 22], bbox=(minx, miny, maxx, maxy))
    ref = _gdal_grid(shp, tmp_path / "ref.tif", "invdist:power=2:smoothing=0", "-zfield", "id",
                     extent=(minx, miny, maxx, maxy), size=[28, 22])  # fmt: skip
    np.testing.assert_array_equal(_read(tmp_path / "ours.tif"), ref)
    with rasterio.open(tmp_path / "ours.tif") as ds, rasterio.open(tmp_path / "ref.tif") as r:
        assert ds.transform.almost_equals(r.transform) and ds.crs == r.crs

    src = tmp_path / "pts.gpkg"
    _points(src)
    interpolate(str(src), str(tmp_path / "w.tif"), method="nearest", z_field="val", where="val > 5", size=SIZE, bbox=EXTENT)
    ref = _gdal_grid(src, tmp_path / "wref.tif", "nearest:nodata=nan", "-zfield", "val", "-where", "val > 5")
    np.testing.assert_array_equal(_read(tmp_path / "w.tif"), ref)
    assert np.nanmin(ref) > 5


# ----- analytic references ------------------------------------------------------------------------------------
def _centres(transform: Any, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    cols, rows = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    xs, ys = transform @ (cols, rows)
    return np.asarray(xs), np.asarray(ys)


def test_invdist_is_the_weighted_mean_at_pixel_centres(tmp_path: Path) -> None:
    src = tmp_path / "pts.gpkg"
    x, y, z = _points(src, n=40, seed=3)
    interpolate(str(src), str(tmp_path / "idw.tif"), z_field="val", size=SIZE, bbox=EXTENT, output_type="Float64")
    with rasterio.open(tmp_path / "idw.tif") as ds:
        got, transform = ds.read(1), ds.transform

    def idw(cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
        w = 1.0 / ((cx[..., None] - x) ** 2 + (cy[..., None] - y) ** 2)
        return (w * z).sum(-1) / w.sum(-1)

    xs, ys = _centres(transform, *SIZE)
    diff = np.abs(got - idw(xs, ys))
    # GDAL's power=2 kernel subtracts coordinates in float32: near a point (tiny distances) that costs up to ~1e-3
    assert diff.max() < 5e-3 and np.median(diff) < 5e-4, (diff.max(), np.median(diff))
    corners = idw(xs - transform.a / 2, ys - transform.e / 2)
    assert np.abs(got - corners).max() > 0.5  # the corner convention is far off: the test can tell


def test_linear_reproduces_a_plane_inside_the_hull(tmp_path: Path) -> None:
    """z = 0.3x - 1.7y + 12 sampled at scattered points: linear gives the plane at every pixel centre inside the
    points' convex hull (float64 output: measured 3e-14, tolerance 1e-9), and nodata outside it with radius=0."""
    rng = np.random.default_rng(7)
    x, y = rng.uniform(0, 100, 80), rng.uniform(0, 50, 80)
    gpd.GeoDataFrame({"z": 0.3 * x - 1.7 * y + 12}, geometry=shapely.points(x, y), crs="EPSG:32631").to_file(tmp_path / "p.shp")
    interpolate(str(tmp_path / "p.shp"), str(tmp_path / "lin.tif"), method="linear", z_field="z", resolution=1.0,
                bbox=EXTENT, radius=0.0, output_type="Float64")  # fmt: skip
    with rasterio.open(tmp_path / "lin.tif") as ds:
        got, transform = ds.read(1), ds.transform
    xs, ys = _centres(transform, got.shape[1], got.shape[0])
    hull = shapely.convex_hull(shapely.multipoints(np.c_[x, y]))
    inside = shapely.contains_xy(hull, xs, ys)
    outside = ~shapely.intersects_xy(hull.buffer(1e-6), xs, ys)
    assert inside.sum() > 3000 and outside.sum() > 100
    np.testing.assert_allclose(got[inside], (0.3 * xs - 1.7 * ys + 12)[inside], rtol=0, atol=1e-9)
    assert np.isnan(got[outside]).all()


def test_nearest_draws_voronoi_cells(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    x, y = rng.uniform(0, 100, 7), rng.uniform(0, 50, 7)
    ids = np.arange(1, 8) * 10
    gpd.GeoDataFrame({"cell": ids}, geometry=shapely.points(x, y), crs="EPSG:32631").to_file(tmp_path / "seeds.gpkg")
    interpolate(str(tmp_path / "seeds.gpkg"), str(tmp_path / "vor.tif"), method="nearest", z_field="cell",
                resolution=[0.5, 0.25], bbox=EXTENT, output_type="Int16", nodata=-1)  # fmt: skip
    with rasterio.open(tmp_path / "vor.tif") as ds:
        got, transform = ds.read(1), ds.transform
        assert ds.nodata == -1 and (ds.width, ds.height) == (200, 200) and ds.res == (0.5, 0.25)
    xs, ys = _centres(transform, 200, 200)
    d = np.hypot(xs[..., None] - x, ys[..., None] - y)
    order = np.sort(d, axis=-1)
    clear = order[..., 1] - order[..., 0] > 1e-6  # away from the cells' borders (ties)
    expected = ids[np.argmin(d, axis=-1)]
    np.testing.assert_array_equal(got[clear], expected[clear])
    assert set(np.unique(got)) == set(ids)


def test_z_from_the_geometry_and_vertices_of_lines(tmp_path: Path) -> None:
    """3D points without z_field equal 2D points with the same z in a field; a line gives its vertices. The 3D
    points are a FlatGeobuf, a format pyogrio reads and the GDAL in rasterio's wheel (which runs the algorithm) does not."""
    rng = np.random.default_rng(5)
    x, y, z = rng.uniform(0, 100, 30), rng.uniform(0, 50, 30), rng.uniform(0, 9, 30)
    gpd.GeoDataFrame(geometry=shapely.points(x, y, z), crs="EPSG:32631").to_file(
        tmp_path / "p3d.fgb", SPATIAL_INDEX="NO"
    )  # in order: GDAL's float32 sums depend on the points' order (~1e-6)
    gpd.GeoDataFrame({"v": z}, geometry=shapely.points(x, y), crs="EPSG:32631").to_file(tmp_path / "p2d.shp")
    interpolate(str(tmp_path / "p3d.fgb"), str(tmp_path / "a.tif"), size=SIZE, bbox=EXTENT)
    interpolate(str(tmp_path / "p2d.shp"), str(tmp_path / "b.tif"), z_field="v", size=SIZE, bbox=EXTENT)
    np.testing.assert_array_equal(_read(tmp_path / "a.tif"), _read(tmp_path / "b.tif"))
    line = shapely.linestrings(np.c_[x, y, z])
    gpd.GeoDataFrame(geometry=[line], crs="EPSG:32631").to_file(tmp_path / "line.gpkg")
    interpolate(str(tmp_path / "line.gpkg"), str(tmp_path / "c.tif"), size=SIZE, bbox=EXTENT)
    np.testing.assert_array_equal(_read(tmp_path / "a.tif"), _read(tmp_path / "c.tif"))


def test_resolution_is_exact_and_edge_points_sit_on_pixel_centres(tmp_path: Path) -> None:
    src = tmp_path / "pts.gpkg"
    x, y, _ = _points(src, n=25)
    summary, warnings = interpolate(str(src), str(tmp_path / "r.tif"), z_field="val", resolution=2.5)
    assert warnings == []
    assert summary.resolution == (2.5, 2.5) and summary.crs == "EPSG:32631" and summary.nodata == "nan"
    b = summary.bounds
    assert b.left == pytest.approx(x.min() - 1.25) and b.top == pytest.approx(y.max() + 1.25)
    assert summary.width == int(0.5 + (x.max() - x.min() + 2.5) / 2.5)
    assert b.right >= x.max() and b.bottom <= y.min()


def test_formats_nulls_and_lonlat(tmp_path: Path) -> None:
    """COG (CreateCopy only) is staged and converted; null values are left out and said; a lon/lat layer warns
    that distances are in degrees."""
    src = tmp_path / "ll.gpkg"
    rng = np.random.default_rng(2)
    lon, lat = rng.uniform(5, 6, 20), rng.uniform(45, 46, 20)
    val = rng.uniform(0, 1, 20)
    val[:3] = np.nan
    gpd.GeoDataFrame({"val": val}, geometry=shapely.points(lon, lat), crs="EPSG:4326").to_file(src)
    summary, warnings = interpolate(str(src), str(tmp_path / "ll.tif"), z_field="val", resolution=0.05, format="COG",
                                    radius=0.3, method="average", creation_options={"COMPRESS": "DEFLATE"})  # fmt: skip
    assert summary.driver == "GTiff" and (summary.compression or "").upper() == "DEFLATE"
    with rasterio.open(tmp_path / "ll.tif") as ds:
        assert ds.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") == "COG" and ds.crs.to_epsg() == 4326
    assert any("3 feature(s) with a null val" in w for w in warnings)
    assert any("degrees" in w for w in warnings)
    assert _leftovers(tmp_path) == ["ll.gpkg", "ll.tif"]


# ----- refusals -----------------------------------------------------------------------------------------------
def _refused(tmp_path: Path, src: Path, code: str, text: str, **kw: Any) -> None:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    args: dict[str, Any] = {"size": SIZE, "z_field": "val"} | kw
    with pytest.raises(GdalMcpError) as e:
        interpolate(str(src), str(out / "x.tif"), **{k: v for k, v in args.items() if v is not None})
    assert e.value.code == code and text in e.value.message, e.value.message
    assert _leftovers(out) == [], "nothing written, no temporary files left"


def test_refusals(tmp_path: Path) -> None:
    src = tmp_path / "pts.gpkg"
    _points(src, n=10)
    _refused(tmp_path, src, "invalid-argument", "matched no features", where="val > 1000")
    _refused(tmp_path, src, "invalid-argument", "not numeric", z_field="name")
    _refused(tmp_path, src, "not-found", "fields are: val, name", z_field="height")
    _refused(tmp_path, src, "invalid-argument", "have no Z", z_field=None)
    _refused(tmp_path, src, "invalid-argument", "exactly one of resolution", resolution=1.0)
    _refused(tmp_path, src, "invalid-argument", "exactly one of resolution", size=None)
    _refused(tmp_path, src, "invalid-argument", "does not take power", method="nearest", power=2.0)
    _refused(tmp_path, src, "invalid-argument", "pass radius", method="average")
    _refused(tmp_path, src, "invalid-argument", "pass radius", method="invdistnn")
    _refused(tmp_path, src, "invalid-argument", "within a search radius", max_points=5)
    _refused(tmp_path, src, "invalid-argument", "needs a nodata", output_type="Byte")
    _refused(tmp_path, src, "invalid-argument", "cannot be stored", output_type="Byte", nodata=-1)
    _refused(tmp_path, src, "invalid-argument", "more than this server allows", size=[5000, 5000], max_pixels=10**6)
    _refused(tmp_path, src, "invalid-argument", "min_points (5) is more than max_points (2)", radius=5.0, min_points=5,
             max_points=2)  # fmt: skip
    gpd.GeoDataFrame({"val": [1.0, 2.0]}, geometry=shapely.points([0, 10], [5, 5]), crs="EPSG:32631").to_file(tmp_path / "l.gpkg")
    _refused(tmp_path, tmp_path / "l.gpkg", "invalid-argument", "span no area", size=None, resolution=1.0)
    gpd.GeoDataFrame({"val": [1.0, 2.0]}, geometry=shapely.points([0, 1], [0, 1]), crs="EPSG:4326").to_file(tmp_path / "g.gpkg")
    _refused(tmp_path, tmp_path / "g.gpkg", "invalid-argument", "DEGREES", method="average", radius=5000.0)


def test_resource_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "pts.gpkg"
    _points(src, n=50)
    monkeypatch.setattr(interp, "MAX_PAIRS", 40 * 20 * 49)
    _refused(tmp_path, src, "resource-limit", "pass radius")
    interpolate(str(src), str(tmp_path / "ok.tif"), z_field="val", size=SIZE, radius=5.0)  # a radius is fine
    monkeypatch.setattr(interp, "MAX_POINTS", 49)
    _refused(tmp_path, src, "resource-limit", "more than 49 points", radius=5.0)


def test_cancel_leaves_nothing(tmp_path: Path) -> None:
    src = tmp_path / "pts.gpkg"
    _points(src, n=30)
    out = tmp_path / "out"
    out.mkdir()

    def cancel(fraction: float, message: str = "") -> None:
        if fraction > 0.31:
            raise GdalMcpError("cancelled", "cancelled by the test")

    with pytest.raises(GdalMcpError) as e:
        interpolate(str(src), str(out / "c.tif"), z_field="val", size=[400, 400], progress=cancel)
    assert e.value.code == "cancelled"
    assert os.listdir(out) == []
