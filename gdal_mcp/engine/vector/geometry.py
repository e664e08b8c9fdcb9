"""Buffer, simplify and dissolve, streamed batch by batch, with distances in safe units.

The pieces live by concern: `units` (where a distance is applied: layer units, a UTM zone or per-feature
AEQD), `geomtypes` (layer geometry types, keeping a feature's dimension), `layer_map` (the read -> map ->
write loop, `transform_layer`). Their names are re-exported here for the engines and tests that import them
from this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector import layer_map
from gdal_mcp.engine.vector.convert import promote as to_multi
from gdal_mcp.engine.vector.geomtypes import SINGLE_NAMES, GeomType, contains_multi, keep_dimension, layer_type
from gdal_mcp.engine.vector.layer_map import (
    LAYER_OPTIONS,
    LENIENT_DRIVERS,
    NO_INDEX_NOTE,
    MapResult,
    _geos_error,
    layer_meta,
    monotonic,
    promotion_note,
    share,
    transform_layer,
    write_guarded,
)
from gdal_mcp.engine.vector.stream import (
    BATCH_SIZE,
    geometries,
    output_layer_name,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    write_layer,
)
from gdal_mcp.engine.vector.units import LINEAR_UNITS, UNITS, Frame, layer_bounds, plan_units
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

__all__ = [
    "LAYER_OPTIONS",
    "LENIENT_DRIVERS",
    "LINEAR_UNITS",
    "SINGLE_NAMES",
    "UNITS",
    "Frame",
    "GeomType",
    "MapResult",
    "buffer",
    "contains_multi",
    "dissolve",
    "keep_dimension",
    "layer_bounds",
    "layer_meta",
    "layer_type",
    "monotonic",
    "plan_units",
    "promotion_note",
    "share",
    "simplify",
    "to_multi",
    "transform_layer",
    "write_guarded",
]
CAP_STYLES = ("round", "flat", "square")
JOIN_STYLES = {"round": "round", "mitre": "mitre", "miter": "mitre", "bevel": "bevel"}


# ---------------------------------------------------------------------------------------------- buffer


def _check_common(src: str, dst: str, format: str | None) -> str:
    return vector_driver(dst, format)


def _field_distances(src: str, name: str, field: str) -> float:
    """The largest |value| of a numeric distance field (a first pass over that column only)."""
    largest = 0.0
    with read_layer(src, layer=name, columns=[field], read_geometry=False, count=False) as stream:
        ftype = stream.schema.field(field).type
        if not (pa.types.is_integer(ftype) or pa.types.is_floating(ftype) or pa.types.is_decimal(ftype)):
            raise GdalMcpError("invalid-argument", f"distance_field {field!r} is {ftype}, not a number")
        for batch in stream.batches:
            values = batch.column(field).to_numpy(zero_copy_only=False).astype(np.float64)
            if len(values) and np.isfinite(values).any():
                largest = max(largest, float(np.nanmax(np.abs(values))))
    return largest


@wrap_gdal_errors
def buffer(
    src: str,
    dst: str,
    *,
    distance: float,
    units: str = "m",
    layer: str | None = None,
    segments: int = 8,
    cap_style: str = "round",
    join_style: str = "round",
    format: str | None = None,
    output_layer: str | None = None,
    dissolve: bool = False,
    distance_field: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Buffer every feature by `distance` `units` (negative shrinks polygons), attributes kept, like ST_Buffer.

    `segments` is the number of segments per quarter circle; cap_style round/flat/square (line ends),
    join_style round/mitre/bevel (corners). Features left empty (a negative buffer larger than the polygon)
    are written with a null geometry. `distance_field` takes each feature's distance from that numeric field
    (in `units`; `distance` is then ignored; a null distance leaves a null geometry). `dissolve` writes one
    feature, the union of all the buffers, without attributes (geopandas buffer().union_all()).
    """
    driver = _check_common(src, dst, format)
    if not isinstance(segments, int) or isinstance(segments, bool) or not 1 <= segments <= 1000:
        raise GdalMcpError("invalid-argument", "segments (per quarter circle) must be an integer from 1 to 1000")
    if cap_style not in CAP_STYLES:
        raise GdalMcpError("invalid-argument", f"cap_style must be one of {', '.join(CAP_STYLES)}")
    if join_style not in JOIN_STYLES:
        raise GdalMcpError("invalid-argument", "join_style must be one of round, mitre, bevel")
    name, crs, declared = layer_meta(src, layer)
    distance = float(distance)
    if distance_field is not None:
        distance = _field_distances(src, name, distance_field)
    if distance < 0 and declared.dim in (0, 1):
        raise GdalMcpError(
            "invalid-argument",
            f"a negative distance shrinks polygons, but layer '{name}' holds "
            f"{declared.name.split()[0]}s, which would all vanish; use a positive distance",
        )
    frame = plan_units(
        distance if distance else 1.0, units, crs, what="distance", verb="buffered", bounds=lambda: layer_bounds(src, name)
    )
    # Frame units per distance unit: a field's distances are scaled like the planned one.
    scale = frame.amount / (distance if distance else 1.0)
    import shapely

    counts = {"emptied": 0, "negative_lines": 0}

    def buffered(g: np.ndarray, amount: float) -> np.ndarray:
        return shapely.buffer(g, amount, quad_segs=segments, cap_style=cap_style, join_style=JOIN_STYLES[join_style])

    def op(geoms: np.ndarray, record: bool = True, batch: pa.RecordBatch | None = None) -> np.ndarray:
        if distance_field is None or batch is None:
            out = frame.apply(geoms, lambda g: buffered(g, frame.amount), record)
        else:
            values = batch.column(distance_field).to_numpy(zero_copy_only=False).astype(np.float64)
            out = np.full(len(geoms), None, dtype=object)
            dims = shapely.get_dimensions(geoms)
            if record:
                counts["negative_lines"] += int(((values < 0) & (dims < 2) & ~shapely.is_missing(geoms)).sum())
            for value in np.unique(values[np.isfinite(values)]):  # one vectorised call per distinct distance
                sel = values == value
                amount = float(value) * scale
                out[sel] = frame.apply(geoms[sel], lambda g: buffered(g, amount), record)  # noqa: B023 (called now)
        vanished = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms) & (shapely.is_missing(out) | shapely.is_empty(out))
        counts["emptied"] += int(vanished.sum()) if record else 0
        out = np.asarray(out, dtype=object)
        out[shapely.is_empty(out)] = None
        return out

    if dissolve:
        summary, notes = _buffer_union(
            src,
            dst,
            name=name,
            crs=crs,
            driver=driver,
            output_layer=output_layer,
            op=op,
            distance_field=distance_field,
            frame=frame,
            progress=progress,
        )
        return summary, notes + _field_notes(distance_field, distance, units, counts)
    out_type = GeomType(2, declared.multi and declared.dim is not None)
    result = transform_layer(
        src,
        dst,
        layer=name,
        driver=driver,
        output_layer=output_layer,
        crs=crs,
        declared=declared,
        out=out_type,
        op=op,
        drop_missing=False,
        split=distance <= 0 or distance_field is not None,
        progress=progress,
        verb="buffered",
        state=(counts, frame),
        pass_batch=distance_field is not None,
    )
    warnings = frame.final_notes("buffered") + promotion_note(declared, result)
    warnings += _field_notes(distance_field, distance, units, counts)
    if counts["emptied"]:
        warnings.append(
            f"{counts['emptied']} feature(s) vanished under the buffer (empty result) and were written with a null geometry"
        )
    return result.summary, warnings


