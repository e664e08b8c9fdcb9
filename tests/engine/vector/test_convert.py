"""convert / reproject (ogr2ogr): formats, filters, SQL, reprojection, explode/promote, Z and M, streaming.

Expected values come from tests/data/MANIFEST.md, from the source read independently with pyogrio and
shapely, from pyproj on the source coordinates, and (when installed) from the ogr2ogr command line.
"""

from __future__ import annotations

import functools
import shutil
import tracemalloc
import warnings
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyogrio
import pytest
import shapely
from pyproj import Transformer

import gdal_mcp.engine.vector.convert as convert_module
from gdal_mcp.engine.vector import stream
from gdal_mcp.engine.vector.convert import convert, reproject
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

V = DATA / "vector"
NE = str(V / "naturalearth_lowres.shp")
ALBERS = (V / "polygons.prj").read_text()


def read(path, layer: str | None = None) -> tuple[dict, np.ndarray, dict[str, np.ndarray]]:
    """(metadata, shapely geometries, field -> values) of a whole layer, read with pyogrio (Arrow keeps M)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meta, table = pyogrio.raw.read_arrow(str(path), layer=layer)
    column = stream.geometry_column(table.schema)
    geoms = shapely.from_wkb(table.column(column).to_numpy(zero_copy_only=False)) if column else None
    values = {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names if n != column}
    return meta, geoms, values


def coords(geoms: np.ndarray) -> np.ndarray:
    return shapely.get_coordinates(geoms, include_z=True, include_m=True)


def africa_names() -> list[str]:
    _, _, v = read(NE)
    return [n for n, c in zip(v["name"], v["continent"], strict=True) if c == "Africa"]


# ----- formats -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ne.gpkg", "ne.fgb", "ne.geojson", "ne.shp", "ne.csv"])
def test_naturalearth_to_each_format_keeps_features_attributes_and_geometries(tmp_path, name) -> None:
    summary, notes = convert(NE, str(tmp_path / name))
    assert summary.feature_count == 177 and summary.crs == "EPSG:4326"
    assert summary.layer == "ne"  # named after the output file, not the source layer
    assert [str(n) for n, _ in pyogrio.list_layers(tmp_path / name)] == ["ne"]
    _, src_geoms, src = read(NE)
    _, out_geoms, out = read(tmp_path / name)
    # FlatGeobuf writes its features in spatial-index (Hilbert) order: compare in name order (names are unique).
    order_src, order_out = np.argsort(src["name"]), np.argsort(out["name"])
    src_geoms, out_geoms = src_geoms[order_src], out_geoms[order_out]
    for f in ("pop_est", "continent", "name", "iso_a3", "gdp_md_est"):
        assert list(out[f][order_out]) == list(src[f][order_src]), f
    # GeoJSON and CSV (WKT) write 15 decimals, as ogr2ogr does; the others are exact.
    tol = 1e-12 if name.endswith((".csv", ".geojson")) else 0
    np.testing.assert_allclose(shapely.get_coordinates(out_geoms), shapely.get_coordinates(src_geoms), rtol=0, atol=tol)
    assert (shapely.get_num_geometries(out_geoms) == shapely.get_num_geometries(src_geoms)).all()
    if name.endswith((".fgb", ".gpkg")):
        # FlatGeobuf refuses the MultiPolygons of a layer declared Polygon, and a GeoPackage would declare POLYGON for
        # its 29 MultiPolygons against its own rules: promoted, with a warning; nothing of the first attempt is left
        assert summary.geometry_type == "MultiPolygon" and "MultiPolygon" in notes[0] and "promote" in notes[0]
        assert pyogrio.read_info(tmp_path / name)["geometry_type"] == "MultiPolygon"
        assert sorted(p.name for p in tmp_path.iterdir()) == [name], "the first attempt left files"
    else:
        assert notes == []
    if name.endswith(".gpkg"):
        # a Polygon layer without multi-part geometries stays Polygon, written once
        box, box_notes = convert(str(V / "box.shp"), str(tmp_path / "box.gpkg"))
        assert box.geometry_type == "Polygon" and box_notes == []
    if name.endswith(".csv"):  # geometry as WKT, field types in a .csvt, the CRS in a .prj
        assert "WKT" in summary.fields and (tmp_path / name).read_text().startswith("WKT,")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ne.csv", "ne.csvt", "ne.prj"]


def test_file_size_counts_sidecars_not_other_files_with_the_same_stem(tmp_path) -> None:
    shp, _ = convert(NE, str(tmp_path / "x.shp"))
    gpkg, _ = convert(NE, str(tmp_path / "x.gpkg"))
    assert gpkg.file_size == (tmp_path / "x.gpkg").stat().st_size
    assert shp.file_size == sum((tmp_path / f"x.{e}").stat().st_size for e in ("shp", "shx", "dbf", "prj", "cpg"))


def test_format_errors(tmp_path) -> None:
    for dst, fmt, code in [
        ("x.xyz", None, "invalid-argument"),
        ("x.gpkg", "NoSuchDriver", "invalid-argument"),
        ("x.parquet", None, "unsupported"),
    ]:
        with pytest.raises(GdalMcpError) as e:
            convert(NE, str(tmp_path / dst), format=fmt)
        assert e.value.code == code
    s, _ = convert(NE, str(tmp_path / "noext"), format="geojson")
    assert s.driver == "GeoJSON" and s.feature_count == 177


# ----- filters, fields, SQL ------------------------------------------------------------------------------------
def test_where_counts_and_a_field_subset_filtered_on_another_field(tmp_path) -> None:
    expected = africa_names()
    assert len(expected) == 51
    s, _ = convert(NE, str(tmp_path / "a.gpkg"), where="continent = 'Africa'")
    assert s.feature_count == 51
    # The where names a field that is not kept: OGR would match nothing on a shapefile if it were not read.
    s, _ = convert(NE, str(tmp_path / "b.fgb"), where="continent = 'Africa'", fields=["name"])
    _, _, out = read(tmp_path / "b.fgb")
    assert s.fields == ["name"] and sorted(out["name"]) == sorted(expected)
    with pytest.raises(GdalMcpError) as e:
        convert(NE, str(tmp_path / "c.gpkg"), where="no_such_field = 1")
    assert e.value.code == "invalid-argument"
    with pytest.raises(GdalMcpError) as e:
        convert(NE, str(tmp_path / "d.gpkg"), fields=["name", "nope"])
    assert e.value.code == "not-found" and "continent" in e.value.message


def test_bbox_in_layer_crs_and_in_another_crs(tmp_path) -> None:
    _, geoms, v = read(NE)
    box = shapely.box(0, 0, 10, 10)
    expected = sorted(v["name"][shapely.intersects(geoms, box)])
    s, _ = convert(NE, str(tmp_path / "a.gpkg"), bbox=(0, 0, 10, 10))
    assert sorted(read(tmp_path / "a.gpkg")[2]["name"]) == expected and s.feature_count == len(expected) == 7
    t = Transformer.from_crs(4326, 3857, always_xy=True)
    x0, y0 = t.transform(0, 0)
    x1, y1 = t.transform(10, 10)
    s, _ = convert(NE, str(tmp_path / "b.gpkg"), bbox=(x0, y0, x1, y1), bbox_crs="EPSG:3857")
    assert sorted(read(tmp_path / "b.gpkg")[2]["name"]) == expected
    with pytest.raises(GdalMcpError) as e:
        convert(NE, str(tmp_path / "c.gpkg"), bbox=(10, 0, 0, 10))
    assert e.value.code == "invalid-argument"


def test_sql_select_and_refusals(tmp_path) -> None:
    _, _, v = read(NE)
    expected = sorted(v["name"][v["pop_est"] > 100_000_000])
    s, _ = convert(NE, str(tmp_path / "s.gpkg"), sql="SELECT name, pop_est FROM naturalearth_lowres WHERE pop_est > 100000000")
    assert s.fields == ["name", "pop_est"] and sorted(read(tmp_path / "s.gpkg")[2]["name"]) == expected
    assert s.layer == "s" and s.feature_count == len(expected) == 13
    # bbox applies to the SQL result too.
    s, _ = convert(NE, str(tmp_path / "b.gpkg"), sql="SELECT * FROM naturalearth_lowres", bbox=(0, 0, 10, 10))
    assert s.feature_count == 7
    for sql in (
        "DELETE FROM naturalearth_lowres",
        "SELECT 1; DROP TABLE naturalearth_lowres",
        "UPDATE naturalearth_lowres SET name = 'x'",
    ):
        with pytest.raises(GdalMcpError) as e:
            convert(NE, str(tmp_path / "x.gpkg"), sql=sql)
        assert e.value.code == "invalid-argument", sql
    with pytest.raises(GdalMcpError) as e:
        convert(NE, str(tmp_path / "x.gpkg"), sql="SELECT * FROM naturalearth_lowres", where="pop_est > 1")
    assert e.value.code == "invalid-argument"
    assert not any(tmp_path.glob("x.*"))


# ----- reprojection --------------------------------------------------------------------------------------------
def assert_reprojected(src: str, dst: Path, to: str, src_crs: int | str | None = None) -> None:
    """Every output vertex equals pyproj's transform of the source vertex (x, y; Z and M untouched)."""
    meta, a, _ = read(src)
    assert_transformed(a, read(dst)[1], src_crs or meta["crs"], to)


