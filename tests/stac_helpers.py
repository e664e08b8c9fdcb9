"""Plain helpers for the stac_search tests: a static STAC catalog written with pystac (COG assets cut from a test
raster), a small STAC API served by http.server on 127.0.0.1, and the reference search both are checked against
(written here from the STAC API spec, not from the engine's code)."""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pystac
import rasterio
import rasterio.shutil
from rasterio.io import MemoryFile
from rasterio.warp import transform_bounds
from rasterio.windows import Window
from rasterio.windows import bounds as window_bounds

from tests.helpers import DATA

SOURCE = DATA / "raster" / "RGB.byte.tif"
#: (row, col) of the 96 x 96 pixel windows cut from SOURCE, one per item; ~30 km apart
WINDOWS = [(100, 100), (100, 300), (100, 500), (400, 100), (400, 300), (400, 500)]
SIZE = 96
CONFORMANCE = [
    "https://api.stacspec.org/v1.0.0/core",
    "https://api.stacspec.org/v1.0.0/item-search",
    "https://api.stacspec.org/v1.0.0/item-search#query",
    "https://api.stacspec.org/v1.0.0/item-search#sort",
    "https://api.stacspec.org/v1.0.0/ogcapi-features",
]


# ----- a static catalog ------------------------------------------------------------------------------------------
@dataclass
class StaticItem:
    """What the test knows of an item it wrote: the reference searches work on these."""

    id: str
    collection: str
    datetime: dt.datetime
    bbox: tuple[float, float, float, float]  # lon/lat
    native_bounds: tuple[float, float, float, float]  # in SOURCE's CRS
    cloud: float
    platform: str
    cog: Path


def write_static_catalog(root: Path) -> list[StaticItem]:
    """catalog.json with a collection 'rgb' of six items (one COG each, relative hrefs, different times, places and cloud
    cover) and a collection 'other' of two items over two of those places: written by pystac, self-contained."""
    root.mkdir(parents=True, exist_ok=True)
    catalog = pystac.Catalog(id="test-catalog", description="stac_search test catalog")
    clouds = [35.0, 5.0, 80.0, 12.5, 60.0, 0.0]
    specs = [
        (
            "rgb",
            f"scene-{i}",
            i,
            dt.datetime(2024, 1 + i, 5 + 3 * i, 10, 30, tzinfo=dt.UTC),
            clouds[i],
            "sat-b" if i % 2 else "sat-a",
        )
        for i in range(len(WINDOWS))
    ]
    specs.append(("other", "other-0", 1, dt.datetime(2023, 7, 1, tzinfo=dt.UTC), 1.0, "sat-c"))
    specs.append(("other", "other-1", 4, dt.datetime(2024, 3, 20, tzinfo=dt.UTC), 99.0, "sat-c"))
    known: list[StaticItem] = []
    windows: dict[str, Window] = {}
    collections: dict[str, pystac.Collection] = {}
    with rasterio.open(SOURCE) as src:
        for coll_id, item_id, w, when, cloud, platform in specs:
            row, col = WINDOWS[w]
            windows[item_id] = Window(col, row, SIZE, SIZE)
            native = tuple(window_bounds(windows[item_id], src.transform))
            lonlat = tuple(transform_bounds(src.crs, "EPSG:4326", *native, densify_pts=21))
            if coll_id not in collections:
                collections[coll_id] = pystac.Collection(
                    id=coll_id,
                    description=f"collection {coll_id}",
                    extent=pystac.Extent(
                        pystac.SpatialExtent([[-180.0, -90.0, 180.0, 90.0]]), pystac.TemporalExtent([[None, None]])
                    ),
                )
                catalog.add_child(collections[coll_id])
            west, south, east, north = lonlat
            ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
            item = pystac.Item(
                id=item_id,
                geometry={"type": "Polygon", "coordinates": [ring]},
                bbox=list(lonlat),
                datetime=when,
                properties={"eo:cloud_cover": cloud, "platform": platform, "proj:epsg": 32618},
            )
            collections[coll_id].add_item(item)
            known.append(StaticItem(item_id, coll_id, when, lonlat, native, cloud, platform, Path()))  # type: ignore[arg-type]
        catalog.normalize_hrefs(str(root))
        for entry in known:
            item = next(catalog.get_items(entry.id, recursive=True))
            entry.cog = Path(item.get_self_href() or "").parent / f"{entry.id}.tif"
            entry.cog.parent.mkdir(parents=True, exist_ok=True)
            _write_cog(src, windows[entry.id], entry.cog)
            item.add_asset(
                "visual",
                pystac.Asset(
                    href=str(entry.cog),
                    media_type=pystac.MediaType.COG,
                    roles=["data", "visual"],
                    title="RGB",
                    extra_fields={
                        "eo:bands": [
                            {"name": "B1", "common_name": "red"},
                            {"name": "B2", "common_name": "green"},
                            {"name": "B3", "common_name": "blue"},
                        ],
                        "raster:bands": [{"data_type": "uint8", "nodata": 0}] * 3,
                    },
                ),
            )
            item.add_asset("metadata", pystac.Asset(href="./metadata.xml", media_type="application/xml", roles=["metadata"]))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(catalog_type=pystac.CatalogType.SELF_CONTAINED)
    return known


