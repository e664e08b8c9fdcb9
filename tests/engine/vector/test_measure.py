"""vector_measure engine: geodesic measures against pyproj.Geod, planar ones against shapely."""

from __future__ import annotations

from pathlib import Path

import geopandas
import numpy as np
import pyogrio
import pytest
import shapely
from pyproj import Geod

from gdal_mcp.engine.vector.measure import measure
from gdal_mcp.errors import GdalMcpError

DATA = Path(__file__).parents[2] / "data" / "vector"


def test_geodesic_areas_of_countries_equal_pyproj() -> None:
    df = geopandas.read_file(DATA / "naturalearth_lowres.shp")
    result, _ = measure(
        str(DATA / "naturalearth_lowres.shp"), measures=["area", "perimeter"], units="km", limit=1000, id_field="name"
    )
    assert result.method == "geodesic" and result.row_count == len(rows := result.rows) == 177
    geod = Geod(ellps="WGS84")
    for row, geom in zip(rows, df.geometry, strict=True):
        area, _ = geod.geometry_area_perimeter(shapely.orient_polygons(geom))
        assert row["area_km2"] == pytest.approx(abs(area) / 1e6, rel=1e-9), row["name"]
        rings = [r for p in getattr(geom, "geoms", [geom]) for r in (p.exterior, *p.interiors)]
        assert row["perimeter_km"] == pytest.approx(sum(geod.line_length(*r.xy) for r in rings) / 1e3, rel=1e-9)
    assert result.totals["area_km2"] == pytest.approx(sum(r["area_km2"] for r in rows), rel=1e-12)


def test_planar_measures_on_projected_layer_equal_shapely(tmp_path: Path) -> None:
    df = geopandas.read_file(DATA / "polygons.shp")
    result, warnings = measure(str(DATA / "polygons.shp"), units="ha")
    assert result.method == "planar" and not warnings  # custom Albers: equal-area, no distortion warning
    for row, geom in zip(result.rows, df.geometry, strict=True):
        assert row["area_ha"] == pytest.approx(geom.area / 1e4, rel=1e-12)
        assert row["perimeter_m"] == pytest.approx(geom.length, rel=1e-12)
        assert (row["centroid_x"], row["centroid_y"]) == pytest.approx((geom.centroid.x, geom.centroid.y))
        assert [row[k] for k in ("min_x", "min_y", "max_x", "max_y")] == list(geom.bounds)
    lines = geopandas.read_file(DATA / "lines.shp")
    res, _ = measure(str(DATA / "lines.shp"), measures=["length", "area"], units="ft")
    for row, geom in zip(res.rows, lines.geometry, strict=True):
        assert row["length_ft"] == pytest.approx(geom.length / 0.3048, rel=1e-12) and row["area_ft2"] == 0


def test_output_adds_fields_and_paging(tmp_path: Path) -> None:
    dst = tmp_path / "m.gpkg"
    result, _ = measure(str(DATA / "naturalearth_lowres.shp"), dst=str(dst), measures=["area", "centroid"])
    assert result.summary is not None and result.summary.feature_count == 177 and not result.rows
    _, _, _, fields = pyogrio.raw.read(dst, columns=["name", "area_m2", "centroid_x", "centroid_y"])
    page, _ = measure(str(DATA / "naturalearth_lowres.shp"), measures=["area", "centroid"], limit=10, offset=170)
    assert [r["index"] for r in page.rows] == list(range(170, 177)) and page.remaining == 0
    np.testing.assert_allclose(fields[1][170:], [r["area_m2"] for r in page.rows], rtol=1e-12)
    # ground centroids lie inside (or near) their country, unlike nothing in degrees far from it
    inside = shapely.contains(
        geopandas.read_file(DATA / "naturalearth_lowres.shp").geometry.values.buffer(0.5), shapely.points(fields[2], fields[3])
    )
    assert inside.mean() > 0.9


def test_bad_arguments() -> None:
    with pytest.raises(GdalMcpError):
        measure(str(DATA / "polygons.shp"), measures=["volume"])
    with pytest.raises(GdalMcpError):
        measure(str(DATA / "polygons.shp"), units="deg")