def assert_transformed(a: np.ndarray, b: np.ndarray, src_crs: int | str, to: str) -> None:
    t = Transformer.from_crs(src_crs, to, always_xy=True)
    ca, cb = coords(a), coords(b)
    assert ca.shape == cb.shape
    x, y = t.transform(ca[:, 0], ca[:, 1])
    np.testing.assert_allclose(cb[:, 0], x, rtol=1e-12, atol=1e-6)
    np.testing.assert_allclose(cb[:, 1], y, rtol=1e-12, atol=1e-6)
    np.testing.assert_array_equal(cb[:, 2:], ca[:, 2:])


def test_reproject_to_web_mercator_matches_pyproj(tmp_path) -> None:
    s, notes = convert(NE, str(tmp_path / "m.gpkg"), dst_crs="EPSG:3857")
    assert s.crs == "EPSG:3857" and s.feature_count == 177 and s.geometry_type == "MultiPolygon"
    assert len(notes) == 1 and "holds 29 multi-part geometries" in notes[0]  # 29: the count shapely gives the source
    assert_reprojected(NE, tmp_path / "m.gpkg", "EPSG:3857")
    # reproject is the same engine.
    s2, _ = reproject(NE, str(tmp_path / "r.gpkg"), dst_crs="3857")
    assert s2.model_dump(exclude={"file_size", "layer"}) == s.model_dump(exclude={"file_size", "layer"})
    assert (s.layer, s2.layer) == ("m", "r")


