"""Vector clip (ogr2ogr -clipsrc) checked against shapely intersections computed independently."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import shapely
import shapely.geometry
from pyproj import CRS, Transformer

import gdal_mcp.engine.vector.layer_map as layer_map
from gdal_mcp.engine.vector.clip import clip
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

V = DATA / "vector"
WORLD = str(V / "naturalearth_lowres.shp")
POLYGONS = str(V / "polygons.shp")
BOX = (-20.0, -40.0, 60.0, 40.0)  # most of Africa, a corner of Europe and the Middle East
EQUAL_AREA = "EPSG:6933"  # WGS 84 / NSIDC EASE-Grid 2.0 Global (cylindrical equal-area)


def load(path, layer=None, **kwargs):
    """(meta, {field: values}, shapely geometries) of a layer."""
    meta, _, wkb, fields = pyogrio.raw.read(str(path), layer=layer, **kwargs)
    return meta, dict(zip(meta["fields"], fields, strict=True)), shapely.from_wkb(wkb)


def areas(geoms, src_crs) -> np.ndarray:
    t = Transformer.from_crs(src_crs, EQUAL_AREA, always_xy=True)
    return shapely.area(shapely.transform(geoms, lambda x, y: t.transform(x, y), interleaved=False))


def expected_clip(geoms: np.ndarray, region) -> tuple[np.ndarray, np.ndarray]:
    """Which features keep an area inside `region`, and what is left of them (polygonal parts only)."""
    cut = shapely.intersection(geoms, region)
    polygonal = np.array(
        [
            shapely.union_all(
                [p for p in shapely.get_parts(c) if p.geom_type == "Polygon"] if c.geom_type == "GeometryCollection" else c
            )
            for c in cut
        ]
    )
    keep = shapely.area(polygonal) > 0
    return keep, polygonal[keep]


def test_lonlat_box_matches_shapely_in_an_equal_area_projection(tmp_path) -> None:
    out = tmp_path / "africa.gpkg"
    summary, warnings = clip(WORLD, str(out), bbox=BOX)
    _, src_fields, src = load(WORLD)
    keep, expected = expected_clip(src, shapely.box(*BOX))
    _, fields, got = load(out)
    assert summary.feature_count == int(keep.sum()) == len(got) == 75
    assert list(fields["name"]) == list(src_fields["name"][keep])  # attributes kept, in input order
    assert list(fields["pop_est"]) == list(src_fields["pop_est"][keep])
    assert summary.fields == ["pop_est", "continent", "name", "iso_a3", "gdp_md_est"]
    got_area, expected_area = areas(got, "EPSG:4326"), areas(expected, "EPSG:4326")
    assert got_area == pytest.approx(expected_area, rel=1e-9)
    assert shapely.covers(shapely.box(*BOX).buffer(1e-9), got).all() and shapely.is_valid(got).all()
    # Features wholly inside are copied untouched.
    inside = shapely.contains_properly(shapely.box(*BOX), src)
    by_name = dict(zip(fields["name"], got, strict=True))
    for name, geom in zip(src_fields["name"][inside], src[inside], strict=True):
        assert shapely.equals_exact(shapely.get_parts(by_name[name])[0], shapely.get_parts(geom)[0], tolerance=0)
    # The layer says Polygon but holds MultiPolygons: a GeoPackage gets MultiPolygon, with a warning.
    assert summary.geometry_type == "MultiPolygon" and summary.crs == "EPSG:4326"
    assert any("MultiPolygon, not Polygon" in w for w in warnings)
    assert set(shapely.get_type_id(got)) == {6}


def test_shapefile_output_keeps_the_polygon_type_and_flatgeobuf_is_promoted(tmp_path) -> None:
    shp, warnings = clip(WORLD, str(tmp_path / "a.shp"), bbox=BOX)
    assert shp.geometry_type == "Polygon" and shp.feature_count == 75 and not warnings
    fgb, warnings = clip(WORLD, str(tmp_path / "a.fgb"), bbox=BOX, output_layer="africa")
    assert fgb.geometry_type == "MultiPolygon" and fgb.feature_count == 75 and fgb.layer == "africa"
    a, b = load(tmp_path / "a.shp")[2], load(tmp_path / "a.fgb")[2]
    assert areas(a, "EPSG:4326").sum() == pytest.approx(areas(b, "EPSG:4326").sum(), rel=1e-12)


def test_single_polygons_stay_polygon_when_nothing_splits(tmp_path) -> None:
    src = tmp_path / "squares.gpkg"
    squares = shapely.box(np.arange(5.0), 0, np.arange(5.0) + 0.8, 1)
    _write(src, squares, "Polygon", {"n": np.arange(5)})
    summary, warnings = clip(str(src), str(tmp_path / "o.gpkg"), bbox=(0.5, 0.5, 3.5, 5))
    assert summary.geometry_type == "Polygon" and summary.feature_count == 4 and warnings == []
    _, fields, got = load(tmp_path / "o.gpkg")
    assert list(fields["n"]) == [0, 1, 2, 3]
    assert shapely.area(got) == pytest.approx([0.15, 0.4, 0.4, 0.25])
    # A U shape cut across its arms becomes two parts: Multi, with a warning.
    u = shapely.Polygon([(0, 0), (3, 0), (3, 3), (2, 3), (2, 1), (1, 1), (1, 3), (0, 3)])
    _write(tmp_path / "u.gpkg", np.array([u]), "Polygon", {"n": np.array([7])})
    summary, warnings = clip(str(tmp_path / "u.gpkg"), str(tmp_path / "u2.gpkg"), bbox=(-1, 2, 4, 4))
    assert summary.geometry_type == "MultiPolygon" and len(warnings) == 1
    (geom,) = load(tmp_path / "u2.gpkg")[2]
    assert geom.geom_type == "MultiPolygon" and len(geom.geoms) == 2 and geom.area == pytest.approx(2.0)


def _write(path, geoms, geometry_type, fields, crs="EPSG:4326"):
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(geoms),
        list(fields.values()),
        fields=list(fields.keys()),
        geometry_type=geometry_type,
        crs=crs,
        driver="GPKG" if str(path).endswith(".gpkg") else None,
    )


def test_custom_albers_layer_by_a_lonlat_geojson_polygon(tmp_path) -> None:
    # polygons.shp: 2 small polygons in a custom Albers (no EPSG), around (-124.357, 42.983) and (-124.341, 42.984);
    # the box cuts the north of both and the east of the second.
    lonlat = shapely.box(-124.36, 42.983, -124.341, 42.99)
    summary, warnings = clip(POLYGONS, str(tmp_path / "p.gpkg"), geometry=shapely.geometry.mapping(lonlat))
    meta, src_fields, src = load(POLYGONS)
    t = Transformer.from_crs("EPSG:4326", CRS(meta["crs"]), always_xy=True)
    region = shapely.transform(shapely.segmentize(lonlat, 1e-4), lambda x, y: t.transform(x, y), interleaved=False)
    keep, expected = expected_clip(src, region)
    _, fields, got = load(tmp_path / "p.gpkg")
    assert keep.all() and summary.feature_count == 2 and list(fields["id"]) == [1, 2]
    assert all(0 < g.area < s.area for g, s in zip(got, src, strict=True))  # both are cut
    assert shapely.area(got) == pytest.approx(shapely.area(expected), rel=1e-6)
    assert summary.crs == "custom Albers Equal Area" and CRS(load(tmp_path / "p.gpkg")[0]["crs"]).equals(CRS(meta["crs"]))
    assert warnings == []


def test_mask_file_with_where_is_reprojected(tmp_path) -> None:
    # Points every 2 degrees in Web Mercator, clipped by Egypt read from naturalearth (EPSG:4326).
    lon, lat = np.meshgrid(np.arange(20.0, 40.0, 0.5), np.arange(18.0, 34.0, 0.5))
    merc = Transformer.from_crs("EPSG:4326", "EPSG:3857", always_xy=True)
    x, y = merc.transform(lon.ravel(), lat.ravel())
    _write(tmp_path / "grid.gpkg", shapely.points(x, y), "Point", {"i": np.arange(x.size)}, crs="EPSG:3857")
    summary, warnings = clip(str(tmp_path / "grid.gpkg"), str(tmp_path / "eg.gpkg"), mask=WORLD, mask_where="name = 'Egypt'")
    _, _, (egypt,) = load(WORLD, where="name = 'Egypt'")
    inside = shapely.intersects(egypt, shapely.points(lon.ravel(), lat.ravel()))
    _, fields, got = load(tmp_path / "eg.gpkg")
    assert summary.geometry_type == "Point" and summary.crs == "EPSG:3857" and warnings == []
    assert 50 < len(got) == inside.sum() and set(fields["i"]) == set(np.flatnonzero(inside))


def test_touching_features_are_dropped_like_ogr2ogr(tmp_path) -> None:
    # Clip the world by France: its 8 neighbours share only borders (lines) with it and are dropped, not
    # written as lines; ogr2ogr -clipsrc naturalearth_lowres.shp -clipsrcwhere "name = 'France'" gives 1 feature too.
    summary, warnings = clip(WORLD, str(tmp_path / "fr.gpkg"), mask=WORLD, mask_where="name = 'France'")
    _, src_fields, src = load(WORLD)
    (france,) = load(WORLD, where="name = 'France'")[2]
    keep, expected = expected_clip(src, france)
    _, fields, got = load(tmp_path / "fr.gpkg")
    assert list(src_fields["name"][keep]) == list(fields["name"]) == ["France"] and summary.feature_count == 1
    assert shapely.area(got) == pytest.approx(shapely.area(expected), rel=1e-12)
    touching = shapely.intersects(src, france) & ~keep
    assert touching.sum() == 8 and any("8 feature(s) only touched the clip region" in w for w in warnings)


def test_empty_result_is_written_with_a_warning(tmp_path) -> None:
    summary, warnings = clip(WORLD, str(tmp_path / "sea.gpkg"), bbox=(-40.0, -30.0, -30.0, -20.0))
    assert summary.feature_count == 0 and summary.fields == ["pop_est", "continent", "name", "iso_a3", "gdp_md_est"]
    assert len(warnings) == 1 and "the output has 0 features" in warnings[0] and "[-180, -90, 180, 83.6" in warnings[0]
    assert pyogrio.read_info(str(tmp_path / "sea.gpkg"))["features"] == 0


def test_mixed_geometry_layer_keeps_each_features_dimension(tmp_path) -> None:
    _, src_fields, src = load(V / "trio.geojson")
    region = shapely.box(*shapely.total_bounds(src)).buffer(-1e-9)
    summary, _ = clip(str(V / "trio.geojson"), str(tmp_path / "t.gpkg"), geometry=shapely.geometry.mapping(region))
    _, _, got = load(tmp_path / "t.gpkg")
    assert summary.geometry_type == "Unknown"
    kept = [s for s in src if s.intersects(region)]
    assert [g.geom_type.removeprefix("Multi") for g in got] == [s.geom_type for s in kept]


def test_many_batches_and_progress(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(layer_map, "READ_BATCH", 10)
    reports: list[tuple[float, str]] = []
    summary, _ = clip(WORLD, str(tmp_path / "b.gpkg"), bbox=BOX, progress=lambda f, m="": reports.append((f, m)))
    whole, _ = clip(WORLD, str(tmp_path / "w.gpkg"), bbox=BOX)
    assert summary.feature_count == whole.feature_count == 75
    assert areas(load(tmp_path / "b.gpkg")[2], "EPSG:4326").sum() == pytest.approx(
        areas(load(tmp_path / "w.gpkg")[2], "EPSG:4326").sum(), rel=1e-12
    )
    fractions = [f for f, _ in reports]
    assert len(reports) > 8 and fractions == sorted(fractions) and reports[-1] == (1.0, "wrote 75 features")
    assert any(m.startswith("clipped") for _, m in reports)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({}, "got none"),
        ({"bbox": BOX, "mask": WORLD}, "got bbox and mask"),
        ({"bbox": BOX, "mask_layer": "x"}, "mask_layer only applies with mask"),
        ({"bbox": (1, 1, 0, 0)}, "minx < maxx"),
        ({"mask": str(V / "lines.shp")}, "needs polygons"),
        ({"mask": WORLD, "mask_where": "nope = 1"}, "mask_where"),
        ({"geometry": {"type": "Polygon"}}, "not valid GeoJSON"),
        ({"bbox": BOX, "format": "NoSuchFormat"}, "unknown or read-only vector format"),
    ],
)
def test_invalid_arguments(tmp_path, kwargs, text) -> None:
    with pytest.raises(GdalMcpError) as e:
        clip(WORLD, str(tmp_path / "x.gpkg"), **kwargs)
    assert e.value.code == "invalid-argument" and text in e.value.message
    assert not (tmp_path / "x.gpkg").exists()


def test_matches_ogr2ogr_clipsrc(tmp_path) -> None:
    ogr2ogr = shutil.which("ogr2ogr")
    if ogr2ogr is None:
        pytest.skip("ogr2ogr not on PATH (install Debian gdal-bin)")
    ref = tmp_path / "ref.gpkg"
    subprocess.run([ogr2ogr, "-clipsrc", *map(str, BOX), str(ref), WORLD], check=True, capture_output=True, timeout=60)
    summary, _ = clip(WORLD, str(tmp_path / "ours.gpkg"), bbox=BOX)
    _, ref_fields, theirs = load(ref)
    _, fields, ours = load(tmp_path / "ours.gpkg")
    assert summary.feature_count == len(theirs) and list(fields["name"]) == list(ref_fields["name"])
    assert areas(ours, "EPSG:4326").sum() == pytest.approx(areas(theirs, "EPSG:4326").sum(), rel=1e-9)
