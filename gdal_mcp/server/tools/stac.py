"""Finding data in STAC catalogs: stac_search (a STAC API, or a static catalog in the workspace or at a URL)."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import StacSearchResult
from gdal_mcp.sandbox import NETWORK_SCHEMES
from gdal_mcp.server.app import App
from gdal_mcp.server.tools.params import CrsCheck, as_bbox
from gdal_mcp.server.tools.registry import READ, tool

QueryOperator = Literal["eq", "neq", "lt", "lte", "gt", "gte", "in"]
#: what a catalog URL may start with (GDAL's /vsicurl/ spelling is accepted and read as the URL it wraps)
HTTP_PREFIXES = ("http://", "https://", "/vsicurl/", "/vsicurl_streaming/")
#: a folder given as catalog: the file searched in it
CATALOG_FILES = ("catalog.json", "collection.json")

Catalog = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4096,
        description=(
            "The STAC catalog to search: a STAC API's root URL (e.g. 'https://earth-search.aws.element84.com/v1'), a static "
            "catalog's catalog.json, collection.json or item-collection URL, or such a file in the workspace "
            "('stac/catalog.json'; a folder holding catalog.json or collection.json works too). A URL is read only where "
            "the server allows remote locations"
        ),
    ),
]
Collections = Annotated[
    list[str] | None,
    Field(min_length=1, max_length=100, description="Only items of these collections (ids, e.g. ['sentinel-2-l2a'])"),
]
StacBBox = Annotated[
    list[float] | None,
    Field(
        min_length=4,
        max_length=4,
        description=(
            "Area [minx, miny, maxx, maxy] in bbox_crs (default: lon/lat degrees, EPSG:4326, the CRS of STAC footprints): "
            "items whose footprint intersects it"
        ),
    ),
]
StacBBoxCRS = Annotated[
    str | None,
    CrsCheck,
    Field(
        description=(
            "CRS of bbox: EPSG:4326 for lon/lat, any code, name, PROJ string or WKT; default lon/lat (EPSG:4326). A bbox in "
            "another CRS is transformed to lon/lat for the search (searched_bbox shows it)"
        )
    ),
]
Datetime = Annotated[
    str | None,
    Field(
        max_length=200,
        description=(
            "Time filter as STAC takes it (RFC 3339): an interval '2024-06-01/2024-06-30' (whole days), "
            "'2024-06-01T10:00:00Z/..', '../2024-01-01', or one date, month or year ('2024-06': all of June). Items whose "
            "datetime, or start_datetime-end_datetime range, falls in it"
        ),
    ),
]
Query = Annotated[
    dict[str, dict[QueryOperator, Any]] | None,
    Field(
        description=(
            'Filters on item properties (the STAC query extension), e.g. {"eo:cloud_cover": {"lt": 20}}, {"platform": '
            '{"in": ["sentinel-2a", "sentinel-2b"]}}, {"s2:mgrs_tile": {"eq": "33UUP"}}; operators eq, neq, lt, lte, gt, '
            "gte, in (a list). An item without the property does not match. Property names as in the items' properties"
        )
    ),
]
Sortby = Annotated[
    str | list[str] | None,
    Field(
        description=(
            "Order of the items: a field or a list of them, '-' before one for descending: 'properties.eo:cloud_cover' "
            "(clearest first), '-properties.datetime' (newest first), ['properties.eo:cloud_cover', '-properties.datetime']. "
            "Default: the catalog's own order. A STAC API sorts only if it supports sorting (warnings say so)"
        )
    ),
]
Limit = Annotated[int, Field(ge=1, le=100, description="Most items to return on this page (default 10, at most 100)")]
PageToken = Annotated[
    str | None,
    Field(
        max_length=65536,
        description=(
            "next_page_token of the previous result: returns the next page of the same search (give the other arguments "
            "unchanged; only limit may change)"
        ),
    ),
]
AssetKeys = Annotated[
    list[str] | None,
    Field(
        min_length=1,
        max_length=100,
        description="Report only these assets of each item (keys such as 'red', 'nir', 'visual', 'B04'); default all of them",
    ),
]


def _catalog(app: App, catalog: str) -> tuple[str, str]:
    """(what the worker reads: an allowed URL, or the real path of a workspace JSON file; how the result names it)."""
    text = catalog.strip()
    low = text.lower()
    if low.startswith(HTTP_PREFIXES):
        try:
            resolved = app.sandbox.resolve_input(text, what="catalog")  # the server's rule on remote locations
        except GdalMcpError as e:  # its query string may hold a token: never in a message
            raise GdalMcpError(e.code, e.message.replace(text, text.split("?", 1)[0])) from None
        url = resolved.gdal_path
        for prefix in ("/vsicurl_streaming/", "/vsicurl/"):
            url = url.removeprefix(prefix)
        if not url.lower().startswith(("http://", "https://")):
            raise GdalMcpError("unsupported", f"catalog '{text.split('?', 1)[0]}': give the catalog's http(s) URL")
        return url, url.split("?", 1)[0]
    if low.startswith(NETWORK_SCHEMES) or low.startswith("/vsi"):
        raise GdalMcpError(
            "unsupported",
            f"catalog '{text.split('?', 1)[0]}': a STAC catalog is read from an http(s) URL or a workspace file; for a "
            "catalog in object storage give its https:// URL",
        )
    real = app.sandbox.resolve_file(text, what="catalog")
    if real.is_dir():
        for name in CATALOG_FILES:
            if (real / name).is_file():
                real = app.sandbox.resolve_file(app.sandbox.display(real / name), what="catalog")
                break
        else:
            raise GdalMcpError(
                "invalid-argument",
                f"catalog '{text}' is a folder without catalog.json or collection.json; give the STAC JSON file "
                "(list_datasets shows the folder's files)",
            )
    return str(real), app.sandbox.display(real)


@tool(title="Search a STAC catalog", annotations=READ, tags={"raster", "stac"})
async def stac_search(
    app: App,
    catalog: Catalog,
    collections: Collections = None,
    bbox: StacBBox = None,
    bbox_crs: StacBBoxCRS = None,
    datetime: Datetime = None,
    query: Query = None,
    sortby: Sortby = None,
    limit: Limit = 10,
    page_token: PageToken = None,
    assets: AssetKeys = None,
    ctx: Context | None = None,
) -> StacSearchResult:
    """Find satellite scenes, tiles or other items in a STAC catalog by collection, area (bbox), time (datetime) and
    properties (query, e.g. cloud cover), sorted with sortby: a STAC API (searched through its /search endpoint) or a
    static catalog (catalog.json, collection.json or an item collection; in the workspace or at a URL; walked and
    filtered here, at most 10000 documents read).

    Each asset's `uri` (stac://collection/item/asset) is accepted by every tool after this search, like its input.
    Each item comes with its id, collection, time, lon/lat bbox, cloud cover, platform, CRS code, other simple
    properties, and its assets: key, href, media type, roles, title and bands (name, common name such as red or
    nir, data type, nodata). An asset's `input` is what to pass as input= (path= for raster_info) to the raster tools
    to read it: a workspace path for a workspace catalog, else its https:// or s3:// URL (read remotely only where
    the server allows it). Pick the asset by its key or bands' common names (e.g. red and nir08 for NDVI).

    Results are paged: at most limit items; matched says how many match in all (when known) and next_page_token
    fetches the next page (same arguments plus page_token)."""
    target, shown = _catalog(app, catalog)
    job = jobs.StacSearchJob(
        catalog=target,
        collections=collections,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        datetime=datetime,
        query={name: {str(op): value for op, value in tests.items()} for name, tests in query.items()} if query else None,
        sortby=[part for part in sortby.split(",") if part.strip()] if isinstance(sortby, str) else sortby,
        limit=limit,
        page_token=page_token,
        assets=assets,
    )
    result = app.scrub_model(await app.execute(job, ctx=ctx))
    result.catalog = shown
    unreadable = 0
    for item in result.items:
        for asset in item.assets:
            if asset.input is not None and not _readable(app, asset.input):
                asset.input, unreadable = None, unreadable + 1  # a location this server may not read
            if asset.input is not None:
                parts = (item.collection or "_", item.id, asset.key)
                asset.uri = "stac://" + "/".join(quote(p, safe="") for p in parts)
                app.sandbox.remember_stac_asset(asset.uri, asset.input)
    if unreadable:
        result.warnings.append(
            f"{unreadable} asset(s) lie outside the remote locations this server may read: their input is null "
            "(the operator allows more with --allow-remote)"
        )
    return result


def _readable(app: App, target: str) -> bool:
    """Whether the sandbox lets a tool read `target` (an allowed location or a workspace file); nothing is opened."""
    try:
        app.sandbox.resolve_input(target, what="asset")
    except GdalMcpError as e:
        return e.code not in ("out-of-root", "unsupported", "invalid-argument")
    return True
