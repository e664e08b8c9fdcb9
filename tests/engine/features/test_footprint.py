"""raster_footprint's engine (GDAL 3.12 gdal raster footprint) against an independent outline: the raster's validity
mask polygonized by rasterio.features.shapes and unioned by shapely, on the same pixels.

Tolerance: with max_points=None GDAL's outline is the exact pixel outline, so the symmetric difference is 0 up to
float noise (asserted < 1e-9 of the area). With GDAL's default max_points=100 the outline is simplified: asserted
within 0.5 % of the area (measured 0.22 % on RGB.byte.tif's collar, 0 on the synthetic raster's straight edges).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyogrio
import pytest
import rasterio
import rasterio.features
import shapely
from pyproj import Geod, Transformer
from rasterio.transform import from_origin
from shapely.geometry import shape

from gdal_mcp.engine.features.footprint import footprint
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")
PIXEL = 30.0
ORIGIN = (500000.0, 5000000.0)


def synthetic(path: Path, *, declared: bool = True) -> tuple[str, np.ndarray]:
    """A UTM 31N Byte raster of 120 x 100 pixels of 30 m: a nodata border (10 rows on top, 7 columns on the left),
    a 20 x 20 nodata hole inside, and a separate 4 x 4 island in the top border. Nodata 0 (declared or not)."""
    z = np.full((100, 120), 7, "uint8")
    z[:10, :] = 0
    z[:, :7] = 0
    z[40:60, 50:70] = 0
    z[2:6, 30:34] = 5  # an island, apart from the main body
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=120,
        height=100,
        count=1,
        dtype="uint8",
        crs="EPSG:32631",
        transform=from_origin(*ORIGIN, PIXEL, PIXEL),
        nodata=0 if declared else None,
    ) as ds:
        ds.write(z, 1)
    return str(path), z


def reference(valid: np.ndarray, transform) -> shapely.Geometry:
    """The valid pixels (valid != 0) as one shapely geometry: rasterio's polygonizer, unioned."""
    mask = (valid != 0).astype("uint8")
    polys = [shape(g) for g, _ in rasterio.features.shapes(mask, mask=mask.astype(bool), transform=transform)]
    return shapely.union_all(polys)


def written(path: str) -> shapely.Geometry:
    table = pyogrio.read_arrow(path)[1]
    column = next(f.name for f in table.schema if (f.metadata or {}).get(b"ARROW:extension:name") == b"geoarrow.wkb")
    return shapely.union_all(shapely.from_wkb(table.column(column).to_numpy(zero_copy_only=False)))


def mismatch(ours: shapely.Geometry, ref: shapely.Geometry) -> float:
    return ours.symmetric_difference(ref).area / ref.area


def test_exact_outline_with_border_hole_and_island(tmp_path: Path) -> None:
    src, z = synthetic(tmp_path / "s.tif")
    result, _ = footprint(src, str(tmp_path / "fp.gpkg"), max_points=None)
    ref = reference(z, from_origin(*ORIGIN, PIXEL, PIXEL))
    ours = written(str(tmp_path / "fp.gpkg"))
    assert mismatch(ours, ref) < 1e-9
    # Analytic: valid pixels x 900 m².
    assert result.area == pytest.approx(np.count_nonzero(z) * PIXEL**2, rel=1e-12)
    assert result.area_units == "metre" and result.summary.crs == "EPSG:32631"
    assert result.summary.feature_count == 1 and result.summary.geometry_type == "MultiPolygon"
    hole_centre = shapely.Point(ORIGIN[0] + 60 * PIXEL, ORIGIN[1] - 50 * PIXEL)
    assert not ours.contains(hole_centre) and len(ours.geoms) == 2  # the body (with its hole) and the island
    b = result.summary.extent
    assert (b.left, b.bottom, b.right, b.top) == pytest.approx(ref.bounds, abs=1e-6)
    # Geodesic area, independently: the reference's vertices to lon/lat, pyproj.Geod on WGS 84.
    to_lonlat = Transformer.from_crs("EPSG:32631", "EPSG:4326", always_xy=True)
    geo = shapely.transform(ref, lambda xy: np.column_stack(to_lonlat.transform(xy[:, 0], xy[:, 1])))
    expected = abs(Geod(ellps="WGS84").geometry_area_perimeter(shapely.orient_polygons(geo))[0])
    assert result.area_m2 == pytest.approx(expected, rel=1e-9)


def test_default_max_points_and_options(tmp_path: Path) -> None:
    src, z = synthetic(tmp_path / "s.tif")
    ref = reference(z, from_origin(*ORIGIN, PIXEL, PIXEL))
    footprint(src, str(tmp_path / "default.gpkg"))
    assert mismatch(written(str(tmp_path / "default.gpkg")), ref) <= 0.005
    # min_ring_area above the hole (400 px = 360 000 m²) and the island (16 px) drops both: the body's exterior.
    result, _ = footprint(src, str(tmp_path / "rings.gpkg"), min_ring_area=400 * PIXEL**2 + 1, max_points=None)
    assert result.area == pytest.approx((120 - 7) * (100 - 10) * PIXEL**2, rel=1e-12)
    # split_multipolygons: one feature per polygon; convex_hull of each.
    result, _ = footprint(src, str(tmp_path / "split.fgb"), split_multipolygons=True, max_points=None)
    assert result.summary.feature_count == 2 and result.summary.driver == "FlatGeobuf"
    assert result.area == pytest.approx(np.count_nonzero(z) * PIXEL**2, rel=1e-12)
    hull, _ = footprint(src, str(tmp_path / "hull.gpkg"), convex_hull=True, max_points=None)
    assert hull.area == pytest.approx(ref.convex_hull.area, rel=1e-9)
    # Nothing but the outputs is left in the directory (the staging GeoPackages are gone).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["default.gpkg", "hull.gpkg", "rings.gpkg", "s.tif", "split.fgb"]


