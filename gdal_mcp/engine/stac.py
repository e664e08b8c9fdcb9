"""stac_search: find items (scenes, tiles) in a STAC API or a static STAC catalog, one bounded page at a time.

- A STAC API (a root whose links or conformance offer item search) is searched through pystac-client: collections,
  bbox, datetime, query and sortby are sent as the API takes them; pages follow the API's `next` links.
- A static catalog (catalog.json, collection.json, an item collection, or an item; a workspace file or a URL) is
  walked link by link (stac_static.py, at most MAX_WALK documents) and filtered and sorted here with the same
  meaning.

Either way the answer holds at most `limit` items and, when more follow, a `next_page_token` to pass back: for an
API the `next` link to follow (and how many of its items were already returned), for a static catalog an offset;
both carry a fingerprint of the search so that a token is not reused with other criteria. The bbox is taken in
`bbox_crs` (default lon/lat) and sent in lon/lat. Documents are read by stac_io.py (which links may be followed,
which URLs the server allows, answers capped); items are reported by stac_items.py.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import re
import warnings
from dataclasses import dataclass
from typing import Any

from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.stac_io import LocalReader, RemoteIO, is_http, shown
from gdal_mcp.engine.stac_items import slim, summarize
from gdal_mcp.engine.stac_static import (
    MAX_WALK,
    QUERY_OPERATORS,
    Box,
    Criteria,
    Found,
    Walk,
    matches,
    parse_time,
    sort_found,
    walk,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import StacItem, StacSearchResult


@dataclass(frozen=True)
class Search:
    """A search's arguments, checked and normalized once: what both kinds of catalog are searched with."""

    collections: list[str] | None
    box: Box | None  # lon/lat
    interval_text: str | None  # as sent to an API
    conditions: dict[str, list[tuple[str, Any]]]  # {property: [(operator, value)]}
    order: list[tuple[str, bool]]  # [(field, descending)]
    criteria: Criteria  # the same, as a static catalog's items are tested
    limit: int
    fingerprint: str  # of the arguments a page token must be given back with
    assets: list[str] | None

    def result(self, **fields: Any) -> StacSearchResult:
        return StacSearchResult(
            searched_bbox=list(self.box) if self.box is not None else None, searched_datetime=self.interval_text, **fields
        )


MAX_LIMIT = 100
#: API pages fetched by one call at most (an API whose pages are smaller than limit)
MAX_PAGES = 20
TOKEN_VERSION = 1
_PARTIAL_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")


def stac_search(
    *,
    catalog: str,
    collections: list[str] | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    datetime: str | None = None,
    query: dict[str, dict[str, Any]] | None = None,
    sortby: list[str] | None = None,
    limit: int = 10,
    page_token: str | None = None,
    assets: list[str] | None = None,
    max_walk: int = MAX_WALK,
    progress: Progress = no_progress,
) -> StacSearchResult:
    """Search `catalog` (a real path to a workspace STAC JSON file, or an http(s) URL the server allowed) and report one
    page of the items found."""
    if not 1 <= limit <= MAX_LIMIT:
        raise GdalMcpError("invalid-argument", f"limit must be 1 to {MAX_LIMIT}; page with next_page_token for more")
    box = lonlat_bbox(bbox, bbox_crs)
    interval, interval_text = parse_interval(datetime) if datetime else (None, None)
    conditions = parse_query(query)
    order = parse_sortby(sortby)
    search = Search(
        collections=collections or None,
        box=box,
        interval_text=interval_text,
        conditions=conditions,
        order=order,
        criteria=Criteria(
            collections=frozenset(collections) if collections else None,
            boxes=_split(box) if box is not None else None,
            interval=interval,
            query=conditions or None,
        ),
        limit=limit,
        fingerprint=_fingerprint(catalog, collections, bbox, bbox_crs, datetime, query, sortby),
        assets=assets,
    )
    token = decode_token(page_token, search.fingerprint) if page_token else None
    progress(0.0, f"reading {shown(catalog) if is_http(catalog) else 'the catalog'}")
    if is_http(catalog):
        io = RemoteIO()
        root = io.read_json(catalog)
        if is_api(root):
            if token is not None and token["k"] != "api":
                raise _stale_token()
            return _search_api(io, catalog, root, search, token, progress)
        reader: LocalReader | RemoteIO = io
    else:
        reader = LocalReader(catalog)
        root = reader.read_json(reader.root_file)
        catalog = reader.root_file
    if token is not None and token["k"] != "static":
        raise _stale_token()
    offset = int(token["o"]) if token is not None else 0
    return _search_static(reader, catalog, root, search, offset, max_walk, progress)


