"""A variable of a netCDF, HDF5 or Zarr file as a cube: its time steps and levels, read through GDAL's raster view.

GDAL opens a variable of more than two dimensions (``NETCDF:"f.nc":tas``, ``HDF5:"f.h5"://t``, ``ZARR:"f.zarr":/t``)
as a raster whose bands are the combinations of its extra dimensions; `dimensions.band_dimensions` says which band
holds which time (decoded to ISO 8601 in the file's CF calendar) and which level. This module adds what the cube
tools need on top: picking the variable in a file, one time and one level per band, selecting bands by a date range
and a level, and reading a window of bands as float64 in physical units (scale and offset applied, nodata as NaN).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.raster.cf_time import US_PER_DAY, TimeUnits, canonical_calendar, day_number, is_time_units
from gdal_mcp.engine.raster.dimensions import Dimensions, band_dimensions
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.errors import GdalMcpError

MAX_YEAR = 100_000  # a date further out is a broken time axis, not a date (treated as not decoded)
_ISO = re.compile(r"^(-?\d+)-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2}(?:\.\d+)?))?$")
_DATE_ARG = re.compile(r"^(-?\d{1,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[T ](\d{1,2})(?::(\d{1,2})(?::(\d{1,2}(?:\.\d*)?))?)?)?)?)?Z?$")


@dataclass(frozen=True)
class Step:
    """One band of the cube: its time (ISO 8601, or None when the variable has no time) and level."""

    band: int
    time: str | None
    key: tuple[int, int, int, int, int, float] | None  # (year, month, day, hour, minute, second) of `time`
    level: float | str | None


@dataclass
class Grid:
    """The cube's grid as the tools present it: north up (a file stored south up, as netCDF and Zarr often are, is read
    flipped) and, on lon/lat grids stored with longitudes 0..360, with longitudes -180..180 (a global grid's columns
    rolled so that the western hemisphere comes first; a grid wholly east of 180 shifted by -360), so that outputs,
    points, zones and bboxes line up with everything else in lon/lat. Windows are in this grid's rows and columns;
    `sources` maps one to the file's."""

    crs: Any
    crs_source: str
    transform: Any
    width: int
    height: int
    flipped: bool
    roll: int = 0  # presented column j is the file's column (j + roll) % width
    shifted: bool = False  # longitudes moved from 0..360 to -180..180

    @property
    def bounds(self) -> Any:
        from rasterio.coords import BoundingBox

        t = self.transform
        x0, y0 = t.c, t.f
        x1, y1 = t * (self.width, self.height)
        return BoundingBox(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))

    def window_transform(self, window: Window) -> Any:
        from rasterio.windows import transform

        return transform(window, self.transform)

    def source(self, window: Window) -> Window:
        """The file's rows of `window` (columns unchanged: see `sources` for rolled grids)."""
        if not self.flipped:
            return window
        return Window(window.col_off, self.height - window.row_off - window.height, window.width, window.height)

    def sources(self, window: Window) -> list[Window]:
        """The file's windows holding `window`, west to east: one, or two where a rolled grid's window crosses the
        file's last column."""
        rows = self.source(window)
        c0, w = int(window.col_off), int(window.width)
        start = (c0 + self.roll) % self.width
        first = min(w, self.width - start)
        out = [Window(start, rows.row_off, first, rows.height)]
        if first < w:
            out.append(Window(0, rows.row_off, w - first, rows.height))
        return out


def _longitudes(grid: Grid) -> Grid:
    """Present a lon/lat grid stored with longitudes beyond 180 (0..360) as -180..180 (see Grid)."""
    from affine import Affine

    t = grid.transform
    if grid.crs is None or not grid.crs.is_geographic or t.a <= 0 or t.b or t.d:
        return grid
    left, right = t.c, t.c + t.a * grid.width
    if right <= 180 + t.a / 2:
        return grid
    if left >= 180 - t.a / 2:  # wholly east of 180: a shift
        grid.transform = Affine(t.a, 0.0, t.c - 360.0, 0.0, t.e, t.f)
        grid.shifted = True
        return grid
    if abs(grid.width * t.a - 360.0) > t.a / 2:
        return grid  # a regional grid across 180: rolling would split it; left in 0..360
    roll = math.ceil((180.0 - t.c) / t.a - 0.5)  # the first column whose centre is at or east of 180
    grid.roll = roll % grid.width
    grid.transform = Affine(t.a, 0.0, t.c + roll * t.a - 360.0, 0.0, t.e, t.f)
    grid.shifted = True
    return grid


