"""Tile indexes: one polygon per raster (or per layer of each vector dataset) with the dataset's path, GDAL 3.12's
`gdal raster index` / `gdal vector index` (formerly gdaltindex / ogrtindex).

GDAL writes the index into a staging GeoPackage (rasterio's GDAL writes few vector formats); the layer is then
rewritten into the output with pyogrio, in any vector format, and:

- `location` made workspace-relative. GDAL stores each path as it was given, and the worker is given real paths:
  written as they are, they would hand the server's directory layout to whoever reads the index. Each stored path
  is replaced by the name the user knows the input by (`names`, from the server's sandbox); one that matches no
  input fails the job before anything is written, so no real path ever reaches the file. GDAL's GTI driver
  resolves relative locations against the current directory: opened from the workspace root, the index is a
  mosaic (GTI:index.gpkg).
- `src_srs` (each input's CRS, as GDAL writes it: EPSG:n, else WKT) kept only when the extents were reprojected:
  to `dst_crs`, or, when the inputs are in several CRSs, to the first input's (GDAL itself would mix coordinates
  of several CRSs in one layer, or skip the vector layers in another CRS).
- optional text fields with metadata items of each raster (e.g. TIFFTAG_DATETIME), read from its header.

Vector inputs give one feature per layer, located as "path,layer index" (GDAL's and ogrtindex's convention);
different schemas are accepted (GDAL would skip the layers whose fields differ from the first one's).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import pyarrow as pa

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.stream import output_layer_name, summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import DatasetIndexResult

LOCATION = "location"
SRS_FIELD = "src_srs"
STAGE_DRIVER = "GPKG"
#: text fields longer than this are cut by the DBF of a shapefile
DBF_WIDTH = 254
MAX_LISTED = 100
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$")


# ----- staging: GDAL writes, pyogrio rewrites -------------------------------------------------
@contextlib.contextmanager
def staging(dst: str) -> Iterator[str]:
    """A private directory beside `dst` (inside the job's temporary output directory, the one place it may write) for
    GDAL's own output; removed on exit, so only the rewritten output is committed."""
    directory = tempfile.mkdtemp(prefix=".stage-", dir=os.path.dirname(os.path.abspath(dst)))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def read_staged(path: str) -> tuple[dict[str, Any], pa.Table]:
    """(pyogrio's layer metadata, the whole layer as an Arrow table) of a staged layer (small: one row per file, or a
    footprint's few polygons)."""
    import pyogrio

    meta, table = pyogrio.read_arrow(path)
    return meta, table


def geometry_index(table: pa.Table) -> int:
    """Position of the WKB geometry column of a table pyogrio read."""
    for i, field in enumerate(table.schema):
        if (field.metadata or {}).get(b"ARROW:extension:name") == b"geoarrow.wkb":
            return i
    raise GdalMcpError("internal-error", "the staged layer has no geometry column")


def write_staged(dst: str, table: pa.Table, *, driver: str, layer: str, crs: str | None, geometry_type: str) -> list[str]:
    """Write the rewritten table as the output layer (the geometry column named `geometry`); a warning when the
    format cannot say what CRS the coordinates are in."""
    g = geometry_index(table)
    field = table.schema.field(g)
    table = table.set_column(g, pa.field("geometry", field.type, metadata=field.metadata), table.column(g))
    batches = table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)]
    write_layer(dst, table.schema, iter(batches), driver=driver, layer=layer, crs=crs, geometry_type=geometry_type)
    if driver in ("GeoJSON", "GeoJSONSeq") and crs:
        from pyproj import CRS

        code = CRS.from_user_input(crs).to_epsg(min_confidence=90)
        if code is None:
            return [
                f"{driver} records a CRS only by its EPSG code and this one has none: readers will take the coordinates "
                "for lon/lat (EPSG:4326); write .gpkg instead, or pass dst_crs (e.g. EPSG:4326)"
            ]
    return []


# ----- the index ------------------------------------------------------------------------------
def _detect(path: str) -> Literal["raster", "vector"]:
    """raster when the first input opens as a raster with bands, else vector."""
    from gdal_mcp.engine.raster.opening import open_raster

    try:
        with open_raster(path) as ds:
            return "raster" if ds.count else "vector"
    except GdalMcpError as e:
        if e.code in ("unsupported", "gdal-error"):
            return "vector"
        raise


