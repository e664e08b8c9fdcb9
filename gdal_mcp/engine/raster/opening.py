"""Opening rasters: the one place engine code opens a dataset for reading."""

from __future__ import annotations

import contextlib
import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import rasterio
from rasterio.errors import RasterioIOError

from gdal_mcp.engine import guard, tiles
from gdal_mcp.engine.failures import remote_missing
from gdal_mcp.engine.raster.headers import check_header
from gdal_mcp.errors import GdalMcpError

#: datasets a Keeper holds open while no tile uses them (each holds file descriptors and its blocks in GDAL's cache)
MAX_KEPT = 16


class Keeper:
    """Rasters kept open for the tiles of a tiles.Session (the tiles one thread runs one after another): inside a
    tile, `open_raster(path)` without other arguments reuses the dataset an earlier tile opened, so consecutive
    tiles neither open the source again nor decode again the blocks they share (still in GDAL's block cache).
    Measured: 29 strips of 3 x 18300^2 uint16 warped to EPSG:4326 one after another in one process, 10.1 s opening
    the source for each, 7.3 s kept open. At most MAX_KEPT datasets no tile uses stay open; `close()` closes all.

    Only for tiles, which read their sources and never change them while the job runs: a file written between
    two tiles would not be seen by the second."""

    def __init__(self) -> None:
        self._open: OrderedDict[str, list[Any]] = OrderedDict()  # path -> [dataset, users, its ExitStack]

    @contextlib.contextmanager
    def use(self, path: str) -> Iterator[rasterio.io.DatasetReader]:
        entry = self._open.get(path)
        if entry is None:
            stack = contextlib.ExitStack()
            ds = stack.enter_context(_opened(path))  # an error opening: nothing kept
            entry = self._open[path] = [ds, 0, stack]
        self._open.move_to_end(path)
        entry[1] += 1
        try:
            yield entry[0]
        finally:
            entry[1] -= 1
            self._evict()

    def _evict(self) -> None:
        unused = [p for p, entry in self._open.items() if entry[1] == 0]
        for path in unused[: max(0, len(unused) - MAX_KEPT)]:  # the least recently used first
            self._open.pop(path)[2].close()

    def close(self) -> None:
        entries, self._open = list(self._open.values()), OrderedDict()
        tiles.close_all(entry[2] for entry in reversed(entries))


@contextlib.contextmanager
def open_raster(path: str, **kwargs: Any) -> Iterator[rasterio.io.DatasetReader]:
    """Open a raster, mapping GDAL's refusal to a clear error and checking the files it reaches (inside a tile,
    a plain `open_raster(path)` may give the dataset an earlier tile of its tiles.Session opened: Keeper)."""
    session = tiles.Session.current() if not kwargs else None
    if session is not None:
        with session.resource("rasters", Keeper).use(path) as ds:
            yield ds
        return
    with _opened(path, **kwargs) as ds:
        yield ds


def open_own(path: str) -> contextlib.AbstractContextManager[rasterio.io.DatasetReader]:
    """`open_raster`'s checks on a dataset of the caller's own, never one a tiles.Session shares (for what keeps
    the dataset open beyond a tile: warp.WarpedSources)."""
    return _opened(path)


@contextlib.contextmanager
def _opened(path: str, **kwargs: Any) -> Iterator[rasterio.io.DatasetReader]:
    check_header(path)
    try:
        ds = rasterio.open(path, **kwargs)
    except RasterioIOError as e:
        text = str(e)
        if (missing := remote_missing(text)) is not None:
            raise missing from None
        if path.upper().startswith("HDF4") or path.lower().endswith((".hdf", ".hdf4", ".he4")):
            raise GdalMcpError("unsupported", f"this GDAL build has no HDF4 driver; cannot open {path}") from None
        if "not recognized as" in text or "not recognised as" in text:
            raise GdalMcpError(
                "unsupported",
                f"{path} is not a raster GDAL can read (for vector data use vector_info)",
            ) from None
        raise GdalMcpError("gdal-error", f"GDAL cannot open {path}: {text}") from None
    try:
        guard.check_files(ds.files)
        gt = ds.transform.to_gdal()
        if not all(math.isfinite(v) for v in (*gt, *ds.bounds)):
            # NaN or overflowing coordinates cannot be placed, compared or written as JSON numbers.
            raise GdalMcpError(
                "gdal-error",
                f"{path}: the geotransform {list(gt)} does not give finite coordinates; the file's georeferencing is corrupt",
            )
        yield ds
    finally:
        ds.close()