def _field_notes(distance_field: str | None, largest: float, units: str, counts: dict[str, int]) -> list[str]:
    if distance_field is None:
        return []
    notes = [f"each feature was buffered by its {distance_field} value in {units} (largest {largest:g})"]
    if counts.get("negative_lines"):
        notes.append(f"{counts['negative_lines']} point or line feature(s) had a negative distance: they vanish (null geometry)")
    return notes


def _buffer_union(
    src: str,
    dst: str,
    *,
    name: str,
    crs: str | None,
    driver: str,
    output_layer: str | None,
    op: Any,
    distance_field: str | None,
    frame: Frame,
    progress: Progress,
) -> tuple[VectorSummary, list[str]]:
    """Buffer batch by batch and union everything into one feature (no attributes)."""
    import shapely

    acc: Any = None
    union_counts = {"repaired": 0}
    columns = [distance_field] if distance_field else []
    with read_layer(src, layer=name, columns=columns, batch_size=layer_map.READ_BATCH) as stream:
        geom_field = stream.schema.field(stream.geometry_column or "")
        for batch in relay(stream.batches, stream.total, share(progress, 0.0, 0.9), "buffered"):
            parts = np.asarray(op(geometries(batch), batch=batch), dtype=object)
            parts = parts[~shapely.is_missing(parts)]
            if len(parts):
                acc = _merge(acc, _union(parts, union_counts), union_counts)
    geom = acc if acc is not None and not acc.is_empty else None
    if geom is not None and geom.geom_type == "Polygon":
        geom = shapely.MultiPolygon([geom])
    schema = pa.schema([geom_field])
    wkb = [shapely.to_wkb(geom, output_dimension=3, flavor="iso") if geom is not None else None]
    batch = pa.RecordBatch.from_arrays([pa.array(wkb, type=geom_field.type)], schema=schema)
    out_name = output_layer_name(dst, output_layer)
    progress(0.9, "writing the union of the buffers")
    options = dict(LAYER_OPTIONS.get(driver, {}))
    write_guarded(
        dst,
        lambda: write_layer(
            dst,
            schema,
            iter([batch]),
            driver=driver,
            layer=out_name,
            crs=crs,
            geometry_type="MultiPolygon",
            layer_options=options,
        ),
    )
    summary = summarize_vector(dst, out_name)
    progress(1.0, "wrote 1 feature")
    notes = frame.final_notes("buffered")
    notes.append("dissolve=true: the buffers were unioned into one feature without attributes")
    if union_counts["repaired"]:
        notes.append(f"{union_counts['repaired']} buffer(s) were invalid and repaired (make_valid) before the union")
    return summary, notes


