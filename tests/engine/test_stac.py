"""stac_search's engine: a static catalog written by pystac (walk, filters, sort, pages, links kept in the catalog's
folder, the walk's limit) and a STAC API stub served on 127.0.0.1 (pystac-client's requests, next links, errors),
each checked against the reference search of tests/stac_helpers.py or the items the test wrote."""

from __future__ import annotations

import calendar
import datetime as dt
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyproj import Transformer

from gdal_mcp.engine import guard
from gdal_mcp.engine.stac import parse_interval, stac_search
from gdal_mcp.errors import GdalMcpError
from tests.stac_helpers import (
    StaticItem,
    StubAPI,
    api_items,
    overlaps,
    reference_search,
    serve_directory,
    write_static_catalog,
)


@pytest.fixture(scope="module")
def static(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[StaticItem]]:
    root = tmp_path_factory.mktemp("stac") / "stac"
    return root / "catalog.json", write_static_catalog(root)


@pytest.fixture(scope="module")
def items() -> list[dict[str, Any]]:
    return api_items()


@pytest.fixture
def stub(items: list[dict[str, Any]]) -> Iterator[StubAPI]:
    api = StubAPI(items, max_page=4).start()
    yield api
    api.stop()


def all_pages(**search: Any) -> tuple[list[str], list[Any]]:
    """Every item id of a search, page by page through next_page_token; and the results."""
    results = [stac_search(**search)]
    while results[-1].next_page_token:
        assert len(results) < 50, "paging does not end"
        results.append(stac_search(**search, page_token=results[-1].next_page_token))
    return [item.id for r in results for item in r.items], results


# ----- a static catalog ------------------------------------------------------------------------------------------
STATIC_SEARCHES = {
    "collection and cloud": (
        {"collections": ["rgb"], "query": {"eo:cloud_cover": {"lt": 50}}},
        lambda k: k.collection == "rgb" and k.cloud < 50,
    ),
    "time interval": (
        {"datetime": "2024-02-01/2024-04-30"},
        lambda k: dt.datetime(2024, 2, 1, tzinfo=dt.UTC) <= k.datetime < dt.datetime(2024, 5, 1, tzinfo=dt.UTC),
    ),
    "open interval": ({"datetime": "../2024-01-31"}, lambda k: k.datetime < dt.datetime(2024, 2, 1, tzinfo=dt.UTC)),
    "platforms and gte": (
        {"query": {"platform": {"in": ["sat-a", "sat-c"]}, "eo:cloud_cover": {"gte": 35}}},
        lambda k: k.platform in ("sat-a", "sat-c") and k.cloud >= 35,
    ),
    "neq": ({"query": {"properties.platform": {"neq": "sat-b"}}}, lambda k: k.platform != "sat-b"),
}


@pytest.mark.parametrize("name", STATIC_SEARCHES)
def test_static_filters_match_the_items_written(static: tuple[Path, list[StaticItem]], name: str) -> None:
    catalog, known = static
    search, keep = STATIC_SEARCHES[name]
    expected = [k.id for k in known if keep(k)]  # the catalog's order: collection rgb's items, then other's
    assert expected and len(expected) < len(known), "the search must select some items, not all"
    result = stac_search(catalog=str(catalog), limit=100, **search)
    assert [i.id for i in result.items] == expected
    assert result.kind == "static" and result.matched == len(expected) and result.next_page_token is None


def test_static_bbox_in_lonlat_and_in_the_data_crs(static: tuple[Path, list[StaticItem]]) -> None:
    catalog, known = static
    lonlat = [-78.1, 24.0, -77.0, 25.1]
    expected = [k.id for k in known if overlaps(k.bbox, tuple(lonlat))]  # type: ignore[arg-type]
    assert 0 < len(expected) < len(known)
    assert [i.id for i in stac_search(catalog=str(catalog), bbox=tuple(lonlat), limit=100).items] == expected
    # In the rasters' own CRS (UTM 18N): decided on the windows' native bounds, no transformation in the reference.
    utm = (150000.0, 2650000.0, 260000.0, 2740000.0)
    expected = [k.id for k in known if overlaps(k.native_bounds, utm)]
    assert 0 < len(expected) < len(known)
    result = stac_search(catalog=str(catalog), bbox=utm, bbox_crs="EPSG:32618", limit=100)
    assert [i.id for i in result.items] == expected
    west, south, east, north = Transformer.from_crs(32618, 4326, always_xy=True).transform_bounds(*utm, densify_pts=21)
    assert result.searched_bbox == pytest.approx([west, south, east, north])


