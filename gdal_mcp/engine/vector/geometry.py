"""Buffer, simplify and dissolve, streamed batch by batch, with distances in safe units.

Distances and tolerances come with units: "layer" (the layer's own), "m", "km", "ft", "mi" or "deg".
On a geographic layer a linear distance is applied in a local projection and the result returned to the
layer's CRS: the UTM zone of the data when the data fits near it, otherwise an azimuthal equidistant
projection centred on each feature (computed with geodesics, vectorised over the batch). A linear unit on
a projected layer is converted to the layer's unit; "deg" there is refused. The warnings say which.

Also here, for every vector engine that rewrites geometries: layer geometry types, keeping only the parts
of a feature's dimension, promotion to Multi, and `transform_layer`, the read → map → write loop that decides
the output geometry type (a first pass checks whether Multi is needed when the output format insists).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.convert import promote as to_multi
from gdal_mcp.engine.vector.opening import choose_layer, list_layers
from gdal_mcp.engine.vector.stream import (
    BATCH_SIZE,
    geometries,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    with_geometries,
    write_layer,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorSummary

# Features per batch read (tests lower it to exercise many batches).
READ_BATCH = BATCH_SIZE
LINEAR_UNITS = {"m": 1.0, "km": 1000.0, "ft": 0.3048, "mi": 1609.344}
UNITS = ("layer", *LINEAR_UNITS, "deg")
# A geographic layer is worked in one UTM zone when all of it lies within this distance of the zone's
# central meridian (UTM scale error there is under 0.5 %); otherwise per feature (azimuthal equidistant).
UTM_REACH_M = 600_000.0
EARTH_RADIUS_M = 6_371_008.8
# Azimuthal equidistant: beyond this distance from the centre, sideways distances are off by more than 1 %.
AEQD_ACCURATE_M = 1_500_000.0
# Output formats that do not hold a layer to one geometry type (no Multi promotion needed), by dimension.
LENIENT_DRIVERS: dict[str, tuple[int, ...]] = {"GeoJSON": (0, 1, 2), "GeoJSONSeq": (0, 1, 2),
                                               "ESRI Shapefile": (1, 2)}
# Layer creation options some formats need to hold a geometry at all (convert.py has the same; it belongs in
# stream.write_layer).
LAYER_OPTIONS: dict[str, dict[str, str]] = {"CSV": {"GEOMETRY": "AS_WKT"}}
CAP_STYLES = ("round", "flat", "square")
JOIN_STYLES = {"round": "round", "mitre": "mitre", "miter": "mitre", "bevel": "bevel"}
SINGLE_NAMES = ("Point", "LineString", "Polygon")


# ---------------------------------------------------------------------------------------------- geometry types

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

    from gdal_mcp.engine.vector.masks import flatten

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


# ---------------------------------------------------------------------------------------------- units

@dataclass
class Frame:
    """Where a distance is applied: the layer's own coordinates, one UTM zone, or per-feature AEQD."""

    kind: str  # "layer" | "utm" | "aeqd"
    amount: float  # the distance in the frame's units (metres for utm/aeqd)
    notes: list[str] = field(default_factory=list)
    forward: Any = None  # utm: pyproj Transformer layer -> utm
    inverse: Any = None
    geod: Any = None  # aeqd: pyproj.Geod of the layer's ellipsoid
    deg_per_unit: float = 1.0  # aeqd: degrees per angular unit of the layer
    far: int = 0  # aeqd: features reaching beyond AEQD_ACCURATE_M
    farthest: float = 0.0
    straddling: int = 0  # aeqd: features left with parts across ±180
    polar: int = 0  # aeqd: features left unchanged (one part spans more than 180° of longitude)
    repaired: int = 0  # results made valid again after the way back to the layer's CRS

    def apply(self, geoms: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], record: bool = True,
              snap: bool = False) -> np.ndarray:
        """fn(geoms) computed in this frame, returned in the layer's coordinates.

        snap: fn only keeps or drops vertices (simplify), so the vertices it kept are given back exactly as
        they were (no round-trip noise). record: update the notes.
        In the aeqd frame a feature split at the antimeridian (spanning more than 180° of longitude) is worked
        part by part, each part centred on itself, and its results are split at ±180 again; a feature with a
        single part that wide (around a pole) is left unchanged.
        """
        import shapely

        if self.kind == "layer":
            return fn(geoms)
        geoms = _without_m(np.asarray(geoms, dtype=object))
        out = geoms.copy()  # no geometry, or an empty one: nothing to project
        present = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
        wide = np.zeros(len(geoms), dtype=bool)
        if self.kind == "aeqd" and present.any():
            half = 180.0 / self.deg_per_unit
            polar = _polar(geoms, present, half)
            present &= ~polar
            self.polar += int(polar.sum()) if record else 0
            b = shapely.bounds(geoms)
            wide = present & (b[:, 2] - b[:, 0] > half)
            present &= ~wide
        if present.any():
            out[present] = self._run(geoms[present], fn, record, snap)
        if wide.any():
            parts, owner = shapely.get_parts(geoms[wide], return_index=True)
            done = self._run(parts, fn, record, snap, split=not snap)
            results = []
            for i in range(int(wide.sum())):
                pieces = [p for r in done[owner == i] if r is not None for p in _flat(r)]
                dims = {int(shapely.get_dimensions(p)) for p in pieces}
                results.append(_combine(pieces, dims.pop()) if len(dims) == 1 else
                               (shapely.GeometryCollection(pieces) if pieces else None))
            out[wide] = np.array(results + [None], dtype=object)[:-1]
        return out

    def _run(self, g: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], record: bool, snap: bool,
             split: bool = False) -> np.ndarray:
        """fn on each geometry in the local frame (aeqd: centred on each), and back."""
        import shapely

        coords, idx = shapely.get_coordinates(g, return_index=True)
        if self.kind == "utm":
            to_local, to_layer = self._utm_maps()
        else:
            to_local, to_layer = self._aeqd_maps(coords, idx, len(g), record)
        projected = shapely.transform(g, lambda c: to_local(c, idx), include_z=True)
        result = np.asarray(fn(projected), dtype=object)
        _, ridx = shapely.get_coordinates(result, return_index=True)
        if snap:
            lookup = _Lookup(idx, shapely.get_coordinates(projected), coords)
            back = shapely.transform(result, lambda c: lookup.restore(ridx, c, to_layer), include_z=True)
        else:
            back = shapely.transform(result, lambda c: to_layer(c, ridx), include_z=True)
            if self.kind == "aeqd":
                half = 180.0 / self.deg_per_unit
                back = _rewrap(back, half)
                b = shapely.bounds(back)
                across = (b[:, 0] < -half) | (b[:, 2] > half)
                if split and across.any():
                    back[across] = [_split_antimeridian(x, half) for x in back[across]]
                elif record:
                    self.straddling += int(across.sum())
        return self._repair(back, result, record)

    def _repair(self, back: np.ndarray, local: np.ndarray, record: bool) -> np.ndarray:
        """Results valid in the local projection but not after the way back (a vertex nudged by the curved map
        or at the antimeridian) are made valid, keeping their dimension."""
        import shapely

        bad = ~shapely.is_missing(back) & ~shapely.is_valid(back)
        if bad.any():
            bad[bad] = shapely.is_valid(local[bad])
        if not bad.any():
            return back
        fixed, _ = keep_dimension(shapely.make_valid(back[bad], method="structure", keep_collapsed=False),
                                  shapely.get_dimensions(back[bad]))
        back = back.copy()
        back[bad] = fixed
        self.repaired += int(bad.sum()) if record else 0
        return back

    def _utm_maps(self) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
        def convert(transformer: Any) -> Callable[..., np.ndarray]:
            def fn(c: np.ndarray, _idx: np.ndarray) -> np.ndarray:
                c = c.copy()
                c[:, 0], c[:, 1] = transformer.transform(c[:, 0], c[:, 1])
                return c
            return fn

        return convert(self.forward), convert(self.inverse)

    def _aeqd_maps(self, coords: np.ndarray, idx: np.ndarray, n: int,
                   record: bool) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
        """Per-feature azimuthal equidistant maps, with geodesics: (x, y) = distance and azimuth from the centre."""
        k, geod = self.deg_per_unit, self.geod
        lon0, lat0 = _centres(coords[:, 0] * k, coords[:, 1] * k, idx, n)

        def to_local(c: np.ndarray, i: np.ndarray) -> np.ndarray:
            az, _, dist = geod.inv(lon0[i], lat0[i], c[:, 0] * k, c[:, 1] * k)
            if record:
                reach = np.zeros(n)
                np.maximum.at(reach, i, dist)
                far = reach > AEQD_ACCURATE_M
                if far.any():
                    self.far += int(far.sum())
                    self.farthest = max(self.farthest, float(reach.max()))
            a = np.radians(az)
            c = c.copy()
            c[:, 0], c[:, 1] = dist * np.sin(a), dist * np.cos(a)
            return c

        def to_layer(c: np.ndarray, i: np.ndarray) -> np.ndarray:
            az = np.degrees(np.arctan2(c[:, 0], c[:, 1]))
            lon, lat, _ = geod.fwd(lon0[i], lat0[i], az, np.hypot(c[:, 0], c[:, 1]))
            lon = lon0[i] + (lon - lon0[i] + 180.0) % 360.0 - 180.0  # continuous across the antimeridian
            c = c.copy()
            c[:, 0], c[:, 1] = lon / k, lat / k
            return c

        return to_local, to_layer

    def final_notes(self, verb: str) -> list[str]:
        notes = list(self.notes)
        if self.far:
            rho = self.farthest / EARTH_RADIUS_M
            error = rho / math.sin(rho) - 1 if 0 < rho < math.pi else float("inf")
            notes.append(f"{self.far} feature(s) reach more than {AEQD_ACCURATE_M / 1000:.0f} km from their centre; "
                         f"distances far from the centre are approximate there (up to {error:.1%} off sideways)")
        if self.straddling:
            notes.append(f"{self.straddling} feature(s) now cross the antimeridian and were kept continuous, so they "
                         "have longitudes beyond ±180")
        if self.repaired:
            notes.append(f"{self.repaired} result(s) had tiny self-intersections after the way back to the layer's "
                         "CRS and were repaired (make_valid)")
        if self.polar:
            notes.append(f"{self.polar} feature(s) have a part spanning more than 180° of longitude (around a pole, "
                         f"such as Antarctica) that no local projection holds; they were NOT {verb} and are written "
                         "unchanged: reproject the layer (e.g. to a polar projection) to process them")
        return notes


