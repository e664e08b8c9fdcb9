"""A static STAC catalog searched without an API: walked link by link from the catalog file (or URL) given, each item
filtered as a STAC API's /search filters (collections, bbox intersecting the footprint, datetime interval, the query
extension's operators on properties), then sorted like sortby.

pystac identifies each document (catalog, collection, item, any STAC version); the reader (stac_io.py) decides which
links may be followed. The walk reads at most `max_walk` documents and says so when it stops there.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from gdal_mcp.errors import GdalMcpError

#: the most documents (catalogs, collections, items, items of an item collection) one static search reads
MAX_WALK = 10_000
QUERY_OPERATORS = ("eq", "neq", "lt", "lte", "gt", "gte", "in")
#: properties holding times (compared as times, not as text)
TIME_PROPERTIES = frozenset({"datetime", "start_datetime", "end_datetime", "created", "updated", "published", "expires"})
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?)?$")
MISSING = object()
Box = tuple[float, float, float, float]


class Reader(Protocol):
    def locate(self, base: str, href: str, what: str = "link") -> str: ...

    def read_json(self, path: str, /) -> dict[str, Any]: ...

    def shown(self, path: str, /) -> str: ...


@dataclass(frozen=True)
class Criteria:
    """What an item must satisfy: each part None when not asked for."""

    collections: frozenset[str] | None = None
    boxes: tuple[Box, ...] | None = None  # lon/lat; two boxes for a bbox crossing the antimeridian
    interval: tuple[dt.datetime | None, dt.datetime | None] | None = None
    query: dict[str, list[tuple[str, Any]]] | None = None


@dataclass
class Found:
    """An item met in the walk: its JSON, where it was read (None inside an item collection), what its relative asset
    hrefs are relative to, and its collection (its own field, else the collection it was found in)."""

    doc: dict[str, Any]
    href: str | None
    base: str
    collection: str | None


@dataclass
class Walk:
    """How the walk went: documents read, whether it stopped at its limit, what it could not use."""

    documents: int = 0
    truncated: bool = False
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)

    def skip(self, message: str) -> None:
        self.skipped += 1
        if len(self.skipped_examples) < 3:
            self.skipped_examples.append(message)


# ----- time ------------------------------------------------------------------------------------------------------
def parse_time(text: Any) -> dt.datetime | None:
    """An RFC 3339 time (or date) as an aware UTC datetime; None when it is not one. Naive times are UTC."""
    if not isinstance(text, str) or not _ISO_TIME.match(text.strip()):
        return None
    value = text.strip().replace("z", "Z")
    value = re.sub(r"(\.\d{6})\d+", r"\1", value)  # nanoseconds: Python reads microseconds
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


def item_interval(props: dict[str, Any]) -> tuple[dt.datetime | None, dt.datetime | None] | None:
    """The time an item covers: [datetime, datetime], else [start_datetime, end_datetime]; None without either."""
    instant = parse_time(props.get("datetime"))
    if instant is not None:
        return instant, instant
    start, end = parse_time(props.get("start_datetime")), parse_time(props.get("end_datetime"))
    if start is None and end is None:
        return None
    return start, end


# ----- filters ---------------------------------------------------------------------------------------------------
def matches(found: Found, criteria: Criteria) -> bool:
    """Whether an item satisfies every part of the search, as a STAC API's /search decides it."""
    doc = found.doc
    props = properties(doc)
    if criteria.collections is not None and found.collection not in criteria.collections:
        return False
    if criteria.boxes is not None and not _intersects(doc, criteria.boxes):
        return False
    if criteria.interval is not None:
        span = item_interval(props)
        if span is None:
            return False
        start, end = criteria.interval
        if (start is not None and span[1] is not None and span[1] < start) or (
            end is not None and span[0] is not None and span[0] > end
        ):
            return False
    if criteria.query:
        for name, tests in criteria.query.items():
            value = props.get(name, MISSING)
            if not all(compare(value, op, operand, name) for op, operand in tests):
                return False
    return True


