"""Geometry validity report (GEOS is_valid_reason), and optionally a repaired copy (make_valid), streamed.

The report counts invalid geometries grouped by reason (without the coordinates GEOS appends), null and
empty geometries, and lists the first invalid FIDs with their reason and location. With `dst`, a copy is
written batch by batch: invalid geometries are repaired with shapely.make_valid ("structure" method),
keeping only the parts of the original dimension (a collapsed sliver does not turn into a line), valid ones
are copied unchanged; the layer type is promoted to Multi where a repair splits a feature and the format
insists on one type.
"""

from __future__ import annotations

import re
import warnings as pywarnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from gdal_mcp.engine.failures import gdal_message, wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector import layer_map
from gdal_mcp.engine.vector.geomtypes import GeomType, contains_multi, keep_dimension
from gdal_mcp.engine.vector.layer_map import LENIENT_DRIVERS, layer_meta, promotion_note, share, transform_layer
from gdal_mcp.engine.vector.stream import OGR_ERRORS, geometries, relay, vector_driver
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import ValidationReport

MAX_EXAMPLES = 1000
_LOCATION = re.compile(r"^(?P<reason>[^\[]*)\[(?P<x>[-+0-9.eE]+|nan|inf) (?P<y>[-+0-9.eE]+|nan|inf)[^\]]*\]\s*$")


def split_reason(text: str) -> tuple[str, list[float] | None]:
    """('Self-intersection', [x, y]) from GEOS's 'Self-intersection[x y]'."""
    m = _LOCATION.match(text)
    if not m:
        return text.strip(), None
    return m.group("reason").strip(), [float(m.group("x")), float(m.group("y"))]


@contextmanager
def _batches_with_fids(path: str, layer: str) -> Iterator[tuple[str | None, Any]]:
    """(FID column name, batch iterator) of the layer's geometries and FIDs (no attributes).

    stream.read_layer does not ask GDAL for FIDs; this is the same pyogrio call with return_fids.
    """
    import pyogrio.raw

    try:
        with pywarnings.catch_warnings():
            pywarnings.simplefilter("ignore")
            with pyogrio.raw.open_arrow(
                path, layer=layer, columns=[], return_fids=True, batch_size=layer_map.READ_BATCH, use_pyarrow=True
            ) as (meta, reader):
                fid = meta.get("fid_column") or None
                yield fid if fid in reader.schema.names else None, iter(reader)
    except OGR_ERRORS as e:
        raise GdalMcpError("gdal-error", gdal_message(e)) from None


def _feature_count(path: str, layer: str) -> int | None:
    import pyogrio

    try:
        with pywarnings.catch_warnings():
            pywarnings.simplefilter("ignore")
            n = pyogrio.read_info(path, layer=layer, force_feature_count=True)["features"]
        return int(n) if n >= 0 else None
    except Exception:  # noqa: BLE001 - a count is only for progress
        return None


def repair(geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(geometries with the invalid ones made valid, which were invalid, how many lost everything)."""
    import shapely

    geoms = np.asarray(geoms, dtype=object)
    invalid = ~shapely.is_missing(geoms) & ~shapely.is_valid(geoms)
    out = geoms.copy()
    lost = 0
    if invalid.any():
        fixed = shapely.make_valid(geoms[invalid], method="structure", keep_collapsed=False)
        ids = shapely.get_type_id(geoms[invalid])
        dims = np.where(ids == 7, -1, shapely.get_dimensions(geoms[invalid]))
        kept, lost = keep_dimension(fixed, dims)
        out[invalid] = kept
    return out, invalid, lost


@wrap_gdal_errors
def validate(
    path: str, *, dst: str | None = None, layer: str | None = None, max_examples: int = 10, progress: Progress = no_progress
) -> tuple[ValidationReport, list[str]]:
    """Check every geometry of a layer with GEOS; with `dst`, also write a repaired copy there."""
    import shapely

    if not isinstance(max_examples, int) or isinstance(max_examples, bool) or not 0 <= max_examples <= MAX_EXAMPLES:
        raise GdalMcpError("invalid-argument", f"max_examples must be an integer from 0 to {MAX_EXAMPLES}")
    driver = None
    if dst is not None:
        driver = vector_driver(dst, None)
    name, crs, declared = layer_meta(path, layer)
    total = _feature_count(path, name)
    reasons: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    features = invalid_count = empty_count = 0
    needs_multi = False
    check_share = (0.0, 0.5) if dst else (0.0, 1.0)
    # Whether the copy must be Multi: only when the format holds a layer to one type (GPKG, FlatGeobuf …).
    strict = (
        driver is not None
        and declared.dim is not None
        and not declared.multi
        and declared.dim not in LENIENT_DRIVERS.get(driver, ())
    )
    with _batches_with_fids(path, name) as (fid_name, batches):
        for batch in relay(batches, total, share(progress, *check_share), "checked"):
            geoms = geometries(batch)
            n = len(geoms)
            fids = batch.column(fid_name).to_numpy(zero_copy_only=False) if fid_name else np.arange(features, features + n)
            features += n
            empty_count += int((shapely.is_missing(geoms) | shapely.is_empty(geoms)).sum())
            texts = shapely.is_valid_reason(geoms)
            bad = np.array([t is not None and t != "Valid Geometry" for t in texts], dtype=bool)
            invalid_count += int(bad.sum())
            for i in np.flatnonzero(bad):
                reason, where = split_reason(str(texts[i]))
                reasons[reason] += 1
                if len(examples) < max_examples:
                    example: dict[str, Any] = {"fid": int(fids[i]), "reason": reason}
                    if where is not None:
                        example["location"] = where
                    examples.append(example)
            if strict and not needs_multi:
                needs_multi = contains_multi(geoms) or (bool(bad.any()) and contains_multi(repair(geoms[bad])[0]))
    report = ValidationReport(
        path=path,
        layer=name,
        feature_count=features,
        invalid_count=invalid_count,
        empty_count=empty_count,
        reasons=dict(reasons.most_common()),
        examples=examples,
    )
    notes: list[str] = []
    if dst is None:
        progress(1.0, f"checked {features} features: {invalid_count} invalid")
        return report, notes  # (nothing to warn about without a repair)
    counts = {"lost": 0}

    def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
        out, _, gone = repair(geoms)
        counts["lost"] += gone if record else 0
        return out

    # The check pass already knows whether Multi is needed: pass it on instead of a second scan.
    out_type = GeomType(declared.dim, declared.multi or needs_multi, declared.z)
    result = transform_layer(
        path,
        dst,
        layer=name,
        driver=driver or "",
        output_layer=None,
        crs=crs,
        declared=declared,
        out=out_type,
        op=op,
        drop_missing=False,
        split=False,
        progress=share(progress, 0.5, 1.0),
        verb="repaired",
        check_types=False,
        state=(counts,),
    )
    result.promoted = needs_multi
    notes += promotion_note(declared, result)
    if counts["lost"]:
        notes.append(
            f"{counts['lost']} invalid feature(s) collapsed when repaired (nothing of their dimension was left) and "
            "were written with a null geometry"
        )
    report.fixed_output = dst
    report.warnings = list(notes)
    return report, notes
