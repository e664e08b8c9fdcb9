"""raster_pipeline's steps: the tool's vocabulary ({"step": "reproject", "dst_crs": …}) as GDAL's arguments.

`check_steps` refuses an unknown step, an unknown argument or a bad value, naming the step's index, before GDAL sees
anything; `step_argv` gives a step's `gdal raster pipeline` arguments (engine/raster/pipeline.py plans and runs them).
The names and meanings are the separate tools' (raster_reproject, raster_clip, raster_convert, raster_fill_nodata,
raster_terrain); where GDAL spells a value otherwise (cubic_spline, Float32 …) it is translated here.
"""

from __future__ import annotations

import math
from typing import Any

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.crs import parse_crs
from gdal_mcp.errors import GdalMcpError

MAX_STEPS = 20
#: the keys each step takes (besides "step")
STEP_KEYS: dict[str, frozenset[str]] = {
    "reproject": frozenset(
        {
            "dst_crs",
            "src_crs",
            "resampling",
            "resolution",
            "size",
            "bbox",
            "bbox_crs",
            "target_aligned_pixels",
            "nodata",
            "src_nodata",
        }
    ),
    "clip": frozenset({"bbox", "bbox_crs", "like", "all_touched"}),
    "resize": frozenset({"size", "resolution", "resampling"}),
    "select": frozenset({"bands"}),
    "set-type": frozenset({"output_type"}),
    "fill-nodata": frozenset({"band", "max_distance", "smoothing_iterations"}),
    "hillshade": frozenset({"band", "z_factor", "azimuth", "altitude", "scale", "algorithm", "hillshade_mode", "compute_edges"}),
    "slope": frozenset({"band", "slope_units", "scale", "algorithm", "compute_edges"}),
    "aspect": frozenset({"band", "trigonometric", "algorithm", "compute_edges"}),
    "roughness": frozenset({"band", "compute_edges"}),
    "tri": frozenset({"band", "compute_edges"}),
    "tpi": frozenset({"band", "compute_edges"}),
}
TERRAIN = ("hillshade", "slope", "aspect", "roughness", "tri", "tpi")
#: our resampling names (models.Resampling) as GDAL's reproject and resize steps spell them
WARP_RESAMPLING = {
    "nearest": "nearest",
    "bilinear": "bilinear",
    "cubic": "cubic",
    "cubic_spline": "cubicspline",
    "lanczos": "lanczos",
    "average": "average",
    "rms": "rms",
    "mode": "mode",
    "min": "min",
    "max": "max",
    "med": "med",
    "q1": "q1",
    "q3": "q3",
    "sum": "sum",
}
RESIZE_RESAMPLING = {k: v for k, v in WARP_RESAMPLING.items() if k in ("nearest", "bilinear", "cubic", "cubic_spline", "lanczos")}
RESIZE_RESAMPLING.update({"average": "average", "mode": "mode"})
HILLSHADE_VARIANTS = {"standard": "regular", "combined": "combined", "multidirectional": "multidirectional", "igor": "Igor"}
DATA_TYPES = ("Byte", "Int8", "UInt16", "Int16", "UInt32", "Int32", "UInt64", "Int64", "Float32", "Float64")


# ----------------------------------------------------------------------------------------------- steps


def bad(index: int, step: Any, message: str) -> GdalMcpError:
    name = step.get("step") if isinstance(step, dict) else None
    return GdalMcpError("invalid-argument", f"steps[{index}]" + (f" ({name})" if name else "") + f": {message}")


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return algorithms.number(float(value))


def _pair(value: Any, what: str, *, positive: bool = True, integer: bool = False) -> list[float]:
    values = [value, value] if isinstance(value, int | float) and not isinstance(value, bool) else value
    if not isinstance(values, list | tuple) or len(values) != 2:
        raise ValueError(f"{what} must be one number or [x, y]")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or (positive and v <= 0):
            raise ValueError(f"{what} must be {'positive ' if positive else ''}numbers (got {value!r})")
        if integer and not float(v).is_integer():
            raise ValueError(f"{what} must be whole numbers of pixels (got {value!r})")
    return [float(v) for v in values]


def _bbox(value: Any) -> list[float]:
    if not isinstance(value, list | tuple) or len(value) != 4:
        raise ValueError("bbox must be [minx, miny, maxx, maxy]")
    box = [float(_number(v)) for v in value]
    if not (box[0] < box[2] and box[1] < box[3]):
        raise ValueError("bbox must be [minx, miny, maxx, maxy] with min < max")
    return box


def _crs_arg(value: Any, what: str) -> str:
    """A CRS for GDAL's argument parser: EPSG:n when the CRS is exactly that code, else WKT2 (never a file or URL:
    parse_crs refuses them)."""
    from rasterio.crs import CRS

    crs = parse_crs(value, what)
    code = crs.to_epsg()
    if code and CRS.from_epsg(code) == crs:
        return f"EPSG:{code}"
    return str(crs.to_wkt("WKT2_2019"))


