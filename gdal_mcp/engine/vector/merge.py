"""Many vector files into one (vector_merge), like ogrmerge.py.

mode "single" (ogrmerge -single): every input's features in one layer, in input order, with `source_field`
naming each feature's source (the name the caller gives: a workspace-relative path). mode "layers": one
layer per input in one GeoPackage, named after the input file (made unique).

Inputs in another CRS than the first are reprojected to the first's (vertex by vertex, as ogr2ogr does).
In single mode the field sets are unioned by name, compared without case as ogrmerge does (`name` and `NAME` are
one field, spelt as first seen; OGR's formats take them for one): a field missing from an input is null for its features;
fields whose types differ are written with the wider type (integers -> 64-bit, integer and real -> real,
date and datetime -> datetime) or else as text, and each conflict is reported. Streamed input by input,
batch by batch, in one write.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.geometry_transform import reproject_geometries, same_crs, transformer
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.convert import promote as to_multi
from gdal_mcp.engine.vector.geomtypes import GeomType, layer_type
from gdal_mcp.engine.vector.layer_map import LAYER_OPTIONS, share, write_guarded
from gdal_mcp.engine.vector.opening import choose_layer
from gdal_mcp.engine.vector.stream import (
    geometries,
    output_layer_name,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    with_geometries,
    write_layer,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import MergeResult

GEOMETRY = "geometry"
WKB_FIELD_META = {b"ARROW:extension:name": b"geoarrow.wkb"}
LAYER_DRIVERS = ("GPKG", "SQLite")


def wider_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type that holds values of both (None: none but text)."""
    if a == b:
        return a
    num = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)
    if any(t(a) for t in num) and any(t(b) for t in num):
        if pa.types.is_floating(a) or pa.types.is_floating(b):
            return pa.float64()
        return pa.int64()
    strings = (pa.types.is_string, pa.types.is_large_string)
    if any(t(a) for t in strings) and any(t(b) for t in strings):
        return pa.large_string()
    if (pa.types.is_date(a) or pa.types.is_timestamp(a)) and (pa.types.is_date(b) or pa.types.is_timestamp(b)):
        ts = a if pa.types.is_timestamp(a) else b
        if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.tz != b.tz:
            return None
        return ts if pa.types.is_timestamp(ts) else pa.timestamp("ms")
    return None


def _cast(column: pa.Array, to: pa.DataType) -> pa.Array:
    if column.type == to:
        return column
    if pa.types.is_string(to) or pa.types.is_large_string(to):
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            return pa.array([None if v is None else v.hex() for v in column.to_pylist()], type=to)
        return pc.cast(column, to)
    return pc.cast(column, to)


def _layer_names(inputs: list[str], names: list[str]) -> list[str]:
    out: list[str] = []
    for path, shown in zip(inputs, names, strict=True):
        stem = re.sub(r"[^A-Za-z0-9_]+", "_", Path(shown or path).stem).strip("_") or "layer"
        name, i = stem, 1
        while name.lower() in {o.lower() for o in out}:
            i += 1
            name = f"{stem}_{i}"
        out.append(name)
    return out


