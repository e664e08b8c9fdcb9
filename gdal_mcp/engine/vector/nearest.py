"""The k nearest join features of each input feature (vector_join predicate="nearest"), and their distances.

Planar (a projected layer, or units "layer"/"deg"): shapely distances in the layer's CRS, converted to the units.
Geodesic (a geographic layer, distances in m, km, ft or mi): the distance between two features is the length of
the geodesic on the CRS's ellipsoid between their nearest points, where the features' edges are the straight
lines in lon/lat that GDAL and shapely draw between the vertices; a point inside a polygon (or features that
touch) is at 0.

From a point to a feature: the feature's edges are cut to the box that holds every point within reach (a
spherical-cap bound, conservative, wrapped at ±180°) and divided into steps of at most 1/16 of the reach; the
points are placed in the query point's azimuthal equidistant frame (pyproj.Geod.inv: azimuth and distance), the
nearest vertex or chord picks the edge, and a golden-section search on Geod.inv along that edge finds its nearest
point (agrees with a dense Geod.inv brute force to ~1e-8). Between two non-point features: from each one's
vertices near the other (and where the box cuts its edges) to the other's edges, as from a point - the nearest
points of two edges lie at a vertex of one of them, exactly so in a plane and very nearly so on the ellipsoid.

The search: the k planar-nearest features in lon/lat give an upper bound (the geodesic length of the lon/lat
shortest line ends at a real point of the feature); every feature meeting the cap box of that reach is then
measured, so a planar pre-filter cannot pick the wrong neighbour; the reach grows until k features lie within it.
Ties are kept: rank is 1 + the number of strictly nearer features, and every feature whose rank is ≤ k is returned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gdal_mcp.engine.vector.units import LINEAR_UNITS, UNITS, _horizontal, _unit_factor
from gdal_mcp.errors import GdalMcpError

# Smallest radius of curvature of the WGS84-like ellipsoids (meridional, at the equator), metres: an angle of
# distance / this radius bounds where a point within `distance` can be.
MIN_RADIUS_M = 6_335_000.0
# Beyond this reach the search box is the whole globe.
WORLD_M = math.pi * MIN_RADIUS_M
# Beyond this distance from a query point its azimuthal equidistant frame is too distorted for chords: points only.
CHORD_M = 0.75 * WORLD_M
# Metres per degree of latitude, at least (for the steps along edges).
M_PER_DEG = 110_574.0
# Edges are measured in steps of at most reach / STEPS (and at most MAX_STEP_DEG degrees).
STEPS = 16
MAX_STEP_DEG = 0.5
# Golden-section steps along the nearest edge (0.618^25: 6e-6 of the bracket; the distance is flat there).
GOLDEN_STEPS = 25
# Rows of a cross product computed at once.
CHUNK = 1 << 20
TIE = 1e-12


@dataclass
class Distances:
    """How distances are measured on the input layer: geodesic (geographic CRS, linear units) or planar."""

    geodesic: bool
    factor: float  # output units per metre (geodesic) or per layer unit (planar)
    geod: Any = None
    deg_per_unit: float = 1.0
    units: str = "m"

    @property
    def method(self) -> str:
        return "geodesic" if self.geodesic else "planar"


def plan_distances(crs_text: str | None, units: str) -> tuple[Distances, list[str]]:
    if units not in UNITS:
        raise GdalMcpError("invalid-argument", f"units must be one of {', '.join(UNITS)} (got {units!r})")
    crs = _horizontal(crs_text)
    if crs is None:
        if units != "layer":
            raise GdalMcpError(
                "invalid-argument",
                f"the input layer has no CRS, so distances in {units!r} cannot be "
                "measured; pass units='layer' (the coordinates' own unit) or assign a CRS first",
            )
        return Distances(False, 1.0, units=units), []
    factor, unit_name = _unit_factor(crs)
    if crs.is_geographic:
        if units in ("deg", "layer"):
            return Distances(False, 1.0, units=units), [
                f"distances are in {unit_name}s of the geographic CRS, as asked "
                f"(units={units!r}); pass units='m' for ground distances"
            ]
        geod = (crs.geodetic_crs or crs).get_geod()
        return Distances(True, 1.0 / LINEAR_UNITS[units], geod=geod, deg_per_unit=math.degrees(factor), units=units), []
    if units == "deg":
        raise GdalMcpError(
            "invalid-argument",
            f"units='deg' needs a geographic layer; this one is projected (unit {unit_name}): use m, km, ft, mi or layer",
        )
    if units == "layer":
        return Distances(False, 1.0, units=units), []
    return Distances(False, factor / LINEAR_UNITS[units], units=units), []


# ---------------------------------------------------------------------------------------------- edges


@dataclass
class Edges:
    """The edges of geometries (polygon rings, lines; a point is an edge of length 0), grouped by geometry:
    those of geometry g are rows start[g]:start[g + 1]."""

    x0: np.ndarray
    y0: np.ndarray
    x1: np.ndarray
    y1: np.ndarray
    start: np.ndarray

    @classmethod
    def of(cls, geoms: np.ndarray) -> Edges:
        import shapely

        parts, owner = shapely.get_parts(geoms, return_index=True)
        while len(parts) and np.isin(shapely.get_type_id(parts), (4, 5, 6, 7)).any():
            sub, idx = shapely.get_parts(parts, return_index=True)
            parts, owner = sub, owner[idx]
        polygon = shapely.get_type_id(parts) == 3
        rings, ridx = shapely.get_rings(parts[polygon], return_index=True)
        lines = np.concatenate([parts[~polygon], rings])
        line_owner = np.concatenate([owner[~polygon], owner[polygon][ridx]])
        coords, cidx = shapely.get_coordinates(lines, return_index=True)
        same = cidx[:-1] == cidx[1:]
        counts = np.bincount(cidx, minlength=len(lines))
        single = np.flatnonzero(counts == 1)  # points
        first = np.searchsorted(cidx, single)
        x0 = np.concatenate([coords[:-1, 0][same], coords[first, 0]])
        y0 = np.concatenate([coords[:-1, 1][same], coords[first, 1]])
        x1 = np.concatenate([coords[1:, 0][same], coords[first, 0]])
        y1 = np.concatenate([coords[1:, 1][same], coords[first, 1]])
        own = np.concatenate([line_owner[cidx[:-1][same]], line_owner[single]])
        order = np.argsort(own, kind="stable")
        start = np.searchsorted(own[order], np.arange(len(geoms) + 1))
        return cls(x0[order], y0[order], x1[order], y1[order], start)


@dataclass
class Pieces:
    """Points along the parts of edges kept, per pair: each point is edge `edge` at parameter `t` (0 at its
    start, 1 at its end), the points of a piece `dt` apart, in order."""

    x: np.ndarray
    y: np.ndarray
    piece: np.ndarray
    pair: np.ndarray
    edge: np.ndarray
    t: np.ndarray
    dt: np.ndarray

    def take(self, sel: np.ndarray) -> Pieces:
        return Pieces(*(getattr(self, f)[sel] for f in ("x", "y", "piece", "pair", "edge", "t", "dt")))


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, position within owner) of sum(counts) rows."""
    owner = np.repeat(np.arange(len(counts)), counts)
    offsets = np.cumsum(counts) - counts
    return owner, np.arange(len(owner)) - offsets[owner]


