"""Reprojecting geometries, for every engine (vector and raster): one place for PROJ transformers and coordinates.

- `transformer(src, dst)`: a pyproj Transformer in x/y order between two CRSs (rasterio or pyproj CRS, or text
  pyproj accepts); None when no reprojection is needed.
- `reproject_geometries(geoms, transformer)`: a shapely array vertex by vertex, as ogr2ogr does (Z and M kept;
  M geometries are rewritten in their WKB), with a mask of those PROJ could not place.
- `reproject_2d(geoms, transformer)`: the same, 2D, unplaceable ones as None (burning into rasters).
- `reproject_densified(geoms, src, dst)`: a few region geometries (clip masks, query shapes) with their edges
  densified first, so that straight edges follow the projection; unplaceable parts are an invalid-argument.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import shapely
from pyproj import CRS, Transformer

from gdal_mcp.errors import GdalMcpError

# Edges are densified to this fraction of the region's extent before projecting, so they follow the projection.
DENSIFY_FRACTION = 1 / 100


def transformer(src_crs: Any, dst_crs: Any) -> Transformer | None:
    """A pyproj Transformer (x/y order) from src_crs to dst_crs; None when either is None or they are the same."""
    if src_crs is None or dst_crs is None or same_crs(src_crs, dst_crs):
        return None
    return Transformer.from_crs(_wkt(src_crs), _wkt(dst_crs), always_xy=True)


def _transform_xyz(transformer: Transformer, xyz: np.ndarray, has_z: np.ndarray) -> np.ndarray:
    """Transform an (N, 3) array of x, y, z; z is used (and changed) only where has_z. Returns (N, 3)."""
    x, y = xyz[:, 0], xyz[:, 1]
    out = np.array(xyz, dtype="float64", copy=True)
    if has_z.any():
        z = np.where(has_z, np.nan_to_num(xyz[:, 2], nan=0.0), 0.0)
        out[:, 0], out[:, 1], z2 = transformer.transform(x, y, z, errcheck=False)
        out[:, 2] = np.where(has_z, z2, np.nan)
    else:
        out[:, 0], out[:, 1] = transformer.transform(x, y, errcheck=False)
    return out


def _failed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Coordinates that were finite before and are not after (outside the target projection's domain)."""
    return (np.isfinite(before[:, :2]).all(axis=1)) & ~(np.isfinite(after[:, :2]).all(axis=1))


def _reproject_plain(geoms: np.ndarray, transformer: Transformer) -> tuple[np.ndarray, np.ndarray]:
    """Geometries without M: shapely's coordinate arrays (Z kept; 2D geometries stay 2D)."""
    coords, index = shapely.get_coordinates(geoms, include_z=True, return_index=True)
    has_z = shapely.has_z(geoms)[index] if len(index) else np.zeros(0, dtype=bool)
    out = _transform_xyz(transformer, coords, has_z)
    bad = np.zeros(len(geoms), dtype=bool)
    bad[index[_failed(coords, out)]] = True
    return shapely.set_coordinates(np.array(geoms, dtype=object, copy=True), out), bad


def _coordinate_runs(buf: bytearray, pos: int, runs: list[tuple[int, int, int, bool]]) -> int:
    """Walk little-endian ISO WKB from `pos`: append (offset, points, ordinates, has_z) of every coordinate run."""
    code = int.from_bytes(buf[pos + 1 : pos + 5], "little")
    pos += 5
    base, dim = code % 1000, code // 1000
    ordinates, has_z = {0: (2, False), 1: (3, True), 2: (3, False), 3: (4, True)}[dim]

    def count() -> int:
        return int.from_bytes(buf[pos : pos + 4], "little")

    if base == 1:
        runs.append((pos, 1, ordinates, has_z))
        return pos + 8 * ordinates
    if base == 2:
        n = count()
        runs.append((pos + 4, n, ordinates, has_z))
        return pos + 4 + 8 * ordinates * n
    if base == 3:
        rings = count()
        pos += 4
        for _ in range(rings):
            n = count()
            runs.append((pos + 4, n, ordinates, has_z))
            pos += 4 + 8 * ordinates * n
        return pos
    if base in (4, 5, 6, 7):
        parts = count()
        pos += 4
        for _ in range(parts):
            pos = _coordinate_runs(buf, pos, runs)
        return pos
    raise GdalMcpError("unsupported", f"cannot reproject WKB geometry type {code} (curves) with M values")


