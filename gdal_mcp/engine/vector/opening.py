"""Vector sources: listing layers and choosing one, with errors that name the alternatives."""

from __future__ import annotations

import warnings

import pyogrio
from pyogrio.errors import DataSourceError

from gdal_mcp.errors import GdalMcpError

# Unsorted OSM extracts otherwise fail to scan ("Non increasing node id").
pyogrio.set_gdal_config_options({"OSM_USE_CUSTOM_INDEXING": "NO"})


def list_layers(path: str) -> list[tuple[str, str | None]]:
    """(name, geometry type) of every layer; a clear error when GDAL cannot read the source."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layers = pyogrio.list_layers(path)
    except DataSourceError as e:
        text = str(e)
        if "not recognized as" in text or "not recognised as" in text:
            raise GdalMcpError(
                "unsupported", f"{path} is not a vector dataset GDAL can read (for rasters use raster_info)"
            ) from None
        raise GdalMcpError("gdal-error", f"GDAL cannot open {path}: {text}") from None
    return [(str(name), None if gtype in (None, "") else str(gtype)) for name, gtype in layers]


def choose_layer(path: str, layer: str | None, layers: list[tuple[str, str | None]] | None = None) -> str:
    """The layer asked for, or the only one; never silently the first of several."""
    layers = layers if layers is not None else list_layers(path)
    names = [n for n, _ in layers]
    if layer is None:
        if len(names) == 1:
            return names[0]
        if not names:
            raise GdalMcpError("invalid-argument", f"{path} has no layers")
        raise GdalMcpError(
            "invalid-argument", f"{path} has {len(names)} layers; pass layer= one of: {', '.join(names)}"
        )
    if layer not in names:
        raise GdalMcpError("not-found", f"layer '{layer}' not found; layers are: {', '.join(names) or '(none)'}")
    return layer
