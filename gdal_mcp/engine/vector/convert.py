"""Vector conversion like ogr2ogr: format, layer, filters, field subset, SQL, reprojection, explode/promote.

Streamed batch by batch (read_layer -> transform each batch -> write_layer): memory stays flat whatever
the layer size. Geometry work is vectorised with shapely on each batch's WKB column; coordinates are
reprojected with pyproj (always_xy), Z and M kept.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyogrio
import shapely
from pyproj import CRS

from gdal_mcp.engine.bbox import bbox_in
from gdal_mcp.engine.crs import crs_label, parse_pyproj_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.geometry_transform import reproject_geometries, transformer
from gdal_mcp.engine.options import creation_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.opening import choose_layer, list_layers
from gdal_mcp.engine.vector.stream import (
    SIDECARS,
    check_sql,
    geometries,
    has_measures,
    output_layer_name,
    read_layer,
    refuse_overflow,
    relay,
    summarize_vector,
    vector_driver,
    with_geometries,
    write_layer,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary
from gdal_mcp.sandbox.remote import is_remote

SINGLE_TO_MULTI = {"Point": "MultiPoint", "LineString": "MultiLineString", "Polygon": "MultiPolygon"}
#: shapely's type ids of MultiPoint, MultiLineString, MultiPolygon
MULTI_TYPE_IDS = (4, 5, 6)
MULTI_TO_SINGLE = {
    "MultiPoint": "Point",
    "MultiLineString": "LineString",
    "MultiPolygon": "Polygon",
    "GeometryCollection": "Unknown",
}
# shapely type ids
POINT, LINESTRING, POLYGON = 0, 1, 3
COLLECTIONS = (4, 5, 6, 7)
EMPTY_MULTI = {POINT: "MULTIPOINT EMPTY", LINESTRING: "MULTILINESTRING EMPTY", POLYGON: "MULTIPOLYGON EMPTY"}


# ----- CRS ---------------------------------------------------------------------------------------------------
def crs_text(crs: CRS) -> str:
    """What pyogrio is given for a layer CRS: EPSG:n when the CRS is exactly that code, else WKT2."""
    code = crs.to_epsg(min_confidence=100)
    return f"EPSG:{code}" if code else crs.to_wkt()


def explode(geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One geometry per part of every non-empty collection (ogr2ogr -explodecollections).

    Returns (source row of each output row, output geometries); other geometries pass as they are.
    """
    multi = np.isin(shapely.get_type_id(geoms), COLLECTIONS) & (shapely.get_num_geometries(geoms) > 0)
    rows = np.repeat(np.arange(len(geoms)), np.where(multi, shapely.get_num_geometries(geoms), 1))
    out = np.array(geoms[rows], dtype=object, copy=True)
    if multi.any():
        out[multi[rows]] = shapely.get_parts(geoms[multi])
    return rows, out


def promote(geoms: np.ndarray) -> np.ndarray:
    """Every Point, LineString and Polygon as its Multi type (ogr2ogr -nlt PROMOTE_TO_MULTI); Z and M kept."""
    out = np.array(geoms, dtype=object, copy=True)
    types = shapely.get_type_id(geoms)
    empty = shapely.is_empty(geoms)
    for single, make in ((POINT, shapely.multipoints), (LINESTRING, shapely.multilinestrings), (POLYGON, shapely.multipolygons)):
        sel = (types == single) & ~empty
        if sel.any():
            out[sel] = make(geoms[sel], indices=np.arange(int(sel.sum())))
        sel = (types == single) & empty
        if sel.any():
            out[sel] = shapely.from_wkt(EMPTY_MULTI[single])
    return out


def output_geometry_type(source: str, *, explode_collections: bool, promote_to_multi: bool) -> str:
    """The layer type ogr2ogr would declare (before M, which write_layer adds when the data has it)."""
    z = source.endswith(" Z")
    base = source.removesuffix(" Z")
    if explode_collections:
        base = MULTI_TO_SINGLE.get(base, base)
    if promote_to_multi:
        base = SINGLE_TO_MULTI.get(base, base)
    return f"{base} Z" if z and base != "Unknown" else base


