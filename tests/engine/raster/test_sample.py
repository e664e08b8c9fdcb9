"""sample (gdallocationinfo): values at points against the arrays, rasterio.sample and gdallocationinfo."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
import rasterio
from rasterio.warp import transform

from gdal_mcp.engine.raster.sample import sample
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

R = DATA / "raster"
RGB = str(R / "RGB.byte.tif")
SLOPE = str(R / "slope.tif")
FLOAT_NAN = str(R / "float_nan.tif")


def centre(ds, row: int, col: int) -> tuple[float, float]:
    x, y = ds.transform @ (col + 0.5, row + 0.5)
    return float(x), float(y)


def test_pixel_centres_equal_the_array() -> None:
    cells = [(0, 0), (359, 400), (100, 650), (717, 790), (500, 20), (359, 401)]
    with rasterio.open(RGB) as ds:
        arr = ds.read(masked=True)
        pts = [centre(ds, r, c) for r, c in cells]
    res = sample(RGB, pts)
    assert res.path == RGB and res.crs == "EPSG:32618" and res.bands == [1, 2, 3] and res.warnings == []
    for (r, c), (x, y), p in zip(cells, pts, res.points, strict=True):
        assert (p.x, p.y, p.row, p.col, p.inside) == (x, y, r, c, True)
        expected = [None if arr.mask[b, r, c] else float(arr.data[b, r, c]) for b in range(3)]
        assert p.values == expected
    assert res.points[0].values == [None, None, None], "the corner pixel is nodata 0"
    assert res.points[1].values == [float(v) for v in arr.data[:, 359, 400]] and None not in res.points[1].values


def test_pixel_edges_use_floor() -> None:
    with rasterio.open(SLOPE) as ds:
        t = ds.transform
        arr = ds.read(1)
    # Exactly on the top-left corner of pixel (row 10, col 20): that pixel; just before it: the neighbour.
    x, y = t @ (20, 10)
    res = sample(SLOPE, [(x, y), (x - 1e-6, y + 1e-6)], bands=[1])
    assert [(p.row, p.col) for p in res.points] == [(10, 20), (9, 19)]
    assert res.points[0].values == [float(arr[10, 20])]


def test_float32_nodata_and_nan() -> None:
    with rasterio.open(SLOPE) as ds:
        arr = ds.read(1)
        rows, cols = np.nonzero(arr == -9999)
        r, c = int(rows[0]), int(cols[0])
        nodata_pt = centre(ds, r, c)
        valid_pt = centre(ds, 40, 40)
    res = sample(SLOPE, [nodata_pt, valid_pt])
    assert res.points[0].values == [None] and res.points[0].inside and (res.points[0].row, res.points[0].col) == (r, c)
    assert res.points[1].values == [float(arr[40, 40])] and res.crs is not None
    # float_nan.tif: south-up transform (y grows with rows), NaN nodata at row 0, col 2.
    fn = sample(FLOAT_NAN, [(50, 50), (250, 50), (150, 150), (250, 199.9)])
    assert [(p.row, p.col) for p in fn.points] == [(0, 0), (0, 2), (1, 1), (1, 2)]
    assert [p.values[0] for p in fn.points] == [pytest.approx(1.41), None, pytest.approx(-0.23), pytest.approx(-1.88)]
    assert fn.crs is None


def test_outside_points() -> None:
    with rasterio.open(RGB) as ds:
        b = ds.bounds
        inside = centre(ds, 300, 300)
    pts = [(b.left - 1, b.top - 1), (b.right, b.top - 1), (b.left + 1, b.bottom), inside, (0.0, 0.0)]
    res = sample(RGB, pts, bands=[3, 1])
    assert [p.inside for p in res.points] == [False, False, False, True, False]
    for p in res.points[:3] + res.points[4:]:
        assert (p.row, p.col, p.values) == (None, None, [None, None])
    assert res.bands == [3, 1] and len(res.points[3].values) == 2
    assert any("4 of 5 point(s) lie outside" in w and "101985.0" in w for w in res.warnings)


def test_points_in_wgs84_match_rasterio_sample() -> None:
    lonlat = [(-77.5, 24.5), (-78.0, 25.0), (-77.2, 24.0), (-78.3, 24.8)]
    res = sample(RGB, lonlat, points_crs="EPSG:4326")
    with rasterio.open(RGB) as ds:
        xs, ys = transform("EPSG:4326", ds.crs, [p[0] for p in lonlat], [p[1] for p in lonlat])
        expected = list(ds.sample(zip(xs, ys, strict=True), masked=True))
        rowcols = [ds.index(x, y) for x, y in zip(xs, ys, strict=True)]
    for p, e, (r, c), (lon, lat) in zip(res.points, expected, rowcols, lonlat, strict=True):
        assert (p.x, p.y, p.inside, p.row, p.col) == (lon, lat, True, r, c)
        assert p.values == [None if m else float(v) for v, m in zip(e.data, np.ma.getmaskarray(e), strict=True)]
    assert res.points[0].values == [19.0, 23.0, 27.0]  # gdallocationinfo -wgs84 RGB.byte.tif -77.5 24.5


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"points": []}, "non-empty"),
        ({"points": [(1, 2, 3)]}, "[x, y]"),
        ({"points": [(1, float("nan"))]}, "not finite"),
        ({"points": [(0, 0)] * 10001}, "at most 10000"),
        ({"points": [(0, 0)], "bands": [9]}, "3 band(s)"),
        ({"points": [(0, 0)], "points_crs": "nonsense"}, "neither a CRS code"),
    ],
)
def test_invalid_arguments(kwargs: dict, needle: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        sample(RGB, **kwargs)
    assert e.value.code == "invalid-argument" and needle in e.value.message


def test_points_crs_needs_a_georeferenced_raster() -> None:
    with pytest.raises(GdalMcpError) as e:
        sample(FLOAT_NAN, [(0, 0)], points_crs="EPSG:4326")
    assert e.value.code == "invalid-argument" and "no CRS" in e.value.message


def test_many_points_read_few_windows() -> None:
    rng = np.random.default_rng(3)
    with rasterio.open(RGB) as ds:
        arr = ds.read(2, masked=True)
        rows = rng.integers(0, ds.height, 10000)
        cols = rng.integers(0, ds.width, 10000)
        pts = [centre(ds, int(r), int(c)) for r, c in zip(rows, cols, strict=True)]
    messages: list[str] = []
    res = sample(RGB, pts, bands=[2], progress=lambda f, m="": messages.append(m))
    got = [p.values[0] for p in res.points]
    assert got == [None if arr.mask[r, c] else float(arr.data[r, c]) for r, c in zip(rows, cols, strict=True)]
    # RGB.byte.tif has 3-row strips: points are grouped per strip, not read one by one.
    assert len(messages) <= 718 // 3 + 1 and messages[-1].startswith("sample: window")


def _gdallocationinfo(path: str, x: float, y: float, *extra: str) -> list[str]:
    exe = shutil.which("gdallocationinfo")
    if exe is None:
        pytest.skip("gdallocationinfo not on PATH (install Debian gdal-bin)")
    out = subprocess.run(
        [exe, "-valonly", *extra, path, repr(x), repr(y)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GDAL_PAM_ENABLED": "NO"},
    )
    return out.stdout.split()


def test_matches_gdallocationinfo() -> None:
    with rasterio.open(RGB) as ds:
        pts = [centre(ds, 359, 400), centre(ds, 0, 0), centre(ds, 600, 700), (ds.bounds.right + 10, ds.bounds.top)]
        nodata = ds.nodata
    res = sample(RGB, pts)
    for (x, y), p in zip(pts, res.points, strict=True):
        ref = _gdallocationinfo(RGB, x, y, "-geoloc")
        if not p.inside:
            assert ref == []  # "Location is off this file"
            continue
        # gdallocationinfo prints the stored nodata value; sample reports it as null.
        assert [None if float(v) == nodata else float(v) for v in ref] == p.values
    lonlat = (-78.0, 25.0)
    ref = _gdallocationinfo(RGB, *lonlat, "-wgs84")
    assert [float(v) for v in ref] == sample(RGB, [lonlat], points_crs="EPSG:4326").points[0].values
