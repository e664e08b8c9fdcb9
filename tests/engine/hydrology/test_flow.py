"""D8 flow directions and accumulation on DEMs with analytic answers: tilted planes (one where a diagonal is the
steepest), a V-shaped valley, a lon/lat plane where the ground's east-west shrinking changes the direction, flats;
the accumulation counted by following the expected directions in plain Python."""

from __future__ import annotations

import math

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from gdal_mcp.engine.hydrology import grid as grid_module
from gdal_mcp.engine.hydrology.flow import flow_accumulation, flow_direction
from gdal_mcp.errors import GdalMcpError
from tests.engine.hydrology.dems import (
    CELL,
    STEP,
    flat_bfs,
    plane,
    plane_directions,
    read,
    upstream_counts,
    write_dem,
)


@pytest.mark.parametrize("azimuth", [10.0, 30.0, 100.0, 200.0, 250.0, 315.0, 340.0])
def test_tilted_plane_is_steepest_descent_everywhere(tmp_path, azimuth):
    shape = (9, 12)
    src = write_dem(tmp_path / "plane.tif", plane(shape, azimuth))
    summary, _ = flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    d8 = read(tmp_path / "d8.tif")
    expected = plane_directions(shape, azimuth)
    assert np.array_equal(d8, expected)
    assert summary.pits == 0 and summary.flat_cells == 0
    assert summary.outlets == int((expected == 0).sum())
    if azimuth == 30.0:  # the diagonal (NE, 45 deg) is the steepest inside the grid
        assert (d8[1:, :-1] == 128).all()


@pytest.mark.parametrize("azimuth", [30.0, 200.0])
def test_plane_accumulation_counts_every_upstream_cell(tmp_path, azimuth):
    shape = (9, 12)
    src = write_dem(tmp_path / "plane.tif", plane(shape, azimuth))
    flow_accumulation(src, str(tmp_path / "acc.tif"), condition="none", units="cells")
    acc = read(tmp_path / "acc.tif")
    assert np.array_equal(acc, upstream_counts(plane_directions(shape, azimuth)))
    assert acc.max() <= shape[0] * shape[1]


