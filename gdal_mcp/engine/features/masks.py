"""Clip regions shared by raster and vector clip: a bbox, a GeoJSON geometry or the polygons of a vector file.

One implementation of "polygons from a GeoJSON geometry/Feature/FeatureCollection or from a vector file
layer (+ where), reprojected to a target CRS with edges densified". CRS arguments may be anything with a
`to_wkt()` (rasterio or pyproj CRS) or text pyproj accepts; None means "no CRS".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gdal_mcp.engine.bbox import check_bbox
from gdal_mcp.engine.crs import parse_crs
from gdal_mcp.engine.failures import gdal_message
from gdal_mcp.engine.geometry_transform import reproject_densified as reproject
from gdal_mcp.engine.geometry_transform import same_crs  # noqa: F401 - (re-exported from its old home)
from gdal_mcp.errors import GdalMcpError


def check_choice(bbox: Any, geometry: Any, mask: Any) -> str:
    """Which one of bbox, geometry or mask was given ("bbox", "geometry" or "mask"); exactly one must be."""
    given = [name for name, value in (("bbox", bbox), ("geometry", geometry), ("mask", mask)) if value is not None]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        raise GdalMcpError(
            "invalid-argument",
            f"pass exactly one of bbox, geometry or mask (got {what}): bbox for a "
            "[minx, miny, maxx, maxy] box, geometry for a GeoJSON polygon, mask for a vector file",
        )
    return given[0]


def check_owners(kind: str, **values: Any) -> None:
    """bbox_crs goes with bbox, geometry_crs with geometry, mask_layer/mask_where with mask."""
    owners = {"bbox_crs": "bbox", "geometry_crs": "geometry", "mask_layer": "mask", "mask_where": "mask"}
    for name, value in values.items():
        owner = owners[name]
        if value is not None and owner != kind:
            raise GdalMcpError("invalid-argument", f"{name} only applies with {owner}; remove it or pass {owner}")


def geojson_geometries(obj: Any) -> list[Any]:
    """Shapely geometries from a GeoJSON geometry, Feature or FeatureCollection dict."""
    import shapely.geometry

    if not isinstance(obj, dict) or "type" not in obj:
        raise GdalMcpError(
            "invalid-argument",
            'geometry must be a GeoJSON geometry object such as {"type": "Polygon", "coordinates": [[[x, y], ...]]}',
        )
    kind = obj["type"]
    try:
        if kind == "FeatureCollection":
            return [g for f in obj.get("features") or [] for g in geojson_geometries(f)]
        if kind == "Feature":
            return [] if obj.get("geometry") is None else geojson_geometries(obj["geometry"])
        return [shapely.geometry.shape(obj)]
    except GdalMcpError:
        raise
    except Exception as e:  # noqa: BLE001 - shapely raises many types for malformed GeoJSON
        raise GdalMcpError(
            "invalid-argument",
            f"geometry is not valid GeoJSON ({type(e).__name__}: {e}); give "
            "a Polygon or MultiPolygon with closed rings of [x, y] positions",
        ) from None


def read_mask(path: str, layer: str | None, where: str | None) -> tuple[list[Any], Any]:
    """Geometries of the chosen layer (filtered by `where`) and the layer's CRS (None when it has none)."""
    import pyogrio.raw
    import shapely

    from gdal_mcp.engine.vector.opening import choose_layer

    try:
        name = choose_layer(path, layer)
    except GdalMcpError as e:
        raise GdalMcpError(e.code, e.message.replace("pass layer=", "pass mask_layer=")) from None
    try:
        # Fields GDAL is told to ignore read as null in the where filter: keep them all when filtering.
        meta, _, wkb, _ = pyogrio.raw.read(path, layer=name, columns=None if where else [], where=where)
    except Exception as e:
        if where and (isinstance(e, ValueError) or (type(e).__module__ or "").startswith("pyogrio")):
            raise GdalMcpError(
                "invalid-argument",
                f"mask_where {where!r} was refused by GDAL ({gdal_message(e)}); use an OGR SQL "
                "condition on the layer's fields, e.g. \"name = 'Fiji'\" (vector_info lists them)",
            ) from None
        raise
    geoms = [g for g in shapely.from_wkb(wkb) if g is not None and not g.is_empty] if wkb is not None else []
    if not geoms:
        detail = f" matching {where!r}" if where else ""
        raise GdalMcpError(
            "invalid-argument",
            f"the mask layer '{name}' has no features with a geometry{detail}; check mask_where or choose another mask_layer",
        )
    crs_text = meta.get("crs")
    return geoms, (parse_crs(crs_text, "mask CRS") if crs_text else None)