class _Lookup:
    """Original coordinates of the vertices of projected geometries, found by (feature, local x, y)."""

    def __init__(self, idx: np.ndarray, local: np.ndarray, original: np.ndarray) -> None:
        self.keys = self._keys(idx, local)
        self.order = np.argsort(self.keys, kind="stable")
        self.sorted = self.keys[self.order]
        self.original = original

    @staticmethod
    def _keys(idx: np.ndarray, xy: np.ndarray) -> np.ndarray:
        table = np.ascontiguousarray(np.column_stack([idx.astype(np.float64), xy[:, 0], xy[:, 1]]))
        return table.view(np.dtype((np.void, 24))).ravel()

    def restore(self, ridx: np.ndarray, c: np.ndarray, to_layer: Callable[..., np.ndarray]) -> np.ndarray:
        out = to_layer(c, ridx)
        if not len(self.sorted):
            return out
        keys = self._keys(ridx, c)
        pos = np.minimum(np.searchsorted(self.sorted, keys), len(self.sorted) - 1)
        found = self.sorted[pos] == keys
        out[found, 0:2] = self.original[self.order[pos[found]], 0:2]
        return out


def _flat(geom: Any) -> list[Any]:
    from gdal_mcp.engine.vector.masks import flatten

    return list(flatten(geom))


