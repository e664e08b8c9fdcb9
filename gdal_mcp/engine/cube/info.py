"""cube_info: what a netCDF/HDF5/Zarr variable holds along time, levels and space, and how it is chunked."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.cube.source import (
    Cube,
    build_cube,
    check_sizes,
    described_variables,
    netcdf_view,
    resolve_variable,
    seconds_of,
    split_connection,
)
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.info import nodata_value
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import Bounds, CubeDimension, CubeInfo, CubeVariable

MAX_VALUES = 400  # values listed per dimension; beyond, the first and last 10
_SHAPE = re.compile(r"^\[([\dx]+)\]\s*(.*)$")


def _shape(description: str | None) -> tuple[list[int], str | None]:
    m = _SHAPE.match(description or "")
    if not m:
        return [], description
    return [int(v) for v in m.group(1).split("x")], m.group(2) or None


def _layout(path: str, variable: str | None) -> tuple[list[str], dict[str, int]]:
    """The variable's dimension names (slowest first) and chunk length per dimension, from GDAL's multidimensional
    view (`gdal mdim info`); ([], {}) when unknown."""
    from gdal_mcp.engine.algorithms import algorithm

    file, name = split_connection(path, variable)
    if not name:
        return [], {}
    try:
        with algorithm(["mdim", "info"], ["--array", "/" + name.lstrip("/"), file]) as alg:
            alg.run()
            doc = alg.json()
    except Exception:  # noqa: BLE001 - the layout is a nicety: a driver without a multidimensional view has none
        return [], {}
    array = doc if isinstance(doc, dict) and doc.get("type") == "array" else None
    if array is None:
        return [], {}
    dims = [str(d.get("name") if isinstance(d, dict) else d).rsplit("/", 1)[-1] for d in array.get("dimensions", [])]
    block = array.get("block_size") or []
    return dims, {d: int(b) for d, b in zip(dims, block, strict=False) if b}


def _spacing(cube: Cube) -> str | None:
    keys = [s.key for s in cube.steps if s.key is not None]
    keys = sorted(dict.fromkeys(keys))  # type: ignore[arg-type]
    if len(keys) < 2:
        return None
    stamps = [seconds_of(k, cube.calendar) for k in keys]  # type: ignore[arg-type]
    gaps = Counter(round(b - a) for a, b in zip(stamps, stamps[1:], strict=False))
    gap = gaps.most_common(1)[0][0]
    days = gap / 86400
    if 27 <= days <= 31.5:
        return "1 month"
    if 88 <= days <= 93:
        return "3 months"
    if 359 <= days <= 366.5:
        return "1 year"
    if days >= 1 and float(days).is_integer():
        return f"{int(days)} day" + ("s" if days != 1 else "")
    hours = gap / 3600
    if hours >= 1 and float(hours).is_integer():
        return f"{int(hours)} hour" + ("s" if hours != 1 else "")
    return f"{gap} s"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _listed(values: list[Any]) -> tuple[list[Any], bool]:
    if len(values) <= MAX_VALUES:
        return values, False
    return values[:10] + values[-10:], True


def cube_info(path: str, variable: str | None = None, progress: Progress = no_progress) -> CubeInfo:
    """The variables of a file, and for one of them (given, or the only one with more than two dimensions) its
    dimensions with their values, time axis, chunking, CRS, nodata and scale."""
    check_sizes(path)
    viewed = netcdf_view(path)
    found = described_variables(viewed)
    listed = []
    for name, sub, desc in found:
        shape, text = _shape(desc)
        listed.append(CubeVariable(name=name, path=sub, shape=shape, description=text))
    warnings: list[str] = []
    gdal_path = viewed
    if not found and variable is not None:
        gdal_path, variable = resolve_variable(viewed, variable)  # one variable: the name given must be its own
    if found:
        if variable is None:
            cubes = [v for v in listed if len(v.shape) >= 3]
            if len(cubes) != 1:
                return CubeInfo(
                    path=path,
                    variables=listed,
                    warnings=[
                        f"{len(cubes)} of the {len(listed)} variables have a time or level dimension"
                        " (three or more dimensions); give variable= to describe one"
                    ],
                )
            variable = cubes[0].name
            warnings.append(f"described '{variable}', the only variable with three or more dimensions")
        match = [v for v in listed if v.name == variable or v.path.rsplit('":', 1)[-1].strip("/") == variable.strip("/")]
        if not match:
            raise GdalMcpError(
                "invalid-argument", f"no variable {variable!r} in the file; its variables: {', '.join(v.name for v in listed)}"
            )
        gdal_path = match[0].path
    progress(0.3, "cube_info: reading the dimensions")
    chosen, gdal_path = gdal_path, netcdf_view(gdal_path)  # an HDF5 variable through the netCDF driver, when it reads it
    if viewed != path or gdal_path != chosen:
        warnings.append("read through the netCDF driver, which decodes the HDF5 dimension scales (times, levels)")
    with open_raster(gdal_path) as ds:
        if ds.count == 0:
            raise GdalMcpError("invalid-argument", "the dataset has no raster bands; give variable= (its variables are listed)")
        cube = build_cube(ds, gdal_path, variable)
        warnings += cube.warnings
        names, chunks = _layout(gdal_path, cube.variable)
        crs, crs_source = cube.grid.crs, cube.grid.crs_source
        dims: list[CubeDimension] = []
        if cube.time_dim:
            # dates, or the raw values of a time axis that could not be decoded (the warnings say why)
            # dates, or the raw numbers of steps without one (a time axis that could not be decoded); never NaN
            raw = [s.time or cube.dims.by_band.get(s.band, {}).get(cube.time_dim) for s in cube.steps]
            times = list(
                dict.fromkeys(
                    v for v in raw if v is not None and (isinstance(v, str) and v in {s.time for s in cube.steps} or _finite(v))
                )
            )
            values, cut = _listed(times)
            info = next(d for d in cube.dims.info if d.name == cube.time_dim)
            dims.append(
                CubeDimension(
                    name=cube.time_dim,
                    size=len(times),
                    kind="time",
                    units=info.units,
                    calendar=info.calendar,
                    values=values,
                    values_truncated=cut,
                    chunk=chunks.get(cube.time_dim),
                )
            )
        if cube.level_dim:
            levels = [v for v in cube.levels() if isinstance(v, str) or _finite(v)]
            values, cut = _listed(levels)
            info = next(d for d in cube.dims.info if d.name == cube.level_dim)
            dims.append(
                CubeDimension(
                    name=cube.level_dim,
                    size=len(levels),
                    kind="level",
                    units=info.units,
                    values=values,  # type: ignore[arg-type]
                    values_truncated=cut,
                    chunk=chunks.get(cube.level_dim),
                )
            )
        tags = ds.tags()
        spatial = [d for d in names if d not in (cube.time_dim, cube.level_dim)]
        y_name, x_name = spatial[-2:] if len(spatial) >= 2 else ("y", "x")  # CF order: (…, y, x)
        dims.append(
            CubeDimension(name=y_name, size=ds.height, kind="y", units=tags.get(f"{y_name}#units"), chunk=chunks.get(y_name))
        )
        dims.append(
            CubeDimension(name=x_name, size=ds.width, kind="x", units=tags.get(f"{x_name}#units"), chunk=chunks.get(x_name))
        )
        band = ds.tags(1)
        b = cube.grid.bounds
        keys = [s.time for s in cube.steps if s.time]
        if cube.time_dim and cube.time_dim not in chunks:
            warnings.append("the file does not say how the variable is chunked along time (contiguous or not reported)")
        if crs is None:
            warnings.append("no CRS: the file has no grid_mapping and its axes are not longitude/latitude")
        if cube.grid.shifted:
            warnings.append(
                "the file stores longitudes 0..360; the cube tools present them as -180..180 (bounds below), so outputs, "
                "points, zones and bboxes line up with other lon/lat data"
            )
        return CubeInfo(
            path=path,
            driver=ds.driver,
            variables=listed,
            variable=variable or cube.variable,
            dimensions=dims,
            time_start=min(keys) if keys else None,
            time_end=max(keys) if keys else None,
            time_steps=len(set(keys)) if keys else None,
            time_step=_spacing(cube),
            levels=cube.levels(),  # type: ignore[arg-type]
            dtype=ds.dtypes[0],
            units=ds.units[0] or band.get("units") or None,
            long_name=band.get("long_name") or tags.get(f"{variable}#long_name") or None,
            nodata=nodata_value(ds.nodatavals[0]),
            scale=ds.scales[0],
            offset=ds.offsets[0],
            crs=crs_label(crs),
            crs_source=crs_source,
            bounds=Bounds(left=b.left, bottom=b.bottom, right=b.right, top=b.top)
            if crs is not None or not ds.transform.is_identity
            else None,
            resolution=(abs(ds.transform.a), abs(ds.transform.e)),
            width=ds.width,
            height=ds.height,
            bands=ds.count,
            warnings=warnings,
        )
