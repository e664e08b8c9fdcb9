"""vector_join's engine against geopandas (sjoin, sjoin_nearest), pyproj.Geod and pandas, on naturalearth countries."""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import shapely
from pyproj import Geod

from gdal_mcp.engine.vector import join as join_mod
from gdal_mcp.engine.vector.aggregate import Aggregator, parse_aggregate
from gdal_mcp.engine.vector.join import join
from gdal_mcp.errors import GdalMcpError

gpd = pytest.importorskip("geopandas")
DATA = Path(__file__).parents[2] / "data" / "vector"
COUNTRIES = DATA / "naturalearth_lowres.shp"


@pytest.fixture
def countries(tmp_path: Path) -> Path:
    for f in DATA.glob("naturalearth_lowres.*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "naturalearth_lowres.shp"


def _points(tmp_path: Path, n: int = 5000, seed: int = 7) -> tuple[Path, object]:
    rng = np.random.default_rng(seed)
    values = rng.normal(100, 30, n)
    values[rng.random(n) < 0.1] = np.nan  # nulls are ignored by the statistics
    pts = gpd.GeoDataFrame(
        {"v": values, "k": rng.integers(0, 4, n).astype("int64")},
        geometry=gpd.points_from_xy(rng.uniform(-170, 170, n), rng.uniform(-55, 75, n)),
        crs=4326,
    )
    path = tmp_path / "points.gpkg"
    pts.to_file(path)
    return path, pts


@pytest.mark.parametrize("batch", [join_mod.BATCH_SIZE, 700])
def test_point_in_polygon_counts_equal_geopandas(
    tmp_path: Path, countries: Path, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(join_mod, "READ_BATCH", batch)
    path, pts = _points(tmp_path)
    aggregate = {"*": ["count"], "v": ["sum", "mean", "min", "max", "median", "std"], "k": ["count_distinct"]}
    res, warns = join(str(countries), str(tmp_path / "counts.gpkg"), join=str(path), aggregate=aggregate)
    assert res.summary.feature_count == 177 and warns == [] and res.nearest is None
    out = gpd.read_file(tmp_path / "counts.gpkg")
    ne = gpd.read_file(countries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gpd.sjoin(pts, ne, predicate="intersects").groupby("index_right")
    counts = ref.size().reindex(range(177), fill_value=0)
    assert out["count"].tolist() == counts.tolist()
    assert out["count"].sum() > 1000  # the test means something
    stats = ref["v"].agg(["sum", "mean", "min", "max", "median", "std"]).reindex(range(177))
    for func in ("sum", "mean", "min", "max", "median", "std"):
        expected = stats[func].to_numpy(dtype=float)
        got = out[f"v_{func}"].to_numpy(dtype=float)
        if func == "sum":  # pandas sums an empty group to 0; the join says null (no values)
            expected = np.where(ref["v"].count().reindex(range(177), fill_value=0).to_numpy() > 0, expected, np.nan)
        np.testing.assert_allclose(got, expected, rtol=1e-9, equal_nan=True)
    np.testing.assert_array_equal(out["k_count_distinct"], ref["k"].nunique().reindex(range(177), fill_value=0))
    assert out["name"].tolist() == ne["name"].tolist()  # the input's attributes are kept, in order


def test_counts_when_the_input_is_the_larger_layer(tmp_path: Path, countries: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Points (larger) streamed against an index of countries, aggregated per point: how many countries each
    point is in; and the plain sjoin (one row per match) equals geopandas'."""
    monkeypatch.setattr(join_mod, "READ_BATCH", 900)
    path, pts = _points(tmp_path, 3000)
    ne = gpd.read_file(countries)
    join(str(path), str(tmp_path / "inner.gpkg"), join=str(countries), how="inner")
    out = gpd.read_file(tmp_path / "inner.gpkg")
    ref = gpd.sjoin(pts, ne, how="inner", predicate="intersects")
    assert len(out) == len(ref)
    assert sorted(zip(out["v"].fillna(-1), out["name"], strict=True)) == sorted(
        zip(ref["v"].fillna(-1), ref["name"], strict=True)
    )
    join(str(path), str(tmp_path / "left.gpkg"), join=str(countries), how="left", predicate="within")
    left = gpd.read_file(tmp_path / "left.gpkg")
    assert len(left) == len(gpd.sjoin(pts, ne, how="left", predicate="within"))
    assert left["name"].isna().sum() == len(pts) - len(ref)


def test_nearest_distances_are_ground_metres(tmp_path: Path, countries: Path) -> None:
    ne = gpd.read_file(countries)
    cities = gpd.GeoDataFrame({"city": ne["name"]}, geometry=ne.representative_point(), crs=4326)
    cities.to_file(tmp_path / "cities.gpkg")
    rng = np.random.default_rng(3)
    n = 300
    lon, lat = rng.uniform(-180, 180, n), rng.uniform(-70, 80, n)
    gpd.GeoDataFrame({"pid": np.arange(n)}, geometry=gpd.points_from_xy(lon, lat), crs=4326).to_file(tmp_path / "p.gpkg")
    res, _ = join(
        str(tmp_path / "p.gpkg"),
        str(tmp_path / "near.gpkg"),
        join=str(tmp_path / "cities.gpkg"),
        predicate="nearest",
        distance_field="dist_m",
    )
    assert res.nearest is not None and (res.nearest.distance_field, res.nearest.units, res.nearest.method) == (
        "dist_m",
        "m",
        "geodesic",
    )
    out = gpd.read_file(tmp_path / "near.gpkg").sort_values("pid")
    geod = Geod(ellps="WGS84")
    cx, cy = cities.geometry.x.to_numpy(), cities.geometry.y.to_numpy()
    _, _, d = geod.inv(np.repeat(lon, len(cx)), np.repeat(lat, len(cx)), np.tile(cx, n), np.tile(cy, n))
    d = d.reshape(n, len(cx))
    assert len(out) == n  # no ties among random points
    np.testing.assert_allclose(out["dist_m"].to_numpy(), d.min(axis=1), rtol=1e-9)
    assert out["city"].tolist() == cities["city"].to_numpy()[d.argmin(axis=1)].tolist()
    # max_distance in km: farther points keep no match (left join: null fields)
    join(
        str(tmp_path / "p.gpkg"),
        str(tmp_path / "near500.gpkg"),
        join=str(tmp_path / "cities.gpkg"),
        predicate="nearest",
        max_distance=500,
        units="km",
        distance_field="dist_km",
    )
    near = gpd.read_file(tmp_path / "near500.gpkg").sort_values("pid")
    within = d.min(axis=1) <= 500_000
    assert near["city"].notna().to_numpy().tolist() == within.tolist()
    np.testing.assert_allclose(near["dist_km"].to_numpy()[within], d.min(axis=1)[within] / 1000, rtol=1e-9)


def test_nearest_on_a_projected_layer_equals_geopandas(tmp_path: Path) -> None:
    pts = gpd.read_file(DATA / "points.shp")
    polys = gpd.read_file(DATA / "polygons.shp")
    join(
        str(DATA / "points.shp"),
        str(tmp_path / "n.gpkg"),
        join=str(DATA / "polygons.shp"),
        predicate="nearest",
        distance_field="d",
        units="layer",
    )
    out = gpd.read_file(tmp_path / "n.gpkg")
    ref = gpd.sjoin_nearest(pts, polys, distance_col="d")
    np.testing.assert_allclose(np.sort(out["d"]), np.sort(ref["d"]), rtol=1e-12)


def test_attribute_join_by_key_refuses_text_against_integer_unless_cast(tmp_path: Path, countries: Path) -> None:
    ne = gpd.read_file(countries)
    layer = ne[["name", "geometry"]].copy()
    layer["code"] = [str(i) for i in range(len(ne))]  # text keys "0" … "176"
    layer.to_file(tmp_path / "layer.gpkg")
    rows = ["code,score,label"] + [f"{i},{i * 1.5},row {i}" for i in range(0, 200, 2)]  # integers 0, 2, … 198
    (tmp_path / "table.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(GdalMcpError) as e:  # refused before anything is written
        join(str(tmp_path / "layer.gpkg"), str(tmp_path / "joined.gpkg"), join=str(tmp_path / "table.csv"), on="code")
    assert e.value.code == "invalid-argument" and not (tmp_path / "joined.gpkg").exists()
    msg = e.value.message
    assert "'code' is text (string)" in msg and "join field 'code' is integer (int32)" in msg and "key_cast" in msg, msg
    res, warns = join(
        str(tmp_path / "layer.gpkg"),
        str(tmp_path / "joined.gpkg"),
        join=str(tmp_path / "table.csv"),
        on="code",
        key_cast="number",
    )
    assert res.summary.feature_count == 177
    assert any("key types differ" in w and "compared as numbers" in w for w in warns), warns
    assert any("88 of 177 input feature(s) have no matching key" in w for w in warns), warns
    assert any("11 of 100 join table row(s) matched no input feature" in w for w in warns), warns
    out = gpd.read_file(tmp_path / "joined.gpkg")
    even = out["code"].astype(int) % 2 == 0
    assert (out.loc[even, "score"] == out.loc[even, "code"].astype(int) * 1.5).all()
    assert out.loc[~even, "score"].isna().all() and out["label"].iloc[8] == "row 8"
    # inner + aggregate by key
    join(
        str(tmp_path / "layer.gpkg"),
        str(tmp_path / "agg.gpkg"),
        join=str(tmp_path / "table.csv"),
        on=["code", "code"],
        how="inner",
        aggregate={"*": ["count"], "score": ["sum"]},
        key_cast="text",
    )
    agg = gpd.read_file(tmp_path / "agg.gpkg")
    assert len(agg) == 89 and (agg["count"] == 1).all()
    assert (agg["score_sum"] == agg["code"].astype(int) * 1.5).all()


def test_aggregator_across_batches_equals_numpy() -> None:
    rng = np.random.default_rng(0)
    n = 5000
    keys = rng.integers(0, 40, n)
    vals = rng.normal(0, 1, n)
    nulls = rng.random(n) < 0.2
    names = rng.choice(["a", "b", "c"], n)
    table = pa.table({"x": pa.array(vals, mask=nulls), "s": pa.array(names)})
    spec = parse_aggregate(
        {
            "*": ["count"],
            "x": ["count", "sum", "mean", "median", "std", "min", "max", "first", "last"],
            "s": ["min", "count_distinct"],
        },
        table.schema,
    )
    agg = Aggregator(spec)
    for start in range(0, n, 777):
        agg.add(keys[start : start + 777], table.slice(start, 777))
    res = agg.result(np.arange(41))  # group 40 never seen
    for g in range(40):
        sel = keys == g
        ok = sel & ~nulls
        v = vals[ok]
        row = {c: res.column(c)[g].as_py() for c in res.column_names}
        assert row["count"] == sel.sum() and row["x_count"] == ok.sum()
        assert row["x_sum"] == pytest.approx(v.sum()) and row["x_mean"] == pytest.approx(v.mean())
        assert row["x_median"] == pytest.approx(np.median(v)) and row["x_std"] == pytest.approx(v.std(ddof=1))
        assert row["x_min"] == v.min() and row["x_max"] == v.max()
        assert row["x_first"] == v[0] and row["x_last"] == v[-1]
        assert row["s_min"] == min(names[sel]) and row["s_count_distinct"] == len(set(names[sel]))
    assert res.column("count")[40].as_py() == 0 and res.column("x_mean")[40].as_py() is None


def test_bad_aggregate_and_arguments_are_refused(tmp_path: Path, countries: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        parse_aggregate({"name": ["sum"]}, {"name": pa.string()})
    assert e.value.code == "invalid-argument" and "numeric" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        parse_aggregate({"nope": ["count"]}, ["a"])
    assert e.value.code == "not-found"
    with pytest.raises(GdalMcpError) as e:
        parse_aggregate({"a": ["avg"]}, ["a"])
    assert e.value.code == "invalid-argument" and "mean" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        join(str(countries), str(tmp_path / "x.gpkg"), join=str(countries), max_distance=5)
    assert e.value.code == "invalid-argument"


def test_shapely_is_2() -> None:
    assert int(shapely.__version__.split(".")[0]) >= 2


def _cells(size: float) -> object:
    xs, ys = np.arange(-180, 180, size), np.arange(-90, 90, size)
    boxes = [shapely.box(x, y, x + size, y + size) for y in ys for x in xs]
    return gpd.GeoDataFrame({"cell": np.arange(len(boxes))}, geometry=boxes, crs=4326)


@pytest.mark.parametrize("size", [30.0, 12.0])  # 72 cells (the cities streamed) or 450 (the cells streamed)
def test_count_by_a_join_field_equals_geopandas_groupby(tmp_path: Path, countries: Path, size: float) -> None:
    ne = gpd.read_file(countries)
    cities = gpd.GeoDataFrame({"continent": ne["continent"]}, geometry=ne.representative_point(), crs=4326)
    cities.loc[::9, "continent"] = None  # nulls are not counted
    cities.to_file(tmp_path / "cities.gpkg")
    cells = _cells(size)
    cells.to_file(tmp_path / "cells.gpkg")
    res, _ = join(
        str(tmp_path / "cells.gpkg"),
        str(tmp_path / "by.gpkg"),
        join=str(tmp_path / "cities.gpkg"),
        aggregate={"*": ["count"], "continent": ["count_by"]},
    )
    out = gpd.read_file(tmp_path / "by.gpkg").set_index("cell")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gpd.sjoin(cells, cities, predicate="intersects").groupby(["cell", "continent"]).size().unstack(fill_value=0)
    ref = ref.reindex(cells["cell"], fill_value=0)
    assert len(ref.columns) == cities["continent"].nunique() >= 6
    for value in ref.columns:
        name = "continent_" + re.sub(r"\W+", "_", value).strip("_")
        assert name in res.summary.fields
        assert out[name].tolist() == ref[value].tolist(), value
    assert out[[c for c in out.columns if c.startswith("continent_")]].to_numpy().sum() == ref.to_numpy().sum() > 100
    assert out["count"].sum() > ref.to_numpy().sum()  # the null continents are counted by "*" only


def test_count_by_refuses_too_many_values(tmp_path: Path, countries: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        join(str(countries), str(tmp_path / "x.gpkg"), join=str(countries), aggregate={"name": ["count_by"]})
    assert e.value.code == "invalid-argument" and "177" in e.value.message and "count_distinct" in e.value.message


@pytest.mark.parametrize("ext", ["gpkg", "geojson", "shp"])
def test_field_names_differing_in_case_are_suffixed(tmp_path: Path, countries: Path, ext: str) -> None:
    """name / NAME and FIPS / fips are one field to GPKG, GeoJSON and shapefile: both get _left / _right."""
    ne = gpd.read_file(countries)
    a = ne[["name", "geometry"]].assign(FIPS=np.arange(len(ne)))
    b = ne[["name", "geometry"]].rename(columns={"name": "NAME"}).assign(fips=[f"{i:03d}" for i in range(len(ne))])
    a.to_file(tmp_path / "a.gpkg")
    b.to_file(tmp_path / "b.gpkg")
    res, _ = join(str(tmp_path / "a.gpkg"), str(tmp_path / f"j.{ext}"), join=str(tmp_path / "b.gpkg"))
    assert res.summary.fields == ["name_left", "FIPS_left", "NAME_right", "fips_right"]
    out = gpd.read_file(tmp_path / f"j.{ext}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gpd.sjoin(a.rename(columns={"name": "name_left", "FIPS": "FIPS_left"}), b, predicate="intersects")
    assert sorted(zip(out["name_left"], out["NAME_right"], out["fips_right"], strict=True)) == sorted(
        zip(ref["name_left"], ref["NAME"], ref["fips"], strict=True)
    )


def test_output_names_made_unique_whatever_their_case(tmp_path: Path) -> None:
    """A count_by value named like another statistic ('count' of kind -> kind_count twice): the second is renamed,
    reported, and the counts are right (3 points in the square, 2 of kind 'count')."""
    square = gpd.GeoDataFrame({"zone": [1]}, geometry=[shapely.box(0, 0, 10, 10)], crs=4326)
    pts = gpd.GeoDataFrame(
        {"kind": ["count", "count", "other", "count"]}, geometry=gpd.points_from_xy([1, 2, 3, 20], [1, 2, 3, 20]), crs=4326
    )
    square.to_file(tmp_path / "sq.gpkg")
    pts.to_file(tmp_path / "pts.gpkg")
    res, warns = join(
        str(tmp_path / "sq.gpkg"),
        str(tmp_path / "o.gpkg"),
        join=str(tmp_path / "pts.gpkg"),
        aggregate={"kind": ["count", "count_by"]},
    )
    assert res.summary.fields == ["zone", "kind_count", "kind_count_2", "kind_other"]
    assert any("'kind_count'" in w and "'kind_count_2'" in w for w in warns), warns
    out = gpd.read_file(tmp_path / "o.gpkg")
    assert (out["kind_count"][0], out["kind_count_2"][0], out["kind_other"][0]) == (3, 2, 1)