def properties(doc: dict[str, Any]) -> dict[str, Any]:
    props = doc.get("properties")
    return props if isinstance(props, dict) else {}


def _intersects(doc: dict[str, Any], boxes: tuple[Box, ...]) -> bool:
    """The item's footprint (its geometry, else its bbox) touches one of the boxes; no footprint: no."""
    import shapely
    from shapely.geometry import shape

    geometry = doc.get("geometry")
    footprint = None
    if isinstance(geometry, dict):
        try:
            footprint = shape(geometry)
        except Exception:  # noqa: BLE001 - an invalid geometry: its bbox decides
            footprint = None
    if footprint is None:
        bbox = doc.get("bbox")
        if not isinstance(bbox, list) or len(bbox) not in (4, 6):
            return False
        try:
            values = [float(v) for v in bbox]
        except (TypeError, ValueError):
            return False
        w, s, e, n = (values[0], values[1], values[3], values[4]) if len(values) == 6 else values
        parts = [(w, s, e, n)] if w <= e else [(w, s, 180.0, n), (-180.0, s, e, n)]
        footprint = shapely.union_all([shapely.box(*p) for p in parts])
    return any(footprint.intersects(shapely.box(*b)) for b in boxes)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def comparable(value: Any, name: str) -> tuple[int, Any] | None:
    """A value as sorting and the query operators compare it: (0, number or time) or (1, text); None when neither (a
    list, an object, null, missing)."""
    number = _number(value)
    if number is not None:
        return (0, number) if number == number else None  # NaN is no value
    if isinstance(value, bool):
        return (0, float(value))
    if isinstance(value, str):
        if name in TIME_PROPERTIES or _ISO_TIME.match(value):
            t = parse_time(value)
            if t is not None:
                return (0, t.timestamp())
        return (1, value)
    return None


def compare(value: Any, op: str, operand: Any, name: str) -> bool:
    """The query extension's operators on one property; a missing property satisfies none of them."""
    if value is MISSING or value is None:
        return False
    if op == "in":
        return any(_equal(value, o, name) for o in operand)
    if op == "eq":
        return _equal(value, operand, name)
    if op == "neq":
        return not _equal(value, operand, name)
    a, b = comparable(value, name), comparable(operand, name)
    if a is None or b is None or a[0] != b[0]:
        return False
    return {"lt": a[1] < b[1], "lte": a[1] <= b[1], "gt": a[1] > b[1], "gte": a[1] >= b[1]}[op]


def _equal(value: Any, operand: Any, name: str) -> bool:
    a, b = comparable(value, name), comparable(operand, name)
    if a is not None and b is not None:
        return a == b
    return bool(value == operand)


# ----- sorting ---------------------------------------------------------------------------------------------------
def field_value(found: Found, name: str) -> Any:
    """What sortby names on an item: id, collection, or a property ('properties.eo:cloud_cover' or 'eo:cloud_cover';
    datetime falls back to start_datetime)."""
    if name in ("id", "collection"):
        return found.doc.get("id") if name == "id" else found.collection
    props = properties(found.doc)
    key = name.removeprefix("properties.")
    value = props.get(key)
    if value is None and key == "datetime":
        value = props.get("start_datetime")
    return value


def sort_found(found: list[Found], order: list[tuple[str, bool]]) -> list[Found]:
    """`found` sorted by each (field, descending) in turn; items without a field after those with it, whichever the
    direction; ties keep the walk's order."""

    def key_of(item: Found, name: str) -> tuple[int, Any] | None:
        return comparable(field_value(item, name), name.removeprefix("properties."))

    def cmp(a: Found, b: Found) -> int:
        for name, descending in order:
            ka, kb = key_of(a, name), key_of(b, name)
            if ka is None or kb is None:
                if ka is None and kb is None:
                    continue
                return 1 if ka is None else -1
            if ka[0] != kb[0]:
                return -1 if ka[0] < kb[0] else 1
            if ka[1] != kb[1]:
                less = ka[1] < kb[1]
                return (1 if less else -1) if descending else (-1 if less else 1)
        return 0

    return sorted(found, key=functools.cmp_to_key(cmp))


