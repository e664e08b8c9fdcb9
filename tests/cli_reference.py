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
