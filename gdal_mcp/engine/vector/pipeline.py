"""Several vector steps in one streamed pass: GDAL 3.12's `gdal vector pipeline` (read ! step ! … ! write).

The steps come as plain dicts ({"step": "buffer", "distance": 100, …}, the tool's typed steps dumped); this module
checks them and turns each into GDAL pipeline arguments, then runs the whole pipeline once through
engine/algorithms.py on pyogrio's GDAL (the one with every vector driver the other vector tools read and write).

Each step is checked where GDAL sees it: the read and the first k steps are run with a streamed output (nothing is
read yet) and the layer they make is described (pipeline_layers), so a step GDAL refuses fails naming its index,
and a step that depends on the layer before it (a bbox in another CRS, a distance in metres on a lon/lat layer)
is built from that layer. The same walk is the plan (`plan`).

Units, as vector_buffer and vector_simplify have them: a buffer distance or simplify tolerance is in `units`
(metres by default). On a geographic layer a ground distance is applied in the UTM zone of the data (GDAL
reprojects there, buffers or simplifies, and reprojects back: the same zone vector_buffer picks, units.plan_units);
data too wide for one zone is refused (vector_buffer handles it per feature). Degrees only with units deg/layer.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector import pipeline_layers as layers
from gdal_mcp.engine.vector.pipeline_layers import LayerState
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import (
    VectorPipelineField,
    VectorPipelinePlan,
    VectorPipelineRun,
    VectorPipelineStage,
    VectorSummary,
)

LIBRARY = "pyogrio"
PIPELINE = ["vector", "pipeline"]
STREAM = ["!", "write", "--of=stream", "--output=streamed_dataset"]
#: plan_only counts features exactly (reading the input through the steps) up to this many input features
PLAN_COUNT_LIMIT = 50_000

_REQUIRED = object()
#: every step: its parameters and their defaults (_REQUIRED: must be given)
STEPS: dict[str, dict[str, Any]] = {
    "reproject": {"dst_crs": _REQUIRED, "src_crs": None},
    "filter": {"where": None, "bbox": None, "bbox_crs": None},
    "select": {"fields": _REQUIRED, "exclude": False},
    "sql": {"sql": _REQUIRED, "sql_dialect": "OGRSQL"},
    "clip": {
        "bbox": None,
        "bbox_crs": None,
        "geometry": None,
        "geometry_crs": None,
        "mask": None,
        "mask_layer": None,
        "mask_where": None,
    },
    "make_valid": {"method": "structure", "keep_lower_dim": False},
    "explode_collections": {},
    "set_geom_type": {"geometry_type": None, "multi": False, "single": False, "dim": None, "skip": False},
    "simplify": {"tolerance": _REQUIRED, "units": "m"},
    "buffer": {
        "distance": _REQUIRED,
        "units": "m",
        "segments": 8,
        "cap_style": "round",
        "join_style": "round",
        "side": "both",
    },
    "segmentize": {"max_length": _REQUIRED},
    "limit": {"limit": _REQUIRED},
    "swap_xy": {},
}
#: steps after which the feature count is the one before (GDAL keeps every feature, maybe with a null geometry)
KEEPS_COUNT = frozenset({"reproject", "select", "make_valid", "simplify", "buffer", "segmentize", "swap_xy"})
#: steps that can only drop features (the count before is a bound)
DROPS = frozenset({"filter", "clip", "limit"})
#: steps that work on geometries (refused on a layer without one)
GEOMETRY_STEPS = frozenset(
    {"reproject", "clip", "make_valid", "explode_collections", "set_geom_type", "simplify", "buffer", "segmentize", "swap_xy"}
)
#: plan_only counts the features of an input without a stored count by reading it, up to this file size
PLAN_COUNT_BYTES = 64 * 1024 * 1024
GEOMETRY_TYPES = ("Point", "LineString", "Polygon", "MultiPoint", "MultiLineString", "MultiPolygon", "GeometryCollection")
MAKE_VALID_METHODS = ("linework", "structure")
DIMS = ("XY", "XYZ", "XYM", "XYZM")
SIDES = ("both", "left", "right")
CAP_STYLES = ("round", "flat", "square")
JOIN_STYLES = ("round", "mitre", "bevel")


# ----- the steps, checked ------------------------------------------------------------------------------------


def _where(i: int | None, name: str) -> str:
    return "read" if i is None else f"steps[{i}] ({name})"


def _bad(i: int, name: str, message: str) -> GdalMcpError:
    return GdalMcpError("invalid-argument", f"{_where(i, name)}: {message}")


def check_steps(steps: Any) -> list[dict[str, Any]]:
    """Every step a dict with a known `step` and only its own parameters; defaults filled in."""
    if not isinstance(steps, list | tuple):
        raise GdalMcpError(
            "invalid-argument", "steps must be a list of steps, e.g. [{'step': 'reproject', 'dst_crs': 'EPSG:3857'}]"
        )
    out = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("step"), str):
            raise GdalMcpError("invalid-argument", f"steps[{i}] must be an object with a 'step' name")
        name = step["step"]
        if name in ("read", "write"):
            raise _bad(
                i,
                name,
                f"'{name}' is not a step here: the pipeline reads `input` (and `layer`) first and writes `output` "
                "last by itself; list only the steps between",
            )
        if name not in STEPS:
            raise _bad(i, name, f"unknown step; steps are {', '.join(STEPS)}")
        if name == "sql" and i > 0:
            # GDAL 3.12's pipeline runs the SQL on the dataset as read: a filter, limit or explode before it is silently
            # ignored (177 rows out of a 51-row filter), and with OGRSQL most other steps before it crash GDAL.
            raise _bad(
                i,
                name,
                "sql must be the first step: GDAL runs it on the input as read, so steps before it would be ignored; "
                "put their conditions in the SELECT (WHERE, LIMIT, ST_Transform with sql_dialect='SQLITE') and the "
                "other steps after it",
            )
        spec = STEPS[name]
        unknown = sorted(set(step) - set(spec) - {"step"})
        if unknown:
            raise _bad(i, name, f"unknown parameter(s) {', '.join(unknown)}; {name} takes {', '.join(spec) or 'none'}")
        values = {"step": name}
        for key, default in spec.items():
            value = step.get(key, None if default is _REQUIRED else default)
            if value is None and default is _REQUIRED:
                raise _bad(i, name, f"{key} is required")
            values[key] = value
        _check_values(i, values)
        out.append(values)
    return out


def _number(i: int, name: str, key: str, value: Any, *, positive: bool = False, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(i, name, f"{key} must be a finite number")
    if positive and not value > 0:
        raise _bad(i, name, f"{key} must be greater than 0")
    if minimum is not None and value < minimum:
        raise _bad(i, name, f"{key} must be at least {minimum:g}")
    return float(value)


def _choice(i: int, name: str, key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _bad(i, name, f"{key} must be one of {', '.join(choices)} (got {value!r})")


def _check_values(i: int, s: dict[str, Any]) -> None:
    """Types and ranges GDAL would otherwise refuse less clearly (or not at all)."""
    name = s["step"]
    if name == "filter" and s["where"] is None and s["bbox"] is None:
        raise _bad(i, name, "give where, bbox or both")
    if name == "filter" and s["bbox_crs"] is not None and s["bbox"] is None:
        raise _bad(i, name, "bbox_crs only applies with bbox")
    if name == "select":
        fields = s["fields"]
        if not isinstance(fields, list | tuple) or not fields or not all(isinstance(f, str) and f for f in fields):
            raise _bad(i, name, "fields must be a non-empty list of field names")
    if name == "sql":
        _choice(i, name, "sql_dialect", str(s["sql_dialect"]).upper(), ("OGRSQL", "SQLITE"))
    if name == "clip":
        given = [k for k in ("bbox", "geometry", "mask") if s[k] is not None]
        if len(given) != 1:
            raise _bad(i, name, f"give exactly one of bbox, geometry or mask (got {' and '.join(given) or 'none'})")
        owners = {"bbox_crs": "bbox", "geometry_crs": "geometry", "mask_layer": "mask", "mask_where": "mask"}
        for key, owner in owners.items():
            if s[key] is not None and owner != given[0]:
                raise _bad(i, name, f"{key} only applies with {owner}")
    if name == "make_valid":
        _choice(i, name, "method", s["method"], MAKE_VALID_METHODS)
    if name == "set_geom_type":
        if s["geometry_type"] is not None:
            _choice(i, name, "geometry_type", s["geometry_type"], GEOMETRY_TYPES)
        if s["dim"] is not None:
            _choice(i, name, "dim", s["dim"], DIMS)
        if s["multi"] and s["single"]:
            raise _bad(i, name, "multi and single exclude each other")
        if s["geometry_type"] is None and s["dim"] is None and not (s["multi"] or s["single"]):
            raise _bad(i, name, "give geometry_type, multi, single or dim")
    if name == "simplify":
        _number(i, name, "tolerance", s["tolerance"], positive=True)
    if name == "buffer":
        _number(i, name, "distance", s["distance"])
        if not isinstance(s["segments"], int) or isinstance(s["segments"], bool) or not 1 <= s["segments"] <= 64:
            raise _bad(i, name, "segments (per quarter circle) must be an integer from 1 to 64")
        _choice(i, name, "cap_style", s["cap_style"], CAP_STYLES)
        _choice(i, name, "join_style", s["join_style"], JOIN_STYLES)
        _choice(i, name, "side", s["side"], SIDES)
    if name == "segmentize":
        _number(i, name, "max_length", s["max_length"], positive=True)
    if name == "limit" and (not isinstance(s["limit"], int) or isinstance(s["limit"], bool) or s["limit"] < 0):
        raise _bad(i, name, "limit must be an integer >= 0")


# ----- GDAL arguments ----------------------------------------------------------------------------------------


def _num(value: float) -> str:
    return algorithms.number(value)


def _gdal_crs(text: str, what: str) -> str:
    """A CRS as GDAL is given it: EPSG:n when exactly that, else WKT2 (never the user's text: names, files …)."""
    from gdal_mcp.engine.crs import parse_pyproj_crs
    from gdal_mcp.engine.vector.convert import crs_text

    return crs_text(parse_pyproj_crs(text, what))


def _pyproj(state: LayerState) -> Any:
    from pyproj import CRS

    return CRS.from_user_input(state.crs) if state.crs else None


def _multi_capable(geometry_type: str | None) -> bool:
    base = (geometry_type or "").removesuffix(" Z")
    return base in ("Point", "LineString", "Polygon")


@dataclass
class _Context:
    """What building a step may need besides the layer before it."""

    masks: list[str]
    extent: Callable[[int], tuple[float, float, float, float]]  # the extent after steps[:k] (reads them)
    notes: list[str] = field(default_factory=list)
    sql: bool = False  # an sql step came before


def _units_sandwich(
    i: int, s: dict[str, Any], state: LayerState, ctx: _Context, *, amount_key: str, op: list[str], what: str, verb: str
) -> list[str]:
    """`op` (its last token, "--distance=", completed with the amount) in the frame plan_units picks: the layer's
    own units, or the data's UTM zone (reproject there and back)."""
    from pyproj import CRS

    from gdal_mcp.engine.vector.convert import crs_text
    from gdal_mcp.engine.vector.units import plan_units

    value = float(s[amount_key])
    try:
        frame = plan_units(value, s["units"], state.crs, what=what, verb=verb, bounds=lambda: ctx.extent(i))
    except GdalMcpError as e:
        raise GdalMcpError(e.code, f"{_where(i, s['step'])}: {e.message}") from None
    ctx.notes += [f"{_where(i, s['step'])}: {n}" for n in frame.notes]
    if frame.kind == "layer":
        return [*op[:-1], op[-1] + _num(frame.amount)]
    if frame.kind != "utm":
        raise GdalMcpError(
            "unsupported",
            f"{_where(i, s['step'])}: the layer is geographic and its data spans too wide an area for one UTM zone, so a "
            f"{what} in {s['units']} cannot be applied in one projection here; reproject first (a reproject step to "
            f"a projected CRS covering the data), or use vector_{s['step']}, which works per feature",
        )
    zone = CRS.from_user_input(frame.forward.target_crs)
    code = zone.to_epsg(min_confidence=70)
    utm = f"EPSG:{code}" if code and CRS.from_epsg(code).equals(zone, ignore_axis_order=True) else crs_text(zone)
    back = state.crs or ""
    return ["reproject", f"--dst-crs={utm}", "!", *op[:-1], op[-1] + _num(frame.amount), "!", "reproject", f"--dst-crs={back}"]


def step_arguments(i: int, s: dict[str, Any], state: LayerState, ctx: _Context) -> list[str]:
    """The GDAL pipeline arguments of steps[i] (one or more GDAL steps joined by '!'), given the layer before it."""
    name = s["step"]
    if state.geometry_type is None and (name in GEOMETRY_STEPS or (name == "filter" and s["bbox"] is not None)):
        hint = " (an sql step keeps the geometry only when it selects it, e.g. SELECT name, geometry FROM …)" if ctx.sql else ""
        raise _bad(i, name, f"the layer '{state.name}' has no geometry at this step: nothing to {name.replace('_', ' ')}{hint}")
    if name == "reproject":
        out = ["reproject", "--dst-crs=" + _gdal_crs(s["dst_crs"], "dst_crs")]
        if s["src_crs"] is not None:
            out += ["--src-crs=" + _gdal_crs(s["src_crs"], "src_crs")]
        return out
    if name == "filter":
        return _filter(i, s, state)
    if name == "select":
        return _select(i, s, state)
    if name == "sql":
        from gdal_mcp.engine.vector.stream import check_sql

        ctx.sql = True
        try:
            text = check_sql(s["sql"], s["sql_dialect"])
        except GdalMcpError as e:
            raise _bad(i, name, e.message) from None
        return ["sql", f"--sql={text}", "--dialect=" + str(s["sql_dialect"]).upper(), f"--output-layer={state.name}"]
    if name == "clip":
        return _clip(i, s, state, ctx)
    if name == "make_valid":
        return ["make-valid", f"--method={s['method']}", *(["--keep-lower-dim"] if s["keep_lower_dim"] else [])]
    if name == "explode_collections":
        return ["explode-collections"]
    if name == "set_geom_type":
        out = ["set-geom-type"]
        if s["geometry_type"] is not None:
            out += ["--geometry-type=" + s["geometry_type"].upper()]
        out += ["--multi"] if s["multi"] else ["--single"] if s["single"] else []
        out += [f"--dim={s['dim']}"] if s["dim"] is not None else []
        return out + (["--skip"] if s["skip"] else [])
    if name == "simplify":
        return _units_sandwich(
            i, s, state, ctx, amount_key="tolerance", op=["simplify", "--tolerance="], what="tolerance", verb="simplified"
        )
    if name == "buffer":
        op = [
            "buffer",
            f"--quadrant-segments={s['segments']}",
            f"--endcap-style={s['cap_style']}",
            f"--join-style={s['join_style']}",
            f"--side={s['side']}",
            "--distance=",
        ]
        args = _units_sandwich(i, s, state, ctx, amount_key="distance", op=op, what="distance", verb="buffered")
        # GDAL 3.12's buffer keeps the layer's declared type (Point for buffered points: a shapefile or FlatGeobuf then
        # refuses the polygons); declared and written MultiPolygon, as later GDAL versions do
        return [*args, "!", "set-geom-type", "--geometry-type=MULTIPOLYGON"]
    if name == "segmentize":
        return ["segmentize", "--max-length=" + _num(s["max_length"])]
    if name == "limit":
        return ["limit", f"--limit={s['limit']}"]
    if name == "swap_xy":
        return ["swap-xy"]
    raise _bad(i, name, "unknown step")  # (check_steps refused it already)


def _filter(i: int, s: dict[str, Any], state: LayerState) -> list[str]:
    from gdal_mcp.engine.bbox import bbox_in
    from gdal_mcp.engine.crs import parse_pyproj_crs
    from gdal_mcp.engine.vector.where import check_where

    out = ["filter"]
    if s["where"] is not None:
        try:
            check_where(s["where"], [f[0] for f in state.fields], ["OFT" + f[1] for f in state.fields])
        except GdalMcpError as e:
            raise _bad(i, "filter", e.message) from None
        out += ["--where=" + s["where"]]
    if s["bbox"] is not None:
        box_crs = parse_pyproj_crs(s["bbox_crs"], "bbox_crs") if s["bbox_crs"] is not None else None
        try:
            box = bbox_in(s["bbox"], box_crs, _pyproj(state))
        except GdalMcpError as e:
            raise _bad(i, "filter", e.message) from None
        out += ["--bbox=" + ",".join(_num(v) for v in box)]
    return out


def _select(i: int, s: dict[str, Any], state: LayerState) -> list[str]:
    names = [f[0] for f in state.fields]
    missing = [f for f in s["fields"] if f not in names]
    if missing:
        raise GdalMcpError(
            "not-found", f"{_where(i, 'select')}: field(s) {missing} not found; the layer's fields here are: {', '.join(names)}"
        )
    if s["exclude"]:
        return ["select", "--exclude", "--fields=" + ",".join(s["fields"])]
    geometry = [g or "_ogr_geometry_" for g in state.geometry_fields]
    return ["select", "--fields=" + ",".join([*s["fields"], *geometry])]


def _clip(i: int, s: dict[str, Any], state: LayerState, ctx: _Context) -> list[str]:
    """The clip region (bbox, GeoJSON or the polygons of a mask file) as vector_clip builds it, in the layer's CRS;
    a single-part layer is made multi-part first so a feature cut in pieces stays one feature."""
    import shapely

    from gdal_mcp.engine.crs import parse_crs
    from gdal_mcp.engine.features.masks import mask_polygons

    if s["mask"] is not None and s["mask"] not in ctx.masks:
        raise _bad(i, "clip", "mask must be one of the datasets listed in `mask` (the paths the clip steps read)")
    target = parse_crs(state.crs, "layer CRS") if state.crs else None
    if target is None and (s["mask"] is not None or (s["geometry"] is not None and s["geometry_crs"] is None)):
        ctx.notes.append(f"{_where(i, 'clip')}: the layer has no CRS: the clip coordinates were taken as the layer's own")
    try:
        polygons, _ = mask_polygons(
            target_crs=target,
            target="layer",
            bbox=s["bbox"],
            bbox_crs=s["bbox_crs"],
            geometry=s["geometry"],
            geometry_crs=s["geometry_crs"],
            mask=s["mask"],
            mask_layer=s["mask_layer"],
            mask_where=s["mask_where"],
        )
    except GdalMcpError as e:
        raise GdalMcpError(e.code, f"{_where(i, 'clip')}: {e.message}") from None
    region = shapely.union_all(polygons)
    out = ["clip", "--geometry=" + shapely.to_wkt(region, rounding_precision=-1)]
    if _multi_capable(state.geometry_type) and not (state.geometry_type or "").startswith("Point"):
        # GDAL's clip writes each piece of a cut single-part feature as a feature of its own: multi-part first, the
        # pieces stay one feature (as vector_clip and ogr2ogr -clipsrc keep them)
        out = ["set-geom-type", "--multi", "!", *out]
    return out


def read_arguments(src: str, layer: str, open_options: dict[str, str]) -> list[str]:
    out = ["read", f"--input-layer={layer}"]
    for key, value in open_options.items():
        out += [f"--oo={key}={value}"]
    return [*out, f"--input={src}"]


# ----- walking the pipeline -----------------------------------------------------------------------------------


def _gdal_message(e: GdalMcpError) -> str:
    text = e.message
    for prefix in ("gdal vector pipeline failed: ", "gdal vector pipeline: "):
        text = text.removeprefix(prefix)
    return text


@contextmanager
def _streamed(tokens: list[str]) -> Iterator[tuple[algorithms.Algorithm, int]]:
    """The pipeline `tokens` run with a streamed output: (the algorithm, its one layer), valid inside. GDAL's
    messages while inside go to the algorithm's warnings and errors."""
    with algorithms.algorithm(PIPELINE, [*tokens, *STREAM], library=LIBRARY) as alg:
        alg.run(finalize=False)
        with alg._errors():
            yield alg, layers.only_layer(alg.lib, alg.dataset("output"), "the pipeline")


@dataclass
class _Walk:
    """Every stage of a pipeline: the tokens of read + the steps, and the layer after each."""

    tokens: list[str]  # read ! step ! … (no write)
    stages: list[tuple[int | None, str, str, LayerState]]  # (index, step, its GDAL text, layer after it)
    bounds: list[int]  # token count after each stage
    notes: list[str]


def _describe(tokens: list[str], i: int | None, name: str) -> LayerState:
    try:
        with _streamed(tokens) as (alg, layer):
            return layers.describe(alg.lib, layer)
    except GdalMcpError as e:
        if i is None or e.code not in ("invalid-argument", "gdal-error"):
            raise
        raise GdalMcpError("invalid-argument", f"{_where(i, name)}: {_gdal_message(e)}") from None


def walk_pipeline(
    src: str,
    *,
    layer: str | None,
    open_options: dict[str, str] | None,
    steps: list[dict[str, Any]],
    masks: list[str],
    progress: Progress,
) -> _Walk:
    """Check the read and each step where GDAL sees it, building each from the layer before it."""
    from gdal_mcp.engine.vector.opening import choose_layer, list_layers, open_options_for

    name = choose_layer(src, layer, list_layers(src))
    tokens = read_arguments(src, name, open_options_for(src, open_options))
    state = _describe(tokens, None, "read")
    walk = _Walk(tokens, [(None, "read", _render(tokens), state)], [len(tokens)], [])

    def extent(k: int) -> tuple[float, float, float, float]:
        progress(0.05 * (k + 1) / (len(steps) + 1), f"reading the features up to steps[{k}] for their extent")
        with _streamed(walk.tokens[: walk.bounds[k]]) as (alg, lyr):
            return layers.extent(alg.lib, lyr)

    ctx = _Context(masks=masks, extent=extent, notes=walk.notes)
    for i, s in enumerate(steps):
        progress(0.05 * (i + 1) / (len(steps) + 1), f"checking steps[{i}] ({s['step']})")
        args = step_arguments(i, s, state, ctx)
        tokens = [*walk.tokens, "!", *args]
        state = _describe(tokens, i, s["step"])
        walk.tokens = tokens
        walk.stages.append((i, s["step"], _render(args), state))
        walk.bounds.append(len(tokens))
    return walk


# ----- the output ---------------------------------------------------------------------------------------------


def write_arguments(
    dst: str, *, format: str | None, output_layer: str | None, layer_options: dict[str, Any] | None, state: LayerState
) -> tuple[str, str, list[str]]:
    """(driver, layer name, the write step's arguments): the format's own layer options (CSV geometry as WKT and a
    .csvt) under the caller's, as every vector tool writes."""
    from gdal_mcp.engine.options import creation_options
    from gdal_mcp.engine.vector.stream import LAYER_OPTIONS, output_layer_name, vector_driver

    driver = vector_driver(dst, format)
    if driver.upper() in ("MEM", "MEMORY"):
        raise GdalMcpError(
            "invalid-argument", f"format {format!r} writes nothing to disk; pick a file format (GPKG, FlatGeobuf …)"
        )
    name = output_layer_name(dst, output_layer)
    defaults = {k: v for k, v in LAYER_OPTIONS.get(driver, {}).items() if state.geometry_type is not None or k != "GEOMETRY"}
    options = {**defaults, **creation_options(layer_options)}
    out = ["write", f"--of={driver}", f"--output-layer={name}"]
    for key, value in options.items():
        out += [f"--lco={key}={value}"]
    return driver, name, [*out, f"--output={dst}"]


_ANY = LayerState(name="", crs=None, geometry_type="Unknown")  # (to check the output's arguments before the walk)


def _fields(state: LayerState) -> list[VectorPipelineField]:
    return [VectorPipelineField(name=n, type=t, subtype=sub) for n, t, sub in state.fields]


def _crs_label(state: LayerState) -> str | None:
    from gdal_mcp.engine.crs import describe_crs

    info = describe_crs(state.crs) if state.crs else None
    return None if info is None else (f"EPSG:{info.epsg}" if info.epsg else info.name)


def _small(src: str) -> bool:
    """A plain file small enough to count by reading it."""
    try:
        return Path(src).stat().st_size <= PLAN_COUNT_BYTES
    except OSError:
        return False


def _counts(src: str, walk: _Walk, steps: list[dict[str, Any]], progress: Progress) -> list[tuple[int | None, str]]:
    """(count, what it is) after each stage: GDAL's own when it knows it, counted when the input is small enough
    (PLAN_COUNT_LIMIT), else derived from the stage before (see VectorPipelineStage.feature_count_is)."""
    out: list[tuple[int | None, str]] = []
    source = walk.stages[0][3].fast_count
    for k, (_, name, _, state) in enumerate(walk.stages):
        progress(0.05 + 0.9 * k / len(walk.stages), f"counting the features after {name}")
        if state.fast_count is not None:
            out.append((state.fast_count, "exact"))
            continue
        if (k == 0 and _small(src)) or (k > 0 and source is not None and source <= PLAN_COUNT_LIMIT):
            with _streamed(walk.tokens[: walk.bounds[k]]) as (alg, layer):
                n = layers.count(alg.lib, layer)
            out.append((n, "exact"))
            source = n if k == 0 else source
            continue
        if k == 0:
            out.append((None, "unknown"))
            continue
        before, kind = out[-1]
        s = steps[k - 1]
        if name in KEEPS_COUNT or (name == "set_geom_type" and not s["skip"]):
            out.append((before, kind))
        elif name == "limit":
            known = before if before is not None and kind in ("exact", "at_most") else None
            out.append((s["limit"] if known is None else min(known, s["limit"]), "at_most"))
        elif name in DROPS or name == "set_geom_type":  # (set_geom_type with skip: drops what it cannot convert)
            out.append((before, "at_most") if kind in ("exact", "at_most") else (None, "unknown"))
        elif name == "explode_collections":
            out.append((before, "at_least") if kind in ("exact", "at_least") else (None, "unknown"))
        else:
            out.append((None, "unknown"))
    return out


def _quote(token: str) -> str:
    """A token as a POSIX shell takes it, readably: bare, in double quotes when it holds single quotes only."""
    if token == "!" or shlex.quote(token) == token:
        return token
    if "'" in token and not any(ch in token for ch in '"$`\\!'):
        return f'"{token}"'
    return shlex.quote(token)


def _render(tokens: list[str]) -> str:
    """The arguments as a shell would take them ('!' left bare, as GDAL's documentation writes pipelines)."""
    return " ".join(_quote(t) for t in tokens)


_GPKG_TYPE = re.compile(
    r"A geometry of type (\S+) is inserted into layer (.+?) of geometry type (\S+), which is not normally allowed by the "
    r"GeoPackage specification"
)


def _readable(warning: str) -> str:
    """GDAL's long GeoPackage type warning, said briefly with what to do."""
    m = _GPKG_TYPE.match(warning)
    if m is None:
        return warning
    names = {t.upper(): t for t in GEOMETRY_TYPES}
    return (
        f"layer '{m.group(2)}' is declared {names.get(m.group(3), m.group(3))} but holds {names.get(m.group(1), m.group(1))} "
        "geometries (GDAL wrote them; "
        "the GeoPackage specification wants one type): add a set_geom_type step with multi=true for a conformant file"
    )


@wrap_gdal_errors
def plan(
    src: str,
    *,
    steps: list[dict[str, Any]],
    dst: str,
    layer: str | None = None,
    open_options: dict[str, str] | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    layer_options: dict[str, Any] | None = None,
    mask: list[str] | None = None,
    progress: Progress = no_progress,
) -> VectorPipelinePlan:
    """What `pipeline` would do, nothing written: the layer after the read and after each step (name, CRS,
    geometry type, fields, feature count: exact, or a bound where counting would read more than
    PLAN_COUNT_LIMIT input features through the steps), the output format and layer. `dst` only names the
    output (its extension gives the format)."""
    checked = check_steps(steps)
    write_arguments(dst, format=format, output_layer=output_layer, layer_options=layer_options, state=_ANY)  # (checked first)
    walk = walk_pipeline(src, layer=layer, open_options=open_options, steps=checked, masks=list(mask or []), progress=progress)
    driver, name, write = write_arguments(
        dst, format=format, output_layer=output_layer, layer_options=layer_options, state=walk.stages[-1][3]
    )
    counts = _counts(src, walk, checked, progress)
    stages = [
        VectorPipelineStage(
            index=index,
            step=step,
            gdal=text,
            layer=state.name,
            crs=_crs_label(state),
            geometry_type=state.geometry_type,
            fields=_fields(state),
            feature_count=n,
            feature_count_is=kind,  # type: ignore[arg-type]
        )
        for (index, step, text, state), (n, kind) in zip(walk.stages, counts, strict=True)
    ]
    progress(1.0, "planned")
    return VectorPipelinePlan(
        stages=stages, format=driver, output_layer=name, pipeline=_render([*walk.tokens, "!", *write]), warnings=walk.notes
    )


def _remove_written(dst: str) -> None:
    """Whatever a failed write left of `dst` (the file and its sidecars) in its directory."""
    target = Path(dst)
    if not target.parent.is_dir():
        return
    stem = target.name.split(".")[0]
    for f in target.parent.iterdir():
        if f.is_file() and f.name.split(".")[0] == stem:
            f.unlink()


@wrap_gdal_errors
def pipeline(
    src: str,
    dst: str,
    *,
    steps: list[dict[str, Any]],
    layer: str | None = None,
    open_options: dict[str, str] | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    layer_options: dict[str, Any] | None = None,
    mask: list[str] | None = None,
    progress: Progress = no_progress,
) -> tuple[VectorPipelineRun, list[str]]:
    """Read one layer of `src`, apply `steps` in order and write `dst`, in one streamed GDAL pass.

    steps: dicts {"step": name, …parameters} (STEPS lists them and their defaults). open_options: dataset open
    options (GDAL -oo). format: OGR driver (default from dst's extension); output_layer: default dst's name;
    layer_options: layer creation options (-lco). mask: the vector files clip steps read (a clip step's mask must
    be one of them). A strict format refusing a single-part layer's multi-part features (a shapefile's polygons
    into FlatGeobuf) is written again with every geometry multi-part, as vector_convert does.
    """
    from gdal_mcp.engine.vector.stream import summarize_vector

    checked = check_steps(steps)
    write_arguments(dst, format=format, output_layer=output_layer, layer_options=layer_options, state=_ANY)  # (checked first)
    walk = walk_pipeline(src, layer=layer, open_options=open_options, steps=checked, masks=list(mask or []), progress=progress)
    last = walk.stages[-1][3]
    driver, name, write = write_arguments(dst, format=format, output_layer=output_layer, layer_options=layer_options, state=last)
    warnings = list(walk.notes)
    tokens = [*walk.tokens, "!", *write]
    try:
        gdal_warnings = _run(tokens, progress)
    except GdalMcpError as e:
        _remove_written(dst)
        if "mismatched geometry type" not in e.message.lower() or not _multi_capable(last.geometry_type):
            raise _explained(e, driver) from None
        tokens = [*walk.tokens, "!", "set-geom-type", "--multi", "!", *write]
        gdal_warnings = _run(tokens, progress)
        warnings.append(
            f"{driver} refused the mix of single and multi-part geometries of this {last.geometry_type} layer; every "
            "geometry was written multi-part (set-geom-type --multi, like ogr2ogr -nlt PROMOTE_TO_MULTI)"
        )
    overflow = next((w for w in gdal_warnings if "overflow occurred" in w), None)
    if overflow is not None:
        raise GdalMcpError(
            "invalid-argument",
            f"a value did not fit its column ({overflow}); GDAL types an SQL result column from its first row: "
            "CAST the expression AS REAL, or ORDER BY it descending so the largest value comes first",
        )
    summary: VectorSummary = summarize_vector(dst, name)
    warnings += [_readable(w) for w in gdal_warnings]
    if summary.feature_count == 0:
        warnings.append("no feature came through the steps: the output layer is empty")
    lost = [f for f, _, _ in last.fields if f not in summary.fields]
    if lost and summary.feature_count:
        warnings.append(
            f"{driver} did not keep these field names: {', '.join(lost)} (output fields: {', '.join(summary.fields)})"
        )
    return VectorPipelineRun(summary=summary, format=driver, pipeline=_render(tokens)), warnings


def _run(tokens: list[str], progress: Progress) -> list[str]:
    with algorithms.algorithm(PIPELINE, tokens, library=LIBRARY) as alg:
        alg.run(progress, message="running the vector pipeline", start=0.05, scale=0.95)
        return alg.warnings


def _explained(e: GdalMcpError, driver: str) -> GdalMcpError:
    """GDAL's failure of the run, with what to do where we know it (other failures, a cancel …, as they are)."""
    if e.code != "gdal-error":
        return e
    message = _gdal_message(e)
    if driver == "ESRI Shapefile" and "geometry to" in message.lower() and "shapefile" in message.lower():
        return GdalMcpError(
            "invalid-argument",
            f"a shapefile holds one geometry type, and the pipeline's output mixes several ({message}); write GPKG, "
            "GeoJSON or FlatGeobuf, or keep one type (a filter step with where=\"OGR_GEOMETRY = 'POLYGON'\")",
        )
    return GdalMcpError(e.code, f"gdal vector pipeline: {message}")