@pytest.mark.parametrize(
    "sortby,key",
    [
        (["-properties.eo:cloud_cover"], lambda k: (-k.cloud,)),
        (["datetime"], lambda k: (k.datetime,)),
        (["platform", "-eo:cloud_cover"], lambda k: (k.platform, -k.cloud)),
        (["-id"], None),
    ],
)
def test_static_sort_and_pages(static: tuple[Path, list[StaticItem]], sortby: list[str], key: Any) -> None:
    catalog, known = static
    expected = [k.id for k in sorted(known, key=key)] if key else sorted((k.id for k in known), reverse=True)
    ids, results = all_pages(catalog=str(catalog), sortby=sortby, limit=3)
    assert ids == expected
    assert [r.returned for r in results] == [3, 3, 2] and all(r.matched == len(known) for r in results)
    assert results[-1].next_page_token is None


def test_static_assets_name_their_files_and_bands(static: tuple[Path, list[StaticItem]]) -> None:
    catalog, known = static
    result = stac_search(catalog=str(catalog), query={"eo:cloud_cover": {"eq": 12.5}})
    (item,) = result.items
    entry = next(k for k in known if k.id == item.id)
    visual = next(a for a in item.assets if a.key == "visual")
    assert visual.input == visual.href == str(entry.cog.resolve())
    assert [b.common_name for b in visual.bands] == ["red", "green", "blue"] and visual.band_count == 3
    assert [b.data_type for b in visual.bands] == ["uint8"] * 3
    assert "cloud-optimized" in (visual.type or "") and visual.roles == ["data", "visual"]
    metadata = next(a for a in item.assets if a.key == "metadata")
    assert metadata.input == str(entry.cog.resolve().parent / "metadata.xml")
    assert item.collection == entry.collection and item.cloud_cover == entry.cloud and item.proj_code == "EPSG:32618"
    assert item.bbox == pytest.approx(list(entry.bbox)) and item.geometry_type == "Polygon"
    only = stac_search(catalog=str(catalog), query={"eo:cloud_cover": {"eq": 12.5}}, assets=["visual"])
    assert [a.key for a in only.items[0].assets] == ["visual"]


def test_a_page_token_is_for_its_own_search(static: tuple[Path, list[StaticItem]]) -> None:
    catalog, _ = static
    first = stac_search(catalog=str(catalog), limit=2)
    assert first.next_page_token
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=str(catalog), limit=2, collections=["rgb"], page_token=first.next_page_token)
    assert e.value.code == "invalid-argument" and "another search" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=str(catalog), page_token="not-a-token")
    assert e.value.code == "invalid-argument" and "next_page_token" in e.value.message
    # only limit may change between pages
    second = stac_search(catalog=str(catalog), limit=5, page_token=first.next_page_token)
    assert [i.id for i in second.items] == [i.id for i in stac_search(catalog=str(catalog), limit=7).items][2:]


def _catalog_with_links(folder: Path, links: list[dict[str, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "catalog.json"
    doc = {"type": "Catalog", "stac_version": "1.0.0", "id": "c", "description": "d", "links": links}
    path.write_text(json.dumps(doc))
    return path


def _item(item_id: str) -> dict[str, Any]:
    return {
        "type": "Feature",
        "stac_version": "1.0.0",
        "id": item_id,
        "geometry": None,
        "properties": {"datetime": "2024-01-01T00:00:00Z"},
        "links": [],
        "assets": {"data": {"href": f"./{item_id}.tif"}},
    }


@pytest.mark.parametrize(
    "href",
    ["../outside/catalog.json", "https://example.com/catalog.json", "/etc/hostname", "escape/catalog.json"],
)
def test_links_leaving_the_catalog_folder_are_refused(tmp_path: Path, href: str) -> None:
    outside = _catalog_with_links(tmp_path / "outside", [])
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "escape").symlink_to(outside.parent)  # a link inside the folder, to a folder outside it
    catalog = _catalog_with_links(tmp_path / "cat", [{"rel": "child", "href": href}])
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=str(catalog))
    assert e.value.code == "out-of-root", e.value.message
    assert "catalog" in e.value.message


def test_assets_outside_the_folder_get_no_input(tmp_path: Path) -> None:
    item = _item("a")
    item["assets"] = {"in": {"href": "./a.tif"}, "out": {"href": "../../secret.tif"}, "web": {"href": "https://x.org/a.tif"}}
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(item))
    catalog = _catalog_with_links(folder, [{"rel": "item", "href": "./a.json"}])
    (result,) = stac_search(catalog=str(catalog)).items
    inputs = {a.key: a.input for a in result.assets}
    assert inputs == {"in": str(folder.resolve() / "a.tif"), "out": None, "web": "https://x.org/a.tif"}