def test_reproject_to_and_from_a_custom_albers(tmp_path) -> None:
    s, _ = convert(NE, str(tmp_path / "na.gpkg"), where="continent = 'North America'", dst_crs=ALBERS)
    assert s.crs is not None and s.feature_count == 18
    _, a, _ = read(NE)
    _, b, _ = read(tmp_path / "na.gpkg")
    t = Transformer.from_crs(4326, ALBERS, always_xy=True)
    _, _, v = read(NE)
    ca = coords(a[v["continent"] == "North America"])
    x, y = t.transform(ca[:, 0], ca[:, 1])
    np.testing.assert_allclose(coords(b)[:, :2], np.column_stack([x, y]), rtol=1e-12, atol=1e-6)
    s, _ = convert(str(V / "polygons.shp"), str(tmp_path / "p.geojson"), dst_crs="EPSG:4326")
    assert s.crs == "EPSG:4326" and s.feature_count == 2
    assert_reprojected(str(V / "polygons.shp"), tmp_path / "p.geojson", "EPSG:4326")


def test_src_crs_assigns_a_missing_crs(tmp_path) -> None:
    for ext in ("shp", "shx", "dbf"):  # polygons.shp without its .prj: no CRS
        shutil.copy(V / f"polygons.{ext}", tmp_path / f"bare.{ext}")
    with pytest.raises(GdalMcpError) as e:
        convert(str(tmp_path / "bare.shp"), str(tmp_path / "a.gpkg"), dst_crs="EPSG:4326")
    assert e.value.code == "invalid-argument" and "src_crs" in e.value.message
    s, _ = convert(str(tmp_path / "bare.shp"), str(tmp_path / "b.gpkg"), dst_crs="EPSG:4326", src_crs=ALBERS)
    assert s.crs == "EPSG:4326"
    assert_reprojected(str(tmp_path / "bare.shp"), tmp_path / "b.gpkg", "EPSG:4326", src_crs=ALBERS)
    # src_crs alone assigns the CRS (coordinates untouched).
    s, _ = convert(str(tmp_path / "bare.shp"), str(tmp_path / "c.gpkg"), src_crs=ALBERS)
    assert "+proj=aea" in pyogrio.read_info(str(tmp_path / "c.gpkg"))["crs"] or s.crs is not None
    np.testing.assert_array_equal(coords(read(tmp_path / "c.gpkg")[1]), coords(read(V / "polygons.shp")[1]))
    with pytest.raises(GdalMcpError) as e:
        convert(NE, str(tmp_path / "d.gpkg"), dst_crs="EPSG:99999999")
    assert e.value.code == "invalid-argument"