def _band(step: dict[str, Any]) -> list[str]:
    band = step.get("band", 1)
    if isinstance(band, bool) or not isinstance(band, int) or band < 1:
        raise ValueError(f"band must be a band number >= 1 (got {band!r})")
    return ["--band", str(band)]


def _edges(step: dict[str, Any]) -> list[str]:
    return [] if step.get("compute_edges", False) else ["--no-edges"]


def _scale(step: dict[str, Any]) -> list[str]:
    scale = step.get("scale")
    if scale is None:
        return []
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
        raise ValueError(f"scale must be a positive number (got {scale!r})")
    return ["--xscale", _number(scale), "--yscale", _number(scale)]


def _algorithm(step: dict[str, Any]) -> list[str]:
    alg = step.get("algorithm", "Horn")
    if alg not in ("Horn", "ZevenbergenThorne"):
        raise ValueError(f"algorithm must be Horn or ZevenbergenThorne (got {alg!r})")
    return ["--gradient-alg", alg]


def step_argv(step: dict[str, Any], *, threads: int = 1) -> list[str]:
    """GDAL's arguments for one step (its name first); ValueError saying what is wrong with it."""
    name = step["step"]
    if name == "reproject":
        return _reproject_argv(step, threads)
    if name == "clip":
        if (step.get("bbox") is None) == (step.get("like") is None):
            raise ValueError("give bbox (with bbox_crs when it is not in the raster's CRS) or like, one of them")
        if not isinstance(step.get("all_touched", False), bool):
            raise ValueError("all_touched must be true or false")
        if step.get("like") is not None:
            if step.get("bbox_crs") is not None:
                raise ValueError("bbox_crs goes with bbox; like carries its own CRS")
            return ["clip", "--like", str(step["like"])]  # build_plan clips a pixel window (raster_clip's rule)
        argv = ["clip", "--bbox", ",".join(_number(v) for v in _bbox(step["bbox"]))]
        if step.get("bbox_crs") is not None:
            argv += ["--bbox-crs", _crs_arg(step["bbox_crs"], "bbox_crs")]
        return argv
    if name == "resize":
        argv = ["resize"] + _grid_size(step)
        method = step.get("resampling", "nearest")
        if method not in RESIZE_RESAMPLING:
            raise ValueError(f"resampling {method!r} cannot resize; use one of {', '.join(RESIZE_RESAMPLING)}")
        return argv + ["--resampling", RESIZE_RESAMPLING[method]]
    if name == "select":
        bands = step.get("bands")
        if not isinstance(bands, list) or not bands or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in bands):
            raise ValueError(f"bands must be a non-empty list of band numbers >= 1 (got {bands!r})")
        return ["select", *[a for b in bands for a in ("--band", str(b))]]
    if name == "set-type":
        output_type = step.get("output_type")
        if output_type not in DATA_TYPES:
            raise ValueError(f"output_type must be one of {', '.join(DATA_TYPES)} (got {output_type!r})")
        return ["set-type", "--output-data-type", output_type]
    if name == "fill-nodata":
        distance, smoothing = step.get("max_distance", 100), step.get("smoothing_iterations", 0)
        if isinstance(distance, bool) or not isinstance(distance, int) or distance < 1:
            raise ValueError(f"max_distance must be a whole number of pixels >= 1 (got {distance!r})")
        if isinstance(smoothing, bool) or not isinstance(smoothing, int) or smoothing < 0:
            raise ValueError(f"smoothing_iterations must be an integer >= 0 (got {smoothing!r})")
        return ["fill-nodata", *_band(step), "--max-distance", str(distance), "--smoothing-iterations", str(smoothing)]
    if name == "hillshade":
        mode = step.get("hillshade_mode", "standard")
        if mode not in HILLSHADE_VARIANTS:
            raise ValueError(f"hillshade_mode must be one of {', '.join(HILLSHADE_VARIANTS)} (got {mode!r})")
        argv = ["hillshade", *_band(step), "--zfactor", _number(step.get("z_factor", 1.0)), *_scale(step), *_algorithm(step)]
        argv += ["--variant", HILLSHADE_VARIANTS[mode]]
        if mode != "multidirectional":  # GDAL refuses an azimuth there (four lights), and an altitude with igor
            argv += ["--azimuth", _number(step.get("azimuth", 315.0))]
        if mode != "igor":
            argv += ["--altitude", _number(step.get("altitude", 45.0))]
        return argv + _edges(step)
    if name == "slope":
        units = step.get("slope_units", "degrees")
        if units not in ("degrees", "percent"):
            raise ValueError(f"slope_units must be degrees or percent (got {units!r})")
        unit = "degree" if units == "degrees" else "percent"
        return ["slope", *_band(step), "--unit", unit, *_scale(step), *_algorithm(step), *_edges(step)]
    if name == "aspect":
        argv = ["aspect", *_band(step), *_algorithm(step)]
        if step.get("trigonometric", False):
            argv += ["--convention", "trigonometric-angle"]
        return argv + _edges(step)
    if name in ("roughness", "tri", "tpi"):
        return [name, *_band(step), *_edges(step)]
    raise ValueError(f"unknown step {name!r}")  # check_steps refuses it first


