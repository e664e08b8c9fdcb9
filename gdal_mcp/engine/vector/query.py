"""Rows for a model (vector_query): an SQL SELECT, or where / group_by / aggregate / order_by over one layer,
answered directly, one page at a time, no file written.

Streamed with pyogrio's Arrow reader; memory is bounded by the page: a plain page skips `offset` features in GDAL
and stops after `limit`; order_by keeps only the best offset + limit rows while it scans; group_by holds one row of
statistics per group (the Aggregator of vector_join and vector_dissolve). Totals are given when they cost little
(the layer's feature count, a scan already done, or a count of at most COUNT_CAP rows after the page).

Geometry is off by default; with geometry="wkt" or "geojson" each row carries its shape under "geometry", and a
page holds at most BUDGET characters of them (the largest are left out beyond that, and a warning says so).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.aggregate import Aggregator, parse_aggregate
from gdal_mcp.engine.vector.info import json_value
from gdal_mcp.engine.vector.opening import choose_layer, list_layers
from gdal_mcp.engine.vector.stream import BATCH_SIZE, LayerStream, geometry_column, read_layer, refuse_overflow, relay
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import QueryResult

GeometryFormat = Literal["none", "wkt", "geojson"]
MAX_LIMIT = 1000
COUNT_CAP = 100_000  # rows counted after the page when the total is not known otherwise
SORT_CAP = 100_000  # offset + limit rows kept while ordering a scan
BUDGET = 200_000  # characters of geometry in one page
DEFAULT_AGGREGATE = {"*": ["count"]}


def _order_keys(order_by: list[str] | None) -> list[tuple[str, str]]:
    """[(column, 'ascending' | 'descending')] from ["pop DESC", "name"]."""
    keys: list[tuple[str, str]] = []
    for item in order_by or []:
        words = str(item).strip().split()
        if not words:
            raise GdalMcpError("invalid-argument", 'order_by holds an empty item; give column names, e.g. ["pop DESC"]')
        direction = "ascending"
        if len(words) > 1 and words[-1].upper() in ("ASC", "DESC"):
            direction = "descending" if words[-1].upper() == "DESC" else "ascending"
            words = words[:-1]
        keys.append((" ".join(words), direction))
    return keys


def _check_columns(keys: list[tuple[str, str]], columns: list[str]) -> None:
    missing = [k for k, _ in keys if k not in columns]
    if missing:
        raise GdalMcpError(
            "not-found",
            f"order_by names {', '.join(map(repr, missing))}, which the rows do not have; columns: {', '.join(columns)}",
        )


def _type_name(t: pa.DataType) -> str:
    checks = (
        (pa.types.is_boolean, "boolean"),
        (pa.types.is_integer, "integer"),
        (pa.types.is_floating, "float"),
        (pa.types.is_decimal, "decimal"),
        (lambda x: pa.types.is_string(x) or pa.types.is_large_string(x), "text"),
        (pa.types.is_date, "date"),
        (pa.types.is_timestamp, "datetime"),
        (pa.types.is_time, "time"),
        (lambda x: pa.types.is_binary(x) or pa.types.is_large_binary(x), "binary"),
        (lambda x: pa.types.is_list(x) or pa.types.is_large_list(x), "list"),
    )
    return next((name for check, name in checks if check(t)), str(t))


def _page(
    table: pa.Table, geometry: GeometryFormat, crs: Any, notes: list[str]
) -> tuple[dict[str, str], list[dict[str, Any]], str | None]:
    """(columns, rows, crs label) of a page; the geometry column becomes 'geometry' in the chosen form."""
    gcol = geometry_column(table.schema)
    attrs = [f for f in table.schema if f.name != gcol]
    columns = {f.name: _type_name(f.type) for f in attrs}
    data = table.select([f.name for f in attrs]).to_pylist() if attrs else [{} for _ in range(table.num_rows)]
    rows = [{k: json_value(v) for k, v in r.items()} for r in data]
    if geometry == "none" or gcol is None:
        if geometry != "none":
            notes.append("the rows have no geometry column")
        return columns, rows, None
    import shapely

    key = "geometry" if "geometry" not in columns else "_geometry"
    geoms = shapely.from_wkb(table.column(gcol).to_numpy(zero_copy_only=False))
    texts = shapely.to_wkt(geoms, rounding_precision=-1) if geometry == "wkt" else shapely.to_geojson(geoms)
    sizes = np.array([len(t) if t is not None else 0 for t in texts], dtype=np.int64)
    left_out = 0
    for i in (int(i) for i in np.argsort(-sizes, kind="stable")):
        if sizes.sum() <= BUDGET:
            break
        texts[i], sizes[i] = None, 0
        rows[i][f"{key}_omitted"] = f"{geoms[i].geom_type} with {shapely.get_num_coordinates(geoms[i])} vertices"
        left_out += 1
    if left_out:
        notes.append(
            f"{left_out} geometries were left out to keep the page under ~{BUDGET} characters; ask for fewer rows "
            "(limit), or read the shapes with vector_features (geometry_mode='simplified')"
        )
    for row, text in zip(rows, texts, strict=True):
        row[key] = None if text is None else (text if geometry == "wkt" else json.loads(text))
    return columns, rows, crs_label(crs)


def _crs(stream: LayerStream) -> Any:
    from pyproj import CRS

    return CRS.from_user_input(stream.crs) if stream.crs else None


def _collect(batches: Any, n: int) -> tuple[list[pa.RecordBatch], int]:
    """The first `n` rows of `batches` (as batches) and how many rows were read in all (stops at n + 1)."""
    out: list[pa.RecordBatch] = []
    got = 0
    for batch in batches:
        out.append(batch)
        got += batch.num_rows
        if got > n:
            break
    return out, got


def _table(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def _select(table: pa.Table, fields: list[str] | None) -> pa.Table:
    """`fields` in the order asked for (the geometry column kept), the others dropped."""
    if fields is None:
        return table
    gcol = geometry_column(table.schema)
    return table.select([*dict.fromkeys(fields), *([gcol] if gcol else [])])


def _count(batches: Any, cap: int) -> int | None:
    """Rows in `batches`, or None beyond `cap`."""
    n = 0
    for batch in batches:
        n += batch.num_rows
        if n > cap:
            return None
    return n


def _result(
    table: pa.Table,
    *,
    offset: int,
    limit: int,
    total: int | None,
    more: bool | None,
    geometry: GeometryFormat,
    crs: Any,
    layer: str | None,
    notes: list[str],
) -> QueryResult:
    page = table.slice(0, limit)
    columns, rows, label = _page(page, geometry, crs, notes)
    remaining = max(total - offset - len(rows), 0) if total is not None else None
    truncated = bool(remaining) if remaining is not None else bool(more)
    if total is None:
        notes.append(f"more than {COUNT_CAP} rows follow this page: the total was not counted")
    return QueryResult(
        layer=layer,
        columns=columns,
        rows=rows,
        offset=offset,
        total=total,
        truncated=truncated,
        remaining=remaining,
        crs=label,
        warnings=notes,
    )


def _check(limit: int, offset: int, geometry: str) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise GdalMcpError("invalid-argument", f"limit must be 1..{MAX_LIMIT} (got {limit}); page with offset")
    if not isinstance(offset, int) or offset < 0:
        raise GdalMcpError("invalid-argument", f"offset must be >= 0 (got {offset})")
    if geometry not in ("none", "wkt", "geojson"):
        raise GdalMcpError("invalid-argument", f"geometry must be none, wkt or geojson (got {geometry!r})")


@wrap_gdal_errors
def query(
    src: str,
    *,
    sql: str | None = None,
    sql_dialect: str | None = None,
    layer: str | None = None,
    where: str | None = None,
    fields: list[str] | None = None,
    group_by: list[str] | None = None,
    aggregate: dict[str, list[str]] | None = None,
    order_by: list[str] | None = None,
    limit: int = 100,
    offset: int = 0,
    geometry: GeometryFormat = "none",
    progress: Progress = no_progress,
) -> QueryResult:
    """A page of rows: of `sql` (one read-only SELECT, OGRSQL or SQLITE dialect), or of one layer filtered by
    `where`, with `fields`, or grouped by `group_by` with `aggregate` statistics (default a count per group),
    ordered by `order_by` ("field" or "field DESC"). See the module docstring for what is bounded and counted."""
    _check(limit, offset, geometry)
    notes: list[str] = []
    if sql is not None:
        given = [
            n
            for n, v in (
                ("layer", layer),
                ("where", where),
                ("fields", fields),
                ("group_by", group_by),
                ("aggregate", aggregate),
                ("order_by", order_by),
            )
            if v
        ]
        if given:
            raise GdalMcpError(
                "invalid-argument",
                f"sql selects, filters, groups and orders by itself: give {', '.join(given)} inside it (WHERE, GROUP BY, "
                "ORDER BY) or leave sql out",
            )
        return _sql(src, sql, sql_dialect, limit, offset, geometry, notes, progress)
    if sql_dialect is not None and sql_dialect.upper() != "OGRSQL":
        raise GdalMcpError("invalid-argument", "sql_dialect applies to sql; give sql too")
    name = choose_layer(src, layer, list_layers(src))
    if group_by or aggregate:
        if geometry != "none":
            raise GdalMcpError(
                "invalid-argument",
                "grouped rows have no geometry: leave geometry out, or merge the shapes per group with vector_dissolve",
            )
        if fields is not None:
            raise GdalMcpError(
                "invalid-argument",
                "with group_by the rows are the group_by fields and the aggregate statistics: leave fields out",
            )
        return _groups(src, name, where, group_by or [], aggregate or DEFAULT_AGGREGATE, order_by, limit, offset, notes, progress)
    if order_by:
        return _sorted(src, name, where, fields, order_by, limit, offset, geometry, notes, progress)
    return _plain(src, name, where, fields, limit, offset, geometry, notes, progress)


def _sql(
    src: str,
    sql: str,
    dialect: str | None,
    limit: int,
    offset: int,
    geometry: GeometryFormat,
    notes: list[str],
    progress: Progress,
) -> QueryResult:
    with read_layer(
        src,
        sql=sql,
        sql_dialect=dialect,
        read_geometry=geometry != "none",
        count=False,
        skip_features=offset,
        batch_size=min(limit + 1, BATCH_SIZE),
    ) as s:
        progress(0.1, "running the query")
        kept, got = _collect(s.batches, limit)
        refuse_overflow(s)
        table = _table(kept, s.schema)
        total: int | None = offset + got
        if got > limit:
            progress(0.5, "counting the rows after this page")
            rest = _count(s.batches, COUNT_CAP)
            refuse_overflow(s)
            total = None if rest is None else offset + got + rest
        crs = _crs(s)
    if got == 0 and offset:  # past the last row: how many are there?
        with read_layer(src, sql=sql, sql_dialect=dialect, read_geometry=False, count=False) as c:
            total = _count(c.batches, offset + COUNT_CAP)
    progress(1.0, f"{min(got, limit)} rows")
    return _result(
        table, offset=offset, limit=limit, total=total, more=got > limit, geometry=geometry, crs=crs, layer=None, notes=notes
    )


def _plain(
    src: str,
    layer: str,
    where: str | None,
    fields: list[str] | None,
    limit: int,
    offset: int,
    geometry: GeometryFormat,
    notes: list[str],
    progress: Progress,
) -> QueryResult:
    with read_layer(
        src,
        layer=layer,
        where=where,
        columns=fields,
        read_geometry=geometry != "none",
        skip_features=offset,
        batch_size=min(limit + 1, BATCH_SIZE),
    ) as s:
        progress(0.1, "reading rows")
        kept, got = _collect(s.batches, limit)
        table, crs, total = _select(_table(kept, s.schema), fields), _crs(s), s.total
    if total is None and got <= limit and (got or not offset):
        total = offset + got  # the page reached the last row
    elif total is None:
        # A filtered layer: count the matching rows after the page (or, past the last row, from the start).
        start = offset + limit if got else 0
        progress(0.5, "counting the matching rows")
        with read_layer(src, layer=layer, where=where, columns=[], read_geometry=False, count=False, skip_features=start) as c:
            rest = _count(c.batches, COUNT_CAP)
        total = None if rest is None else start + rest
    progress(1.0, f"{min(got, limit)} rows")
    return _result(
        table, offset=offset, limit=limit, total=total, more=got > limit, geometry=geometry, crs=crs, layer=layer, notes=notes
    )


def _top(table: pa.Table, keys: list[tuple[str, str]], n: int) -> pa.Table:
    """The first `n` rows of `table` in the order of `keys` (stable: ties keep the layer's order; nulls last)."""
    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table, sort_keys=keys, null_placement="at_end")
    return table.take(order.slice(0, n))


