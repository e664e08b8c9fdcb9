"""engine/vector/pipeline.py: `gdal vector pipeline` steps against independent references.

References: the same steps run one after another with the other vector engines (pyogrio + pyproj + shapely, not
GDAL's pipeline), Debian's ogr2ogr (GDAL 3.6) on the same input, shapely on the same geometries, and feature counts
computed with pandas. Geometries are compared after shapely.normalize, a one-part Multi* taken as its part (the
pipeline keeps a shapefile's declared Polygon where the other tools promote to MultiPolygon), with equals_exact at
the tolerance each test states.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyogrio
import pytest
import shapely
from pyproj import Transformer

from gdal_mcp.engine.vector import clip, convert, geometry
from gdal_mcp.engine.vector import pipeline as vp
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

NE = str(DATA / "vector" / "naturalearth_lowres.shp")
TRIO = str(DATA / "vector" / "trio.geojson")
AFRICA = "continent = 'Africa'"


def _read(path: str | Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyogrio.read_dataframe(path)


def _single(geoms: Any) -> np.ndarray:
    """Normalized geometries, a one-part Multi* as its part."""
    out = [g.geoms[0] if g is not None and g.geom_type.startswith("Multi") and len(g.geoms) == 1 else g for g in geoms]
    return shapely.normalize(np.array(out, dtype=object))


def _same_features(a: Any, b: Any, tol: float) -> None:
    """Same count, same attributes (columns compared by name), geometries equal within tol (CRS units)."""
    assert len(a) == len(b)
    columns = sorted(c for c in a.columns if c != "geometry")
    assert columns == sorted(c for c in b.columns if c != "geometry")
    assert a[columns].reset_index(drop=True).equals(b[columns].reset_index(drop=True))
    equal = shapely.equals_exact(_single(a.geometry.values), _single(b.geometry.values), tol)
    assert equal.all(), f"{int((~equal).sum())} geometries differ beyond {tol}"


def _utm33(geoms: Any) -> np.ndarray:
    t = Transformer.from_crs(4326, 32633, always_xy=True)
    return shapely.transform(np.asarray(geoms, dtype=object), lambda c: np.column_stack(t.transform(c[:, 0], c[:, 1])))


# ----- the same as the separate tools ---------------------------------------------------------------------------------


def test_filter_reproject_buffer_equals_the_tools_one_after_another(tmp_path: Path) -> None:
    steps = [
        {"step": "filter", "where": AFRICA},
        {"step": "reproject", "dst_crs": "EPSG:32633"},
        {"step": "buffer", "distance": 1000},
    ]
    run, _ = vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=steps)
    convert.convert(NE, str(tmp_path / "a.gpkg"), where=AFRICA)
    convert.reproject(str(tmp_path / "a.gpkg"), str(tmp_path / "b.gpkg"), dst_crs="EPSG:32633")
    geometry.buffer(str(tmp_path / "b.gpkg"), str(tmp_path / "c.gpkg"), distance=1000)
    assert run.summary.feature_count == 51 and run.summary.crs == "EPSG:32633"
    # 1 mm in UTM metres: PROJ and GEOS run the same code in both (measured difference: 0)
    _same_features(_read(tmp_path / "p.gpkg"), _read(tmp_path / "c.gpkg"), 1e-3)


def test_buffer_in_metres_on_a_lon_lat_layer_is_vector_buffers(tmp_path: Path) -> None:
    """units default m on EPSG:4326: the pipeline buffers in the data's UTM zone as vector_buffer does."""
    steps = [{"step": "filter", "where": "name = 'Austria'"}, {"step": "buffer", "distance": 1000}]
    run, notes = vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=steps)
    assert "reproject --dst-crs=EPSG:32633" in run.pipeline and run.summary.crs == "EPSG:4326"
    assert any("UTM zone 33N" in n for n in notes)
    convert.convert(NE, str(tmp_path / "a.gpkg"), where="name = 'Austria'")
    geometry.buffer(str(tmp_path / "a.gpkg"), str(tmp_path / "b.gpkg"), distance=1000)
    got, ref = _read(tmp_path / "p.gpkg"), _read(tmp_path / "b.gpkg")
    # compared in metres (UTM 33N): 1 mm (measured: 0)
    assert shapely.equals_exact(_single(_utm33(got.geometry.values)), _single(_utm33(ref.geometry.values)), 1e-3).all()
    # and analytically: every vertex of the buffer lies 1000 m from Austria (8 segments per quarter circle put the
    # vertices on the circle; 0.5 m for the way to lon/lat and back)
    ring = shapely.get_coordinates(_utm33(got.geometry.values)[0])
    austria = _utm33(_read(tmp_path / "a.gpkg").geometry.values)[0]
    distances = shapely.distance(shapely.points(ring), austria)
    assert distances.min() == pytest.approx(1000, abs=0.5) and distances.max() == pytest.approx(1000, abs=0.5)