def _chunks(counts: np.ndarray) -> list[tuple[int, int]]:
    """Ranges of owners whose rows add up to about CHUNK (at least one owner each)."""
    limit = np.cumsum(counts)
    out = []
    first = 0
    while first < len(counts):
        base = int(limit[first - 1]) if first else 0
        last = max(int(np.searchsorted(limit, base + CHUNK, side="right")), first + 1)
        out.append((first, last))
        first = last
    return out


def _clip(edges: Edges, owners: np.ndarray, boxes: np.ndarray, step: np.ndarray, half: float) -> Pieces:
    """The edges of geometry owners[p] inside boxes[p] (and its copies shifted by 360°: `half` is 180° in layer
    units), as points at most step[p] apart (layer units) - a Liang-Barsky clip of each edge."""
    counts = edges.start[owners + 1] - edges.start[owners]
    out: list[tuple[np.ndarray, ...]] = []
    pieces = 0
    for first, last in _chunks(counts):
        pair, pos = _expand(counts[first:last])
        pair = pair + first
        e = edges.start[owners[pair]] + pos
        for shift in (0.0, 2 * half, -2 * half):
            b = boxes[pair]
            if shift:
                sel = b[:, 0] < -half if shift > 0 else b[:, 2] > half
                if not sel.any():
                    continue
                b = b[sel] + np.array([shift, 0.0, shift, 0.0])
                p_, e_ = pair[sel], e[sel]
            else:
                p_, e_ = pair, e
            x0, y0 = edges.x0[e_], edges.y0[e_]
            dx, dy = edges.x1[e_] - x0, edges.y1[e_] - y0
            t0, t1 = np.zeros(len(e_)), np.ones(len(e_))
            ok = np.ones(len(e_), dtype=bool)
            with np.errstate(divide="ignore", invalid="ignore"):
                for p, q in ((-dx, x0 - b[:, 0]), (dx, b[:, 2] - x0), (-dy, y0 - b[:, 1]), (dy, b[:, 3] - y0)):
                    ok &= ~((p == 0) & (q < 0))
                    r = q / p
                    t0 = np.where(p < 0, np.maximum(t0, r), t0)
                    t1 = np.where(p > 0, np.minimum(t1, r), t1)
            ok &= t0 <= t1
            if not ok.any():
                continue
            x0, y0, dx, dy, t0, t1, p_, e_ = x0[ok], y0[ok], dx[ok], dy[ok], t0[ok], t1[ok], p_[ok], e_[ok]
            length = np.hypot(dx, dy) * (t1 - t0)
            n = np.clip(np.ceil(length / step[p_]), 1, 1 << 16).astype(np.int64)
            piece, m = _expand(n + 1)
            dt = (t1 - t0) / n
            t = t0[piece] + dt[piece] * m
            out.append((x0[piece] + t * dx[piece], y0[piece] + t * dy[piece], piece + pieces, p_[piece], e_[piece], t, dt[piece]))
            pieces += len(n)
    if not out:
        f, i = np.zeros(0), np.zeros(0, dtype=np.int64)
        return Pieces(f, f, i, i, i, f, f)
    cols = [np.concatenate(c) for c in zip(*out, strict=True)]
    order = np.lexsort((np.arange(len(cols[3])), cols[3]))  # by pair, pieces kept in order
    return Pieces(*(c[order] for c in cols))


