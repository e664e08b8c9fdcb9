"""A fixed sample of corrupt inputs through the real server: it keeps serving, and every failure is a stable
code other than internal-error, with a message that names the file. The full run is `python -m bench.fuzz`."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

from gdal_mcp.errors import ERROR_CODES
from tests.fuzz.drive import FuzzServer, run_case
from tests.fuzz.mutate import DATA, KINDS, _tiff, make_case, netcdf_classic

SEED = 7
CASES = range(16)  # two rounds of the eight kinds (the full run, bench/fuzz.py, covers thousands)


def _digest(seed: int, indices: range) -> str:
    h = hashlib.sha256()
    for i in indices:
        case = make_case(seed, i)
        for name, raw in sorted(case.files.items()):
            h.update(name.encode() + raw)
    return h.hexdigest()


def test_cases_are_the_same_bytes_in_every_process() -> None:
    code = f"from tests.fuzz.test_fuzz_sample import _digest; print(_digest({SEED}, range(16)))"
    root = Path(__file__).resolve().parent.parent.parent
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("0", "4242")
    }
    assert outs == {_digest(SEED, range(16))}
    assert _digest(SEED, range(16)) != _digest(SEED + 1, range(16))


def test_the_mutators_see_the_structure_gdal_sees(tmp_path: Path) -> None:
    import rasterio

    # TIFF IFD parsing against rasterio's view of the same file.
    raw = (DATA / "raster" / "RGB.byte.tif").read_bytes()
    _, _, entries = _tiff(raw)
    tags = {e.tag: e for e in entries}
    with rasterio.open(DATA / "raster" / "RGB.byte.tif") as ds:
        assert (tags[256].value, tags[257].value) == (ds.width, ds.height)
        assert tags[277].value == ds.count
    # The hand-written netCDF classic grid, read by GDAL's netCDF driver.
    for version in (1, 2):
        path = tmp_path / f"grid{version}.nc"
        path.write_bytes(netcdf_classic(version)[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = rasterio.open(f'NETCDF:"{path}":elev')
        with ds:
            assert (ds.width, ds.height, ds.count, ds.nodata) == (8, 6, 1, -9999)
            assert [round(v, 6) for v in ds.bounds] == [-120.5, 40.0, -116.5, 43.0]
            assert ds.crs is not None and ds.crs.is_geographic
            assert int((ds.read(1) == -9999).sum()) == 2


@pytest.mark.slow
async def test_a_fixed_sample_of_corrupt_inputs(tmp_path: Path) -> None:
    outcomes = []
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with open(tmp_path / "server.log", "w") as errlog:
        async with FuzzServer(workspace, timeout=20, margin=20, errlog=errlog) as server:
            for i in CASES:
                outcomes += await run_case(server, make_case(SEED, i))
            assert server.alive()
    assert (server.deaths, server.restarts) == (0, 0)
    assert {o.kind for o in outcomes} == set(KINDS)
    problems = [
        f"case {o.index} {o.kind} {o.tool}: {o.problems} {o.code}: {o.message[:200]} ({o.mutations})"
        for o in outcomes
        if o.problems
    ]
    assert not problems, "\n".join(problems)
    codes = Counter(o.code for o in outcomes)
    assert set(codes) <= {"ok", *ERROR_CODES} - {"internal-error"}, codes
    # The sample exercises both sides: corrupt files that still read, and refusals.
    assert codes["ok"] and codes["gdal-error"], codes