@wrap_gdal_errors
def merge(
    inputs: list[str],
    dst: str,
    *,
    source_names: list[str] | None = None,
    layer: str | None = None,
    source_field: str | None = "source",
    mode: str = "single",
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[MergeResult, list[str]]:
    """Merge `inputs` (see the module docstring). `source_names` are the names written in `source_field` (default
    the paths); `layer` is the layer read from each input (required for inputs with several)."""
    if not inputs:
        raise GdalMcpError("invalid-argument", "give at least one input to merge")
    names = list(source_names) if source_names is not None else list(inputs)
    if len(names) != len(inputs):
        raise GdalMcpError("invalid-argument", "source_names must name every input")
    if mode not in ("single", "layers"):
        raise GdalMcpError("invalid-argument", f"mode must be single or layers (got {mode!r})")
    driver = vector_driver(dst, format)
    if mode == "layers" and driver not in LAYER_DRIVERS:
        raise GdalMcpError(
            "invalid-argument",
            f"mode='layers' writes one layer per input, which needs a GeoPackage (.gpkg); {driver} holds one layer per file",
        )
    # Inspect every input: layer, CRS, declared type, Arrow schema.
    metas: list[dict[str, Any]] = []
    for path, shown in zip(inputs, names, strict=True):
        name = choose_layer(path, layer)
        with read_layer(path, layer=name, count=False) as s:
            metas.append(
                {
                    "path": path,
                    "shown": shown,
                    "layer": name,
                    "crs": s.crs,
                    "type": s.geometry_type,
                    "schema": s.schema,
                    "geom": s.geometry_column,
                }
            )
    first_crs = next((m["crs"] for m in metas if m["crs"]), None)
    warnings: list[str] = []
    reprojected = [m["shown"] for m in metas if m["crs"] and first_crs and not same_crs(m["crs"], first_crs)]
    if reprojected:
        warnings.append(
            f"{len(reprojected)} input(s) reprojected to the first input's CRS: "
            + ", ".join(reprojected[:10])
            + (" …" if len(reprojected) > 10 else "")
        )
    no_crs = [m["shown"] for m in metas if not m["crs"] and m["geom"]]
    if no_crs and first_crs:
        warnings.append(f"{len(no_crs)} input(s) have no CRS and were taken to be in the first's: " + ", ".join(no_crs[:10]))
    failed = {"n": 0}

    def reproject(meta: dict[str, Any], geoms: np.ndarray) -> np.ndarray:
        if meta["crs"] is None or first_crs is None or meta.get("transformer") is None:
            return geoms
        out, bad = reproject_geometries(geoms, meta["transformer"])
        if bad.any():
            failed["n"] += int(bad.sum())
            out = np.asarray(out, dtype=object)
            out[bad] = None
        return out

    for m in metas:
        m["transformer"] = transformer(m["crs"], first_crs) if m["crs"] and first_crs else None
    if mode == "layers":
        result = _merge_layers(dst, metas, driver, _layer_names(inputs, names), first_crs, reproject, progress)
    else:
        result = _merge_single(dst, metas, driver, source_field, output_layer, first_crs, reproject, progress, warnings)
    if failed["n"]:
        warnings.append(
            f"{failed['n']} feature(s) could not be reprojected to the first input's CRS (outside the "
            "projection's domain): written with a null geometry"
        )
    result.warnings = warnings
    return result, warnings


def _merge_layers(
    dst: str,
    metas: list[dict[str, Any]],
    driver: str,
    layer_names: list[str],
    crs: str | None,
    reproject: Any,
    progress: Progress,
) -> MergeResult:
    summaries = []
    n = len(metas)
    for i, (m, out_name) in enumerate(zip(metas, layer_names, strict=True)):

        def transform(batch: pa.RecordBatch, m: dict[str, Any] = m) -> pa.RecordBatch:
            if m["geom"] is None or m["transformer"] is None:
                return batch
            return with_geometries(batch, reproject(m, geometries(batch)))

        def write(m: dict[str, Any] = m, out_name: str = out_name, i: int = i) -> None:
            with read_layer(m["path"], layer=m["layer"]) as s:
                write_layer(
                    dst,
                    s.schema,
                    relay(s.batches, s.total, share(progress, i / n, (i + 1) / n), f"merged {m['shown']}:", transform),
                    driver=driver,
                    layer=out_name,
                    crs=crs if m["geom"] else None,
                    geometry_type=s.geometry_type,
                    layer_options=LAYER_OPTIONS.get(driver),
                )

        if i == 0:
            write_guarded(dst, write)
        else:
            try:
                write()
            except BaseException:
                Path(dst).unlink(missing_ok=True)
                raise
        summaries.append(summarize_vector(dst, out_name))
    progress(1.0, f"wrote {len(summaries)} layers")
    return MergeResult(mode="layers", inputs=n, feature_count=sum(s.feature_count for s in summaries), layers=summaries)


def _merge_single(
    dst: str,
    metas: list[dict[str, Any]],
    driver: str,
    source_field: str | None,
    output_layer: str | None,
    crs: str | None,
    reproject: Any,
    progress: Progress,
    warnings: list[str],
) -> MergeResult:
    # The unioned schema: fields by name (compared without case, as ogrmerge and OGR's formats do) in order of
    # first appearance, spelt as first seen, types widened. m["columns"]: output field -> the input's field.
    fields: dict[str, pa.DataType] = {}
    spelling: dict[str, str] = {}  # lower-case name -> output name
    seen: dict[str, list[tuple[str, str, pa.DataType]]] = {}
    for m in metas:
        m["columns"] = {}
        for f in m["schema"]:
            if f.name == m["geom"]:
                continue
            key = f.name.lower()
            if key in spelling and spelling[key] in m["columns"]:  # the same name twice in one input
                i = 2
                while f"{key}_{i}" in spelling:
                    i += 1
                spelling[f"{key}_{i}"] = f"{f.name}_{i}"
                warnings.append(
                    f"{m['shown']} has fields '{m['columns'][spelling[key]]}' and '{f.name}' (one name to the output "
                    f"format): the second written as '{f.name}_{i}'"
                )
                key = f"{key}_{i}"
            name = spelling.setdefault(key, f.name)
            m["columns"][name] = f.name
            seen.setdefault(name, []).append((m["shown"], f.name, f.type))
            if name not in fields:
                fields[name] = f.type
            else:
                wider = wider_type(fields[name], f.type)
                fields[name] = wider if wider is not None else pa.large_string()
    for name, found in seen.items():
        if len({str(t) for _, _, t in found}) > 1:
            examples = ", ".join(f"{s}: {t}" for s, _, t in found[:4])
            warnings.append(f"field '{name}' has different types in the inputs ({examples}): written as {fields[name]}")
        spelt = dict.fromkeys(n for _, n, _ in found)
        if len(spelt) > 1:
            examples = ", ".join(f"'{n}' ({next(s for s, x, _ in found if x == n)})" for n in list(spelt)[:4])
            warnings.append(
                f"fields {examples} differ only in case: merged into '{name}' (names are compared without case, as ogrmerge does)"
            )
    if source_field:
        if any(source_field.lower() == f.lower() for f in fields):
            raise GdalMcpError(
                "invalid-argument",
                f"source_field '{source_field}' is already a field of an input; "
                "pass another name (or source_field=null for none)",
            )
        fields = {source_field: pa.large_string(), **fields}
    has_geom = any(m["geom"] for m in metas)
    geom_name = next((m["geom"] for m in metas if m["geom"]), GEOMETRY)
    schema = pa.schema(
        [pa.field(k, t) for k, t in fields.items()]
        + ([pa.field(geom_name, pa.binary(), metadata=WKB_FIELD_META)] if has_geom else [])
    )
    # The layer's geometry type: the one type when all agree, the Multi type when single and multi mix.
    layer_types = {layer_type(m["type"]) for m in metas if m["geom"]}
    dims = {t.dim for t in layer_types}
    z = any(t.z for t in layer_types)
    if len(dims) == 1 and None not in dims:
        out_type = GeomType(dims.pop(), any(t.multi for t in layer_types), z)
    else:
        out_type = GeomType(None, False, z)
    promote = out_type.multi and out_type.dim is not None and any(not t.multi for t in layer_types)
    out_name = output_layer_name(dst, output_layer)
    total = {"n": 0}
    n = len(metas)

    def batches() -> Iterator[pa.RecordBatch]:
        for i, m in enumerate(metas):
            with read_layer(m["path"], layer=m["layer"]) as s:
                for batch in relay(s.batches, s.total, share(progress, i / n, (i + 1) / n), f"merged {m['shown']}:"):
                    rows = batch.num_rows
                    total["n"] += rows
                    columns = []
                    for f in schema:
                        if f.name == source_field:
                            columns.append(pa.array([m["shown"]] * rows, type=pa.large_string()))
                        elif has_geom and f.name == geom_name:
                            if m["geom"] is None:
                                columns.append(pa.nulls(rows, type=pa.binary()))
                                continue
                            geoms = reproject(m, geometries(batch))
                            if promote:
                                geoms = to_multi(geoms)
                            wkb = with_geometries(batch, geoms).column(m["geom"])
                            columns.append(pc.cast(wkb, pa.binary()))
                        elif f.name in m["columns"]:
                            columns.append(_cast(batch.column(m["columns"][f.name]), f.type))
                        else:
                            columns.append(pa.nulls(rows, type=f.type))
                    yield pa.RecordBatch.from_arrays(columns, schema=schema)

    def write() -> None:
        write_layer(
            dst,
            schema,
            batches(),
            driver=driver,
            layer=out_name,
            crs=crs if has_geom else None,
            geometry_type=out_type.name,
            layer_options=LAYER_OPTIONS.get(driver),
        )

    write_guarded(dst, write)
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    if promote:
        warnings.append(f"inputs mix single and multi-part geometries: all written as {out_type.name}")
    if out_type.dim is None and len(dims) > 1:
        warnings.append(
            "inputs mix points, lines and polygons: the merged layer's geometry type is Unknown (write "
            "GeoPackage or GeoJSON; a shapefile cannot hold that)"
        )
    return MergeResult(mode="single", inputs=n, feature_count=total["n"], summary=summary)
