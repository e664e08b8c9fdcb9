"""Reading features for a model: a bounded GeoJSON FeatureCollection, one page at a time.

A page holds at most `limit` features (<= 1000) and about BUDGET characters of geometry: beyond that,
geometries are simplified, then omitted (largest first), and warnings say so. Feature ids are the source FIDs.

Filters: `where` (OGR SQL), `bbox` (OGR's spatial filter) and `intersects`, a GeoJSON shape: the layer is read
through the spatial filter of the shape's bbox, each geometry is tested exactly with shapely, and the page is
cut from the FIDs that match (then read by FID).
"""

from __future__ import annotations

import json
import warnings
from typing import Any, Literal

import numpy as np
import pyogrio
import shapely
from pyproj import CRS

from gdal_mcp.engine.bbox import bbox_in
from gdal_mcp.engine.crs import crs_label, parse_pyproj_crs
from gdal_mcp.engine.failures import gdal_message, wrap_gdal_errors
from gdal_mcp.engine.geometry_transform import reproject_densified, reproject_geometries, transformer
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.info import json_value
from gdal_mcp.engine.vector.opening import choose_layer, list_layers, open_options_for
from gdal_mcp.engine.vector.stream import filter_columns
from gdal_mcp.engine.vector.where import check_where
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import FeaturePage

MAX_LIMIT = 1000
MAX_VERTICES = 100  # per feature, with geometry_mode="simplified" (and when a full page is over budget)
SIMPLIFY_STEPS = (MAX_VERTICES, 50, 25, 12)  # vertices per feature for pages over budget, in turn
BUDGET = 200_000  # characters of GeoJSON geometry in one page
COUNT_CAP = 100_000  # `remaining` is counted exactly up to this many features after the page
GeometryMode = Literal["full", "simplified", "none"]


def simplify_to(geom: Any, max_vertices: int = MAX_VERTICES) -> tuple[Any, float | None]:
    """The geometry simplified (Douglas-Peucker) with the smallest tolerance that leaves <= max_vertices.

    Returns (geometry, tolerance): tolerance 0 when nothing was needed, None when no tolerance gets there
    (a MultiPoint with many points, a collection of very many parts).
    """
    if shapely.get_num_coordinates(geom) <= max_vertices:
        return geom, 0.0
    minx, miny, maxx, maxy = geom.bounds
    extent = max(maxx - minx, maxy - miny)
    if not np.isfinite(extent) or extent <= 0:
        return geom, None
    # Keep every ring and part where possible; let small parts collapse only when that cannot reach the bound.
    for preserve in (True, False):
        lo, hi, best = 0.0, extent / 1024, None
        while hi <= 2 * extent:  # the first tolerance (doubling) that is enough
            candidate = shapely.simplify(geom, hi, preserve_topology=preserve)
            if shapely.get_num_coordinates(candidate) <= max_vertices:
                best = None if candidate.is_empty else candidate
                break
            lo, hi = hi, hi * 2
        if best is None:
            continue
        for _ in range(16):  # then the smallest one, by bisection
            mid = (lo + hi) / 2
            candidate = shapely.simplify(geom, mid, preserve_topology=preserve)
            if shapely.get_num_coordinates(candidate) <= max_vertices and not candidate.is_empty:
                hi, best = mid, candidate
            else:
                lo = mid
        return best, hi
    return geom, None


