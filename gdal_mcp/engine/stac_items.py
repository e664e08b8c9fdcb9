"""A STAC item as stac_search reports it: its key properties, and each asset with its bands and the `input` a raster
tool reads it by (an http(s)/s3 URL, or for a workspace catalog the real path of the file, made workspace-relative by
the server)."""

from __future__ import annotations

import math
import os
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

from gdal_mcp.credentials import redact_queries, signed_query
from gdal_mcp.models import StacAsset, StacBand, StacItem

#: schemes GDAL reads remotely (the server's sandbox decides whether it may)
REMOTE_SCHEMES = ("http", "https", "s3", "gs", "az")
MAX_BANDS = 64
MAX_PROPERTIES = 30
MAX_TEXT = 200
#: properties reported in their own fields (or never: the band lists)
SHOWN = frozenset(
    {
        "datetime",
        "start_datetime",
        "end_datetime",
        "eo:cloud_cover",
        "platform",
        "constellation",
        "gsd",
        "proj:code",
        "proj:epsg",
        "eo:bands",
        "raster:bands",
        "bands",
    }
)


class Local(Protocol):
    """The reader of a workspace catalog (stac_io.LocalReader): which real paths lie in the catalog's folder."""

    def inside(self, real: str) -> bool: ...


def slim(doc: dict[str, Any]) -> dict[str, Any]:
    """What a report needs of an item's JSON (no geometry coordinates, no links): kept while a static search sorts."""
    geometry = doc.get("geometry")
    return {
        "id": doc.get("id"),
        "collection": doc.get("collection"),
        "bbox": doc.get("bbox"),
        "geometry_type": geometry.get("type") if isinstance(geometry, dict) else None,
        "properties": doc.get("properties") if isinstance(doc.get("properties"), dict) else {},
        "assets": doc.get("assets") if isinstance(doc.get("assets"), dict) else {},
        "self": next(
            (
                link.get("href")
                for link in doc.get("links") or []
                if isinstance(link, dict) and link.get("rel") == "self" and isinstance(link.get("href"), str)
            ),
            None,
        ),
    }


def summarize(
    doc: dict[str, Any],
    *,
    base: str,
    href: str | None,
    collection: str | None,
    local: Local | None,
    asset_keys: list[str] | None = None,
) -> StacItem:
    """A StacItem from an item's JSON (full or slim): relative asset hrefs resolved against `base` (the file or URL the
    item was read from); `local` for a workspace catalog."""
    item = slim(doc) if "geometry_type" not in doc else doc
    props: dict[str, Any] = item["properties"]
    assets = []
    for key, asset in item["assets"].items():
        if asset_keys is not None and key not in asset_keys:
            continue
        if isinstance(asset, dict) and isinstance(asset.get("href"), str):
            assets.append(_asset(str(key), asset, props, base, local))
    epsg = props.get("proj:epsg")
    code = props.get("proj:code") if isinstance(props.get("proj:code"), str) else None
    return StacItem(
        id=str(item.get("id")),
        collection=collection,
        datetime=_text(props.get("datetime")),
        start_datetime=_text(props.get("start_datetime")),
        end_datetime=_text(props.get("end_datetime")),
        bbox=_bbox(item.get("bbox")),
        geometry_type=_text(item.get("geometry_type")),
        cloud_cover=_float(props.get("eo:cloud_cover")),
        platform=_text(props.get("platform")),
        constellation=_text(props.get("constellation")),
        gsd=_float(props.get("gsd")),
        proj_code=code or (f"EPSG:{epsg}" if isinstance(epsg, int) and not isinstance(epsg, bool) else None),
        properties=_other_properties(props),
        href=href,
        assets=assets,
    )


def _asset(key: str, asset: dict[str, Any], props: dict[str, Any], base: str, local: Local | None) -> StacAsset:
    href, input_ = locate_asset(asset["href"], base, local)
    roles = asset.get("roles")
    bands = _bands(asset, props)
    return StacAsset(
        key=key,
        href=href,
        input=input_,
        type=_text(asset.get("type")),
        roles=[str(r) for r in roles if isinstance(r, str)] if isinstance(roles, list) else [],
        title=_text(asset.get("title")),
        bands=bands[:MAX_BANDS],
        band_count=len(bands) if bands else None,
    )


def locate_asset(href: str, base: str, local: Local | None) -> tuple[str, str | None]:
    """(the asset's absolute href, what a raster tool reads it by, or None when this server cannot). A signed href (a
    presigned URL's signature or token in its query) is a credential: shown with the values redacted, and no input
    (the server takes credentials from its operator, never from an argument)."""
    parts = urlsplit(href)
    scheme = parts.scheme.lower()
    if scheme in REMOTE_SCHEMES and signed_query(parts.query):
        return redact_queries(href), None
    if scheme in REMOTE_SCHEMES:
        return href, href
    if local is None:  # a remote catalog: relative to the item's URL
        absolute = urljoin(base, href)
        return absolute, absolute if urlsplit(absolute).scheme.lower() in REMOTE_SCHEMES else None
    if scheme == "file":
        href = urlsplit(href).path
    elif scheme and len(scheme) > 1:  # ftp:// and the like (a one-letter scheme is a Windows drive)
        return href, None
    real = os.path.realpath(os.path.join(os.path.dirname(base), href))
    return (real, real) if local.inside(real) else (href, None)


def _bands(asset: dict[str, Any], props: dict[str, Any]) -> list[StacBand]:
    """The asset's bands, merged by position from `bands` (STAC 1.1), `eo:bands` and `raster:bands` (an eo:bands of
    indices points into the item's own eo:bands, as STAC 0.9 wrote it)."""
    modern = _dicts(asset.get("bands"))
    eo = asset.get("eo:bands")
    if isinstance(eo, list) and eo and all(isinstance(i, int) for i in eo):
        listed = _dicts(props.get("eo:bands"))
        eo = [listed[i] for i in eo if 0 <= i < len(listed)]
    eo_bands = _dicts(eo)
    raster = _dicts(asset.get("raster:bands"))
    count = max(len(modern), len(eo_bands), len(raster))
    out = []
    for i in range(count):
        m = modern[i] if i < len(modern) else {}
        e = eo_bands[i] if i < len(eo_bands) else {}
        r = raster[i] if i < len(raster) else {}
        out.append(
            StacBand(
                name=_text(m.get("name") or e.get("name")),
                common_name=_text(e.get("common_name") or m.get("eo:common_name")),
                description=_text(m.get("description") or e.get("description")),
                center_wavelength=_float(e.get("center_wavelength") or m.get("eo:center_wavelength")),
                data_type=_text(r.get("data_type") or m.get("data_type")),
                nodata=_nodata(r.get("nodata", m.get("nodata"))),
                unit=_text(r.get("unit") or m.get("unit")),
            )
        )
    return out


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v if isinstance(v, dict) else {} for v in value] if isinstance(value, list) else []


def _other_properties(props: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in props.items():
        if len(out) >= MAX_PROPERTIES:
            break
        if name in SHOWN or value is None:
            continue
        if isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
            out[name] = value
        elif isinstance(value, str):
            out[name] = value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"
        elif isinstance(value, list) and len(value) <= 10 and all(isinstance(v, str | int | float) for v in value):
            out[name] = value
    return out


def _bbox(value: Any) -> list[float] | None:
    if not isinstance(value, list) or len(value) not in (4, 6):
        return None
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        return None
    return [values[0], values[1], values[3], values[4]] if len(values) == 6 else values


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _nodata(value: Any) -> float | str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else ("nan" if value != value else ("inf" if value > 0 else "-inf"))
    return _text(value)