def _split_antimeridian(geom: Any, half_turn: float) -> Any:
    """A geometry crossing ±180° cut there, the pieces beyond moved back by 360° (RFC 7946 style)."""
    import shapely
    import shapely.affinity

    big = 1e12
    pieces = []
    for lo, shift in ((-half_turn, 0.0), (half_turn, -2 * half_turn), (-3 * half_turn, 2 * half_turn)):
        cut = shapely.intersection(geom, shapely.box(lo, -big, lo + 2 * half_turn, big))
        if not cut.is_empty:
            pieces.extend(_flat(shapely.affinity.translate(cut, xoff=shift)))
    dim = int(shapely.get_dimensions(geom))
    return _combine([p for p in pieces if shapely.get_dimensions(p) == dim], dim)


def _polar(geoms: np.ndarray, present: np.ndarray, half_turn: float) -> np.ndarray:
    """Features with a single part spanning more than half the globe in longitude."""
    import shapely

    out = np.zeros(len(geoms), dtype=bool)
    b = shapely.bounds(geoms)
    wide = present & (b[:, 2] - b[:, 0] > half_turn)
    for i in np.flatnonzero(wide):
        pb = shapely.bounds(shapely.get_parts(geoms[i]))
        out[i] = bool((pb[:, 2] - pb[:, 0] > half_turn).any())
    return out


def _without_m(geoms: np.ndarray) -> np.ndarray:
    """M values dropped (Z kept): shapely.transform loses Z on XYZM geometries, and the GEOS operations
    applied here (buffer, simplify) do not keep M anyway."""
    import shapely

    has_m = getattr(shapely, "has_m", None)
    if has_m is None:
        return geoms
    measured = has_m(geoms)
    if not measured.any():
        return geoms
    out = geoms.copy()
    out[measured] = shapely.from_wkb(shapely.to_wkb(geoms[measured], output_dimension=3))
    return out


