"""Joins: attributes of a second layer added to the features of the first (geopandas.sjoin / sjoin_nearest,
a table join by key), or statistics of the matching features (point-in-polygon counts, sums per zone).

Spatial joins stream one layer in batches against an STRtree (shapely 2) of the other, held whole in memory:
- without `aggregate`: `input` is streamed and `join` is the indexed one (so `join` should be the smaller);
- with `aggregate` (not nearest): the smaller layer is indexed and the larger streamed, so a million points
  counted in a few thousand polygons cost the polygons' memory plus one batch.
The join layer is reprojected to the input's CRS. Predicates read as geopandas': `within` = the input feature
lies within the join feature, `contains` = it contains it. Field names found on both sides get the suffixes
`_left` / `_right`, as geopandas.sjoin, compared without case (OGR's formats take `name` and `NAME` for one field).
`nearest` gives the k nearest join features (one row each, with their distance and, for k > 1, rank; ties kept,
as sjoin_nearest does); on a geographic layer the distance is geodesic between the features' nearest points
(engine/vector/nearest.py). `aggregate` takes count_by: one count per value of a join-layer field.
An attribute join (`on`) reads the table (CSV types detected, XLSX, GPKG …) and matches keys; keys of different
types (integer and text) are refused before anything is written, unless key_cast says how to compare them.
"""

from __future__ import annotations

