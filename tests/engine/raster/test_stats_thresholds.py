"""raster_stats thresholds and weights="area" against independent references: numpy on the same pixels, cell areas
from pyproj.Geod (lon/lat) or the pixel size (projected), numpy's weighted percentile."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pyproj
import pytest
import rasterio
from affine import Affine

import gdal_mcp.engine.raster.region as region_mod
import gdal_mcp.engine.raster.stats as stats_mod
import gdal_mcp.engine.tiles as tiles_mod
from gdal_mcp.engine.raster.stats import raster_stats
from gdal_mcp.engine.raster.thresholds import field_names, threshold_token
from gdal_mcp.errors import GdalMcpError

LONLAT = Affine(0.5, 0, -30.0, 0, -0.5, 80.0)  # 0.5° cells from 80°N down
UTM = Affine(10, 0, 500000, 0, -20, 4000000)  # 10 x 20 m cells


def geod_row_areas(transform: Affine, height: int) -> np.ndarray:
    """The ground area of one cell of each row: pyproj.Geod (WGS84) polygon area of the cell, its top and bottom edges
    densified (64 segments) so that they follow the parallels."""
    geod = pyproj.Geod(ellps="WGS84")
    lon0, lon1 = transform.c, transform.c + transform.a
    along = np.linspace(lon0, lon1, 65)
    out = np.empty(height)
    for r in range(height):
        top, bottom = transform.f + transform.e * r, transform.f + transform.e * (r + 1)
        lons = np.concatenate([along, along[::-1]])
        lats = np.concatenate([np.full(65, top), np.full(65, bottom)])
        out[r] = abs(geod.polygon_area_perimeter(lons, lats)[0])
    return out


def write(path: Path, a: np.ndarray, transform: Affine, crs: str | None, nodata: float | None) -> str:
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=a.shape[-1],
        height=a.shape[-2],
        count=1 if a.ndim == 2 else a.shape[0],
        dtype=a.dtype,
        nodata=nodata,
        crs=crs,
        transform=transform,
        tiled=True,
        blockxsize=32,
        blockysize=32,
    ) as ds:
        ds.write(a if a.ndim == 3 else a[None])
    return str(path)


@pytest.fixture
def small_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many tiles (64 px), many windows per tile and a small candidate buffer: every merge and refinement step."""
    monkeypatch.setattr(region_mod, "DEFAULT_WINDOW_PIXELS", 3000)
    monkeypatch.setattr(stats_mod, "COLLECT_LIMIT", 40)
    monkeypatch.setattr(tiles_mod, "TILE_ALIGN", 32)
    monkeypatch.setattr(tiles_mod, "MAX_TILE_SIDE", 64)


def test_the_geod_reference_matches_the_closed_form_zone_area() -> None:
    """The reference itself: the area of a graticule cell on the ellipsoid in closed form (authalic latitude)."""
    g = pyproj.Geod(ellps="WGS84")
    e = math.sqrt(g.es)

    def q(phi: float) -> float:
        s = math.sin(math.radians(phi))
        return s / (1 - e * e * s * s) + math.log((1 + e * s) / (1 - e * s)) / (2 * e)

    expected = [math.radians(0.5) * g.b**2 / 2 * abs(q(80 - 0.5 * r) - q(80 - 0.5 * (r + 1))) for r in range(200)]
    assert geod_row_areas(LONLAT, 200) == pytest.approx(expected, rel=1e-7)


def test_thresholds_on_a_lonlat_grid_equal_numpy_and_geodesic_cell_areas(tmp_path: Path, small_tiles: None) -> None:
    rng = np.random.default_rng(3)
    a = rng.random((200, 150)).astype("float32")
    a[rng.random(a.shape) < 0.1] = -1  # nodata
    a[5, :7] = np.nan
    exact = float(a[100, 100])  # a threshold equal to a pixel value: that pixel is at_or_below, not above
    path = write(tmp_path / "ndvi.tif", a, LONLAT, "EPSG:4326", -1)
    r = raster_stats(path, thresholds=[0.3, 0.75, exact], percentiles=[50])
    valid = (a != -1) & ~np.isnan(a)
    rows = geod_row_areas(LONLAT, 200)
    valid_area = float((valid.sum(axis=1) * rows).sum())
    b = r.bands[0]
    assert r.area_method == "geodesic" and r.weights == "none" and r.pixel_area_m2 is None
    assert b.valid_count == valid.sum() and b.area_m2 == pytest.approx(valid_area, rel=1e-6)
    assert [t.threshold for t in b.thresholds] == [0.3, 0.75, exact]
    for t in b.thresholds:
        above = valid & (a > t.threshold)
        below = valid & (a <= t.threshold)
        for side, mask in ((t.above, above), (t.at_or_below, below)):
            area = float((mask.sum(axis=1) * rows).sum())
            assert side.count == mask.sum() and side.share == mask.sum() / valid.sum()
            assert side.area_m2 == pytest.approx(area, rel=1e-6) and side.area_ha == pytest.approx(area / 1e4, rel=1e-6)
            assert side.area_share == pytest.approx(area / valid_area, rel=1e-6)
    # North of the equator the pixels shrink poleward: the area share differs from the pixel share.
    assert abs(b.thresholds[0].above.area_share - b.thresholds[0].above.share) > 1e-4
    # Read unweighted, a lon/lat raster says that weights='area' exists.
    assert any("weights='area'" in w for w in r.warnings)
    # One row read (a chunk of one row: its area still that row's).
    one = raster_stats(path, thresholds=[0.3], bbox=(-30, 60.1, 45, 60.4)).bands[0].thresholds[0]
    row = a[39]
    assert one.above.count == (row > 0.3).sum() and one.at_or_below.count == ((row <= 0.3) & (row != -1)).sum()
    assert one.above.area_m2 == pytest.approx((row > 0.3).sum() * rows[39], rel=1e-6)


