"""Tables to geometries (vector_from_table): CSV, TSV, XLSX, ODS (any table GDAL reads) to points or WKT shapes.

The table is read with GDAL's own drivers (CSV with AUTODETECT_TYPE over the whole file, so numbers are numbers
and codes such as "01234" stay text; XLSX/ODS typed cells), in Arrow batches. Geometries are built here, not by
the CSV driver, so that every row whose coordinates are empty or unreadable is counted: such rows are WRITTEN
with a null geometry (attributes kept) and reported by data row number, never dropped.
"""

from __future__ import annotations

import re
import warnings as pywarnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyogrio

from gdal_mcp.engine.crs import parse_pyproj_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.vector.convert import crs_text
from gdal_mcp.engine.vector.geomtypes import GeomType
from gdal_mcp.engine.vector.layer_map import LAYER_OPTIONS, write_guarded
from gdal_mcp.engine.vector.opening import choose_layer
from gdal_mcp.engine.vector.stream import output_layer_name, read_layer, relay, summarize_vector, vector_driver, write_layer
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import FromTableResult

# Coordinate column pairs recognised when x/y are not given (case-insensitive), most specific first.
COORDINATE_PAIRS = (
    ("longitude", "latitude"),
    ("lon", "lat"),
    ("long", "lat"),
    ("lng", "lat"),
    ("x", "y"),
    ("easting", "northing"),
    ("east", "north"),
)
WKT_NAMES = ("wkt", "geometry", "geom", "the_geom", "wkt_geom")
GEOMETRY_FIELD = "geometry"
MAX_ROW_NUMBERS = 100
# Open options per driver: types detected over the whole CSV (not only its first megabyte).
OPEN_OPTIONS: dict[str, dict[str, str]] = {
    "CSV": {"AUTODETECT_TYPE": "YES", "AUTODETECT_SIZE_LIMIT": "0", "KEEP_GEOM_COLUMNS": "YES"},
}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _source(src: str) -> str:
    """GDAL's CSV driver reads .tsv (tab) and .csv by extension; a .txt table is opened as CSV explicitly."""
    return f"CSV:{src}" if Path(src).suffix.lower() in (".txt", ".tab") and not src.startswith("CSV:") else src


def _driver_of(src: str) -> str | None:
    try:
        with pywarnings.catch_warnings():
            pywarnings.simplefilter("ignore")
            return pyogrio.read_info(src).get("driver")
    except Exception:  # noqa: BLE001 - choose_layer reports unreadable sources with a clear error
        return None


def _find(columns: list[str], name: str, what: str) -> str:
    """The column called `name` (exact, else the only case-insensitive match)."""
    if name in columns:
        return name
    matches = [c for c in columns if c.lower() == name.lower()]
    if len(matches) == 1:
        return matches[0]
    raise GdalMcpError("not-found", f"{what} column {name!r} not found; the table's columns are: {', '.join(columns)}")


def detect_columns(
    columns: list[str], x: str | None, y: str | None, wkt: str | None
) -> tuple[str | None, str | None, str | None]:
    """(x, y, wkt) column names: those given, else detected (lon/lat, longitude/latitude, x/y, easting/northing …,
    then a WKT column); an error naming the columns when nothing fits."""
    if wkt is not None:
        if x is not None or y is not None:
            raise GdalMcpError(
                "invalid-argument", "give either wkt (one column of WKT geometries) or x and y (coordinate columns), not both"
            )
        return None, None, _find(columns, wkt, "wkt")
    if (x is None) != (y is None):
        raise GdalMcpError("invalid-argument", "give both x and y (coordinate column names), or neither to detect them")
    if x is not None and y is not None:
        return _find(columns, x, "x"), _find(columns, y, "y"), None
    lower = {c.lower(): c for c in columns}
    for cx, cy in COORDINATE_PAIRS:
        if cx in lower and cy in lower:
            return lower[cx], lower[cy], None
    for name in WKT_NAMES:
        if name in lower:
            return None, None, lower[name]
    raise GdalMcpError(
        "invalid-argument",
        "no coordinate columns found (looked for lon/lat, longitude/latitude, "
        f"x/y, easting/northing or a WKT column); the table's columns are: {', '.join(columns)}. "
        "Name them with x= and y= (or wkt=)",
    )