def _grid_size(step: dict[str, Any]) -> list[str]:
    if step.get("size") is not None and step.get("resolution") is not None:
        raise ValueError("give resolution or size, not both")
    if step.get("size") is not None:
        w, h = _pair(step["size"], "size", integer=True)
        return ["--size", f"{int(w)},{int(h)}"]
    if step.get("resolution") is not None:
        return ["--resolution", ",".join(_number(v) for v in _pair(step["resolution"], "resolution"))]
    if step["step"] == "resize":
        raise ValueError("give size ([width, height] in pixels) or resolution (pixel size in the raster's CRS units)")
    return []


def _reproject_argv(step: dict[str, Any], threads: int) -> list[str]:
    argv = ["reproject"]
    if step.get("dst_crs") is not None:
        argv += ["--dst-crs", _crs_arg(step["dst_crs"], "dst_crs")]
    if step.get("src_crs") is not None:
        argv += ["--src-crs", _crs_arg(step["src_crs"], "src_crs")]
    method = step.get("resampling", "nearest")
    if method not in WARP_RESAMPLING:
        raise ValueError(f"resampling {method!r} cannot reproject; use one of {', '.join(WARP_RESAMPLING)}")
    argv += ["--resampling", WARP_RESAMPLING[method]]
    argv += _grid_size(step)
    if step.get("dst_crs") is None and step.get("resolution") is None and step.get("size") is None:
        raise ValueError("say what grid to make: dst_crs (to reproject), or resolution / size (to resample in the same CRS)")
    if step.get("bbox") is not None:
        argv += ["--bbox", ",".join(_number(v) for v in _bbox(step["bbox"]))]
        if step.get("bbox_crs") is not None:
            argv += ["--bbox-crs", _crs_arg(step["bbox_crs"], "bbox_crs")]
    elif step.get("bbox_crs") is not None:
        raise ValueError("bbox_crs goes with bbox")
    if step.get("target_aligned_pixels", False):
        if step.get("resolution") is None:
            raise ValueError("target_aligned_pixels needs resolution")
        argv.append("--target-aligned-pixels")
    if step.get("src_nodata") is not None:
        argv += ["--src-nodata", nodata_text(step["src_nodata"])]
    # rasterio.warp.reproject's settings (raster_reproject): a pixel is nodata when all its bands are
    return argv + ["--num-threads", str(max(1, threads)), "--warp-option", "UNIFIED_SRC_NODATA=YES"]


def nodata_text(value: float) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"nodata must be a number (got {value!r})")
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return algorithms.number(float(value))


def check_steps(steps: Any) -> list[dict[str, Any]]:
    """The steps, each a dict with a known `step` and only that step's keys; invalid-argument naming the first bad one."""
    if not isinstance(steps, list) or not steps:
        raise GdalMcpError("invalid-argument", 'steps must be a non-empty list of steps, e.g. [{"step": "reproject", …}]')
    if len(steps) > MAX_STEPS:
        raise GdalMcpError("invalid-argument", f"at most {MAX_STEPS} steps (got {len(steps)})")
    out = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise bad(i, None, f'a step is an object such as {{"step": "clip", "bbox": […]}}, not {step!r}')
        name = step.get("step")
        if name in ("read", "write"):
            raise bad(i, step, f"'{name}' is not a step here: the pipeline reads `input` and writes `output`")
        if name not in STEP_KEYS:
            raise bad(i, step, f"unknown step {name!r}; use one of {', '.join(STEP_KEYS)}")
        extra = sorted(set(step) - STEP_KEYS[name] - {"step"})
        if extra:
            raise bad(i, step, f"unknown argument(s) {', '.join(extra)}; {name} takes {', '.join(sorted(STEP_KEYS[name]))}")
        clean = {k: v for k, v in step.items() if v is not None}
        try:
            step_argv(clean)  # the arguments' own rules, before GDAL sees them
        except ValueError as e:
            raise bad(i, step, str(e)) from None
        except GdalMcpError as e:  # a CRS parse_crs refuses
            raise bad(i, step, e.message) from None
        out.append(clean)
    return out
