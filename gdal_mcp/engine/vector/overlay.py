"""Overlay of two layers (geopandas.overlay): intersection, union, difference, symmetric_difference, identity.

The input layer is streamed in batches against an STRtree (shapely 2) of the overlay layer, which is held whole
in memory, reprojected to the input's CRS: so the overlay should be the smaller layer. Per batch:
- intersection pieces: input ∩ overlay for every intersecting pair, with both features' attributes;
- input differences: each input feature minus its intersecting overlay features, in overlay order (as
  geopandas, one difference after the other), with the input's attributes;
- overlay differences (union, symmetric_difference): what is left of each overlay feature once every
  input feature that meets it is subtracted; kept per overlay feature across batches and written at the end.
union = intersection + both differences; identity = intersection + input differences; symmetric_difference =
both differences. Invalid inputs are made valid first (geopandas' make_valid=True), polygonal results made
valid after each operation. With keep_geom_type (the default) only results of the input layer's dimension are
kept (polygon overlays give polygons only: pieces touching along an edge or at a point are dropped, and the parts
of a collection of that dimension kept), and the layer is Multi*; otherwise every piece is kept as it comes
(geometry type Unknown). Field names found on both sides get the suffixes _1 (input) and _2 (overlay), as
geopandas.overlay does; keep_fields="input" keeps only the input's fields, "none" no field.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.convert import promote as to_multi
from gdal_mcp.engine.vector.geomtypes import GeomType, keep_dimension, layer_type
from gdal_mcp.engine.vector.join import LAYER_OPTIONS, _rename, layer_info, load_layer
from gdal_mcp.engine.vector.layer_map import share, write_guarded
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
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

HOWS = ("intersection", "union", "difference", "symmetric_difference", "identity")
KEEP_FIELDS = ("both", "input", "none")
READ_BATCH = BATCH_SIZE
GEOMETRY = pa.field("geometry", pa.binary(), metadata={b"ARROW:extension:name": b"geoarrow.wkb"})


def _valid(geoms: np.ndarray, counts: dict[str, int], key: str) -> np.ndarray:
    """Invalid geometries made valid, keeping their dimension (geopandas.overlay make_valid=True)."""
    import shapely

    bad = ~shapely.is_missing(geoms) & ~shapely.is_valid(geoms)
    if not bad.any():
        return geoms
    out = np.asarray(geoms, dtype=object).copy()
    fixed, _ = keep_dimension(shapely.make_valid(out[bad]), shapely.get_dimensions(out[bad]))
    out[bad] = fixed
    counts[key] += int(bad.sum())
    return out


def _polygonal_valid(geoms: np.ndarray) -> np.ndarray:
    """Polygonal results made valid, as geopandas does after each overlay operation."""
    import shapely

    ids = shapely.get_type_id(geoms)
    poly = ((ids == 3) | (ids == 6)) & ~shapely.is_valid(geoms)
    if poly.any():
        geoms = geoms.copy()
        geoms[poly] = shapely.make_valid(geoms[poly])
    return geoms


def _sequential_difference(base: np.ndarray, owner: np.ndarray, others: np.ndarray) -> np.ndarray:
    """base[k] minus each others[p] with owner[p] == k, one after the other in the order given (vectorised by rank)."""
    import shapely

    out = np.asarray(base, dtype=object).copy()
    if not len(owner):
        return out
    order = np.argsort(owner, kind="stable")
    owner, others = owner[order], others[order]
    starts = np.r_[0, np.flatnonzero(np.diff(owner)) + 1]
    rank = np.arange(len(owner)) - np.repeat(starts, np.diff(np.r_[starts, len(owner)]))
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        k = owner[sel]
        out[k] = shapely.difference(out[k], others[sel])
    return out


@wrap_gdal_errors
def overlay(
    src: str,
    dst: str,
    *,
    overlay: str,
    how: str = "intersection",
    layer: str | None = None,
    overlay_layer: str | None = None,
    keep_fields: str = "both",
    keep_geom_type: bool = True,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorSummary, list[str]]:
    """Overlay `src` with `overlay` (see the module docstring); write `dst`."""
    import shapely

    if how not in HOWS:
        raise GdalMcpError("invalid-argument", f"how must be one of {', '.join(HOWS)}")
    if keep_fields not in KEEP_FIELDS:
        raise GdalMcpError("invalid-argument", f"keep_fields must be one of {', '.join(KEEP_FIELDS)}")
    driver = vector_driver(dst, format)
    name, info = layer_info(src, layer)
    if info.get("geometry_type") is None:
        raise GdalMcpError("invalid-argument", f"layer '{name}' has no geometry")
    crs = info.get("crs")
    declared = layer_type(info.get("geometry_type"))
    dim = declared.dim
    warnings: list[str] = []
    progress(0.0, "reading the overlay layer")
    other = load_layer(overlay, overlay_layer, target_crs=crs)
    if other.geoms is None:
        raise GdalMcpError("invalid-argument", f"the overlay layer '{other.name}' has no geometry")
    if other.unplaced:
        warnings.append(
            f"{other.unplaced} overlay feature(s) could not be placed in the input layer's CRS (outside "
            "the projection's area) and were left out"
        )
    if (other.crs is None) != (crs is None):
        warnings.append("one layer has no CRS: its coordinates were taken as being in the other's CRS")
    counts = {"input_repaired": 0, "overlay_repaired": 0, "dropped": 0}
    ogeoms = _valid(other.geoms, counts, "overlay_repaired")
    odims = shapely.get_dimensions(ogeoms[~shapely.is_missing(ogeoms)])
    if keep_geom_type and dim is None:
        raise GdalMcpError(
            "invalid-argument",
            f"layer '{name}' declares no single geometry type ({info.get('geometry_type')}), "
            "so there is no type to keep; pass keep_geom_type=false",
        )
    tree = shapely.STRtree(ogeoms)
    progress(0.05, f"indexed {len(ogeoms)} overlay features")
    remaining = ogeoms.copy() if how in ("union", "symmetric_difference") else None
    keep_input = keep_fields in ("both", "input")
    keep_overlay = keep_fields == "both" and how != "difference"
    if dim is not None and keep_geom_type:
        out_type = GeomType(dim, True, declared.z or bool(len(odims) and shapely.has_z(ogeoms).any()))
    else:
        out_type = GeomType(None, False, declared.z)

    def finish(geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(kept rows mask, geometries) after the type filter; empties dropped."""
        geoms = _polygonal_valid(np.asarray(geoms, dtype=object))
        if keep_geom_type and dim is not None:
            had = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
            geoms, _ = keep_dimension(geoms, dim)
            counts["dropped"] += int((had & shapely.is_missing(geoms)).sum())
            geoms = to_multi(geoms)
        keep = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
        return keep, geoms

    with read_layer(src, layer=name, batch_size=READ_BATCH) as stream:
        gcol = stream.geometry_column
        in_fields = [f for f in stream.schema if f.name != gcol] if keep_input else []
        ov_fields = list(other.table.schema) if keep_overlay else []
        left, right = _rename([f.name for f in in_fields], [f.name for f in ov_fields], ("_1", "_2"))
        schema = pa.schema(
            [
                *(pa.field(n, f.type) for n, f in zip(left, in_fields, strict=True)),
                *(pa.field(n, f.type) for n, f in zip(right, ov_fields, strict=True)),
                GEOMETRY,
            ]
        )
        otable = other.table.select([f.name for f in ov_fields])

        def rows(batch: pa.RecordBatch, i: np.ndarray, j: np.ndarray | None, geoms: np.ndarray) -> pa.RecordBatch:
            """Output rows: input features i (attributes), overlay features j (None: no overlay attributes)."""
            cols: list[Any] = []
            if in_fields:
                base = batch.select([f.name for f in in_fields])
                cols += list(base.take(pa.array(i)).columns)
            if ov_fields:
                jj = np.full(len(i), -1) if j is None else j
                cols += [c.combine_chunks() for c in otable.take(pa.array(jj, mask=jj < 0)).columns]
            wkb = shapely.to_wkb(geoms, flavor="iso", output_dimension=3) if len(geoms) else []
            cols.append(pa.array(list(wkb), type=pa.binary()))
            return pa.RecordBatch.from_arrays(cols, schema=schema)

        def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
            g = _valid(geometries(batch), counts, "input_repaired")
            i, j = tree.query(g, predicate="intersects")
            order = np.lexsort((j, i))
            i, j = i[order], j[order]
            parts: list[pa.RecordBatch] = []
            if how in ("intersection", "union", "identity") and len(i):
                keep, inter = finish(shapely.intersection(g[i], ogeoms[j]))
                parts.append(rows(batch, i[keep], j[keep], inter[keep]))
            if how in ("difference", "union", "symmetric_difference", "identity"):
                present = np.flatnonzero(~shapely.is_missing(g))
                diff = _sequential_difference(g, i, ogeoms[j])
                keep, diff = finish(diff[present])
                parts.append(rows(batch, present[keep], None, diff[keep]))
            if remaining is not None and len(i):
                jo = np.argsort(j, kind="stable")  # per overlay feature, the input features in input order
                remaining[:] = _sequential_difference(remaining, j[jo], g[i[jo]])
            parts = [p for p in parts if p.num_rows]
            if not parts:
                return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
            if len(parts) == 1:
                return parts[0]
            return pa.Table.from_batches(parts, schema=schema).combine_chunks().to_batches()[0]

        def tail() -> Iterator[pa.RecordBatch]:
            if remaining is None:
                return
            present = np.flatnonzero(~shapely.is_missing(remaining))
            keep, geoms = finish(remaining[present])
            idx = present[keep]
            for start in range(0, len(idx), BATCH_SIZE):
                sel = idx[start : start + BATCH_SIZE]
                cols: list[Any] = [pa.nulls(len(sel), type=f.type) for f in in_fields]
                if ov_fields:
                    cols += [c.combine_chunks() for c in otable.take(pa.array(sel)).columns]
                sub = geoms[keep][start : start + BATCH_SIZE]
                cols.append(pa.array(list(shapely.to_wkb(sub, flavor="iso", output_dimension=3)), type=pa.binary()))
                yield pa.RecordBatch.from_arrays(cols, schema=schema)

        def run() -> None:
            batches = relay(stream.batches, stream.total, share(progress, 0.05, 0.95), "overlaid", transform)
            write_layer(
                dst,
                schema,
                itertools.chain(batches, tail()),
                driver=driver,
                layer=output_layer_name(dst, output_layer),
                crs=crs,
                geometry_type=out_type.name,
                layer_options=LAYER_OPTIONS.get(driver),
            )

        write_guarded(dst, run)
    summary = summarize_vector(dst, output_layer_name(dst, output_layer))
    progress(1.0, f"wrote {summary.feature_count} features")
    if counts["input_repaired"] or counts["overlay_repaired"]:
        warnings.append(
            f"{counts['input_repaired']} input and {counts['overlay_repaired']} overlay geometries were "
            "invalid and made valid (make_valid) first, as geopandas.overlay does; run vector_validate to "
            "see them"
        )
    if counts["dropped"]:
        warnings.append(
            f"{counts['dropped']} piece(s) of another geometry type than the input layer's (e.g. lines "
            "where polygons only touch) were dropped (keep_geom_type=true)"
        )
    if summary.feature_count == 0:
        warnings.append(f"the {how} is empty: the layers do not overlap (vector_info shows their extents and CRSs)")
    return summary, warnings
