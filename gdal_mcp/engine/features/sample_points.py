"""Extract values to points: sample a raster at every feature of a point layer and write them as attributes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import crs_text, select_bands
from gdal_mcp.engine.raster.sample import values_at
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import SampleResult

# Points per batch read (tests lower it to exercise many batches).
POINT_BATCH = 16_384


def _arrow_type(dtype: np.dtype) -> Any:
    """Arrow type of a band's value field: int64 for integer bands (uint64: float64), else float64."""
    import pyarrow as pa

    if dtype.kind in "iub" and not (dtype.kind == "u" and dtype.itemsize == 8):
        return pa.int64()
    return pa.float64()


@wrap_gdal_errors
def sample_layer(
    src: str,
    points: str,
    dst: str,
    *,
    points_layer: str | None = None,
    bands: list[int] | None = None,
    format: str | None = None,
    progress: Progress = no_progress,
) -> tuple[SampleResult, list[str]]:
    """Extract values to points: every feature of a point layer, with one new field per band (band_1 …).

    Points are reprojected to the raster's CRS to find their pixel; the geometries written are the input's,
    unchanged, with all their attributes. Nodata, masked, NaN and off-raster points get null. Streamed in
    Arrow batches: one batch of points in memory at a time.
    """
    import pyarrow as pa
    import shapely

    from gdal_mcp.engine.crs import layer_crs
    from gdal_mcp.engine.geometry_transform import reproject_2d, transformer
    from gdal_mcp.engine.vector.stream import geometries, read_layer, summarize_vector, vector_driver, write_layer

    driver = vector_driver(dst, format)
    warnings: list[str] = []
    counts = {"inside": 0, "outside": 0, "missing": 0, "dropped": 0, "not_point": 0, "done": 0}
    with open_raster(src) as ds:
        indexes = select_bands(ds, bands)
        dtypes = {np.dtype(ds.dtypes[b - 1]) for b in indexes}
        bad = [b for b in indexes if np.dtype(ds.dtypes[b - 1]).kind not in "uifb"]
        if bad:
            raise GdalMcpError("unsupported", f"band(s) {bad} are not real-valued (complex); sample real bands")
        common = np.result_type(*dtypes)
        out_type = _arrow_type(common)
        try:
            inverse = ~ds.transform
        except Exception:  # noqa: BLE001 - a degenerate geotransform
            raise GdalMcpError(
                "invalid-argument", "the raster's geotransform cannot be inverted, so points cannot be placed on it"
            ) from None
        raster_crs = ds.crs if ds.crs and ds.crs.to_wkt() else None
        names = [f"band_{b}" for b in indexes]
        with read_layer(points, layer=points_layer, batch_size=POINT_BATCH) as st:
            if st.geometry_column is None:
                raise GdalMcpError(
                    "invalid-argument", f"layer '{st.layer}' has no geometries; points_input must be a point layer"
                )
            gtype = st.geometry_type.lower()
            if "polygon" in gtype or "line" in gtype:
                raise GdalMcpError(
                    "invalid-argument",
                    f"layer '{st.layer}' holds {st.geometry_type} geometries, not points; use zonal_stats for polygons and lines",
                )
            points_crs = layer_crs(st.crs)
            if points_crs is None and raster_crs is not None:
                warnings.append("the points have no CRS: their coordinates are taken to be in the raster's CRS")
            elif points_crs is not None and raster_crs is None:
                warnings.append("the raster has no CRS: the points' coordinates are taken as the raster's own")
            trans = transformer(points_crs, raster_crs)
            replaced = [n for n in names if n in st.schema.names]
            if replaced:
                warnings.append(f"the points' field(s) {', '.join(replaced)} are replaced by the sampled values")
            kept = [f for f in st.schema if f.name not in names]
            schema = pa.schema(kept + [pa.field(n, out_type) for n in names], metadata=st.schema.metadata)
            total = st.total

            def sampled(batch: pa.RecordBatch) -> pa.RecordBatch:
                raw = geometries(batch)
                missing = shapely.is_missing(raw) | shapely.is_empty(raw)
                counts["missing"] += int(missing.sum())
                geoms, dropped = reproject_2d(raw, trans)
                counts["dropped"] += dropped
                # A point, or a multipoint of one point; anything else is not sampled.
                single = np.array(
                    [
                        g is not None
                        and not g.is_empty
                        and (g.geom_type == "Point" or (g.geom_type == "MultiPoint" and shapely.get_num_geometries(g) == 1))
                        for g in geoms
                    ],
                    dtype=bool,
                )
                counts["not_point"] += int((~single & ~missing).sum()) - dropped
                xy = np.full((len(geoms), 2), np.nan)
                if single.any():
                    xy[single] = shapely.get_coordinates(shapely.get_geometry(geoms[single], 0))[:, :2]
                with np.errstate(invalid="ignore"):
                    col = np.floor(inverse.a * xy[:, 0] + inverse.b * xy[:, 1] + inverse.c)
                    row = np.floor(inverse.d * xy[:, 0] + inverse.e * xy[:, 1] + inverse.f)
                    inside = np.isfinite(col) & np.isfinite(row) & (col >= 0) & (col < ds.width) & (row >= 0) & (row < ds.height)
                counts["inside"] += int(inside.sum())
                counts["outside"] += int((single & ~inside).sum())
                values = np.zeros((len(geoms), len(indexes)), dtype=common)
                null = np.ones((len(geoms), len(indexes)), dtype=bool)
                values[inside], null[inside] = values_at(
                    ds, indexes, row[inside].astype(np.int64), col[inside].astype(np.int64), common
                )
                arrays = [batch.column(f.name) for f in kept]
                arrays += [pa.array(values[:, j], mask=null[:, j]).cast(out_type) for j in range(len(indexes))]
                counts["done"] += batch.num_rows
                progress(
                    min(0.99, counts["done"] / total) if total else 0.5,
                    f"sampled {counts['done']}" + (f"/{total}" if total else "") + " points",
                )
                return pa.record_batch(arrays, schema=schema)

            out_layer = Path(dst).stem
            write_layer(
                dst,
                schema,
                (sampled(b) for b in st.batches),
                driver=driver,
                layer=out_layer,
                crs=st.crs,
                geometry_type=st.geometry_type,
            )
        if counts["outside"]:
            b = ds.bounds
            warnings.append(
                f"{counts['outside']} point(s) lie outside the raster, whose bounds are [{b.left}, "
                f"{b.bottom}, {b.right}, {b.top}] in {crs_text(ds.crs)}; their values are null"
            )
        if counts["missing"]:
            warnings.append(f"{counts['missing']} feature(s) have no geometry; their values are null")
        if counts["dropped"]:
            warnings.append(f"{counts['dropped']} point(s) could not be projected to the raster's CRS; their values are null")
        if counts["not_point"] > 0:
            warnings.append(
                f"{counts['not_point']} feature(s) are multipoints of several points; they are not "
                "sampled (values null): explode them first (vector_convert explode_collections=true)"
            )
        crs_name = crs_label(ds.crs)
    summary = summarize_vector(dst, out_layer)
    progress(1.0, f"sampled {counts['inside']} point(s) inside the raster")
    result = SampleResult(
        path=src, crs=crs_name, bands=indexes, points=[], summary=summary, sampled=counts["inside"], warnings=warnings
    )
    return result, warnings