def test_the_walk_stops_at_its_limit_and_says_so(static: tuple[Path, list[StaticItem]]) -> None:
    catalog, known = static
    full = stac_search(catalog=str(catalog), limit=100)
    assert not full.walk_truncated and full.documents_read == 1 + 2 + len(known)  # catalog, 2 collections, items
    cut = stac_search(catalog=str(catalog), limit=100, max_walk=5)
    assert cut.walk_truncated and cut.documents_read == 5
    assert [i.id for i in cut.items] == [k.id for k in known][:3]  # catalog, collection rgb, its first three items
    assert any("stopped after reading 5 documents" in w for w in cut.warnings)


def test_broken_links_are_skipped_and_reported(tmp_path: Path) -> None:
    folder = tmp_path / "cat"
    folder.mkdir()
    for name in ("a", "c"):
        (folder / f"{name}.json").write_text(json.dumps(_item(name)))
    (folder / "b.json").write_text("{ not json")
    os.mkfifo(folder / "pipe.json")  # a FIFO would block the read forever
    links = [{"rel": "item", "href": f"./{n}.json"} for n in ("a", "b", "missing", "pipe", "c")]
    result = stac_search(catalog=str(_catalog_with_links(folder, links)))
    assert [i.id for i in result.items] == ["a", "c"]
    assert any(w.startswith("3 document(s)") for w in result.warnings), result.warnings


def test_an_item_collection_file_is_searched(tmp_path: Path, static: tuple[Path, list[StaticItem]]) -> None:
    catalog, known = static
    docs = [json.loads(p.read_text()) for p in sorted(catalog.parent.glob("*/*/*.json"))]
    for doc in docs:  # as an item collection next to the COGs' folders: hrefs relative to the collection's file
        doc["assets"]["visual"]["href"] = f"./{doc['collection']}/{doc['id']}/{doc['id']}.tif"
    path = catalog.parent / "items.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": docs}))
    try:
        result = stac_search(catalog=str(path), sortby=["eo:cloud_cover"], limit=100)
    finally:
        path.unlink()
    assert [i.id for i in result.items] == [k.id for k in sorted(known, key=lambda k: k.cloud)]
    by_id = {k.id: k for k in known}
    for item in result.items:
        visual = next(a for a in item.assets if a.key == "visual")
        assert visual.input == str(by_id[item.id].cog.resolve())


@pytest.mark.parametrize(
    "args,words",
    [
        ({"datetime": "June 2024"}, "RFC 3339"),
        ({"datetime": "2024-07-01/2024-06-01"}, "after its end"),
        ({"datetime": "../.."}, "both ends"),
        ({"query": {"eo:cloud_cover": {"less": 3}}}, "unknown operator"),
        ({"query": {"platform": {"in": "sat-a"}}}, "list"),
        ({"bbox": (500000, 4000000, 510000, 4010000)}, "bbox_crs"),
        ({"sortby": ["-"]}, "sortby"),
        ({"limit": 0}, "limit"),
    ],
)
def test_bad_arguments_say_what_to_give(static: tuple[Path, list[StaticItem]], args: dict[str, Any], words: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=str(static[0]), **args)
    assert e.value.code == "invalid-argument" and words in e.value.message


def test_partial_dates_cover_their_whole_period() -> None:
    (start, end), sent = parse_interval("2024-02")
    last = calendar.monthrange(2024, 2)[1]
    assert start == dt.datetime(2024, 2, 1, tzinfo=dt.UTC)
    assert end == dt.datetime(2024, 2, last, 23, 59, 59, tzinfo=dt.UTC)
    assert sent == f"2024-02-01T00:00:00Z/2024-02-{last}T23:59:59Z"
    (start, end), sent = parse_interval("2024-06-01T10:00:00+02:00")
    assert start == end == dt.datetime(2024, 6, 1, 8, tzinfo=dt.UTC) and sent == "2024-06-01T08:00:00Z"
    assert parse_interval("2023/..")[1] == "2023-01-01T00:00:00Z/.."


