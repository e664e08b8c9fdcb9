"""raster_calc, raster_terrain, raster_stats, class areas and zonal statistics through tiles (engine/tiles.py).

Each job runs twice with a small forced tile size: with the default local mapper (one tile after another, in
order), and under `tiles.using()` with a real parallel mapper: a pool of spawned processes (they import the
tile functions by name, as a cluster worker does), the tiles submitted in reverse order and yielded as they
complete. The outputs must be identical: the same pixels, the same statistics to the last bit. Against
independent references (gdaldem, numpy, rasterstats) the same jobs are checked in the module tests beside.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyogrio.raw
import pytest
import rasterio
import shapely

import gdal_mcp.engine.tiles as tiles
from gdal_mcp.engine.features.zonal import zonal_stats
from gdal_mcp.engine.raster.calc import calc
from gdal_mcp.engine.raster.categories import categories
from gdal_mcp.engine.raster.stats import raster_stats
from gdal_mcp.engine.raster.terrain import terrain
from tests.engine.mappers import ProcessMapper, spawned_pool
from tests.helpers import DATA

R = DATA / "raster"
RGB = str(R / "RGB.byte.tif")
SLOPE = str(R / "slope.tif")
DEM = str(R / "jacksboro_dem.tif")
POLYGONS = str(DATA / "vector" / "polygons.shp")
POINTS = str(DATA / "vector" / "points.shp")
ZONAL_ALL = [
    "count",
    "min",
    "max",
    "mean",
    "sum",
    "std",
    "median",
    "majority",
    "minority",
    "unique",
    "range",
    "nodata",
    "percentile_10",
    "percentile_90.5",
]


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    with spawned_pool() as executor:
        yield executor


@pytest.fixture
def parallel(pool: ProcessPoolExecutor) -> ProcessMapper:
    return ProcessMapper(pool)


@pytest.fixture
def small_tiles(monkeypatch: pytest.MonkeyPatch) -> int:
    """Tiles of 128 x 128 pixels (TILE_ALIGN 64): 7 x 6 tiles on RGB.byte.tif, 4 x 3 on the DEM, with edge tiles."""
    monkeypatch.setattr(tiles, "TILE_ALIGN", 64)
    monkeypatch.setattr(tiles, "MAX_TILE_SIDE", 128)
    return 128


def both(parallel: ProcessMapper, job: Callable[[], Any]) -> tuple[Any, Any]:
    """`job()` run locally, then with the parallel mapper (whose tiles must have come out of order)."""
    local = job()
    with tiles.using(parallel):
        spread = job()
    assert parallel.orders and any(order != sorted(order) for order in parallel.orders)
    return local, spread


def pixels(path: Path) -> tuple[np.ndarray, dict[str, Any]]:
    with rasterio.open(path) as ds:
        return ds.read(), {
            "profile": {k: v for k, v in ds.profile.items() if k != "blockysize"},
            "descriptions": ds.descriptions,
            "colorinterp": ds.colorinterp,
        }


def assert_same_raster(a: Path, b: Path) -> None:
    data_a, meta_a = pixels(a)
    data_b, meta_b = pixels(b)
    assert data_a.dtype == data_b.dtype and meta_a == meta_b
    np.testing.assert_array_equal(data_a, data_b)


def test_in_order_holds_early_results_until_those_before_them_came() -> None:
    arrivals = [(3, "d"), (1, "b"), (0, "a"), (4, "e"), (2, "c")]
    released: list[tuple[int, int]] = []  # (index released, arrivals consumed by then)
    consumed = 0

    def source() -> Iterator[tuple[int, str]]:
        nonlocal consumed
        for item in arrivals:
            consumed += 1
            yield item

    out = []
    for i, value in tiles.in_order(source()):
        out.append((i, value))
        released.append((i, consumed))
    assert out == [(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e")]
    assert released == [(0, 3), (1, 3), (2, 5), (3, 5), (4, 5)]  # each as soon as it can go


# ---------------------------------------------------------------------------------------------- calc


@pytest.mark.parametrize("output_type", [None, "Int16"])
def test_calc_named_inputs_identical_in_parallel(
    tmp_path: Path, small_tiles: int, parallel: ProcessMapper, output_type: str | None
) -> None:
    inputs = {"A": f"{RGB}:1", "B": f"{RGB}:2", "C": f"{RGB}:3"}
    expressions = ["(B - A) / (B + A - 100)", "log(A - 30) * 1000", "where(C > 120, A * 300, -B)"]
    paths = iter([tmp_path / "local.tif", tmp_path / "parallel.tif"])

    def job() -> Any:
        return calc(inputs, expressions, str(next(paths)), output_type=output_type)

    (summary_a, warnings_a), (summary_b, warnings_b) = both(parallel, job)
    assert summary_a.model_dump(exclude={"file_size"}) == summary_b.model_dump(exclude={"file_size"})
    # The counters of every tile add up: division by zero, NaN (log of <= 0), clamping to Int16.
    assert warnings_a == warnings_b
    assert any("divided by zero" in w for w in warnings_a) and any("NaN" in w for w in warnings_a)
    assert (output_type is None) != any("clamped" in w for w in warnings_a)
    assert_same_raster(tmp_path / "local.tif", tmp_path / "parallel.tif")
    # Independent reference for one band: numpy over the whole raster in memory.
    with rasterio.open(RGB) as ds:
        a, c = ds.read(1, masked=True).astype("float64"), ds.read(3, masked=True).astype("float64")
        b = ds.read(2, masked=True).astype("float64")
    masked = np.ma.getmaskarray(a) | np.ma.getmaskarray(b) | np.ma.getmaskarray(c)
    expected = np.where(c.data > 120, a.data * 300, -b.data)
    with rasterio.open(tmp_path / "parallel.tif") as out:
        band = out.read(3, masked=True)
    assert masked.any() and np.array_equal(np.ma.getmaskarray(band), masked)
    if output_type is None:
        np.testing.assert_array_equal(band.compressed(), expected[~masked].astype("float32"))


def test_calc_stack_identical_in_parallel(tmp_path: Path, small_tiles: int, parallel: ProcessMapper) -> None:
    inputs = [f"{RGB}:1", f"{RGB}:2", f"{RGB}:3"]
    expressions = ["median(S)", "count(S)", "std(S) / mean(S)"]
    paths = iter([tmp_path / "local.tif", tmp_path / "parallel.cog.tif"])
    formats = iter([None, "COG"])
    (_, warnings_a), (summary_b, warnings_b) = both(
        parallel, lambda: calc(inputs, expressions, str(next(paths)), format=next(formats))
    )
    assert warnings_a == warnings_b and any("no valid value in any of the 3 inputs" in w for w in warnings_a)
    assert summary_b.driver == "GTiff"  # a COG is a GTiff
    assert_same_raster_pixels(tmp_path / "local.tif", tmp_path / "parallel.cog.tif")
    with rasterio.open(RGB) as ds:
        stack = ds.read(masked=True).astype("float64")
    with rasterio.open(tmp_path / "parallel.cog.tif") as out:
        median, count = out.read(1, masked=True), out.read(2)
    np.testing.assert_array_equal(count, stack.count(axis=0))
    np.testing.assert_array_equal(median.filled(np.nan), np.ma.median(stack, axis=0).astype("float32").filled(np.nan))


def assert_same_raster_pixels(a: Path, b: Path) -> None:
    with rasterio.open(a) as da, rasterio.open(b) as db:
        assert (da.count, da.dtypes, da.nodata, da.transform) == (db.count, db.dtypes, db.nodata, db.transform)
        np.testing.assert_array_equal(da.read(), db.read())


# ---------------------------------------------------------------------------------------------- terrain


@pytest.mark.parametrize(
    "product,kwargs",
    [
        ("slope", {}),
        ("slope", {"compute_edges": True}),
        ("hillshade", {"hillshade_mode": "multidirectional", "compute_edges": True}),
        ("aspect", {"algorithm": "ZevenbergenThorne"}),
        ("tpi", {}),
        ("color-relief", {"colors": "terrain", "alpha": True}),  # percentages: the range pass runs in tiles too
    ],
)
def test_terrain_identical_in_parallel_and_to_one_tile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: ProcessMapper, product: str, kwargs: dict[str, Any]
) -> None:
    # One tile (the whole 403 x 344 DEM), then 7 x 6 tiles of 64 locally and in parallel: a tile's halo comes from
    # its neighbours, and the raster's own edges stay edges.
    terrain(DEM, str(tmp_path / "whole.tif"), product=product, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(tiles, "TILE_ALIGN", 32)
    monkeypatch.setattr(tiles, "MAX_TILE_SIDE", 64)
    assert len(tiles.plan(403, 344, bytes_per_pixel=4, halo=1)) == 42
    paths = iter([tmp_path / "local.tif", tmp_path / "parallel.tif"])
    (_, warnings_a), (_, warnings_b) = both(parallel, lambda: terrain(DEM, str(next(paths)), product=product, **kwargs))  # type: ignore[arg-type]
    assert warnings_a == warnings_b
    assert_same_raster(tmp_path / "local.tif", tmp_path / "parallel.tif")
    assert_same_raster(tmp_path / "whole.tif", tmp_path / "parallel.tif")


@pytest.mark.skipif(shutil.which("gdaldem") is None, reason="gdaldem (Debian gdal-bin) is not installed here")
def test_tiled_slope_is_gdaldems(tmp_path: Path, small_tiles: int, parallel: ProcessMapper) -> None:
    import subprocess

    subprocess.run(
        ["gdaldem", "slope", "-s", "111120", "-compute_edges", DEM, str(tmp_path / "ref.tif")], check=True, capture_output=True
    )
    with tiles.using(parallel):
        terrain(DEM, str(tmp_path / "ours.tif"), product="slope", compute_edges=True, scale=111120)  # gdaldem -s
    with rasterio.open(tmp_path / "ref.tif") as ref, rasterio.open(tmp_path / "ours.tif") as ours:
        np.testing.assert_allclose(ours.read(1), ref.read(1), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    "path,kwargs",
    [
        (RGB, {"histogram_bins": 16}),  # Byte, 3 bands, nodata: one pass
        (SLOPE, {"percentiles": [0, 2, 50, 97.5, 100], "histogram_bins": 50}),  # Float32: two passes
        (DEM, {"percentiles": [1, 50, 99.9]}),  # Int16, geographic
    ],
)
def test_raster_stats_identical_in_parallel(
    path: str, kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch, parallel: ProcessMapper
) -> None:
    monkeypatch.setattr(tiles, "TILE_ALIGN", 16)  # 16 x 16 tiles: 30 on slope.tif, 50 x 45 on RGB.byte.tif
    monkeypatch.setattr(tiles, "MAX_TILE_SIDE", 16)
    local, spread = both(parallel, lambda: raster_stats(path, **kwargs))
    assert local == spread
    with rasterio.open(path) as ds:
        for band in spread.bands:
            v = ds.read(band.index, masked=True).compressed()
            assert band.valid_count == v.size and (band.min, band.max) == (float(v.min()), float(v.max()))
            assert band.percentiles == {k: float(np.percentile(v, float(k))) for k in band.percentiles}
            assert band.mean == pytest.approx(float(v.astype("float64").mean()), rel=1e-12)


def test_raster_stats_float64_four_passes_identical_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: ProcessMapper
) -> None:
    import gdal_mcp.engine.raster.stats as stats_module

    monkeypatch.setattr(stats_module, "COLLECT_LIMIT", 40)  # every refinement step: counted and collected keys
    monkeypatch.setattr(tiles, "TILE_ALIGN", 16)
    monkeypatch.setattr(tiles, "MAX_TILE_SIDE", 32)
    with rasterio.open(SLOPE) as ds:
        data = ds.read(1).astype("float64") * np.pi
        profile = dict(ds.profile, dtype="float64")
    data[::7, ::5] = data[3, 3]  # many equal values around one rank
    path = tmp_path / "f64.tif"
    with rasterio.open(path, "w", **profile) as out:
        out.write(data, 1)
    messages: list[str] = []
    local, spread = both(
        parallel,
        lambda: raster_stats(
            str(path), percentiles=[0, 25, 50, 99], histogram_bins=7, progress=lambda f, m="": messages.append(m)
        ),
    )
    assert local == spread and messages[-1] == "statistics done in 4 pass(es)"
    v = data[data != -9999]
    assert spread.bands[0].percentiles == {k: float(np.percentile(v, float(k))) for k in ("0", "25", "50", "99")}


def test_class_areas_identical_in_parallel(small_tiles: int, parallel: ProcessMapper) -> None:
    # Projected (one area per pixel) and geographic (a geodesic area per row) rasters.
    for path in (RGB, DEM):
        local, spread = both(parallel, lambda path=path: categories(path, bands=[1]))
        assert local == spread
        with rasterio.open(path) as ds:
            v = ds.read(1, masked=True).compressed()
        keys, counts = np.unique(v, return_counts=True)
        assert [(c.value, c.count) for c in spread.bands[0].classes] == list(zip(keys.tolist(), counts.tolist(), strict=True))


# ---------------------------------------------------------------------------------------------- zonal


def test_zonal_stats_identical_in_parallel_and_to_one_tile(monkeypatch: pytest.MonkeyPatch, parallel: ProcessMapper) -> None:
    whole, _ = zonal_stats(SLOPE, POLYGONS, stats=ZONAL_ALL, all_touched=True)
    monkeypatch.setattr(tiles, "TILE_ALIGN", 8)  # 16 x 16 tiles: each zone reaches 2 of them
    monkeypatch.setattr(tiles, "MAX_TILE_SIDE", 16)
    local, spread = both(parallel, lambda: zonal_stats(SLOPE, POLYGONS, stats=ZONAL_ALL, all_touched=True))
    assert local == spread
    # Against one tile: the same pixels (counts, values, order statistics); the sums in another order.
    for a, b in zip(whole.rows, spread[0].rows, strict=True):
        for key in a:
            assert b[key] == (pytest.approx(a[key], rel=1e-12) if key in ("mean", "sum", "std") else a[key]), key


def test_zonal_categorical_and_points_identical_in_parallel(tmp_path: Path, small_tiles: int, parallel: ProcessMapper) -> None:
    # Zones over the geographic DEM: a polygon over many tiles (clipped per tile), a multipolygon, an empty one
    # and points.
    with rasterio.open(DEM) as ds:
        b = ds.bounds
    w, h = b.right - b.left, b.top - b.bottom
    zones = [
        shapely.Point(b.left + 0.5 * w, b.bottom + 0.5 * h).buffer(0.4 * h),
        shapely.MultiPolygon(
            [
                shapely.box(b.left, b.bottom, b.left + 0.1 * w, b.bottom + 0.1 * h),
                shapely.box(b.right - 0.2 * w, b.top - 0.3 * h, b.right + w, b.top + h),
            ]
        ),
        shapely.Polygon(),
        shapely.MultiPoint([(b.left + 0.3 * w, b.bottom + 0.3 * h), (b.left + 0.31 * w, b.bottom + 0.3 * h)]),
    ]
    path = str(tmp_path / "zones.gpkg")
    pyogrio.raw.write(
        path, shapely.to_wkb(np.asarray(zones, dtype=object)), [np.arange(4)], ["n"], geometry_type="Unknown", crs="EPSG:4326"
    )
    stats = ["count", "mean", "median", "majority", "percentile_75", "nodata"]
    paths = iter([tmp_path / "local.gpkg", tmp_path / "parallel.gpkg"])
    local, spread = both(parallel, lambda: zonal_stats(DEM, path, stats=stats, categorical=True, dst=str(next(paths))))
    assert local[0].rows == spread[0].rows and local[1] == spread[1]
    assert [r["count"] for r in spread[0].rows][2:] == [0, 2]
    a = pyogrio.raw.read(str(tmp_path / "local.gpkg"))[3]
    b_ = pyogrio.raw.read(str(tmp_path / "parallel.gpkg"))[3]
    assert [repr(x.tolist()) for x in a] == [repr(y.tolist()) for y in b_]  # NaN for the empty zone too
    # Independent reference for the circle: numpy over the whole band with rasterio's geometry mask.
    from rasterio.features import geometry_mask

    with rasterio.open(DEM) as ds:
        data = ds.read(1)
        inside = ~geometry_mask([zones[0]], out_shape=data.shape, transform=ds.transform)
    values = data[inside]
    first = spread[0].rows[0]
    assert first["count"] == values.size and first["median"] == float(np.median(values))
    assert first["percentile_75"] == float(np.percentile(values, 75))
    assert sum(c["count"] for c in first["classes"].values()) == values.size


@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_raster_stats_thresholds_and_area_weights_identical_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: ProcessMapper, dtype: str
) -> None:
    """Area sums, weighted moments and weighted key histograms are floats: merged in tile order, they are the same
    whichever order the tiles came in (int16: one weighted bincount; float32: weighted refinement passes)."""
    import gdal_mcp.engine.raster.stats as stats_module

    monkeypatch.setattr(stats_module, "COLLECT_LIMIT", 40)
    monkeypatch.setattr(tiles, "TILE_ALIGN", 16)
    monkeypatch.setattr(tiles, "MAX_TILE_SIDE", 32)
    with rasterio.open(DEM) as ds:
        data = ds.read(1).astype(dtype) + (np.float32(0.25) if dtype == "float32" else 0)
        profile = dict(ds.profile, dtype=dtype)
    path = tmp_path / "dem.tif"
    with rasterio.open(path, "w", **profile) as out:
        out.write(data, 1)
    levels = [float(np.median(data)), 300.5]
    local, spread = both(parallel, lambda: raster_stats(str(path), thresholds=levels, weights="area", percentiles=[10, 50, 90]))
    assert local == spread and spread.weights == "area"
    t = spread.bands[0].thresholds
    assert [x.above.count for x in t] == [int((data > level).sum()) for level in levels]


def test_zonal_thresholds_identical_in_parallel(tmp_path: Path, small_tiles: int, parallel: ProcessMapper) -> None:
    with rasterio.open(DEM) as ds:
        b = ds.bounds
        data = ds.read(1)
    w, h = b.right - b.left, b.top - b.bottom
    zones = [shapely.Point(b.left + 0.5 * w, b.bottom + 0.5 * h).buffer(0.4 * h), shapely.box(b.left, b.bottom, b.right, b.top)]
    path = str(tmp_path / "zones.gpkg")
    pyogrio.raw.write(
        path, shapely.to_wkb(np.asarray(zones, dtype=object)), [np.arange(2)], ["n"], geometry_type="Polygon", crs="EPSG:4326"
    )
    level = float(np.median(data))
    local, spread = both(parallel, lambda: zonal_stats(DEM, path, stats=["count"], thresholds=[level]))
    assert local == spread
    whole = spread[0].rows[1]
    token = str(int(level)) if level.is_integer() else str(level).replace(".", "_")
    assert whole[f"above_{token}_count"] == int((data > level).sum()) and whole["count"] == data.size