def grid_of(ds: Any, variable: str | None) -> Grid:
    from affine import Affine

    crs, source = cube_crs(ds, variable)
    t = ds.transform
    flipped = t.e > 0 and t.b == 0 and t.d == 0
    if flipped:
        t = Affine(t.a, 0.0, t.c, 0.0, -t.e, t.f + t.e * ds.height)
    grid = Grid(crs=crs, crs_source=source, transform=t, width=ds.width, height=ds.height, flipped=flipped)
    return _longitudes(grid)


@dataclass
class Cube:
    """The bands of one variable, with what each holds."""

    path: str  # what GDAL opened
    variable: str | None
    time_dim: str | None
    level_dim: str | None
    calendar: str | None
    time_units: str | None
    steps: list[Step]
    dims: Dimensions
    grid: Grid
    warnings: list[str] = field(default_factory=list)
    md: Any = None  # an mdarray.MDReader when GDAL's multidimensional API reads this variable (open_cube)

    def require_dates(self, what: str) -> None:
        """invalid-argument saying why, when some steps have no date (no time axis, or one not decodable)."""
        if self.steps and all(s.key is not None for s in self.steps):
            return
        if self.time_dim is None:
            raise GdalMcpError("invalid-argument", f"the variable has no time dimension, so {what} cannot apply")
        why = next((w for w in self.warnings if self.time_dim in w), "its values could not be decoded")
        raise GdalMcpError("invalid-argument", f"the time axis '{self.time_dim}' has no dates ({why}), so {what} cannot apply")

    def levels(self) -> list[float | str]:
        return list(dict.fromkeys(s.level for s in self.steps if s.level is not None))

    def select(self, start: str | None = None, end: str | None = None, level: float | str | None = None) -> list[Step]:
        """Steps within [start, end] (inclusive, ISO dates or date-times; a date alone covers its whole day, a
        year or year-month its whole year or month) at `level` (required when the variable has several)."""
        steps = self.steps
        if self.level_dim is not None:
            levels = self.levels()
            if level is None:
                if len(levels) > 1:
                    raise GdalMcpError(
                        "invalid-argument",
                        f"the variable has {len(levels)} levels along '{self.level_dim}' ({_listing(levels)}); "
                        "give level= one of them",
                    )
                level = levels[0] if levels else None
            else:
                match = [v for v in levels if _same_level(v, level)]
                if not match:
                    raise GdalMcpError(
                        "invalid-argument", f"level {level} is not among the levels of '{self.level_dim}': {_listing(levels)}"
                    )
                level = match[0]
            steps = [s for s in steps if s.level == level]
        elif level is not None:
            raise GdalMcpError("invalid-argument", "the variable has no level dimension; omit level")
        if start is not None or end is not None:
            self.require_dates("start and end")
            lo = date_bound(start, "start", upper=False) if start else None
            hi = date_bound(end, "end", upper=True) if end else None
            steps = [s for s in steps if (lo is None or s.key >= lo) and (hi is None or s.key <= hi)]  # type: ignore[operator]
        if not steps:
            span = f"{self.steps[0].time} .. {self.steps[-1].time}" if self.steps and self.steps[0].time else "none"
            raise GdalMcpError("invalid-argument", f"no time step falls within the range asked; the variable's steps: {span}")
        return steps


def _listing(values: list[Any], limit: int = 20) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" … ({len(values)} in all)" if len(values) > limit else "")


def _same_level(a: float | str, b: float | str) -> bool:
    try:
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))
    except (TypeError, ValueError):
        return str(a) == str(b)


def time_key(iso: str) -> tuple[int, int, int, int, int, float]:
    m = _ISO.match(iso)
    if not m:
        raise GdalMcpError("internal-error", f"not an ISO date-time: {iso!r}")
    y, mo, d, h, mi, s = m.groups()
    return int(y), int(mo), int(d), int(h or 0), int(mi or 0), float(s or 0)


