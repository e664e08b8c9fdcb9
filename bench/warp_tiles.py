"""Tiled reproject (the engine: output tiles warped one after another, written by a second thread) against the
former single dataset-to-dataset warp and gdalwarp -multi, on the random 3-band uint16 input of the large cases.

    .venv/bin/python -m bench.warp_tiles --side 9000 --repeat 2
    .venv/bin/python -m bench.warp_tiles --side 9000 --tile-bytes 8M,32M,128M --sides tiled

Prints wall and CPU seconds (the process and its children: a loaded machine stretches wall time, CPU time much
less) per run, the load average, and for the tiled runs how the time splits between the tile function (the part a
cluster runs on its workers) and the rest (grid, assembly: waiting for the writes, summary). Not a test.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import rasterio
from rasterio.warp import calculate_default_transform
from rasterio.warp import reproject as rasterio_reproject

from bench.generate import make_warp_source
from gdal_mcp.config import parse_size
from gdal_mcp.engine import tiles
from gdal_mcp.engine.raster.warp import reproject

DST_CRS = "EPSG:4326"


class TimingMapper:
    """The local mapper (one tile after another), timing the tile function."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0

    def __call__(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        for i, item in enumerate(items):
            t0 = time.perf_counter()
            result = fn(item)
            self.seconds += time.perf_counter() - t0
            self.count += 1
            yield i, result


def whole_warp(src: Path, dst: Path, threads: int) -> None:
    """The former engine path: one dataset-to-dataset warp (GDAL's ChunkAndWarpMulti), 64 MB buffer."""
    with rasterio.open(src) as ds:
        transform, width, height = calculate_default_transform(ds.crs, DST_CRS, ds.width, ds.height, *ds.bounds)
        profile = {
            "driver": "GTiff",
            "width": width,
            "height": height,
            "count": ds.count,
            "dtype": ds.dtypes[0],
            "crs": DST_CRS,
            "transform": transform,
            "TILED": "YES",
            "BIGTIFF": "IF_SAFER",
            "NUM_THREADS": str(threads),
        }
        indexes = list(range(1, ds.count + 1))
        with rasterio.open(dst, "w", **profile) as out, rasterio.Env(GDAL_NUM_THREADS=str(threads)):
            rasterio_reproject(
                rasterio.band(ds, indexes),
                rasterio.band(out, indexes),
                resampling=0,
                num_threads=threads,
                warp_mem_limit=64,
                init_dest_nodata=True,
            )


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--side", type=int, default=9000, help="side of the random 3-band uint16 input (default 9000)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--threads", type=int, default=2, help="the job's threads (the server's --workers; default 2)")
    p.add_argument(
        "--tile-bytes", default="", help="comma-separated tile sizes to try (e.g. 8M,32M); default the engine's tiles.TILE_BYTES"
    )
    p.add_argument("--sides", default="tiled,whole,gdalwarp", help="which of tiled, whole, gdalwarp to run")
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the input is generated (kept there and "
        "reused when it has --side); default a temporary directory removed at the end",
    )
    args = p.parse_args()
    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="warp_tiles_")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        src = workdir / f"random_{args.side}.tif"
        if not src.exists():
            print(f"generating {src} ({args.side}² × 3 uint16)", flush=True)
            make_warp_source(src, args.side, "random")
        sizes = [parse_size(s) for s in args.tile_bytes.split(",") if s] or [tiles.TILE_BYTES]
        runs = []
        for side in args.sides.split(","):
            runs += [(side, size) for size in sizes] if side == "tiled" else [(side, None)]
        plan = tiles.plan
        for _ in range(args.repeat):
            for side, size in runs:
                dst = workdir / "out.tif"
                if dst.exists():
                    dst.unlink()
                os.sync()
                t0, c0 = time.perf_counter(), cpu_seconds()
                detail = ""
                if side == "tiled":
                    mapper = TimingMapper()
                    tiles.plan = functools.partial(plan, tile_bytes=size)  # type: ignore[assignment]
                    try:
                        with tiles.using(mapper):
                            reproject(
                                str(src),
                                str(dst),
                                dst_crs=DST_CRS,
                                options={"TILED": "YES", "COMPRESS": "NONE"},
                                threads=args.threads,
                            )
                    finally:
                        tiles.plan = plan  # type: ignore[assignment]
                    wall = time.perf_counter() - t0
                    detail = (
                        f"  {mapper.count} tiles of {size / 2**20:.0f} MB: tile function {mapper.seconds:.2f} s, "
                        f"the rest {wall - mapper.seconds:.2f} s"
                    )
                elif side == "whole":
                    whole_warp(src, dst, args.threads)
                elif side == "gdalwarp":
                    if shutil.which("gdalwarp") is None:
                        print("gdalwarp: not installed (apt-get install gdal-bin)")
                        continue
                    subprocess.run(
                        [
                            "gdalwarp",
                            "-q",
                            "-overwrite",
                            "-multi",
                            "-wo",
                            "NUM_THREADS=ALL_CPUS",
                            "-t_srs",
                            DST_CRS,
                            "-r",
                            "near",
                            "-co",
                            "TILED=YES",
                            str(src),
                            str(dst),
                        ],
                        check=True,
                    )
                else:
                    p.error(f"unknown side {side!r}")
                wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
                print(f"{side:8s} {wall:6.2f} s wall {cpu:6.2f} s cpu  load {os.getloadavg()[0]:.2f}{detail}", flush=True)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            (workdir / "out.tif").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
