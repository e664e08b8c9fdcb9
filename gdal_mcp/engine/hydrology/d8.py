"""D8 steepest-descent flow directions, with the documented rules for ties, edges and flats (package docstring).

Vectorised numpy over the whole grid: eight shifted comparisons for the steepest drop, then a breadth-first search
over the flats, frontier by frontier (each step handles only the cells of the frontier, so the work follows the
flats' size, not the grid's times their width).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gdal_mcp.engine.hydrology.grid import CODES, NODATA, OFFSETS, PIT, Dem


@dataclass
class Directions:
    """D8 codes of a grid and what routing them found."""

    d8: np.ndarray  # uint8 (height, width): ESRI codes, PIT, NODATA
    outlets: int  # cells on the grid edge or next to nodata with no lower neighbour (code 0)
    pits: int  # cells inside the grid that cannot drain (closed depressions' bottoms; code 0)
    flat_cells: int  # cells routed across a flat

    def notes(self) -> list[str]:
        notes = []
        if self.flat_cells:
            notes.append(
                f"{self.flat_cells} cell(s) on flats were routed towards the nearest draining cell of their flat "
                "(breadth-first, 8-connected)"
            )
        if self.pits:
            notes.append(
                f"{self.pits} cell(s) are pits that cannot drain (closed depressions): flow stops there. Condition the DEM "
                "first (dem_condition, or condition='fill') so that every cell drains to an outlet"
            )
        return notes


def _shift(a: np.ndarray, dr: int, dc: int, fill: object) -> np.ndarray:
    """a[r + dr, c + dc] for every (r, c), `fill` beyond the grid."""
    h, w = a.shape
    out = np.full_like(a, fill)
    rs, re = max(0, -dr), min(h, h - dr)
    cs, ce = max(0, -dc), min(w, w - dc)
    if rs < re and cs < ce:
        out[rs:re, cs:ce] = a[rs + dr : re + dr, cs + dc : ce + dc]
    return out


def boundary(valid: np.ndarray) -> np.ndarray:
    """Valid cells on the grid edge or 8-adjacent to a nodata cell: where water may leave the grid."""
    edge = np.zeros_like(valid)
    edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
    for dr, dc in OFFSETS:
        edge |= ~_shift(valid, dr, dc, True)
    return edge & valid


def steepest(dem: Dem) -> np.ndarray:
    """The D8 code of each cell's steepest strictly lower neighbour (0 where none; NODATA on nodata): drop over
    ground distance, exact ties to the first direction in OFFSETS' order."""
    z = dem.z
    h, w = z.shape
    best = np.zeros((h, w))
    code = np.zeros((h, w), dtype=np.uint8)
    zz = np.where(dem.valid, z, np.inf)
    for k, (dr, dc) in enumerate(OFFSETS):
        zn = _shift(zz, dr, dc, np.inf)
        with np.errstate(invalid="ignore"):
            drop = (zz - zn) / np.broadcast_to(dem.dist[k], (h, 1))
        better = (zn < zz) & (drop > best)
        best = np.where(better, drop, best)
        code[better] = CODES[k]
    code[~dem.valid] = NODATA
    return code


def route_flats(z: np.ndarray, valid: np.ndarray, code: np.ndarray, outlet: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Route the cells with no lower neighbour that are not outlets across their flat (package docstring). Returns the
    codes, the number of flat cells routed and the number left as pits."""
    h, w = z.shape
    drains = valid & ((code != PIT) | outlet)
    todo = valid & ~drains
    if not todo.any():
        return code, 0, 0
    flat_z = np.where(valid, z, np.nan).ravel()
    dist = np.full(h * w, -1, dtype=np.int64)
    dist[drains.ravel()] = 0
    undone = todo.ravel().copy()
    # the first frontier: draining cells next to an unresolved cell of the same elevation
    near = np.zeros((h, w), dtype=bool)
    for dr, dc in OFFSETS:
        near |= _shift(todo, dr, dc, False) & (_shift(np.where(valid, z, np.nan), dr, dc, np.nan) == z)
    frontier = np.flatnonzero((near & drains).ravel())
    step = 0
    while frontier.size:
        step += 1
        r, c = np.divmod(frontier, w)
        found = []
        for dr, dc in OFFSETS:
            rr, cc = r + dr, c + dc
            inside = (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
            n = rr[inside] * w + cc[inside]
            src = frontier[inside]
            ok = undone[n] & (flat_z[n] == flat_z[src])
            found.append(n[ok])
        nxt = np.unique(np.concatenate(found)) if found else np.empty(0, dtype=np.int64)
        nxt = nxt[undone[nxt]]
        dist[nxt] = step
        undone[nxt] = False
        frontier = nxt
    dist2 = dist.reshape(h, w)
    routed = todo & (dist2 > 0)
    chosen = np.zeros((h, w), dtype=bool)
    zv = np.where(valid, z, np.nan)
    for k, (dr, dc) in enumerate(OFFSETS):
        dn = _shift(dist2, dr, dc, -1)
        zn = _shift(zv, dr, dc, np.nan)
        take = routed & ~chosen & (dn == dist2 - 1) & (dn >= 0) & (zn == z)
        code[take] = CODES[k]
        chosen |= take
    return code, int(routed.sum()), int((todo & ~routed).sum())


def d8_directions(dem: Dem) -> Directions:
    """D8 flow directions of the DEM by the package's rules."""
    code = steepest(dem)
    outlet = boundary(dem.valid) & (code == PIT)
    code, flats, pits = route_flats(dem.z, dem.valid, code, outlet)
    return Directions(d8=code, outlets=int(outlet.sum()), pits=pits, flat_cells=flats)