def parse_numbers(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Float values of a column (numbers as they are, text parsed: '12.5', ' 3 ', '1e3'); NaN where empty or not a
    number."""
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_decimal(column.type):
        return np.asarray(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)
    out = np.full(len(column), np.nan)
    for i, v in enumerate(column.to_pylist()):
        if v is None:
            continue
        text = str(v).strip()
        if _NUMBER.match(text):
            out[i] = float(text)
    return out


def _wkt_geometries(column: pa.Array) -> np.ndarray:
    import shapely

    values = np.array([None if v is None or not str(v).strip() else str(v).strip() for v in column.to_pylist()], dtype=object)
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        return shapely.from_wkt(values, on_invalid="ignore")


def _wkt_type(src: str, layer: str, driver: str | None, column: str) -> GeomType:
    """The layer type that holds every WKT geometry of the column (a first pass over it)."""
    import shapely

    dims: set[int] = set()
    multi = z = collection = False
    with read_layer(
        src, layer=layer, columns=[column], read_geometry=False, count=False, open_options=OPEN_OPTIONS.get(driver or "")
    ) as stream:
        for batch in stream.batches:
            geoms = _wkt_geometries(batch.column(column))
            present = geoms[~shapely.is_missing(geoms)]
            if not len(present):
                continue
            ids = shapely.get_type_id(present)
            collection |= bool((ids == 7).any())
            multi |= bool(np.isin(ids, (4, 5, 6)).any())
            z |= bool(shapely.has_z(present).any())
            dims |= {int(d) for d in np.unique(shapely.get_dimensions(present[ids != 7]))}
    if collection or len(dims) != 1:
        return GeomType(None, False, z)
    return GeomType(dims.pop(), multi, z)


@wrap_gdal_errors
def from_table(
    src: str,
    dst: str,
    *,
    x: str | None = None,
    y: str | None = None,
    wkt: str | None = None,
    crs: str = "EPSG:4326",
    layer: str | None = None,
    format: str | None = None,
    output_layer: str | None = None,
    progress: Progress = no_progress,
) -> tuple[FromTableResult, list[str]]:
    """Points from coordinate columns (or geometries from a WKT column) of a table, every row written.

    Columns are detected when not named (see COORDINATE_PAIRS, WKT_NAMES); the coordinate columns stay as
    attributes. Rows whose coordinates are empty, not numbers or not finite (or whose WKT does not parse) are
    written with a null geometry and reported (count and the first data row numbers, 1-based, header excluded).
    """
    import shapely

    driver = vector_driver(dst, format)
    source = _source(src)
    target_crs = parse_pyproj_crs(crs, "crs")
    name = choose_layer(source, layer)
    in_driver = _driver_of(source)
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")
        info = pyogrio.read_info(source, layer=name)
    columns = [str(c) for c in info["fields"]]
    cx, cy, cw = detect_columns(columns, x, y, wkt)
    total = int(info["features"]) if info.get("features", -1) >= 0 else None
    geom_type = _wkt_type(source, name, in_driver, cw) if cw else GeomType(0)
    counts = {"rows": 0, "bad": 0, "outside": 0}
    bad_rows: list[int] = []
    geo = target_crs.is_geographic

    def transform(batch: pa.RecordBatch) -> pa.RecordBatch:
        start = counts["rows"]
        if cw is not None:
            geoms = _wkt_geometries(batch.column(cw))
            bad = shapely.is_missing(geoms)
        else:
            xs, ys = parse_numbers(batch.column(cx)), parse_numbers(batch.column(cy))
            bad = ~(np.isfinite(xs) & np.isfinite(ys))
            geoms = np.full(batch.num_rows, None, dtype=object)
            geoms[~bad] = shapely.points(xs[~bad], ys[~bad])
            if geo:
                outside = ~bad & ((np.abs(xs) > 360) | (np.abs(ys) > 90))
                counts["outside"] += int(outside.sum())
        n_bad = int(bad.sum())
        if n_bad:
            counts["bad"] += n_bad
            room = MAX_ROW_NUMBERS - len(bad_rows)
            if room > 0:
                bad_rows.extend(int(i) + start + 1 for i in np.flatnonzero(bad)[:room])
        counts["rows"] += batch.num_rows
        wkb = shapely.to_wkb(geoms, output_dimension=3, flavor="iso")
        return batch.append_column(_geometry_field(batch.schema), pa.array(wkb, type=pa.binary()))

    out_name = output_layer_name(dst, output_layer)

    def write() -> None:
        with read_layer(source, layer=name, read_geometry=False, open_options=OPEN_OPTIONS.get(in_driver or "")) as s:
            out_schema = s.schema.append(_geometry_field(s.schema))
            batches: Iterator[pa.RecordBatch] = relay(s.batches, s.total or total, progress, "converted", transform)
            write_layer(
                dst,
                out_schema,
                batches,
                driver=driver,
                layer=out_name,
                crs=crs_text(target_crs),
                geometry_type=geom_type.name,
                layer_options=LAYER_OPTIONS.get(driver),
            )

    write_guarded(dst, write)
    summary = summarize_vector(dst, out_name)
    progress(1.0, f"wrote {summary.feature_count} features")
    warnings: list[str] = []
    what = f"WKT column {cw!r}" if cw else f"coordinates ({cx!r}, {cy!r})"
    if counts["bad"]:
        shown = ", ".join(str(r) for r in bad_rows[:20]) + (" …" if counts["bad"] > 20 else "")
        warnings.append(
            f"{counts['bad']} of {counts['rows']} row(s) have empty or unreadable {what}: they were "
            f"written with a null geometry, attributes kept (data rows {shown}; 1-based, header not "
            "counted)"
        )
    if counts["outside"]:
        warnings.append(
            f"{counts['outside']} point(s) lie outside longitude ±360 / latitude ±90, impossible in "
            f"{crs}: the columns may be projected coordinates (easting/northing); pass their crs="
        )
    if cx is not None and x is None:
        warnings.append(f"coordinate columns detected: x={cx!r}, y={cy!r} (pass x= and y= to choose others)")
    if cw is not None and wkt is None:
        warnings.append(f"WKT column detected: {cw!r}")
    epsg = target_crs.to_epsg(min_confidence=90)
    result = FromTableResult(
        summary=summary,
        rows=counts["rows"],
        x=cx,
        y=cy,
        wkt=cw,
        crs=f"EPSG:{epsg}" if epsg else target_crs.name,
        unparsed_rows=counts["bad"],
        unparsed_row_numbers=bad_rows,
        warnings=warnings,
    )
    return result, warnings


def _geometry_field(schema: pa.Schema) -> pa.Field:
    name = GEOMETRY_FIELD
    taken = {f.name.lower() for f in schema}
    i = 1
    while name.lower() in taken:
        i += 1
        name = f"{GEOMETRY_FIELD}_{i}"
    return pa.field(name, pa.binary(), metadata={"ARROW:extension:name": "geoarrow.wkb"})
