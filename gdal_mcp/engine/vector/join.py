"""Joins: attributes of a second layer added to the features of the first (geopandas.sjoin / sjoin_nearest,
a table join by key), or statistics of the matching features (point-in-polygon counts, sums per zone).

Spatial joins stream one layer in batches against an STRtree (shapely 2) of the other, held whole in memory:
- without `aggregate`: `input` is streamed and `join` is the indexed one (so `join` should be the smaller);
- with `aggregate` (not nearest): the smaller layer is indexed and the larger streamed, so a million points
  counted in a few thousand polygons cost the polygons' memory plus one batch.
The join layer is reprojected to the input's CRS. Predicates read as geopandas': `within` = the input feature
lies within the join feature, `contains` = it contains it. Field names found on both sides get the suffixes
`_left` / `_right`, as geopandas.sjoin. `nearest` on a geographic layer measures ground distances on the
ellipsoid (pyproj.Geod): candidates are first found in a box that holds every point within the distance
(a spherical-cap bound, conservative), then measured geodesically; ties are all kept, as sjoin_nearest does.
An attribute join (`on`) reads the table (CSV types detected, XLSX, GPKG …) and matches keys; when the key is
text on one side and a number on the other, the text keys are read as numbers ("7" = 7) and the warnings say so.
"""

from __future__ import annotations

import math
import warnings as pywarnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.geometry_transform import reproject_geometries, transformer
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.aggregate import Aggregator, parse_aggregate
from gdal_mcp.engine.vector.layer_map import share, write_guarded
from gdal_mcp.engine.vector.opening import choose_layer
from gdal_mcp.engine.vector.stream import (
    BATCH_SIZE,
    LAYER_OPTIONS,
    geometries,
    geometry_column,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    write_layer,
)
from gdal_mcp.engine.vector.units import LINEAR_UNITS, UNITS, _horizontal, _unit_factor
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

PREDICATES = ("intersects", "within", "contains", "nearest")
# The same relation seen from the other layer (when the input is the indexed one).
CONVERSE = {"intersects": "intersects", "within": "contains", "contains": "within"}
# Smallest radius of curvature of the WGS84-like ellipsoids (meridional, at the equator), metres: an angle of
# distance / this radius bounds where a point within `distance` can be.
MIN_RADIUS_M = 6_335_000.0
# Features per batch read (tests lower it to exercise many batches).
READ_BATCH = BATCH_SIZE


@dataclass
class Loaded:
    """A layer held whole: attributes (no geometry), geometries in the target CRS, its name and CRS."""

    name: str
    table: pa.Table
    geoms: np.ndarray | None
    crs: str | None
    unplaced: int = 0


def layer_info(path: str, layer: str | None) -> tuple[str, dict[str, Any]]:
    """(layer name, pyogrio info) of a layer without reading features."""
    import pyogrio

    name = choose_layer(path, layer)
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        return name, pyogrio.read_info(path, layer=name)


def load_layer(
    path: str,
    layer: str | None,
    *,
    target_crs: str | None,
    columns: list[str] | None = None,
    where: str | None = None,
    read_geometry: bool = True,
    table: bool = False,
) -> Loaded:
    """Read a whole layer (the smaller side of a two-layer operation), geometries reprojected to target_crs.

    table=True reads it as a table: CSV field types are detected (numbers as numbers), as ogr2ogr
    -oo AUTODETECT_TYPE=YES does.
    """
    from pyogrio.raw import read_arrow

    name, info = layer_info(path, layer)
    if table or info.get("geometry_type") is None:
        read_geometry = False
    options = {"AUTODETECT_TYPE": "YES"} if table and info.get("driver") == "CSV" else {}
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        try:
            meta, data = read_arrow(path, layer=name, columns=columns, where=where, read_geometry=read_geometry, **options)
        except Exception as e:  # noqa: BLE001 - pyogrio raises several types
            raise GdalMcpError("gdal-error", f"cannot read layer '{name}' of {Path(path).name}: {e}") from None
    gcol = geometry_column(data.schema)
    geoms = None
    unplaced = 0
    crs = meta.get("crs")
    if gcol is not None:
        import shapely

        geoms = shapely.from_wkb(data.column(gcol).to_numpy(zero_copy_only=False))
        data = data.drop_columns([gcol])
        trans = transformer(crs, target_crs)
        if trans is not None:
            geoms, bad = reproject_geometries(geoms, trans)
            geoms[bad] = None
            unplaced = int(bad.sum())
    return Loaded(name, data, geoms, crs, unplaced)