def date_bound(text: str, name: str, *, upper: bool) -> tuple[int, int, int, int, int, float]:
    """A date argument as a key: '2005', '2005-03', '2005-03-15' or '2005-03-15T06:00' cover their whole span
    (an upper bound is its span's last instant)."""
    m = _DATE_ARG.match(str(text).strip())
    if not m:
        raise GdalMcpError(
            "invalid-argument", f"{name} {text!r} is not a date; write e.g. 2005, 2005-03, 2005-03-15 or 2005-03-15T06:00"
        )
    parts = [int(g) if g is not None and i < 5 else g for i, g in enumerate(m.groups())]
    year = int(parts[0])  # type: ignore[arg-type]
    month = parts[1] if parts[1] is not None else (12 if upper else 1)
    day = parts[2] if parts[2] is not None else (31 if upper else 1)
    hour = parts[3] if parts[3] is not None else (23 if upper else 0)
    minute = parts[4] if parts[4] is not None else (59 if upper else 0)
    second = float(parts[5]) if parts[5] is not None else (60.0 if upper else 0.0)
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):  # type: ignore[arg-type]
        raise GdalMcpError("invalid-argument", f"{name} {text!r} is not a valid date")
    return year, int(month), int(day), int(hour), int(minute), second  # type: ignore[arg-type]


def _variable_name(subdataset: str) -> str:
    """The variable a GDAL subdataset path names: tas in NETCDF:"f.nc":tas, data in HDF5:"f.h5"://grp/data."""
    tail = subdataset.rsplit('":', 1)[-1] if '":' in subdataset else subdataset.rsplit(":", 1)[-1]
    return tail.strip("/").rsplit("/", 1)[-1]


def described_variables(path: str) -> list[tuple[str, str, str | None]]:
    """(variable name, GDAL subdataset path, GDAL's description '[12x96x192] tas (32-bit floating-point)')."""
    with open_raster(path) as ds:
        tags = ds.tags(ns="SUBDATASETS")
    out = []
    for i in range(1, len(tags) + 1):
        sub = tags.get(f"SUBDATASET_{i}_NAME")
        if sub is None:
            break
        out.append((_variable_name(sub), sub, tags.get(f"SUBDATASET_{i}_DESC")))
    return out


def resolve_variable(path: str, variable: str | None) -> tuple[str, str | None]:
    """The GDAL path of `variable` in the file `path`, and the variable's name. A file of one variable (or a path
    that already names one, NETCDF:"f.nc":tas) is opened as it is."""
    described = described_variables(path)
    found = [(n, s) for n, s, _ in described]
    if not found:
        named = _variable_name(path) if CONNECTION.match(path) else None
        if named is None:
            with open_raster(path) as ds:
                named = (ds.tags(1).get("NETCDF_VARNAME") if ds.count else None) or None
        if variable is not None and variable.strip("/") != (named or "").strip("/"):
            raise GdalMcpError(
                "invalid-argument",
                f"no variable {variable!r} here: the dataset is one variable"
                + (f", {named!r}" if named else "")
                + "; omit variable",
            )
        return path, named
    names = [n for n, _ in found]
    if variable is None:
        # as cube_info: the only variable with a time or level dimension (three or more dimensions) is the cube
        cubes = [
            (n, s) for n, s, d in described if len(re.findall(r"\d+", (d or "").split("]")[0])) >= 3 and (d or "").startswith("[")
        ]
        if len(cubes) == 1:
            return cubes[0][1], cubes[0][0]
        raise GdalMcpError(
            "invalid-argument",
            f"the file holds {len(found)} variables ({_listing(names)}); give variable= one of them (cube_info lists "
            "them with their dimensions)",
        )
    match = [s for n, s in found if n == variable or s.rsplit('":', 1)[-1].strip("/") == variable.strip("/")]
    if not match:
        raise GdalMcpError("invalid-argument", f"no variable {variable!r} in the file; its variables: {_listing(names)}")
    return match[0], variable