def test_negative_buffer_shrinks_like_vector_buffer(tmp_path: Path) -> None:
    """A negative distance reaches GDAL as a value, not as an option."""
    steps = [{"step": "filter", "where": "name = 'Austria'"}, {"step": "buffer", "distance": -2000}]
    vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=steps)
    convert.convert(NE, str(tmp_path / "a.gpkg"), where="name = 'Austria'")
    geometry.buffer(str(tmp_path / "a.gpkg"), str(tmp_path / "b.gpkg"), distance=-2000)
    got, ref = _utm33(_read(tmp_path / "p.gpkg").geometry.values), _utm33(_read(tmp_path / "b.gpkg").geometry.values)
    whole = _utm33(_read(tmp_path / "a.gpkg").geometry.values)
    assert shapely.area(got)[0] < shapely.area(whole)[0]
    assert shapely.equals_exact(_single(got), _single(ref), 1e-3).all()  # 1 mm (measured: 0)


def test_every_step_is_a_step_of_this_gdals_vector_pipeline() -> None:
    """The steps offered exist in GDAL's own description of `gdal vector pipeline` (pyogrio's GDAL)."""
    from gdal_mcp.engine import algorithms

    usage = algorithms.usage(["vector", "pipeline"], library="pyogrio")
    names = {step["name"] for step in usage["pipeline_algorithms"]}
    assert {name.replace("_", "-") for name in vp.STEPS} <= names


def test_simplify_in_metres_on_a_lon_lat_layer_is_vector_simplifys(tmp_path: Path) -> None:
    steps = [{"step": "filter", "where": "name = 'Austria'"}, {"step": "simplify", "tolerance": 20000}]
    vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=steps)
    convert.convert(NE, str(tmp_path / "a.gpkg"), where="name = 'Austria'")
    geometry.simplify(str(tmp_path / "a.gpkg"), str(tmp_path / "b.gpkg"), tolerance=20000)
    got, ref = _read(tmp_path / "p.gpkg"), _read(tmp_path / "b.gpkg")
    # the same vertices kept; 1e-9° (0.1 mm): vector_simplify gives the kept vertices back exactly, the pipeline
    # through UTM and back (measured: 1e-14°)
    assert shapely.equals_exact(_single(got.geometry.values), _single(ref.geometry.values), 1e-9).all()
    assert (
        shapely.get_num_coordinates(got.geometry.values)[0]
        < shapely.get_num_coordinates(_read(tmp_path / "a.gpkg").geometry.values)[0]
    )


def test_simplify_is_shapelys_topology_preserving_simplify(tmp_path: Path) -> None:
    """units=deg: GEOS TopologyPreserveSimplify in degrees, exactly what shapely (vector_simplify) computes."""
    run, notes = vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=[{"step": "simplify", "tolerance": 0.5, "units": "deg"}])
    assert any("degrees, as asked" in n for n in notes)
    got = _read(tmp_path / "p.gpkg")
    expected = shapely.simplify(_read(NE).geometry.values, 0.5, preserve_topology=True)
    assert shapely.equals_exact(_single(got.geometry.values), _single(expected), 0).all()


def test_clip_equals_vector_clip(tmp_path: Path) -> None:
    run, _ = vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=[{"step": "clip", "bbox": [0, 0, 20, 20]}])
    clip.clip(NE, str(tmp_path / "c.gpkg"), bbox=(0, 0, 20, 20))
    assert run.summary.geometry_type == "MultiPolygon"  # a feature cut in pieces stays one feature
    _same_features(_read(tmp_path / "p.gpkg"), _read(tmp_path / "c.gpkg"), 1e-9)


# ----- the same as Debian's ogr2ogr (GDAL 3.6) -------------------------------------------------------------------------