def _rename(left: list[str], right: list[str], suffixes: tuple[str, str]) -> tuple[list[str], list[str]]:
    """Field names of both sides with the suffixes added to the names they share."""
    both = set(left) & set(right)
    return ([f"{n}{suffixes[0]}" if n in both else n for n in left], [f"{n}{suffixes[1]}" if n in both else n for n in right])


def _output_geometry_type(info: dict[str, Any]) -> str:
    return info.get("geometry_type") or "Unknown"


# ---------------------------------------------------------------------------------------------- distances


@dataclass
class Distances:
    """How distances are measured on the input layer: geodesic (geographic CRS, linear units) or planar."""

    geodesic: bool
    factor: float  # planar: output units per layer unit
    geod: Any = None
    deg_per_unit: float = 1.0


def plan_distances(crs_text: str | None, units: str) -> tuple[Distances, list[str]]:
    if units not in UNITS:
        raise GdalMcpError("invalid-argument", f"units must be one of {', '.join(UNITS)} (got {units!r})")
    crs = _horizontal(crs_text)
    if crs is None:
        if units != "layer":
            raise GdalMcpError(
                "invalid-argument",
                f"the input layer has no CRS, so distances in {units!r} cannot be "
                "measured; pass units='layer' (the coordinates' own unit) or assign a CRS first",
            )
        return Distances(False, 1.0), []
    factor, unit_name = _unit_factor(crs)
    if crs.is_geographic:
        if units in ("deg", "layer"):
            return Distances(False, 1.0), [
                f"distances are in {unit_name}s of the geographic CRS, as asked "
                f"(units={units!r}); pass units='m' for ground distances"
            ]
        return Distances(
            True, 1.0 / LINEAR_UNITS[units], geod=(crs.geodetic_crs or crs).get_geod(), deg_per_unit=math.degrees(factor)
        ), []
    if units == "deg":
        raise GdalMcpError(
            "invalid-argument",
            f"units='deg' needs a geographic layer; this one is projected (unit {unit_name}): use m, km, ft, mi or layer",
        )
    if units == "layer":
        return Distances(False, 1.0), []
    return Distances(False, factor / LINEAR_UNITS[units]), []


def _cap_boxes(geoms: np.ndarray, metres: np.ndarray, k: float) -> np.ndarray:
    """Lon/lat boxes (in layer units; k degrees per unit) holding every point within `metres` of each geometry."""
    import shapely

    b = shapely.bounds(geoms) * k
    delta = np.minimum(metres / MIN_RADIUS_M, math.pi)  # radians
    dlat = np.degrees(delta) * 1.0001 + 1e-9
    lat_far = np.minimum(np.maximum(np.abs(b[:, 1]), np.abs(b[:, 3])), 90.0)
    ratio = np.sin(delta) / np.maximum(np.cos(np.radians(lat_far)), 1e-300)
    with np.errstate(invalid="ignore"):
        dlon = np.where((ratio >= 1) | (delta >= math.pi / 2), 360.0, np.degrees(np.arcsin(np.minimum(ratio, 1.0))))
    dlon = dlon * 1.0001 + 1e-9
    return (
        np.column_stack([b[:, 0] - dlon, np.maximum(b[:, 1] - dlat, -90.0), b[:, 2] + dlon, np.minimum(b[:, 3] + dlat, 90.0)]) / k
    )


