"""vector_join and vector_overlay through the FastMCP client, checked against geopandas."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from fastmcp import Client

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