def _sorted(
    src: str,
    layer: str,
    where: str | None,
    fields: list[str] | None,
    order_by: list[str],
    limit: int,
    offset: int,
    geometry: GeometryFormat,
    notes: list[str],
    progress: Progress,
) -> QueryResult:
    keys = _order_keys(order_by)
    keep = offset + limit
    if keep > SORT_CAP:
        raise GdalMcpError(
            "invalid-argument",
            f"order_by pages reach at most row {SORT_CAP} (offset + limit = {keep}); narrow the rows with where, or "
            "reverse the order (DESC) to read the end",
        )
    columns = None if fields is None else list(dict.fromkeys([*fields, *(k for k, _ in keys)]))
    seen = 0
    best: pa.Table | None = None
    with read_layer(src, layer=layer, where=where, columns=columns, read_geometry=geometry != "none") as s:
        _check_columns(keys, [f.name for f in s.schema])
        for batch in relay(s.batches, s.total, progress, "ordered"):
            seen += batch.num_rows
            t = pa.Table.from_batches([batch], schema=s.schema)
            best = t if best is None else pa.concat_tables([best, t])
            if best.num_rows > max(2 * keep, BATCH_SIZE):
                best = _top(best, keys, keep)
        table, crs = (best if best is not None else s.schema.empty_table()), _crs(s)
    table = _select(_top(table, keys, keep).slice(offset), fields)
    return _result(table, offset=offset, limit=limit, total=seen, more=None, geometry=geometry, crs=crs, layer=layer, notes=notes)


