"""crs_info, crs_search, transform_coordinates through an MCP client."""

from __future__ import annotations

from fastmcp import Client
from pyproj import Transformer

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