def test_thresholds_on_a_projected_grid_use_the_pixel_size(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    a = rng.integers(0, 100, (2, 90, 70)).astype("int16")
    a[0, :3] = -9999
    path = write(tmp_path / "utm.tif", a, UTM, "EPSG:32618", -9999)
    r = raster_stats(path, thresholds=[50, -3, 99])
    assert r.area_method == "projected" and r.pixel_area_m2 == 200.0
    for b, band in zip(r.bands, a, strict=True):
        valid = band != -9999
        assert b.area_m2 == valid.sum() * 10 * 20
        for t in b.thresholds:
            n_above = int((valid & (band > t.threshold)).sum())
            n_below = int((valid & (band <= t.threshold)).sum())
            assert (t.above.count, t.at_or_below.count) == (n_above, n_below)
            assert (t.above.area_m2, t.at_or_below.area_m2) == (n_above * 200.0, n_below * 200.0)
            assert t.above.share == n_above / valid.sum() and t.above.area_share == pytest.approx(t.above.share)
    assert [t.at_or_below.count for t in r.bands[0].thresholds][1:] == [0, r.bands[0].valid_count]
    assert not any("weights" in w for w in r.warnings)


def test_thresholds_without_a_crs_give_counts_only(tmp_path: Path) -> None:
    a = np.arange(12, dtype="float32").reshape(3, 4)
    path = write(tmp_path / "plain.tif", a, Affine(1, 0, 0, 0, -1, 3), None, None)
    r = raster_stats(path, thresholds=[5.5])
    t = r.bands[0].thresholds[0]
    assert (t.above.count, t.above.share, t.above.area_m2, t.above.area_share) == (6, 0.5, None, None)
    assert r.area_method == "none" and r.bands[0].area_m2 is None and any("no CRS" in w for w in r.warnings)
    with pytest.raises(GdalMcpError) as e:
        raster_stats(path, weights="area")
    assert e.value.code == "invalid-argument" and "raster_edit" in e.value.message


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "float32", "int64", "float64"])
def test_area_weighted_mean_std_percentiles_equal_numpy(tmp_path: Path, small_tiles: None, dtype: str) -> None:
    rng = np.random.default_rng(5)
    # Values rising toward the pole (so weighting matters), heavy duplicates, nodata.
    lat_trend = np.linspace(100, 0, 200)[:, None]
    a = (lat_trend + rng.integers(0, 60, (200, 150))).astype(dtype)
    if dtype.startswith("float"):
        a = (a + rng.random(a.shape)).astype(dtype)
    a[rng.random(a.shape) < 0.05] = 7  # nodata
    a.flat[rng.integers(0, a.size, 3000)] = a.flat[11]
    path = write(tmp_path / f"{dtype}.tif", a, LONLAT, "EPSG:4326", 7)
    qs = [0, 0.1, 2, 25, 50, 75, 97.5, 99.9, 100]
    r = raster_stats(path, weights="area", percentiles=qs, histogram_bins=10)
    valid = a != 7
    w = np.broadcast_to(geod_row_areas(LONLAT, 200)[:, None], a.shape)[valid]
    v = a[valid]
    b = r.bands[0]
    assert r.weights == "area" and r.area_method == "geodesic" and not any("weights='area'" in x for x in r.warnings)
    mean = np.average(v.astype(np.float64), weights=w)
    assert b.mean == pytest.approx(mean, rel=1e-7)  # the engine puts 9 points on a cell edge, the reference 65
    assert b.std == pytest.approx(math.sqrt(np.average((v - mean) ** 2, weights=w)), rel=1e-6)
    assert abs(b.mean - v.astype(np.float64).mean()) > 1  # the weights matter here
    assert b.percentiles["50"] != float(np.percentile(v, 50, method="inverted_cdf"))
    for q in qs:
        assert b.percentiles[stats_mod.percent_key(q)] == float(np.percentile(v, q, weights=w, method="inverted_cdf")), q
    # Per pixel still: counts, min, max, sum, histogram.
    assert (b.valid_count, b.min, b.max) == (v.size, float(v.min()), float(v.max()))
    assert b.sum == pytest.approx(float(v.astype(np.float64).sum()), rel=1e-12)
    assert b.histogram.counts == np.histogram(v, 10, range=(float(v.min()), float(v.max())))[0].tolist()
    assert b.area_m2 == pytest.approx(float(w.sum()), rel=1e-6)


