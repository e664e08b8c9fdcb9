"""cube_aggregate's memory against the number of time steps, beside CDO (`cdo monmean`) on the same netCDF files.

`python -m bench.cube --steps 500 2000` generates, in a temporary directory (never in the repository), one netCDF-4
cube per step count: daily Float32 steps (days since 2001-01-01, standard calendar) of a `--height` x `--width`
grid (default 1000 x 1250, 5 MB a step: 2000 steps = 10 GB), each step the same random plane plus the step number
(written through a VRT, so generating needs no second copy). Then, per cube, the server's `cube_aggregate` (monthly
mean, through the MCP SDK over stdio; the server tree's summed PSS sampled every 50 ms) and `cdo -s monmean`
(if installed; its process sampled the same way). The monthly means are compared outside the timing (max abs
difference). The claim checked: the server's peak PSS stays flat as the steps grow, under PSS_TARGET_MB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
import rasterio.shutil
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.measure import MB, PeakRss, process_tree

PSS_TARGET_MB = 600


def generate(path: Path, steps: int, height: int, width: int) -> None:
    plane = path.with_suffix(".plane.tif")
    rng = np.random.default_rng(1)
    with rasterio.open(
        plane,
        "w",
        driver="GTiff",
        width=width,
        height=height,
        count=1,
        dtype="float32",
        crs="EPSG:4326",
        transform=rasterio.transform.from_origin(0, 60, 0.01, 0.01),
    ) as ds:
        ds.write(rng.normal(280, 5, (height, width)).astype("float32"), 1)
    bands = "".join(
        f'<VRTRasterBand dataType="Float32" band="{b + 1}"><Metadata><MDI key="NETCDF_DIM_time">{b}</MDI></Metadata>'
        f'<ComplexSource><SourceFilename relativeToVRT="0">{plane}</SourceFilename><SourceBand>1</SourceBand>'
        f"<ScaleOffset>{b % 365}</ScaleOffset><ScaleRatio>1</ScaleRatio></ComplexSource></VRTRasterBand>"
        for b in range(steps)
    )
    meta = (
        '<Metadata><MDI key="NETCDF_DIM_EXTRA">{time}</MDI>'
        f'<MDI key="NETCDF_DIM_time_DEF">{{{steps},6}}</MDI>'
        f'<MDI key="NETCDF_DIM_time_VALUES">{{{",".join(str(b) for b in range(steps))}}}</MDI>'
        '<MDI key="time#units">days since 2001-01-01</MDI><MDI key="time#calendar">standard</MDI></Metadata>'
    )
    vrt = path.with_suffix(".vrt")
    with rasterio.open(plane) as ds:
        gt = ", ".join(repr(v) for v in ds.transform.to_gdal())
        srs = ds.crs.to_wkt()
    vrt.write_text(
        f'<VRTDataset rasterXSize="{width}" rasterYSize="{height}"><SRS>{srs}</SRS><GeoTransform>{gt}</GeoTransform>'
        f"{meta}{bands}</VRTDataset>"
    )
    rasterio.shutil.copy(vrt, path, driver="netCDF", FORMAT="NC4")
    vrt.unlink()
    plane.unlink()


async def server_run(workdir: Path, name: str) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gdal_mcp", "--workspace", str(workdir), "--confirm", "never"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        pid = process_tree(os.getpid())[1]
        await session.call_tool("cube_info", {"input": name})
        with PeakRss(pid) as rss:
            t0 = time.perf_counter()
            r = await session.call_tool(
                "cube_aggregate", {"input": name, "output": f"{name}.server.tif", "period": "month"}, read_timeout_seconds=3600
            )
            seconds = time.perf_counter() - t0
        if r.is_error:
            raise SystemExit(f"server failed: {r.structured_content}")
        return seconds, rss.peak_pss


def cdo_run(workdir: Path, name: str) -> tuple[float, int] | None:
    cdo = shutil.which("cdo")
    if cdo is None:
        return None
    out = workdir / f"{name}.cdo.nc"
    t0 = time.perf_counter()
    proc = subprocess.Popen([cdo, "-s", "-f", "nc4", "monmean", str(workdir / name), str(out)])
    with PeakRss(proc.pid) as rss:
        proc.wait()
    return time.perf_counter() - t0, rss.peak_pss


def compare(workdir: Path, name: str) -> float | None:
    cdo = workdir / f"{name}.cdo.nc"
    if not cdo.exists():
        return None
    worst = 0.0
    with rasterio.open(workdir / f"{name}.server.tif") as a, rasterio.open(cdo) as b:
        assert a.count == b.count, (a.count, b.count)
        for band in range(1, a.count + 1):
            x, y = a.read(band).astype("float64"), b.read(band).astype("float64")
            if b.transform.e > 0:  # CDO may write south-up
                y = y[::-1]
            worst = max(worst, float(np.nanmax(np.abs(x - y))))
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, nargs="+", default=[500, 2000])
    p.add_argument("--height", type=int, default=1000)
    p.add_argument("--width", type=int, default=1250)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cube-") as tmp:
        workdir = Path(tmp)
        for steps in args.steps:
            name = f"cube_{steps}.nc"
            t0 = time.perf_counter()
            generate(workdir / name, steps, args.height, args.width)
            size = (workdir / name).stat().st_size
            print(f"generated {name}: {size / MB:.0f} MB in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            server_s, server_pss = asyncio.run(server_run(workdir, name))
            cdo = cdo_run(workdir, name)
            diff = compare(workdir, name)
            rows.append((steps, size, server_s, server_pss, cdo, diff))
            for f in workdir.iterdir():
                f.unlink()
    print("| steps | cube MB | server s | server peak PSS MB | cdo monmean s | cdo peak PSS MB | max abs diff | PSS target |")
    print("|---|---|---|---|---|---|---|---|")
    for steps, size, s, pss, cdo, diff in rows:
        verdict = "PASS" if pss / MB <= PSS_TARGET_MB else "FAIL"
        cdo_s, cdo_pss = (f"{cdo[0]:.1f}", f"{cdo[1] / MB:.0f}") if cdo else ("-", "-")
        print(
            f"| {steps} | {size / MB:.0f} | {s:.1f} | {pss / MB:.0f} | {cdo_s} | {cdo_pss} | "
            f"{'-' if diff is None else f'{diff:.2e}'} | ≤ {PSS_TARGET_MB} MB {verdict} |"
        )


if __name__ == "__main__":
    main()
