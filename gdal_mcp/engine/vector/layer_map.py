"""The read -> map -> write loop of the vector engines that rewrite geometries (buffer, simplify, clip, validate
fixes): `transform_layer` streams a layer batch by batch through an operation and decides the output geometry
type (a first pass checks whether Multi is needed when the output format insists)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import disk_full
from gdal_mcp.engine.progress import Progress
from gdal_mcp.engine.vector.convert import promote as to_multi
from gdal_mcp.engine.vector.geomtypes import GeomType, contains_multi, layer_type
from gdal_mcp.engine.vector.opening import choose_layer
from gdal_mcp.engine.vector.stream import (
    BATCH_SIZE,
    LAYER_OPTIONS,
    geometries,
    output_layer_name,
    read_layer,
    relay,
    summarize_vector,
    with_geometries,
    write_layer,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

# Features per batch read (tests lower it to exercise many batches).
READ_BATCH = BATCH_SIZE
# Output formats that do not hold a layer to one geometry type (no Multi promotion needed), by dimension.
LENIENT_DRIVERS: dict[str, tuple[int, ...]] = {"GeoJSON": (0, 1, 2), "GeoJSONSeq": (0, 1, 2), "ESRI Shapefile": (1, 2)}


# op(geometries, record=True) -> new geometries (None for none); record=False in the type-checking pass,
# which must leave counters and notes alone.
Op = Callable[..., np.ndarray]


def share(progress: Progress, start: float, end: float) -> Progress:
    """A progress that reports `fraction` of the span start..end of `progress`."""

    def report(fraction: float, message: str = "") -> None:
        progress(start + (end - start) * fraction, message)

    return report


def layer_meta(src: str, layer: str | None) -> tuple[str, str | None, GeomType]:
    """(layer name, CRS text, declared geometry type) without reading features."""
    import warnings

    import pyogrio

    name = choose_layer(src, layer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = pyogrio.read_info(src, layer=name)
    if info.get("geometry_type") is None:
        raise GdalMcpError("invalid-argument", f"layer '{name}' has no geometry (a plain table)")
    return name, info.get("crs"), layer_type(info.get("geometry_type"))


def _siblings(dst: str) -> set[Path]:
    path = Path(dst)
    if not path.parent.is_dir():
        return set()
    stem = path.name.rsplit(".", 1)[0]
    return {p for p in path.parent.iterdir() if p.name.rsplit(".", 1)[0] == stem}


def write_guarded(dst: str, write: Callable[[], None]) -> None:
    """Run `write`; on failure remove the files it created (dst and sidecars such as .shx, .dbf)."""
    before = _siblings(dst)
    try:
        write()
    except BaseException as exc:
        full = disk_full(exc, dst)  # before the partial files go: removing them frees the disk again
        for p in _siblings(dst) - before:
            try:
                p.unlink()
            except OSError:
                pass
        if full is not None:
            raise full from exc
        raise


@dataclass
class MapResult:
    summary: VectorSummary
    output_type: GeomType
    promoted: bool
    written: int
    notes: list[str] = field(default_factory=list)


def transform_layer(
    src: str,
    dst: str,
    *,
    layer: str,
    driver: str,
    output_layer: str | None,
    crs: str | None,
    declared: GeomType,
    out: GeomType,
    op: Op,
    drop_missing: bool,
    split: bool,
    progress: Progress,
    verb: str,
    bbox: tuple[float, float, float, float] | None = None,
    check_types: bool = True,
    state: tuple[Any, ...] = (),
    pass_batch: bool = False,
) -> MapResult:
    """Stream `src` through `op` (geometries -> geometries, None for none) into a new layer of `dst`.

    `out` is the output type before promotion; a single-part `out` becomes Multi when the input already
    holds multi-part geometries or, with `split`, when op makes some (checked in a first pass that runs
    op(geoms, record=False) on each batch until one is found). check_types=False skips that pass: the caller
    already made `out` Multi when needed. Features whose new geometry is None are dropped
    with `drop_missing`, else written with a null geometry. A FlatGeobuf spatial index cannot hold null
    geometries: when one comes, the layer is written again without the index; `state` (dicts or objects
    op counts in) is then restored first, so nothing is counted twice. pass_batch: op also receives the batch
    (batch=…) for its attributes.
    """
    name = output_layer_name(dst, output_layer)
    progress = monotonic(progress)
    promoted = False
    start = 0.0
    # A Point layer holds no MultiPoints (shapefile keeps them apart); Polygon/LineString shapefiles hold both.
    single_points = declared.dim == 0 and not declared.multi and not split
    if (
        check_types
        and not single_points
        and out.dim is not None
        and not out.multi
        and out.dim not in LENIENT_DRIVERS.get(driver, ())
    ):
        reporter = share(progress, 0.0, 0.3)
        with read_layer(src, layer=layer, bbox=bbox, batch_size=READ_BATCH) as stream:
            for batch in relay(stream.batches, stream.total, reporter, "checked geometry types of"):
                geoms = geometries(batch)
                extra = {"batch": batch} if pass_batch else {}
                if contains_multi(geoms) or (split and contains_multi(op(geoms, record=False, **extra))):
                    promoted = True
                    break
        start = 0.3
    final = GeomType(out.dim, out.multi or promoted, out.z)
    force_multi = final.multi and final.dim is not None
    written = 0

    def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
        nonlocal written
        import shapely

        new = np.asarray(op(geometries(batch), **({"batch": batch} if pass_batch else {})), dtype=object)
        if drop_missing:
            keep = ~shapely.is_missing(new)
            if not keep.all():
                batch, new = batch.filter(pa.array(keep)), new[keep]
        if force_multi:
            new = to_multi(new)
        written += batch.num_rows
        return with_geometries(batch, new)

    def write(options: dict[str, str] | None) -> Callable[[], None]:
        def run() -> None:
            with read_layer(src, layer=layer, bbox=bbox, batch_size=READ_BATCH) as stream:
                batches = relay(stream.batches, stream.total, share(progress, start, 0.98), verb, transform)
                write_layer(
                    dst,
                    stream.schema,
                    batches,
                    driver=driver,
                    layer=name,
                    crs=crs,
                    geometry_type=final.name,
                    layer_options={**LAYER_OPTIONS.get(driver, {}), **(options or {})},
                )

        return run

    notes: list[str] = []
    saved = [_snapshot(o) for o in state]
    try:
        write_guarded(dst, write(None))
    except GdalMcpError as e:
        if driver != "FlatGeobuf" or "null geometry not supported with spatial index" not in e.message.lower():
            raise
        for o, snap in zip(state, saved, strict=True):
            _restore(o, snap)
        written = 0
        write_guarded(dst, write({"SPATIAL_INDEX": "NO"}))
        notes.append(NO_INDEX_NOTE)
    summary = summarize_vector(dst, name)
    progress(1.0, f"wrote {summary.feature_count} features")
    return MapResult(summary, final, promoted, written, notes)


NO_INDEX_NOTE = (
    "some features have no geometry, which a FlatGeobuf spatial index cannot hold: the file was written without a spatial index"
)


def _snapshot(o: Any) -> dict[str, Any]:
    return dict(o) if isinstance(o, dict) else dict(vars(o))


def _restore(o: Any, snap: dict[str, Any]) -> None:
    if isinstance(o, dict):
        o.clear()
    (o if isinstance(o, dict) else vars(o)).update(snap)


def monotonic(progress: Progress) -> Progress:
    """A progress that never goes back (a retried pass reports from where it was)."""
    high = 0.0

    def report(fraction: float, message: str = "") -> None:
        nonlocal high
        high = max(high, fraction)
        progress(high, message)

    return report


def promotion_note(declared: GeomType, result: MapResult) -> list[str]:
    """The warnings about the output layer: Multi promotion, FlatGeobuf without index."""
    if not result.promoted:
        return list(result.notes)
    before = GeomType(result.output_type.dim, False, result.output_type.z).name
    return [
        f"the output layer is {result.output_type.name}, not {before}: some features are multi-part (the "
        f"input layer declares {declared.name})",
        *result.notes,
    ]


def _geos_error() -> type[Exception]:
    import shapely.errors

    return shapely.errors.GEOSException