def test_features_outside_the_target_domain_are_left_out_with_a_warning(tmp_path) -> None:
    ortho = "+proj=ortho +lat_0=0 +lon_0=0"
    s, notes = convert(NE, str(tmp_path / "o.gpkg"), dst_crs=ortho)
    _, geoms, v = read(NE)
    t = Transformer.from_crs(4326, ortho, always_xy=True)
    c, idx = shapely.get_coordinates(geoms, return_index=True)
    x, y = t.transform(c[:, 0], c[:, 1], errcheck=False)
    fails = np.zeros(len(geoms), dtype=bool)
    fails[idx[~(np.isfinite(x) & np.isfinite(y))]] = True
    assert 0 < fails.sum() < 177 and s.feature_count == 177 - fails.sum()
    assert sorted(read(tmp_path / "o.gpkg")[2]["name"]) == sorted(v["name"][~fails])
    assert any(f"{fails.sum()} feature(s) could not be reprojected" in n for n in notes)


# ----- explode / promote / mixed types -------------------------------------------------------------------------
def test_explode_collections_repeats_attributes_per_part(tmp_path) -> None:
    _, geoms, v = read(NE)
    parts = shapely.get_num_geometries(geoms)
    s, _ = convert(NE, str(tmp_path / "e.gpkg"), explode_collections=True)
    assert s.feature_count == parts.sum() == 288 and s.geometry_type == "Polygon"
    _, out_geoms, out = read(tmp_path / "e.gpkg")
    assert set(shapely.get_type_id(out_geoms)) == {3}
    assert Counter(out["name"]) == Counter(dict(zip(v["name"], parts, strict=True)))
    assert shapely.equals(shapely.multipolygons(out_geoms[out["name"] == "Canada"]), geoms[v["name"] == "Canada"][0])


def test_promote_to_multi(tmp_path) -> None:
    s, _ = convert(NE, str(tmp_path / "p.gpkg"), promote_to_multi=True)
    _, out_geoms, _ = read(tmp_path / "p.gpkg")
    assert s.geometry_type == "MultiPolygon" and set(shapely.get_type_id(out_geoms)) == {6}
    assert shapely.equals(out_geoms, read(NE)[1]).all()
    s, _ = convert(str(V / "trio.geojson"), str(tmp_path / "t.gpkg"), promote_to_multi=True)
    assert [g.geom_type for g in read(tmp_path / "t.gpkg")[1]] == ["MultiPoint", "MultiLineString", "MultiPolygon"]


def test_mixed_geometry_types_to_geopackage(tmp_path) -> None:
    s, notes = convert(str(V / "trio.geojson"), str(tmp_path / "t.gpkg"))
    assert s.feature_count == 3 and s.geometry_type == "Unknown" and notes == []
    assert [g.geom_type for g in read(tmp_path / "t.gpkg")[1]] == ["Point", "LineString", "Polygon"]
    assert shapely.equals_exact(read(tmp_path / "t.gpkg")[1], read(V / "trio.geojson")[1]).all()


def test_a_declared_multi_layer_holding_singles_is_promoted_for_flatgeobuf(tmp_path) -> None:
    g = shapely.from_wkt(["POLYGON ((0 0, 1 0, 1 1, 0 0))", "MULTIPOLYGON (((2 2, 3 2, 3 3, 2 2)))"])
    table = pa.table({"n": [1, 2], "geom": pa.array(shapely.to_wkb(g))})
    table = table.cast(table.schema.set(1, table.schema.field(1).with_metadata({b"ARROW:extension:name": b"geoarrow.wkb"})))
    pyogrio.write_arrow(
        table,
        str(tmp_path / "mp.gpkg"),
        layer="mp",
        driver="GPKG",
        geometry_name="geom",
        geometry_type="MultiPolygon",
        crs="EPSG:4326",
    )
    s, notes = convert(str(tmp_path / "mp.gpkg"), str(tmp_path / "mp.fgb"))
    assert s.geometry_type == "MultiPolygon" and len(notes) == 1 and "MultiPolygon" in notes[0]
    assert shapely.equals(sort_by_name_or(tmp_path / "mp.fgb", "n"), g).all()


