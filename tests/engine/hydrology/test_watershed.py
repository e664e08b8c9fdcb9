"""watershed: two basins split by a ridge between cells (exact cell sets and areas, polygons and raster), snapping,
geodesic areas on lon/lat (against pyproj's area of the written polygons), and the Jacksboro DEM against pysheds."""

from __future__ import annotations

import math

import numpy as np
import pyogrio
import pytest
import rasterio
from pyproj import Geod
from rasterio.transform import from_origin

from gdal_mcp.engine.hydrology.flow import flow_direction
from gdal_mcp.engine.hydrology.watershed import watershed
from gdal_mcp.errors import GdalMcpError
from tests.engine.hydrology.dems import CELL, read, upstream_of, write_dem
from tests.engine.hydrology.reference import lonlat_reference
from tests.helpers import DATA

H, W = 12, 10


def two_basins() -> np.ndarray:
    """A ridge between columns 4 and 5 (no cell on it: no ties), each side falling away from it 1 m per cell and
    southwards 0.3 m per cell: columns 0-4 drain to the south-west corner, columns 5-9 to the south-east corner."""
    r, c = np.mgrid[0:H, 0:W]
    return 100.0 - np.abs(c - 4.5) - 0.3 * r


def centre(r: int, c: int) -> tuple[float, float]:
    return 500000.0 + (c + 0.5) * CELL, 4000000.0 - (r + 0.5) * CELL


def test_two_basins_split_exactly_at_the_ridge(tmp_path):
    src = write_dem(tmp_path / "two.tif", two_basins())
    points = [centre(H - 1, 0), centre(H - 1, W - 1)]
    result, _ = watershed(src, str(tmp_path / "ws.gpkg"), points=points, condition="none")
    left, right = result.basins
    assert left.snapped_cells == right.snapped_cells == H * 5
    assert left.area_m2 == pytest.approx(H * 5 * CELL * CELL, rel=1e-12)
    assert left.area_km2 == pytest.approx(H * 5 * CELL * CELL / 1e6, rel=1e-12)
    table = pyogrio.read_dataframe(tmp_path / "ws.gpkg")
    assert list(table["id"]) == [1, 2]
    # the polygons are exactly the cells of each side
    x0, x_mid, x1 = 500000.0, 500000.0 + 5 * CELL, 500000.0 + W * CELL
    y0, y1 = 4000000.0 - H * CELL, 4000000.0
    assert table.geometry[0].equals(__import__("shapely").box(x0, y0, x_mid, y1))
    assert table.geometry[1].equals(__import__("shapely").box(x_mid, y0, x1, y1))
    # the catchment as the cells whose expected path reaches the pour point
    flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    cells = upstream_of(read(tmp_path / "d8.tif"), H - 1, 0)
    assert cells == {(r, c) for r in range(H) for c in range(5)}


def test_raster_output_labels_each_side(tmp_path):
    src = write_dem(tmp_path / "two.tif", two_basins())
    points = [centre(H - 1, 0), centre(H - 1, W - 1)]
    watershed(src, str(tmp_path / "ws.tif"), points=points, condition="none", output_kind="raster")
    ids = read(tmp_path / "ws.tif")
    expected = np.where(np.arange(W) < 5, 1, 2)[None, :].repeat(H, 0)
    assert np.array_equal(ids, expected)


def test_snapping_moves_a_point_to_the_highest_accumulation_within_the_distance(tmp_path):
    src = write_dem(tmp_path / "two.tif", two_basins())
    # a point 2 cells east of the south-west outlet: within 25 m the outlet (60 cells) is the largest
    result, _ = watershed(src, str(tmp_path / "ws.gpkg"), points=[centre(H - 1, 2)], snap_distance=25.0, condition="none")
    b = result.basins[0]
    assert (b.snapped_x, b.snapped_y) == centre(H - 1, 0)
    assert b.moved_m == pytest.approx(20.0) and b.snapped_cells == H * 5
    # without snapping: the cell itself, whose catchment is its row's cells west of the ridge that reach it
    result, _ = watershed(src, str(tmp_path / "ws0.gpkg"), points=[centre(H - 1, 2)], condition="none")
    assert result.basins[0].snapped_cells == 3  # columns 2, 3 and 4 of the last row flow west through it


def test_points_crs_and_points_off_the_dem(tmp_path):
    src = write_dem(tmp_path / "two.tif", two_basins())
    from pyproj import Transformer

    lon, lat = Transformer.from_crs("EPSG:32633", "EPSG:4326", always_xy=True).transform(*centre(H - 1, 0))
    result, _ = watershed(src, str(tmp_path / "ws.gpkg"), points=[(lon, lat)], points_crs="EPSG:4326", condition="none")
    assert result.basins[0].snapped_cells == H * 5 and result.basins[0].x == lon
    with pytest.raises(GdalMcpError) as e:
        watershed(src, str(tmp_path / "off.gpkg"), points=[(0.0, 0.0)], condition="none")
    assert e.value.code == "invalid-argument" and "outside" in e.value.message


def test_lonlat_areas_are_geodesic(tmp_path):
    """The two basins on a lon/lat grid at 50 deg N: the area is the geodesic area of the cells (pyproj's area of the
    written polygon, computed independently of the per-row pixel areas)."""
    step = 0.01
    z = two_basins()
    src = write_dem(tmp_path / "ll.tif", z, crs="EPSG:4326", transform=from_origin(7.0, 50.0, step, step))
    points = [(7.0 + 0.5 * step, 50.0 - (H - 0.5) * step)]
    result, _ = watershed(src, str(tmp_path / "ws.gpkg"), points=points, condition="none")
    table = pyogrio.read_dataframe(tmp_path / "ws.gpkg")
    geod = Geod(ellps="WGS84")
    area = abs(geod.geometry_area_perimeter(table.geometry[0].segmentize(step / 8))[0])
    assert result.basins[0].area_m2 == pytest.approx(area, rel=1e-6)
    assert result.basins[0].snapped_cells == H * 5
    # on the ground a degree of longitude is cos(50) of one of latitude: far from step^2 * 111 km^2
    assert result.basins[0].area_m2 < 0.7 * H * 5 * (step * 111_320) ** 2


