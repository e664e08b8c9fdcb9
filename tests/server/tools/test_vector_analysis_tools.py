"""vector_join and vector_overlay through the FastMCP client, checked against geopandas."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import shapely
from fastmcp import Client

from tests.geodesic_reference import AeqdReference
from tests.helpers import call

gpd = pytest.importorskip("geopandas")


async def test_join_counts_and_overlay_through_the_client(client: Client, ws: Path) -> None:
    rng = np.random.default_rng(11)
    pts = gpd.GeoDataFrame(
        {"v": rng.normal(size=2000)},
        geometry=gpd.points_from_xy(rng.uniform(-20, 50, 2000), rng.uniform(-35, 60, 2000)),
        crs=4326,
    )
    pts.to_file(ws / "pts.gpkg")
    err, res = await call(
        client,
        "vector_join",
        input="vector/naturalearth_lowres.shp",
        join="pts.gpkg",
        output="out/counts.gpkg",
        aggregate={"*": ["count"], "v": ["sum"]},
    )
    assert not err, res
    assert res["summary"]["feature_count"] == 177 and {"count", "v_sum"} <= set(res["summary"]["fields"])
    ne = gpd.read_file(ws / "vector/naturalearth_lowres.shp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gpd.sjoin(pts, ne).groupby("index_right").size().reindex(range(177), fill_value=0)
    assert gpd.read_file(ws / "out/counts.gpkg")["count"].tolist() == ref.tolist()

    err, res = await call(
        client, "vector_overlay", input="vector/naturalearth_lowres.shp", overlay="pts.gpkg", output="out/ov_points.gpkg"
    )
    # Polygons cut by points give points only: dropped (keep_geom_type), and the warnings say so.
    assert not err and res["summary"]["feature_count"] == 0
    assert any("dropped" in w for w in res["warnings"]) and any("empty" in w for w in res["warnings"])
    boxes = gpd.GeoDataFrame({"name": ["a", "b"]}, geometry=gpd.GeoSeries.from_xy([0, 20], [10, 10]).buffer(8), crs=4326)
    boxes.to_file(ws / "blobs.gpkg")
    err, res = await call(
        client,
        "vector_overlay",
        input="vector/naturalearth_lowres.shp",
        overlay="blobs.gpkg",
        output="out/ov.gpkg",
        how="intersection",
    )
    assert not err, res
    ref_ov = gpd.overlay(ne, boxes, how="intersection")
    out = gpd.read_file(ws / "out/ov.gpkg")
    assert res["summary"]["feature_count"] == len(ref_ov) and "name_1" in out.columns and "name_2" in out.columns
    np.testing.assert_allclose(out.area.sum(), ref_ov.area.sum(), rtol=1e-6)

    err, res = await call(
        client,
        "vector_join",
        input="vector/naturalearth_lowres.shp",
        join="pts.gpkg",
        output="out/bad.gpkg",
        aggregate={"v": ["average"]},
    )
    assert err and res["error"]["code"] == "invalid-argument" and "mean" in res["error"]["message"]
    err, res = await call(
        client, "vector_overlay", input="vector/naturalearth_lowres.shp", overlay="../outside.gpkg", output="out/x.gpkg"
    )
    assert err and res["error"]["code"] in ("out-of-root", "not-found")


async def test_nearest_k_in_km_is_geodesic_through_the_client(client: Client, ws: Path) -> None:
    """k=3 nearest countries of points on lon/lat, in km, within 2000 km: ranks as a brute-force geodesic ranking,
    distances to each country's nearest point as a pyproj azimuthal equidistant reference (within 1e-4)."""
    lon = np.array([25.0, -95.0, 179.6, 12.0, -130.0, 140.0])
    lat = np.array([71.0, 76.0, -17.5, 56.0, -40.0, 50.0])
    gpd.GeoDataFrame({"pid": np.arange(6)}, geometry=gpd.points_from_xy(lon, lat), crs=4326).to_file(ws / "near_pts.gpkg")
    err, res = await call(
        client,
        "vector_join",
        input="near_pts.gpkg",
        join="vector/naturalearth_lowres.shp",
        output="out/near3.gpkg",
        predicate="nearest",
        k=3,
        units="km",
        max_distance=2000,
    )
    assert not err, res
    assert res["nearest"] == {"distance_field": "distance", "rank_field": "rank", "units": "km", "method": "geodesic", "k": 3}
    out = gpd.read_file(ws / "out/near3.gpkg")
    ne = gpd.read_file(ws / "vector/naturalearth_lowres.shp")
    reference = AeqdReference(ne.geometry)
    for pid in range(6):
        ref = reference(lon[pid], lat[pid]) / 1000
        order = [j for j in np.argsort(ref, kind="stable")[:3] if ref[j] <= 2000]
        rows = out[out.pid == pid].sort_values("rank")
        if not order:
            assert len(rows) == 1 and rows["name"].isna().all()
            continue
        assert rows["name"].tolist() == ne["name"].to_numpy()[order].tolist()
        assert rows["rank"].tolist() == list(range(1, len(order) + 1))
        np.testing.assert_allclose(rows["distance"].to_numpy(), ref[order], rtol=1e-4, atol=1e-3)
    assert (out.pid == 4).sum() == 1 and out[out.pid == 4]["name"].isna().all()  # South Pacific: nothing within 2000 km