def flatten(geom: Any) -> Iterable[Any]:
    """The non-empty single parts of a geometry (multi-parts and collections opened recursively)."""
    import shapely

    if geom.geom_type.startswith("Multi") or geom.geom_type == "GeometryCollection":
        for part in shapely.get_parts(geom):
            yield from flatten(part)
    elif not geom.is_empty:
        yield geom


def polygons(geoms: Iterable[Any]) -> list[Any]:
    """The polygons (made valid, 2D) among the geometries; clipping needs an area."""
    import shapely

    parts: list[Any] = []
    kinds: set[str] = set()
    for g in geoms:
        for part in flatten(shapely.force_2d(g)):
            kinds.add(part.geom_type)
            if part.geom_type != "Polygon":
                continue
            if part.is_valid:
                parts.append(part)
            else:
                parts.extend(p for p in flatten(shapely.make_valid(part)) if p.geom_type == "Polygon")
    if not parts and kinds:
        raise GdalMcpError(
            "invalid-argument",
            f"clip needs polygons but got {', '.join(sorted(kinds))}; buffer points or lines first (vector tools) or pass a bbox",
        )
    return parts


def mask_polygons(
    *,
    target_crs: Any,
    target: str = "raster",
    bbox: Any = None,
    bbox_crs: str | None = None,
    geometry: dict | None = None,
    geometry_crs: str | None = None,
    mask: str | None = None,
    mask_layer: str | None = None,
    mask_where: str | None = None,
) -> tuple[list[Any], Any]:
    """The clip region as valid 2D polygons in `target_crs`, and the CRS it was given in.

    Exactly one of bbox / geometry / mask. bbox is in bbox_crs (default: the target's own CRS); geometry is
    GeoJSON in geometry_crs (default EPSG:4326, as GeoJSON is); mask is a vector file (mask_layer, mask_where)
    in its own CRS. Without a target CRS coordinates are taken as the target's own (a CRS given explicitly
    is then an error). The returned CRS is None when no reprojection applies.
    """
    import shapely

    kind = check_choice(bbox, geometry, mask)
    check_owners(kind, bbox_crs=bbox_crs, geometry_crs=geometry_crs, mask_layer=mask_layer, mask_where=mask_where)
    if kind == "bbox":
        box = check_bbox(bbox)
        geoms = [shapely.box(*box)]
        if bbox_crs is not None and target_crs is None:
            raise GdalMcpError(
                "invalid-argument",
                f"bbox_crs was given but the {target} has no CRS; omit it and give the bbox in the {target}'s own coordinates",
            )
        crs = parse_crs(bbox_crs, "bbox_crs") if bbox_crs is not None else None
    elif kind == "geometry":
        geoms = geojson_geometries(geometry)
        if not geoms:
            raise GdalMcpError("invalid-argument", "geometry has no features with a geometry")
        crs = parse_crs(geometry_crs or "EPSG:4326", "geometry_crs")
        if geometry_crs is not None and target_crs is None:
            raise GdalMcpError(
                "invalid-argument",
                f"geometry_crs was given but the {target} has no CRS; omit it "
                f"and give the geometry in the {target}'s own coordinates",
            )
    else:
        geoms, crs = read_mask(str(mask), mask_layer, mask_where)
    if target_crs is None:
        crs = None  # nothing to reproject to: the coordinates are taken as the target's own
    result = polygons(reproject(geoms, crs, target_crs, target=target))
    if not result:
        raise GdalMcpError("invalid-argument", f"the {kind} is empty")
    return result, crs