def _geodesic(a: np.ndarray, b: np.ndarray, dist: Distances) -> np.ndarray:
    """Metres between pairs of geometries: exact (ellipsoid) for points; for other geometries between the nearest
    points found in lon/lat."""
    import shapely

    k = dist.deg_per_unit
    points = (shapely.get_type_id(a) == 0) & (shapely.get_type_id(b) == 0)
    out = np.zeros(len(a))
    if points.any():
        pa_, pb = shapely.get_coordinates(a[points]), shapely.get_coordinates(b[points])
        _, _, out[points] = dist.geod.inv(pa_[:, 0] * k, pa_[:, 1] * k, pb[:, 0] * k, pb[:, 1] * k)
    other = ~points
    if other.any():
        touching = shapely.intersects(a[other], b[other])
        lines = shapely.shortest_line(a[other], b[other])
        c = shapely.get_coordinates(lines).reshape(-1, 2, 2)
        _, _, d = dist.geod.inv(c[:, 0, 0] * k, c[:, 0, 1] * k, c[:, 1, 0] * k, c[:, 1, 1] * k)
        out[other] = np.where(touching, 0.0, d)
    return out


def _query_boxes(tree: Any, boxes: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray]:
    """(box index, tree index) of the tree geometries meeting each box, boxes beyond ±180° wrapped around."""
    import shapely

    half = 180.0 / k
    found = []
    for shift in (0.0, 2 * half, -2 * half):
        bx = boxes.copy()
        if shift:
            sel = (bx[:, 0] < -half) if shift > 0 else (bx[:, 2] > half)
            if not sel.any():
                continue
            idx = np.flatnonzero(sel)
            bx = bx[sel]
            bx[:, [0, 2]] += shift
        else:
            idx = np.arange(len(bx))
        q = tree.query(shapely.box(bx[:, 0], bx[:, 1], bx[:, 2], bx[:, 3]), predicate="intersects")
        found.append(np.stack([idx[q[0]], q[1]]))
    pairs = np.unique(np.concatenate(found, axis=1), axis=1) if found else np.zeros((2, 0), dtype=np.int64)
    return pairs[0], pairs[1]