def test_weights_area_on_a_projected_grid_says_what_changes(tmp_path: Path) -> None:
    a = np.random.default_rng(6).random((40, 30)).astype("float32")
    path = write(tmp_path / "utm.tif", a, UTM, "EPSG:32618", None)
    r = raster_stats(path, weights="area", percentiles=[10, 50])
    b = r.bands[0]
    assert b.mean == pytest.approx(float(a.astype(np.float64).mean()), rel=1e-12)
    assert b.percentiles["50"] == float(np.percentile(a.ravel(), 50, method="inverted_cdf"))
    assert any("same area" in w for w in r.warnings) and b.area_m2 == a.size * 200.0


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"thresholds": [float("nan")]}, "finite"),
        ({"thresholds": ["a"]}, "finite"),
        ({"thresholds": list(range(101))}, "at most 100"),
        ({"weights": "latitude"}, "'none' or 'area'"),
    ],
)
def test_invalid_threshold_and_weight_arguments(tmp_path: Path, kwargs: dict, needle: str) -> None:
    path = write(tmp_path / "x.tif", np.zeros((4, 4), "uint8"), UTM, "EPSG:32618", None)
    with pytest.raises(GdalMcpError) as e:
        raster_stats(path, **kwargs)
    assert e.value.code == "invalid-argument" and needle in e.value.message


def test_threshold_field_names() -> None:
    assert [threshold_token(t) for t in (0.3, -5, 100, 1e-05, -0.25)] == ["0_3", "m5", "100", "1em05", "m0_25"]
    names = [n for n, _ in field_names([0.3])]
    assert names == [
        "above_0_3_count",
        "above_0_3_share",
        "above_0_3_area_m2",
        "above_0_3_area_ha",
        "above_0_3_area_share",
        "at_or_below_0_3_count",
        "at_or_below_0_3_share",
        "at_or_below_0_3_area_m2",
        "at_or_below_0_3_area_ha",
        "at_or_below_0_3_area_share",
    ]


@pytest.mark.slow
def test_whole_globe_in_bounded_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """64 million Float32 pixels (256 MB; their float64 areas 512 MB) covering the globe, weighted and thresholded:
    the arrays held are a few chunks' worth (1 Mpx chunks here; measured 102 MiB peak, 70 MiB unweighted), and the
    valid area is the ellipsoid's surface (closed form)."""
    monkeypatch.setattr(region_mod, "DEFAULT_WINDOW_PIXELS", 1 << 20)
    vrt = tmp_path / "globe.vrt"
    vrt.write_text(
        '<VRTDataset rasterXSize="8000" rasterYSize="8000"><SRS>EPSG:4326</SRS>'
        "<GeoTransform>-180, 0.045, 0, 90, 0, -0.0225</GeoTransform>"
        '<VRTRasterBand dataType="Float32" band="1"/></VRTDataset>'
    )
    tracemalloc.start()
    try:
        r = raster_stats(str(vrt), weights="area", thresholds=[0.0, -1.0], percentiles=[50])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    g = pyproj.Geod(ellps="WGS84")
    e = math.sqrt(g.es)
    surface = 2 * math.pi * g.b**2 * (1 / (1 - e * e) + math.log((1 + e) / (1 - e)) / (2 * e))
    b = r.bands[0]
    assert b.valid_count == 8000 * 8000 and b.mean == 0 and b.percentiles == {"50": 0.0}
    assert b.area_m2 == pytest.approx(surface, rel=1e-6)
    above, below = b.thresholds[0].above, b.thresholds[0].at_or_below
    assert (above.count, above.area_m2, below.count, below.area_share) == (0, 0.0, 8000 * 8000, 1.0)
    assert b.thresholds[1].above.area_m2 == pytest.approx(surface, rel=1e-6)
    assert peak < 150 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB"