OGR2OGR_CASES = {
    "where-t_srs-select": (
        [
            {"step": "filter", "where": AFRICA},
            {"step": "reproject", "dst_crs": "EPSG:3857"},
            {"step": "select", "fields": ["name", "pop_est"]},
        ],
        ["-where", AFRICA, "-t_srs", "EPSG:3857", "-select", "name,pop_est"],
        1e-3,  # 1 mm in Web Mercator metres: PROJ 9 of both sides (measured: 0)
    ),
    "spat-segmentize": (
        [{"step": "filter", "bbox": [0, 0, 20, 20]}, {"step": "segmentize", "max_length": 1}],
        ["-spat", "0", "0", "20", "20", "-segmentize", "1"],
        1e-9,  # degrees: the same interpolation (measured: 4e-16)
    ),
    "clipsrc": ([{"step": "clip", "bbox": [0, 0, 20, 20]}], ["-clipsrc", "0", "0", "20", "20"], 1e-9),
    "where-explodecollections": (
        [{"step": "filter", "where": "continent = 'Asia'"}, {"step": "explode_collections"}],
        ["-where", "continent = 'Asia'", "-explodecollections"],
        0.0,
    ),
}


@pytest.mark.parametrize("case", OGR2OGR_CASES, ids=list(OGR2OGR_CASES))
def test_matches_ogr2ogr(tmp_path: Path, case: str) -> None:
    steps, args, tol = OGR2OGR_CASES[case]
    ref = tmp_path / "ref.gpkg"
    gdal_cli("ogr2ogr", "-f", "GPKG", str(ref), NE, *args)
    vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=steps)
    _same_features(_read(tmp_path / "p.gpkg"), _read(ref), tol)


# ----- the plan -------------------------------------------------------------------------------------------------------

PLAN_STEPS = [
    {"step": "filter", "where": AFRICA},
    {"step": "explode_collections"},
    {"step": "reproject", "dst_crs": "EPSG:32633"},
    {"step": "select", "fields": ["name", "pop_est"]},
    {"step": "buffer", "distance": 10, "units": "km"},
    {"step": "limit", "limit": 40},
]


def _expected_counts() -> list[int]:
    """Counts after each stage, with pandas and shapely on the input."""
    df = _read(NE)
    africa = df[df["continent"] == "Africa"]
    parts = int(shapely.get_num_geometries(africa.geometry.values).sum())
    return [len(df), len(africa), parts, parts, parts, parts, min(parts, 40)]


def test_plan_agrees_with_the_run(tmp_path: Path) -> None:
    out = tmp_path / "p.gpkg"
    plan = vp.plan(NE, steps=PLAN_STEPS, dst=str(out))
    assert not out.exists()  # nothing written
    assert [s.step for s in plan.stages] == ["read"] + [s["step"] for s in PLAN_STEPS]
    assert [s.index for s in plan.stages] == [None, 0, 1, 2, 3, 4, 5]
    assert [s.feature_count for s in plan.stages] == _expected_counts()
    assert {s.feature_count_is for s in plan.stages} == {"exact"}
    assert [s.crs for s in plan.stages] == ["EPSG:4326"] * 3 + ["EPSG:32633"] * 4
    assert [f.name for f in plan.stages[3].fields] == ["pop_est", "continent", "name", "iso_a3", "gdp_md_est"]
    assert plan.format == "GPKG" and plan.output_layer == "p"
    assert "buffer" in plan.stages[5].gdal and "--distance=10000" in plan.stages[5].gdal  # 10 km in UTM metres

    run, _ = vp.pipeline(NE, str(out), steps=PLAN_STEPS)
    last = plan.stages[-1]
    info = pyogrio.read_info(str(out), force_feature_count=True)
    assert last.feature_count == run.summary.feature_count == info["features"]
    assert last.crs == run.summary.crs
    assert last.geometry_type == info["geometry_type"]
    assert [(f.name, f.type) for f in last.fields] == [
        (str(n), str(t).removeprefix("OFT")) for n, t in zip(info["fields"], info["ogr_types"], strict=True)
    ]
    assert plan.pipeline.replace(str(out), "") == run.pipeline.replace(str(out), "")