def test_a_shapefile_cannot_hold_mixed_types(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        convert(str(V / "trio.geojson"), str(tmp_path / "t.shp"))
    assert e.value.code == "invalid-argument" and "one geometry type" in e.value.message
    s, _ = convert(str(V / "trio.geojson"), str(tmp_path / "p.shp"), where="OGR_GEOMETRY = 'POINT'")
    assert (s.feature_count, s.geometry_type) == (1, "Point")


def test_an_empty_selection_writes_an_empty_layer(tmp_path) -> None:
    for name in ("e.gpkg", "e.shp", "e.fgb"):
        s, notes = convert(NE, str(tmp_path / name), where="continent = 'Atlantis'", dst_crs="EPSG:3857")
        assert (s.feature_count, s.extent, s.crs) == (0, None, "EPSG:3857")
        assert notes == ["no feature matched: the output layer is empty"]


# ----- multi-layer sources -------------------------------------------------------------------------------------
def test_multi_layer_sources_need_a_layer(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        convert(str(V / "test_gpx.gpx"), str(tmp_path / "g.gpkg"))
    assert e.value.code == "invalid-argument" and "5 layers" in e.value.message
    assert all(n in e.value.message for n in ("waypoints", "routes", "tracks", "route_points", "track_points"))
    s, _ = convert(str(V / "test_gpx.gpx"), str(tmp_path / "g.gpkg"), layer="track_points")
    assert (s.feature_count, s.layer, s.geometry_type) == (19, "g", "Point")
    s, _ = convert(str(V / "sample.osm.pbf"), str(tmp_path / "o.gpkg"), layer="points", output_layer="nodes")
    assert (s.feature_count, s.layer) == (8, "nodes")


def test_zipped_shapefiles_through_vsizip(tmp_path) -> None:
    with zipfile.ZipFile(tmp_path / "box.zip", "w") as z:
        for f in V.glob("box.*"):
            z.write(f, f.name)
    s, _ = convert(f"/vsizip/{tmp_path}/box.zip", str(tmp_path / "b.gpkg"))
    assert (s.feature_count, s.crs, s.layer) == (1, "EPSG:32618", "b")
    assert (s.extent.left, s.extent.bottom, s.extent.right, s.extent.top) == (175000, 2700000, 250000, 2750000)
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as z:
        for f in [*V.glob("box.*"), *V.glob("lines.*")]:
            z.write(f, f.name)
    with pytest.raises(GdalMcpError) as e:
        convert(f"/vsizip/{tmp_path}/two.zip", str(tmp_path / "t.gpkg"))
    assert e.value.code == "invalid-argument" and "box" in e.value.message and "lines" in e.value.message
    s, _ = convert(f"/vsizip/{tmp_path}/two.zip", str(tmp_path / "t.gpkg"), layer="lines")
    assert s.feature_count == 2


# ----- Z and M -------------------------------------------------------------------------------------------------
def write_measured(path: Path) -> None:
    """A GeoPackage of LineString ZM with distinct Z and M values (line_zm.gpkg's M are all 0)."""
    lines = shapely.from_wkt(
        ["LINESTRING ZM (-123.2 48.98 10 0, -110 49 20 50.5, -95.03 49.01 30 100)", "LINESTRING ZM (2 45 1 7, 3 46 2 8)"]
    )
    table = pa.table({"name": ["a", "b"], "geom": pa.array(shapely.to_wkb(lines, output_dimension=4, flavor="iso"))})
    table = table.cast(table.schema.set(1, table.schema.field(1).with_metadata({b"ARROW:extension:name": b"geoarrow.wkb"})))
    pyogrio.write_arrow(
        table, str(path), layer="zm", driver="GPKG", geometry_name="geom", geometry_type="Measured 3D LineString", crs="EPSG:4326"
    )


def test_line_zm_keeps_z_and_m_through_gpkg(tmp_path) -> None:
    zm = str(V / "line_zm.gpkg")
    s, notes = convert(zm, str(tmp_path / "a.gpkg"))
    _, g, _ = read(tmp_path / "a.gpkg")
    assert s.geometry_type == "LineString Z" and notes == []
    assert shapely.has_z(g).all() and shapely.has_m(g).all()
    np.testing.assert_array_equal(coords(g), coords(read(zm)[1]))
    s, notes = convert(zm, str(tmp_path / "b.gpkg"), dst_crs="EPSG:3857")
    assert notes == [] and shapely.has_m(read(tmp_path / "b.gpkg")[1]).all()
    assert_reprojected(zm, tmp_path / "b.gpkg", "EPSG:3857")


@pytest.mark.parametrize("name", ["m.gpkg", "m.fgb", "m.shp"])
def test_measures_survive_conversion_and_reprojection(tmp_path, name) -> None:
    write_measured(tmp_path / "src.gpkg")
    src = str(tmp_path / "src.gpkg")
    convert(src, str(tmp_path / f"plain_{name}"), output_layer="zm")
    np.testing.assert_array_equal(coords(sort_by_name(tmp_path / f"plain_{name}")), coords(read(src)[1]))
    s, notes = convert(src, str(tmp_path / name), dst_crs="EPSG:3857", promote_to_multi=True, output_layer="zm")
    # A shapefile has one line type for single and multi lines: GDAL reads it back as LineString.
    multi = not name.endswith(".shp")
    assert notes == [] and s.geometry_type == ("MultiLineString Z" if multi else "LineString Z")
    g = sort_by_name(tmp_path / name)
    assert shapely.has_m(g).all() and set(shapely.get_type_id(g)) == ({5} if multi else {1})
    assert_transformed(sort_by_name(src), g, "EPSG:4326", "EPSG:3857")


def sort_by_name(path) -> np.ndarray:
    """Geometries in the order of their 'name' (FlatGeobuf writes in spatial-index order)."""
    return sort_by_name_or(path, "name")


def sort_by_name_or(path, field: str) -> np.ndarray:
    _, g, v = read(path)
    return g[np.argsort(v[field])]


def test_reproject_geometries_keeps_every_dimension_and_type() -> None:
    wkt = [
        "POINT M (10 20 5)",
        "POLYGON ZM ((0 0 1 9, 4 0 2 8, 4 4 3 7, 0 0 1 9), (1 1 5 1, 2 1 5 2, 2 2 5 3, 1 1 5 1))",
        "MULTIPOLYGON M (((0 0 1, 1 0 2, 1 1 3, 0 0 1)), ((5 5 4, 6 5 5, 6 6 6, 5 5 4)))",
        "GEOMETRYCOLLECTION ZM (POINT ZM (1 2 3 4), LINESTRING ZM (0 0 0 0, 1 1 1 1))",
        "LINESTRING Z (1 2 3, 4 5 6)",
        "POLYGON ((0 0, 1 0, 1 1, 0 0))",
        "POINT EMPTY",
        None,
    ]
    geoms = np.array([shapely.from_wkt(w) if w else None for w in wkt], dtype=object)
    out, bad = convert_module.reproject_geometries(geoms, Transformer.from_crs(4326, 3857, always_xy=True))
    assert not bad.any() and out[-1] is None and out[-2].is_empty
    t = Transformer.from_crs(4326, 3857, always_xy=True)
    for a, b in zip(geoms[:-2], out[:-2], strict=True):
        assert (a.geom_type, a.has_z, a.has_m) == (b.geom_type, b.has_z, b.has_m)
        ca, cb = coords(a), coords(b)
        np.testing.assert_allclose(cb[:, :2], np.column_stack(t.transform(ca[:, 0], ca[:, 1])), rtol=1e-12)
        np.testing.assert_array_equal(cb[:, 2:], ca[:, 2:])  # Z (unchanged by this transformation) and M
    _, bad = convert_module.reproject_geometries(geoms[:2], Transformer.from_crs(4326, "+proj=ortho +lon_0=180", always_xy=True))
    assert bad.all(), "points on the far side of an orthographic globe cannot be transformed"


def test_measures_dropped_by_geojson_are_reported(tmp_path) -> None:
    write_measured(tmp_path / "src.gpkg")
    s, notes = convert(str(tmp_path / "src.gpkg"), str(tmp_path / "m.geojson"))
    assert any("M (measure) values were dropped" in n for n in notes)
    _, g, _ = read(tmp_path / "m.geojson")
    assert shapely.has_z(g).all() and not shapely.has_m(g).any()


# ----- the GDAL command line as a reference --------------------------------------------------------------------
def test_matches_ogr2ogr_reprojection_and_where(tmp_path) -> None:
    convert(NE, str(tmp_path / "ours.gpkg"), dst_crs="EPSG:3857", where="continent <> 'Antarctica'")
    gdal_cli(
        "ogr2ogr", "-f", "GPKG", str(tmp_path / "cli.gpkg"), NE, "-t_srs", "EPSG:3857", "-where", "continent <> 'Antarctica'"
    )
    _, a, va = read(tmp_path / "ours.gpkg")
    _, b, vb = read(tmp_path / "cli.gpkg")
    assert len(a) == len(b) == 176
    for f in ("pop_est", "continent", "name", "iso_a3", "gdp_md_est"):
        assert list(va[f]) == list(vb[f])
    np.testing.assert_allclose(coords(a), coords(b), rtol=1e-9, atol=1e-3)


def test_matches_ogr2ogr_explode(tmp_path) -> None:
    convert(NE, str(tmp_path / "ours.gpkg"), explode_collections=True)
    gdal_cli("ogr2ogr", "-f", "GPKG", str(tmp_path / "cli.gpkg"), NE, "-explodecollections")
    _, a, va = read(tmp_path / "ours.gpkg")
    _, b, vb = read(tmp_path / "cli.gpkg")
    assert list(va["name"]) == list(vb["name"]) and shapely.equals_exact(a, b).all()


# ----- streaming -----------------------------------------------------------------------------------------------
def test_streams_in_batches_with_flat_memory(tmp_path, monkeypatch) -> None:
    batch = 2_000
    monkeypatch.setattr(convert_module, "read_layer", functools.partial(stream.read_layer, batch_size=batch))

    def points(n: int) -> str:
        rng = np.random.default_rng(n)
        wkb = shapely.to_wkb(shapely.points(rng.uniform(-170, 170, n), rng.uniform(-80, 80, n)))
        table = pa.table({"id": np.arange(n), "geometry": pa.array(wkb)})
        table = table.cast(table.schema.set(1, table.schema.field(1).with_metadata({b"ARROW:extension:name": b"geoarrow.wkb"})))
        path = str(tmp_path / f"p{n}.gpkg")
        pyogrio.write_arrow(
            table, path, layer="p", driver="GPKG", geometry_name="geometry", geometry_type="Point", crs="EPSG:4326"
        )
        return path

    convert(points(batch), str(tmp_path / "warm.gpkg"), dst_crs="EPSG:3857")  # first-use caches (PROJ, GDAL)
    peaks = {}
    for n in (20_000, 100_000):
        src = points(n)
        reports: list[str] = []
        tracemalloc.start()
        try:
            s, _ = convert(
                src, str(tmp_path / f"o{n}.gpkg"), dst_crs="EPSG:3857", progress=lambda f, m="", r=reports: r.append(m)
            )
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert s.feature_count == n and len(reports) == n // batch
    # Five times the features, the same peak: one batch (2000 points) is in memory at a time, while the
    # 100k points alone are 2.4 MB of coordinates and several MB of WKB and geometry objects.
    assert peaks[100_000] < 1.3 * peaks[20_000] and peaks[100_000] < 2_400_000


def test_layer_creation_options_reach_the_driver(tmp_path) -> None:
    import pyogrio

    src = str(DATA / "vector" / "naturalearth_lowres.shp")
    convert(src, str(tmp_path / "indexed.fgb"), promote_to_multi=True)
    convert(src, str(tmp_path / "plain.fgb"), promote_to_multi=True, layer_options={"SPATIAL_INDEX": False})
    indexed = pyogrio.read_info(tmp_path / "indexed.fgb")["capabilities"]["fast_spatial_filter"]
    plain = pyogrio.read_info(tmp_path / "plain.fgb")["capabilities"]["fast_spatial_filter"]
    assert indexed and not plain