def nearest_pairs(
    geoms: np.ndarray, tree: Any, tree_geoms: np.ndarray, dist: Distances, max_distance: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input index, tree index, distance in output units) of each input geometry's nearest tree geometries
    (all ties), within max_distance (output units) when given."""
    import shapely

    present = np.flatnonzero(~shapely.is_missing(geoms) & ~shapely.is_empty(geoms))
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    if not len(present) or not len(tree_geoms):
        return empty
    g = geoms[present]
    if not dist.geodesic:
        limit = None if max_distance is None else max_distance / dist.factor
        (i, j), d = tree.query_nearest(g, max_distance=limit, return_distance=True, all_matches=True)
        return present[i], j, d * dist.factor
    if max_distance is not None:
        reach = np.full(len(g), max_distance / dist.factor)  # metres
    else:
        i0, j0 = tree.query_nearest(g, all_matches=False)
        reach = np.full(len(g), np.inf)
        reach[i0] = _geodesic(g[i0], tree_geoms[j0], dist)
    bi, tj = _query_boxes(tree, _cap_boxes(g, reach, dist.deg_per_unit), dist.deg_per_unit)
    if not len(bi):
        return empty
    d = _geodesic(g[bi], tree_geoms[tj], dist)
    best = np.full(len(g), np.inf)
    np.minimum.at(best, bi, d)
    keep = d <= best[bi] * (1 + 1e-12) + 1e-9
    if max_distance is not None:
        keep &= d <= reach[bi]
    order = np.lexsort((tj[keep], bi[keep]))
    return present[bi[keep][order]], tj[keep][order], d[keep][order] * dist.factor


# ---------------------------------------------------------------------------------------------- keys


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "real"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    return str(t)


def _text_to_number(values: list[Any], integer: bool) -> tuple[list[Any], int]:
    """Text keys read as numbers ("7" -> 7); those that are not numbers become None. Returns (keys, unreadable)."""
    out: list[Any] = []
    bad = 0
    for v in values:
        if v is None:
            out.append(None)
            continue
        try:
            f = float(str(v).strip())
            out.append(int(f) if integer and f.is_integer() else f)
        except ValueError:
            out.append(None)
            bad += 1
    return out, bad


def _normal(values: list[Any]) -> list[Any]:
    """Numbers as one kind (7.0 == 7, a dict key matches both)."""
    return [int(v) if isinstance(v, float) and v.is_integer() else v for v in values]


# ---------------------------------------------------------------------------------------------- the join


@wrap_gdal_errors
def join(
    src: str,
    dst: str,
    *,
    join: str,
    predicate: str = "intersects",
    on: str | list[str] | None = None,
    max_distance: float | None = None,
    units: str = "m",
    how: str = "left",
    aggregate: dict[str, Any] | None = None,
    distance_field: str | None = None,
    layer: str | None = None,
    join_layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Join the features of `join` to those of `src` (see the module docstring); write `dst`."""
    driver = vector_driver(dst, format)
    if predicate not in PREDICATES:
        raise GdalMcpError("invalid-argument", f"predicate must be one of {', '.join(PREDICATES)}")
    if how not in ("left", "inner"):
        raise GdalMcpError(
            "invalid-argument", "how must be 'left' (keep every input feature) or 'inner' (only those with a match)"
        )
    if on is None and predicate != "nearest" and (max_distance is not None or distance_field):
        raise GdalMcpError("invalid-argument", "max_distance and distance_field go with predicate='nearest'")
    if on is not None and (predicate == "nearest" or max_distance is not None or distance_field):
        raise GdalMcpError(
            "invalid-argument", "on= is an attribute join by key: it takes no nearest, max_distance or distance_field"
        )
    if max_distance is not None and not (math.isfinite(max_distance) and max_distance >= 0):
        raise GdalMcpError("invalid-argument", "max_distance must be zero or a positive number")
    name, info = layer_info(src, layer)
    out_name = output_layer or name
    crs = info.get("crs")
    progress(0.0, "reading the join layer")
    warnings: list[str] = []
    if on is not None:
        return _attribute_join(src, dst, name, info, join, join_layer, on, how, aggregate, driver, out_name, progress)
    if info.get("geometry_type") is None:
        raise GdalMcpError(
            "invalid-argument", f"layer '{name}' has no geometry: a spatial join needs geometries (use on= for a join by key)"
        )
    dist, notes = plan_distances(crs, units) if predicate == "nearest" else (None, [])
    warnings += notes
    jname, jinfo = layer_info(join, join_layer)
    if jinfo.get("geometry_type") is None:
        raise GdalMcpError("invalid-argument", f"the join layer '{jname}' has no geometry; use on= for a join by key")
    if aggregate is not None:
        spec = parse_aggregate(aggregate, dict(zip(jinfo["fields"], _arrow_types(jinfo), strict=True)))
        streamed_join = predicate != "nearest" and int(jinfo.get("features", -1)) > int(info.get("features", -1)) >= 0
        if streamed_join:
            return _aggregate_streaming_join(
                src, dst, name, info, join, jname, predicate, how, spec, driver, out_name, progress, warnings
            )
    else:
        spec = []
    other = load_layer(join, jname, target_crs=crs, columns=[s[0] for s in spec if s[0] != "*"] if spec else None)
    _reprojection_notes(other, crs, warnings)
    import shapely

    tree_geoms = other.geoms if other.geoms is not None else np.zeros(0, dtype=object)
    tree = shapely.STRtree(tree_geoms)
    progress(0.05, f"indexed {len(tree_geoms)} join features")
    counter = {"matched": 0, "features": 0}

    with read_layer(src, layer=name, batch_size=READ_BATCH) as stream:
        gcol = stream.geometry_column
        in_fields = [f for f in stream.schema if f.name != gcol]
        join_fields = list(other.table.schema)
        if spec:
            agg_fields = Aggregator(spec).output_schema(other.table.schema)
            clash = {f.name for f in in_fields} & {f.name for f in agg_fields}
            agg_fields = [pa.field(f"{f.name}_right" if f.name in clash else f.name, f.type) for f in agg_fields]
            extra = agg_fields
        else:
            left_names, right_names = _rename([f.name for f in in_fields], [f.name for f in join_fields], ("_left", "_right"))
            in_fields = [pa.field(n, f.type) for n, f in zip(left_names, in_fields, strict=True)]
            extra = [pa.field(n, f.type) for n, f in zip(right_names, join_fields, strict=True)]
        if distance_field:
            if distance_field in {f.name for f in [*in_fields, *extra]}:
                raise GdalMcpError("invalid-argument", f"distance_field {distance_field!r} is already a field name")
            extra = [*extra, pa.field(distance_field, pa.float64())]
        schema = pa.schema([*in_fields, *extra, stream.schema.field(gcol)])

        def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
            geoms = geometries(batch)
            if predicate == "nearest":
                assert dist is not None
                i, j, d = nearest_pairs(geoms, tree, tree_geoms, dist, max_distance)
            else:
                i, j = tree.query(geoms, predicate=predicate)
                order = np.lexsort((j, i))
                i, j, d = i[order], j[order], np.zeros(len(i))
            counter["features"] += batch.num_rows
            counter["matched"] += len(np.unique(i))
            base = batch.drop_columns([gcol]) if gcol else batch
            if spec:
                agg = Aggregator(spec)
                agg.add(i, other.table.take(pa.array(j)) if agg.fields else None)
                rows = np.arange(batch.num_rows)
                keep = rows if how == "left" else np.unique(i)
                stats = agg.result(keep, types=other.table.schema)
                cols = [*base.take(pa.array(keep)).columns, *stats.columns]
                if distance_field:
                    best = np.full(batch.num_rows, np.inf)
                    np.minimum.at(best, i, d)
                    cols.append(pa.array(best[keep], mask=~np.isfinite(best[keep])))
                cols.append(batch.column(gcol).take(pa.array(keep)))
                return pa.RecordBatch.from_arrays([_chunk(c) for c in cols], schema=schema)
            if how == "left":
                missing = np.setdiff1d(np.arange(batch.num_rows), i)
                i = np.concatenate([i, missing])
                j = np.concatenate([j, np.full(len(missing), -1)])
                d = np.concatenate([d, np.full(len(missing), np.nan)])
                order = np.argsort(i, kind="stable")
                i, j, d = i[order], j[order], d[order]
            right = other.table.take(pa.array(j, mask=j < 0)) if len(join_fields) else None
            cols = [*base.take(pa.array(i)).columns, *(right.columns if right is not None else [])]
            if distance_field:
                cols.append(pa.array(d, mask=j < 0))
            cols.append(batch.column(gcol).take(pa.array(i)))
            return pa.RecordBatch.from_arrays([_chunk(c) for c in cols], schema=schema)

        def run() -> None:
            batches = relay(stream.batches, stream.total, share(progress, 0.05, 0.97), "joined", transform)
            write_layer(
                dst,
                schema,
                batches,
                driver=driver,
                layer=out_name,
                crs=crs,
                geometry_type=_output_geometry_type(info),
                layer_options=LAYER_OPTIONS.get(driver),
            )

        write_guarded(dst, run)
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    if counter["matched"] == 0 and counter["features"]:
        warnings.append(_no_match_note(predicate, src, join, max_distance, units))
    return summary, warnings


