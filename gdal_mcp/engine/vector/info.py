"""Vector metadata (ogrinfo -so), with a bounded GeoJSON sample of one layer."""

from __future__ import annotations

import base64
import datetime as dt
import math
import warnings
from typing import Any

import numpy as np
import pyogrio
import shapely

from gdal_mcp.engine.crs import describe_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.opening import choose_layer, list_layers, open_options_for
from gdal_mcp.models import Bounds, FieldInfo, LayerInfo, VectorInfo

MAX_LAYERS = 100
SAMPLE_FEATURES = 5
MAX_SAMPLE_VERTICES = 250


def json_value(v: Any) -> Any:
    """A field value as plain JSON."""
    if v is None:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, np.ndarray):
        return [json_value(x) for x in v.tolist()]
    return v


def geojson_geometry(wkb: bytes | None) -> tuple[dict[str, Any] | None, str | None]:
    """GeoJSON geometry, or None plus a note when it is too large to show in a sample."""
    if wkb is None:
        return None, None
    import json

    g = shapely.from_wkb(wkb)
    n = shapely.get_num_coordinates(g)
    if n > MAX_SAMPLE_VERTICES:
        return None, f"{g.geom_type} with {n} vertices (omitted; bbox {list(np.round(g.bounds, 6))})"
    return json.loads(shapely.to_geojson(g)), None


def sample_features(path: str, layer: str, n: int = SAMPLE_FEATURES) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oo = open_options_for(path)
        meta, fids, geoms, fields = pyogrio.raw.read(path, layer=layer, max_features=n, return_fids=True, **oo)
    names = list(meta["fields"])
    features = []
    for i in range(len(fids) if fids is not None else len(geoms)):
        geom, note = geojson_geometry(geoms[i] if geoms is not None else None)
        props = {name: json_value(fields[j][i]) for j, name in enumerate(names)}
        feat: dict[str, Any] = {
            "type": "Feature",
            "id": int(fids[i]) if fids is not None else i,
            "properties": props,
            "geometry": geom,
        }
        if note:
            feat["geometry_omitted"] = note
        features.append(feat)
    return {"type": "FeatureCollection", "features": features}


@wrap_gdal_errors
def vector_info(path: str, layer: str | None = None, progress: Progress = no_progress) -> VectorInfo:
    """Describe every layer (geometry type, exact feature count, CRS, extent, fields)."""
    layers = list_layers(path)
    chosen = choose_layer(path, layer, layers) if layer is not None else None
    wanted = [chosen] if chosen else [n for n, _ in layers[:MAX_LAYERS]]
    out: list[LayerInfo] = []
    driver = None
    warn: list[str] = []
    for i, name in enumerate(wanted):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            info = pyogrio.read_info(
                path, layer=name, force_feature_count=True, force_total_bounds=True, **open_options_for(path)
            )
        driver = driver or info.get("driver")
        tb = info.get("total_bounds")
        extent = None
        if tb is not None and all(math.isfinite(v) for v in tb):
            extent = Bounds(left=tb[0], bottom=tb[1], right=tb[2], top=tb[3])
        count = int(info["features"])
        out.append(
            LayerInfo(
                name=name,
                geometry_type=info.get("geometry_type"),
                feature_count=count if count >= 0 else None,
                crs=describe_crs(info.get("crs")),
                extent=extent,
                fields=[FieldInfo(name=str(f), type=str(t)) for f, t in zip(info["fields"], info["ogr_types"], strict=False)],
            )
        )
        progress((i + 1) / len(wanted), f"layer {i + 1}/{len(wanted)}: {name}")
    if len(layers) > 1 and chosen is None:
        warn.append(f"{len(layers)} layers: tools that read one layer need layer= one of them")
    return VectorInfo(
        path=path,
        driver=driver,
        layer_count=len(layers),
        layers=out,
        layers_truncated=chosen is None and len(layers) > MAX_LAYERS,
        sample=sample_features(path, chosen) if chosen else None,
        warnings=warn,
    )
