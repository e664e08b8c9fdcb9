"""The GDAL command-line tools as an optional reference (Debian gdal-bin); tests skip, saying why, without them."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def gdal_cli(tool: str, *args: str) -> None:
    """Run a GDAL CLI tool, or skip the calling test when it is not installed."""
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    subprocess.run(
        [tool, "-q", *args] if tool not in ("gdalbuildvrt",) else [tool, "-q", *args],
        check=True,
        capture_output=True,
        timeout=120,
    )


def gdalinfo_json(*args: str) -> dict:
    """`gdalinfo -json` of a dataset (Debian's GDAL, not the one in rasterio's wheel), or skip without it."""
    import json

    if shutil.which("gdalinfo") is None:
        pytest.skip("gdalinfo not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    out = subprocess.run(["gdalinfo", "-json", *args], check=True, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)


#: GDAL's own COG validator, shipped by Debian's python3-gdal as a sample script
COG_VALIDATOR = "/usr/lib/python3/dist-packages/osgeo_utils/samples/validate_cloud_optimized_geotiff.py"


def validate_cog(path: str) -> tuple[bool, str]:
    """(valid, report) from GDAL's validate_cloud_optimized_geotiff.py, run by the system's python3 in a process
    of its own; skip when python3-gdal is not installed."""
    import os

    python = shutil.which("python3", path="/usr/bin")
    if python is None or not os.path.isfile(COG_VALIDATOR):
        pytest.skip("GDAL's validate_cloud_optimized_geotiff.py not installed (apt-get install python3-gdal)")
    done = subprocess.run([python, COG_VALIDATOR, path], capture_output=True, text=True, timeout=120)
    return done.returncode == 0, done.stdout + done.stderr


def gdalmdiminfo_json(*args: str) -> dict:
    """`gdalmdiminfo` of a multidimensional dataset (Debian's GDAL), or skip without it."""
    import json

    if shutil.which("gdalmdiminfo") is None:
        pytest.skip("gdalmdiminfo not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    out = subprocess.run(["gdalmdiminfo", *args], check=True, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)