def test_src_nodata_on_an_undeclared_border(tmp_path: Path) -> None:
    src, z = synthetic(tmp_path / "u.tif", declared=False)
    whole, _ = footprint(src, str(tmp_path / "whole.gpkg"), max_points=None)
    assert whole.area == pytest.approx(120 * 100 * PIXEL**2)  # no nodata declared: every pixel is valid
    result, _ = footprint(src, str(tmp_path / "collar.gpkg"), src_nodata=0, max_points=None)
    assert mismatch(written(str(tmp_path / "collar.gpkg")), reference(z, from_origin(*ORIGIN, PIXEL, PIXEL))) < 1e-9


def test_rgb_collar_union_intersection_and_lonlat(tmp_path: Path) -> None:
    with rasterio.open(RGB) as ds:
        masks = [ds.read_masks(b) for b in (1, 2, 3)]
        transform, crs = ds.transform, ds.crs
    union_ref = reference(np.maximum.reduce(masks), transform)
    inter_ref = reference(np.minimum.reduce(masks), transform)
    union, _ = footprint(RGB, str(tmp_path / "u.gpkg"), max_points=None)
    assert mismatch(written(str(tmp_path / "u.gpkg")), union_ref) < 1e-9
    inter, _ = footprint(RGB, str(tmp_path / "i.gpkg"), combine_bands="intersection", max_points=None)
    assert mismatch(written(str(tmp_path / "i.gpkg")), inter_ref) < 1e-9
    simplified, _ = footprint(RGB, str(tmp_path / "d.gpkg"))
    assert mismatch(written(str(tmp_path / "d.gpkg")), union_ref) <= 0.005
    assert shapely.get_num_coordinates(written(str(tmp_path / "d.gpkg"))) <= 110  # 100 per part, GDAL's default
    # In lon/lat: the reference's vertices transformed by pyproj; the geodesic area is the same in either CRS.
    lonlat, _ = footprint(RGB, str(tmp_path / "ll.geojson"), dst_crs="EPSG:4326", max_points=None)
    to_lonlat = Transformer.from_crs(crs.to_wkt(), "EPSG:4326", always_xy=True)
    geo_ref = shapely.transform(union_ref, lambda xy: np.column_stack(to_lonlat.transform(xy[:, 0], xy[:, 1])))
    assert mismatch(written(str(tmp_path / "ll.geojson")), geo_ref) < 1e-6
    assert lonlat.summary.crs == "EPSG:4326" and lonlat.area_units == "degree"
    assert lonlat.area_m2 == pytest.approx(union.area_m2, rel=1e-9)


def test_simplify_is_in_output_units(tmp_path: Path) -> None:
    ref, _ = footprint(RGB, str(tmp_path / "exact.gpkg"), max_points=None)
    coarse, _ = footprint(RGB, str(tmp_path / "s.gpkg"), simplify=2000.0, max_points=None)
    fewer = shapely.get_num_coordinates(written(str(tmp_path / "s.gpkg")))
    assert fewer < shapely.get_num_coordinates(written(str(tmp_path / "exact.gpkg"))) / 5
    assert math.isclose(coarse.area, ref.area, rel_tol=0.01)


def test_empty_footprint_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "empty.tif"
    with rasterio.open(path, "w", driver="GTiff", width=8, height=8, count=1, dtype="uint8", nodata=0,
                       crs="EPSG:32631", transform=from_origin(*ORIGIN, PIXEL, PIXEL)) as ds:  # fmt: skip
        ds.write(np.zeros((1, 8, 8), "uint8"))
    result, warnings = footprint(str(path), str(tmp_path / "e.gpkg"))
    assert result.summary.feature_count == 0 and result.area == 0 and any("no valid pixels" in w for w in warnings)
    bad = [
        ({"bands": [4]}, "do not exist"),
        ({"combine_bands": "all"}, "union or intersection"),
        ({"simplify": 0}, "simplify"),
        ({"min_ring_area": -1.0}, "min_ring_area"),
        ({"max_points": 3}, "max_points"),
        ({"dst_crs": "EPSG:99999999"}, "dst_crs"),
        ({"format": "NoSuchDriver"}, "vector format"),
    ]
    for kwargs, text in bad:
        with pytest.raises(GdalMcpError) as e:
            footprint(RGB, str(tmp_path / "bad.gpkg"), **kwargs)
        assert e.value.code == "invalid-argument" and text in e.value.message, (kwargs, e.value.message)
        assert not (tmp_path / "bad.gpkg").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".stage")]