import math
import warnings as pywarnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import gdal_message, wrap_gdal_errors
from gdal_mcp.engine.geometry_transform import reproject_geometries, transformer
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.aggregate import Aggregator, categories, parse_aggregate
from gdal_mcp.engine.vector.layer_map import share, write_guarded
from gdal_mcp.engine.vector.nearest import Nearest, plan_distances
from gdal_mcp.engine.vector.opening import choose_layer
from gdal_mcp.engine.vector.stream import (
    BATCH_SIZE,
    LAYER_OPTIONS,
    geometries,
    geometry_column,
    output_layer_name,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    write_layer,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import JoinResult, NearestInfo, VectorSummary

PREDICATES = ("intersects", "within", "contains", "nearest")
# The same relation seen from the other layer (when the input is the indexed one).
CONVERSE = {"intersects": "intersects", "within": "contains", "contains": "within"}
# How key_cast compares keys of different types.
KEY_CASTS = ("number", "text")
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
            raise GdalMcpError("gdal-error", f"cannot read layer '{name}' of {Path(path).name}: {gdal_message(e)}") from None
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
    """Field names of both sides with the suffixes added to the names they share, whatever their case: GPKG,
    shapefile, GeoJSON and OGR's other formats take `name` and `NAME` for one field."""
    both = {n.lower() for n in left} & {n.lower() for n in right}
    return (
        [f"{n}{suffixes[0]}" if n.lower() in both else n for n in left],
        [f"{n}{suffixes[1]}" if n.lower() in both else n for n in right],
    )


def _output_geometry_type(info: dict[str, Any]) -> str:
    return info.get("geometry_type") or "Unknown"


# ---------------------------------------------------------------------------------------------- keys


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "real"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    return str(t)


def _as_number(values: list[Any]) -> list[Any]:
    """Keys as numbers (key_cast="number"): text read as a number ("7" -> 7, " 7.0" -> 7), None if it is not one."""
    out: list[Any] = []
    for v in values:
        if v is None or isinstance(v, (int, float)):
            out.append(v)
            continue
        try:
            out.append(float(str(v).strip()))
        except ValueError:
            out.append(None)
    return _normal(out)


def _as_text(values: list[Any]) -> list[Any]:
    """Keys as text (key_cast="text"): 7 and 7.0 -> "7", 7.5 -> "7.5", dates in ISO form."""
    return [None if v is None else str(v) for v in _normal(values)]


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
    k: int = 1,
    how: str = "left",
    aggregate: dict[str, Any] | None = None,
    distance_field: str | None = None,
    key_cast: str | None = None,
    layer: str | None = None,
    join_layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[JoinResult, list[str]]:
    """Join the features of `join` to those of `src` (see the module docstring); write `dst`."""
    driver = vector_driver(dst, format)
    if predicate not in PREDICATES:
        raise GdalMcpError("invalid-argument", f"predicate must be one of {', '.join(PREDICATES)}")
    if how not in ("left", "inner"):
        raise GdalMcpError(
            "invalid-argument", "how must be 'left' (keep every input feature) or 'inner' (only those with a match)"
        )
    if on is None and predicate != "nearest" and (max_distance is not None or distance_field or k != 1):
        raise GdalMcpError("invalid-argument", "max_distance, k and distance_field go with predicate='nearest'")
    if on is not None and (predicate == "nearest" or max_distance is not None or distance_field or k != 1):
        raise GdalMcpError(
            "invalid-argument", "on= is an attribute join by key: it takes no nearest, k, max_distance or distance_field"
        )
    if key_cast is not None and (on is None or key_cast not in KEY_CASTS):
        raise GdalMcpError(
            "invalid-argument", f"key_cast ({', '.join(KEY_CASTS)}) goes with on=, when the two key fields' types differ"
        )
    if max_distance is not None and not (math.isfinite(max_distance) and max_distance >= 0):
        raise GdalMcpError("invalid-argument", "max_distance must be zero or a positive number")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise GdalMcpError("invalid-argument", f"k must be a whole number of neighbours, 1 or more (got {k!r})")
    name, info = layer_info(src, layer)
    out_name = output_layer_name(dst, output_layer)
    crs = info.get("crs")
    progress(0.0, "reading the join layer")
    warnings: list[str] = []
    if on is not None:
        summary, warnings = _attribute_join(
            src, dst, name, info, join, join_layer, on, how, aggregate, key_cast, driver, out_name, progress
        )
        return JoinResult(summary=summary), warnings
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
        spec = parse_aggregate(aggregate, dict(zip(jinfo["fields"], _arrow_types(jinfo), strict=True)), count_by=True)
        streamed_join = predicate != "nearest" and int(jinfo.get("features", -1)) > int(info.get("features", -1)) >= 0
        if streamed_join:
            summary, warnings = _aggregate_streaming_join(
                src, dst, name, info, join, jname, predicate, how, spec, driver, out_name, progress, warnings
            )
            return JoinResult(summary=summary), warnings
    else:
        spec = []
    other = load_layer(join, jname, target_crs=crs, columns=[s[0] for s in spec if s[0] != "*"] if spec else None)
    _reprojection_notes(other, crs, warnings)
    import shapely

    tree_geoms = other.geoms if other.geoms is not None else np.zeros(0, dtype=object)
    tree = shapely.STRtree(tree_geoms)
    nearest = Nearest(tree, tree_geoms, dist) if dist is not None else None
    progress(0.05, f"indexed {len(tree_geoms)} join features")
    counter = {"matched": 0, "features": 0}
    cats = categories(spec, other.table) if spec else {}

    with read_layer(src, layer=name, batch_size=READ_BATCH) as stream:
        gcol = stream.geometry_column
        in_fields = [f for f in stream.schema if f.name != gcol]
        join_fields = list(other.table.schema)
        if spec:
            extra = _suffix_clashes(in_fields, Aggregator(spec, cats).output_schema(other.table.schema))
        else:
            left_names, right_names = _rename([f.name for f in in_fields], [f.name for f in join_fields], ("_left", "_right"))
            in_fields = [pa.field(n, f.type) for n, f in zip(left_names, in_fields, strict=True)]
            extra = [pa.field(n, f.type) for n, f in zip(right_names, join_fields, strict=True)]
        info_out: NearestInfo | None = None
        if dist is not None:
            taken = {f.name.lower() for f in [*in_fields, *extra]}
            if distance_field and distance_field.lower() in taken:
                raise GdalMcpError(
                    "invalid-argument",
                    f"distance_field {distance_field!r} is already a field name (names are compared without case)",
                )
            dname = distance_field or _free_name(("distance", "nearest_distance"), taken)
            rname = _free_name(("rank", "nearest_rank"), taken | {dname.lower()}) if k > 1 and not spec else None
            extra = [*extra, pa.field(dname, pa.float64()), *([pa.field(rname, pa.int64())] if rname else [])]
            info_out = NearestInfo(distance_field=dname, rank_field=rname, units=units, method=dist.method, k=k)
        schema = pa.schema([*_unique_fields([*in_fields, *extra], warnings), stream.schema.field(gcol)])

        def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
            geoms = geometries(batch)
            if nearest is not None:
                i, j, d, rank = nearest.pairs(geoms, max_distance, k)
            else:
                i, j = tree.query(geoms, predicate=predicate)
                order = np.lexsort((j, i))
                i, j, d, rank = i[order], j[order], np.zeros(len(i)), np.ones(len(i), dtype=np.int64)
            counter["features"] += batch.num_rows
            counter["matched"] += len(np.unique(i))
            base = batch.drop_columns([gcol]) if gcol else batch
            if spec:
                agg = Aggregator(spec, cats)
                agg.add(i, other.table.take(pa.array(j)) if agg.fields else None)
                rows = np.arange(batch.num_rows)
                keep = rows if how == "left" else np.unique(i)
                stats = agg.result(keep, types=other.table.schema)
                cols = [*base.take(pa.array(keep)).columns, *stats.columns]
                if nearest is not None:
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
                rank = np.concatenate([rank, np.zeros(len(missing), dtype=np.int64)])
                order = np.argsort(i, kind="stable")
                i, j, d, rank = i[order], j[order], d[order], rank[order]
            right = other.table.take(pa.array(j, mask=j < 0)) if len(join_fields) else None
            cols = [*base.take(pa.array(i)).columns, *(right.columns if right is not None else [])]
            if info_out is not None:
                cols.append(pa.array(d, mask=j < 0))
                if info_out.rank_field:
                    cols.append(pa.array(rank, mask=j < 0))
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
    return JoinResult(summary=summary, nearest=info_out), warnings


def _free_name(wanted: tuple[str, ...], taken: set[str]) -> str:
    """The first of `wanted` not taken (lower-case names), else the first with a number."""
    for name in wanted:
        if name.lower() not in taken:
            return name
    i = 2
    while f"{wanted[0]}_{i}".lower() in taken:
        i += 1
    return f"{wanted[0]}_{i}"


def _unique_fields(fields: list[pa.Field], warnings: list[str]) -> list[pa.Field]:
    """The fields with names unique whatever their case (a later twin gets _2, _3 …: OGR's formats take `a_sum` and
    `A_sum` for one field), each renaming reported."""
    seen: set[str] = set()
    out = []
    for f in fields:
        name, i = f.name, 2
        while name.lower() in seen:
            name, i = f"{f.name}_{i}", i + 1
        if name != f.name:
            warnings.append(f"two output fields are named {f.name!r} (without regard to case): the second is written as {name!r}")
        seen.add(name.lower())
        out.append(pa.field(name, f.type))
    return out


def _suffix_clashes(in_fields: list[pa.Field], extra: list[pa.Field]) -> list[pa.Field]:
    """The join side's new fields, '_right' added to those named like an input field (whatever the case)."""
    clash = {f.name.lower() for f in in_fields}
    return [pa.field(f"{f.name}_right" if f.name.lower() in clash else f.name, f.type) for f in extra]


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
    stats = stats.rename_columns([f.name for f in _suffix_clashes(list(base.schema), list(stats.schema))])
    gfield = pa.field("geometry", pa.binary(), metadata={b"ARROW:extension:name": b"geoarrow.wkb"})
    wkb = shapely.to_wkb(geoms[rows], flavor="iso", output_dimension=4) if len(rows) else np.array([], dtype=object)
    schema = pa.schema([*_unique_fields([*base.schema, *stats.schema], warnings), gfield])
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
    key_cast: str | None,
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
    spec = parse_aggregate(aggregate, table.schema, count_by=True) if aggregate is not None else []
    cats = categories(spec, table)
    right_type = table.schema.field(right_key).type
    right_values = table.column(right_key).to_pylist()
    crs = info.get("crs")
    counts = {"features": 0, "matched": 0}
    used_rows = np.zeros(table.num_rows, dtype=bool)

    with read_layer(src, layer=name, batch_size=READ_BATCH) as stream:
        gcol = stream.geometry_column
        left_type = stream.schema.field(left_key).type
        lk, rk = _kind(left_type), _kind(right_type)
        convert: Callable[[list[Any]], list[Any]] = _normal if lk in ("integer", "real") else list
        if lk != rk and {lk, rk} <= {"integer", "real"}:
            right_values = _normal(right_values)
        elif lk != rk:
            what = f"input field {left_key!r} is {lk} ({left_type}) and join field {right_key!r} is {rk} ({right_type})"
            if key_cast is None:
                raise GdalMcpError(
                    "invalid-argument",
                    f"the join keys' types differ: {what}, and keys of different types never match. Pass "
                    "key_cast='number' to compare them as numbers (\"7\" = 7 = 7.0; text that is not a number matches "
                    'nothing) or key_cast=\'text\' to compare them as text (7 = "7", but "07" is not 7)',
                )
            if key_cast == "number" and not {lk, rk} <= {"integer", "real", "text"}:
                raise GdalMcpError("invalid-argument", f"key_cast='number' compares numbers and text, but {what}: use 'text'")
            convert = _as_number if key_cast == "number" else _as_text
            right_values = convert(right_values)
            bad = sum(
                1 for a, b in zip(table.column(right_key).to_pylist(), right_values, strict=True) if a is not None and b is None
            )
            warnings.append(
                f"key types differ: {what}; compared as {'numbers' if key_cast == 'number' else 'text'} (key_cast={key_cast!r})"
                + (f"; {bad} join key(s) are not numbers and match nothing" if bad else "")
            )
        index: dict[Any, list[int]] = {}
        for r, v in enumerate(right_values):
            if v is not None:
                index.setdefault(v, []).append(r)
        duplicates = sum(1 for rows in index.values() if len(rows) > 1)
        in_fields = [f for f in stream.schema if f.name != gcol]
        if spec:
            extra = _suffix_clashes(in_fields, Aggregator(spec, cats).output_schema(table.schema))
        else:
            right_fields = [f for f in table.schema if not (f.name == right_key and left_key == right_key)]
            left_names, right_names = _rename([f.name for f in in_fields], [f.name for f in right_fields], ("_left", "_right"))
            in_fields = [pa.field(n, f.type) for n, f in zip(left_names, in_fields, strict=True)]
            extra = [pa.field(n, f.type) for n, f in zip(right_names, right_fields, strict=True)]
            table = table.select([f.name for f in right_fields])
        schema = pa.schema([*_unique_fields([*in_fields, *extra], warnings), *([stream.schema.field(gcol)] if gcol else [])])

        def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
            keys = convert(batch.column(left_key).to_pylist())
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
                agg = Aggregator(spec, cats)
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
