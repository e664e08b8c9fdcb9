"""A second, plain-Python implementation of catchments on a lon/lat DEM, of another algorithm family than the engine's:
Priority-Flood+epsilon (Barnes, Lehman & Mulla 2014: every filled cell raised to just above the cell it was reached
from, so no flats remain and flow follows the flood's order) instead of pyflwdir's fill and breadth-first flat routing;
D8 on ground distances between cell centres from pyproj per row; accumulation by Kahn's topological order; catchments
by a breadth-first walk upstream. No numpy shifts, no pyflwdir."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np
import rasterio
from pyproj import Geod

NEIGHBOURS = [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)]


@dataclass
class Reference:
    down: dict[tuple[int, int], tuple[int, int]]
    ups: dict[tuple[int, int], list[tuple[int, int]]]
    acc: np.ndarray  # cells, the cell itself included
    row_areas: np.ndarray  # geodesic area of a cell of each row, m²

    def catchment(self, cell: tuple[int, int]) -> set[tuple[int, int]]:
        seen, todo = {cell}, deque([cell])
        while todo:
            for up in self.ups.get(todo.popleft(), []):
                if up not in seen:
                    seen.add(up)
                    todo.append(up)
        return seen

    def area(self, cells: set[tuple[int, int]]) -> float:
        return float(sum(self.row_areas[r] for r, _ in cells))


def lonlat_reference(path: str) -> Reference:
    """The reference's flow of the lon/lat DEM at `path` (WGS 84, no nodata)."""
    with rasterio.open(path) as ds:
        z = ds.read(1).astype(float)
        t = ds.transform
    h, w = z.shape
    geod = Geod(ellps="WGS84")
    lon = t.c + t.a * 0.5
    dist = {}
    for r in range(h):
        lat = t.f + t.e * (r + 0.5)
        for dr, dc in NEIGHBOURS:
            dist[r, dr, dc] = geod.inv(lon, lat, lon + dc * t.a, t.f + t.e * (r + dr + 0.5))[2]
    filled = z.copy()
    closed = np.zeros((h, w), bool)
    queue: list[tuple[float, int, int]] = []
    for r in range(h):
        for c in range(w):
            if r in (0, h - 1) or c in (0, w - 1):
                heapq.heappush(queue, (filled[r, c], r, c))
                closed[r, c] = True
    pit: deque[tuple[float, int, int]] = deque()
    while queue or pit:
        _, r, c = pit.popleft() if pit else heapq.heappop(queue)
        for dr, dc in NEIGHBOURS:
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and not closed[rr, cc]:
                closed[rr, cc] = True
                above = np.nextafter(filled[r, c], np.inf)
                if filled[rr, cc] <= above:
                    filled[rr, cc] = above
                    pit.append((above, rr, cc))
                else:
                    heapq.heappush(queue, (filled[rr, cc], rr, cc))
    down: dict[tuple[int, int], tuple[int, int]] = {}
    for r in range(h):
        for c in range(w):
            best, to = 0.0, None
            for dr, dc in NEIGHBOURS:
                rr, cc = r + dr, c + dc
                if 0 <= rr < h and 0 <= cc < w:
                    slope = (filled[r, c] - filled[rr, cc]) / dist[r, dr, dc]
                    if slope > best:
                        best, to = slope, (rr, cc)
            if to is not None:
                down[r, c] = to
    ups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    inflow = np.zeros((h, w), int)
    for a, b in down.items():
        ups.setdefault(b, []).append(a)
        inflow[b] += 1
    acc = np.ones((h, w))
    ready = deque((r, c) for r in range(h) for c in range(w) if inflow[r, c] == 0)
    while ready:
        cell = ready.popleft()
        nxt = down.get(cell)
        if nxt is not None:
            acc[nxt] += acc[cell]
            inflow[nxt] -= 1
            if inflow[nxt] == 0:
                ready.append(nxt)
    top = t.f + t.e * np.arange(h)
    row_areas = np.array(
        [abs(geod.polygon_area_perimeter([0, t.a, t.a, 0], [b, b, a, a])[0]) for a, b in zip(top, top + t.e, strict=True)]
    )
    return Reference(down=down, ups=ups, acc=acc, row_areas=row_areas)
