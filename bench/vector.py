"""Synthetic vector inputs (GeoPackages of points and polygons, written batch by batch) and checks of the outputs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyogrio
import shapely
from pyogrio.raw import read_arrow, write_arrow

POINTS = 1_000_000
POINTS_SMALL = 200_000  # the "memory flat" baseline: the point convert is also run on this many points
POLYGONS = 200_000
VERTICES = 10  # per polygon (11 coordinates with the closing one)
BATCH = 50_000
LON, LAT = (-10.0, 30.0), (35.0, 60.0)  # Europe: valid in EPSG:4326 and EPSG:3857
CLASSES = np.array(["residential", "commercial", "industrial", "park", "water", "forest", "farmland", "other"])
SAMPLE_UIDS = 2000  # features uid < this are compared between the server's and the CLI's outputs
GEOMETRY = pa.field("geometry", pa.binary(), metadata={b"ARROW:extension:name": b"geoarrow.wkb"})
SCHEMA = pa.schema(
    [("uid", pa.int64()), ("class", pa.int32()), ("value", pa.float64()), ("name", pa.string()), ("kind", pa.string()), GEOMETRY]
)


@dataclass(frozen=True)
class VectorInput:
    """A generated GeoPackage: one layer named after the geometry, EPSG:4326."""

    path: Path
    geometry_type: str  # "Point" or "Polygon"
    count: int

    def describe(self) -> str:
        what = "points" if self.geometry_type == "Point" else f"{VERTICES}-vertex polygons"
        return (
            f"`{self.path.name}` {self.count:,} {what}, EPSG:4326, fields uid int64, class int32, value float64, "
            f"name and kind strings; {self.path.stat().st_size / (1 << 20):.0f} MB on disk"
        )


def _attributes(uid: np.ndarray, rng: np.random.Generator) -> list[pa.Array]:
    cls = rng.integers(0, len(CLASSES), size=len(uid), dtype=np.int32)
    return [
        pa.array(uid),
        pa.array(cls),
        pa.array(rng.normal(100.0, 25.0, size=len(uid))),
        pa.array([f"feature {u}" for u in uid.tolist()]),
        pa.array(CLASSES[cls]),
    ]


def _batches(geometry_type: str, count: int, seed: int) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    angles = np.linspace(0.0, 2 * math.pi, VERTICES + 1)[None, :]  # closed ring, counter-clockwise
    for start in range(0, count, BATCH):
        n = min(BATCH, count - start)
        x, y = rng.uniform(*LON, size=n), rng.uniform(*LAT, size=n)
        if geometry_type == "Point":
            geoms = shapely.points(x, y)
        else:
            radius = rng.uniform(0.001, 0.01, size=n)[:, None]  # degrees: ~100 m to ~1 km
            turn = rng.uniform(0.0, 2 * math.pi, size=n)[:, None]
            ring = np.stack([x[:, None] + radius * np.cos(angles + turn), y[:, None] + radius * np.sin(angles + turn)], axis=-1)
            ring[:, -1] = ring[:, 0]  # exactly closed
            geoms = shapely.polygons(ring)
        uid = np.arange(start, start + n, dtype=np.int64)
        yield pa.RecordBatch.from_arrays([*_attributes(uid, rng), pa.array(shapely.to_wkb(geoms))], schema=SCHEMA)


def make_vector(path: Path, geometry_type: str, count: int, seed: int = 0) -> VectorInput:
    """A GeoPackage with one layer of `count` features, streamed in batches of BATCH (never whole in memory)."""
    path.unlink(missing_ok=True)
    reader = pa.RecordBatchReader.from_batches(SCHEMA, _batches(geometry_type, count, seed))
    # GeoPackage 1.2: GDAL 3.6 (Debian 12's ogr2ogr) warns that the 1.4 files of recent GDAL "may only be partially
    # supported".
    write_arrow(
        reader,
        str(path),
        layer=path.stem.split("_")[0],
        driver="GPKG",
        geometry_name="geometry",
        geometry_type=geometry_type,
        crs="EPSG:4326",
        dataset_options={"VERSION": "1.2"},
    )
    return VectorInput(path, geometry_type, count)


@dataclass
class Output:
    """What was checked in one output file (outside the timing)."""

    features: int
    crs: str | None
    uids: np.ndarray | None = None  # the sampled features, sorted by uid
    coords: np.ndarray | None = None  # their coordinates (x, y), concatenated in that order


def inspect_output(path: Path, sample: bool) -> Output:
    """Feature count and CRS of the written layer; with `sample`, the coordinates of the features uid < SAMPLE_UIDS."""
    info = pyogrio.read_info(str(path), force_feature_count=True)
    out = Output(int(info["features"]), info["crs"])
    if sample:
        meta, table = read_arrow(str(path), where=f"uid < {SAMPLE_UIDS}", columns=["uid"])
        column = meta["geometry_name"] or "wkb_geometry"
        table = table.sort_by("uid")
        out.uids = table.column("uid").to_numpy()
        out.coords = shapely.get_coordinates(shapely.from_wkb(table.column(column).to_numpy(zero_copy_only=False)))
    return out


def compare(server: Output | None, cli: Output | None) -> tuple[str, bool]:
    """Whether the sampled features of the two outputs have the same uids and coordinates (within 1e-6 units)."""
    if server is None or cli is None or server.coords is None or cli.coords is None:
        return "no sample to compare", True
    if server.uids is None or cli.uids is None or not np.array_equal(server.uids, cli.uids):
        return "sampled uids differ", False
    if server.coords.shape != cli.coords.shape:
        return f"sampled coordinates differ in shape ({server.coords.shape} vs {cli.coords.shape})", False
    diff = float(np.max(np.abs(server.coords - cli.coords))) if len(cli.coords) else 0.0
    return (
        f"{len(server.uids)} sampled features (uid < {SAMPLE_UIDS}), {len(cli.coords)} coordinates: max |server - CLI| {diff:.3g}"
    ), diff <= 1e-6
