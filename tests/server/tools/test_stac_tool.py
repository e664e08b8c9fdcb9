"""stac_search through an MCP client: a static catalog in the workspace (and its assets read by raster_info and
raster_stats, checked against rasterio), a STAC API stub on 127.0.0.1 reached by a server that allows the network,
refusals with their codes, and the server process never loading pystac."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from fastmcp import Client

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import call
from tests.stac_helpers import StaticItem, StubAPI, api_items, overlaps, reference_search, write_static_catalog


@pytest.fixture(scope="module")
def stac_ws(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[StaticItem]]:
    ws = tmp_path_factory.mktemp("stac-ws")
    return ws, write_static_catalog(ws / "stac")


@pytest.fixture(scope="module")
def items() -> list[dict[str, Any]]:
    return api_items()


@pytest.fixture(scope="module")
def stub(items: list[dict[str, Any]]) -> Iterator[StubAPI]:
    api = StubAPI(items, max_page=5).start()
    yield api
    api.stop()


@pytest.fixture(scope="module")
def networked(stac_ws: tuple[Path, list[StaticItem]]) -> Iterator[tuple]:
    """A server over the catalog's workspace whose workers may connect (the stub API is on 127.0.0.1)."""
    mcp, app = build_server(Settings(workspaces=(stac_ws[0],), workers=1, timeout=60, allow_network=True, confirm="never"))
    yield mcp, app
    app.executor.close()


@pytest.fixture
async def net_client(networked: tuple) -> AsyncIterator[Client]:
    async with Client(networked[0]) as c:
        yield c


async def test_the_tool_is_read_only_and_documented(client: Client) -> None:
    tool = next(t for t in await client.list_tools() if t.name == "stac_search")
    assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
    props = tool.input_schema["properties"]
    assert {"catalog", "collections", "bbox", "bbox_crs", "datetime", "query", "sortby", "limit", "page_token"} <= set(props)
    assert all(p.get("description") for p in props.values())
    assert tool.input_schema["required"] == ["catalog"]
    assert "input" in json.dumps(tool.output_schema)  # each asset's input= for the raster tools


async def test_a_workspace_catalog_is_searched(net_client: Client, stac_ws: tuple[Path, list[StaticItem]]) -> None:
    ws, known = stac_ws
    err, res = await call(
        net_client, "stac_search", catalog="stac/catalog.json", query={"eo:cloud_cover": {"lt": 50}}, sortby="eo:cloud_cover"
    )
    assert not err, res
    expected = sorted((k for k in known if k.cloud < 50), key=lambda k: k.cloud)
    assert [i["id"] for i in res["items"]] == [k.id for k in expected]
    assert res["kind"] == "static" and res["matched"] == len(expected) and res["catalog"] == "stac/catalog.json"
    for item, entry in zip(res["items"], expected, strict=True):
        visual = next(a for a in item["assets"] if a["key"] == "visual")
        assert visual["input"] == entry.cog.relative_to(ws).as_posix()
        assert [b["common_name"] for b in visual["bands"]] == ["red", "green", "blue"]
        assert item["href"] == entry.cog.with_suffix(".json").relative_to(ws).as_posix()
    assert str(ws) not in json.dumps(res)


async def test_pages_and_a_folder_as_catalog(net_client: Client, stac_ws: tuple[Path, list[StaticItem]]) -> None:
    _, known = stac_ws
    start, end = dt.datetime(2024, 2, 1, tzinfo=dt.UTC), dt.datetime(2024, 6, 30, 23, 59, 59, tzinfo=dt.UTC)
    expected = sorted((k for k in known if start <= k.datetime <= end), key=lambda k: k.datetime, reverse=True)
    assert len(expected) > 2
    args = {"catalog": "stac", "datetime": "2024-02-01/2024-06-30", "sortby": "-datetime", "limit": 2}
    ids: list[str] = []
    token = None
    for _ in range(10):
        err, res = await call(net_client, "stac_search", **args, **({"page_token": token} if token else {}))
        assert not err, res
        assert res["returned"] <= 2 and res["matched"] == len(expected)
        ids += [i["id"] for i in res["items"]]
        token = res["next_page_token"]
        if token is None:
            break
    assert ids == [k.id for k in expected]


async def test_an_asset_input_reads_with_the_raster_tools(net_client: Client, stac_ws: tuple[Path, list[StaticItem]]) -> None:
    ws, known = stac_ws
    target = next(k for k in known if k.cloud == 12.5)
    utm = target.native_bounds  # the scene's own footprint, in the rasters' CRS
    err, res = await call(net_client, "stac_search", catalog="stac/catalog.json", bbox=list(utm), bbox_crs="EPSG:32618")
    assert not err, res
    expected = [k.id for k in known if overlaps(k.native_bounds, utm)]
    assert [i["id"] for i in res["items"]] == expected and target.id in expected
    item = next(i for i in res["items"] if i["id"] == target.id)
    path = next(a for a in item["assets"] if a["key"] == "visual")["input"]
    err, info = await call(net_client, "raster_info", path=path)
    assert not err, info
    err, stats = await call(net_client, "raster_stats", input=path)
    assert not err, stats
    with rasterio.open(ws / path) as ds:
        assert (info["width"], info["height"], info["count"]) == (ds.width, ds.height, ds.count)
        assert info["crs"]["epsg"] == ds.crs.to_epsg() and info["transform"] == pytest.approx(list(ds.transform.to_gdal()))
        data = ds.read(masked=True)
    for band, values in zip(stats["bands"], data, strict=True):
        valid = values.compressed().astype("float64")
        assert band["valid_count"] == valid.size
        assert band["mean"] == pytest.approx(float(np.mean(valid))) and band["max"] == float(valid.max())


