"""The valid-data outline of a raster as polygons: GDAL 3.12's `gdal raster footprint`, written to a vector file.

GDAL polygonizes the band's validity mask (nodata, alpha or per-dataset mask; or `src_nodata`) through a virtual
mask band read line by line, so memory grows with the outline, not with the raster. The polygons are then
reprojected (`dst_crs`), stripped of small rings (`min_ring_area`, after reprojection, in the output CRS's units
squared), simplified (`simplify`, output CRS units) and cut to at most `max_points` vertices (GDAL's default 100:
it raises the simplification tolerance until the outline fits). No location field is written: GDAL's would hold
the server's absolute path of the raster.

GDAL writes a staging GeoPackage (rasterio's GDAL writes few vector formats) that pyogrio copies into the output,
in any vector format (features/index.py: staging). The result adds the footprint's area, planar in the output CRS's
units and geodesic in m² (on the CRS's ellipsoid, from its vertices).
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal

import numpy as np

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.crs import parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.features.index import STAGE_DRIVER, geometry_index, read_staged, staging, write_staged
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.engine.vector.stream import output_layer_name, summarize_vector, vector_driver
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import FootprintResult

COMBINE = ("union", "intersection")


def _positive(value: float | None, name: str, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not math.isfinite(value) or value <= 0):
        raise GdalMcpError("invalid-argument", f"{name} must be a positive number ({what}), got {value!r}; omit it for none")


def _check(
    combine_bands: str, simplify: float | None, min_ring_area: float | None, max_points: int | None, src_nodata: float | None
) -> None:
    if combine_bands not in COMBINE:
        raise GdalMcpError("invalid-argument", f"combine_bands must be union or intersection, got {combine_bands!r}")
    _positive(simplify, "simplify", "a distance in the output CRS's units")
    _positive(min_ring_area, "min_ring_area", "an area in the output CRS's units squared")
    if max_points is not None and (isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 4):
        raise GdalMcpError(
            "invalid-argument", f"max_points must be an integer of at least 4, got {max_points!r}; null means no limit"
        )
    if src_nodata is not None and (isinstance(src_nodata, bool) or math.isinf(src_nodata)):
        raise GdalMcpError("invalid-argument", f"src_nodata must be a finite number or NaN, got {src_nodata!r}")


def _areas(geoms: np.ndarray, crs_text: str | None) -> tuple[float, str | None, float | None]:
    """(planar area in the CRS's units², those units, geodesic area in m² or None without a CRS) of the polygons."""
    import shapely

    from gdal_mcp.engine.vector.measure import geodesic

    planar = float(np.nansum(shapely.area(geoms))) if len(geoms) else 0.0
    if not crs_text:
        return planar, None, None
    from pyproj import CRS, Transformer

    crs = CRS.from_user_input(crs_text)
    if crs.is_compound and crs.sub_crs_list:
        crs = crs.sub_crs_list[0]
    unit = crs.axis_info[0].unit_name if crs.axis_info else None
    geodetic = crs.geodetic_crs
    if geodetic is None:
        return planar, unit, None
    if not crs.is_geographic and len(geoms):
        to_lonlat = Transformer.from_crs(crs, geodetic, always_xy=True)

        def lonlat(xy: Any) -> Any:
            x, y = to_lonlat.transform(xy[:, 0], xy[:, 1])
            return np.column_stack([x, y])

        geoms = shapely.transform(geoms, lonlat)
        if not np.isfinite(shapely.get_coordinates(geoms)).all():
            return planar, unit, None  # vertices off the projection's domain (a geostationary disk's rim …)
    area, _, _ = geodesic(geodetic.get_geod(), geoms)
    return planar, unit, float(np.nansum(area))


@wrap_gdal_errors
def footprint(
    src: str,
    dst: str,
    *,
    bands: list[int] | None = None,
    combine_bands: Literal["union", "intersection"] = "union",
    src_nodata: float | None = None,
    dst_crs: str | None = None,
    simplify: float | None = None,
    min_ring_area: float | None = None,
    max_points: int | None = 100,
    convex_hull: bool = False,
    split_multipolygons: bool = False,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[FootprintResult, list[str]]:
    """The footprint of `src`'s valid pixels (see the module docstring), written to the vector file `dst`."""
    _check(combine_bands, simplify, min_ring_area, max_points, src_nodata)
    driver = vector_driver(dst, format)
    layer = output_layer_name(dst, output_layer)
    warnings: list[str] = []
    with open_raster(src) as ds:
        selected = select_bands(ds, bands)
        if ds.crs is None and dst_crs is not None:
            raise GdalMcpError("invalid-argument", "the raster has no CRS, so its footprint cannot be reprojected; omit dst_crs")
        if ds.transform.is_identity and not ds.gcps[0]:
            warnings.append("the raster has no georeferencing: the footprint is in pixel coordinates")
    with staging(dst) as directory:
        stage = os.path.join(directory, "footprint.gpkg")
        argv = [src, stage, "--output-format", STAGE_DRIVER, "--output-layer", "footprint", "--no-location-field"]
        argv += ["--combine-bands", combine_bands, "--band", ",".join(str(b) for b in selected)]
        if src_nodata is not None:
            argv += ["--src-nodata", "nan" if math.isnan(src_nodata) else algorithms.number(src_nodata)]
        if dst_crs is not None:
            argv += ["--dst-crs", parse_crs(dst_crs, "dst_crs").to_wkt()]
        if simplify is not None:
            argv += ["--simplify-tolerance", algorithms.number(simplify)]
        if min_ring_area is not None:
            argv += ["--min-ring-area", algorithms.number(min_ring_area)]
        argv += ["--max-points", "unlimited" if max_points is None else str(max_points)]
        argv += ["--convex-hull"] * bool(convex_hull) + ["--split-multipolygons"] * bool(split_multipolygons)
        with algorithms.algorithm(["raster", "footprint"], argv) as alg:
            alg.run(progress, message="tracing the valid pixels", scale=0.9)
            warnings += alg.warnings
        meta, table = read_staged(stage)
        import shapely

        geoms = shapely.from_wkb(table.column(geometry_index(table)).to_numpy(zero_copy_only=False))
        area, units, area_m2 = _areas(geoms, meta.get("crs"))
        kind = "Polygon" if split_multipolygons else "MultiPolygon"
        warnings += write_staged(dst, table, driver=driver, layer=layer, crs=meta.get("crs"), geometry_type=kind)
    summary = summarize_vector(dst, layer)
    if summary.feature_count == 0:
        warnings.append("the raster has no valid pixels (every pixel is nodata or masked): the footprint is empty")
    progress(1.0, f"footprint: {summary.feature_count} feature(s)")
    return FootprintResult(summary=summary, area=area, area_units=units, area_m2=area_m2), warnings
