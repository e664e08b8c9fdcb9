"""Decision prompts: each takes a dataset path and builds its text from the dataset's real metadata."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from fastmcp.exceptions import PromptError
from fastmcp.prompts import Message
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.server.app import App
from gdal_mcp.server.tools.registry import prompt


def utm_epsg(lon: float, lat: float) -> int:
    zone = min(60, max(1, int(math.floor((lon + 180) / 6)) + 1))
    return (32600 if lat >= 0 else 32700) + zone


async def same_crs(app: App, a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two CRSs are equivalent (their WKT may be written differently): PROJ decides, in a worker."""
    if not a or not b:
        return a == b
    return await app.execute(jobs.SameCrsJob(a=a["wkt"], b=b["wkt"]), quick=True)


def describe_extent(b: dict[str, float] | None) -> str:
    if not b:
        return "unknown (no CRS or not transformable to lon/lat)"
    return (
        f"lon {b['left']:.4f} to {b['right']:.4f}, lat {b['bottom']:.4f} to {b['top']:.4f} "
        f"(about {b['right'] - b['left']:.2f}° × {b['top'] - b['bottom']:.2f}°)"
    )


class Facts:
    """What a prompt needs to know about a dataset, from raster_info or vector_info."""

    def __init__(self, kind: str, info: dict[str, Any], wgs84: dict[str, float] | None) -> None:
        self.kind = kind
        self.info = info
        self.wgs84 = wgs84

    @property
    def crs(self) -> dict[str, Any] | None:
        if self.kind == "raster":
            return self.info.get("crs")
        layers = self.info.get("layers") or []
        return layers[0].get("crs") if layers else None

    def crs_text(self) -> str:
        crs = self.crs
        if not crs:
            return "none (not georeferenced)"
        kind = "geographic (degrees)" if crs.get("is_geographic") else f"projected ({crs.get('units') or 'unknown units'})"
        code = f"EPSG:{crs['epsg']}" if crs.get("epsg") else "no EPSG code"
        return f"{crs.get('name')} — {code}, {kind}"

    def summary(self) -> str:
        i = self.info
        if self.kind == "raster" and i.get("kind") == "container":
            subs = ", ".join(s["path"] for s in (i.get("subdatasets") or [])[:10])
            return f"raster container {i['path']}: {i['driver']}, no bands of its own; subdatasets: {subs or '-'}"
        if self.kind == "raster":
            bands = i.get("bands") or []
            dtypes = sorted({b["dtype"] for b in bands})
            interp = ", ".join(b["color_interp"] for b in bands[:4])
            res = i.get("resolution") or [None, None]
            return (
                f"raster {i['path']}: {i['driver']}, {i['width']} × {i['height']} pixels, {i['count']} band(s) "
                f"{'/'.join(dtypes) or '-'} (colour: {interp or '-'}), pixel size {res[0]:.6g} × {res[1]:.6g}, "
                f"nodata {bands[0]['nodata'] if bands else None}, overviews {bands[0]['overviews'] if bands else []}, "
                f"valid COG: {i.get('is_cog')}; CRS {self.crs_text()}; extent {describe_extent(self.wgs84)}"
            )
        layers = i.get("layers") or []
        parts = [f"{lyr['name']} ({lyr['geometry_type']}, {lyr['feature_count']} features)" for lyr in layers[:5]]
        return (
            f"vector {i['path']}: {i.get('driver')}, layers: {'; '.join(parts)}; CRS {self.crs_text()}; "
            f"extent {describe_extent(self.wgs84)}"
        )


async def _facts(app: App, path: str) -> Facts:
    """The Facts of a workspace dataset (tried as a raster, then as vector data); failures as a PromptError."""
    try:
        src = app.sandbox.resolve_input(path)
        try:
            info = app.scrub_model(await app.execute(jobs.RasterInfoJob(path=src.gdal_path), quick=True))
            info.path = src.display
            data = info.model_dump()
            return Facts("raster", data, data.get("bounds_wgs84"))
        except GdalMcpError as e:
            if e.code != "unsupported":
                raise
        vinfo = app.scrub_model(await app.execute(jobs.VectorInfoJob(path=src.gdal_path), quick=True))
        vinfo.path = src.display
        data = vinfo.model_dump()
        return Facts("vector", data, await _wgs84_extent(app, data))
    except GdalMcpError as e:
        raise PromptError(f"{e.code}: {app.sandbox.scrub(e.message)}") from None