def _check(
    inputs: list[str],
    names: list[str],
    dataset_type: str | None,
    layers: list[str] | None,
    metadata_fields: list[str] | None,
) -> None:
    if not inputs:
        raise GdalMcpError("invalid-argument", "give at least one dataset to index")
    if len(names) != len(inputs):
        raise GdalMcpError("internal-error", "names must name every input")
    if dataset_type not in (None, "raster", "vector"):
        raise GdalMcpError("invalid-argument", f"dataset_type must be raster or vector, got {dataset_type!r}")
    if layers is not None and (not layers or not all(isinstance(x, str) and x for x in layers)):
        raise GdalMcpError("invalid-argument", "layers must be a non-empty list of layer names; omit it for every layer")
    for name in metadata_fields or []:
        if not isinstance(name, str) or not _FIELD_NAME.match(name):
            raise GdalMcpError("invalid-argument", f"metadata field {name!r} is not a usable field name (letters, digits, _ . -)")
        if name.lower() in (LOCATION, SRS_FIELD):
            raise GdalMcpError("invalid-argument", f"metadata field {name!r} would replace the index's own {name.lower()} field")
    if metadata_fields is not None and len({n.lower() for n in metadata_fields}) != len(metadata_fields):
        raise GdalMcpError("invalid-argument", "metadata_fields names an item twice")


def _run(
    kind: str, inputs: list[str], stage: str, target: str | None, layers: list[str] | None, progress: Progress, start: float
) -> list[str]:
    """GDAL's index of `inputs` into the GeoPackage `stage`, with each input's CRS in src_srs; GDAL's warnings."""
    argv = [*inputs, stage, "--output-format", STAGE_DRIVER, "--output-layer", "index", "--source-crs-field-name", SRS_FIELD]
    if kind == "vector":
        argv += ["--accept-different-schemas", "--accept-different-crs"]
        for layer in layers or []:
            argv += ["--source-layer-name", layer]
    if target is not None:
        argv += ["--dst-crs", target]
    with algorithms.algorithm([kind, "index"], argv) as alg:
        alg.run(progress, message=f"indexing {len(inputs)} {kind} dataset(s)", start=start, scale=0.4)
        return [w for w in alg.warnings if "not using the same" not in w]


def _locations(values: list[Any], inputs: list[str], names: list[str]) -> tuple[list[str], list[str]]:
    """(workspace-relative locations, the input each feature comes from) for the paths GDAL stored: 'path' for a
    raster, 'path,layer index' for a vector layer. A path that is no input is never written (internal-error)."""
    known = dict(zip(inputs, names, strict=True))
    shown, sources = [], []
    for value in values:
        text = value if isinstance(value, str) else ""
        base, comma, index = text.rpartition(",")
        if text in known:
            shown.append(known[text])
            sources.append(text)
        elif comma and index.isdigit() and base in known:
            shown.append(f"{known[base]},{index}")
            sources.append(base)
        else:
            raise GdalMcpError(
                "internal-error",
                "GDAL stored a dataset location that is none of the inputs; nothing was written (the index must only "
                "hold workspace paths)",
            )
    return shown, sources


def _short_srs(values: list[str | None]) -> list[str | None]:
    """src_srs values a shapefile's 254-character text field holds: a WKT too long for it as a PROJ string (what
    GDAL's AUTO format writes there)."""
    from pyproj import CRS

    out: list[str | None] = []
    for value in values:
        if value and len(value) > DBF_WIDTH:
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "you will likely lose information": what GDAL's AUTO does too
                value = CRS.from_user_input(value).to_proj4()
        out.append(value)
    return out


def _metadata(sources: list[str], items: list[str], progress: Progress) -> dict[str, list[str | None]]:
    """Each raster's value of each metadata item (default domain; None when it has none)."""
    from gdal_mcp.engine.raster.opening import open_raster

    if not items:
        return {}
    tags: dict[str, dict[str, str]] = {}
    for i, path in enumerate(sources):
        if path not in tags:
            with open_raster(path) as ds:
                tags[path] = dict(ds.tags())
        progress(0.85 + 0.1 * (i + 1) / len(sources), "reading metadata")
    return {item: [tags[p].get(item) for p in sources] for item in items}


def _having_layers(inputs: list[str], names: list[str], layers: list[str]) -> list[str]:
    """The vector inputs that have one of `layers` (GDAL stops with "No layer to index" when the first has none)."""
    from gdal_mcp.engine.vector.opening import list_layers

    wanted = set(layers)
    having = [path for path in inputs if wanted & {name for name, _ in list_layers(path)}]
    if not having:
        shown = ", ".join(names[:5]) + (" …" if len(names) > 5 else "")
        raise GdalMcpError(
            "invalid-argument", f"no input has a layer named {', '.join(layers)} ({shown}); vector_info lists their layers"
        )
    return having