def _min_to_pieces(
    qx: np.ndarray, qy: np.ndarray, qpair: np.ndarray, pieces: Pieces, npairs: int, dist: Distances, edges: Edges
) -> np.ndarray:
    """Metres from each query point (lon/lat in layer units) to the nearest of its pair's pieces (inf: none):
    azimuthal equidistant coordinates of the pieces' points seen from the query point, the nearest vertex or
    chord, then the nearest point of that edge found by golden-section search on Geod.inv."""
    k = dist.deg_per_unit
    start = np.searchsorted(pieces.pair, np.arange(npairs + 1))
    counts = start[qpair + 1] - start[qpair]
    best = np.full(len(qx), np.inf)
    lo, hi, edge = np.zeros(len(qx)), np.zeros(len(qx)), np.zeros(len(qx), dtype=np.int64)
    for first, last in _chunks(counts):
        q, pos = _expand(counts[first:last])
        q = q + first
        w = start[qpair[q]] + pos
        if not len(w):
            continue
        az, _, d = dist.geod.inv(qx[q] * k, qy[q] * k, pieces.x[w] * k, pieces.y[w] * k)
        a = np.radians(az)
        x, y = d * np.sin(a), d * np.cos(a)
        # chords between consecutive points of a piece; not near the antipode, where the frame tears
        chord = (q[:-1] == q[1:]) & (pieces.piece[w[:-1]] == pieces.piece[w[1:]]) & (d[:-1] < CHORD_M) & (d[1:] < CHORD_M)
        x0, y0, x1, y1 = x[:-1][chord], y[:-1][chord], x[1:][chord], y[1:][chord]
        dx, dy = x1 - x0, y1 - y0
        dd = dx * dx + dy * dy
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.clip(np.where(dd > 0, -(x0 * dx + y0 * dy) / dd, 0.0), 0.0, 1.0)
        value = np.concatenate([d, np.hypot(x0 + t * dx, y0 + t * dy)])
        owner = np.concatenate([q, q[:-1][chord]])
        at = np.concatenate([w, w[:-1][chord]])  # the point (or chord start)
        order = np.lexsort((value, owner))
        firsts = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
        who = owner[firsts]
        np.minimum.at(best, q, d)  # the vertices: exact
        wi = at[firsts]
        edge[who] = pieces.edge[wi]
        lo[who] = pieces.t[wi] - pieces.dt[wi]
        hi[who] = pieces.t[wi] + 2 * pieces.dt[wi]
    ok = np.isfinite(best)
    if ok.any():
        best[ok] = np.minimum(best[ok], _golden(qx[ok], qy[ok], edges, edge[ok], lo[ok], hi[ok], dist))
    return best