def test_plan_gives_bounds_where_counting_would_read_the_input(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(vp, "PLAN_COUNT_LIMIT", 0)  # as if the input were too large to read through the steps
    plan = vp.plan(NE, steps=PLAN_STEPS, dst=str(tmp_path / "p.gpkg"))
    truth = _expected_counts()
    shown = [(s.feature_count, s.feature_count_is) for s in plan.stages]
    assert shown[0] == (177, "exact")  # the shapefile stores its count
    for (n, kind), true in zip(shown, truth, strict=True):
        assert kind in ("exact", "at_most", "at_least", "unknown")
        if kind == "exact":
            assert n == true
        elif kind == "at_most":
            assert n is not None and true <= n
        elif kind == "at_least":
            assert n is not None and true >= n
    assert shown[1] == (177, "at_most")  # filter: at most what was read
    assert shown[2] == (None, "unknown")  # explode after a bound from above: no bound
    assert shown[-1] == (40, "at_most")  # limit


# ----- formats --------------------------------------------------------------------------------------------------------


def test_strict_format_gets_multi_part_geometries(tmp_path: Path) -> None:
    """FlatGeobuf refuses a shapefile's MultiPolygons in a Polygon layer: written again multi-part (as vector_convert)."""
    out = tmp_path / "p.fgb"
    run, notes = vp.pipeline(NE, str(out), steps=[{"step": "filter", "where": AFRICA}])
    assert any("multi-part" in n for n in notes)
    got = _read(out).sort_values("name")  # (FlatGeobuf's spatial index orders the features along a curve)
    assert run.summary.feature_count == len(got) == 51 and set(got.geom_type) == {"MultiPolygon"}
    df = _read(NE)
    _same_features(got, df[df["continent"] == "Africa"].sort_values("name"), 0.0)


@pytest.mark.parametrize("ext", ["shp", "fgb"])
def test_buffered_points_are_polygons_in_every_format(tmp_path: Path, ext: str) -> None:
    """GDAL 3.12's buffer step keeps a point layer's declared type: the pipeline declares MultiPolygon, so strict
    formats take the buffers. Analytic reference: 8 segments per quarter circle make a regular 32-gon of radius r,
    area 16 r² sin(2π/32), centred on its point."""
    import geopandas

    centres = shapely.points([[500000, 5300000], [500100, 5300050], [499000, 5299000]])
    points = str(tmp_path / "points.gpkg")  # UTM 33N (metres): 25 m are 25 layer units
    geopandas.GeoDataFrame({"id": [1, 2, 3]}, geometry=centres, crs="EPSG:32633").to_file(points)
    run, _ = vp.pipeline(points, str(tmp_path / f"p.{ext}"), steps=[{"step": "buffer", "distance": 25}])
    got = _read(tmp_path / f"p.{ext}").sort_values("id")
    assert run.summary.feature_count == len(got) == len(centres) == 3
    assert set(got.geom_type) <= {"Polygon", "MultiPolygon"}
    assert shapely.area(got.geometry.values) == pytest.approx(16 * 25**2 * np.sin(2 * np.pi / 32), rel=1e-9)
    assert np.allclose(shapely.distance(shapely.centroid(got.geometry.values), centres), 0, atol=1e-6)


def test_csv_output_carries_wkt_like_every_vector_tool(tmp_path: Path) -> None:
    out = tmp_path / "p.csv"
    vp.pipeline(NE, str(out), steps=[{"step": "limit", "limit": 3}])
    assert (tmp_path / "p.csvt").exists()
    assert out.read_text().splitlines()[0].startswith("WKT,")


# ----- errors ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "code", "says"),
    [
        ([{"step": "limit", "limit": 1}, {"step": "nope"}], "invalid-argument", "steps[1] (nope): unknown step"),
        ([{"step": "read"}], "invalid-argument", "steps[0] (read): 'read' is not a step here"),
        ([{"step": "limit", "limit": 1}, {"step": "write"}], "invalid-argument", "steps[1] (write)"),
        ([{"step": "buffer"}], "invalid-argument", "steps[0] (buffer): distance is required"),
        ([{"step": "limit", "limit": 2, "where": "x"}], "invalid-argument", "unknown parameter(s) where"),
        ([{"step": "limit", "limit": 1}, {"step": "filter", "where": "nope > 1"}], "invalid-argument", "steps[1] (filter)"),
        ([{"step": "filter", "where": "name > 5"}], "invalid-argument", "steps[0] (filter): where compares the field 'name'"),
        ([{"step": "select", "fields": ["nope"]}], "not-found", "steps[0] (select)"),
        ([{"step": "sql", "sql": "ATTACH 'x.db' AS x"}], "invalid-argument", "steps[0] (sql)"),
        ([{"step": "set_geom_type", "multi": True, "single": True}], "invalid-argument", "steps[0] (set_geom_type)"),
        # the whole world is too wide for one UTM zone: metres cannot be applied in one projection
        ([{"step": "buffer", "distance": 100}], "unsupported", "steps[0] (buffer): the layer is geographic"),
        (
            [{"step": "clip", "bbox": [0, 0, 1, 1], "geometry": {"type": "Point", "coordinates": [0, 0]}}],
            "invalid-argument",
            "steps[0] (clip)",
        ),
    ],
)
def test_refused_steps_name_their_index_and_write_nothing(
    tmp_path: Path, steps: list[dict[str, Any]], code: str, says: str
) -> None:
    out = tmp_path / "p.gpkg"
    with pytest.raises(GdalMcpError) as e:
        vp.pipeline(NE, str(out), steps=steps)
    assert e.value.code == code and says in e.value.message, e.value.message
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(GdalMcpError) as e:
        vp.plan(NE, steps=steps, dst=str(out))
    assert e.value.code == code