def _chunk(c: Any) -> pa.Array:
    return c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c


def _arrow_types(info: dict[str, Any]) -> list[pa.DataType | None]:
    """Arrow types of pyogrio's field dtypes (numbers numeric, text text), for parse_aggregate's checks."""
    out: list[pa.DataType | None] = []
    for dtype in info.get("dtypes", []):
        text = str(dtype)
        if text.startswith(("int", "uint")):
            out.append(pa.int64())
        elif text.startswith("float"):
            out.append(pa.float64())
        elif text == "bool":
            out.append(pa.bool_())
        elif text == "object":
            out.append(pa.string())
        else:
            out.append(None)
    return out


def _reprojection_notes(other: Loaded, crs: str | None, warnings: list[str]) -> None:
    if other.unplaced:
        warnings.append(
            f"{other.unplaced} join feature(s) could not be placed in the input layer's CRS (outside the "
            "projection's area) and were left out of the join"
        )
    if (other.crs is None) != (crs is None):
        warnings.append("one layer has no CRS: its coordinates were taken as being in the other's CRS")


def _no_match_note(predicate: str, src: str, join: str, max_distance: float | None, units: str) -> str:
    extra = f" within {max_distance:g} {units}" if max_distance is not None else ""
    return (
        f"no input feature matched any join feature ({predicate}{extra}): check that both layers cover the same "
        "area (vector_info shows their extents and CRSs)"
    )