# ----- the arguments ---------------------------------------------------------------------------------------------
def lonlat_bbox(bbox: Any, bbox_crs: str | None) -> Box | None:
    """The bbox as [west, south, east, north] in lon/lat (WGS 84): as given without bbox_crs, else transformed (edges
    densified). West > east after a transform: the box crosses the antimeridian."""
    from gdal_mcp.engine.bbox import check_bbox, transform_bbox
    from gdal_mcp.engine.crs import parse_crs

    if bbox is None:
        return None
    box = check_bbox(bbox)
    if bbox_crs is None:
        if not (-180 <= box[0] and box[2] <= 180 and -90 <= box[1] and box[3] <= 90):
            raise GdalMcpError(
                "invalid-argument",
                f"bbox {list(box)} is not in lon/lat degrees; STAC searches in lon/lat: give bbox_crs (e.g. 'EPSG:32633' "
                "for UTM metres) or the area in degrees",
            )
        return box
    out = transform_bbox(box, parse_crs(bbox_crs, "bbox_crs"), parse_crs("EPSG:4326"), target="STAC search (lon/lat)")
    west, south, east, north = out
    return west, max(south, -90.0), east, min(north, 90.0)


def _split(box: Box) -> tuple[Box, ...]:
    west, south, east, north = box
    return ((west, south, east, north),) if west <= east else ((west, south, 180.0, north), (-180.0, south, east, north))


def parse_interval(text: str) -> tuple[tuple[dt.datetime | None, dt.datetime | None], str]:
    """A datetime argument as (start, end) and as the STAC text sent: 'a/b', '../b', 'a/..', or one time; a date
    ('2024-06-01'), month ('2024-06') or year alone covers all of it, as pystac-client expands them."""
    parts = text.strip().split("/")
    if len(parts) > 2:
        raise _bad_datetime(text, "more than one '/'")
    if len(parts) == 1:
        start, end = _component(parts[0], text)
        if start is None:
            raise _bad_datetime(text, "an open interval needs a '/'")
    else:
        start, _ = _component(parts[0], text)
        first, last = _component(parts[1], text)
        end = last if last is not None else first
        if start is None and end is None:
            raise _bad_datetime(text, "both ends are open")
    if start is not None and end is not None and start > end:
        raise _bad_datetime(text, "its start is after its end")
    sent = _iso(start) if len(parts) == 1 and start == end else f"{_iso(start)}/{_iso(end)}"
    return (start, end), sent


def _component(part: str, text: str) -> tuple[dt.datetime | None, dt.datetime | None]:
    """(start, end) of one end of an interval: '..' or '' open (None, None); a partial date its whole period."""
    part = part.strip()
    if part in ("", ".."):
        return None, None
    m = _PARTIAL_DATE.match(part)
    if m:
        year, month, day = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
        try:
            start = dt.datetime(year, month, day, tzinfo=dt.UTC)
        except ValueError as e:
            raise _bad_datetime(text, str(e)) from None
        if m.group(3):
            end = start + dt.timedelta(days=1)
        elif m.group(2):
            end = dt.datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=dt.UTC)
        else:
            end = dt.datetime(year + 1, 1, 1, tzinfo=dt.UTC)
        return start, end - dt.timedelta(seconds=1)
    t = parse_time(part)
    if t is None or "T" not in part.upper():
        raise _bad_datetime(text, f"'{part}' is not an RFC 3339 time")
    return t, t


