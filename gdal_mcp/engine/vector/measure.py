"""Measures per feature (vector_measure): area, length, perimeter, centroid, bounds.

On a geographic layer (lon/lat) area, length and perimeter are geodesic, on the layer's ellipsoid
(pyproj.Geod, GeographicLib: exact to the millimetre), never in degrees. On a projected layer they are
planar, in the CRS's linear unit converted to the unit asked for, unless `geodesic`: then each geometry's
vertices are taken to the CRS's own lon/lat (its geodetic CRS) and measured on its ellipsoid the same way, with
no reprojected copy written (edges between vertices are geodesics there). `where` measures only the matching
features. Units: "m" (m² and m), "km" (km² and km),
"ft" (ft² and ft), "mi" (mi² and mi), "ha" (area in hectares; lengths then in metres).

- area: of the polygonal parts (0 for points and lines), holes subtracted;
- length: of the linear parts (0 for points and polygons: their outline is the perimeter);
- perimeter: of the polygonal parts, every ring (exterior and holes), like PostGIS ST_Perimeter;
- centroid: centroid_x/centroid_y in the layer's CRS. On geographic layers it is computed in the local
  projection the distance tools use (the UTM zone of the data, else an azimuthal equidistant projection
  centred on each feature) and returned in lon/lat; features that cross the antimeridian or span a pole
  fall back to the centroid in degrees (counted in a warning);
- bounds: min_x, min_y, max_x, max_y in the layer's CRS (degrees on geographic layers).

Without `dst` a bounded page of rows is returned (offset/limit); with `dst` the layer is written with the
measure fields added (streamed in batches). Totals of area, length and perimeter cover every feature.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from gdal_mcp.engine.crs import describe_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.layer_map import LAYER_OPTIONS, layer_meta, share, write_guarded
from gdal_mcp.engine.vector.stream import (
    geometries,
    output_layer_name,
    read_layer,
    relay,
    summarize_vector,
    vector_driver,
    write_layer,
)
from gdal_mcp.engine.vector.units import LINEAR_UNITS, _horizontal, _unit_factor, layer_bounds, plan_units
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import MeasureResult

MEASURES = ("area", "length", "perimeter", "centroid", "bounds")
MEASURE_UNITS = ("m", "km", "ha", "ft", "mi")
# units -> (area field suffix, m² per area unit), (length field suffix, m per length unit)
AREA_UNITS = {
    "m": ("m2", 1.0),
    "km": ("km2", 1e6),
    "ha": ("ha", 1e4),
    "ft": ("ft2", LINEAR_UNITS["ft"] ** 2),
    "mi": ("mi2", LINEAR_UNITS["mi"] ** 2),
}
LENGTH_UNITS = {
    "m": ("m", 1.0),
    "km": ("km", 1000.0),
    "ha": ("m", 1.0),
    "ft": ("ft", LINEAR_UNITS["ft"]),
    "mi": ("mi", LINEAR_UNITS["mi"]),
}
MAX_LIMIT = 10_000
EQUAL_AREA_METHODS = (
    "equal area",
    "albers",
    "mollweide",
    "sinusoidal",
    "eckert iv",
    "eckert vi",
    "goode",
    "equal earth",
    "bonne",
    "quartic authalic",
)


def field_names(measures: list[str], units: str) -> dict[str, str]:
    """Field name -> description, in the order the fields are added."""
    area, length = AREA_UNITS[units][0], LENGTH_UNITS[units][0]
    out: dict[str, str] = {}
    for m in measures:
        if m == "area":
            out[f"area_{area}"] = f"area of the polygonal parts in {area} (holes subtracted; 0 for points and lines)"
        elif m == "length":
            out[f"length_{length}"] = f"length of the linear parts in {length} (0 for points and polygons)"
        elif m == "perimeter":
            out[f"perimeter_{length}"] = f"perimeter of the polygonal parts in {length} (all rings)"
        elif m == "centroid":
            out["centroid_x"] = "x (longitude on geographic layers) of the centroid, in the layer's CRS"
            out["centroid_y"] = "y (latitude on geographic layers) of the centroid, in the layer's CRS"
        elif m == "bounds":
            for k in ("min_x", "min_y", "max_x", "max_y"):
                out[k] = f"{k.replace('_', ' ')} of the bounding box, in the layer's CRS"
    return out


def _singles(g: Any) -> Iterator[Any]:
    from gdal_mcp.engine.features.masks import flatten

    yield from flatten(g)


def geodesic(geod: Any, geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(area m², length m, perimeter m) of each geometry on the ellipsoid of `geod` (NaN for no geometry)."""
    import shapely

    n = len(geoms)
    area, length, perim = np.zeros(n), np.zeros(n), np.zeros(n)
    missing = shapely.is_missing(geoms)
    area[missing] = length[missing] = perim[missing] = np.nan
    for i in np.flatnonzero(~missing):
        for part in _singles(geoms[i]):
            if part.is_empty:
                continue
            kind = part.geom_type
            if kind == "Polygon":
                oriented = shapely.orient_polygons(part)  # exterior counter-clockwise: positive area, holes negative
                area[i] += geod.geometry_area_perimeter(oriented)[0]
                for ring in (oriented.exterior, *oriented.interiors):
                    x, y = ring.xy
                    perim[i] += geod.line_length(x, y)
            elif kind in ("LineString", "LinearRing"):
                x, y = part.xy
                length[i] += geod.line_length(x, y)
    return np.abs(area), length, perim