# ----- the walk --------------------------------------------------------------------------------------------------
def kind_of(doc: dict[str, Any]) -> str | None:
    """'Catalog', 'Collection', 'Feature' (an item), 'FeatureCollection' (an item collection), or None."""
    from pystac.serialization import identify_stac_object_type

    if doc.get("type") == "FeatureCollection" and isinstance(doc.get("features"), list):
        return "FeatureCollection"
    try:
        found = identify_stac_object_type(doc)
    except Exception:  # noqa: BLE001 - a malformed stac_version
        return None
    return str(found.value) if found is not None else None


def walk(
    reader: Reader,
    root: str,
    doc: dict[str, Any],
    state: Walk,
    *,
    max_walk: int = MAX_WALK,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Found]:
    """The items of the catalog at `root` (already read as `doc`), depth first in link order: a catalog's items, then
    each child catalog's. Links are located (and refused) by the reader; a document that cannot be read or is no STAC
    object is skipped and counted, a network failure stops the search."""
    visited = {root}
    stack: list[tuple[str, dict[str, Any] | None, str | None]] = [(root, doc, None)]
    state.documents = 1
    while stack:
        href, current, collection = stack.pop()
        if current is None:
            current = _read(reader, href, state, max_walk, progress)
            if current is None:
                if state.truncated:
                    return
                continue
        kind = kind_of(current)
        if kind == "FeatureCollection":
            for feature in current["features"]:
                if state.documents >= max_walk:
                    state.truncated = True
                    return
                state.documents += 1
                if isinstance(feature, dict) and kind_of(feature) == "Feature":
                    yield Found(feature, None, href, _collection(feature, collection))
                else:
                    state.skip(f"a feature of {reader.shown(href)} is not a STAC item")
        elif kind == "Feature":
            yield Found(current, href, href, _collection(current, collection))
        elif kind in ("Catalog", "Collection"):
            own = current.get("id") if kind == "Collection" and isinstance(current.get("id"), str) else collection
            children: list[tuple[str, dict[str, Any] | None, str | None]] = []
            for link in current.get("links") or []:
                if (
                    not isinstance(link, dict)
                    or link.get("rel") not in ("item", "child")
                    or not isinstance(link.get("href"), str)
                ):
                    continue
                target = reader.locate(href, link["href"], what=f"{link['rel']} link")
                if target in visited:
                    continue
                visited.add(target)
                if link["rel"] == "child":
                    children.append((target, None, own))
                    continue
                item = _read(reader, target, state, max_walk, progress)
                if item is None:
                    if state.truncated:
                        return
                    continue
                if kind_of(item) == "Feature":
                    yield Found(item, target, target, _collection(item, own))
                else:
                    state.skip(f"{reader.shown(target)} (an item link) is not a STAC item")
            stack.extend(reversed(children))
        elif href == root:
            raise GdalMcpError(
                "invalid-argument",
                f"{reader.shown(root)} is not a STAC catalog, collection, item or item collection (no STAC 'type'); give a "
                "catalog.json, collection.json, an item collection, or a STAC API's root URL",
            )
        else:
            state.skip(f"{reader.shown(href)} is not a STAC document")


def _collection(item: dict[str, Any], inherited: str | None) -> str | None:
    own = item.get("collection")
    return own if isinstance(own, str) else inherited


def _read(reader: Reader, href: str, state: Walk, max_walk: int, progress: Callable[[int], None] | None) -> dict[str, Any] | None:
    """A linked document, or None (skipped, or the walk's limit reached: state.truncated)."""
    if state.documents >= max_walk:
        state.truncated = True
        return None
    state.documents += 1
    if progress is not None and state.documents % 50 == 0:
        progress(state.documents)
    try:
        return reader.read_json(href)
    except GdalMcpError as e:
        if e.code in ("not-found", "invalid-argument", "resource-limit"):
            state.skip(e.message)
            return None
        raise