def _iso(t: dt.datetime | None) -> str:
    if t is None:
        return ".."
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond:06d}".rstrip("0") if t.microsecond else "") + "Z"


def _bad_datetime(text: str, why: str) -> GdalMcpError:
    return GdalMcpError(
        "invalid-argument",
        f"datetime '{text}': {why}; give an RFC 3339 time or interval, e.g. '2024-06-01/2024-06-30', "
        "'2024-06-01T10:00:00Z', '2024-06' (the month), '../2024-01-01' or '2024-01-01/..'",
    )


def parse_query(query: dict[str, dict[str, Any]] | None) -> dict[str, list[tuple[str, Any]]]:
    """{property: {op: value}} checked: the operators eq, neq, lt, lte, gt, gte, in (a list); 'properties.' dropped."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for name, tests in (query or {}).items():
        if not isinstance(tests, dict) or not tests:
            raise GdalMcpError(
                "invalid-argument",
                f'query["{name}"] must be an object of operators, e.g. {{"lt": 20}} (operators: {", ".join(QUERY_OPERATORS)})',
            )
        key = name.removeprefix("properties.")
        for op, operand in tests.items():
            if op not in QUERY_OPERATORS:
                raise GdalMcpError(
                    "invalid-argument", f'query["{name}"]: unknown operator "{op}"; use {", ".join(QUERY_OPERATORS)}'
                )
            if op == "in" and not isinstance(operand, list):
                raise GdalMcpError("invalid-argument", f'query["{name}"]["in"] must be a list of values')
            out.setdefault(key, []).append((op, operand))
    return out


def parse_sortby(sortby: list[str] | None) -> list[tuple[str, bool]]:
    """['-properties.eo:cloud_cover', 'datetime'] as [(field, descending)]."""
    order = []
    for entry in sortby or []:
        text = entry.strip()
        descending = text.startswith("-")
        name = text.lstrip("+-").strip()
        if not name or any(c.isspace() for c in name):
            raise GdalMcpError(
                "invalid-argument",
                f"sortby '{entry}': give a field, '-' before it for descending: 'properties.eo:cloud_cover', '-datetime'",
            )
        order.append((name, descending))
    return order


# ----- page tokens -----------------------------------------------------------------------------------------------
def _fingerprint(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_token(fingerprint: str, **fields: Any) -> str:
    data = {"v": TOKEN_VERSION, "q": fingerprint, **fields}
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_token(token: str, fingerprint: str) -> dict[str, Any]:
    """A page token given back, checked: one this tool wrote, for the same search."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error):
        data = None
    valid = (
        isinstance(data, dict)
        and data.get("v") == TOKEN_VERSION
        and (
            (data.get("k") == "static" and isinstance(data.get("o"), int) and data["o"] >= 0)
            or (
                data.get("k") == "api"
                and isinstance(data.get("l"), dict)
                and isinstance(data["l"].get("href"), str)
                and isinstance(data.get("s"), int)
                and data["s"] >= 0
            )
        )
    )
    if not valid:
        raise GdalMcpError(
            "invalid-argument",
            "page_token is not one stac_search gave; pass next_page_token from the previous result unchanged, or leave it "
            "out to start from the first page",
        )
    assert isinstance(data, dict)
    if data.get("q") != fingerprint:
        raise _stale_token()
    return data


def _stale_token() -> GdalMcpError:
    return GdalMcpError(
        "invalid-argument",
        "page_token belongs to another search: repeat the call with the same catalog, collections, bbox, bbox_crs, "
        "datetime, query and sortby (only limit may change), or leave page_token out to start again",
    )