def planar(geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(area, length, perimeter) in the layer's units (squared for area), like GEOS area/length."""
    import shapely

    from gdal_mcp.engine.vector.geomtypes import keep_dimension

    missing = shapely.is_missing(geoms)
    polys, _ = keep_dimension(geoms, 2)
    lines, _ = keep_dimension(geoms, 1)
    area = np.nan_to_num(shapely.area(polys))
    perim = np.nan_to_num(shapely.length(polys))
    length = np.nan_to_num(shapely.length(lines))
    for a in (area, perim, length):
        a[missing] = np.nan
    return area, length, perim


class _Measurer:
    """Computes the measure columns of a batch; keeps totals and notes."""

    def __init__(
        self, crs_text: str | None, measures: list[str], units: str, src: str, layer: str, geodesic: bool = False
    ) -> None:
        crs = _horizontal(crs_text)
        if crs is None:
            raise GdalMcpError(
                "invalid-argument", "the layer has no CRS, so its unit is unknown; assign one first (vector_convert src_crs=…)"
            )
        self.geographic = bool(crs.is_geographic)
        # geodesic on a projected layer: vertices to the CRS's lon/lat, measured on its ellipsoid
        self.to_lonlat = None
        if geodesic and not self.geographic:
            from pyproj import Transformer

            base = crs.geodetic_crs
            if base is None or crs.get_geod() is None:
                raise GdalMcpError("unsupported", "the layer's CRS has no ellipsoid to measure on; measure without geodesic")
            self.to_lonlat = Transformer.from_crs(crs, base, always_xy=True)
            self.geod = crs.get_geod()
        self.geodesic = self.geographic or self.to_lonlat is not None
        self.measures = measures
        self.units = units
        self.area_unit = AREA_UNITS[units]
        self.length_unit = LENGTH_UNITS[units]
        self.fields = field_names(measures, units)
        self.totals = {k: 0.0 for k in self.fields if k.startswith(("area_", "length_", "perimeter_"))}
        self.fallback = 0
        self.notes: list[str] = []
        if self.geographic:
            self.geod = crs.get_geod()
            if self.geod is None:
                raise GdalMcpError("unsupported", "the layer's CRS has no ellipsoid to measure on; reproject it first")
            self.frame = (
                plan_units(0.0, "m", crs_text, what="centroid", verb="measured", bounds=lambda: layer_bounds(src, layer))
                if "centroid" in measures
                else None
            )
        else:
            self.metres, self.unit_name = _unit_factor(crs)

    def columns(self, geoms: np.ndarray) -> dict[str, np.ndarray]:
        import shapely

        out: dict[str, np.ndarray] = {}
        if any(m in self.measures for m in ("area", "length", "perimeter")):
            if self.to_lonlat is not None:
                from gdal_mcp.engine.geometry_transform import reproject_geometries

                lonlat, _bad = reproject_geometries(geoms, self.to_lonlat)
                area, length, perim = geodesic(self.geod, lonlat)
            elif self.geographic:
                area, length, perim = geodesic(self.geod, geoms)
            else:
                area, length, perim = planar(geoms)
                area, length, perim = area * self.metres**2, length * self.metres, perim * self.metres
            values = {
                "area": area / self.area_unit[1],
                "length": length / self.length_unit[1],
                "perimeter": perim / self.length_unit[1],
            }
            for m in ("area", "length", "perimeter"):
                if m in self.measures:
                    key = f"{m}_{(self.area_unit if m == 'area' else self.length_unit)[0]}"
                    out[key] = values[m]
                    self.totals[key] += float(np.nansum(values[m]))
        if "centroid" in self.measures:
            missing = shapely.is_missing(geoms) | shapely.is_empty(geoms)
            cent = np.full(len(geoms), None, dtype=object)
            if (~missing).any():
                present = geoms[~missing]
                if self.geographic and self.frame is not None:
                    points = shapely.get_type_id(present) == 0
                    local = present.copy()
                    if (~points).any():
                        local[~points] = self.frame.apply(present[~points], shapely.centroid)
                    bad = shapely.get_type_id(local) != 0
                    if bad.any():
                        self.fallback += int(bad.sum())
                        local[bad] = shapely.centroid(present[bad])
                    cent[~missing] = local
                else:
                    cent[~missing] = shapely.centroid(present)
            out["centroid_x"] = np.asarray(shapely.get_x(cent), dtype=float)
            out["centroid_y"] = np.asarray(shapely.get_y(cent), dtype=float)
        if "bounds" in self.measures:
            b = shapely.bounds(geoms)
            for i, k in enumerate(("min_x", "min_y", "max_x", "max_y")):
                out[k] = b[:, i]
        return out

    def final_notes(self) -> list[str]:
        notes = list(self.notes)
        if self.fallback:
            notes.append(
                f"{self.fallback} feature(s) cross the antimeridian or span a pole: their centroid was "
                "computed in degrees (approximate)"
            )
        return notes


def _check(measures: list[str] | None, units: str, limit: int, offset: int) -> list[str]:
    chosen = list(MEASURES) if measures is None else list(dict.fromkeys(measures))
    unknown = [m for m in chosen if m not in MEASURES]
    if unknown or not chosen:
        raise GdalMcpError("invalid-argument", f"measures must be some of {', '.join(MEASURES)} (got {measures!r})")
    if units not in MEASURE_UNITS:
        raise GdalMcpError(
            "invalid-argument",
            f"units must be one of {', '.join(MEASURE_UNITS)} (got {units!r}); "
            "ha applies to area only (lengths are then in metres)",
        )
    if not 1 <= limit <= MAX_LIMIT or offset < 0:
        raise GdalMcpError("invalid-argument", f"limit must be 1..{MAX_LIMIT} and offset >= 0")
    return chosen


def _equal_area(crs_text: str | None) -> bool:
    """Whether the projection keeps areas (Albers, Lambert azimuthal/cylindrical equal-area, Mollweide …)."""
    crs = _horizontal(crs_text)
    op = getattr(crs, "coordinate_operation", None) if crs is not None else None
    method = (getattr(op, "method_name", "") or "").lower()
    return any(k in method for k in EQUAL_AREA_METHODS)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


@wrap_gdal_errors
def measure(
    src: str,
    *,
    dst: str | None = None,
    measures: list[str] | None = None,
    units: str = "m",
    layer: str | None = None,
    id_field: str | None = None,
    limit: int = 200,
    offset: int = 0,
    format: str | None = None,
    output_layer: str | None = None,
    where: str | None = None,
    geodesic: bool = False,
    progress: Progress = no_progress,
) -> tuple[MeasureResult, list[str]]:
    """Measure every feature (see the module docstring), or those matching `where`; write `dst` with the fields
    added, or return a page. `geodesic`: on a projected layer, measure on the ellipsoid instead of the plane."""
    chosen = _check(measures, units, limit, offset)
    name, crs, _declared = layer_meta(src, layer)
    m = _Measurer(crs, chosen, units, src, name, geodesic=geodesic)
    method = "geodesic" if m.geodesic else "planar"
    warnings: list[str] = []
    if not m.geodesic and "area" in chosen and not _equal_area(crs):
        info = describe_crs(crs)
        label = f"EPSG:{info.epsg}" if info and info.epsg else (info.name if info else "the layer's CRS")
        warnings.append(
            f"planar areas in {label}, which is not an equal-area projection: areas are distorted by its "
            "scale (measure with geodesic=true for areas on the ellipsoid, or reproject to an equal-area CRS)"
        )
    if dst is None:
        result = _page(src, name, m, id_field, limit, offset, progress, where)
    else:
        result = _write(src, dst, name, crs, m, format, output_layer, progress, where)
    result.method = method  # type: ignore[assignment]
    warnings += m.final_notes()
    result.warnings = warnings
    return result, warnings


def _page(
    src: str,
    layer: str,
    m: _Measurer,
    id_field: str | None,
    limit: int,
    offset: int,
    progress: Progress,
    where: str | None = None,
) -> MeasureResult:
    columns = [id_field] if id_field else []
    rows: list[dict[str, Any]] = []
    count = 0
    with read_layer(src, layer=layer, columns=columns, where=where) as stream:
        for batch in relay(stream.batches, stream.total, progress, "measured"):
            cols = m.columns(geometries(batch))
            start = count
            count += batch.num_rows
            lo, hi = max(offset - start, 0), min(offset + limit - start, batch.num_rows)
            if lo < hi:
                ids = batch.column(id_field).to_pylist()[lo:hi] if id_field else None
                for j in range(lo, hi):
                    row: dict[str, Any] = {"index": start + j}
                    if ids is not None:
                        row[id_field or ""] = ids[j - lo]
                    row.update({k: _clean(float(v[j])) for k, v in cols.items()})
                    rows.append(row)
    progress(1.0, f"measured {count} features")
    remaining = max(count - offset - len(rows), 0)
    return MeasureResult(
        method="planar",
        fields=m.fields,
        rows=rows,
        row_count=count,
        offset=offset,
        truncated=remaining > 0,
        remaining=remaining,
        totals=m.totals,
    )


def _write(
    src: str,
    dst: str,
    layer: str,
    crs: str | None,
    m: _Measurer,
    format: str | None,
    output_layer: str | None,
    progress: Progress,
    where: str | None = None,
) -> MeasureResult:
    driver = vector_driver(dst, format)
    out_name = output_layer_name(dst, output_layer)
    count = 0

    def add(batch: pa.RecordBatch) -> pa.RecordBatch:
        nonlocal count
        count += batch.num_rows
        cols = m.columns(geometries(batch))
        for key, values in cols.items():
            idx = batch.schema.get_field_index(key)
            column = pa.array(values, type=pa.float64(), from_pandas=True)  # NaN (no geometry) -> null
            batch = batch.set_column(idx, key, column) if idx >= 0 else batch.append_column(key, column)
        return batch

    def write() -> None:
        with read_layer(src, layer=layer, where=where) as stream:
            schema = stream.schema
            for key in m.fields:
                idx = schema.get_field_index(key)
                schema = schema.set(idx, pa.field(key, pa.float64())) if idx >= 0 else schema.append(pa.field(key, pa.float64()))
            write_layer(
                dst,
                schema,
                relay(stream.batches, stream.total, share(progress, 0, 0.98), "measured", add),
                driver=driver,
                layer=out_name,
                crs=crs,
                geometry_type=stream.geometry_type,
                layer_options=LAYER_OPTIONS.get(driver),
            )

    write_guarded(dst, write)
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    return MeasureResult(method="planar", fields=m.fields, row_count=count, totals=m.totals, summary=summary)