def test_a_write_failing_midway_leaves_nothing(tmp_path: Path) -> None:
    """A point, a line and a polygon into one shapefile: GDAL stops at the second feature; the first is removed."""
    with pytest.raises(GdalMcpError) as e:
        vp.pipeline(TRIO, str(tmp_path / "p.shp"), steps=[{"step": "swap_xy"}])
    assert e.value.code == "invalid-argument" and "shapefile holds one geometry type" in e.value.message
    assert list(tmp_path.iterdir()) == []


def test_output_format_is_checked_first(tmp_path: Path) -> None:
    for fmt, says in (("MEM", "writes nothing to disk"), ("NoSuchDriver", "unknown or read-only vector format")):
        with pytest.raises(GdalMcpError) as e:
            vp.pipeline(NE, str(tmp_path / "p.gpkg"), steps=[{"step": "limit", "limit": 1}], format=fmt)
        assert e.value.code == "invalid-argument" and says in e.value.message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dialect", ["OGRSQL", "SQLITE"])
def test_sql_first_then_other_steps_equals_pyogrio_and_pyproj(tmp_path: Path, dialect: str) -> None:
    out = tmp_path / f"af_{dialect}.gpkg"
    sql = f"SELECT name, continent FROM naturalearth_lowres WHERE {AFRICA}"
    if dialect == "SQLITE":
        sql = f"SELECT name, continent, geometry FROM naturalearth_lowres WHERE {AFRICA}"
    steps = [{"step": "sql", "sql": sql, "sql_dialect": dialect}, {"step": "reproject", "dst_crs": "EPSG:3857"}]
    vp.pipeline(NE, str(out), steps=steps)
    got = pyogrio.read_dataframe(out)
    ref = pyogrio.read_dataframe(NE, where=AFRICA).to_crs("EPSG:3857")
    assert sorted(got["name"]) == sorted(ref["name"]) and len(got) == 51
    got, ref = got.sort_values("name"), ref.sort_values("name")
    assert np.allclose(got.geometry.area.to_numpy(), ref.geometry.area.to_numpy(), rtol=1e-9)


@pytest.mark.parametrize(
    "before",
    [
        {"step": "filter", "where": AFRICA},
        {"step": "limit", "limit": 5},
        {"step": "explode_collections"},
        {"step": "reproject", "dst_crs": "EPSG:3857"},
    ],
)
def test_an_sql_step_after_another_step_is_refused(tmp_path: Path, before: dict) -> None:
    """GDAL 3.12 runs a pipeline's SQL on the input as read: a filter before it was silently ignored (177 rows out of a
    51-row filter, found by an agent evaluation), and with OGRSQL most steps before it crashed GDAL (SIGSEGV)."""
    steps = [before, {"step": "sql", "sql": "SELECT * FROM naturalearth_lowres"}]
    for run in (vp.plan, vp.pipeline):
        with pytest.raises(GdalMcpError) as e:
            run(NE, dst=str(tmp_path / "x.gpkg"), steps=steps)
        assert e.value.code == "invalid-argument" and "steps[1] (sql)" in e.value.message and "first step" in e.value.message
    assert not (tmp_path / "x.gpkg").exists()
