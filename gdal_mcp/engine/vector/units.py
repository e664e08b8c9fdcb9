"""Distances with units on a layer: where a buffer distance or simplify tolerance is applied (`plan_units`).

Distances and tolerances come with units: "m" (the default), "km", "ft", "mi", "deg" or "layer" (the layer's
own). On a geographic layer a linear distance is applied in a local projection and the result returned to the
layer's CRS: the UTM zone of the data when the data fits near it, otherwise an azimuthal equidistant
projection centred on each feature (computed with geodesics, vectorised over the batch). A linear unit on
a projected layer is converted to the layer's unit; "deg" there is refused. Degrees on a geographic layer
("deg" or "layer") are applied as asked, with a warning. The warnings say which.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gdal_mcp.engine.vector.geomtypes import _combine, keep_dimension
from gdal_mcp.errors import GdalMcpError

LINEAR_UNITS = {"m": 1.0, "km": 1000.0, "ft": 0.3048, "mi": 1609.344}
UNITS = ("layer", *LINEAR_UNITS, "deg")
# A geographic layer is worked in one UTM zone when all of it lies within this distance of the zone's
# central meridian (UTM scale error there is under 0.5 %); otherwise per feature (azimuthal equidistant).
UTM_REACH_M = 600_000.0
EARTH_RADIUS_M = 6_371_008.8
# Azimuthal equidistant: beyond this distance from the centre, sideways distances are off by more than 1 %.
AEQD_ACCURATE_M = 1_500_000.0


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

    def apply(
        self, geoms: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], record: bool = True, snap: bool = False
    ) -> np.ndarray:
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
                results.append(
                    _combine(pieces, dims.pop()) if len(dims) == 1 else (shapely.GeometryCollection(pieces) if pieces else None)
                )
            out[wide] = np.array(results + [None], dtype=object)[:-1]
        return out

    def _run(
        self, g: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], record: bool, snap: bool, split: bool = False
    ) -> np.ndarray:
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
        fixed, _ = keep_dimension(
            shapely.make_valid(back[bad], method="structure", keep_collapsed=False), shapely.get_dimensions(back[bad])
        )
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

    def _aeqd_maps(
        self, coords: np.ndarray, idx: np.ndarray, n: int, record: bool
    ) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
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
            notes.append(
                f"{self.far} feature(s) reach more than {AEQD_ACCURATE_M / 1000:.0f} km from their centre; "
                f"distances far from the centre are approximate there (up to {error:.1%} off sideways)"
            )
        if self.straddling:
            notes.append(
                f"{self.straddling} feature(s) now cross the antimeridian and were kept continuous, so they "
                "have longitudes beyond ±180"
            )
        if self.repaired:
            notes.append(
                f"{self.repaired} result(s) had tiny self-intersections after the way back to the layer's "
                "CRS and were repaired (make_valid)"
            )
        if self.polar:
            notes.append(
                f"{self.polar} feature(s) have a part spanning more than 180° of longitude (around a pole, "
                f"such as Antarctica) that no local projection holds; they were NOT {verb} and are written "
                "unchanged: reproject the layer (e.g. to a polar projection) to process them"
            )
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
    from gdal_mcp.engine.features.masks import flatten

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


def _scale_notes(
    crs: Any, bounds: Callable[[], tuple[float, float, float, float]], value: float, units: str, unit_name: str, what: str
) -> list[str]:
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
    return [
        f"{_crs_name(crs)} is not true to scale near the data (scale factor {k:.3g} at its centre): the {what} "
        f"{given} is measured on the map, about {value / k:.4g} {unit_name if units == 'layer' else units} on "
        "the ground there; reproject to a local projection (e.g. the UTM zone) for ground distances"
    ]


def layer_bounds(src: str, layer: str) -> tuple[float, float, float, float]:
    """The layer's extent in its CRS (GDAL scans the features when the format stores none)."""
    import warnings

    import pyogrio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = pyogrio.read_info(src, layer=layer, force_total_bounds=True)
    tb = info.get("total_bounds")
    return tuple(float(v) for v in tb) if tb is not None else (math.nan,) * 4  # type: ignore[return-value]