async def test_count_by_case_clashes_and_key_types_through_the_client(client: Client, ws: Path) -> None:
    ne = gpd.read_file(ws / "vector/naturalearth_lowres.shp")
    cities = gpd.GeoDataFrame({"continent": ne["continent"]}, geometry=ne.representative_point(), crs=4326)
    cities.to_file(ws / "cities.gpkg")
    boxes = [shapely.box(x, y, x + 45, y + 45) for y in range(-90, 90, 45) for x in range(-180, 180, 45)]
    cells = gpd.GeoDataFrame({"cell": np.arange(len(boxes))}, geometry=boxes, crs=4326)
    cells.to_file(ws / "cells.gpkg")
    err, res = await call(
        client, "vector_join", input="cells.gpkg", join="cities.gpkg", output="out/by.gpkg", aggregate={"continent": ["count_by"]}
    )
    assert not err, res
    out = gpd.read_file(ws / "out/by.gpkg").set_index("cell")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = (
            gpd.sjoin(cells, cities)
            .groupby(["cell", "continent"])
            .size()
            .unstack(fill_value=0)
            .reindex(cells["cell"], fill_value=0)
        )
    for value in ref.columns:
        assert out["continent_" + re.sub(r"\W+", "_", value).strip("_")].tolist() == ref[value].tolist()

    a = ne[["name", "geometry"]].assign(FIPS=np.arange(len(ne)))
    b = ne[["name", "geometry"]].rename(columns={"name": "NAME"}).assign(fips=[str(i) for i in range(len(ne))])
    a.to_file(ws / "case_a.gpkg")
    b.to_file(ws / "case_b.gpkg")
    err, res = await call(client, "vector_join", input="case_a.gpkg", join="case_b.gpkg", output="out/case.gpkg")
    assert not err and res["summary"]["fields"] == ["name_left", "FIPS_left", "NAME_right", "fips_right"], res
    err, res = await call(client, "vector_merge", inputs=["case_a.gpkg", "case_b.gpkg"], output="out/case_merged.gpkg")
    assert not err and res["summary"]["fields"] == ["source", "name", "FIPS"], res
    assert gpd.read_file(ws / "out/case_merged.gpkg")["name"].tolist() == ne["name"].tolist() * 2
    err, res = await call(
        client, "vector_join", input="case_a.gpkg", join="case_b.gpkg", output="out/keys.gpkg", on=["FIPS", "fips"]
    )
    assert err and res["error"]["code"] == "invalid-argument", res
    msg = res["error"]["message"]
    assert "'FIPS' is integer (int64)" in msg and "'fips' is text (string)" in msg and "key_cast" in msg
    assert not (ws / "out/keys.gpkg").exists()
    err, res = await call(
        client,
        "vector_join",
        input="case_a.gpkg",
        join="case_b.gpkg",
        output="out/keys.gpkg",
        on=["FIPS", "fips"],
        key_cast="number",
    )
    assert not err, res
    keyed = gpd.read_file(ws / "out/keys.gpkg")
    assert (keyed["name_left"] == keyed["NAME_right"]).all() and len(keyed) == len(ne)
