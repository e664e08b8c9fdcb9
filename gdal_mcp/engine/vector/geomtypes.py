"""Layer geometry types for the engines that rewrite geometries: a layer's declared type (GeomType),
keeping only the parts of a feature's dimension, and whether a batch holds multi-part geometries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

SINGLE_NAMES = ("Point", "LineString", "Polygon")


@dataclass(frozen=True)
class GeomType:
    """A layer geometry type: dimension (None = mixed/unknown), multi-part, with Z."""

    dim: int | None
    multi: bool = False
    z: bool = False

    @property
    def name(self) -> str:
        """The OGR name pyogrio writes: Polygon, MultiLineString Z, Unknown …"""
        if self.dim is None:
            return "Unknown"
        base = ("Multi" if self.multi else "") + SINGLE_NAMES[self.dim]
        return base + (" Z" if self.z else "")


def layer_type(declared: str | None) -> GeomType:
    """GeomType of a layer from pyogrio's geometry type text ("Polygon", "MultiPoint Z", "Measured 3D LineString" …)."""
    text = (declared or "Unknown").strip()
    z = bool(re.search(r"( Z| ZM)$|^(3D|2\.5D|Measured 3D) ", text))
    words = re.sub(r"( ZM| Z| M)$", "", re.sub(r"^(Measured 3D |Measured |3D |2\.5D )", "", text))
    words = "Point" if words == "PointM" else words
    multi = words.startswith("Multi")
    base = words.removeprefix("Multi")
    if base not in SINGLE_NAMES:
        return GeomType(None, False, z)
    return GeomType(SINGLE_NAMES.index(base), multi, z)


def contains_multi(geoms: np.ndarray) -> bool:
    """True when any geometry is multi-part or a collection."""
    import shapely

    ids = shapely.get_type_id(geoms)
    return bool(np.isin(ids, (4, 5, 6, 7)).any())


def _combine(parts: list[Any], dim: int) -> Any:
    import shapely

    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    if dim == 0:
        return shapely.MultiPoint(parts)
    if dim == 1:
        return shapely.MultiLineString(parts)
    multi = shapely.MultiPolygon(parts)
    return multi if multi.is_valid else shapely.union_all(parts)


def keep_dimension(geoms: np.ndarray, dims: np.ndarray | int) -> tuple[np.ndarray, int]:
    """Per feature, only the parts of dimension dims[i] (as ogr2ogr -clipsrc keeps); None when nothing is left.

    A negative dims[i] keeps the geometry as it is. Returns (geometries, number of features emptied).
    """
    import shapely

    from gdal_mcp.engine.features.masks import flatten

    geoms = np.asarray(geoms, dtype=object)
    target = np.broadcast_to(np.asarray(dims), geoms.shape)
    out = geoms.copy()
    ids = shapely.get_type_id(geoms)
    present = ids >= 0
    empty = present & shapely.is_empty(geoms)
    gdim = shapely.get_dimensions(geoms)
    filtered = present & (target >= 0)
    wrong = filtered & (ids != 7) & (gdim != target)
    out[wrong | empty] = None
    for i in np.flatnonzero(filtered & (ids == 7) & ~empty):
        parts = [p for p in flatten(geoms[i]) if shapely.get_dimensions(p) == target[i]]
        out[i] = _combine(parts, int(target[i]))
    lost = int((present & shapely.is_missing(out)).sum())
    return out, lost