def _golden(
    qx: np.ndarray, qy: np.ndarray, edges: Edges, e: np.ndarray, lo: np.ndarray, hi: np.ndarray, dist: Distances
) -> np.ndarray:
    """The least geodesic distance from each query point to edge e between parameters lo and hi (within 0..1)."""
    k = dist.deg_per_unit
    x0, y0 = edges.x0[e], edges.y0[e]
    dx, dy = edges.x1[e] - x0, edges.y1[e] - y0
    a, b = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)

    def f(t: np.ndarray) -> np.ndarray:
        return np.asarray(dist.geod.inv(qx * k, qy * k, (x0 + t * dx) * k, (y0 + t * dy) * k)[2])

    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(GOLDEN_STEPS):
        left = fc < fd  # the least lies in [a, d]: d becomes c's place; else in [c, b]
        a, b = np.where(left, a, c), np.where(left, d, b)
        new = np.where(left, b - g * (b - a), a + g * (b - a))
        fnew = f(new)
        c, d, fc, fd = (
            np.where(left, new, d),
            np.where(left, c, new),
            np.where(left, fnew, fd),
            np.where(left, fc, fnew),
        )
    return np.minimum(np.minimum(fc, fd), np.minimum(f(a), f(b)))


def cap_boxes(bounds: np.ndarray, metres: np.ndarray, k: float) -> np.ndarray:
    """Lon/lat boxes (layer units; k degrees per unit) holding every point within `metres` of each bounds box."""
    b = bounds * k
    delta = np.minimum(metres / MIN_RADIUS_M, math.pi)  # radians
    dlat = np.degrees(delta) * 1.0001 + 1e-9
    lat_far = np.minimum(np.maximum(np.abs(b[:, 1]), np.abs(b[:, 3])), 90.0)
    ratio = np.sin(delta) / np.maximum(np.cos(np.radians(lat_far)), 1e-300)
    with np.errstate(invalid="ignore"):
        dlon = np.where((ratio >= 1) | (delta >= math.pi / 2), 360.0, np.degrees(np.arcsin(np.minimum(ratio, 1.0))))
    dlon = dlon * 1.0001 + 1e-9
    return (
        np.column_stack([b[:, 0] - dlon, np.maximum(b[:, 1] - dlat, -90.0), b[:, 2] + dlon, np.minimum(b[:, 3] + dlat, 90.0)]) / k
    )


