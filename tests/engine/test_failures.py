"""Failures become codes: real allocation failures (numpy, Arrow, GEOS) name the memory limit; real write
failures on a full disk (ENOSPC, a full tmpfs) or over the file-size limit (EFBIG) say so and leave nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import rasterio
from rasterio.transform import from_origin

from gdal_mcp.config import format_size
from gdal_mcp.engine.failures import translate
from gdal_mcp.errors import GdalMcpError
from tests.faults import mount_small_tmpfs, unmount

# Runs `body` in a fresh interpreter under an address-space limit of (its size now + HEADROOM), so the
# allocation that follows fails for real; prints the translated error and the limit as JSON.
LIMITED = """
import json, resource, sys
from gdal_mcp.engine.failures import translate
with open('/proc/self/status') as fh:
    size = next(int(l.split()[1]) * 1024 for l in fh if l.startswith('VmSize:'))
limit = size + {headroom}
{setup}
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
{body}
    print(json.dumps({{"limit": limit, "error": None}}))
except BaseException as exc:
    e = translate(exc)
    kind = type(exc).__module__ + "." + type(exc).__name__
    print(json.dumps({{"limit": limit, "type": kind, "code": e and e.code, "message": e and e.message}}))
"""


def under_limit(setup: str, body: str, headroom: int = 256 * 1024**2) -> dict:
    code = LIMITED.format(headroom=headroom, setup=setup, body="\n".join("    " + x for x in body.splitlines()))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_numpy_allocation_over_the_limit_names_the_limit() -> None:
    r = under_limit("import numpy as np", "np.ones(2**30)")  # 8 GiB of float64
    assert r["type"].startswith("numpy.") and r["code"] == "resource-limit", r
    assert f"--max-memory {format_size(r['limit'])}" in r["message"] and "Unable to allocate 8.00 GiB" in r["message"]


def test_geos_bad_alloc_over_the_limit_names_the_limit() -> None:
    # 1e8 vertices on a unit square's edges: GEOS throws std::bad_alloc, shapely raises GEOSException.
    r = under_limit("import shapely", "shapely.segmentize(shapely.box(0, 0, 1, 1), 1e-8)", headroom=64 * 1024**2)
    assert r["type"] == "shapely.errors.GEOSException" and r["code"] == "resource-limit", r
    assert f"--max-memory {format_size(r['limit'])}" in r["message"] and "bad_alloc" in r["message"]


def test_arrow_allocation_failure_is_a_resource_limit() -> None:
    with pytest.raises(MemoryError) as exc:
        pa.allocate_buffer(2**60)  # one exbibyte: fails with or without a limit
    e = translate(exc.value)
    assert e is not None and e.code == "resource-limit" and "malloc of size" in e.message
    assert "no --max-memory limit is set" in e.message  # this test process has none


def test_enospc_is_a_full_disk_naming_the_file() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full (the device whose writes fail with ENOSPC) on this system")
    with pytest.raises(OSError) as exc, open("/dev/full", "wb", buffering=0) as fh:
        fh.write(b"x")
    e = translate(exc.value, "out/dem.tif")
    assert e is not None and e.code == "resource-limit"
    assert e.message.startswith(
        "the disk is full (No space left on device) while writing out/dem.tif; free space or write elsewhere"
    )


def test_file_size_limit_is_file_too_large() -> None:
    # A real EFBIG: the write crosses RLIMIT_FSIZE with SIGXFSZ ignored (in a child: the limit is per process).
    code = (
        "import json, resource, signal, sys\n"
        "from gdal_mcp.engine.failures import translate\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
        "try:\n"
        f"    fh = open({str(Path('/tmp') / f'efbig-{os.getpid()}')!r}, 'wb', buffering=0)\n"
        "    fh.write(bytes(8192))  # a short write up to the limit\n"
        "    fh.write(bytes(8192))  # then EFBIG\n"
        "    print(json.dumps(None))\n"
        "except OSError as exc:\n"
        "    e = translate(exc, 'big.tif')\n"
        "    print(json.dumps([exc.errno, e.code, e.message]))\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2]
        )
    finally:
        Path(f"/tmp/efbig-{os.getpid()}").unlink(missing_ok=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result is None:
        pytest.skip("the write was not limited (RLIMIT_FSIZE not enforced here)")
    errno_, code_, message = result
    assert errno_ == 27 and code_ == "resource-limit" and "File too large" in message and "big.tif" in message


def test_a_write_error_on_a_disk_with_room_stays_a_gdal_error(tmp_path: Path) -> None:
    class CPLE_FileIOError(Exception):  # noqa: N801 - the name rasterio gives GDAL's error
        pass

    CPLE_FileIOError.__module__ = "rasterio._err"
    e = translate(CPLE_FileIOError("TIFFAppendToStrip:Write error at scanline 0"), str(tmp_path / "x.tif"))
    assert e is not None and e.code == "gdal-error" and "Write error" in e.message
    kept = GdalMcpError("invalid-argument", "cannot allocate a band that does not exist")
    assert translate(kept) is kept  # only GDAL's own failures are read for memory or disk causes


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory):
    where = tmp_path_factory.mktemp("small") / "fs"
    reason = mount_small_tmpfs(where, "2m")
    if reason:
        pytest.skip(reason)
    yield where
    unmount(where)


@pytest.fixture(scope="module")
def noise(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 MB of random float32: more than the small disk holds, compressed or not."""
    path = tmp_path_factory.mktemp("noise") / "noise.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=1000,
        height=1000,
        count=1,
        dtype="float32",
        crs="EPSG:32631",
        transform=from_origin(500000, 5000000, 10, 10),
    ) as ds:
        ds.write(np.random.default_rng(1).random((1000, 1000), dtype="float32"), 1)
    return path


@pytest.mark.parametrize("options", [None, {"COMPRESS": "DEFLATE", "TILED": "YES"}], ids=["plain", "deflate"])
def test_raster_write_on_a_full_disk_says_so_and_leaves_nothing(small_disk: Path, noise: Path, options) -> None:
    from gdal_mcp.engine.raster.convert import convert

    dst = small_disk / "out.tif"
    with pytest.raises(GdalMcpError) as e:
        convert(src=str(noise), dst=str(dst), options=options)
    assert e.value.code == "resource-limit"
    assert f"the disk is full (No space left on device) while writing {dst}" in e.value.message
    assert list(small_disk.iterdir()) == []
    st = os.statvfs(small_disk)
    assert st.f_bfree == st.f_blocks  # the partial file is gone: the disk is empty again


@pytest.mark.parametrize("ext", ["gpkg", "shp"])
def test_vector_write_on_a_full_disk_says_so(small_disk: Path, tmp_path: Path, ext: str) -> None:
    import shapely

    from gdal_mcp.engine.vector.convert import convert

    src = tmp_path / "points.gpkg"
    n = 100_000
    import pyogrio

    table = pa.table({"name": ["x" * 20] * n, "geometry": shapely.to_wkb(shapely.points(np.arange(n), np.arange(n)))})
    pyogrio.write_arrow(table, src, geometry_name="geometry", geometry_type="Point", crs="EPSG:4326", driver="GPKG")
    try:
        with pytest.raises(GdalMcpError) as e:
            convert(src=str(src), dst=str(small_disk / f"out.{ext}"))
        assert e.value.code == "resource-limit" and "the disk is full (No space left on device)" in e.value.message
    finally:
        for p in small_disk.iterdir():
            p.unlink()