def _multi_of(geometry_type: str) -> str | None:
    """The Multi type that holds both the single and multi-part geometries of a layer of this type."""
    base = geometry_type.removesuffix(" Z")
    return SINGLE_TO_MULTI.get(base) or (base if base in MULTI_TO_SINGLE and base != "GeometryCollection" else None)


# ----- the engine ----------------------------------------------------------------------------------------------
MULTI_LAYER_DRIVERS = ("GPKG", "SQLite")


def _prepare_update(
    src: str,
    existing: str,
    dst: str,
    *,
    mode: str,
    layer: str | None,
    sql: str | None,
    output_layer: str | None,
    format: str | None,
) -> tuple[str, dict[str, Any]]:
    """Copy `existing` (with its sidecars) to `dst` and describe the layer that mode append/add_layer writes.

    Returns (driver, {"name", "crs", "fields", "features"}) of the target layer (for add_layer: the new
    layer's name, no fields, 0 features).
    """
    import shutil

    layers = [n for n, _ in list_layers(existing)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        driver = str(pyogrio.read_info(existing, layer=layers[0])["driver"]) if layers else ""
    if not layers:
        raise GdalMcpError("invalid-argument", f"{Path(existing).name} has no layers to {mode} to; use mode=create")
    if format is not None and format.lower() != driver.lower():
        raise GdalMcpError(
            "invalid-argument",
            f"format={format} but the existing file is {driver}; leave format "
            "out with mode=append/add_layer (the file's own format is kept)",
        )
    if mode == "add_layer":
        if driver not in MULTI_LAYER_DRIVERS:
            raise GdalMcpError(
                "invalid-argument",
                f"mode=add_layer needs a format that holds several layers "
                f"(GeoPackage, SQLite), but the existing file is {driver}; write a new file instead",
            )
        name = output_layer or layer or Path(src).stem  # a new layer beside others: named after what it holds
        if name in layers:
            raise GdalMcpError(
                "already-exists",
                f"layer '{name}' already exists in {Path(existing).name}; pass "
                "another output_layer, or mode=append to add features to it",
            )
        info: dict[str, Any] = {"name": name, "crs": None, "fields": [], "features": 0}
    else:
        if output_layer is not None:
            if output_layer not in layers:
                raise GdalMcpError(
                    "not-found",
                    f"layer '{output_layer}' is not in {Path(existing).name} (layers: "
                    f"{', '.join(layers)}); use mode=add_layer to create it",
                )
            name = output_layer
        elif len(layers) == 1:
            name = layers[0]
        elif layer in layers:
            name = str(layer)
        else:
            raise GdalMcpError(
                "invalid-argument",
                f"{Path(existing).name} has {len(layers)} layers; pass output_layer= the one to append to: {', '.join(layers)}",
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            meta = pyogrio.read_info(existing, layer=name, force_feature_count=True)
        info = {
            "name": name,
            "crs": meta.get("crs"),
            "fields": [str(f) for f in meta["fields"]],
            "features": max(int(meta["features"]), 0),
        }
    if is_remote(existing):  # an object in storage: its objects read here, then uploaded in their place
        from gdal_mcp.engine.objects import download_dataset

        download_dataset(existing, dst)
        return driver, info
    stem = Path(existing).name.rsplit(".", 1)[0]
    sidecars: frozenset[str] = SIDECARS.get(Path(existing).suffix.lower(), frozenset())
    target = Path(dst)
    for f in Path(existing).parent.iterdir():
        rest = f.name[len(stem) + 1 :] if f.name.startswith(stem + ".") else None
        if f.is_file() and (f.name == Path(existing).name or (rest is not None and rest.lower() in sidecars)):
            shutil.copy2(f, target.parent / (target.name.rsplit(".", 1)[0] + f.name[len(stem) :]))
    return driver, info


def _new_files(dst: Path, before: set[Path]) -> list[Path]:
    stem = dst.name.split(".")[0]
    return [f for f in dst.parent.iterdir() if f not in before and f.name.split(".")[0] == stem]


@wrap_gdal_errors
def convert(
    src: str,
    dst: str,
    *,
    layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    where: str | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    fields: list[str] | None = None,
    sql: str | None = None,
    dst_crs: str | None = None,
    src_crs: str | None = None,
    explode_collections: bool = False,
    promote_to_multi: bool = False,
    layer_options: dict[str, Any] | None = None,
    sql_dialect: str | None = None,
    open_options: dict[str, str] | None = None,
    mode: str = "create",
    append_to: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Convert one layer of `src` into a new layer of `dst` as ogr2ogr would; returns its summary and warnings.

    `sql_dialect` OGRSQL (default) or SQLITE (SpatiaLite functions: ST_Area(geom, 1) in geodesic m²,
    ST_Centroid, MakePoint, GROUP BY …); `open_options` are dataset open options (ogr2ogr -oo).
    mode "append" (ogr2ogr -append) adds the features to a layer of the existing dataset `append_to`, and
    "add_layer" adds a new layer to it (GeoPackage, SQLite): `append_to` is copied to `dst` first and the
    copy changed, so the caller can rename `dst` over it on success (the original is never half-written).

    `layer_options` are OGR layer creation options (ogr2ogr -lco), e.g. {"SPATIAL_INDEX": "NO"} for FlatGeobuf.

    bbox is in bbox_crs (default the layer's CRS); sql is one read-only SELECT and excludes layer, where and
    fields; src_crs overrides (or assigns) the source CRS; CSV outputs carry the geometry as a WKT column.
    """
    notes: list[str] = []
    oo = dict(open_options or {})
    if mode not in ("create", "append", "add_layer"):
        raise GdalMcpError("invalid-argument", f"mode must be create, append or add_layer (got {mode!r})")
    if sql_dialect is not None and sql_dialect.upper() != "OGRSQL" and sql is None:
        raise GdalMcpError("invalid-argument", "sql_dialect applies to sql; give sql too")
    if sql is not None:
        if layer is not None or where or fields is not None:
            raise GdalMcpError(
                "invalid-argument", "sql selects its own layer, filter and fields: do not combine it with layer, where or fields"
            )
        check_sql(sql, sql_dialect)
    target_layer: dict[str, Any] | None = None
    if mode == "create":
        driver = vector_driver(dst, format)
    else:
        if append_to is None:
            raise GdalMcpError("invalid-argument", f"mode={mode} needs the existing dataset (append_to)")
        driver, target_layer = _prepare_update(
            src, append_to, dst, mode=mode, layer=layer, sql=sql, output_layer=output_layer, format=format
        )
        output_layer = target_layer["name"]
        if mode == "append" and dst_crs is None and target_layer["crs"]:
            dst_crs = target_layer["crs"]  # features land in the layer's CRS (reprojected when theirs differs)
    assigned = parse_pyproj_crs(src_crs, "src_crs") if src_crs else None
    target = parse_pyproj_crs(dst_crs, "dst_crs") if dst_crs else None
    box_crs = parse_pyproj_crs(bbox_crs, "bbox_crs") if bbox_crs else None
    name = None
    layer_bbox = None
    if sql is None:
        name = choose_layer(src, layer, list_layers(src))
        if bbox is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (pyogrio warns about M layers)
                meta_crs = pyogrio.read_info(src, layer=name, **oo)["crs"]
            layer_bbox = bbox_in(bbox, box_crs, assigned or (CRS.from_user_input(meta_crs) if meta_crs else None))
    out_layer = output_layer_name(dst, output_layer)
    options = creation_options(layer_options) or None  # (write_layer adds the format's own: CSV WKT and .csvt)
    facts: dict[str, Any] = {}

    def attempt(promote_geometries: bool) -> None:
        with read_layer(
            src, layer=name, where=where, bbox=layer_bbox, columns=fields, sql=sql, sql_dialect=sql_dialect, open_options=oo
        ) as s:
            source_crs = assigned or (CRS.from_user_input(s.crs) if s.crs else None)
            column = s.geometry_column
            if column is None and (target or bbox is not None):
                raise GdalMcpError("invalid-argument", "the layer has no geometry: dst_crs and bbox need one")
            if target is not None and source_crs is None:
                raise GdalMcpError("invalid-argument", "the layer has no CRS: pass src_crs to say what it is")
            # With sql the filter box is applied here (an OGR spatial filter: geometries that intersect it).
            box = shapely.box(*bbox_in(bbox, box_crs, source_crs)) if bbox is not None and sql is not None else None
            reprojection = None
            if target is not None and source_crs is not None and not target.equals(source_crs):
                reprojection = transformer(source_crs, target)
                facts["reprojected"] = True
            out_crs = target or source_crs
            facts["crs"] = out_crs
            schema = s.schema
            if column is not None and out_crs is not None:
                idx = schema.get_field_index(column)
                schema = schema.set(
                    idx,
                    schema.field(idx).with_metadata(
                        {
                            b"ARROW:extension:name": b"geoarrow.wkb",
                            b"ARROW:extension:metadata": json.dumps({"crs": out_crs.to_json_dict()}).encode(),
                        }
                    ),
                )
            facts["failed"] = 0
            facts["input_fields"] = [f.name for f in s.schema if f.name != column]
            keep_fields = None
            if target_layer is not None and mode == "append":
                # ogr2ogr -append: fields are matched by name; those the layer lacks are left out (and said so).
                known = {f.lower() for f in target_layer["fields"]}
                keep_fields = [f.name for f in schema if f.name == column or f.name.lower() in known]
                facts["dropped"] = [f for f in facts["input_fields"] if f.lower() not in known]
                schema = pa.schema([schema.field(k) for k in keep_fields], metadata=schema.metadata)

            changes = box is not None or reprojection is not None or explode_collections or promote_geometries

            # A layer that declares a single-part type yet holds multi-part geometries (shapefiles do): a GeoPackage
            # would declare the single type for them all, against its own rules; they are counted, and the layer is
            # written again as the multi type (below)
            watch_multi = (
                mode == "create" and driver == "GPKG" and not promote_geometries and not explode_collections
            ) and _multi_of(s.geometry_type) not in (None, s.geometry_type.removesuffix(" Z"))
            facts["multi_parts"] = 0

            def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
                if "measured" not in facts:
                    facts["measured"] = has_measures(batch)
                if keep_fields is not None:
                    batch = batch.select(keep_fields)
                if watch_multi and column is not None:
                    facts["multi_parts"] += int(np.isin(shapely.get_type_id(geometries(batch)), MULTI_TYPE_IDS).sum())
                if column is None or not changes:
                    return batch if keep_fields is None else pa.RecordBatch.from_arrays(batch.columns, schema=schema)
                geoms = geometries(batch)
                keep = None
                if box is not None:
                    keep = shapely.intersects(geoms, box)
                if reprojection is not None:
                    geoms, bad = reproject_geometries(geoms, reprojection)
                    if bad.any():
                        facts["failed"] += int(bad.sum())
                        keep = ~bad if keep is None else keep & ~bad
                if keep is not None and not keep.all():
                    batch, geoms = batch.filter(pa.array(keep)), geoms[keep]
                if explode_collections:
                    rows, geoms = explode(geoms)
                    if len(rows) != batch.num_rows:
                        batch = batch.take(pa.array(rows))
                if promote_geometries:
                    geoms = promote(geoms)
                out = with_geometries(batch, geoms)
                return pa.RecordBatch.from_arrays(out.columns, schema=schema)

            facts["source_type"] = s.geometry_type
            gtype = output_geometry_type(
                s.geometry_type, explode_collections=explode_collections, promote_to_multi=promote_geometries
            )
            write_layer(
                dst,
                schema,
                relay(s.batches, s.total, progress, "converted", transform),
                driver=driver,
                layer=out_layer,
                crs=crs_text(out_crs) if out_crs is not None else None,
                geometry_type=gtype,
                layer_options=None if mode == "append" else options,
                append=mode != "create",
            )
            refuse_overflow(s)

    out = Path(dst)
    before = set(out.parent.iterdir()) if out.parent.is_dir() else set()
    try:
        attempt(promote_to_multi)
        multi = _multi_of(facts.get("source_type", ""))
        parts = int(facts.get("multi_parts") or 0)
        if parts and multi is not None:
            for f in _new_files(out, before):
                f.unlink()
            attempt(True)
            notes.append(
                f"this {facts['source_type']} layer holds {parts} multi-part geometries; wrote every "
                f"geometry as {multi} (promote_to_multi, like ogr2ogr -nlt PROMOTE_TO_MULTI), so the GeoPackage "
                "declares the type its features have"
            )
    except GdalMcpError as e:
        if mode != "create":
            raise
        source_type = facts.get("source_type", "")
        if driver == "ESRI Shapefile" and "geometry to" in e.message and "shapefile" in e.message:
            raise GdalMcpError(
                "invalid-argument",
                f"a shapefile holds one geometry type, and this layer mixes "
                f"several ({e.message.split(': ')[-1]}); write GPKG, GeoJSON or FlatGeobuf, or select "
                "one type, e.g. where=\"OGR_GEOMETRY = 'POINT'\"",
            ) from None
        multi = _multi_of(source_type)
        if promote_to_multi or "mismatched geometry type" not in e.message.lower() or multi is None:
            raise
        # Shapefiles (and lax GeoPackages) declare Polygon yet hold MultiPolygons: strict drivers refuse that.
        for f in _new_files(out, before):
            f.unlink()
        attempt(True)
        notes.append(
            f"{driver} refused the mix of single and multi-part geometries in this {source_type} layer "
            f"({e.message.split(': ')[-1]}); wrote every geometry as {multi} (promote_to_multi, like "
            "ogr2ogr -nlt PROMOTE_TO_MULTI)"
        )
    if facts.get("failed"):
        notes.append(
            f"{facts['failed']} feature(s) could not be reprojected to {dst_crs} (outside the "
            "projection's domain) and were left out, as ogr2ogr -skipfailures does"
        )
    summary = summarize_vector(dst, out_layer)
    if target_layer is not None:
        added = summary.feature_count - target_layer["features"]
        notes.append(
            f"{'appended' if mode == 'append' else 'wrote'} {added} feature(s) to layer '{out_layer}' "
            f"({summary.feature_count} now); the other layers are unchanged"
        )
        if facts.get("dropped"):
            notes.append(
                f"layer '{out_layer}' has no field(s) {', '.join(facts['dropped'])}: their values were "
                "not appended (ogr2ogr -append does the same; add the fields, or write a new layer with "
                "mode=add_layer)"
            )
        if mode == "append" and dst_crs and target_layer["crs"] and facts.get("reprojected"):
            notes.append(f"features were reprojected to the layer's CRS ({crs_label(facts['crs'])})")
        return summary, notes
    if summary.feature_count == 0:
        notes.append("no feature matched: the output layer is empty")
    if facts.get("crs") is not None and summary.crs is None and summary.geometry_type is not None:
        notes.append(f"{driver} does not store a CRS: the coordinates are in {crs_label(facts['crs'])}")
    lost = [f for f in facts.get("input_fields", []) if f not in summary.fields]
    if lost and summary.feature_count:  # (an empty GeoJSON has no fields to keep)
        notes.append(f"{driver} did not keep these field names: {', '.join(lost)} (output fields: {', '.join(summary.fields)})")
    if facts.get("measured") and summary.feature_count and not _output_measured(dst, summary.layer):
        notes.append(f"M (measure) values were dropped: {driver} does not store them")
    return summary, notes


def _output_measured(dst: str, layer: str) -> bool:
    """Whether the first features written kept M (pyogrio's non-Arrow reader would drop it)."""
    with read_layer(dst, layer=layer, count=False, batch_size=100) as s:
        return has_measures(next(s.batches, pa.RecordBatch.from_pylist([], schema=s.schema)))


@wrap_gdal_errors
def reproject(
    src: str,
    dst: str,
    *,
    dst_crs: str,
    src_crs: str | None = None,
    layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Reproject one layer into a new file (ogr2ogr -t_srs); the conversion engine does the work."""
    return convert(
        src, dst, dst_crs=dst_crs, src_crs=src_crs, layer=layer, format=format, output_layer=output_layer, progress=progress
    )