# ---------------------------------------------------------------------------------------------- simplify


@wrap_gdal_errors
def simplify(
    src: str,
    dst: str,
    *,
    tolerance: float,
    units: str = "m",
    preserve_topology: bool = True,
    layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    coverage: bool = False,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Simplify every feature (Douglas-Peucker) within `tolerance` `units`, attributes kept.

    preserve_topology (default) keeps polygons valid and never drops rings; without it, faster but results
    may be invalid and small parts may collapse (written with a null geometry). coverage: the polygons form a
    coverage (neighbours sharing edges, like countries or parcels): each shared edge is simplified once
    (shapely.coverage_simplify, Visvalingam-Whyatt, tolerance ≈ square root of the triangle areas removed), so
    no gaps or overlaps open between neighbours; the whole layer is held in memory for it.
    """
    driver = _check_common(src, dst, format)
    tolerance = float(tolerance)
    if not tolerance >= 0:
        raise GdalMcpError("invalid-argument", "tolerance must be zero or positive")
    name, crs, declared = layer_meta(src, layer)
    frame = plan_units(tolerance, units, crs, what="tolerance", verb="simplified", bounds=lambda: layer_bounds(src, name))
    import shapely

    counts = {"collapsed": 0, "invalid": 0}
    if coverage:
        return _coverage_simplify(
            src,
            dst,
            name=name,
            crs=crs,
            declared=declared,
            driver=driver,
            output_layer=output_layer,
            frame=frame,
            progress=progress,
        )

    def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
        out = np.asarray(
            frame.apply(
                geoms, lambda g: shapely.simplify(g, frame.amount, preserve_topology=preserve_topology), record, snap=True
            ),
            dtype=object,
        )
        had = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
        gone = had & (shapely.is_missing(out) | shapely.is_empty(out))
        out[gone] = None
        if not record:
            return out
        counts["collapsed"] += int(gone.sum())
        if not preserve_topology:
            counts["invalid"] += int((had & ~gone & ~shapely.is_valid(out)).sum())
        return out

    result = transform_layer(
        src,
        dst,
        layer=name,
        driver=driver,
        output_layer=output_layer,
        crs=crs,
        declared=declared,
        out=declared,
        op=op,
        drop_missing=False,
        split=not preserve_topology,
        progress=progress,
        verb="simplified",
        state=(counts, frame),
    )
    warnings = frame.final_notes("simplified") + promotion_note(declared, result)
    if counts["collapsed"]:
        warnings.append(f"{counts['collapsed']} feature(s) collapsed to nothing and were written with a null geometry")
    if counts["invalid"]:
        warnings.append(
            f"{counts['invalid']} feature(s) became invalid (self-intersections) because "
            "preserve_topology is false; use preserve_topology=true or fix them with validate"
        )
    return result.summary, warnings


# Metres per degree along the equator (GRS80/WGS84): how a tolerance in metres becomes degrees when a world-wide
# layer must be simplified in one frame.
METRES_PER_DEGREE = 111_319.49


def _coverage_simplify(
    src: str,
    dst: str,
    *,
    name: str,
    crs: str | None,
    declared: GeomType,
    driver: str,
    output_layer: str | None,
    frame: Frame,
    progress: Progress,
) -> tuple[VectorSummary, list[str]]:
    """coverage=true: every polygon simplified together (one frame), then written in the order read."""
    import shapely

    if declared.dim != 2:
        raise GdalMcpError(
            "invalid-argument", f"coverage=true simplifies polygons, but layer '{name}' holds {declared.name}; use coverage=false"
        )
    notes: list[str] = []
    if frame.kind == "aeqd":
        # One frame for all: the edges two neighbours share must be simplified in the same coordinates.
        frame = Frame("layer", frame.amount / METRES_PER_DEGREE / frame.deg_per_unit)
        notes.append(
            f"the layer is geographic and spans too wide an area for one projection, so the coverage was "
            f"simplified in degrees (tolerance {frame.amount:.6g}°, from 1° = {METRES_PER_DEGREE / 1000:.2f} "
            "km at the equator; less east-west away from it)"
        )
    chunks = []
    with read_layer(src, layer=name, columns=[], batch_size=layer_map.READ_BATCH) as stream:
        for batch in relay(stream.batches, stream.total, share(progress, 0.0, 0.3), "read"):
            chunks.append(geometries(batch))
    geoms = np.concatenate(chunks) if chunks else np.array([], dtype=object)
    present = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
    if present.any() and not bool(shapely.coverage_is_valid(geoms[present])):
        notes.append(
            "the polygons are not an exact coverage (some overlap, or shared edges do not have the same "
            "vertices): the result may have gaps or overlaps there; check with vector_validate"
        )
    progress(0.3, f"simplifying a coverage of {int(present.sum())} polygons")
    out = np.array(geoms, dtype=object, copy=True)
    if present.any():
        out[present] = frame.apply(geoms[present], lambda g: shapely.coverage_simplify(g, frame.amount), snap=True)
    gone = present & (shapely.is_missing(out) | shapely.is_empty(out))
    out[gone] = None
    state = {"offset": 0}

    def op(batch_geoms: np.ndarray, record: bool = True) -> np.ndarray:
        start = state["offset"]
        state["offset"] += len(batch_geoms)
        return out[start : start + len(batch_geoms)]

    result = transform_layer(
        src,
        dst,
        layer=name,
        driver=driver,
        output_layer=output_layer,
        crs=crs,
        declared=declared,
        out=declared,
        op=op,
        drop_missing=False,
        split=False,
        progress=share(progress, 0.3, 1.0),
        verb="simplified",
        state=(state, frame),
    )
    notes = frame.final_notes("simplified") + notes + promotion_note(declared, result)
    if gone.any():
        notes.append(f"{int(gone.sum())} feature(s) collapsed to nothing and were written with a null geometry")
    return result.summary, notes


# ---------------------------------------------------------------------------------------------- dissolve


def _union(geoms: np.ndarray, counts: dict[str, int]) -> Any:
    """Union of the geometries; invalid ones are made valid first when GEOS refuses them."""
    import shapely

    try:
        return shapely.union_all(geoms)
    except _geos_error():
        bad = ~shapely.is_missing(geoms) & ~shapely.is_valid(geoms)
        counts["repaired"] += int(bad.sum())
        fixed = np.asarray(geoms, dtype=object).copy()
        fixed[bad] = shapely.make_valid(fixed[bad])
        return shapely.union_all(fixed)


_MULTI_OF = {0: "multipoints", 1: "multilinestrings", 2: "multipolygons"}


def _merge(acc: Any, new: Any, counts: dict[str, int]) -> Any:
    """acc ∪ new where acc is a union already: only the parts of acc that meet new are unioned again, so
    adding a batch costs what it touches, not the size of the result so far."""
    import shapely

    if acc is None or acc.is_empty:
        return new
    if new is None or new.is_empty:
        return acc
    dims = {int(shapely.get_dimensions(acc)), int(shapely.get_dimensions(new))}
    if len(dims) > 1 or "GeometryCollection" in (acc.geom_type, new.geom_type):
        return _union(np.array([acc, new], dtype=object), counts)
    parts, fresh = shapely.get_parts(acc), shapely.get_parts(new)
    touched = np.zeros(len(parts), dtype=bool)
    touched[shapely.STRtree(parts).query(fresh, predicate="intersects")[1]] = True
    if touched.any():
        fresh = shapely.get_parts(_union(np.concatenate([parts[touched], fresh]), counts))
    pieces = np.concatenate([parts[~touched], fresh])
    if len(pieces) == 1:
        return pieces[0]
    return getattr(shapely, _MULTI_OF[dims.pop()])(pieces)  # disjoint parts: a valid Multi


@wrap_gdal_errors
def dissolve(
    src: str,
    dst: str,
    *,
    by: str | list[str] | None = None,
    layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    aggregate: dict[str, list[str]] | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Union the geometries of each group of features with equal `by` values (all of them when by is None).

    The output has one feature per group whose attributes are the group keys (null is a group of its own)
    and, with `aggregate` (e.g. {"*": ["count"], "pop": ["sum"]}, see engine.vector.aggregate), statistics of
    each group's features, fields named "<field>_<func>" ("count" for "*"), like geopandas dissolve(aggfunc).
    Memory grows with the output, not the input: each batch is unioned into the running group results.
    """
    import shapely

    from gdal_mcp.engine.vector.aggregate import Aggregator, parse_aggregate

    driver = _check_common(src, dst, format)
    keys = [by] if isinstance(by, str) else list(by or [])
    if len(set(keys)) != len(keys) or not all(isinstance(k, str) and k for k in keys):
        raise GdalMcpError("invalid-argument", "by must be a field name or a list of distinct field names")
    name, crs, declared = layer_meta(src, layer)
    groups: dict[tuple[Any, ...], Any] = {}
    counts = {"repaired": 0, "features": 0}
    agg_fields = [f for f in (aggregate or {}) if f != "*" and f not in keys]
    with read_layer(src, layer=name, columns=keys + agg_fields, batch_size=layer_map.READ_BATCH) as stream:
        spec = parse_aggregate(aggregate, stream.schema) if aggregate is not None else []
        clash = [n for _, _, n in spec if n in keys]
        if clash:
            raise GdalMcpError("invalid-argument", f"aggregate output field(s) {clash} clash with by")
        aggregator = Aggregator(spec)
        key_fields = [stream.schema.field(k) for k in keys]
        geom_field = stream.schema.field(stream.geometry_column or "")
        for batch in relay(stream.batches, stream.total, share(progress, 0.0, 0.9), "dissolved"):
            geoms = geometries(batch)
            counts["features"] += batch.num_rows
            if keys:
                rows = list(zip(*(batch.column(k).to_pylist() for k in keys), strict=True))
                members: dict[tuple[Any, ...], list[int]] = {}
                for i, key in enumerate(rows):
                    members.setdefault(key, []).append(i)
            else:
                rows = [()] * batch.num_rows
                members = {(): list(range(batch.num_rows))}
            if spec:
                aggregator.add(np.array(rows + [None], dtype=object)[:-1], batch)
            for key, idx in members.items():
                part = _union(geoms[idx], counts)
                previous = groups.get(key)
                groups[key] = _merge(previous, part, counts)
    order = sorted(groups, key=lambda k: tuple((v is None, v) for v in k))
    geoms_out = np.array([groups[k] for k in order], dtype=object)
    if len(geoms_out):
        geoms_out[shapely.is_empty(geoms_out)] = None
    dims = {int(d) for d in shapely.get_dimensions(geoms_out[~shapely.is_missing(geoms_out)])}
    has_multi = contains_multi(geoms_out)
    mixed = len(dims) > 1 or bool((shapely.get_type_id(geoms_out) == 7).any())
    z = bool(shapely.has_z(geoms_out).any()) if len(geoms_out) else declared.z
    if mixed:
        out = GeomType(None, False, z)
    else:
        dim = dims.pop() if dims else declared.dim
        out = GeomType(dim, has_multi or (declared.multi and dim is not None), z)
        if out.multi and out.dim is not None:
            geoms_out = to_multi(geoms_out)
    stats = aggregator.result(np.array(order + [None], dtype=object)[:-1], types=stream.schema) if spec else None
    stat_fields = list(stats.schema) if stats is not None else []
    schema = pa.schema([*key_fields, *stat_fields, geom_field])
    wkb = shapely.to_wkb(geoms_out, output_dimension=3, flavor="iso") if len(geoms_out) else np.array([], dtype=object)

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start : start + BATCH_SIZE]
            columns = [pa.array([k[i] for k in chunk], type=f.type) for i, f in enumerate(key_fields)]
            if stats is not None:
                columns += [c.slice(start, len(chunk)).combine_chunks() for c in stats.columns]
            columns.append(pa.array(list(wkb[start : start + BATCH_SIZE]), type=geom_field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)

    out_name = output_layer_name(dst, output_layer)
    progress(0.9, f"writing {len(order)} dissolved features")
    options = dict(LAYER_OPTIONS.get(driver, {}))
    warnings: list[str] = []
    if driver == "FlatGeobuf" and shapely.is_missing(geoms_out).any():
        options["SPATIAL_INDEX"] = "NO"
        warnings.append(NO_INDEX_NOTE)
    write_guarded(
        dst,
        lambda: write_layer(
            dst, schema, batches(), driver=driver, layer=out_name, crs=crs, geometry_type=out.name, layer_options=options
        ),
    )
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    if counts["repaired"]:
        warnings.append(
            f"{counts['repaired']} invalid geometries were repaired (make_valid) before the union; run validate to see them"
        )
    if out.multi and not declared.multi and out.dim is not None:
        warnings.append(f"the output layer is {out.name}: some groups are multi-part")
    if mixed:
        warnings.append("groups mix points, lines and polygons, so the output geometry type is Unknown (GeometryCollections)")
    return summary, warnings
