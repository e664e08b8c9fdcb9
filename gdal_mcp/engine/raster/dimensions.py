"""The non-spatial dimensions of a band (time, vertical level …) in a netCDF, HDF5 or Zarr variable.

GDAL maps each combination of a variable's extra dimensions to one band and says which in metadata:

- netCDF (netCDF-3 and netCDF-4/HDF5 files): band items NETCDF_DIM_<dim>=<coordinate value>, dataset items
  NETCDF_DIM_EXTRA={time,level}, <dim>#units and <dim>#calendar (the coordinate variable's CF attributes);
- a multidimensional array read as a classic raster (Zarr, …): band items DIM_<dim>_INDEX, DIM_<dim>_VALUE and
  DIM_<dim>_UNIT; the CF calendar is an attribute of the dimension's own array, read here by opening it.

Times (units '<unit> since <date>') are decoded to ISO 8601 with cf_time; other values stay numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gdal_mcp.engine.raster.cf_time import CFTimeError, TimeUnits, is_time_units
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import DimensionInfo

DimValue = str | int | float
_GENERIC = re.compile(r"^DIM_(.+)_(INDEX|VALUE|UNIT)$")
_ZARR_NAME = re.compile(r'^ZARR:"(.+)":(/.*)$', re.IGNORECASE)


@dataclass
class Dimensions:
    """What raster_info and raster_stats report: each dimension once, each band's values, and what went wrong."""

    info: list[DimensionInfo] = field(default_factory=list)
    by_band: dict[int, dict[str, DimValue]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _number(text: str) -> DimValue:
    try:
        return float(text)
    except ValueError:
        return text.strip()


def _index(text: str, netcdf: bool) -> DimValue:
    """A 0-based position: the netCDF driver numbers the values of a dimension without coordinates from 1."""
    try:
        return int(text) - (1 if netcdf else 0)
    except ValueError:
        return _number(text)


def _netcdf_raw(ds: Any, indexes: list[int]) -> tuple[list[str], dict[int, dict[str, str]]]:
    tags = ds.tags()
    names = [n.strip() for n in tags.get("NETCDF_DIM_EXTRA", "").strip("{}").split(",") if n.strip()]
    raw: dict[int, dict[str, str]] = {}
    for b in indexes:
        band = ds.tags(b)
        if not names:  # no NETCDF_DIM_EXTRA: the band items alone
            names = [k[len("NETCDF_DIM_") :] for k in band if k.startswith("NETCDF_DIM_")]
        raw[b] = {n: band[f"NETCDF_DIM_{n}"] for n in names if f"NETCDF_DIM_{n}" in band}
    return names, raw


def _generic_raw(ds: Any, indexes: list[int]) -> tuple[list[str], dict[int, dict[str, str]], dict[str, str], set[str]]:
    names: list[str] = []
    raw: dict[int, dict[str, str]] = {}
    units: dict[str, str] = {}
    index_only: set[str] = set()
    for b in indexes:
        items: dict[str, dict[str, str]] = {}
        for key, value in ds.tags(b).items():
            m = _GENERIC.match(key)
            if m:
                items.setdefault(m.group(1), {})[m.group(2)] = value
        for name, parts in items.items():
            if name not in names:
                names.append(name)
            if parts.get("UNIT"):
                units[name] = parts["UNIT"]
            if "VALUE" not in parts:
                index_only.add(name)
            raw.setdefault(b, {})[name] = parts.get("VALUE", parts.get("INDEX", ""))
    return names, raw, units, index_only


def _zarr_calendar(ds: Any, dim: str) -> str | None:
    """The calendar attribute of a Zarr dimension's indexing array (GDAL does not copy it onto the bands)."""
    from gdal_mcp.engine.raster.opening import open_raster

    m = _ZARR_NAME.match(ds.name)
    root, array = (m.group(1), m.group(2)) if m else (ds.name, "/")
    group = array.rsplit("/", 1)[0]
    for candidate in dict.fromkeys((f"{group}/{dim}", f"/{dim}")):
        try:
            with open_raster(f'ZARR:"{root}":{candidate}') as axis:
                return axis.tags().get("calendar")
        except GdalMcpError:
            continue
    return None


def band_dimensions(ds: Any, indexes: list[int]) -> Dimensions:
    """The extra dimensions of bands `indexes` of an open rasterio dataset (empty for an ordinary raster)."""
    out = Dimensions()
    if not indexes:
        return out
    names, raw = _netcdf_raw(ds, indexes)
    netcdf = bool(names)
    units: dict[str, str] = {}
    calendars: dict[str, str | None] = {}
    index_only: set[str] = set()
    if names:
        tags = ds.tags()
        for n in names:
            if tags.get(f"{n}#units"):
                units[n] = tags[f"{n}#units"]
            calendars[n] = tags.get(f"{n}#calendar")
            if f"NETCDF_DIM_{n}_VALUES" not in tags and n not in units:
                index_only.add(n)  # no coordinate variable: GDAL numbers the positions (from 1)
    else:
        names, raw, units, index_only = _generic_raw(ds, indexes)
        for n in names:
            calendars[n] = _zarr_calendar(ds, n) if ds.driver == "Zarr" and is_time_units(units.get(n)) else None
    decoders: dict[str, TimeUnits] = {}
    for n in names:
        unit = units.get(n)
        info = DimensionInfo(name=n, units=unit, values="index" if n in index_only else "coordinate")
        if is_time_units(unit) and n not in index_only:
            try:
                decoders[n] = TimeUnits.parse(unit or "", calendars.get(n))
                info.values, info.calendar = "iso_datetime", decoders[n].calendar
            except CFTimeError as e:
                out.warnings.append(f"dimension {n}: not decoded to dates ({e}); its values are the raw numbers")
        out.info.append(info)
    failed: set[str] = set()
    for b in indexes:
        values: dict[str, DimValue] = {}
        for n, text in raw.get(b, {}).items():
            decoder = decoders.get(n)
            if decoder is not None:
                try:
                    values[n] = decoder.decode(text)
                    continue
                except CFTimeError as e:
                    if n not in failed:  # once per dimension, not once per band
                        out.warnings.append(f"band {b}: dimension {n} value {text!r} not decoded to a date ({e})")
                    failed.add(n)
            values[n] = _index(text, netcdf) if n in index_only else _number(text)
        if values:
            out.by_band[b] = values
    return out