# ----- a static catalog ------------------------------------------------------------------------------------------
def _search_static(
    reader: LocalReader | RemoteIO,
    catalog: str,
    root: dict[str, Any],
    search: Search,
    offset: int,
    max_walk: int,
    progress: Progress,
) -> StacSearchResult:
    """Walk, filter, sort, page. Only what the page can hold is kept (slim items, the first offset+limit in order), so
    memory stays bounded; a remote catalog without sortby stops reading once the page and one more item are found."""
    local = reader if isinstance(reader, LocalReader) else None
    order, need = search.order, offset + search.limit
    early = local is None and not order
    state = Walk()
    kept: list[Found] = []
    matched = 0
    stopped = False

    def walked(documents: int) -> None:
        progress(min(0.95, documents / max_walk), f"{documents} STAC documents read, {matched} items match")

    for found in walk(reader, catalog, root, state, max_walk=max_walk, progress=walked):
        if not matches(found, search.criteria):
            continue
        matched += 1
        if order:
            kept.append(Found(slim(found.doc), found.href, found.base, found.collection))
            if len(kept) > 2 * need + 100:
                kept = sort_found(kept, order)[:need]
        elif offset < matched <= need:
            kept.append(Found(slim(found.doc), found.href, found.base, found.collection))
        if early and matched > need:
            stopped = True
            break
    page = sort_found(kept, order)[offset:need] if order else kept
    items = [
        summarize(f.doc, base=f.base, href=f.href, collection=f.collection, local=local, asset_keys=search.assets) for f in page
    ]
    more = matched > need
    warnings_: list[str] = []
    if state.truncated:
        warnings_.append(
            f"the catalog walk stopped after reading {max_walk} documents: items beyond them were not searched (matched "
            "counts only those seen); search a sub-catalog or collection file to reach the rest"
        )
    if state.skipped:
        warnings_.append(
            f"{state.skipped} document(s) of the catalog could not be used and were skipped, e.g. "
            + "; ".join(state.skipped_examples)
        )
    if offset and not items:
        warnings_.append(f"no items after the first {offset}: the catalog changed since the previous page, or it ended")
    progress(1.0, f"{matched} items match")
    return search.result(
        catalog=catalog,
        kind="static",
        items=items,
        returned=len(items),
        matched=None if stopped else matched,
        next_page_token=encode_token(search.fingerprint, k="static", o=need) if more else None,
        documents_read=state.documents,
        walk_truncated=state.truncated,
        warnings=warnings_,
    )


# ----- a STAC API ------------------------------------------------------------------------------------------------
def is_api(root: dict[str, Any]) -> bool:
    """A root catalog offering item search: its conformance names item-search, or it links rel=search."""
    if root.get("type") != "Catalog":
        return False
    conforms = root.get("conformsTo")
    if isinstance(conforms, list) and any("item-search" in str(c) for c in conforms):
        return True
    return any(isinstance(link, dict) and link.get("rel") == "search" for link in root.get("links") or [])