def _read(path: str, **kwargs: Any) -> tuple[Any, Any, Any, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pyogrio.raw.read(path, return_fids=True, datetime_as_string=True, **open_options_for(path), **kwargs)
    except ValueError as e:
        if kwargs.get("where") and "invalid sql query" in str(e).lower():
            raise GdalMcpError(
                "invalid-argument", f"where {kwargs['where']!r} is not a valid attribute filter: {gdal_message(e)}"
            ) from None
        raise


def _query_shape(intersects: Any, intersects_crs: str | None, layer_crs: Any) -> Any:
    """The GeoJSON `intersects` (in intersects_crs, default EPSG:4326) as one prepared shapely geometry in the
    layer's CRS (edges densified); without a layer CRS its coordinates are taken as the layer's own."""
    from gdal_mcp.engine.features.masks import geojson_geometries

    try:
        geoms = geojson_geometries(intersects)
    except GdalMcpError as e:
        raise GdalMcpError(
            e.code,
            "intersects"
            + e.message.removeprefix("geometry").replace(
                "; give a Polygon or MultiPolygon with closed rings of [x, y] positions", ""
            ),
        ) from None
    geoms = [g for g in geoms if g is not None and not g.is_empty]
    if not geoms:
        raise GdalMcpError(
            "invalid-argument", "intersects holds no geometry; give a GeoJSON geometry, Feature or FeatureCollection"
        )
    if layer_crs is None and intersects_crs is not None:
        raise GdalMcpError(
            "invalid-argument",
            "intersects_crs was given but the layer has no CRS; omit it and give intersects in the layer's own coordinates",
        )
    src_crs = parse_pyproj_crs(intersects_crs or "EPSG:4326", "intersects_crs") if layer_crs is not None else None
    shape = shapely.union_all(
        shapely.make_valid(np.array(reproject_densified(geoms, src_crs, layer_crs, target="layer"), dtype=object))
    )
    shapely.prepare(shape)
    return shape


def _intersecting(path: str, *, layer: str, where: str | None, bbox: Any, shape: Any, columns: list[str], stop: int) -> list[int]:
    """FIDs (in layer order) of the features matching `where` whose geometry intersects `shape`: read through
    OGR's spatial filter `bbox`, then tested exactly; at most `stop` of them."""
    import pyogrio.raw

    from gdal_mcp.engine.vector.stream import BATCH_SIZE, geometries

    kwargs: dict[str, Any] = {
        "layer": layer,
        "columns": columns,
        "bbox": bbox,
        "return_fids": True,
        "use_pyarrow": True,
        "batch_size": BATCH_SIZE,
        **open_options_for(path),
    }
    if where:
        kwargs["where"] = where
    found: list[int] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pyogrio.raw.open_arrow(path, **kwargs) as (meta, reader):
                fid_column = meta.get("fid_column") or "OGC_FID"
                for batch in reader:
                    hit = shapely.intersects(geometries(batch), shape)
                    found.extend(int(f) for f in batch.column(fid_column).to_numpy()[hit])
                    if len(found) >= stop:
                        return found[:stop]
    except ValueError as e:
        if where and "invalid sql query" in str(e).lower():
            message = f"where {where!r} is not a valid attribute filter: {gdal_message(e)}"
            raise GdalMcpError("invalid-argument", message) from None
        raise
    return found


def _omitted(geom: Any, why: str) -> str:
    return (
        f"{geom.geom_type} with {shapely.get_num_coordinates(geom)} vertices ({why}; bbox "
        f"{[round(float(v), 6) for v in geom.bounds]})"
    )


@wrap_gdal_errors
def features(
    path: str,
    *,
    layer: str | None = None,
    where: str | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    fields: list[str] | None = None,
    limit: int = 50,
    offset: int = 0,
    geometry_mode: GeometryMode = "full",
    dst_crs: str | None = None,
    intersects: dict | None = None,
    intersects_crs: str | None = None,
    progress: Progress = no_progress,
) -> FeaturePage:
    """A page of features as GeoJSON: `limit` features after skipping `offset` matching ones.

    bbox is in bbox_crs (default the layer's CRS); `intersects` (a GeoJSON geometry, Feature or FeatureCollection
    in intersects_crs, default EPSG:4326 as GeoJSON says) keeps the features whose geometry intersects it;
    coordinates are in the layer's CRS, or dst_crs. `geometry_mode`: full, simplified or none.
    """
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise GdalMcpError("invalid-argument", f"limit must be 1..{MAX_LIMIT} (got {limit}); page with offset")
    if not isinstance(offset, int) or offset < 0:
        raise GdalMcpError("invalid-argument", f"offset must be >= 0 (got {offset})")
    if geometry_mode not in ("full", "simplified", "none"):
        raise GdalMcpError("invalid-argument", f"geometry_mode must be full, simplified or none (got {geometry_mode!r})")
    if intersects is None and intersects_crs is not None:
        raise GdalMcpError("invalid-argument", "intersects_crs only applies with intersects; remove it or pass intersects")
    name = choose_layer(path, layer, list_layers(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = pyogrio.read_info(path, layer=name, **open_options_for(path))
    if where:
        check_where(where, list(info["fields"]), list(info.get("ogr_types", [])))
    layer_crs = CRS.from_user_input(info["crs"]) if info.get("crs") else None
    target = parse_pyproj_crs(dst_crs, "dst_crs") if dst_crs else None
    if target is not None and layer_crs is None:
        raise GdalMcpError("invalid-argument", "the layer has no CRS, so it cannot be reprojected to dst_crs")
    box = bbox_in(bbox, parse_pyproj_crs(bbox_crs, "bbox_crs") if bbox_crs else None, layer_crs) if bbox is not None else None
    all_fields = [str(f) for f in info["fields"]]
    columns = filter_columns(all_fields, fields, where) if fields is not None else None
    shown = list(fields) if fields is not None else all_fields
    notes: list[str] = []
    remaining: int | None = 0

    if intersects is not None:
        shape = _query_shape(intersects, intersects_crs, layer_crs)
        sx0, sy0, sx1, sy1 = shape.bounds
        if box is not None:
            sx0, sy0, sx1, sy1 = max(sx0, box[0]), max(sy0, box[1]), min(sx1, box[2]), min(sy1, box[3])
        progress(0.1, "finding the features that intersect")
        stop = offset + limit + COUNT_CAP + 1
        found = (
            []
            if sx0 > sx1 or sy0 > sy1
            else _intersecting(
                path,
                layer=name,
                where=where,
                bbox=(sx0, sy0, sx1, sy1),
                shape=shape,
                columns=filter_columns(all_fields, [], where),
                stop=stop,
            )
        )
        page = found[offset : offset + limit]
        more = len(found) > offset + limit
        if len(found) >= stop:
            remaining = None
            notes.append(f"more than {COUNT_CAP} features match after this page (remaining not counted)")
        else:
            remaining = max(len(found) - offset - limit, 0)
        progress(0.5, "reading features")
        if page:
            meta, fids, wkbs, values = _read(path, layer=name, fids=page, columns=columns, read_geometry=geometry_mode != "none")
        else:
            meta, fids, wkbs, values = {"fields": []}, np.zeros(0, dtype=np.int64), None, []
    else:
        query: dict[str, Any] = {"layer": name, "where": where or None, "bbox": box}
        progress(0.1, "reading features")
        meta, fids, wkbs, values = _read(
            path, **query, columns=columns, skip_features=offset, max_features=limit + 1, read_geometry=geometry_mode != "none"
        )
        more = len(fids) > limit
        fids = fids[:limit]
    if more and intersects is None:
        remaining = None
        if where is None and bbox is None and int(info["features"]) >= 0:
            remaining = max(int(info["features"]) - offset - limit, 0)
        else:
            progress(0.5, "counting the features after this page")
            count_columns = filter_columns(all_fields, [], where)
            _, after, _, _ = _read(
                path,
                **query,
                columns=count_columns,
                read_geometry=False,
                skip_features=offset + limit,
                max_features=COUNT_CAP + 1,
            )
            if len(after) <= COUNT_CAP:
                remaining = len(after)
            else:
                notes.append(f"more than {COUNT_CAP} features match after this page (remaining not counted)")

    geoms = np.full(len(fids), None, dtype=object)
    if wkbs is not None:
        geoms = shapely.from_wkb(wkbs[:limit])
    out_crs = target or layer_crs
    omitted: dict[int, str] = {}
    reprojection = transformer(layer_crs, target)
    if reprojection is not None and len(geoms):
        geoms, bad = reproject_geometries(geoms, reprojection)
        for i in np.flatnonzero(bad).tolist():
            omitted[i] = f"could not be reprojected to {dst_crs} (outside the projection's domain)"
            geoms[i] = None

    tolerances: dict[int, float] = {}
    originals = geoms.copy()

    def simplify(cap: int, strict: bool = False) -> None:
        """Simplify (from the original) every geometry with more than `cap` vertices; `strict` omits those
        that cannot get there (else they stay as they are, for the budget to decide)."""
        for i in np.flatnonzero(shapely.get_num_coordinates(geoms) > cap).tolist():
            simple, tol = simplify_to(originals[i], cap)
            if tol is None and strict:
                omitted[i] = _omitted(originals[i], f"cannot be simplified to {cap} vertices")
                geoms[i] = None
            elif tol:
                geoms[i], tolerances[i] = simple, tol

    def measure() -> tuple[Any, Any]:
        texts = shapely.to_geojson(geoms)
        return texts, np.array([len(t) if t is not None else 0 for t in texts], dtype=np.int64)

    cap = MAX_VERTICES if geometry_mode == "simplified" else None  # vertices per feature the page is simplified to
    if cap is not None:
        simplify(cap, strict=True)
    texts, sizes = measure()
    # Over budget: fewer vertices per feature (100, 50, 25, 12), then leave out the largest geometries.
    for step in SIMPLIFY_STEPS:
        if sizes.sum() <= BUDGET:
            break
        if cap is None or step < cap:
            cap = step
            simplify(cap)
            texts, sizes = measure()
    if sizes.sum() > BUDGET:
        dropped = 0
        for k in (int(k) for k in np.argsort(-sizes, kind="stable")):
            if sizes.sum() <= BUDGET:
                break
            omitted[k] = _omitted(geoms[k], f"omitted: the page is limited to ~{BUDGET} characters of geometry")
            geoms[k], sizes[k], texts[k] = None, 0, None
            dropped += 1
        notes.append(
            f"{dropped} geometries were omitted to keep the page under ~{BUDGET} characters (their bbox is "
            "in 'geometry_omitted'); ask for fewer features (limit) or geometry_mode='none'"
        )
    if tolerances:
        unit = out_crs.axis_info[0].unit_name if out_crs is not None and out_crs.axis_info else "CRS units"
        tols = sorted(tolerances.values())
        why = (
            ""
            if geometry_mode == "simplified" and cap == MAX_VERTICES
            else f" to keep the page under ~{BUDGET} characters of geometry"
        )
        notes.append(
            f"{len(tolerances)} geometries simplified (Douglas-Peucker) to at most {cap} vertices{why}; "
            f"tolerance {tols[0]:.6g} to {tols[-1]:.6g} {unit} (each feature's is in 'simplify_tolerance')"
        )

    names = [str(f) for f in meta["fields"]]
    columns_out = [(j, n) for j, n in enumerate(names) if n in shown]
    feats: list[dict[str, Any]] = []
    for i, fid in enumerate(fids):
        feat: dict[str, Any] = {
            "type": "Feature",
            "id": int(fid) if fid >= 0 else offset + i,
            "properties": {n: json_value(values[j][i]) for j, n in columns_out},
            "geometry": json.loads(texts[i]) if geometry_mode != "none" and texts[i] is not None else None,
        }
        if i in tolerances:
            feat["simplify_tolerance"] = tolerances[i]
        if i in omitted:
            feat["geometry_omitted"] = omitted[i]
        feats.append(feat)
    progress(1.0, f"{len(feats)} features")
    return FeaturePage(
        features=feats, crs=crs_label(out_crs), layer=name, offset=offset, truncated=more, remaining=remaining, warnings=notes
    )