def _groups(
    src: str,
    layer: str,
    where: str | None,
    group_by: list[str],
    aggregate: dict[str, list[str]],
    order_by: list[str] | None,
    limit: int,
    offset: int,
    notes: list[str],
    progress: Progress,
) -> QueryResult:
    group_by = list(dict.fromkeys(group_by))
    wanted = [f for f in aggregate if f != "*"]
    with read_layer(src, layer=layer, where=where, columns=list(dict.fromkeys([*group_by, *wanted])), read_geometry=False) as s:
        spec = parse_aggregate(aggregate, s.schema)
        clash = [name for _, _, name in spec if name in group_by]
        if clash:
            raise GdalMcpError("invalid-argument", f"aggregate output {clash[0]!r} is also a group_by field; rename the field")
        agg = Aggregator(spec)
        for batch in relay(s.batches, s.total, progress, "grouped"):
            if not group_by:
                keys: Any = np.zeros(batch.num_rows, dtype=np.int64)
            elif len(group_by) == 1:
                keys = batch.column(group_by[0]).to_pylist()
            else:
                keys = list(zip(*(batch.column(c).to_pylist() for c in group_by), strict=True))
            agg.add(keys, batch)
        schema = s.schema
    if not group_by:  # one row for the whole layer, also when nothing matched (count 0)
        stats = agg.result(np.zeros(1, dtype=np.int64), types=schema)
        table = stats
    else:
        stats = agg.result(types=schema)
        arrays = [
            pa.array([k if len(group_by) == 1 else k[j] for k in agg.keys], type=schema.field(c).type)
            for j, c in enumerate(group_by)
        ]
        table = pa.Table.from_arrays([*arrays, *stats.columns], names=[*group_by, *stats.column_names])
    keys = _order_keys(order_by) or [(c, "ascending") for c in group_by]
    _check_columns(keys, table.column_names)
    if keys:
        table = _top(table, keys, table.num_rows)
    total = table.num_rows
    return _result(
        table.slice(offset),
        offset=offset,
        limit=limit,
        total=total,
        more=None,
        geometry="none",
        crs=None,
        layer=layer,
        notes=notes,
    )