async def _wgs84_extent(app: App, vinfo: dict[str, Any]) -> dict[str, float] | None:
    """The first layer's extent in lon/lat (PROJ, in a worker); None without one."""
    layers = vinfo.get("layers") or []
    if not layers or not layers[0].get("extent") or not layers[0].get("crs"):
        return None
    ext = layers[0]["extent"]
    bounds = (ext["left"], ext["bottom"], ext["right"], ext["top"])
    lonlat = await app.execute(jobs.Wgs84BoundsJob(crs=layers[0]["crs"]["wkt"], bounds=bounds), quick=True)
    if lonlat is None:
        return None
    left, bottom, right, top = lonlat
    return {"left": left, "bottom": bottom, "right": right, "top": top}


@prompt(title="Choose a CRS", tags={"crs"})
async def choose_crs(
    app: App,
    path: Annotated[str, Field(description="Dataset in the workspace")],
    task: Annotated[
        Literal["area", "distance", "web_map", "local_survey", "general"], Field(description="What the CRS is for")
    ] = "general",
) -> list[Message]:
    """Pick a coordinate reference system for a task, given the dataset's real extent and current CRS."""
    f = await _facts(app, path)
    lines = [f"I need a CRS for {task.replace('_', ' ')} work on this dataset.", "", f"Dataset: {f.summary()}.", ""]
    b = f.wgs84
    if b:
        lon, lat = (b["left"] + b["right"]) / 2, (b["bottom"] + b["top"]) / 2
        width = b["right"] - b["left"]
        utm = utm_epsg(lon, lat)
        lines.append(
            f"Its centre is lon {lon:.3f}, lat {lat:.3f}; the UTM zone there is EPSG:{utm} "
            f"({'fits' if width <= 12 else 'too narrow for'} its {width:.1f}° width)."
        )
        laea = f"+proj=laea +lat_0={lat:.2f} +lon_0={lon:.2f} +datum=WGS84 +units=m"
        aeqd = f"+proj=aeqd +lat_0={lat:.2f} +lon_0={lon:.2f} +datum=WGS84 +units=m"
        options = {
            "area": f"equal-area: EPSG:{utm} if it fits one zone (small distortion), else a Lambert azimuthal "
            f"equal-area centred on the data ({laea}); for global data EPSG:8857 (Equal Earth) or EPSG:6933",
            "distance": f"EPSG:{utm} for a zone-sized area; for distances from one place an azimuthal equidistant "
            f"centred there ({aeqd}); geodesic distances on the ellipsoid are best for long lines",
            "web_map": "EPSG:3857 (Web Mercator) for web tiles; keep analysis in a projected CRS and reproject "
            "only the display copy (areas are badly distorted away from the equator)",
            "local_survey": f"the national/state grid used locally if there is one, else EPSG:{utm}",
            "general": f"EPSG:{utm} for measurements; EPSG:4326 only for exchange and display",
        }
        lines += ["", f"Candidates: {options[task]}."]
    elif f.crs:
        lines.append(
            "Its corners lie outside the CRS's domain (e.g. a geostationary full disk), so no lon/lat "
            "extent: choose by the region of interest and clip after reprojecting."
        )
    else:
        lines.append("It has no CRS: first find out and assign the right one (src_crs) before choosing a target.")
    lines += [
        "",
        "Recommend one CRS with its EPSG code or PROJ string and why, say what distortion remains, "
        "then give the exact raster_reproject or vector_reproject call to make.",
    ]
    return [Message("\n".join(lines))]


@prompt(title="Choose a resampling method", tags={"raster"})
async def choose_resampling(
    app: App,
    path: Annotated[str, Field(description="Raster in the workspace")],
    operation: Annotated[
        Literal["reproject", "downsample", "upsample", "overviews"], Field(description="What the resampling is for")
    ] = "reproject",
) -> list[Message]:
    """Pick a resampling method for this raster: categorical or continuous, up- or down-sampling."""
    f = await _facts(app, path)
    if f.kind != "raster":
        raise PromptError("invalid-argument: choose_resampling needs a raster; this is vector data")
    bands = f.info.get("bands") or []
    dtype = bands[0]["dtype"] if bands else "unknown"
    palette = any(b["color_interp"] == "palette" for b in bands)
    integer = dtype.startswith(("uint", "int"))
    hint = (
        "it has a colour palette, so its values are classes: categorical"
        if palette
        else "its integer type may hold classes (land cover, zones) or counts/measurements: check the values "
        "(raster_stats with a histogram) before choosing"
        if integer
        else "its floating-point type suggests a continuous quantity (elevation, temperature, reflectance)"
    )
    lines = [
        f"I want to {operation} this raster and need a resampling method.",
        "",
        f"Dataset: {f.summary()}.",
        "",
        f"Data type {dtype}: {hint}.",
        "",
        "Rules: categorical data → nearest (or mode when shrinking a lot); continuous data → bilinear or cubic "
        "when enlarging or reprojecting at a similar resolution, average (or rms) when shrinking by 2× or more; "
        "lanczos for the sharpest imagery; never interpolate class codes.",
        "",
        "Recommend one method for this dataset and operation, and give the exact tool call "
        "(raster_reproject resampling=…, raster_overviews resampling=…, or raster_convert for COG "
        "OVERVIEW_RESAMPLING).",
    ]
    return [Message("\n".join(lines))]