def valley(h: int = 15, w: int = 11, side: float = 1.0, tilt: float = 0.1) -> np.ndarray:
    """A V-shaped valley along the middle column, falling southwards: z = side*|c - c0| + tilt*(h - 1 - r) (metres
    per cell)."""
    r, c = np.mgrid[0:h, 0:w]
    return CELL * (side * np.abs(c - w // 2) + tilt * (h - 1 - r))


def test_v_valley_sides_flow_to_the_axis_and_the_axis_south(tmp_path):
    h, w = 15, 11
    src = write_dem(tmp_path / "valley.tif", valley(h, w))
    flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    d8 = read(tmp_path / "d8.tif")
    c0 = w // 2
    # sides: straight to the axis (drop 1 per cell beats the diagonal's (1 + 0.1) / sqrt(2) = 0.78)
    assert (d8[:, :c0] == 1).all() and (d8[:, c0 + 1 :] == 16).all()
    assert (d8[:-1, c0] == 4).all() and d8[-1, c0] == 0  # the axis runs south to its outlet on the edge
    flow_accumulation(src, str(tmp_path / "acc.tif"), condition="none")
    acc = read(tmp_path / "acc.tif")
    rows = np.arange(h)
    assert np.array_equal(acc[:, c0], (rows + 1) * w)  # each row's side cells join the axis in that row
    assert np.array_equal(acc[:, :c0], np.tile(np.arange(1, c0 + 1), (h, 1)))
    assert acc[-1, c0] == h * w


def test_area_units_are_cell_counts_times_cell_area(tmp_path):
    src = write_dem(tmp_path / "valley.tif", valley())
    flow_accumulation(src, str(tmp_path / "cells.tif"), condition="none")
    flow_accumulation(src, str(tmp_path / "km2.tif"), condition="none", units="km2")
    flow_accumulation(src, str(tmp_path / "m2.tif"), condition="none", units="m2")
    cells = read(tmp_path / "cells.tif").astype(float)
    np.testing.assert_allclose(read(tmp_path / "m2.tif"), cells * CELL * CELL, rtol=1e-12)
    np.testing.assert_allclose(read(tmp_path / "km2.tif"), cells * CELL * CELL / 1e6, rtol=1e-12)


def test_lonlat_plane_takes_the_grounds_distances(tmp_path):
    """Equal drops per degree east and north at 60 deg N: on square degrees NE would be steepest ((1 + 1) / sqrt(2)),
    but a degree of longitude is about half a degree of latitude on the ground there, so east is steepest:
    drop / distance is 1 / cos(60) = 2 east, 1 north, 2 / sqrt(cos(60)^2 + 1) = 1.79 north-east (ratios of the
    ground distance of a degree of latitude)."""
    h, w = 8, 8
    step = 0.001
    r, c = np.mgrid[0:h, 0:w]
    z = 500.0 - 5.0 * c + 5.0 * r  # falls 5 m per column eastwards and 5 m per row northwards
    lat = math.radians(60.0)
    ratios = {1: 1 / math.cos(lat), 64: 1.0, 128: 2 / math.hypot(math.cos(lat), 1.0)}
    assert max(ratios, key=lambda k: ratios[k]) == 1
    src = write_dem(tmp_path / "ll.tif", z, crs="EPSG:4326", transform=from_origin(10.0, 60.0 + h * step / 2, step, step))
    flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    d8 = read(tmp_path / "d8.tif")
    assert (d8[:, :-1] == 1).all()
    assert (d8[1:, -1] == 64).all() and d8[0, -1] == 0
    # the same grid in a projected CRS (square cells): the diagonal wins
    proj = write_dem(tmp_path / "sq.tif", z)
    flow_direction(proj, str(tmp_path / "d8sq.tif"), condition="none")
    assert (read(tmp_path / "d8sq.tif")[1:, :-1] == 128).all()


def test_flats_drain_to_the_nearest_draining_cell(tmp_path):
    """A flat plateau (50 m) in a 120 m rim, opening through one edge cell at 40 m on the south edge and falling on
    the east side: every flat cell points to a flat neighbour one breadth-first step nearer a draining cell."""
    h, w = 9, 10
    z = np.full((h, w), 120.0)
    z[1:-1, 1:-1] = 50.0
    z[-1, 3] = 40.0  # the exit on the south edge
    z[4, -1] = 30.0  # a second exit, on the east edge
    src = write_dem(tmp_path / "flat.tif", z)
    summary, warnings = flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    d8 = read(tmp_path / "d8.tif")
    lower = np.zeros((h, w), bool)
    for dr, dc in STEP.values():
        for r in range(h):
            for c in range(w):
                if 0 <= r + dr < h and 0 <= c + dc < w and z[r + dr, c + dc] < z[r, c]:
                    lower[r, c] = True
    dist = flat_bfs(z, lower)
    inner = np.zeros((h, w), bool)
    inner[1:-1, 1:-1] = True
    flat = inner & ~lower
    assert flat.sum() == summary.flat_cells > 0
    for r, c in zip(*np.nonzero(flat), strict=True):
        dr, dc = STEP[int(d8[r, c])]
        assert z[r + dr, c + dc] == z[r, c]
        assert dist[r + dr, c + dc] == dist[r, c] - 1
    assert summary.pits == 0
    assert any("flats" in w for w in warnings)


def test_a_closed_pit_stays_a_pit_unless_conditioned(tmp_path):
    z = np.full((7, 7), 10.0)
    z[3, 3] = 2.0
    src = write_dem(tmp_path / "pit.tif", z)
    summary, warnings = flow_direction(src, str(tmp_path / "raw.tif"), condition="none")
    assert read(tmp_path / "raw.tif")[3, 3] == 0 and summary.pits == 1
    assert any("dem_condition" in w for w in warnings)
    summary, _ = flow_direction(src, str(tmp_path / "filled.tif"))  # condition="fill" by default
    assert summary.pits == 0 and summary.cells_raised == 1


def test_nodata_is_never_flowed_into_and_its_border_is_an_outlet(tmp_path):
    z = plane((8, 8), 0.0)  # falls east
    z[:, 5] = -9999.0  # a nodata column
    src = write_dem(tmp_path / "nd.tif", z)
    flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    d8 = read(tmp_path / "d8.tif")
    assert (d8[:, 5] == 247).all()
    assert (d8[:, 4] == 0).all()  # no lower valid neighbour; next to nodata: outlets
    assert (d8[:, :4] == 1).all()


def test_flow_accumulation_reads_a_flow_direction_raster(tmp_path):
    src = write_dem(tmp_path / "valley.tif", valley())
    flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    flow_accumulation(str(tmp_path / "d8.tif"), str(tmp_path / "acc.tif"), input_type="flow_direction")
    assert np.array_equal(read(tmp_path / "acc.tif"), upstream_counts(read(tmp_path / "d8.tif")))
    with pytest.raises(GdalMcpError) as e:
        flow_accumulation(src, str(tmp_path / "bad.tif"), input_type="flow_direction")
    assert e.value.code == "invalid-argument"


def test_pyflwdir_reads_our_codes_as_we_write_them(tmp_path):
    """The encoding handed to pyflwdir: each code's downstream cell is the neighbour our table names."""
    import pyflwdir

    d8 = np.zeros((3, 3), dtype=np.uint8)
    for code, (dr, dc) in STEP.items():
        d8[:] = 0
        d8[1, 1] = code
        flw = pyflwdir.from_array(d8, ftype="d8")
        assert flw.idxs_ds[4] == (1 + dr) * 3 + (1 + dc)


def test_a_dem_over_the_cell_limit_is_refused(tmp_path, monkeypatch):
    src = write_dem(tmp_path / "big.tif", valley())
    monkeypatch.setattr(grid_module, "MAX_CELLS", 100)
    with pytest.raises(GdalMcpError) as e:
        flow_direction(src, str(tmp_path / "d8.tif"))
    assert e.value.code == "resource-limit" and "raster_clip" in e.value.message


def test_output_is_uint8_with_nodata_247(tmp_path):
    src = write_dem(tmp_path / "valley.tif", valley())
    flow_direction(src, str(tmp_path / "d8.tif"))
    with rasterio.open(tmp_path / "d8.tif") as ds:
        assert ds.dtypes[0] == "uint8" and ds.nodata == 247


@pytest.mark.parametrize(
    ("lower", "winner"),
    [((1, 4), 1), ((4, 16), 4), ((16, 64), 16), ((1, 64), 1), ((2, 8), 2), ((8, 32), 8), ((32, 128), 32), ((2, 128), 2)],
)
def test_exact_ties_go_to_the_first_of_e_se_s_sw_w_nw_n_ne(tmp_path, lower, winner):
    """The centre of a 5 x 5 block at 50 m has two neighbours at exactly the same drop over the same distance (both
    cardinal or both diagonal), every other cell 100 m: the one first in the order E, SE, S, SW, W, NW, N, NE wins."""
    z = np.full((5, 5), 100.0)
    z[2, 2] = 50.0
    for code in lower:
        dr, dc = STEP[code]
        z[2 + dr, 2 + dc] = 40.0
    src = write_dem(tmp_path / "tie.tif", z)
    flow_direction(src, str(tmp_path / "d8.tif"), condition="none")
    assert read(tmp_path / "d8.tif")[2, 2] == winner