def _aggregate_streaming_join(
    src: str,
    dst: str,
    name: str,
    info: dict[str, Any],
    join: str,
    jname: str,
    predicate: str,
    how: str,
    spec: list[tuple[str, str, str]],
    driver: str,
    out_name: str,
    progress: Progress,
    warnings: list[str],
) -> tuple[VectorSummary, list[str]]:
    """Aggregate when the join layer is the larger: the input is indexed, the join layer streamed."""
    import shapely

    crs = info.get("crs")
    mine = load_layer(src, name, target_crs=None)
    geoms = mine.geoms if mine.geoms is not None else np.zeros(0, dtype=object)
    tree = shapely.STRtree(geoms)
    progress(0.05, f"indexed {len(geoms)} input features")
    agg = Aggregator(spec)
    jinfo_crs = layer_info(join, jname)[1].get("crs")
    trans = transformer(jinfo_crs, crs)
    unplaced = 0
    columns = list(agg.fields)
    with read_layer(join, layer=jname, columns=columns, batch_size=READ_BATCH) as stream:
        types = stream.schema
        for batch in relay(stream.batches, stream.total, share(progress, 0.05, 0.9), "joined"):
            g = geometries(batch)
            if trans is not None:
                g, bad = reproject_geometries(g, trans)
                g[bad] = None
                unplaced += int(bad.sum())
            j, i = tree.query(g, predicate=CONVERSE[predicate])
            agg.add(i, batch.take(pa.array(j)) if agg.fields else None)
    if unplaced:
        warnings.append(f"{unplaced} join feature(s) could not be placed in the input layer's CRS and were left out")
    if (jinfo_crs is None) != (crs is None):
        warnings.append("one layer has no CRS: its coordinates were taken as being in the other's CRS")
    rows = np.arange(len(geoms))
    stats = agg.result(rows, types=types)
    if how == "inner":
        keep = np.array(sorted(k for k in agg.keys), dtype=np.int64)
        stats = stats.take(pa.array(np.searchsorted(rows, keep)))
        rows = keep
    base = mine.table.take(pa.array(rows))
    clash = set(base.column_names) & set(stats.column_names)
    stats = stats.rename_columns([f"{n}_right" if n in clash else n for n in stats.column_names])
    gfield = pa.field("geometry", pa.binary(), metadata={b"ARROW:extension:name": b"geoarrow.wkb"})
    wkb = shapely.to_wkb(geoms[rows], flavor="iso", output_dimension=4) if len(rows) else np.array([], dtype=object)
    schema = pa.schema([*base.schema, *stats.schema, gfield])
    table = pa.Table.from_arrays([*base.columns, *stats.columns, pa.array(list(wkb), type=pa.binary())], schema=schema)

    def batches() -> Iterator[pa.RecordBatch]:
        yield from table.to_batches(max_chunksize=BATCH_SIZE)

    progress(0.9, f"writing {len(rows)} features")
    write_guarded(
        dst,
        lambda: write_layer(
            dst,
            schema,
            batches(),
            driver=driver,
            layer=out_name,
            crs=crs,
            geometry_type=_output_geometry_type(info),
            layer_options=LAYER_OPTIONS.get(driver),
        ),
    )
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    if not agg.keys and len(geoms):
        warnings.append(_no_match_note(predicate, src, join, None, ""))
    return summary, warnings