@prompt(title="Make a raster web-ready", tags={"raster"})
async def make_web_ready(app: App, path: Annotated[str, Field(description="Raster in the workspace")]) -> list[Message]:
    """Plan turning a raster into a web-ready Cloud Optimized GeoTIFF (compression, overviews, CRS)."""
    f = await _facts(app, path)
    if f.kind != "raster":
        raise PromptError("invalid-argument: make_web_ready needs a raster; this is vector data")
    i = f.info
    bands = i.get("bands") or []
    dtype = bands[0]["dtype"] if bands else "unknown"
    rgb = i["count"] in (3, 4) and dtype == "uint8"
    steps = [f"Dataset: {f.summary()}.", ""]
    steps.append(
        "It is already a valid COG."
        if i.get("is_cog")
        else f"It is not a valid COG ({'; '.join(i.get('cog_issues') or []) or 'not a GeoTIFF'})."
    )
    steps.append(
        "Compression: "
        + (
            "JPEG or WEBP (QUALITY=85) suits 8-bit RGB imagery; DEFLATE/ZSTD if it must stay lossless."
            if rgb
            else "DEFLATE or ZSTD with PREDICTOR=2 (integers) or 3 (floats): lossless for data."
        )
    )
    steps.append(
        "Overviews: the COG driver builds them; OVERVIEW_RESAMPLING="
        + ("NEAREST or MODE for classes" if dtype.startswith(("uint", "int")) and not rgb else "AVERAGE")
        + "."
    )
    crs = f.crs or {}
    steps.append(
        "CRS: keep "
        + (f"EPSG:{crs['epsg']}" if crs.get("epsg") else "the current CRS")
        + " unless a tile client needs Web Mercator; then reproject to EPSG:3857 first (or use the COG "
        "creation option TILING_SCHEME=GoogleMapsCompatible)."
    )
    steps += [
        "",
        "Give the exact raster_convert call (format=COG with creation_options) and, if needed, the "
        "raster_reproject call before it; then check the result with raster_info (is_cog).",
    ]
    return [Message("I want to publish this raster on the web.\n\n" + "\n".join(steps))]


@prompt(title="Zonal analysis workflow", tags={"analysis"})
async def zonal_workflow(
    app: App,
    raster: Annotated[str, Field(description="Raster with the values")],
    zones: Annotated[str, Field(description="Vector file with the zone polygons")],
) -> list[Message]:
    """Plan a zonal-statistics analysis of a raster under polygons, checking CRSs, layers and data types."""
    r, z = await _facts(app, raster), await _facts(app, zones)
    if r.kind != "raster" or z.kind != "vector":
        raise PromptError("invalid-argument: zonal_workflow needs a raster and a vector dataset")
    same = await same_crs(app, r.crs, z.crs)
    layers = z.info.get("layers") or []
    fields = ", ".join(fld["name"] for fld in (layers[0].get("fields") or [])[:12]) if layers else ""
    dtype = (r.info.get("bands") or [{}])[0].get("dtype", "")
    lines = [
        "I want statistics of a raster within each zone polygon.",
        "",
        f"Raster: {r.summary()}.",
        f"Zones: {z.summary()}.",
        "",
        "CRS: "
        + (
            "the same for both."
            if same
            else "different: zonal_stats reprojects the zones to the raster's CRS on the fly (the raster is never resampled)."
        ),
        f"Zone layer fields (pick one as id_field): {fields or 'none'}."
        + (" Several layers: pass layer=." if len(layers) > 1 else ""),
        "Statistics: "
        + (
            "count, majority, minority, unique for a categorical (integer class) raster"
            if dtype.startswith(("uint", "int"))
            else "count, mean, min, max, std, median for a continuous raster"
        )
        + ".",
        "Small polygons (a few pixels) are sensitive to all_touched: compare both settings.",
        "",
        "Give the steps: vector_info to check the zones, raster_stats for the value range, then the exact "
        "zonal_stats call (with output= to save a vector file with the statistics).",
    ]
    return [Message("\n".join(lines))]