@pytest.mark.slow
def test_jacksboro_watersheds_agree_with_pysheds(tmp_path):
    """Catchment areas of pour points on the Jacksboro DEM (reprojected to UTM 17N at 80 m, bilinear: square
    pixels, so pysheds' D8 distances are the ground's too) against pysheds (GPL-3, a test-only dependency: its own
    depression filling, flat resolution (Garbrecht & Martz), D8 and catchment). Both snap each point to the highest
    accumulation within 400 m of it, each with its own accumulation."""
    if not hasattr(np, "in1d"):  # pysheds 0.5 still calls np.in1d, removed in numpy 2.4
        np.in1d = lambda a, b, **k: np.isin(a, b, **k)  # type: ignore[attr-defined]
    pysheds_grid = pytest.importorskip("pysheds.grid", reason="pysheds (dev dependency) is not installed")
    from rasterio.warp import Resampling, calculate_default_transform, reproject

    src = str(tmp_path / "utm.tif")
    with rasterio.open(DATA / "raster" / "jacksboro_dem.tif") as s:
        t, w, h = calculate_default_transform(s.crs, "EPSG:32617", s.width, s.height, *s.bounds, resolution=80)
        profile = s.profile | {"crs": "EPSG:32617", "transform": t, "width": w, "height": h, "dtype": "float32", "nodata": -9999}
        with rasterio.open(src, "w", **profile) as d:
            reproject(rasterio.band(s, 1), rasterio.band(d, 1), resampling=Resampling.bilinear, dst_nodata=-9999)
    grid = pysheds_grid.Grid.from_raster(src)
    dem = grid.read_raster(src)
    conditioned = grid.resolve_flats(grid.fill_depressions(grid.fill_pits(dem)))
    dirmap = (64, 128, 1, 2, 4, 8, 16, 32)
    fdir = grid.flowdir(conditioned, dirmap=dirmap)
    acc = np.asarray(grid.accumulation(fdir, dirmap=dirmap))
    rows, cols = np.mgrid[0:h, 0:w]
    xs, ys = t @ (cols + 0.5, rows + 0.5)
    points = []
    for size in (40000, 20000, 12000, 8000, 5000, 3000):  # pour points on pysheds' streams of these sizes (cells)
        i = int(np.argmin(np.abs(acc - size)))
        points.append((float(xs.flat[i]), float(ys.flat[i])))
    distance = 400.0
    result, _ = watershed(src, str(tmp_path / "ws.gpkg"), points=points, snap_distance=distance)
    for (x, y), basin in zip(points, result.basins, strict=True):
        near = np.hypot(xs - x, ys - y) <= distance
        j = int(np.argmax(np.where(near, acc, -1)))
        r, c = divmod(j, w)
        catchment = np.asarray(grid.catchment(x=c, y=r, fdir=fdir, dirmap=dirmap, xytype="index")).astype(bool)
        reference = catchment.sum() * 80.0 * 80.0
        assert basin.area_m2 == pytest.approx(reference, rel=0.01), (x, y, basin.snapped_cells, int(catchment.sum()))
        assert math.isclose(basin.area_km2 or 0, basin.area_m2 / 1e6)  # type: ignore[operator]


def test_jacksboro_lonlat_watersheds_agree_with_a_plain_python_reference(tmp_path):
    """The Jacksboro DEM as it is (lon/lat, Int16) against tests/engine/hydrology/reference.py (Priority-Flood+epsilon,
    D8 on ground distances, plain Python): pour points on the reference's streams of 600 to 40000 cells, each snapped
    by both to the highest accumulation within 400 m (each with its own accumulation). Most catchments agree within
    1 %; the others differ where an Int16 flat (equal heights on a valley floor, or a filled depression) drains two
    ways: the engine routes it to its nearest draining cell (breadth-first), the reference along its flood order, and
    the cells upstream of it (a few hundred, measured: 424 for the 20000-cell basin, 56 of them on flats) go to one
    basin or the other."""
    src = str(DATA / "raster" / "jacksboro_dem.tif")
    ref = lonlat_reference(src)
    with rasterio.open(src) as ds:
        t, (h, w) = ds.transform, ds.shape
    rows, cols = np.mgrid[0:h, 0:w]
    xs, ys = t @ (cols + 0.5, rows + 0.5)
    points = []
    for size in (40000, 30000, 20000, 15000, 12000, 8000, 5000, 3000, 2000, 1000, 600):
        i = int(np.argmin(np.abs(ref.acc - size)))
        points.append((float(xs.flat[i]), float(ys.flat[i])))
    distance = 400.0
    result, _ = watershed(src, str(tmp_path / "ws.gpkg"), points=points, snap_distance=distance)
    geod = Geod(ellps="WGS84")
    errors = []
    for (x, y), basin in zip(points, result.basins, strict=True):
        _, _, d = geod.inv(np.full(xs.size, x), np.full(xs.size, y), xs.ravel(), ys.ravel())
        j = int(np.argmax(np.where(d <= distance, ref.acc.ravel(), -1)))
        r, c = divmod(j, w)
        reference = ref.area(ref.catchment((r, c)))
        errors.append(abs(basin.area_m2 - reference) / reference)  # type: ignore[operator]
    assert sum(e <= 0.01 for e in errors) >= 2 * len(errors) / 3, errors
    assert max(errors) < 0.05, errors