@wrap_gdal_errors
def dataset_index(
    inputs: list[str],
    dst: str,
    *,
    names: list[str],
    dataset_type: Literal["raster", "vector"] | None = None,
    dst_crs: str | None = None,
    layers: list[str] | None = None,
    metadata_fields: list[str] | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[DatasetIndexResult, list[str]]:
    """A tile index of `inputs` written to `dst` (see the module docstring). `names` are the inputs as the user
    knows them (workspace-relative), written in the location field instead of the paths the worker opens."""
    _check(inputs, names, dataset_type, layers, metadata_fields)
    driver = vector_driver(dst, format)
    layer = output_layer_name(dst, output_layer)
    kind: Literal["raster", "vector"] = dataset_type or _detect(inputs[0])
    if kind == "raster" and layers is not None:
        raise GdalMcpError("invalid-argument", "layers applies to vector datasets; rasters are indexed whole")
    if kind == "vector" and metadata_fields:
        raise GdalMcpError("invalid-argument", "metadata_fields applies to rasters (their metadata items)")
    chosen = inputs
    if kind == "vector" and layers is not None:
        chosen = _having_layers(inputs, names, layers)
    target = parse_crs(dst_crs, "dst_crs").to_wkt() if dst_crs is not None else None
    label = crs_label(parse_crs(dst_crs, "dst_crs")) if dst_crs is not None else None
    notes: list[str] = []
    with staging(dst) as directory:
        stage = os.path.join(directory, "index.gpkg")
        gdal_warnings = _run(kind, chosen, stage, target, layers, progress, 0.0)
        meta, table = read_staged(stage)
        srs = [s or None for s in table.column(SRS_FIELD).to_pylist()]
        shown, sources = _locations(table.column(LOCATION).to_pylist(), inputs, names)
        by_path = dict(zip(inputs, names, strict=True))
        lacking = sorted({by_path[sources[i]] for i, s in enumerate(srs) if s is None})
        without = sum(s is None for s in srs)
        if without and (target is not None or without < len(srs)):
            raise GdalMcpError(
                "invalid-argument",
                f"{len(lacking)} input(s) have no CRS ({', '.join(lacking[:5])}), so their extents cannot be put in the "
                "index's CRS; index them separately, or give them a CRS first",
            )
        if target is None and len(set(srs)) > 1:
            first = parse_crs(str(srs[0]), "the first input's CRS")
            target, label = first.to_wkt(), crs_label(first)
            notes.append(
                f"the inputs are in {len(set(srs))} CRSs: extents reprojected to the first input's ({label}); "
                f"{SRS_FIELD} holds each input's own CRS (pass dst_crs to choose another)"
            )
            stage = os.path.join(directory, "index2.gpkg")
            gdal_warnings = _run(kind, chosen, stage, target, layers, progress, 0.4)
            meta, table = read_staged(stage)
            srs = [s or None for s in table.column(SRS_FIELD).to_pylist()]
            shown, sources = _locations(table.column(LOCATION).to_pylist(), inputs, names)
        progress(0.85, "writing the index")
        columns: dict[str, Any] = {LOCATION: pa.array(shown, pa.string())}
        if target is not None:
            columns[SRS_FIELD] = pa.array(_short_srs(srs) if driver == "ESRI Shapefile" else srs, pa.string())
        for item, values in _metadata(sources, metadata_fields or [], progress).items():
            columns[item] = pa.array(values, pa.string())
        if driver == "ESRI Shapefile" and any(len(s) > DBF_WIDTH for s in shown):
            raise GdalMcpError(
                "invalid-argument", f"a location is longer than a shapefile field holds ({DBF_WIDTH}); write .gpkg instead"
            )
        g = geometry_index(table)
        fields = [*(pa.field(k, v.type) for k, v in columns.items()), table.schema.field(g)]
        out = pa.table([*columns.values(), table.column(g)], schema=pa.schema(fields))
        notes += write_staged(dst, out, driver=driver, layer=layer, crs=meta.get("crs"), geometry_type="Polygon")
    summary = summarize_vector(dst, layer)
    indexed = set(sources)
    missing = [n for p, n in zip(inputs, names, strict=True) if p not in indexed]
    if missing:
        notes.append(f"{len(missing)} input(s) have no feature in the index (see not_indexed)")
    progress(1.0, f"indexed {summary.feature_count} {'raster' if kind == 'raster' else 'layer'}(s)")
    result = DatasetIndexResult(
        summary=summary,
        dataset_type=kind,
        inputs=len(inputs),
        indexed=summary.feature_count,
        reprojected_to=label,
        not_indexed=missing[:MAX_LISTED],
    )
    return result, notes + gdal_warnings
