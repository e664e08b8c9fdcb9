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
from pyproj import CRS, Transformer

from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.output import creation_options
from gdal_mcp.engine.vector.opening import choose_layer, list_layers
from gdal_mcp.engine.vector.stream import (
    check_sql,
    geometries,
    has_measures,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    with_geometries,
    write_layer,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

# Layer creation options: CSV keeps the geometry (a WKT column) and the field types (a .csvt sidecar).
LAYER_OPTIONS: dict[str, dict[str, str]] = {"CSV": {"GEOMETRY": "AS_WKT", "CREATE_CSVT": "YES"}}
SINGLE_TO_MULTI = {"Point": "MultiPoint", "LineString": "MultiLineString", "Polygon": "MultiPolygon"}
MULTI_TO_SINGLE = {"MultiPoint": "Point", "MultiLineString": "LineString", "MultiPolygon": "Polygon",
                   "GeometryCollection": "Unknown"}
# shapely type ids
POINT, LINESTRING, POLYGON = 0, 1, 3
COLLECTIONS = (4, 5, 6, 7)
EMPTY_MULTI = {POINT: "MULTIPOINT EMPTY", LINESTRING: "MULTILINESTRING EMPTY", POLYGON: "MULTIPOLYGON EMPTY"}


# ----- CRS and bbox ------------------------------------------------------------------------------------------
def user_crs(text: str, what: str) -> CRS:
    """A pyproj CRS from what users type (EPSG:4326, 4326, OGC:CRS84, PROJ, WKT); invalid-argument otherwise."""
    return CRS.from_user_input(parse_crs(text, what).to_string())


def crs_text(crs: CRS) -> str:
    """What pyogrio is given for a layer CRS: EPSG:n when the CRS is exactly that code, else WKT2."""
    code = crs.to_epsg(min_confidence=100)
    return f"EPSG:{code}" if code else crs.to_wkt()


def bbox_in(bbox: tuple[float, float, float, float], bbox_crs: CRS | None, layer_crs: CRS | None,
            ) -> tuple[float, float, float, float]:
    """`bbox` ([minx, miny, maxx, maxy] in bbox_crs, default the layer's) in the layer's CRS (edges densified)."""
    if len(bbox) != 4 or not all(np.isfinite(v) for v in bbox):
        raise GdalMcpError("invalid-argument", "bbox must be four finite numbers [minx, miny, maxx, maxy]")
    minx, miny, maxx, maxy = (float(v) for v in bbox)
    if not (minx < maxx and miny < maxy):
        raise GdalMcpError("invalid-argument", "bbox must be [minx, miny, maxx, maxy] with min < max")
    if bbox_crs is None or (layer_crs is not None and bbox_crs == layer_crs):
        return minx, miny, maxx, maxy
    if layer_crs is None:
        raise GdalMcpError("invalid-argument", "bbox_crs given but the layer has no CRS (pass src_crs)")
    out = Transformer.from_crs(bbox_crs, layer_crs, always_xy=True).transform_bounds(minx, miny, maxx, maxy,
                                                                                    densify_pts=21)
    if not all(np.isfinite(v) for v in out):
        raise GdalMcpError("invalid-argument", "bbox cannot be transformed to the layer's CRS (outside its area of use)")
    return tuple(float(v) for v in out)  # type: ignore[return-value]


# ----- geometry transforms (vectorised, per batch) -------------------------------------------------------------
def _transform_xyz(transformer: Transformer, xyz: np.ndarray, has_z: np.ndarray) -> np.ndarray:
    """Transform an (N, 3) array of x, y, z; z is used (and changed) only where has_z. Returns (N, 3)."""
    x, y = xyz[:, 0], xyz[:, 1]
    out = np.array(xyz, dtype="float64", copy=True)
    if has_z.any():
        z = np.where(has_z, np.nan_to_num(xyz[:, 2], nan=0.0), 0.0)
        out[:, 0], out[:, 1], z2 = transformer.transform(x, y, z, errcheck=False)
        out[:, 2] = np.where(has_z, z2, np.nan)
    else:
        out[:, 0], out[:, 1] = transformer.transform(x, y, errcheck=False)
    return out


def _failed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Coordinates that were finite before and are not after (outside the target projection's domain)."""
    return (np.isfinite(before[:, :2]).all(axis=1)) & ~(np.isfinite(after[:, :2]).all(axis=1))


def _reproject_plain(geoms: np.ndarray, transformer: Transformer) -> tuple[np.ndarray, np.ndarray]:
    """Geometries without M: shapely's coordinate arrays (Z kept; 2D geometries stay 2D)."""
    coords, index = shapely.get_coordinates(geoms, include_z=True, return_index=True)
    has_z = shapely.has_z(geoms)[index] if len(index) else np.zeros(0, dtype=bool)
    out = _transform_xyz(transformer, coords, has_z)
    bad = np.zeros(len(geoms), dtype=bool)
    bad[index[_failed(coords, out)]] = True
    return shapely.set_coordinates(np.array(geoms, dtype=object, copy=True), out), bad


def _coordinate_runs(buf: bytearray, pos: int, runs: list[tuple[int, int, int, bool]]) -> int:
    """Walk little-endian ISO WKB from `pos`: append (offset, points, ordinates, has_z) of every coordinate run."""
    code = int.from_bytes(buf[pos + 1:pos + 5], "little")
    pos += 5
    base, dim = code % 1000, code // 1000
    ordinates, has_z = {0: (2, False), 1: (3, True), 2: (3, False), 3: (4, True)}[dim]

    def count() -> int:
        return int.from_bytes(buf[pos:pos + 4], "little")

    if base == 1:
        runs.append((pos, 1, ordinates, has_z))
        return pos + 8 * ordinates
    if base == 2:
        n = count()
        runs.append((pos + 4, n, ordinates, has_z))
        return pos + 4 + 8 * ordinates * n
    if base == 3:
        rings = count()
        pos += 4
        for _ in range(rings):
            n = count()
            runs.append((pos + 4, n, ordinates, has_z))
            pos += 4 + 8 * ordinates * n
        return pos
    if base in (4, 5, 6, 7):
        parts = count()
        pos += 4
        for _ in range(parts):
            pos = _coordinate_runs(buf, pos, runs)
        return pos
    raise GdalMcpError("unsupported", f"cannot reproject WKB geometry type {code} (curves) with M values")


def _reproject_measured(geoms: np.ndarray, transformer: Transformer) -> tuple[np.ndarray, np.ndarray]:
    """Geometries with M: shapely cannot rebuild M geometries from coordinates (and its set_coordinates
    turns a ZM geometry's Z and M into NaN), so x, y, z are rewritten in place in ISO WKB and M is left alone."""
    buffers = [bytearray(w) for w in shapely.to_wkb(geoms, output_dimension=4, flavor="iso", byte_order=1)]
    views: list[tuple[np.ndarray, bool]] = []  # (n, ordinates) float views into the buffers, and whether Z
    owner: list[np.ndarray] = []
    for i, buf in enumerate(buffers):
        runs: list[tuple[int, int, int, bool]] = []
        _coordinate_runs(buf, 0, runs)
        for offset, n, ordinates, run_z in runs:
            views.append((np.frombuffer(buf, dtype="<f8", count=n * ordinates, offset=offset).reshape(n, ordinates),
                          run_z))
            owner.append(np.full(n, i))
    bad = np.zeros(len(geoms), dtype=bool)
    if views:
        xyz = np.concatenate([v[:, :3] if z else np.column_stack([v[:, :2], np.full(len(v), np.nan)])
                              for v, z in views])
        has_z = np.concatenate([np.full(len(v), z) for v, z in views])
        out = _transform_xyz(transformer, xyz, has_z)
        bad[np.concatenate(owner)[_failed(xyz, out)]] = True
        start = 0
        for v, z in views:
            v[:, :3 if z else 2] = out[start:start + len(v), :3 if z else 2]
            start += len(v)
    return shapely.from_wkb([bytes(b) for b in buffers]), bad


def reproject_geometries(geoms: np.ndarray, transformer: Transformer) -> tuple[np.ndarray, np.ndarray]:
    """`geoms` in the transformer's target CRS, and a mask of the geometries that could not be transformed."""
    out = np.array(geoms, dtype=object, copy=True)
    bad = np.zeros(len(geoms), dtype=bool)
    present = ~shapely.is_missing(geoms)
    measured = present & shapely.has_m(geoms)
    for mask, func in ((present & ~measured, _reproject_plain), (measured, _reproject_measured)):
        if mask.any():
            out[mask], bad[mask] = func(geoms[mask], transformer)
    return out, bad


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
    for single, make in ((POINT, shapely.multipoints), (LINESTRING, shapely.multilinestrings),
                         (POLYGON, shapely.multipolygons)):
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
def _new_files(dst: Path, before: set[Path]) -> list[Path]:
    stem = dst.name.split(".")[0]
    return [f for f in dst.parent.iterdir() if f not in before and f.name.split(".")[0] == stem]


@wrap_gdal_errors
def convert(src: str, dst: str, *, layer: str | None = None, format: str | None = None,
            output_layer: str | None = None, where: str | None = None,
            bbox: tuple[float, float, float, float] | None = None, bbox_crs: str | None = None,
            fields: list[str] | None = None, sql: str | None = None, dst_crs: str | None = None,
            src_crs: str | None = None, explode_collections: bool = False, promote_to_multi: bool = False,
            layer_options: dict[str, Any] | None = None,
            progress: Progress = no_progress) -> tuple[VectorSummary, list[str]]:
    """Convert one layer of `src` into a new layer of `dst` as ogr2ogr would; returns its summary and warnings.

    `layer_options` are OGR layer creation options (ogr2ogr -lco), e.g. {"SPATIAL_INDEX": "NO"} for FlatGeobuf.

    bbox is in bbox_crs (default the layer's CRS); sql is one read-only SELECT and excludes layer, where and
    fields; src_crs overrides (or assigns) the source CRS; CSV outputs carry the geometry as a WKT column.
    """
    notes: list[str] = []
    driver = vector_driver(dst, format)
    if sql is not None:
        if layer is not None or where or fields is not None:
            raise GdalMcpError("invalid-argument", "sql selects its own layer, filter and fields: do not combine it "
                               "with layer, where or fields")
        check_sql(sql)
    assigned = user_crs(src_crs, "src_crs") if src_crs else None
    target = user_crs(dst_crs, "dst_crs") if dst_crs else None
    box_crs = user_crs(bbox_crs, "bbox_crs") if bbox_crs else None
    name = None
    layer_bbox = None
    if sql is None:
        name = choose_layer(src, layer, list_layers(src))
        if bbox is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (pyogrio warns about M layers)
                meta_crs = pyogrio.read_info(src, layer=name)["crs"]
            layer_bbox = bbox_in(bbox, box_crs, assigned or (CRS.from_user_input(meta_crs) if meta_crs else None))
    out_layer = output_layer or name or Path(dst).stem
    options = {**LAYER_OPTIONS.get(driver, {}), **creation_options(layer_options)} or None
    facts: dict[str, Any] = {}

    def attempt(promote_geometries: bool) -> None:
        with read_layer(src, layer=name, where=where, bbox=layer_bbox, columns=fields, sql=sql) as s:
            source_crs = assigned or (CRS.from_user_input(s.crs) if s.crs else None)
            column = s.geometry_column
            if column is None and (target or bbox is not None):
                raise GdalMcpError("invalid-argument", "the layer has no geometry: dst_crs and bbox need one")
            if target is not None and source_crs is None:
                raise GdalMcpError("invalid-argument", "the layer has no CRS: pass src_crs to say what it is")
            # With sql the filter box is applied here (an OGR spatial filter: geometries that intersect it).
            box = shapely.box(*bbox_in(bbox, box_crs, source_crs)) if bbox is not None and sql is not None else None
            transformer = None
            if target is not None and source_crs is not None and not target.equals(source_crs):
                transformer = Transformer.from_crs(source_crs, target, always_xy=True)
            out_crs = target or source_crs
            facts["crs"] = out_crs
            schema = s.schema
            if column is not None and out_crs is not None:
                idx = schema.get_field_index(column)
                schema = schema.set(idx, schema.field(idx).with_metadata({
                    b"ARROW:extension:name": b"geoarrow.wkb",
                    b"ARROW:extension:metadata": json.dumps({"crs": out_crs.to_json_dict()}).encode(),
                }))
            facts["failed"] = 0
            facts["input_fields"] = [f.name for f in s.schema if f.name != column]

            changes = box is not None or transformer is not None or explode_collections or promote_geometries

            def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
                if "measured" not in facts:
                    facts["measured"] = has_measures(batch)
                if column is None or not changes:
                    return batch
                geoms = geometries(batch)
                keep = None
                if box is not None:
                    keep = shapely.intersects(geoms, box)
                if transformer is not None:
                    geoms, bad = reproject_geometries(geoms, transformer)
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
            gtype = output_geometry_type(s.geometry_type, explode_collections=explode_collections,
                                         promote_to_multi=promote_geometries)
            write_layer(dst, schema, relay(s.batches, s.total, progress, "converted", transform),
                        driver=driver, layer=out_layer, crs=crs_text(out_crs) if out_crs is not None else None,
                        geometry_type=gtype, layer_options=options)

    out = Path(dst)
    before = set(out.parent.iterdir()) if out.parent.is_dir() else set()
    try:
        attempt(promote_to_multi)
    except GdalMcpError as e:
        source_type = facts.get("source_type", "")
        if driver == "ESRI Shapefile" and "geometry to" in e.message and "shapefile" in e.message:
            raise GdalMcpError("invalid-argument", f"a shapefile holds one geometry type, and this layer mixes "
                               f"several ({e.message.split(': ')[-1]}); write GPKG, GeoJSON or FlatGeobuf, or select "
                               "one type, e.g. where=\"OGR_GEOMETRY = 'POINT'\"") from None
        multi = _multi_of(source_type)
        if promote_to_multi or "mismatched geometry type" not in e.message.lower() or multi is None:
            raise
        # Shapefiles (and lax GeoPackages) declare Polygon yet hold MultiPolygons: strict drivers refuse that.
        for f in _new_files(out, before):
            f.unlink()
        attempt(True)
        notes.append(f"{driver} refused the mix of single and multi-part geometries in this {source_type} layer "
                     f"({e.message.split(': ')[-1]}); wrote every geometry as {multi} (promote_to_multi, like "
                     "ogr2ogr -nlt PROMOTE_TO_MULTI)")
    if facts.get("failed"):
        notes.append(f"{facts['failed']} feature(s) could not be reprojected to {dst_crs} (outside the "
                     "projection's domain) and were left out, as ogr2ogr -skipfailures does")
    summary = _summary(dst, out_layer)
    if summary.feature_count == 0:
        notes.append("no feature matched: the output layer is empty")
    if facts.get("crs") is not None and summary.crs is None and summary.geometry_type is not None:
        notes.append(f"{driver} does not store a CRS: the coordinates are in {crs_label(facts['crs'])}")
    lost = [f for f in facts.get("input_fields", []) if f not in summary.fields]
    if lost and summary.feature_count:  # (an empty GeoJSON has no fields to keep)
        notes.append(f"{driver} did not keep these field names: {', '.join(lost)} (output fields: "
                     f"{', '.join(summary.fields)})")
    if facts.get("measured") and summary.feature_count and not _output_measured(dst, summary.layer):
        notes.append(f"M (measure) values were dropped: {driver} does not store them")
    return summary, notes


def _summary(dst: str, layer: str) -> VectorSummary:
    """summarize_vector of the layer written (shapefile, CSV … name the layer after the file)."""
    names = [n for n, _ in list_layers(dst)]
    return summarize_vector(dst, layer if layer in names or len(names) != 1 else names[0])


def _output_measured(dst: str, layer: str) -> bool:
    """Whether the first features written kept M (pyogrio's non-Arrow reader would drop it)."""
    with read_layer(dst, layer=layer, count=False, batch_size=100) as s:
        return has_measures(next(s.batches, pa.RecordBatch.from_pylist([], schema=s.schema)))


@wrap_gdal_errors
def reproject(src: str, dst: str, *, dst_crs: str, src_crs: str | None = None, layer: str | None = None,
              format: str | None = None, output_layer: str | None = None,
              progress: Progress = no_progress) -> tuple[VectorSummary, list[str]]:
    """Reproject one layer into a new file (ogr2ogr -t_srs); the conversion engine does the work."""
    return convert(src, dst, dst_crs=dst_crs, src_crs=src_crs, layer=layer, format=format, output_layer=output_layer,
                   progress=progress)

