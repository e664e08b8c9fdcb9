"""raster_stats: exact streamed statistics, percentiles and histograms against numpy and MANIFEST.md facts."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.warp import transform_bounds
from rasterio.windows import Window

import gdal_mcp.engine.raster.region as region_mod
import gdal_mcp.engine.raster.stats as stats_mod
import gdal_mcp.engine.tiles as tiles_mod
from gdal_mcp.engine.raster.stats import raster_stats
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA, huge_vrt

R = DATA / "raster"
RGB = str(R / "RGB.byte.tif")
SLOPE = str(R / "slope.tif")
FLOAT_NAN = str(R / "float_nan.tif")


def valid(path: str, band: int, window: Window | None = None) -> np.ndarray:
    """The valid values of a band (nodata, mask and NaN removed), read whole with rasterio."""
    with rasterio.open(path) as ds:
        a = ds.read(band, window=window, masked=True)
    v = a.compressed()
    return v[~np.isnan(v)] if v.dtype.kind == "f" else v


def numpy_histogram(v: np.ndarray, bins: int) -> tuple[list[int], list[float]]:
    counts, edges = np.histogram(v, bins, range=(float(v.min()), float(v.max())))
    return counts.tolist(), edges.tolist()


def test_rgb_manifest_facts_and_exact_percentiles() -> None:
    r = raster_stats(RGB, histogram_bins=16)
    assert r.path == RGB and r.window == (0, 0, 791, 718) and r.warnings == []
    assert [b.index for b in r.bands] == [1, 2, 3]
    assert [(b.min, b.max) for b in r.bands] == [(1, 255)] * 3
    assert [round(b.mean, 4) for b in r.bands] == [44.4345, 66.0220, 71.3932]
    assert [round(b.valid_percent, 2) for b in r.bands] == [67.40, 67.43, 67.39]
    for b in r.bands:
        v = valid(RGB, b.index)
        assert b.valid_count == v.size and b.valid_count + b.nodata_count == 791 * 718
        assert b.sum == v.sum() and b.std == pytest.approx(v.astype(np.float64).std(), rel=1e-12)
        assert list(b.percentiles) == ["2", "25", "50", "75", "98"]
        assert b.percentiles == {k: float(np.percentile(v, float(k))) for k in b.percentiles}
        counts, edges = numpy_histogram(v, 16)
        assert b.histogram.counts == counts and b.histogram.edges == edges


def test_slope_float32_percentiles_equal_numpy() -> None:
    qs = [0, 2, 25, 50, 75, 97.5, 98, 99.9, 100]
    r = raster_stats(SLOPE, percentiles=qs, histogram_bins=50)
    b = r.bands[0]
    v = valid(SLOPE, 1)
    assert v.dtype == np.float32 and -9999 not in v
    assert round(b.mean, 3) == 56.813 and round(b.valid_percent, 2) == 95.12 and b.min == 0
    assert round(b.max, 2) == 737.93
    assert list(b.percentiles) == ["0", "2", "25", "50", "75", "97.5", "98", "99.9", "100"]
    for q in qs:
        assert b.percentiles[stats_mod.percent_key(q)] == float(np.percentile(v, q)), q
    counts, edges = numpy_histogram(v, 50)
    assert b.histogram.counts == counts and b.histogram.edges == edges and sum(counts) == b.valid_count


def test_float_nan_nodata_south_up() -> None:
    r = raster_stats(FLOAT_NAN, percentiles=[0, 50, 100], histogram_bins=3)
    b = r.bands[0]
    assert (b.valid_count, b.nodata_count, round(b.valid_percent, 2)) == (5, 1, 83.33)
    assert (round(b.min, 2), round(b.max, 2)) == (-1.88, 1.41)
    v = valid(FLOAT_NAN, 1)
    assert b.percentiles == {k: float(np.percentile(v, float(k))) for k in ("0", "50", "100")}
    assert b.histogram.counts == numpy_histogram(v, 3)[0]
    # South-up (GT row step +100): y grows downwards in rows, so [0,0,200,100] is the top-left 2x1 pixels.
    sub = raster_stats(FLOAT_NAN, bbox=(0, 0, 200, 100))
    assert sub.window == (0, 0, 2, 1)
    assert (round(sub.bands[0].min, 2), round(sub.bands[0].max, 2), sub.bands[0].valid_count) == (1.23, 1.41, 2)


def test_bbox_matches_a_numpy_slice() -> None:
    with rasterio.open(RGB) as ds:
        t = ds.transform
        # Cols 100..349, rows 200..449; the bbox is pulled a little inside, so rounding outward restores it.
        left, top = t @ (100.3, 200.2)
        right, bottom = t @ (349.6, 449.9)
    r = raster_stats(RGB, bbox=(left, bottom, right, top), histogram_bins=8)
    assert r.window == (100, 200, 250, 250)
    for b in r.bands:
        v = valid(RGB, b.index, Window(100, 200, 250, 250))
        assert (b.valid_count, b.min, b.max, b.sum) == (v.size, v.min(), v.max(), v.sum())
        assert b.mean == pytest.approx(v.mean(), rel=1e-12)
        assert b.percentiles == {k: float(np.percentile(v, float(k))) for k in b.percentiles}
        assert b.histogram.counts == numpy_histogram(v, 8)[0]


def test_bbox_in_another_crs() -> None:
    bbox = (-78.0, 24.5, -77.5, 25.0)
    r = raster_stats(RGB, bands=[2], bbox=bbox, bbox_crs="EPSG:4326")
    with rasterio.open(RGB) as ds:
        left, bottom, right, top = transform_bounds("EPSG:4326", ds.crs, *bbox, densify_pts=21)
        t = ds.transform
    col, row, w, h = r.window
    assert (col, row) == (math.floor((left - t.c) / t.a), math.floor((top - t.f) / t.e))
    assert (col + w, row + h) == (math.ceil((right - t.c) / t.a), math.ceil((bottom - t.f) / t.e))
    v = valid(RGB, 2, Window(col, row, w, h))
    assert [b.index for b in r.bands] == [2] and r.bands[0].valid_count == v.size
    assert r.bands[0].percentiles["50"] == float(np.percentile(v, 50))


def test_bbox_outside_tells_the_bounds() -> None:
    with pytest.raises(GdalMcpError) as e:
        raster_stats(RGB, bbox=(0, 0, 1000, 1000))
    assert e.value.code == "invalid-argument"
    assert "101985.0" in e.value.message and "2826915.0" in e.value.message and "EPSG:32618" in e.value.message


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"bands": [4]}, "3 band(s)"),
        ({"bands": [0]}, "3 band(s)"),
        ({"bands": []}, "non-empty"),
        ({"percentiles": [50, 100.5]}, "between 0 and 100"),
        ({"percentiles": [-1]}, "between 0 and 100"),
        ({"histogram_bins": 0}, "1 to 10000"),
        ({"histogram_bins": 10001}, "1 to 10000"),
        ({"bbox": (10, 10, 5, 20)}, "minx < maxx"),
        ({"bbox": (0, 0, 1, 1), "bbox_crs": "EPSG:999999"}, "not a CRS"),
    ],
)
def test_invalid_arguments(kwargs: dict, needle: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        raster_stats(RGB, **kwargs)
    assert e.value.code == "invalid-argument" and needle in e.value.message


def test_bbox_crs_needs_a_georeferenced_raster() -> None:
    with pytest.raises(GdalMcpError) as e:
        raster_stats(FLOAT_NAN, bbox=(0, 0, 1, 1), bbox_crs="EPSG:4326")
    assert e.value.code == "invalid-argument" and "no CRS" in e.value.message


def test_missing_file() -> None:
    with pytest.raises(GdalMcpError) as e:
        raster_stats(str(R / "nope.tif"))
    assert e.value.code in ("not-found", "gdal-error")


def _synthetic(path: Path, dtype: str, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """A tiled raster of `dtype` with heavy duplicates, a nodata value, and (floats) -0.0, NaN and tiny values."""
    shape = (130, 150)
    if dtype.startswith("float"):
        a = (rng.standard_cauchy(shape) * 1000).astype(dtype)
        a[0, :6] = [-0.0, 0.0, 1e-30, -1e-30, np.nan, 3.25]
        nodata = -9999.0
    else:
        info = np.iinfo(dtype)
        a = rng.integers(max(int(info.min), -(2**62)), min(int(info.max), 2**62), shape, dtype=dtype, endpoint=True)
        nodata = 17.0
    a.flat[rng.integers(0, a.size, 2000)] = a.flat[5]  # many equal values around one rank
    a.flat[rng.integers(0, a.size, 500)] = nodata
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=shape[1],
        height=shape[0],
        count=1,
        dtype=dtype,
        nodata=nodata,
        crs="EPSG:32618",
        transform=Affine(10, 0, 500000, 0, -10, 4000000),
        tiled=True,
        blockxsize=32,
        blockysize=32,
    ) as ds:
        ds.write(a, 1)
    return a, nodata


@pytest.mark.parametrize(
    "dtype,passes",
    [
        ("uint8", 1),
        ("int8", 1),
        ("int16", 1),
        ("uint16", 1),
        ("int32", 2),
        ("uint32", 2),
        ("float32", 2),
        ("int64", 4),
        ("uint64", 4),
        ("float64", 4),
    ],
)
def test_every_dtype_exact_over_many_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, passes: int) -> None:
    # Small tiles, small windows and a small candidate buffer force many tiles, many windows per tile and every
    # refinement step.
    monkeypatch.setattr(region_mod, "DEFAULT_WINDOW_PIXELS", 3000)
    monkeypatch.setattr(stats_mod, "COLLECT_LIMIT", 40)
    monkeypatch.setattr(tiles_mod, "TILE_ALIGN", 32)
    monkeypatch.setattr(tiles_mod, "MAX_TILE_SIDE", 64)
    a, nodata = _synthetic(tmp_path / f"{dtype}.tif", dtype, np.random.default_rng(7))
    v = a[a != nodata]
    if v.dtype.kind == "f":
        v = v[~np.isnan(v)]
    qs = [0, 0.1, 2, 25, 33.3333, 50, 75, 97.5, 99.99, 100]
    messages: list[tuple[float, str]] = []
    r = raster_stats(
        str(tmp_path / f"{dtype}.tif"), percentiles=qs, histogram_bins=37, progress=lambda f, m="": messages.append((f, m))
    )
    b = r.bands[0]
    assert b.valid_count == v.size and b.nodata_count == a.size - v.size
    assert (b.min, b.max) == (float(v.min()), float(v.max()))
    assert b.mean == pytest.approx(v.astype(np.float64).mean(), rel=1e-9)
    assert b.std == pytest.approx(v.astype(np.float64).std(), rel=1e-9)
    for q in qs:
        assert b.percentiles[stats_mod.percent_key(q)] == float(np.percentile(v, q)), q
    counts, edges = numpy_histogram(v, 37)
    assert b.histogram.counts == counts and b.histogram.edges == edges
    # Progress: monotone, per tile, naming the pass.
    fractions = [f for f, _ in messages]
    assert fractions == sorted(fractions) and 0 < fractions[0] and fractions[-1] <= 1
    n = len(tiles_mod.plan(150, 130, bytes_per_pixel=a.dtype.itemsize))
    assert n == 9 and stats_mod.count_windows(64, 64, (32, 32), 3000) > 1
    assert messages[-2][1] == f"statistics pass {passes}/{passes}: tile {n}/{n}"
    assert len(messages) == passes * n + 1
    assert messages[-1] == (1.0, f"statistics done in {passes} pass(es)")
    assert not any(f"pass {passes + 1}/" in m for _, m in messages)


def test_empty_percentiles_and_no_valid_pixels(tmp_path: Path) -> None:
    path = tmp_path / "empty.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=4, height=3, count=2, dtype="float32", nodata=-1, transform=Affine(1, 0, 0, 0, -1, 3)
    ) as ds:
        ds.write(np.stack([np.full((3, 4), -1, dtype="float32"), np.arange(12, dtype="float32").reshape(3, 4)]))
    r = raster_stats(str(path), percentiles=[], histogram_bins=4)
    b1, b2 = r.bands
    assert (b1.valid_count, b1.mean, b1.percentiles, b1.histogram) == (0, None, {}, None)
    assert any("band 1 has no valid pixels" in w for w in r.warnings)
    assert (b2.valid_count, b2.mean, b2.percentiles, b2.histogram.counts) == (12, 5.5, {}, [3, 3, 3, 3])
    assert raster_stats(str(path), bands=[1]).bands[0].percentiles == dict.fromkeys(["2", "25", "50", "75", "98"])


def test_huge_sourceless_vrt_is_streamed(tmp_path: Path) -> None:
    """400 million pixels (400 MB as Byte) in bounded memory: the arrays we hold stay far below that."""
    vrt = huge_vrt(tmp_path / "huge.vrt", size=20000)
    messages: list[str] = []
    tracemalloc.start()
    try:
        r = raster_stats(str(vrt), histogram_bins=2, progress=lambda f, m="": messages.append(m))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    b = r.bands[0]
    assert (b.valid_count, b.min, b.max, b.mean, b.std) == (20000 * 20000, 0, 0, 0, 0)
    assert b.percentiles == dict.fromkeys(["2", "25", "50", "75", "98"], 0.0)
    assert b.histogram.counts == [0, 20000 * 20000]
    assert len(messages) == 26 and messages[-2] == "statistics pass 1/1: tile 25/25"  # 4096 x 4096 Byte tiles
    assert peak < 150 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB"


def test_band_statistics_still_serves_raster_info() -> None:
    with rasterio.open(SLOPE) as ds:
        st = stats_mod.band_statistics(ds, [1])[1]
    v = valid(SLOPE, 1)
    assert st.valid_count == v.size and st.mean == pytest.approx(v.astype(np.float64).mean())