def build_cube(ds: Any, path: str, variable: str | None) -> Cube:
    if variable is None and ds.count:
        variable = ds.tags(1).get("NETCDF_VARNAME") or None  # a file of one variable, opened as it is
    dims = band_dimensions(ds, list(range(1, ds.count + 1)))
    # a time axis whose units cf_time cannot decode ('months since …' outside the 360_day calendar) is still the time
    # axis: its steps have no dates (dims.warnings says why), so selections and periods by date are refused
    timelike = [d.name for d in dims.info if d.values == "iso_datetime" or is_time_units(d.units)]
    time_dims = sorted(timelike, key=lambda n: next(d.values != "iso_datetime" for d in dims.info if d.name == n))
    others = [d.name for d in dims.info if d.name not in timelike]
    warnings = list(dims.warnings)
    time_dim = time_dims[0] if time_dims else None
    if len(time_dims) > 1:
        warnings.append(f"several time dimensions ({', '.join(time_dims)}); {time_dim} is used as the time")
        others += time_dims[1:]
    if len(others) > 1:
        raise GdalMcpError(
            "unsupported",
            f"the variable has {len(others) + (1 if time_dim else 0)} non-spatial dimensions ({', '.join(others)}"
            f"{', ' + time_dim if time_dim else ''}); the cube tools handle a time and at most one level dimension",
        )
    level_dim = others[0] if others else None
    info = {d.name: d for d in dims.info}
    steps = []
    for b in range(1, ds.count + 1):
        values = dims.by_band.get(b, {})
        t = values.get(time_dim) if time_dim else None
        t_iso = t if isinstance(t, str) and _ISO.match(t) and abs(time_key(t)[0]) <= MAX_YEAR else None
        steps.append(
            Step(band=b, time=t_iso, key=time_key(t_iso) if t_iso else None, level=values.get(level_dim) if level_dim else None)
        )
    if time_dim and any(s.key is None for s in steps):
        warnings.append(f"some bands have no decodable '{time_dim}' value; time selections are refused")
    if time_dim and all(s.key is not None for s in steps):
        steps.sort(key=lambda s: (s.key, s.band))
    return Cube(
        path=path,
        variable=variable,
        time_dim=time_dim,
        level_dim=level_dim,
        calendar=info[time_dim].calendar if time_dim else None,
        time_units=info[time_dim].units if time_dim else None,
        steps=steps,
        dims=dims,
        grid=grid_of(ds, variable),
        warnings=warnings,
    )


@contextlib.contextmanager
def open_cube(path: str, variable: str | None = None) -> Iterator[tuple[Any, Cube]]:
    """The open dataset of `variable` in `path` and its Cube."""
    from gdal_mcp.engine.cube.mdarray import open_reader

    check_sizes(path)
    gdal_path, name = resolve_variable(netcdf_view(path), variable)
    gdal_path = netcdf_view(gdal_path)
    with open_raster(gdal_path) as ds:
        if ds.count == 0:
            raise GdalMcpError("invalid-argument", "the dataset has no raster bands; give variable= (cube_info lists them)")
        cube = build_cube(ds, gdal_path, name)
        if variable is None and name is not None and described_variables(netcdf_view(path)):
            cube.warnings.append(f"read '{name}', the only variable of the file with a time or level dimension")
        cube.md = open_reader(ds, gdal_path, cube.variable)
        try:
            yield ds, cube
        finally:
            if cube.md is not None:
                cube.md.close()


_HDF5_NAME = re.compile(r'^HDF5:"([^"]+)":/*([^"]+)$', re.IGNORECASE)
#: a variable as GDAL names it: DRIVER:"file":variable (one quoted file, as the sandbox checked it)
CONNECTION = re.compile(r'^[A-Za-z0-9_]+:"([^"]+)":/*([^"]+)$')


#: time steps (the product of a variable's dimensions beyond y and x) a cube tool reads at most, and pixels per step:
#: GDAL's raster view makes an object per band when it opens a variable (a 400-byte netCDF header claiming 2e9 steps
#: made it allocate 16 GB and abort), so a variable past these is refused before any raster view of it is opened
MAX_STEPS = 2_000_000
MAX_STEP_PIXELS = 2**34