def _centres(lon: np.ndarray, lat: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature centre (of the bounding box) in degrees; features spanning more than 180° of longitude are
    taken as crossing the antimeridian (their parts split at ±180), so their centre is found on 0..360."""
    def box_centre(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
        np.minimum.at(lo, idx, x)
        np.maximum.at(hi, idx, x)
        return (lo + hi) / 2, hi - lo

    cx, span = box_centre(lon)
    cy, _ = box_centre(lat)
    wide = span > 180.0
    if wide.any():
        shifted, _ = box_centre(np.where(lon < 0, lon + 360.0, lon))
        cx = np.where(wide, (shifted + 180.0) % 360.0 - 180.0, cx)
    return cx, cy


def _rewrap(geoms: np.ndarray, half_turn: float) -> np.ndarray:
    """Parts lying wholly beyond ±180° moved back by 360° (a feature already split at the antimeridian keeps
    its parts where they were); parts crossing ±180 stay continuous."""
    import shapely
    import shapely.affinity

    out = np.asarray(geoms, dtype=object).copy()
    bounds = shapely.bounds(out)
    for i in np.flatnonzero((bounds[:, 0] < -half_turn) | (bounds[:, 2] > half_turn)):
        parts = []
        for part in shapely.get_parts(out[i]):
            minx, _, maxx, _ = part.bounds
            if minx >= half_turn:
                part = shapely.affinity.translate(part, xoff=-2 * half_turn)
            elif maxx <= -half_turn:
                part = shapely.affinity.translate(part, xoff=2 * half_turn)
            parts.append(part)
        if len(parts) == 1 and out[i].geom_type == parts[0].geom_type:
            out[i] = parts[0]
        elif out[i].geom_type.startswith("Multi") or out[i].geom_type == "GeometryCollection":
            out[i] = type(out[i])(parts)
    return out


def _horizontal(crs_text: str | None) -> Any:
    if not crs_text:
        return None
    from pyproj import CRS

    try:
        crs = CRS.from_user_input(crs_text)
    except Exception as e:  # noqa: BLE001 - pyproj raises CRSError and others
        raise GdalMcpError("invalid-argument", f"the layer's CRS cannot be interpreted ({e})") from None
    if crs.is_compound and crs.sub_crs_list:
        crs = crs.sub_crs_list[0]
    return crs


def _crs_name(crs: Any) -> str:
    epsg = crs.to_epsg(min_confidence=90)
    return f"EPSG:{epsg}" if epsg else crs.name


def _unit_factor(crs: Any) -> tuple[float, str]:
    """(SI per layer unit, unit name): metres per unit for projected, radians per unit for geographic."""
    if crs.axis_info:
        axis = crs.axis_info[0]
        return float(axis.unit_conversion_factor), str(axis.unit_name)
    return (math.pi / 180, "degree") if crs.is_geographic else (1.0, "metre")


def _utm(geo: Any, bounds: tuple[float, float, float, float], deg_per_unit: float) -> tuple[Any, str] | None:
    """(UTM CRS, label) of the data's zone when all of it lies within UTM_REACH_M of its central meridian."""
    from pyproj.crs import ProjectedCRS
    from pyproj.crs.coordinate_operation import UTMConversion

    minx, miny, maxx, maxy = (v * deg_per_unit for v in bounds)
    if not all(math.isfinite(v) for v in (minx, miny, maxx, maxy)) or miny < -80 or maxy > 84 or maxx - minx >= 180:
        return None
    lon_c, lat_c = (minx + maxx) / 2, (miny + maxy) / 2
    lon_n = (lon_c + 180.0) % 360.0 - 180.0
    zone = int((lon_n + 180.0) // 6) % 60 + 1
    central = -183.0 + 6 * zone
    offsets = [abs((x - central + 180.0) % 360.0 - 180.0) for x in (minx, maxx)]
    nearest_lat = 0.0 if miny <= 0 <= maxy else min(abs(miny), abs(maxy))
    if math.radians(max(offsets)) * EARTH_RADIUS_M * math.cos(math.radians(nearest_lat)) > UTM_REACH_M:
        return None
    south = lat_c < 0
    utm = ProjectedCRS(conversion=UTMConversion(str(zone), "S" if south else "N"), geodetic_crs=geo)
    label = f"UTM zone {zone}{'S' if south else 'N'}"
    if geo.to_epsg(min_confidence=90) == 4326:
        label += f" (EPSG:{(32700 if south else 32600) + zone})"
    return utm, label


def _scale_notes(crs: Any, bounds: Callable[[], tuple[float, float, float, float]], value: float, units: str,
                 unit_name: str, what: str) -> list[str]:
    """A warning when the projection's scale near the data is far from 1 (Web Mercator away from the equator):
    distances are then map distances, not ground distances."""
    from pyproj import Proj, Transformer

    try:
        minx, miny, maxx, maxy = bounds()
        if not all(math.isfinite(v) for v in (minx, miny, maxx, maxy)):
            return []
        to_geo = Transformer.from_crs(crs, crs.geodetic_crs, always_xy=True)
        lon, lat = to_geo.transform((minx + maxx) / 2, (miny + maxy) / 2)
        factors = Proj(crs).get_factors(lon, lat)
        scales = [float(factors.meridional_scale), float(factors.parallel_scale)]
    except Exception:  # noqa: BLE001 - only a warning; some projections have no factors
        return []
    if not all(math.isfinite(k) and k > 0 for k in scales) or max(abs(k - 1) for k in scales) <= 0.01:
        return []
    k = math.sqrt(scales[0] * scales[1])
    given = f"{value:g} {unit_name if units == 'layer' else units}"
    return [f"{_crs_name(crs)} is not true to scale near the data (scale factor {k:.3g} at its centre): the {what} "
            f"{given} is measured on the map, about {value / k:.4g} {unit_name if units == 'layer' else units} on "
            "the ground there; reproject to a local projection (e.g. the UTM zone) for ground distances"]


def layer_bounds(src: str, layer: str) -> tuple[float, float, float, float]:
    """The layer's extent in its CRS (GDAL scans the features when the format stores none)."""
    import warnings

    import pyogrio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = pyogrio.read_info(src, layer=layer, force_total_bounds=True)
    tb = info.get("total_bounds")
    return tuple(float(v) for v in tb) if tb is not None else (math.nan,) * 4  # type: ignore[return-value]


def plan_units(value: float, units: str, crs_text: str | None, *, what: str, verb: str,
               bounds: Callable[[], tuple[float, float, float, float]]) -> Frame:
    """How to apply `value` `units` to a layer with CRS `crs_text` (see the module docstring).

    `what` names the quantity (distance, tolerance), `verb` the operation (buffered, simplified) for the notes;
    `bounds` gives the layer's extent, asked for only when a local projection must be chosen.
    """
    if units not in UNITS:
        raise GdalMcpError("invalid-argument", f"units must be one of {', '.join(UNITS)} (got {units!r}); 'layer' "
                           "means the layer CRS's own unit")
    if not math.isfinite(value):
        raise GdalMcpError("invalid-argument", f"{what} must be a finite number")
    crs = _horizontal(crs_text)
    if crs is None:
        if units != "layer":
            raise GdalMcpError("invalid-argument", f"the layer has no CRS, so its unit is unknown and a {what} in "
                               f"{units!r} cannot be converted; pass units='layer' (the coordinates' own unit) or "
                               "assign a CRS first")
        return Frame("layer", value)
    factor, unit_name = _unit_factor(crs)
    if not crs.is_geographic:
        if units == "deg":
            raise GdalMcpError("invalid-argument", f"units='deg' needs a geographic layer, but this layer is projected "
                               f"({_crs_name(crs)}, unit {unit_name}); give the {what} in m, km, ft, mi or "
                               "'layer' units")
        amount = value if units == "layer" else value * LINEAR_UNITS[units] / factor
        return Frame("layer", amount, _scale_notes(crs, bounds, value, units, unit_name, what))
    deg_per_unit = math.degrees(factor)
    if units == "layer":
        return Frame("layer", value, [
            f"the layer's CRS ({_crs_name(crs)}) is geographic, so the {what} {value:g} is in {unit_name}s "
            f"(1 degree is about 111 km north-south and less east-west away from the equator); pass units='m', "
            f"'km', 'ft' or 'mi' for a {what} on the ground"])
    if units == "deg":
        return Frame("layer", value / deg_per_unit)
    metres = value * LINEAR_UNITS[units]
    geo = crs.geodetic_crs or crs
    if geo.is_derived or not hasattr(geo, "ellipsoid") or geo.ellipsoid is None:
        raise GdalMcpError("unsupported", f"cannot work in {units} on the layer's CRS {_crs_name(crs)}; reproject it "
                           "to a projected CRS first")
    box = bounds()
    utm = _utm(geo, box, deg_per_unit)
    if utm is not None:
        from pyproj import Transformer

        utm_crs, label = utm
        return Frame("utm", metres, [
            f"the layer is geographic ({_crs_name(crs)}): the {value:g} {units} {what} was applied in {label}, the "
            f"local projection of the data, and the result returned to the layer's CRS"],
            forward=Transformer.from_crs(crs, utm_crs, always_xy=True),
            inverse=Transformer.from_crs(utm_crs, crs, always_xy=True))
    return Frame("aeqd", metres, [
        f"the layer is geographic ({_crs_name(crs)}) and its data spans too wide an area for one UTM zone, so each "
        f"feature was {verb} by {value:g} {units} in an azimuthal equidistant projection centred on it (geodesic "
        "distances) and returned to the layer's CRS"], geod=geo.get_geod(), deg_per_unit=deg_per_unit)


# ---------------------------------------------------------------------------------------------- the map loop

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
    except BaseException:
        for p in _siblings(dst) - before:
            try:
                p.unlink()
            except OSError:
                pass
        raise


def summary_of(dst: str, layer: str) -> VectorSummary:
    """Summary of the layer written (single-layer formats name it after the file)."""
    names = [n for n, _ in list_layers(dst)]
    return summarize_vector(dst, layer if layer in names else (names[0] if names else layer))


@dataclass
class MapResult:
    summary: VectorSummary
    output_type: GeomType
    promoted: bool
    written: int
    notes: list[str] = field(default_factory=list)


def transform_layer(src: str, dst: str, *, layer: str, driver: str, output_layer: str | None, crs: str | None,
                    declared: GeomType, out: GeomType, op: Op, drop_missing: bool, split: bool,
                    progress: Progress, verb: str, bbox: tuple[float, float, float, float] | None = None,
                    check_types: bool = True, state: tuple[Any, ...] = ()) -> MapResult:
    """Stream `src` through `op` (geometries -> geometries, None for none) into a new layer of `dst`.

    `out` is the output type before promotion; a single-part `out` becomes Multi when the input already
    holds multi-part geometries or, with `split`, when op makes some (checked in a first pass that runs
    op(geoms, record=False) on each batch until one is found). check_types=False skips that pass: the caller
    already made `out` Multi when needed. Features whose new geometry is None are dropped
    with `drop_missing`, else written with a null geometry. A FlatGeobuf spatial index cannot hold null
    geometries: when one comes, the layer is written again without the index; `state` (dicts or objects
    op counts in) is then restored first, so nothing is counted twice.
    """
    name = output_layer or layer
    progress = monotonic(progress)
    promoted = False
    start = 0.0
    # A Point layer holds no MultiPoints (shapefile keeps them apart); Polygon/LineString shapefiles hold both.
    single_points = declared.dim == 0 and not declared.multi and not split
    if (check_types and not single_points and out.dim is not None and not out.multi
            and out.dim not in LENIENT_DRIVERS.get(driver, ())):
        reporter = share(progress, 0.0, 0.3)
        with read_layer(src, layer=layer, bbox=bbox, batch_size=READ_BATCH) as stream:
            for batch in relay(stream.batches, stream.total, reporter, "checked geometry types of"):
                geoms = geometries(batch)
                if contains_multi(geoms) or (split and contains_multi(op(geoms, record=False))):
                    promoted = True
                    break
        start = 0.3
    final = GeomType(out.dim, out.multi or promoted, out.z)
    force_multi = final.multi and final.dim is not None
    written = 0

    def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
        nonlocal written
        import shapely

        new = np.asarray(op(geometries(batch)), dtype=object)
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
                write_layer(dst, stream.schema, batches, driver=driver, layer=name, crs=crs,
                            geometry_type=final.name, layer_options={**LAYER_OPTIONS.get(driver, {}), **(options or {})})
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
    summary = summary_of(dst, name)
    progress(1.0, f"wrote {summary.feature_count} features")
    return MapResult(summary, final, promoted, written, notes)


NO_INDEX_NOTE = ("some features have no geometry, which a FlatGeobuf spatial index cannot hold: the file was written "
                 "without a spatial index")


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
    return [f"the output layer is {result.output_type.name}, not {before}: some features are multi-part (the "
            f"input layer declares {declared.name})", *result.notes]


def _geos_error() -> type[Exception]:
    import shapely.errors

    return shapely.errors.GEOSException


# ---------------------------------------------------------------------------------------------- buffer

def _check_common(src: str, dst: str, format: str | None) -> str:
    return vector_driver(dst, format)


@wrap_gdal_errors
def buffer(src: str, dst: str, *, distance: float, units: str = "layer", layer: str | None = None, segments: int = 8,
           cap_style: str = "round", join_style: str = "round", format: str | None = None,
           output_layer: str | None = None, progress: Progress = no_progress) -> tuple[VectorSummary, list[str]]:
    """Buffer every feature by `distance` `units` (negative shrinks polygons), attributes kept, like ST_Buffer.

    `segments` is the number of segments per quarter circle; cap_style round/flat/square (line ends),
    join_style round/mitre/bevel (corners). Features left empty (a negative buffer larger than the polygon)
    are written with a null geometry.
    """
    driver = _check_common(src, dst, format)
    if not isinstance(segments, int) or isinstance(segments, bool) or not 1 <= segments <= 1000:
        raise GdalMcpError("invalid-argument", "segments (per quarter circle) must be an integer from 1 to 1000")
    if cap_style not in CAP_STYLES:
        raise GdalMcpError("invalid-argument", f"cap_style must be one of {', '.join(CAP_STYLES)}")
    if join_style not in JOIN_STYLES:
        raise GdalMcpError("invalid-argument", "join_style must be one of round, mitre, bevel")
    name, crs, declared = layer_meta(src, layer)
    distance = float(distance)
    if distance < 0 and declared.dim in (0, 1):
        raise GdalMcpError("invalid-argument", f"a negative distance shrinks polygons, but layer '{name}' holds "
                           f"{declared.name.split()[0]}s, which would all vanish; use a positive distance")
    frame = plan_units(distance, units, crs, what="distance", verb="buffered",
                       bounds=lambda: layer_bounds(src, name))
    import shapely

    counts = {"emptied": 0}

    def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
        out = frame.apply(geoms, lambda g: shapely.buffer(g, frame.amount, quad_segs=segments, cap_style=cap_style,
                                                           join_style=JOIN_STYLES[join_style]), record)
        vanished = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms) & (shapely.is_missing(out) | shapely.is_empty(out))
        counts["emptied"] += int(vanished.sum()) if record else 0
        out = np.asarray(out, dtype=object)
        out[shapely.is_empty(out)] = None
        return out

    out_type = GeomType(2, declared.multi and declared.dim is not None)
    result = transform_layer(src, dst, layer=name, driver=driver, output_layer=output_layer, crs=crs,
                             declared=declared, out=out_type, op=op, drop_missing=False, split=distance <= 0,
                             progress=progress, verb="buffered", state=(counts, frame))
    warnings = frame.final_notes("buffered") + promotion_note(declared, result)
    if counts["emptied"]:
        warnings.append(f"{counts['emptied']} feature(s) vanished under the buffer (empty result) and were written with a "
                        "null geometry")
    return result.summary, warnings


# ---------------------------------------------------------------------------------------------- simplify

@wrap_gdal_errors
def simplify(src: str, dst: str, *, tolerance: float, units: str = "layer", preserve_topology: bool = True,
             layer: str | None = None, format: str | None = None, output_layer: str | None = None,
             progress: Progress = no_progress) -> tuple[VectorSummary, list[str]]:
    """Simplify every feature (Douglas-Peucker) within `tolerance` `units`, attributes kept.

    preserve_topology (default) keeps polygons valid and never drops rings; without it, faster but results
    may be invalid and small parts may collapse (written with a null geometry).
    """
    driver = _check_common(src, dst, format)
    tolerance = float(tolerance)
    if not tolerance >= 0:
        raise GdalMcpError("invalid-argument", "tolerance must be zero or positive")
    name, crs, declared = layer_meta(src, layer)
    frame = plan_units(tolerance, units, crs, what="tolerance", verb="simplified",
                       bounds=lambda: layer_bounds(src, name))
    import shapely

    counts = {"collapsed": 0, "invalid": 0}

    def op(geoms: np.ndarray, record: bool = True) -> np.ndarray:
        out = np.asarray(frame.apply(geoms, lambda g: shapely.simplify(g, frame.amount,
                                                                       preserve_topology=preserve_topology), record,
                                     snap=True),
                         dtype=object)
        had = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
        gone = had & (shapely.is_missing(out) | shapely.is_empty(out))
        out[gone] = None
        if not record:
            return out
        counts["collapsed"] += int(gone.sum())
        if not preserve_topology:
            counts["invalid"] += int((had & ~gone & ~shapely.is_valid(out)).sum())
        return out

    result = transform_layer(src, dst, layer=name, driver=driver, output_layer=output_layer, crs=crs,
                             declared=declared, out=declared, op=op, drop_missing=False,
                             split=not preserve_topology,
                             progress=progress, verb="simplified", state=(counts, frame))
    warnings = frame.final_notes("simplified") + promotion_note(declared, result)
    if counts["collapsed"]:
        warnings.append(f"{counts['collapsed']} feature(s) collapsed to nothing and were written with a null geometry")
    if counts["invalid"]:
        warnings.append(f"{counts['invalid']} feature(s) became invalid (self-intersections) because "
                        "preserve_topology is false; use preserve_topology=true or fix them with validate")
    return result.summary, warnings


# ---------------------------------------------------------------------------------------------- dissolve

def _union(geoms: np.ndarray, counts: dict[str, int]) -> Any:
    """Union of the geometries; invalid ones are made valid first when GEOS refuses them."""
    import shapely

    try:
        return shapely.union_all(geoms)
    except _geos_error():
        bad = ~shapely.is_missing(geoms) & ~shapely.is_valid(geoms)
        counts["repaired"] += int(bad.sum())
        fixed = np.asarray(geoms, dtype=object).copy()
        fixed[bad] = shapely.make_valid(fixed[bad])
        return shapely.union_all(fixed)


_MULTI_OF = {0: "multipoints", 1: "multilinestrings", 2: "multipolygons"}


def _merge(acc: Any, new: Any, counts: dict[str, int]) -> Any:
    """acc ∪ new where acc is a union already: only the parts of acc that meet new are unioned again, so
    adding a batch costs what it touches, not the size of the result so far."""
    import shapely

    if acc is None or acc.is_empty:
        return new
    if new is None or new.is_empty:
        return acc
    dims = {int(shapely.get_dimensions(acc)), int(shapely.get_dimensions(new))}
    if len(dims) > 1 or "GeometryCollection" in (acc.geom_type, new.geom_type):
        return _union(np.array([acc, new], dtype=object), counts)
    parts, fresh = shapely.get_parts(acc), shapely.get_parts(new)
    touched = np.zeros(len(parts), dtype=bool)
    touched[shapely.STRtree(parts).query(fresh, predicate="intersects")[1]] = True
    if touched.any():
        fresh = shapely.get_parts(_union(np.concatenate([parts[touched], fresh]), counts))
    pieces = np.concatenate([parts[~touched], fresh])
    if len(pieces) == 1:
        return pieces[0]
    return getattr(shapely, _MULTI_OF[dims.pop()])(pieces)  # disjoint parts: a valid Multi


@wrap_gdal_errors
def dissolve(src: str, dst: str, *, by: str | list[str] | None = None, layer: str | None = None,
             format: str | None = None, output_layer: str | None = None,
             progress: Progress = no_progress) -> tuple[VectorSummary, list[str]]:
    """Union the geometries of each group of features with equal `by` values (all of them when by is None).

    The output has one feature per group whose attributes are the group keys (null is a group of its own).
    Memory grows with the output, not the input: each batch is unioned into the running group results.
    """
    import shapely

    driver = _check_common(src, dst, format)
    keys = [by] if isinstance(by, str) else list(by or [])
    if len(set(keys)) != len(keys) or not all(isinstance(k, str) and k for k in keys):
        raise GdalMcpError("invalid-argument", "by must be a field name or a list of distinct field names")
    name, crs, declared = layer_meta(src, layer)
    groups: dict[tuple[Any, ...], Any] = {}
    counts = {"repaired": 0, "features": 0}
    with read_layer(src, layer=name, columns=keys, batch_size=READ_BATCH) as stream:
        key_fields = [stream.schema.field(k) for k in keys]
        geom_field = stream.schema.field(stream.geometry_column or "")
        for batch in relay(stream.batches, stream.total, share(progress, 0.0, 0.9), "dissolved"):
            geoms = geometries(batch)
            counts["features"] += batch.num_rows
            if keys:
                rows = list(zip(*(batch.column(k).to_pylist() for k in keys), strict=True))
                members: dict[tuple[Any, ...], list[int]] = {}
                for i, key in enumerate(rows):
                    members.setdefault(key, []).append(i)
            else:
                members = {(): list(range(batch.num_rows))}
            for key, idx in members.items():
                part = _union(geoms[idx], counts)
                previous = groups.get(key)
                groups[key] = _merge(previous, part, counts)
    order = sorted(groups, key=lambda k: tuple((v is None, v) for v in k))
    geoms_out = np.array([groups[k] for k in order], dtype=object)
    if len(geoms_out):
        geoms_out[shapely.is_empty(geoms_out)] = None
    dims = {int(d) for d in shapely.get_dimensions(geoms_out[~shapely.is_missing(geoms_out)])}
    has_multi = contains_multi(geoms_out)
    mixed = len(dims) > 1 or bool((shapely.get_type_id(geoms_out) == 7).any())
    z = bool(shapely.has_z(geoms_out).any()) if len(geoms_out) else declared.z
    if mixed:
        out = GeomType(None, False, z)
    else:
        dim = dims.pop() if dims else declared.dim
        out = GeomType(dim, has_multi or (declared.multi and dim is not None), z)
        if out.multi and out.dim is not None:
            geoms_out = to_multi(geoms_out)
    schema = pa.schema([*key_fields, geom_field])
    wkb = shapely.to_wkb(geoms_out, output_dimension=3, flavor="iso") if len(geoms_out) else np.array([], dtype=object)

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start:start + BATCH_SIZE]
            columns = [pa.array([k[i] for k in chunk], type=f.type) for i, f in enumerate(key_fields)]
            columns.append(pa.array(list(wkb[start:start + BATCH_SIZE]), type=geom_field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)

    out_name = output_layer or name
    progress(0.9, f"writing {len(order)} dissolved features")
    options = dict(LAYER_OPTIONS.get(driver, {}))
    warnings: list[str] = []
    if driver == "FlatGeobuf" and shapely.is_missing(geoms_out).any():
        options["SPATIAL_INDEX"] = "NO"
        warnings.append(NO_INDEX_NOTE)
    write_guarded(dst, lambda: write_layer(dst, schema, batches(), driver=driver, layer=out_name, crs=crs,
                                           geometry_type=out.name, layer_options=options))
    summary = summary_of(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    if counts["repaired"]:
        warnings.append(f"{counts['repaired']} invalid geometries were repaired (make_valid) before the union; "
                        "run validate to see them")
    if out.multi and not declared.multi and out.dim is not None:
        warnings.append(f"the output layer is {out.name}: some groups are multi-part")
    if mixed:
        warnings.append("groups mix points, lines and polygons, so the output geometry type is Unknown "
                        "(GeometryCollections)")
    return summary, warnings