async def test_a_stac_api_is_searched_when_the_network_is_allowed(
    net_client: Client, stub: StubAPI, items: list[dict[str, Any]]
) -> None:
    args = {
        "catalog": stub.url,
        "collections": ["s2"],
        "bbox": [-5.0, 38.0, 20.0, 58.0],
        "query": {"eo:cloud_cover": {"lt": 80}},
        "sortby": "properties.eo:cloud_cover",
        "limit": 4,
    }
    expected = reference_search(
        items, collections=["s2"], bbox=[-5.0, 38.0, 20.0, 58.0], max_cloud=80, sort=("eo:cloud_cover", False)
    )
    assert len(expected) > 4
    ids: list[str] = []
    token = None
    for _ in range(10):
        err, res = await call(net_client, "stac_search", **args, **({"page_token": token} if token else {}))
        assert not err, res
        assert res["kind"] == "api" and res["matched"] == len(expected)
        ids += [i["id"] for i in res["items"]]
        token = res["next_page_token"]
        if token is None:
            break
    assert ids == [it["id"] for it in expected]
    first = res["items"][0]
    red = next(a for a in first["assets"] if a["key"] == "red")
    assert red["input"] == red["href"] and red["href"].startswith("https://")


async def test_the_allow_list_decides_which_apis_are_searched(
    stac_ws: tuple[Path, list[StaticItem]], stub: StubAPI, items: list[dict[str, Any]]
) -> None:
    if "allow_remote" not in {f.name for f in dataclasses.fields(Settings)}:
        pytest.skip("this tree has no allow-list of remote locations (--allow-remote) yet")
    other = StubAPI(items).start()
    leaking = StubAPI(items, max_page=2, next_base=other.url).start()  # allowed, but its next links point at `other`
    allowed = (stub.url, leaking.url)
    mcp, app = build_server(
        Settings(workspaces=(stac_ws[0],), workers=1, timeout=60, allow_remote=allowed, confirm="never")  # type: ignore[call-arg]
    )
    try:
        async with Client(mcp) as c:
            err, res = await call(c, "stac_search", catalog=stub.url, limit=3)
            assert not err and res["kind"] == "api" and len(res["items"]) == 3, res
            err, res = await call(c, "stac_search", catalog=other.url)
            assert err and res["error"]["code"] == "out-of-root", res
            err, res = await call(c, "stac_search", catalog=leaking.url, limit=5)  # the worker checks each next link
            assert err and res["error"]["code"] == "out-of-root", res
            assert len(leaking.requests) == 1 and other.requests == []
    finally:
        app.executor.close()
        other.stop()
        leaking.stop()


async def test_a_url_is_refused_without_the_network(client: Client, stub: StubAPI) -> None:
    err, res = await call(client, "stac_search", catalog=stub.url + "/?key=SECRET")
    assert err and res["error"]["code"] == "unsupported", res
    assert "SECRET" not in res["error"]["message"]
    assert len(stub.requests) == 0 or all("key" not in str(p) for _, p in stub.requests)


async def test_an_unreachable_api_is_a_remote_failure_not_a_refusal(net_client: Client) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    err, res = await call(net_client, "stac_search", catalog=f"http://127.0.0.1:{port}/v1?lang=SECRET")
    assert err and res["error"]["code"] == "gdal-error", res
    assert f"127.0.0.1:{port}/v1" in res["error"]["message"] and "SECRET" not in res["error"]["message"]


@pytest.mark.parametrize(
    "catalog,code",
    [("../elsewhere/catalog.json", "out-of-root"), ("stac/none.json", "not-found"), ("s3://bucket/catalog.json", "unsupported")],
)
async def test_catalogs_outside_or_missing_are_refused(net_client: Client, catalog: str, code: str) -> None:
    err, res = await call(net_client, "stac_search", catalog=catalog)
    assert err and res["error"]["code"] == code, res


async def test_a_link_out_of_the_catalog_folder_is_refused(net_client: Client, stac_ws: tuple[Path, list[StaticItem]]) -> None:
    ws, _ = stac_ws
    (ws / "bad").mkdir(exist_ok=True)
    doc = {"type": "Catalog", "stac_version": "1.0.0", "id": "b", "description": "b", "links": []}
    doc["links"] = [{"rel": "child", "href": "../stac/catalog.json"}]
    (ws / "bad" / "catalog.json").write_text(json.dumps(doc))
    err, res = await call(net_client, "stac_search", catalog="bad/catalog.json")
    assert err and res["error"]["code"] == "out-of-root", res
    assert str(ws) not in res["error"]["message"] and "bad/catalog.json" in res["error"]["message"]


def test_the_server_process_never_loads_pystac() -> None:
    code = "import json, sys, gdal_mcp.server.build; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = [m for m in json.loads(out.stdout) if m.split(".")[0] in ("pystac", "pystac_client", "requests")]
    assert not loaded, f"the server imports {loaded}: STAC work belongs in the workers"