class Geodesic:
    """Geodesic distances from features to the features of an index (see the module docstring)."""

    def __init__(self, tree_geoms: np.ndarray, dist: Distances) -> None:
        self.geoms = tree_geoms
        self.dist = dist
        self.edges = Edges.of(tree_geoms)

    def _points_to(
        self, edges: Edges, owners: np.ndarray, x: np.ndarray, y: np.ndarray, reach: np.ndarray, step: np.ndarray
    ) -> np.ndarray:
        """Metres from each point (x, y) to the edges of geometry owners[i] of `edges`: exact when at most reach[i]."""
        k = self.dist.deg_per_unit
        pieces = _clip(edges, owners, cap_boxes(np.column_stack([x, y, x, y]), reach, k), step, 180.0 / k)
        return _min_to_pieces(x, y, np.arange(len(x)), pieces, len(x), self.dist, edges)

    def upper(self, a: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Metres along the geodesic between the ends of the lon/lat shortest line: a distance to a real point
        of each feature, so at least the true distance (exact between points)."""
        import shapely

        k = self.dist.deg_per_unit
        lines = shapely.shortest_line(a, self.geoms[j])
        c = shapely.get_coordinates(lines).reshape(-1, 2, 2)
        _, _, d = self.dist.geod.inv(c[:, 0, 0] * k, c[:, 0, 1] * k, c[:, 1, 0] * k, c[:, 1, 1] * k)
        return np.where(shapely.intersects(a, self.geoms[j]), 0.0, d)

    def exact(self, a: np.ndarray, j: np.ndarray, reach: np.ndarray, a_edges: Edges | None, ai: np.ndarray) -> np.ndarray:
        """Metres from a[p] to tree feature j[p]: exact when at most reach[p], else more than reach[p] (or inf).
        `a_edges` are the edges of the input features, a[p] being input feature ai[p]."""
        import shapely

        d = np.full(len(j), np.inf)
        b = self.geoms[j]
        touching = shapely.intersects(a, b)
        d[touching] = 0.0
        ta, tb = shapely.get_type_id(a), shapely.get_type_id(b)
        k = self.dist.deg_per_unit
        both = ~touching & (ta == 0) & (tb == 0)
        if both.any():
            pa_, pb = shapely.get_coordinates(a[both]), shapely.get_coordinates(b[both])
            d[both] = self.dist.geod.inv(pa_[:, 0] * k, pa_[:, 1] * k, pb[:, 0] * k, pb[:, 1] * k)[2]
        rest = np.flatnonzero(~touching & ~both)
        r = reach[rest].copy()
        for _ in range(3):  # measure, then again with the reach shrunk to what was found
            if not len(rest):
                break
            found = self._measure(a[rest], ta[rest], j[rest], tb[rest], r, a_edges, ai[rest])
            d[rest] = np.where(np.isfinite(found), found, d[rest])  # a later pass is finer
            again = np.isfinite(found) & (found < r * 0.5)
            rest, r = rest[again], found[again] * 1.001 + 1e-3
        return d

    def _measure(
        self,
        a: np.ndarray,
        ta: np.ndarray,
        j: np.ndarray,
        tb: np.ndarray,
        reach: np.ndarray,
        a_edges: Edges | None,
        ai: np.ndarray,
    ) -> np.ndarray:
        import shapely

        k = self.dist.deg_per_unit
        half = 180.0 / k
        step = np.clip(reach / STEPS / M_PER_DEG, 1e-9, MAX_STEP_DEG) / k
        reach = np.minimum(reach, WORLD_M * 1.01)
        n = len(j)
        out = np.full(n, np.inf)
        point_a = ta == 0
        point_b = ~point_a & (tb == 0)
        if point_a.any():  # a point to b's edges
            p = np.flatnonzero(point_a)
            c = shapely.get_coordinates(a[p])
            out[p] = self._points_to(self.edges, j[p], c[:, 0], c[:, 1], reach[p], step[p])
        if point_b.any():  # b is a point: a's edges to it
            assert a_edges is not None
            p = np.flatnonzero(point_b)
            c = shapely.get_coordinates(self.geoms[j[p]])
            out[p] = self._points_to(a_edges, ai[p], c[:, 0], c[:, 1], reach[p], step[p])
        general = np.flatnonzero(~point_a & ~point_b)
        if len(general):  # a's vertices near b to b's edges, b's vertices near a to a's edges
            assert a_edges is not None
            p, r, m = general, reach[general], len(general)
            best = np.full(m, np.inf)
            ends = np.full(m, np.inf)  # the edges' own vertices (and where the boxes cut them)
            for mine, owner, theirs, towner, near in (
                (a_edges, ai[p], self.edges, j[p], self.geoms[j[p]]),
                (self.edges, j[p], a_edges, ai[p], a[p]),
            ):
                q = _clip(mine, owner, cap_boxes(shapely.bounds(near), r, k), ends, half)
                xy, first = np.unique(np.column_stack([q.pair, q.x, q.y]), axis=0, return_index=True)
                pair = q.pair[first]
                d = self._points_to(theirs, towner[pair], xy[:, 1], xy[:, 2], r[pair], step[p][pair])
                np.minimum.at(best, pair, d)
            out[p] = best
        return out


# ---------------------------------------------------------------------------------------------- the search


def _query_boxes(tree: Any, boxes: np.ndarray, half: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(box index, tree index) of the tree geometries meeting each box; with `half` (180° in layer units), boxes
    beyond ±180° wrapped around."""
    import shapely

    found = []
    for shift in (0.0, 1.0, -1.0) if half is not None else (0.0,):
        bx = boxes.copy()
        if shift:
            assert half is not None
            sel = (bx[:, 0] < -half) if shift > 0 else (bx[:, 2] > half)
            if not sel.any():
                continue
            idx = np.flatnonzero(sel)
            bx = bx[sel]
            bx[:, [0, 2]] += shift * 2 * half
        else:
            idx = np.arange(len(bx))
        q = tree.query(shapely.box(bx[:, 0], bx[:, 1], bx[:, 2], bx[:, 3]), predicate="intersects")
        found.append(np.stack([idx[q[0]], q[1]]))
    pairs = np.unique(np.concatenate(found, axis=1), axis=1) if found else np.zeros((2, 0), dtype=np.int64)
    return pairs[0], pairs[1]


def _ranks(i: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Competition ranks (1, 2, 2, 4) of d within each i; rows sorted by (i, d)."""
    n = len(i)
    if not n:
        return np.zeros(0, dtype=np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = (i[1:] != i[:-1]) | (d[1:] > d[:-1] * (1 + TIE) + 1e-9)
    pos = np.arange(n)
    last_new = np.maximum.accumulate(np.where(new, pos, 0))
    group_start = np.maximum.accumulate(np.where(np.r_[True, i[1:] != i[:-1]], pos, 0))
    return last_new - group_start + 1


class Nearest:
    """The join layer indexed for nearest queries."""

    def __init__(self, tree: Any, tree_geoms: np.ndarray, dist: Distances) -> None:
        import shapely

        self.tree = tree
        self.geoms = tree_geoms
        self.dist = dist
        self.geodesic = Geodesic(tree_geoms, dist) if dist.geodesic else None
        self.planar: Nearest | None = None
        present = tree_geoms[~shapely.is_missing(tree_geoms) & ~shapely.is_empty(tree_geoms)] if len(tree_geoms) else tree_geoms
        self.total = shapely.total_bounds(present) if len(present) else np.zeros(4)
        self.span = float(np.hypot(self.total[2] - self.total[0], self.total[3] - self.total[1])) + float(
            np.abs(self.total).max()
        )
        self.floor = 1.0 if dist.geodesic else (self.span * 1e-9 or 1e-9)

    def pairs(
        self, geoms: np.ndarray, max_distance: float | None, k: int = 1
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(input index, tree index, distance in output units, rank) of each input geometry's k nearest tree
        geometries (ties kept), within max_distance (output units) when given; sorted by input, rank, tree index."""
        import shapely

        none = np.zeros(0, dtype=np.int64)
        present = np.flatnonzero(~shapely.is_missing(geoms) & ~shapely.is_empty(geoms))
        if not len(present) or not len(self.tree):
            return none, none, np.zeros(0), none
        g = geoms[present]
        geo = self.geodesic
        limit = np.inf if max_distance is None else max_distance / self.dist.factor  # metres or layer units
        a_edges = Edges.of(g) if geo is not None and not (shapely.get_type_id(g) == 0).all() else None
        reach = np.full(len(g), np.inf)
        if geo is None:
            i0, j0 = self.tree.query_nearest(g, all_matches=False)
            reach[i0] = shapely.distance(g[i0], self.geoms[j0])
        else:  # the k planar-nearest in lon/lat: their geodesic bounds bound the k-th distance
            if self.planar is None:
                self.planar = Nearest(self.tree, self.geoms, Distances(False, 1.0, units="layer"))
            pi, pj, _, _ = self.planar.pairs(g, None, k)
            ub = geo.upper(g[pi], pj)
            order = np.lexsort((ub, pi))
            si, su = pi[order], ub[order]
            first = np.searchsorted(si, np.arange(len(g)))
            have = np.bincount(si, minlength=len(g)) >= k
            reach[have] = su[first[have] + k - 1]
        reach = np.minimum(reach, limit)
        bounds = shapely.bounds(g)
        todo = np.arange(len(g))
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        while len(todo):
            r = reach[todo]
            if geo is not None:
                boxes = cap_boxes(bounds[todo], r, self.dist.deg_per_unit)
                bi, tj = _query_boxes(self.tree, boxes, 180.0 / self.dist.deg_per_unit)
                d = geo.exact(g[todo[bi]], tj, r[bi], a_edges, todo[bi])
                world = r >= WORLD_M
            else:
                rr = np.where(np.isfinite(r), r, self.span + np.abs(bounds[todo]).max(axis=1) + 1.0)  # inf: all
                boxes = bounds[todo] + np.column_stack([-rr, -rr, rr, rr])
                bi, tj = _query_boxes(self.tree, boxes, None)
                d = shapely.distance(g[todo[bi]], self.geoms[tj])
                world = (boxes[:, 0] <= self.total[0]) & (boxes[:, 1] <= self.total[1])
                world &= (boxes[:, 2] >= self.total[2]) & (boxes[:, 3] >= self.total[3])
            within = d <= r[bi]
            count = np.bincount(bi[within], minlength=len(todo))
            done = (count >= k) | (r >= limit) | world
            keep = within & done[bi]
            found.append((todo[bi[keep]], tj[keep], d[keep]))
            if done.all():
                break
            # the next reach: the k-th smallest known bound where k candidates were seen, else four times wider
            bound = d if geo is None else np.where(within, d, np.minimum(d, geo.upper(g[todo[bi]], tj)))
            grow = np.maximum(r * 4, self.floor)
            order = np.lexsort((bound, bi))
            sb, sd = bi[order], bound[order]
            first = np.searchsorted(sb, np.arange(len(todo)))
            seen = np.bincount(bi, minlength=len(todo))
            enough = seen >= k
            kth = np.where(enough, sd[np.minimum(first + k - 1, max(len(sd) - 1, 0))] if len(sd) else 0.0, grow)
            nxt = np.where(enough, np.maximum(kth, r * (1 + 1e-9)), grow)
            reach[todo[~done]] = np.minimum(nxt[~done], limit)
            todo = todo[~done]
        i = np.concatenate([f[0] for f in found])
        j = np.concatenate([f[1] for f in found])
        d = np.concatenate([f[2] for f in found])
        order = np.lexsort((j, d, i))
        i, j, d = i[order], j[order], d[order]
        rank = _ranks(i, d)
        sel = rank <= k
        return present[i[sel]], j[sel], d[sel] * self.dist.factor, rank[sel]