# ----- a static catalog at a URL -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(static: tuple[Path, list[StaticItem]]) -> Iterator[str]:
    server = serve_directory(static[0].parent)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_static_catalog_at_a_url_is_walked(static: tuple[Path, list[StaticItem]], served: str) -> None:
    catalog, known = static
    result = stac_search(catalog=served + "/catalog.json", sortby=["-eo:cloud_cover"], datetime="2024", limit=100)
    expected = sorted((k for k in known if k.datetime.year == 2024), key=lambda k: -k.cloud)
    assert result.kind == "static" and [i.id for i in result.items] == [k.id for k in expected]
    assert result.matched == len(expected) and result.documents_read == 1 + 2 + len(known)
    for item, entry in zip(result.items, expected, strict=True):
        visual = next(a for a in item.assets if a.key == "visual")
        assert visual.input == served + "/" + entry.cog.relative_to(catalog.parent).as_posix()


def test_a_catalog_at_a_url_stops_reading_once_a_page_is_full(static: tuple[Path, list[StaticItem]], served: str) -> None:
    catalog, known = static
    ids, results = all_pages(catalog=served + "/catalog.json", limit=2)
    assert ids == [k.id for k in known]
    assert [r.matched for r in results] == [None] * (len(results) - 1) + [len(known)]
    # the first page read the catalog, the rgb collection and three items (two for the page, one to know more follow)
    assert results[0].documents_read == 5


def test_a_catalog_at_a_url_never_names_a_local_file(tmp_path: Path) -> None:
    _catalog_with_links(tmp_path, [{"rel": "child", "href": "file:///etc/hostname"}])
    server = serve_directory(tmp_path)
    try:
        with pytest.raises(GdalMcpError) as e:
            stac_search(catalog=f"http://127.0.0.1:{server.server_address[1]}/catalog.json")
    finally:
        server.shutdown()
        server.server_close()
    assert e.value.code == "out-of-root" and "http(s)" in e.value.message


# ----- a STAC API ------------------------------------------------------------------------------------------------
API_SEARCHES = {
    "bbox and time": (
        {"bbox": (0.0, 40.0, 20.0, 55.0), "datetime": "2024-03-01/2024-10-31"},
        {
            "bbox": [0.0, 40.0, 20.0, 55.0],
            "start": dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
            "end": dt.datetime(2024, 10, 31, 23, 59, 59, tzinfo=dt.UTC),
        },
    ),
    "collection, query, sort": (
        {"collections": ["s2"], "query": {"eo:cloud_cover": {"lt": 60}}, "sortby": ["-properties.eo:cloud_cover"]},
        {"collections": ["s2"], "max_cloud": 60, "sort": ("eo:cloud_cover", True)},
    ),
    "platform, sort by time": (
        {"query": {"platform": {"in": ["sentinel-2b"]}}, "sortby": ["properties.datetime"]},
        {"platforms": ["sentinel-2b"], "sort": ("datetime", False)},
    ),
}


@pytest.mark.parametrize("methods", [("GET", "POST"), ("GET",)], ids=["post", "get"])
@pytest.mark.parametrize("name", API_SEARCHES)
def test_api_search_and_pages_match_the_reference(items: list[dict[str, Any]], methods: tuple[str, ...], name: str) -> None:
    search, reference = API_SEARCHES[name]
    expected = [it["id"] for it in reference_search(items, **reference)]  # type: ignore[arg-type]
    assert len(expected) > 6, "the search must span several pages"
    api = StubAPI(items, methods=methods, max_page=4).start()
    try:
        ids, results = all_pages(catalog=api.url, limit=6, **search)
    finally:
        api.stop()
    assert ids == expected
    assert all(r.kind == "api" and r.matched == len(expected) for r in results)
    assert [r.returned for r in results[:-1]] == [6] * (len(results) - 1) and results[-1].next_page_token is None
    assert {m for m, _ in api.requests} == {"POST" if "POST" in methods else "GET"}
    # limit 6 over pages of at most 4: each call follows the API's next link to fill its page
    assert len(api.requests) >= len(expected) // 4


