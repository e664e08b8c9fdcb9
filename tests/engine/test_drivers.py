"""The driver allow-list (gdal_mcp.engine.drivers) holds in both bundled GDALs, also after rasterio registers
GDAL's drivers again (it does at every top-level Env) and after pyogrio loads; a refused file's driver is named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys
import rasterio
from gdal_mcp.engine import drivers
from gdal_mcp.formats import ALLOWED_DRIVERS
drivers.restrict()
with rasterio.Env() as env:
    raster = sorted(env.drivers())
with rasterio.Env():
    with rasterio.Env() as env:
        again = sorted(env.drivers())
import pyogrio
vector = sorted(pyogrio.list_drivers())
print(json.dumps({"raster": raster, "again": again, "vector": vector, "allowed": sorted(ALLOWED_DRIVERS),
                  "refused": drivers.refused_driver(sys.argv[1]), "tif": drivers.refused_driver(sys.argv[2])}))
"""


def test_only_allowed_drivers_stay_registered(tmp_path: Path) -> None:
    import json

    lbl = tmp_path / "x.lbl"
    lbl.write_text(
        "PDS_VERSION_ID = PDS3\nRECORD_TYPE = FIXED_LENGTH\nRECORD_BYTES = 8\n^IMAGE = 1\nOBJECT = IMAGE\n"
        "LINES = 1\nLINE_SAMPLES = 8\nSAMPLE_BITS = 8\nSAMPLE_TYPE = UNSIGNED_INTEGER\nEND_OBJECT = IMAGE\nEND\n"
    )
    tif = Path(__file__).resolve().parents[1] / "data" / "raster" / "RGB.byte.tif"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(lbl), str(tif)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    allowed = set(got["allowed"])
    assert set(got["raster"]) <= allowed and set(got["again"]) == set(got["raster"]), set(got["again"]) - allowed
    assert {"GTiff", "COG", "VRT", "GPKG", "netCDF", "MRF"} <= set(got["raster"])
    assert set(got["vector"]) <= allowed and {"ESRI Shapefile", "GPKG", "GeoJSON", "CSV"} <= set(got["vector"])
    assert got["refused"] == "PDS" and got["tif"] is None
    assert "Unable to find driver" not in out.stderr  # no GDAL_SKIP name a library lacks