def check_sizes(path: str) -> None:
    """resource-limit when a variable of the file `path` names (or, for a file, any of its variables) is larger than
    the cube tools read, judged from the file's header alone (mdarray.array_shapes)."""
    from gdal_mcp.engine.cube.mdarray import array_shapes

    file, name = split_connection(path, None)
    if file.startswith("/vsi"):
        return  # a virtual file (an archive member, remote data) GDAL reads as it is
    shapes = array_shapes(file)
    if not shapes:
        return
    for array, shape in shapes.items():
        if name is not None and array.strip("/") != name.strip("/") and array.rsplit("/", 1)[-1] != name.strip("/"):
            continue
        if len(shape) < 3:
            continue
        steps, pixels = math.prod(shape[:-2]), shape[-1] * shape[-2]
        if steps > MAX_STEPS or pixels > MAX_STEP_PIXELS:
            raise GdalMcpError(
                "resource-limit",
                f"variable {array.lstrip('/')} has {steps:,} steps of {shape[-1]:,} x {shape[-2]:,} pixels (shape "
                f"{' x '.join(f'{v:,}' for v in shape)}); the cube tools read at most {MAX_STEPS:,} steps of "
                f"{MAX_STEP_PIXELS:,} pixels. Split the file, or check its header: a dimension this large may be broken",
            )


def split_connection(path: str, variable: str | None) -> tuple[str, str | None]:
    """(file, variable) of a GDAL variable path NETCDF:"f.nc":tas, or (path, variable) of a plain path."""
    m = CONNECTION.match(path)
    return (m.group(1), m.group(2)) if m else (path, variable)


def netcdf_view(gdal_path: str) -> str:
    """An HDF5 variable as the netCDF driver reads it when it can: GDAL's HDF5 driver gives its bands no dimension
    values, while netCDF-C reads the HDF5 dimension scales (every netCDF-4 file, and HDF5 files that use them) as
    CF coordinates, times included. The same file either way; else the HDF5 path as it was."""
    m = _HDF5_NAME.match(gdal_path)
    if m:
        candidate = f'NETCDF:"{m.group(1)}":{m.group(2)}'
    elif ":" in gdal_path.split("/", 1)[0] or gdal_path.startswith("/vsi"):
        return gdal_path  # another driver's syntax, or a virtual file: as it is
    else:
        try:
            with open_raster(gdal_path) as ds:
                if not ds.driver.upper().startswith("HDF5"):
                    return gdal_path
        except GdalMcpError:
            return gdal_path
        candidate = f'NETCDF:"{gdal_path}"'
    try:
        with open_raster(candidate) as ds:
            if ds.subdatasets or (ds.count and band_dimensions(ds, [1]).info):
                return candidate
    except GdalMcpError:
        pass
    return gdal_path


def _read(ds: Any, cube: Cube, bands: list[int], window: Window, dtype: str | None) -> np.ndarray:
    parts = []
    for source in cube.grid.sources(window):
        if cube.md is not None:
            data = cube.md.read(bands, source, ds.height)
            data = data if dtype is None or data.dtype == dtype else data.astype(dtype)
        else:
            data = ds.read(bands, window=source, out_dtype=dtype)
        parts.append(data[:, ::-1, :] if cube.grid.flipped else data)  # a view: rows turned over without a copy
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=2)


def read_raw(ds: Any, cube: Cube, bands: list[int], window: Window) -> np.ndarray:
    """Bands (n, h, w) of `window` (in the north-up grid's rows) as the file stores them (its data type)."""
    return _read(ds, cube, bands, window, ds.dtypes[bands[0] - 1])


def _nodata_to_nan(ds: Any, data: np.ndarray, bands: list[int]) -> None:
    """Each band's nodata value in `data` (floating, one plane per band) set to NaN, in place."""
    for i, b in enumerate(bands):
        nodata = ds.nodatavals[b - 1]
        if nodata is not None and not np.isnan(nodata):
            plane = data[i]
            plane[plane == np.asarray(nodata).astype(data.dtype)] = np.nan