def _search_api(
    io: RemoteIO, url: str, root: dict[str, Any], search: Search, token: dict[str, Any] | None, progress: Progress
) -> StacSearchResult:
    """One page from the API's /search: its first request built by pystac-client, then the `next` links it gives."""
    from pystac_client import Client
    from pystac_client.warnings import DoesNotConformTo

    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            client = Client.from_dict(root, href=url)
        except Exception as e:  # noqa: BLE001 - pystac's own complaint about the root document
            raise GdalMcpError("invalid-argument", f"{shown(url)} is not a STAC API root catalog ({e})") from None
        client._stac_io = io
        client.set_root(client)  # the landing page read is the root: pystac would fetch the root link's target again
        if not client.conforms_to("ITEM_SEARCH"):
            client.add_conforms_to("ITEM_SEARCH")  # it links rel=search without saying so
        methods = {
            str(link.get("method") or "GET").upper()
            for link in root.get("links") or []
            if isinstance(link, dict) and link.get("rel") == "search"
        }
        method = "POST" if "POST" in methods else "GET"
        request = client.search(
            method=method,
            limit=search.limit,
            collections=search.collections,
            bbox=list(search.box) if search.box is not None else None,
            datetime=search.interval_text,
            query={name: dict(tests) for name, tests in search.conditions.items()} or None,
            sortby=[("-" if desc else "") + name for name, desc in search.order] or None,
        )
        params = request.get_parameters()
    for w in caught:
        if isinstance(w.message, DoesNotConformTo):
            notes.append(
                f"the STAC API does not declare {', '.join(map(str, w.message.args))} support, so it may ignore that part "
                "of the search: check the items returned"
            )
    if token is not None:
        link, skip = dict(token["l"]), int(token["s"])
    elif method == "POST":
        link, skip = {"href": request.url, "method": "POST", "body": params}, 0
    else:
        link, skip = {"href": request.url_with_parameters(), "method": "GET"}, 0
    found: list[tuple[dict[str, Any], str]] = []
    matched: int | None = None
    next_token: str | None = None
    for pages in range(1, MAX_PAGES + 1):
        page = _fetch(io, link, params)
        if pages == 1:
            matched = _matched(page)
        features = [f for f in page.get("features") or [] if isinstance(f, dict)]
        taken = features[skip : skip + search.limit - len(found)]
        found += [(f, _self_href(f) or str(link["href"])) for f in taken]
        used = skip + len(taken)
        following = _next_link(page)
        progress(min(0.95, len(found) / search.limit), f"{len(found)} items from {pages} page(s)")
        if len(found) >= search.limit:
            if used < len(features):
                next_token = encode_token(search.fingerprint, k="api", l=link, s=used)
            elif following is not None:
                next_token = encode_token(search.fingerprint, k="api", l=following, s=0)
            break
        if following is None or not features:
            break
        if pages == MAX_PAGES:
            next_token = encode_token(search.fingerprint, k="api", l=following, s=0)
            break
        link, skip = following, 0
    items: list[StacItem] = [
        summarize(f, base=base, href=_self_href(f), collection=_text(f.get("collection")), local=None, asset_keys=search.assets)
        for f, base in found
    ]
    progress(1.0, f"{len(items)} items")
    return search.result(
        catalog=url, kind="api", items=items, returned=len(items), matched=matched, next_page_token=next_token, warnings=notes
    )


def _fetch(io: RemoteIO, link: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A page of search results: a GET link as it is (its query string holds the search), a POST link with its body,
    merged into the search's parameters when the link says merge."""
    href = str(link["href"])
    if str(link.get("method") or "GET").upper() == "POST":
        given = link.get("body")
        body: dict[str, Any] = given if isinstance(given, dict) else {}
        return io.read_json(href, method="POST", parameters={**params, **body} if link.get("merge") else body)
    return io.read_json(href)


def _next_link(page: dict[str, Any]) -> dict[str, Any] | None:
    """The page's rel=next link as a page token keeps it (href, method, body, merge; never headers)."""
    for link in page.get("links") or []:
        if isinstance(link, dict) and link.get("rel") == "next" and isinstance(link.get("href"), str):
            kept = {"href": link["href"], "method": str(link.get("method") or "GET").upper()}
            if isinstance(link.get("body"), dict):
                kept["body"] = link["body"]
            if link.get("merge"):
                kept["merge"] = True
            return kept
    return None


def _matched(page: dict[str, Any]) -> int | None:
    value = page.get("numberMatched")
    if value is None and isinstance(page.get("context"), dict):
        value = page["context"].get("matched")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _self_href(item: dict[str, Any]) -> str | None:
    for link in item.get("links") or []:
        if isinstance(link, dict) and link.get("rel") == "self" and isinstance(link.get("href"), str):
            return str(link["href"])
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