def _reproject_measured(geoms: np.ndarray, transformer: Transformer) -> tuple[np.ndarray, np.ndarray]:
    """Geometries with M: shapely cannot rebuild M geometries from coordinates (and its set_coordinates
    turns a ZM geometry's Z and M into NaN), so x, y, z are rewritten in place in ISO WKB and M is left alone."""
    buffers = [bytearray(w) for w in shapely.to_wkb(geoms, output_dimension=4, flavor="iso", byte_order=1)]
    views: list[tuple[np.ndarray, bool]] = []  # (n, ordinates) float views into the buffers, and whether Z
    owner: list[np.ndarray] = []
    for i, buf in enumerate(buffers):
        runs: list[tuple[int, int, int, bool]] = []
        _coordinate_runs(buf, 0, runs)
        for offset, n, ordinates, run_z in runs:
            views.append((np.frombuffer(buf, dtype="<f8", count=n * ordinates, offset=offset).reshape(n, ordinates), run_z))
            owner.append(np.full(n, i))
    bad = np.zeros(len(geoms), dtype=bool)
    if views:
        xyz = np.concatenate([v[:, :3] if z else np.column_stack([v[:, :2], np.full(len(v), np.nan)]) for v, z in views])
        has_z = np.concatenate([np.full(len(v), z) for v, z in views])
        out = _transform_xyz(transformer, xyz, has_z)
        bad[np.concatenate(owner)[_failed(xyz, out)]] = True
        start = 0
        for v, z in views:
            v[:, : 3 if z else 2] = out[start : start + len(v), : 3 if z else 2]
            start += len(v)
    return shapely.from_wkb([bytes(b) for b in buffers]), bad


def reproject_geometries(geoms: np.ndarray, transformer: Transformer) -> tuple[np.ndarray, np.ndarray]:
    """`geoms` in the transformer's target CRS, and a mask of the geometries that could not be transformed."""
    out = np.array(geoms, dtype=object, copy=True)
    bad = np.zeros(len(geoms), dtype=bool)
    present = ~shapely.is_missing(geoms)
    measured = present & shapely.has_m(geoms)
    for mask, func in ((present & ~measured, _reproject_plain), (measured, _reproject_measured)):
        if mask.any():
            out[mask], bad[mask] = func(geoms[mask], transformer)
    return out, bad


def _wkt(crs: Any) -> str:
    return crs.to_wkt() if hasattr(crs, "to_wkt") else str(crs)


def same_crs(a: Any, b: Any) -> bool:
    """True when both CRSs describe the same system (by their own equality, else pyproj's)."""
    if a is None or b is None:
        return a is b
    try:
        if a == b:
            return True
    except Exception:  # noqa: BLE001 - unlike types may refuse to compare
        pass
    try:
        return bool(CRS.from_user_input(_wkt(a)) == CRS.from_user_input(_wkt(b)))
    except Exception:  # noqa: BLE001 - a CRS pyproj cannot parse is compared by its text
        return _wkt(a) == _wkt(b)


def reproject_densified(geoms: list[Any], src_crs: Any, dst_crs: Any, *, target: str = "raster") -> list[Any]:
    """Geometries from src_crs to dst_crs (x/y order), edges densified so they follow the projection.

    `target` names what dst_crs belongs to ("raster", "layer") in the error for unprojectable parts.
    """
    trans = transformer(src_crs, dst_crs)
    if trans is None:
        return geoms
    xmin, ymin, xmax, ymax = shapely.total_bounds(geoms)
    span = max(xmax - xmin, ymax - ymin)
    if span > 0:
        geoms = list(shapely.segmentize(geoms, span * DENSIFY_FRACTION))

    def project(xy: np.ndarray) -> np.ndarray:
        x, y = trans.transform(xy[:, 0], xy[:, 1])
        return np.column_stack([x, y])

    out = list(shapely.transform(geoms, project))
    coords = shapely.get_coordinates(out)
    if coords.size and not np.isfinite(coords).all():
        raise GdalMcpError(
            "invalid-argument",
            f"part of the geometry cannot be projected to the {target}'s CRS (it lies "
            f"outside that projection's valid area); use a geometry that stays near the {target}",
        )
    return out


def reproject_2d(geoms: np.ndarray, trans: Transformer | None) -> tuple[np.ndarray, int]:
    """2D geometries in the target CRS; those PROJ cannot place become None. Returns them and how many were dropped."""
    dropped = 0
    if trans is not None:
        geoms, bad = reproject_geometries(geoms, trans)
        geoms[bad] = None
        dropped = int(bad.sum())
    return shapely.force_2d(geoms), dropped
