"""crs_info, crs_search, transform_coordinates through an MCP client."""

from __future__ import annotations

from fastmcp import Client
from pyproj import CRS, Transformer
from pyproj.aoi import AreaOfInterest
from pyproj.database import query_utm_crs_info

from tests.helpers import call


async def test_crs_tools(client: Client) -> None:
    err, res = await call(client, "crs_search", bbox=[-9.25, 38.65, -9.05, 38.8], kind="projected", limit=5)
    assert not err and res["matches"][0]["crs"] == "EPSG:32629", res
    err, res = await call(client, "crs_search", query="Lambert-93")
    assert not err and res["matches"][0]["crs"] == "EPSG:2154"
    err, res = await call(client, "crs_info", crs="WGS 84 / UTM zone 29N")
    assert not err and res["epsg"] == 32629 and res["utm_zone"] == "29N", res
    err, res = await call(client, "transform_coordinates", points=[[2.2945, 48.8584]], src_crs="EPSG:4326", dst_crs="EPSG:2154")
    ex, ey = Transformer.from_crs(4326, 2154, always_xy=True).transform(2.2945, 48.8584)
    assert not err and abs(res["points"][0][0] - ex) < 1e-3 and abs(res["points"][0][1] - ey) < 1e-3
    err, res = await call(client, "crs_info", crs="not a crs at all")
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(client, "crs_search")
    assert err and res["error"]["code"] == "invalid-argument"


async def test_crs_search_by_bbox_and_country(client: Client) -> None:
    """The UTM zone of the bbox centre first (as pyproj names it), then the national CRS; hints that help."""
    for bbox in ([2.22, 48.81, 2.47, 48.91], [150.9, -34.1, 151.4, -33.7], [5.0, 45.0, 8.0, 47.0]):
        cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
        (utm,) = query_utm_crs_info(datum_name="WGS 84", area_of_interest=AreaOfInterest(cx, cy, cx, cy))
        err, res = await call(client, "crs_search", bbox=bbox)
        assert not err and res["matches"][0]["crs"] == f"EPSG:{utm.code}", res["matches"][:3]
    err, res = await call(client, "crs_search", bbox=[-5.2, 41.3, 9.6, 51.1], kind="projected")
    assert not err and res["matches"][1]["crs"] == "EPSG:2154" and res["matches"][1]["bbox_share"] == 1
    assert "EPSG:2154" in res["warnings"][0]  # France is wider than a UTM zone
    err, res = await call(client, "crs_search", query="Luxembourg", bbox=[5.7, 49.4, 6.55, 50.2])
    area = CRS.from_epsg(2169).area_of_use  # a bit smaller than the bbox: it overlaps, it does not contain
    assert area.west > 5.7 and area.north < 50.2
    assert not err and res["matches"][0]["name"] == "LUREF / Luxembourg TM" and 0 < res["matches"][0]["bbox_share"] < 1
    err, res = await call(client, "crs_search", query="Portugal", bbox=[-9.6, 36.9, -6.1, 42.2])
    assert not err and [m["crs"] for m in res["matches"][:2]] == ["EPSG:32629", "EPSG:3763"]
    err, res = await call(client, "crs_search", query="Lambert-93", bbox=[-9.25, 38.65, -9.05, 38.8])
    assert not err and res["matches"] == [] and "leave bbox out" in res["warnings"][0] and "larger" not in res["warnings"][0]