def plan_units(
    value: float,
    units: str,
    crs_text: str | None,
    *,
    what: str,
    verb: str,
    bounds: Callable[[], tuple[float, float, float, float]],
) -> Frame:
    """How to apply `value` `units` to a layer with CRS `crs_text` (see the module docstring).

    `what` names the quantity (distance, tolerance), `verb` the operation (buffered, simplified) for the notes;
    `bounds` gives the layer's extent, asked for only when a local projection must be chosen.
    """
    if units not in UNITS:
        raise GdalMcpError(
            "invalid-argument", f"units must be one of {', '.join(UNITS)} (got {units!r}); 'layer' means the layer CRS's own unit"
        )
    if not math.isfinite(value):
        raise GdalMcpError("invalid-argument", f"{what} must be a finite number")
    crs = _horizontal(crs_text)
    if crs is None:
        if units != "layer":
            raise GdalMcpError(
                "invalid-argument",
                f"the layer has no CRS, so its unit is unknown and a {what} in "
                f"{units!r} cannot be converted; pass units='layer' (the coordinates' own unit) or "
                "assign a CRS first",
            )
        return Frame("layer", value)
    factor, unit_name = _unit_factor(crs)
    if not crs.is_geographic:
        if units == "deg":
            raise GdalMcpError(
                "invalid-argument",
                f"units='deg' needs a geographic layer, but this layer is projected "
                f"({_crs_name(crs)}, unit {unit_name}); give the {what} in m, km, ft, mi or "
                "'layer' units",
            )
        amount = value if units == "layer" else value * LINEAR_UNITS[units] / factor
        return Frame("layer", amount, _scale_notes(crs, bounds, value, units, unit_name, what))
    deg_per_unit = math.degrees(factor)
    if units == "layer":
        return Frame(
            "layer",
            value,
            [
                f"the layer's CRS ({_crs_name(crs)}) is geographic, so the {what} {value:g} is in {unit_name}s "
                f"(1 degree is about 111 km north-south and less east-west away from the equator); pass units='m', "
                f"'km', 'ft' or 'mi' for a {what} on the ground"
            ],
        )
    if units == "deg":
        return Frame(
            "layer",
            value / deg_per_unit,
            [
                f"the {what} {value:g} was applied in degrees, as asked (units='deg'): 1 degree is about 111 km "
                "north-south and less east-west away from the equator, so the result is not the same size on the ground "
                f"everywhere; pass units='m', 'km', 'ft' or 'mi' for a {what} on the ground"
            ],
        )
    metres = value * LINEAR_UNITS[units]
    geo = crs.geodetic_crs or crs
    if geo.is_derived or not hasattr(geo, "ellipsoid") or geo.ellipsoid is None:
        raise GdalMcpError(
            "unsupported", f"cannot work in {units} on the layer's CRS {_crs_name(crs)}; reproject it to a projected CRS first"
        )
    box = bounds()
    utm = _utm(geo, box, deg_per_unit)
    if utm is not None:
        from pyproj import Transformer

        utm_crs, label = utm
        return Frame(
            "utm",
            metres,
            [
                f"the layer is geographic ({_crs_name(crs)}): the {value:g} {units} {what} was applied in {label}, the "
                f"local projection of the data, and the result returned to the layer's CRS"
            ],
            forward=Transformer.from_crs(crs, utm_crs, always_xy=True),
            inverse=Transformer.from_crs(utm_crs, crs, always_xy=True),
        )
    return Frame(
        "aeqd",
        metres,
        [
            f"the layer is geographic ({_crs_name(crs)}) and its data spans too wide an area for one UTM zone, so each "
            f"feature was {verb} by {value:g} {units} in an azimuthal equidistant projection centred on it (geodesic "
            "distances) and returned to the layer's CRS"
        ],
        geod=geo.get_geod(),
        deg_per_unit=deg_per_unit,
    )