def _geodesic_reference(df: geopandas.GeoDataFrame, ellps: str) -> list[tuple[float, float, float]]:
    """(area m², perimeter m, length m) of each geometry, taken to its CRS's lon/lat by geopandas and measured
    with pyproj.Geod on the ellipsoid."""
    geod = Geod(ellps=ellps)
    out = []
    for geom in df.to_crs(df.crs.geodetic_crs).geometry:
        parts = list(getattr(geom, "geoms", [geom]))
        polys = [p for p in parts if p.geom_type == "Polygon"]
        lines = [p for p in parts if p.geom_type == "LineString"]
        area = sum(abs(geod.geometry_area_perimeter(shapely.orient_polygons(p))[0]) for p in polys)
        perim = sum(geod.line_length(*r.xy) for p in polys for r in (p.exterior, *p.interiors))
        out.append((area, perim, sum(geod.line_length(*ln.xy) for ln in lines)))
    return out


def test_geodesic_on_a_projected_layer_equals_pyproj_on_its_lonlat(tmp_path: Path) -> None:
    world = geopandas.read_file(DATA / "naturalearth_lowres.shp")
    mercator = tmp_path / "mercator.gpkg"
    world.to_crs("EPSG:3857").to_file(mercator)
    where = "continent <> 'Antarctica'"  # (Web Mercator stops at 85°)
    result, warnings = measure(str(mercator), measures=["area", "perimeter"], geodesic=True, where=where, limit=1000)
    kept = geopandas.read_file(mercator).query("continent != 'Antarctica'")
    assert result.method == "geodesic" and result.row_count == len(result.rows) == len(kept) == 176
    assert not any("equal-area" in w for w in warnings)
    for row, (area, perim, _) in zip(result.rows, _geodesic_reference(kept, "WGS84"), strict=True):
        assert row["area_m2"] == pytest.approx(area, rel=1e-9)
        assert row["perimeter_m"] == pytest.approx(perim, rel=1e-9)
    # the same countries measured from their lon/lat originals: the projection no longer matters
    lonlat, _ = measure(str(DATA / "naturalearth_lowres.shp"), measures=["area"], where=where, limit=1000)
    np.testing.assert_allclose([r["area_m2"] for r in result.rows], [r["area_m2"] for r in lonlat.rows], rtol=1e-6)
    planar, _ = measure(str(mercator), measures=["area"], where=where, limit=1000)
    assert planar.method == "planar" and planar.totals["area_m2"] > 2 * result.totals["area_m2"]  # Mercator's inflation


def test_geodesic_on_custom_albers_polygons_and_utm_lines(tmp_path: Path) -> None:
    polys = geopandas.read_file(DATA / "polygons.shp")
    result, _ = measure(str(DATA / "polygons.shp"), measures=["area", "perimeter"], geodesic=True)
    for row, (area, perim, _) in zip(result.rows, _geodesic_reference(polys, "GRS80"), strict=True):
        assert row["area_m2"] == pytest.approx(area, rel=1e-9) and row["perimeter_m"] == pytest.approx(perim, rel=1e-9)
    lines = geopandas.read_file(DATA / "lines.shp")
    res, _ = measure(str(DATA / "lines.shp"), measures=["length"], geodesic=True, units="km")
    for row, (_, _, length) in zip(res.rows, _geodesic_reference(lines, "GRS80"), strict=True):
        assert row["length_km"] == pytest.approx(length / 1000, rel=1e-9)


def test_where_measures_only_the_matching_features(tmp_path: Path) -> None:
    df = geopandas.read_file(DATA / "naturalearth_lowres.shp")
    africa = df[df.continent == "Africa"]
    page, _ = measure(str(DATA / "naturalearth_lowres.shp"), measures=["area"], where="continent = 'Africa'", id_field="name")
    assert [r["name"] for r in page.rows] == africa["name"].tolist() and page.row_count == len(africa)
    assert [r["index"] for r in page.rows] == list(range(len(africa)))
    geod = Geod(ellps="WGS84")
    expected = sum(abs(geod.geometry_area_perimeter(shapely.orient_polygons(g))[0]) for g in africa.geometry)
    assert page.totals["area_m2"] == pytest.approx(expected, rel=1e-9)
    dst = tmp_path / "africa.gpkg"
    written, _ = measure(str(DATA / "naturalearth_lowres.shp"), dst=str(dst), measures=["area"], where="continent = 'Africa'")
    assert written.summary is not None and written.summary.feature_count == len(africa)
    with pytest.raises(GdalMcpError) as e:
        measure(str(DATA / "naturalearth_lowres.shp"), where="continent > 5")
    assert e.value.code == "invalid-argument" and "'continent'" in e.value.message