def test_api_gets_the_bbox_in_lonlat(stub: StubAPI, items: list[dict[str, Any]]) -> None:
    laea = (3500000.0, 2000000.0, 4800000.0, 3200000.0)  # ETRS89 / LAEA Europe metres
    result = stac_search(catalog=stub.url, bbox=laea, bbox_crs="EPSG:3035", limit=50)
    sent = stub.requests[-1][1]["bbox"]
    lonlat = Transformer.from_crs(3035, 4326, always_xy=True).transform_bounds(*laea, densify_pts=21)
    assert sent == pytest.approx(list(lonlat)) and result.searched_bbox == pytest.approx(list(lonlat))
    assert [i.id for i in result.items] == [it["id"] for it in reference_search(items, bbox=list(lonlat))]


def test_api_pages_larger_than_limit_are_resumed_inside(items: list[dict[str, Any]]) -> None:
    api = StubAPI(items, max_page=100).start()
    api_limit = api.search

    def ignoring_limit(handler: Any, method: str, params: dict[str, Any]) -> None:
        api_limit(handler, method, {**params, "limit": 9})  # an API serving 9 per page whatever it is asked

    api.search = ignoring_limit  # type: ignore[method-assign]
    try:
        ids, results = all_pages(catalog=api.url, limit=4, sortby=["properties.eo:cloud_cover"])
    finally:
        api.stop()
    assert ids == [it["id"] for it in reference_search(items, sort=("eo:cloud_cover", False))]
    assert all(r.returned == 4 for r in results[:-1])


def test_api_items_carry_asset_inputs_and_bands(stub: StubAPI, items: list[dict[str, Any]]) -> None:
    result = stac_search(catalog=stub.url, collections=["ls"], limit=1)
    item, source = result.items[0], next(it for it in items if it["id"] == result.items[0].id)
    assets = {a.key: a for a in item.assets}
    assert assets["red"].input == source["assets"]["red"]["href"] and assets["nir"].input == source["assets"]["nir"]["href"]
    assert (assets["red"].bands[0].name, assets["red"].bands[0].common_name) == ("B04", "red")
    assert (assets["nir"].bands[0].common_name, assets["nir"].bands[0].center_wavelength) == ("nir", 0.842)
    # a relative href is relative to the item's own (self) URL
    assert assets["thumbnail"].input == source["links"][0]["href"].rsplit("/", 1)[0] + "/thumb.png"
    assert item.href == source["links"][0]["href"] and item.cloud_cover == source["properties"]["eo:cloud_cover"]


def test_api_refusals_and_failures_have_codes(stub: StubAPI) -> None:
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=stub.url, sortby=["properties.gsd"])
    assert e.value.code == "invalid-argument" and "cannot sort by properties.gsd" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=stub.url + "/nothing/here")
    assert e.value.code == "not-found" and "HTTP 404" in e.value.message
    stub.search = lambda handler, method, params: handler._json(503, {"description": "overloaded"})  # type: ignore[method-assign]
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=stub.url)
    assert e.value.code == "gdal-error" and "HTTP 503: overloaded" in e.value.message and "try again later" in e.value.message
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=f"http://127.0.0.1:{port}/?token=SECRET")
    assert (
        e.value.code == "gdal-error"
        and "could not reach the STAC server at 127.0.0.1" in e.value.message
        and "SECRET" not in e.value.message
    )


def test_a_proxy_refusal_is_out_of_root(stub: StubAPI) -> None:
    with pytest.raises(GdalMcpError) as e:
        stac_search(catalog=stub.url + "/refused")
    assert e.value.code == "out-of-root" and "not an allowed remote location" in e.value.message


def test_a_redirect_is_followed_when_allowed(stub: StubAPI) -> None:
    assert stac_search(catalog=stub.url + "/redirect", limit=1).kind == "api"


def test_every_url_goes_through_the_workers_sandbox(stub: StubAPI) -> None:
    """The worker's guard (its sandbox, the server's remote locations) decides each URL: the root, each redirect and
    each page; a refusal is out-of-root."""
    checked: list[str] = []
    refuse = ""

    def check(names: Any) -> None:
        for name in names:
            checked.append(name)
            if refuse and refuse in name:
                raise GdalMcpError("out-of-root", f"{name} refused")

    previous = guard._check
    guard.install(check)
    try:
        stac_search(catalog=stub.url + "/redirect", limit=1)
        assert [u.split("?")[0] for u in checked] == [stub.url + "/redirect", stub.url + "/", stub.url + "/search"]
        refuse = "/search"
        with pytest.raises(GdalMcpError) as e:
            stac_search(catalog=stub.url)
        assert e.value.code == "out-of-root" and "outside the remote locations" in e.value.message
    finally:
        guard._check = previous
