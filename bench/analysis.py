"""Vector analysis through the MCP server, beside geopandas and `ogr2ogr -dialect SQLite`, on the same files.

`python -m bench.analysis` generates, in a temporary directory (never in the repository):
- `points.gpkg`: `--points` random points (default 1 M) in EPSG:3035 (LAEA Europe), fields uid, value;
- `zones.gpkg`: `--zones` Voronoi polygons (default 3 000) tiling the same square, field uid;
- `parcels.gpkg` / `areas.gpkg`: `--parcels` (default 100 000) and `--areas` (default 5 000) Voronoi polygons
  tiling a square, field uid (+ value on parcels): the two layers of the overlay.
Then, each side in turn (ABBA order over `--repeat` runs), with the result written to a GeoPackage:
- counts: points per zone (point-in-polygon, intersects): server `vector_join(input=zones, join=points,
  aggregate={"*": ["count"]})`; geopandas `sjoin` + `groupby().size()`; ogr2ogr SQLite dialect with a
  LEFT JOIN through the SpatialIndex virtual table and GROUP BY;
- overlay: intersection of parcels and areas: server `vector_overlay(how="intersection")`; geopandas
  `overlay(how="intersection")`; ogr2ogr SQLite dialect `ST_Intersection` through the SpatialIndex, polygons
  kept with `CollectionExtract(…, 3)`.
Outside the timing, the three results are compared: counts per zone must be identical, and the area of
every (parcel, area) piece must agree within 1e-6 relative. Memory: the server tree's summed PSS (and RSS)
sampled every 50 ms (bench/measure.py); geopandas and ogr2ogr run as subprocesses, sampled the same way.
The geopandas time is measured inside its process, from the first read to the written file (the imports,
~1 s, are not counted); the server time around call_tool (MCP round trip included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyogrio
import shapely
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from pyogrio.raw import write_arrow

from bench.measure import MB, PeakRss, process_tree, tree_pss

SERVER = [sys.executable, "-m", "gdal_mcp"]
PSS_TARGET_MB = 600
SIDE = 1_000_000.0  # metres: the generated square (EPSG:3035, around Germany)
ORIGIN = (4_000_000.0, 2_800_000.0)
CRS = "EPSG:3035"
GEOMETRY = pa.field("geometry", pa.binary(), metadata={b"ARROW:extension:name": b"geoarrow.wkb"})

GEOPANDAS = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import geopandas as gpd, pandas as pd
case, work, out = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
if case == "counts":
    zones = gpd.read_file(f"{work}/zones.gpkg", use_arrow=True)
    points = gpd.read_file(f"{work}/points.gpkg", use_arrow=True, columns=[])
    joined = gpd.sjoin(points, zones, predicate="intersects")
    counts = joined.groupby("index_right").size()
    zones["count"] = counts.reindex(zones.index, fill_value=0).astype("int64")
    zones.to_file(out, driver="GPKG", engine="pyogrio", use_arrow=True)
else:
    a = gpd.read_file(f"{work}/parcels.gpkg", use_arrow=True)
    b = gpd.read_file(f"{work}/areas.gpkg", use_arrow=True)
    result = gpd.overlay(a, b, how="intersection", keep_geom_type=True)
    result.to_file(out, driver="GPKG", engine="pyogrio", use_arrow=True)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

COUNTS_SQL = (
    "SELECT z.uid AS uid, count(p.ROWID) AS count, z.geom AS geometry FROM zones z LEFT JOIN points p "
    "ON p.ROWID IN (SELECT ROWID FROM SpatialIndex WHERE f_table_name = 'points' AND search_frame = z.geom) "
    "AND ST_Intersects(z.geom, p.geom) GROUP BY z.uid"
)
OVERLAY_SQL = (
    "SELECT * FROM (SELECT a.uid AS uid_1, a.value AS value, b.uid AS uid_2, "
    "CastToMultiPolygon(CollectionExtract(ST_Intersection(a.geom, b.geom), 3)) AS geometry "
    "FROM areas b JOIN parcels a ON a.ROWID IN (SELECT ROWID FROM SpatialIndex WHERE "
    "f_table_name = 'parcels' AND search_frame = b.geom) AND ST_Intersects(a.geom, b.geom)) "
    "WHERE geometry IS NOT NULL"
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----- inputs -----------------------------------------------------------------------------------------------------


def _write(path: Path, layer: str, columns: dict[str, np.ndarray], geoms: np.ndarray, geometry_type: str) -> None:
    schema = pa.schema([*(pa.field(k, pa.from_numpy_dtype(v.dtype)) for k, v in columns.items()), GEOMETRY])
    path.unlink(missing_ok=True)

    def batches() -> Any:
        for start in range(0, len(geoms), 50_000):
            sl = slice(start, start + 50_000)
            yield pa.RecordBatch.from_arrays(
                [*(pa.array(v[sl]) for v in columns.values()), pa.array(shapely.to_wkb(geoms[sl]))], schema=schema
            )

    write_arrow(
        pa.RecordBatchReader.from_batches(schema, batches()),
        str(path),
        layer=layer,
        driver="GPKG",
        geometry_name="geometry",
        geometry_type=geometry_type,
        crs=CRS,
        dataset_options={"VERSION": "1.2"},
    )


def _voronoi(n: int, rng: np.random.Generator) -> np.ndarray:
    """n polygons tiling the square: Voronoi cells of random seeds, clipped to it."""
    x0, y0 = ORIGIN
    seeds = shapely.points(rng.uniform(x0, x0 + SIDE, n), rng.uniform(y0, y0 + SIDE, n))
    square = shapely.box(x0, y0, x0 + SIDE, y0 + SIDE)
    cells = shapely.get_parts(shapely.voronoi_polygons(shapely.multipoints(seeds), extend_to=square))
    cells = shapely.intersection(cells, square)
    return cells[~shapely.is_empty(cells)]


def generate(work: Path, points: int, zones: int, parcels: int, areas: int) -> dict[str, int]:
    rng = np.random.default_rng(10)
    x0, y0 = ORIGIN
    t0 = time.perf_counter()
    n = {}
    cells = _voronoi(zones, rng)
    _write(work / "zones.gpkg", "zones", {"uid": np.arange(len(cells), dtype=np.int64)}, cells, "Polygon")
    n["zones"] = len(cells)
    pts = shapely.points(rng.uniform(x0, x0 + SIDE, points), rng.uniform(y0, y0 + SIDE, points))
    _write(
        work / "points.gpkg",
        "points",
        {"uid": np.arange(points, dtype=np.int64), "value": rng.normal(100, 25, points)},
        pts,
        "Point",
    )
    n["points"] = points
    del pts
    for name, count in (("parcels", parcels), ("areas", areas)):
        cells = _voronoi(count, rng)
        cols = {"uid": np.arange(len(cells), dtype=np.int64)}
        if name == "parcels":
            cols["value"] = rng.normal(100, 25, len(cells))
        _write(work / f"{name}.gpkg", name, cols, cells, "Polygon")
        n[name] = len(cells)
    # One OGR VRT naming both layers of each case, so that one SQLite-dialect statement sees them.
    for vrt, layers in (("counts.vrt", ("zones", "points")), ("overlay.vrt", ("parcels", "areas"))):
        body = "".join(
            f'<OGRVRTLayer name="{lyr}"><SrcDataSource relativeToVRT="1">{lyr}.gpkg</SrcDataSource>'
            f"<SrcLayer>{lyr}</SrcLayer></OGRVRTLayer>"
            for lyr in layers
        )
        (work / vrt).write_text(f"<OGRVRTDataSource>{body}</OGRVRTDataSource>")
    log(f"generated inputs in {time.perf_counter() - t0:.1f} s: {n}")
    return n


# ----- sides ------------------------------------------------------------------------------------------------------


@dataclass
class Side:
    seconds: list[float] = field(default_factory=list)
    peak_rss: list[int] = field(default_factory=list)
    peak_pss: list[int] = field(default_factory=list)
    error: str | None = None

    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None


CASES = {
    "counts": {"tool": "vector_join", "args": {"input": "zones.gpkg", "join": "points.gpkg", "aggregate": {"*": ["count"]}}},
    "overlay": {"tool": "vector_overlay", "args": {"input": "parcels.gpkg", "overlay": "areas.gpkg", "how": "intersection"}},
}


async def server_run(session: ClientSession, pid: int, case: str, out: str, side: Side) -> None:
    args = {**CASES[case]["args"], "output": out, "overwrite": True}
    os.sync()
    with PeakRss(pid) as rss:
        t0 = time.perf_counter()
        r = await session.call_tool(CASES[case]["tool"], args, read_timeout_seconds=3600)
        seconds = time.perf_counter() - t0
    if r.is_error:
        side.error = f"{r.structured_content or r.content}"
        return
    side.seconds.append(seconds)
    side.peak_rss.append(rss.peak)
    side.peak_pss.append(rss.peak_pss)


def geopandas_run(work: Path, case: str, out: Path, side: Side) -> None:
    out.unlink(missing_ok=True)
    os.sync()
    proc = subprocess.Popen(
        [sys.executable, "-c", GEOPANDAS, case, str(work), str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with PeakRss(proc.pid) as rss:
        stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        side.error = stderr.decode()[-1500:]
        return
    side.seconds.append(json.loads(stdout.decode().strip().splitlines()[-1])["seconds"])
    side.peak_rss.append(rss.peak)
    side.peak_pss.append(rss.peak_pss)


def cli_run(work: Path, case: str, out: Path, side: Side, timeout: float) -> None:
    out.unlink(missing_ok=True)
    os.sync()
    src, sql, name = ("counts.vrt", COUNTS_SQL, "counts") if case == "counts" else ("overlay.vrt", OVERLAY_SQL, "overlay")
    cmd = [
        "ogr2ogr",
        "-f",
        "GPKG",
        str(out),
        src,
        "-dialect",
        "SQLite",
        "-sql",
        sql,
        "-nln",
        name,
        "-nlt",
        "MULTIPOLYGON" if case == "overlay" else "POLYGON",
    ]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        with PeakRss(proc.pid) as rss:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                side.error = f"did not finish in {timeout:.0f} s (stopped; --cli-timeout)"
                return
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            err.seek(0)
            side.error = f"exited {proc.returncode}: {err.read().decode(errors='replace')[-500:]}"
            return
    side.seconds.append(seconds)
    side.peak_rss.append(rss.peak)


# ----- checks -----------------------------------------------------------------------------------------------------


def _read(path: Path, columns: list[str]) -> dict[str, np.ndarray]:
    meta, table = pyogrio.raw.read_arrow(str(path), columns=columns)
    out = {c: table.column(c).to_numpy(zero_copy_only=False) for c in columns}
    gcol = meta["geometry_name"] or "geom"
    out["geometry"] = shapely.from_wkb(table.column(gcol).to_numpy(zero_copy_only=False))
    return out


def check_counts(paths: dict[str, Path]) -> tuple[str, bool]:
    got = {}
    for who, p in paths.items():
        d = _read(p, ["uid", "count"])
        order = np.argsort(d["uid"])
        got[who] = (d["uid"][order], d["count"][order].astype(np.int64))
    ref_uid, ref = got["geopandas"]
    lines, ok = [], True
    for who, (uid, cnt) in got.items():
        same = np.array_equal(uid, ref_uid) and np.array_equal(cnt, ref)
        ok &= same
        lines.append(
            f"{who}: {len(uid)} zones, {int(cnt.sum()):,} points counted, "
            f"{'identical to geopandas' if same else 'DIFFERENT from geopandas'}"
        )
    return "; ".join(lines), ok


def check_overlay(paths: dict[str, Path]) -> tuple[str, bool]:
    got = {}
    for who, p in paths.items():
        d = _read(p, ["uid_1", "uid_2"])
        key = d["uid_1"].astype(np.int64) * 1_000_000 + d["uid_2"].astype(np.int64)
        area = shapely.area(d["geometry"])
        order = np.argsort(key)
        got[who] = (key[order], area[order])
    ref_key, ref_area = got["geopandas"]
    lines, ok = [], True
    for who, (key, area) in got.items():
        if not np.array_equal(key, ref_key):
            ok = False
            lines.append(f"{who}: {len(key)} pieces vs geopandas {len(ref_key)}: the (uid_1, uid_2) pairs DIFFER")
            continue
        rel = float(np.max(np.abs(area - ref_area) / np.maximum(ref_area, 1e-300))) if len(area) else 0.0
        total = abs(area.sum() - ref_area.sum()) / ref_area.sum()
        ok &= rel <= 1e-6
        lines.append(f"{who}: {len(key):,} pieces, same pairs; largest relative area difference {rel:.2g}, total {total:.2g}")
    return "; ".join(lines), ok


# ----- run --------------------------------------------------------------------------------------------------------


def _server_pid() -> int:
    for pid in process_tree(os.getpid())[1:]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gdal_mcp" in cmdline and b"--workspace" in cmdline:
            return pid
    raise RuntimeError("could not find the gdal_mcp server process")


async def run(work: Path, repeat: int, cases: list[str], cli_timeout: float) -> tuple[dict[str, dict[str, Side]], list[str]]:
    results = {c: {"server": Side(), "geopandas": Side(), "ogr2ogr": Side()} for c in cases}
    notes: list[str] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    params = StdioServerParameters(
        command=SERVER[0], args=[*SERVER[1:], "--workspace", str(work), "--timeout", "3600", "--workers", "2"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        pid = _server_pid()
        await session.call_tool("vector_info", {"path": "zones.gpkg"})
        # Both job workers import the analysis engines (pyproj, shapely) before anything is timed, as the
        # geopandas side's imports are not timed either.
        await asyncio.gather(
            *(
                session.call_tool(tool, {**args, "output": f"warm_{n}.gpkg", "overwrite": True})
                for n, (tool, args) in enumerate(
                    [
                        ("vector_join", {"input": "zones.gpkg", "join": "zones.gpkg", "aggregate": {"*": ["count"]}}),
                        ("vector_overlay", {"input": "zones.gpkg", "overlay": "zones.gpkg"}),
                    ]
                )
            )
        )
        await asyncio.sleep(2.0)
        notes.append(f"server tree at rest after warm-up: {tree_pss(pid) / MB:.0f} MB summed PSS")
        for case in cases:
            for i in range(repeat):
                order = ["server", "geopandas", "ogr2ogr"]
                for who in order if i % 2 == 0 else order[::-1]:
                    side = results[case][who]
                    if side.error:
                        continue
                    log(f"{case} {who} run {i + 1}/{repeat}")
                    out = work / f"{who}_{case}.gpkg"
                    if who == "server":
                        await server_run(session, pid, case, out.name, side)
                    elif who == "geopandas":
                        await asyncio.to_thread(geopandas_run, work, case, out, side)
                    else:
                        await asyncio.to_thread(cli_run, work, case, out, side, cli_timeout)
                    log(f"  {side.seconds[-1]:.2f} s" if side.seconds and not side.error else f"  FAILED {side.error}")
        notes.append(f"server tree at rest after the last case: {tree_pss(pid) / MB:.0f} MB summed PSS")
    return results, notes


def report(
    results: dict[str, dict[str, Side]],
    work: Path,
    counts: dict[str, int],
    notes: list[str],
    load: tuple[float, float],
    repeat: int,
) -> tuple[str, bool]:
    lines = ["| case | side | time (s, median) | peak memory (MB) | result |", "|---|---|---|---|---|"]
    ok_all = True
    checks = {}
    for case, sides in results.items():
        paths = {w: work / f"{w}_{case}.gpkg" for w, s in sides.items() if not s.error and s.seconds}
        if "geopandas" in paths:
            checks[case] = (check_counts if case == "counts" else check_overlay)(paths)
        else:
            checks[case] = ("geopandas failed: nothing to compare with", False)
        gp = sides["geopandas"].median()
        for who, s in sides.items():
            med = s.median()
            if who == "server":
                pss = max(s.peak_pss) / MB if s.peak_pss else float("nan")
                mem = f"{pss:.0f} PSS (tree), {max(s.peak_rss) / MB:.0f} RSS" if s.peak_rss else "-"
            elif who == "geopandas":
                mem = f"{max(s.peak_pss) / MB:.0f} PSS, {max(s.peak_rss) / MB:.0f} RSS" if s.peak_rss else "-"
            else:
                mem = f"{max(s.peak_rss) / MB:.0f} RSS" if s.peak_rss else "-"
            verdict = ""
            if who == "server":
                time_ok = med is not None and gp is not None and med <= gp
                pss_ok = bool(s.peak_pss) and max(s.peak_pss) / MB <= PSS_TARGET_MB
                ok_all &= time_ok and pss_ok and checks[case][1]
                verdict = (
                    f"time {'≤' if time_ok else '>'} geopandas ({med / gp:.2f}×), PSS {'≤' if pss_ok else '>'} {PSS_TARGET_MB} MB"
                    if med and gp
                    else ""
                )
            lines.append(
                f"| {case} | {who} | {'FAILED' if s.error else (f'{med:.2f}' if med else '-')} | {mem} | "
                f"{s.error[:200] if s.error else verdict} |"
            )
    lines.append("")
    for case, (text, ok) in checks.items():
        lines.append(f"- {case} check ({'OK' if ok else 'FAIL'}): {text}")
        ok_all &= ok
    lines += [f"- {n}" for n in notes]
    lines.append(
        f"- inputs: {counts}; repetitions per side: {repeat}; load average before/after: "
        f"{load[0]:.2f} / {load[1]:.2f} (1 min); {os.cpu_count()} CPUs"
    )
    lines.append(f"- verdict: {'all targets met' if ok_all else 'a target was missed'}")
    return "\n".join(lines), ok_all


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.analysis", description=__doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=1_000_000)
    p.add_argument("--zones", type=int, default=3_000)
    p.add_argument("--parcels", type=int, default=100_000)
    p.add_argument("--areas", type=int, default=5_000)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--cases", default="counts,overlay")
    p.add_argument("--cli-timeout", type=float, default=600.0, help="stop an ogr2ogr run after this many seconds")
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None)
    a = p.parse_args(argv)
    own = a.workdir is None
    work = Path(tempfile.mkdtemp(prefix="gdal_mcp_analysis_")) if own else a.workdir
    work.mkdir(parents=True, exist_ok=True)
    try:
        counts = generate(work, a.points, a.zones, a.parcels, a.areas)
        before = os.getloadavg()[0]
        results, notes = asyncio.run(run(work, a.repeat, a.cases.split(","), a.cli_timeout))
        text, ok = report(results, work, counts, notes, (before, os.getloadavg()[0]), a.repeat)
    finally:
        if own:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    print(text)
    if a.markdown:
        a.markdown.write_text(text + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
