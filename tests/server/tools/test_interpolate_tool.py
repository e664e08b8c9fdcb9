"""vector_interpolate through an MCP client: the shipped points (z = id) against Debian's gdal_grid (GDAL 3.6) on the
same file and grid (measured bit-identical: tolerance 0), and the refusals with their stable codes, nothing written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client

from tests.helpers import call

OUT = "out/interpolate"
BBOX = [244900.0, 999300.0, 246300.0, 1000400.0]


async def test_points_equal_gdal_grid(client: Client, ws: Path, tmp_path: Path) -> None:
    err, res = await call(
        client, "vector_interpolate", input="vector/points.shp", output=f"{OUT}/idw.tif", z_field="id", size=[28, 22], bbox=BBOX
    )
    assert not err, res
    assert res["output"] == f"{OUT}/idw.tif" and res["summary"]["dtype"] == "float32" and res["summary"]["nodata"] == "nan"
    if shutil.which("gdal_grid") is None:
        pytest.skip("gdal_grid not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    ref = tmp_path / "ref.tif"
    subprocess.run(
        ["gdal_grid", "-q", "-a", "invdist:power=2:smoothing=0", "-zfield", "id", "-txe", str(BBOX[0]), str(BBOX[2]),
         "-tye", str(BBOX[1]), str(BBOX[3]), "-outsize", "28", "22", "-ot", "Float32", str(ws / "vector/points.shp"), str(ref)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    with rasterio.open(ws / OUT / "idw.tif") as ours, rasterio.open(ref) as theirs:
        np.testing.assert_array_equal(ours.read(1), theirs.read(1))
        assert ours.transform.almost_equals(theirs.transform)
    # the same name again: refused without overwrite, before any work
    err, res = await call(
        client, "vector_interpolate", input="vector/points.shp", output=f"{OUT}/idw.tif", z_field="id", method="nearest",
        size=[28, 22], bbox=BBOX,
    )  # fmt: skip
    assert err and res["error"]["code"] == "already-exists"


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        ({"z_field": "id", "resolution": 10.0, "size": [10, 10]}, "invalid-argument", "exactly one of resolution"),
        ({"z_field": "id", "resolution": 10.0, "where": "id > 99"}, "invalid-argument", "matched no features"),
        ({"z_field": "id", "resolution": 10.0, "method": "kriging"}, "invalid-argument", "method"),
    ],
)
async def test_refusals_write_nothing(client: Client, ws: Path, args: dict, code: str, text: str) -> None:
    err, res = await call(client, "vector_interpolate", input="vector/points.shp", output=f"{OUT}/bad.tif", **args)
    assert err and res["error"]["code"] == code and text in res["error"]["message"], res
    assert not (ws / OUT / "bad.tif").exists()
    assert not [p for p in (ws / "out").rglob("*") if ".interpolate-" in str(p) or "bad.tif" in p.name]  # no temporaries