def read_steps(ds: Any, cube: Cube, bands: list[int], window: Window) -> np.ndarray:
    """Bands (n, h, w) of `window` (north-up rows) as float64 in physical units: nodata and NaN as NaN, then scale
    and offset."""
    data = np.ascontiguousarray(_read(ds, cube, bands, window, "float64"))  # folded in place by _Acc.add
    _nodata_to_nan(ds, data, bands)
    for i, b in enumerate(bands):
        scale, offset = ds.scales[b - 1], ds.offsets[b - 1]
        if scale != 1.0 or offset != 0.0:
            data[i] = data[i] * scale + offset
    return data


def read_values(ds: Any, cube: Cube, bands: list[int], window: Window) -> tuple[np.ndarray, float, float] | None:
    """Bands (n, h, w) of `window` as stored but floating (float32 for types float32 holds exactly, else float64),
    nodata as NaN, with the one (scale, offset) that turns them into physical units; None when the bands differ in
    scale or offset (then read_steps). For statistics that commute with a linear map (sum, mean, min, max): applying
    the scale to one plane of results instead of to every value read."""
    scales = {(ds.scales[b - 1], ds.offsets[b - 1]) for b in bands}
    if len(scales) != 1:
        return None
    dtype = ds.dtypes[bands[0] - 1]
    target = "float32" if dtype in ("float32", "uint8", "int8", "uint16", "int16") else "float64"
    data = _read(ds, cube, bands, window, None)
    if data.dtype != target:
        data = data.astype(target)
    _nodata_to_nan(ds, data, bands)
    scale, offset = scales.pop()
    return data, float(scale), float(offset)


def windows(height: int, width: int, bytes_per_pixel: int, budget: int) -> list[Window]:
    """Windows covering the grid, each of at most `budget` bytes at `bytes_per_pixel`: strips of whole rows, or
    pieces of one row when even a row is too large."""
    per_row = max(1, width * bytes_per_pixel)
    rows = budget // per_row
    if rows >= 1:
        rows = min(rows, height)
        return [Window(0, r, width, min(rows, height - r)) for r in range(0, height, rows)]
    cols = max(1, budget // max(1, bytes_per_pixel))
    return [Window(c, r, min(cols, width - c), 1) for r in range(height) for c in range(0, width, cols)]


_LON_UNITS = {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"}
_LAT_UNITS = {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"}


def cube_crs(ds: Any, variable: str | None) -> tuple[Any, str]:
    """The CRS of a cube and where it came from: GDAL's (from the CF grid_mapping or the file's own SRS), or
    EPSG:4326 when the axes are longitude and latitude (CF: degrees_east / degrees_north) and nothing says more."""
    from rasterio.crs import CRS

    tags = ds.tags()
    if ds.crs is not None and ds.crs.to_wkt():
        mapped = variable and f"{variable}#grid_mapping" in tags
        return ds.crs, "grid_mapping" if mapped else "file"
    lon = lat = False
    for key, value in tags.items():
        name, _, attr = key.partition("#")
        text = str(value).strip().lower()
        if attr == "units" and text in _LON_UNITS or attr == "standard_name" and text == "longitude":
            lon = True
        if attr == "units" and text in _LAT_UNITS or attr == "standard_name" and text == "latitude":
            lat = True
    if lon and lat and ds.transform is not None and not ds.transform.is_identity:
        return CRS.from_epsg(4326), "lon/lat axes"
    return None, "none"


def seconds_of(key: tuple[int, int, int, int, int, float], calendar: str | None) -> float:
    """A step's time key as seconds from the day 0 of its calendar (cf_time.day_number): what spacings, period
    bounds and encoded times are computed from."""
    cal = canonical_calendar(calendar)
    return day_number(key[0], key[1], key[2], cal) * 86400.0 + key[3] * 3600 + key[4] * 60 + key[5]


def encode_time(units: str, calendar: str | None, key: tuple[int, int, int, int, int, float]) -> float:
    """`key` as a number of `units` in `calendar` (the inverse of cf_time's decode), for a netCDF time coordinate."""
    tu = TimeUnits.parse(units, calendar)
    cal = canonical_calendar(calendar)
    # integer microseconds (as cf_time decodes): day numbers are Julian days, too large for float microseconds
    us = day_number(key[0], key[1], key[2], cal) * US_PER_DAY + round((key[3] * 3600 + key[4] * 60 + key[5]) * 1e6)
    return (us - tu.reference_us) / tu.unit_us
