"""sample_layer (extract values to points): against gdallocationinfo and the raster's own arrays."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import rasterio
import shapely
from pyproj import Transformer

import gdal_mcp.engine.features.sample_points as sample_module
from gdal_mcp.engine.features.sample_points import sample_layer
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

SLOPE = str(DATA / "raster" / "slope.tif")
RGB = str(DATA / "raster" / "RGB.byte.tif")
POINTS = str(DATA / "vector" / "points.shp")
POLYGONS = str(DATA / "vector" / "polygons.shp")


def gdallocationinfo(path: str, x: float, y: float, *extra: str) -> list[float] | None:
    """Values printed by gdallocationinfo -valonly (None: off the raster)."""
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
    values = out.stdout.split()
    return [float(v) for v in values] if values else None


def read(path: str) -> tuple[dict, np.ndarray, dict]:
    meta, _, wkb, fields = pyogrio.raw.read(path)
    return meta, wkb, dict(zip(meta["fields"], fields, strict=True))


def test_points_on_slope_match_gdallocationinfo(tmp_path: Path) -> None:
    """points.shp and slope.tif share a custom Albers CRS: no reprojection."""
    res, warnings = sample_layer(SLOPE, POINTS, str(tmp_path / "out.gpkg"))
    assert warnings == [] and res.sampled == 3 and res.bands == [1] and res.points == []
    assert res.summary is not None and res.summary.feature_count == 3 and res.summary.fields == ["id", "band_1"]
    meta_in, wkb_in, fields_in = read(POINTS)
    meta, wkb, fields = read(str(tmp_path / "out.gpkg"))
    assert list(fields["id"]) == list(fields_in["id"])
    assert list(wkb) == list(wkb_in), "geometries are written unchanged"
    for g, value in zip(shapely.from_wkb(wkb_in), fields["band_1"], strict=True):
        assert gdallocationinfo(SLOPE, g.x, g.y, "-geoloc") == [pytest.approx(value)]
        with rasterio.open(SLOPE) as ds:
            assert float(next(ds.sample([(g.x, g.y)]))[0]) == value


def lonlat_points(path: Path) -> tuple[str, list[tuple[int, int] | None]]:
    """City-like points in EPSG:4326 over RGB.byte.tif (UTM 18N): pixel centres (one of them nodata), one point far
    away (Paris) and one feature without geometry; attributes name and pop."""
    cells = [(359, 400), (100, 200), (700, 780), (0, 0)]
    with rasterio.open(RGB) as ds:
        to_ll = Transformer.from_crs(ds.crs.to_wkt(), "EPSG:4326", always_xy=True)
        xy = [ds.xy(r, c) for r, c in cells]
    ll = [to_ll.transform(x, y) for x, y in xy] + [(2.35, 48.85)]
    geoms = [shapely.Point(p) for p in ll] + [None]
    names = np.array(["a", "b", "c", "corner", "paris", "nowhere"], dtype=object)
    pops = np.array([10, 20, 30, 40, 2_100_000, 0], dtype="int64")
    pyogrio.raw.write(
        str(path),
        np.array(shapely.to_wkb(np.array(geoms, dtype=object)), dtype=object),
        [names, pops],
        ["name", "pop"],
        geometry_type="Point",
        crs="EPSG:4326",
    )
    return str(path), [*cells, None, None]


def test_lonlat_points_are_reprojected_to_the_raster(tmp_path: Path) -> None:
    points, cells = lonlat_points(tmp_path / "cities.gpkg")
    res, warnings = sample_layer(RGB, points, str(tmp_path / "values.shp"))
    assert res.sampled == 4 and res.crs == "EPSG:32618"
    assert any("1 point(s) lie outside" in w for w in warnings) and any("no geometry" in w for w in warnings)
    meta, wkb, fields = read(str(tmp_path / "values.shp"))
    _, wkb_in, fields_in = read(points)
    assert list(fields["name"]) == list(fields_in["name"]) and list(fields["pop"]) == list(fields_in["pop"])
    assert meta["crs"] == "EPSG:4326"
    assert shapely.equals_exact(shapely.from_wkb(wkb[:5]), shapely.from_wkb(wkb_in[:5]), 1e-12).all()
    with rasterio.open(RGB) as ds:
        arr = ds.read(masked=True)
    for i, cell in enumerate(cells):
        got = [fields[f"band_{b}"][i] for b in (1, 2, 3)]
        if cell is None or arr.mask[0][cell]:
            assert all(v is None or (isinstance(v, float) and np.isnan(v)) for v in got), (i, got)
            continue
        assert got == [int(arr[b][cell]) for b in range(3)]
        x, y = shapely.from_wkb(wkb_in[i]).coords[0]
        assert gdallocationinfo(RGB, x, y, "-wgs84") == got


def test_nodata_and_off_raster_are_null_in_gpkg(tmp_path: Path) -> None:
    points, cells = lonlat_points(tmp_path / "cities.gpkg")
    sample_layer(RGB, points, str(tmp_path / "v.gpkg"), bands=[2])
    table = pyogrio.raw.read_arrow(str(tmp_path / "v.gpkg"))[1]
    values = table.column("band_2").to_pylist()
    with rasterio.open(RGB) as ds:
        band = ds.read(2, masked=True)
    assert values[:3] == [None if band.mask[c] else int(band.data[c]) for c in cells[:3]]
    assert values[3:] == [None, None, None] and isinstance(values[0], int)
    assert "band_1" not in table.column_names


def test_streamed_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    with rasterio.open(SLOPE) as ds:
        arr = ds.read(1, masked=True)
        rows, cols = rng.integers(0, ds.height, 500), rng.integers(0, ds.width, 500)
        xy = [ds.xy(int(r), int(c)) for r, c in zip(rows, cols, strict=True)]
        crs = ds.crs.to_wkt()
    src = tmp_path / "many.fgb"
    pyogrio.raw.write(
        str(src),
        np.array(shapely.to_wkb(shapely.points(xy)), dtype=object),
        [np.arange(500)],
        ["k"],
        geometry_type="Point",
        crs=crs,
    )
    monkeypatch.setattr(sample_module, "POINT_BATCH", 37)
    messages: list[str] = []
    res, _ = sample_layer(SLOPE, str(src), str(tmp_path / "many_out.gpkg"), progress=lambda f, m="": messages.append(m))
    assert len(messages) >= 500 // 37
    table = pyogrio.raw.read_arrow(str(tmp_path / "many_out.gpkg"))[1]
    order = np.asarray(table.column("k"))
    got = table.column("band_1").to_pylist()
    expect = [None if arr.mask[r, c] else float(arr.data[r, c]) for r, c in zip(rows, cols, strict=True)]
    assert [got[i] for i in np.argsort(order)] == expect
    assert res.sampled == 500


def test_refuses_polygons(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        sample_layer(SLOPE, POLYGONS, str(tmp_path / "x.gpkg"))
    assert e.value.code == "invalid-argument" and "zonal_stats" in e.value.message