def _write_cog(src: Any, window: Window, dst: Path) -> None:
    profile = {
        **src.profile,
        "driver": "GTiff",
        "width": SIZE,
        "height": SIZE,
        "transform": src.window_transform(window),
    }
    with MemoryFile() as mem:
        with mem.open(**profile) as tmp:
            tmp.write(src.read(window=window))
        with mem.open() as tmp:
            rasterio.shutil.copy(tmp, dst, driver="COG")


# ----- the reference search --------------------------------------------------------------------------------------
def overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Two [minx, miny, maxx, maxy] boxes share at least a point."""
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


# ----- a STAC API ------------------------------------------------------------------------------------------------
def api_items(count: int = 23, seed: int = 7) -> list[dict[str, Any]]:
    """Items scattered over Europe: two collections, times through 2024, cloud cover 0-100, two platforms."""
    rng = random.Random(seed)
    items = []
    for i in range(count):
        west, south = rng.uniform(-10, 25), rng.uniform(35, 60)
        bbox = [round(west, 4), round(south, 4), round(west + 1.0, 4), round(south + 1.0, 4)]
        when = dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=rng.randrange(0, 366), hours=rng.randrange(24))
        coll = "s2" if i % 3 else "ls"
        items.append(
            {
                "type": "Feature",
                "stac_version": "1.0.0",
                "id": f"item-{i:02d}",
                "collection": coll,
                "bbox": bbox,
                "geometry": {
                    "type": "Polygon",
                    "coordinates": [
                        [[bbox[0], bbox[1]], [bbox[2], bbox[1]], [bbox[2], bbox[3]], [bbox[0], bbox[3]], [bbox[0], bbox[1]]]
                    ],
                },
                "properties": {
                    "datetime": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "eo:cloud_cover": round(rng.uniform(0, 100), 2),
                    "platform": rng.choice(["sentinel-2a", "sentinel-2b"]),
                },
                "links": [{"rel": "self", "href": f"https://stac.example.com/collections/{coll}/items/item-{i:02d}"}],
                "assets": {
                    "red": {
                        "href": f"https://data.example.com/{coll}/item-{i:02d}/B04.tif",
                        "type": "image/tiff; application=geotiff; profile=cloud-optimized",
                        "roles": ["data"],
                        "title": "Red",
                        "bands": [{"name": "B04", "eo:common_name": "red", "data_type": "uint16", "nodata": 0}],
                    },
                    "nir": {
                        "href": f"s3://bucket/{coll}/item-{i:02d}/B08.tif",
                        "type": "image/tiff; application=geotiff",
                        "roles": ["data"],
                        "eo:bands": [{"name": "B08", "common_name": "nir", "center_wavelength": 0.842}],
                    },
                    "thumbnail": {"href": "./thumb.png", "type": "image/png", "roles": ["thumbnail"]},
                },
            }
        )
    return items


def reference_search(
    items: list[dict[str, Any]],
    *,
    collections: list[str] | None = None,
    bbox: list[float] | None = None,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    max_cloud: float | None = None,
    platforms: list[str] | None = None,
    sort: tuple[str, bool] | None = None,
) -> list[dict[str, Any]]:
    """The items a STAC API returns for such a search, in order (the stub serves these; the tests compare with them)."""
    out = []
    for item in items:
        props = item["properties"]
        when = dt.datetime.fromisoformat(props["datetime"])
        if collections is not None and item["collection"] not in collections:
            continue
        if bbox is not None and not overlaps(tuple(item["bbox"]), tuple(bbox)):  # type: ignore[arg-type]
            continue
        if (start is not None and when < start) or (end is not None and when > end):
            continue
        if max_cloud is not None and not props["eo:cloud_cover"] < max_cloud:
            continue
        if platforms is not None and props["platform"] not in platforms:
            continue
        out.append(item)
    if sort is not None:
        name, descending = sort
        out.sort(key=lambda it: it["properties"][name], reverse=descending)
    return out


@dataclass
class StubAPI:
    """A STAC API on 127.0.0.1 serving `items`: landing page, /conformance, /collections, /search (GET and POST) with
    bbox, datetime, collections, limit, query (the operators the tests use), sortby and `next` links. Pages hold at most
    `max_page` items whatever limit asks. `requests` records each search as (method, parameters)."""

    items: list[dict[str, Any]]
    methods: tuple[str, ...] = ("GET", "POST")
    max_page: int = 100
    next_base: str | None = None  # where its next links point (default: itself)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> StubAPI:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                if parts.path in ("/", ""):
                    return self._json(200, stub.landing())
                if parts.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", "/")
                    self.end_headers()
                    return None
                if parts.path == "/refused":  # what an egress proxy answers for a location it does not allow
                    return self._json(451, {"description": "not an allowed remote location"})
                if parts.path == "/conformance":
                    return self._json(200, {"conformsTo": CONFORMANCE})
                if parts.path == "/collections":
                    return self._json(200, {"collections": [stub.collection(c) for c in stub.collection_ids()], "links": []})
                if parts.path.startswith("/collections/"):
                    return self._json(200, stub.collection(parts.path.rsplit("/", 1)[-1]))
                if parts.path == "/search" and "GET" in stub.methods:
                    raw = {k: v[0] for k, v in parse_qs(parts.query).items()}
                    params: dict[str, Any] = dict(raw)
                    for key in ("bbox", "collections"):
                        if key in raw:
                            params[key] = raw[key].split(",")
                    if "bbox" in params:
                        params["bbox"] = [float(v) for v in params["bbox"]]
                    if "query" in raw:
                        params["query"] = json.loads(raw["query"])
                    if "sortby" in raw:
                        params["sortby"] = [
                            {"field": s.lstrip("+-"), "direction": "desc" if s.startswith("-") else "asc"}
                            for s in raw["sortby"].split(",")
                        ]
                    return stub.search(self, "GET", params)
                return self._json(404, {"code": "NotFound", "description": f"no route {parts.path}"})

            def do_POST(self) -> None:  # noqa: N802
                if urlsplit(self.path).path == "/search" and "POST" in stub.methods:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                    return stub.search(self, "POST", body)
                return self._json(405, {"code": "MethodNotAllowed", "description": "POST not allowed here"})

            def _json(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def collection_ids(self) -> list[str]:
        return sorted({it["collection"] for it in self.items})

    def collection(self, cid: str) -> dict[str, Any]:
        return {
            "type": "Collection",
            "stac_version": "1.0.0",
            "id": cid,
            "description": cid,
            "license": "proprietary",
            "extent": {"spatial": {"bbox": [[-180, -90, 180, 90]]}, "temporal": {"interval": [[None, None]]}},
            "links": [],
        }

    def landing(self) -> dict[str, Any]:
        links = [
            {"rel": "self", "href": self.url + "/", "type": "application/json"},
            {"rel": "root", "href": self.url + "/", "type": "application/json"},
            {"rel": "conformance", "href": self.url + "/conformance", "type": "application/json"},
            {"rel": "data", "href": self.url + "/collections", "type": "application/json"},
        ]
        for method in self.methods:
            links.append({"rel": "search", "href": self.url + "/search", "type": "application/geo+json", "method": method})
        return {
            "type": "Catalog",
            "stac_version": "1.0.0",
            "id": "stub",
            "description": "a STAC API for the tests",
            "conformsTo": CONFORMANCE,
            "links": links,
        }

    def search(self, handler: Any, method: str, params: dict[str, Any]) -> None:
        self.requests.append((method, params))
        try:
            found = self._filter(params)
        except ValueError as e:
            return handler._json(400, {"code": "BadRequest", "description": str(e)})
        offset = int(params.get("token") or 0)
        limit = min(int(params.get("limit") or 10), self.max_page)
        page = found[offset : offset + limit]
        links = []
        base = self.next_base or self.url
        if offset + limit < len(found):
            if method == "GET":
                query = {k: v for k, v in _as_query(params).items() if k != "token"}
                links.append(
                    {"rel": "next", "href": f"{base}/search?{urlencode({**query, 'token': offset + limit})}", "method": "GET"}
                )
            else:
                links.append(
                    {
                        "rel": "next",
                        "href": f"{base}/search",
                        "method": "POST",
                        "body": {"token": offset + limit},
                        "merge": True,
                    }
                )
        handler._json(
            200,
            {
                "type": "FeatureCollection",
                "features": page,
                "links": links,
                "numberMatched": len(found),
                "numberReturned": len(page),
            },
        )

    def _filter(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        start = end = None
        if params.get("datetime"):
            a, _, b = str(params["datetime"]).partition("/")
            start = None if a in ("", "..") else dt.datetime.fromisoformat(a)
            end = None if b in ("", "..") else dt.datetime.fromisoformat(b) if b else start
        max_cloud = platforms = None
        for name, tests in (params.get("query") or {}).items():
            for op, value in tests.items():
                if name == "eo:cloud_cover" and op == "lt":
                    max_cloud = float(value)
                elif name == "platform" and op == "in":
                    platforms = list(value)
                else:
                    raise ValueError(f"query {name} {op} not supported by the stub")
        sort = None
        for entry in params.get("sortby") or []:
            name = entry["field"].removeprefix("properties.")
            if name not in ("eo:cloud_cover", "datetime"):
                raise ValueError(f"cannot sort by {entry['field']}")
            sort = (name, entry["direction"] == "desc")
        return reference_search(
            self.items,
            collections=params.get("collections"),
            bbox=params.get("bbox"),
            start=start,
            end=end,
            max_cloud=max_cloud,
            platforms=platforms,
            sort=sort,
        )


def _as_query(params: dict[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in params.items():
        if key in ("bbox", "collections"):
            out[key] = ",".join(map(str, value))
        elif key == "query":
            out[key] = json.dumps(value)
        elif key == "sortby":
            out[key] = ",".join(("-" if s["direction"] == "desc" else "+") + s["field"] for s in value)
        else:
            out[key] = str(value)
    return out


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def serve_directory(path: Path) -> ThreadingHTTPServer:
    """The files under `path` over HTTP on 127.0.0.1 (a static catalog at a URL); shut it down when done."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietFiles, directory=str(path)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server