def _attribute_join(
    src: str,
    dst: str,
    name: str,
    info: dict[str, Any],
    join: str,
    join_layer: str | None,
    on: str | list[str],
    how: str,
    aggregate: dict[str, Any] | None,
    driver: str,
    out_name: str,
    progress: Progress,
) -> tuple[VectorSummary, list[str]]:
    """A join by key: the table (the join side, held whole) matched to the streamed input by equal keys."""
    if isinstance(on, str):
        left_key = right_key = on
    elif isinstance(on, (list, tuple)) and len(on) == 2 and all(isinstance(k, str) for k in on):
        left_key, right_key = on
    else:
        raise GdalMcpError("invalid-argument", 'on must be a field name or ["input_field", "join_field"]')
    if left_key not in info["fields"]:
        raise GdalMcpError(
            "not-found", f"input layer '{name}' has no field {left_key!r}; fields are: {', '.join(info['fields'])}"
        )
    other = load_layer(join, join_layer, target_crs=None, read_geometry=False, table=True)
    if right_key not in other.table.column_names:
        raise GdalMcpError(
            "not-found", f"the join table has no field {right_key!r}; fields are: {', '.join(other.table.column_names)}"
        )
    warnings: list[str] = []
    table = other.table
    spec = parse_aggregate(aggregate, table.schema) if aggregate is not None else []
    right_type = table.schema.field(right_key).type
    right_values = table.column(right_key).to_pylist()
    crs = info.get("crs")
    counts = {"features": 0, "matched": 0}
    used_rows = np.zeros(table.num_rows, dtype=bool)
    compare: dict[str, Any] = {"convert": None}

    with read_layer(src, layer=name, batch_size=READ_BATCH) as stream:
        gcol = stream.geometry_column
        left_type = stream.schema.field(left_key).type
        lk, rk = _kind(left_type), _kind(right_type)
        if lk != rk and {lk, rk} <= {"integer", "real"}:
            right_values = _normal(right_values)
        elif lk != rk and "text" in (lk, rk) and ({lk, rk} - {"text"}) <= {"integer", "real"}:
            if rk == "text":
                right_values, bad = _text_to_number(right_values, lk == "integer")
                compare["convert"] = None
                where = f"the join table's {right_key!r}"
            else:
                bad = 0
                compare["convert"] = lk
                where = f"the input's {left_key!r}"
            warnings.append(
                f"key types differ: {left_key!r} is {lk} in the input and {right_key!r} is {rk} in the join "
                f'table; the text keys ({where}) were read as numbers to match them ("7" = 7)'
                + (f"; {bad} text key(s) are not numbers and match nothing" if bad else "")
            )
        elif lk != rk:
            warnings.append(
                f"key types differ: {left_key!r} is {lk} in the input and {right_key!r} is {rk} in the "
                "join table; keys are compared as they are, so few may match"
            )
        index: dict[Any, list[int]] = {}
        for r, v in enumerate(right_values):
            if v is not None:
                index.setdefault(v, []).append(r)
        duplicates = sum(1 for rows in index.values() if len(rows) > 1)
        in_fields = [f for f in stream.schema if f.name != gcol]
        if spec:
            extra = Aggregator(spec).output_schema(table.schema)
            clash = {f.name for f in in_fields} & {f.name for f in extra}
            extra = [pa.field(f"{f.name}_right" if f.name in clash else f.name, f.type) for f in extra]
        else:
            right_fields = [f for f in table.schema if not (f.name == right_key and left_key == right_key)]
            left_names, right_names = _rename([f.name for f in in_fields], [f.name for f in right_fields], ("_left", "_right"))
            in_fields = [pa.field(n, f.type) for n, f in zip(left_names, in_fields, strict=True)]
            extra = [pa.field(n, f.type) for n, f in zip(right_names, right_fields, strict=True)]
            table = table.select([f.name for f in right_fields])
        schema = pa.schema([*in_fields, *extra, *([stream.schema.field(gcol)] if gcol else [])])

        def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
            keys = batch.column(left_key).to_pylist()
            if compare["convert"]:
                keys, _ = _text_to_number(keys, compare["convert"] == "integer")
            else:
                keys = _normal(keys) if lk in ("integer", "real") else keys
            ii: list[int] = []
            jj: list[int] = []
            for n, k in enumerate(keys):
                rows = index.get(k) if k is not None else None
                if rows:
                    ii.extend([n] * len(rows))
                    jj.extend(rows)
                elif how == "left" and not spec:
                    ii.append(n)
                    jj.append(-1)
            i, j = np.asarray(ii, dtype=np.int64), np.asarray(jj, dtype=np.int64)
            counts["features"] += batch.num_rows
            counts["matched"] += len(np.unique(i[j >= 0]))
            used_rows[j[j >= 0]] = True
            base = batch.drop_columns([gcol]) if gcol else batch
            if spec:
                hit = j >= 0
                agg = Aggregator(spec)
                agg.add(i[hit], table.take(pa.array(j[hit])) if agg.fields else None)
                keep = np.arange(batch.num_rows) if how == "left" else np.unique(i[hit])
                stats = agg.result(keep, types=table.schema)
                cols = [*base.take(pa.array(keep)).columns, *stats.columns]
                if gcol:
                    cols.append(batch.column(gcol).take(pa.array(keep)))
                return pa.RecordBatch.from_arrays([_chunk(c) for c in cols], schema=schema)
            right = table.take(pa.array(j, mask=j < 0))
            cols = [*base.take(pa.array(i)).columns, *right.columns]
            if gcol:
                cols.append(batch.column(gcol).take(pa.array(i)))
            return pa.RecordBatch.from_arrays([_chunk(c) for c in cols], schema=schema)

        def run() -> None:
            batches = relay(stream.batches, stream.total, share(progress, 0.05, 0.97), "joined", transform)
            write_layer(
                dst,
                schema,
                batches,
                driver=driver,
                layer=out_name,
                crs=crs if gcol else None,
                geometry_type=_output_geometry_type(info),
                layer_options=LAYER_OPTIONS.get(driver),
            )

        write_guarded(dst, run)
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    unmatched = counts["features"] - counts["matched"]
    if unmatched:
        warnings.append(
            f"{unmatched} of {counts['features']} input feature(s) have no matching key in the join table"
            + (" and were left out (how='inner')" if how == "inner" else " (their joined fields are null)")
        )
    unused = int((~used_rows).sum())
    if unused:
        warnings.append(f"{unused} of {table.num_rows} join table row(s) matched no input feature")
    if duplicates and not spec:
        warnings.append(
            f"{duplicates} key(s) appear more than once in the join table: an input feature gets one output "
            "feature per matching row (use aggregate to summarise them instead)"
        )
    return summary, warnings
