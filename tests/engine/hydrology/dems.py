"""Synthetic DEMs with analytic flow answers, and plain-Python references (no pyflwdir, no numpy shifts) for the
hydrology tests: the neighbour order and codes written out again here, following each cell's direction to count
upstream cells, breadth-first search over flats."""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path

import numpy as np
import rasterio
from rasterio.transform import from_origin

# (row, column) step of each ESRI D8 code, written out independently of the engine's table
STEP = {1: (0, 1), 2: (1, 1), 4: (1, 0), 8: (1, -1), 16: (0, -1), 32: (-1, -1), 64: (-1, 0), 128: (-1, 1)}
TIE_ORDER = (1, 2, 4, 8, 16, 32, 64, 128)  # E, SE, S, SW, W, NW, N, NE
CELL = 10.0  # metres
UTM = "EPSG:32633"


def write_dem(path: Path, z: np.ndarray, *, crs: str = UTM, transform=None, nodata: float | None = -9999.0) -> str:
    transform = transform or from_origin(500000.0, 4000000.0, CELL, CELL)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=z.shape[1],
        height=z.shape[0],
        count=1,
        dtype="float32",
        crs=crs,
        transform=transform,
        nodata=nodata,
    ) as ds:
        ds.write(np.asarray(z, dtype="float32"), 1)
    return str(path)


def read(path: str | Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


def plane_directions(shape: tuple[int, int], azimuth_deg: float) -> np.ndarray:
    """Expected D8 of a plane falling towards `azimuth_deg` (counter-clockwise from east) on square cells: the
    neighbour whose direction is closest in angle to the fall line (drop over distance is |g| cos(angle)), among the
    neighbours inside the grid that are lower (cos > 0); none lower: an outlet (0)."""
    h, w = shape
    out = np.zeros(shape, dtype=np.uint8)
    for r in range(h):
        for c in range(w):
            best, code = 0.0, 0
            for k in TIE_ORDER:
                dr, dc = STEP[k]
                if not (0 <= r + dr < h and 0 <= c + dc < w):
                    continue
                angle = math.degrees(math.atan2(-dr, dc))  # north is up: a row step of -1 goes north
                cos = math.cos(math.radians(angle - azimuth_deg))
                if cos > best + 1e-12:
                    best, code = cos, k
            out[r, c] = code
    return out


def plane(shape: tuple[int, int], azimuth_deg: float, slope: float = 0.05) -> np.ndarray:
    """Elevations (metres) of a plane falling `slope` m/m towards `azimuth_deg`, on CELL-metre cells."""
    h, w = shape
    r, c = np.mgrid[0:h, 0:w]
    x, y = c * CELL, -r * CELL
    a = math.radians(azimuth_deg)
    return 1000.0 - slope * (x * math.cos(a) + y * math.sin(a))


def upstream_counts(d8: np.ndarray) -> np.ndarray:
    """Cells draining through each cell (itself included): each cell passes its count on to the cell it flows to once
    every cell flowing into it has passed theirs (Kahn's topological order, plain Python)."""
    h, w = d8.shape
    down: dict[tuple[int, int], tuple[int, int]] = {}
    inflow = np.zeros((h, w), dtype=np.int64)
    for r in range(h):
        for c in range(w):
            code = int(d8[r, c])
            if code in STEP:
                dr, dc = STEP[code]
                down[(r, c)] = (r + dr, c + dc)
                inflow[r + dr, c + dc] += 1
    acc = np.where(d8 == 247, 0, 1).astype(np.int64)
    ready = deque((r, c) for r in range(h) for c in range(w) if inflow[r, c] == 0 and d8[r, c] != 247)
    done = 0
    while ready:
        cell = ready.popleft()
        done += 1
        nxt = down.get(cell)
        if nxt is not None:
            acc[nxt] += acc[cell]
            inflow[nxt] -= 1
            if inflow[nxt] == 0:
                ready.append(nxt)
    assert done == int((d8 != 247).sum()), "a loop in the flow directions"
    return acc


def upstream_of(d8: np.ndarray, r0: int, c0: int) -> set[tuple[int, int]]:
    """The cells whose path reaches (r0, c0)."""
    h, w = d8.shape
    out = set()
    for r in range(h):
        for c in range(w):
            rr, cc = r, c
            for _ in range(h * w):
                if (rr, cc) == (r0, c0):
                    out.add((r, c))
                    break
                code = int(d8[rr, cc])
                if code not in STEP:
                    break
                dr, dc = STEP[code]
                rr, cc = rr + dr, cc + dc
    return out


def flat_bfs(z: np.ndarray, drains: np.ndarray) -> np.ndarray:
    """Breadth-first steps (8-connected, equal elevation) from each cell to the nearest draining cell of its flat;
    -1 where none."""
    h, w = z.shape
    dist = np.full((h, w), -1)
    q: deque[tuple[int, int]] = deque()
    for r in range(h):
        for c in range(w):
            if drains[r, c]:
                dist[r, c] = 0
                q.append((r, c))
    while q:
        r, c = q.popleft()
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                rr, cc = r + dr, c + dc
                if (dr or dc) and 0 <= rr < h and 0 <= cc < w and dist[rr, cc] < 0 and z[rr, cc] == z[r, c]:
                    dist[rr, cc] = dist[r, c] + 1
                    q.append((rr, cc))
    return dist
