"""The metadata cache: answers keyed on file identity, re-read after any change, bounded."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import rasterio
from fastmcp import Client

from gdal_mcp import jobs
from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from gdal_mcp.server.cache import MetadataCache, file_identity
from tests.helpers import DATA, call

SETTLE = 0.2  # the tests' settle time (the server's default is 1 s), so they need not sleep long


def settle() -> None:
    time.sleep(SETTLE + 0.05)


# ----- the cache alone -----------------------------------------------------------------------------
def test_identity_changes_with_content_sidecars_and_rename(tmp_path: Path) -> None:
    f = tmp_path / "a.tif"
    shutil.copy(DATA / "raster" / "slope.tif", f)
    first = file_identity([f])
    assert first is not None and file_identity([f]) == first
    (tmp_path / "a.tif.aux.xml").write_text("<PAMDataset/>")
    with_sidecar = file_identity([f])
    assert with_sidecar is not None and with_sidecar[0] != first[0]
    # Rewritten in place with the same bytes and its mtime put back: the ctime still moves.
    st = f.stat()
    time.sleep(0.01)
    f.write_bytes(f.read_bytes())
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    rewritten = file_identity([f])
    assert rewritten is not None and rewritten[0] != with_sidecar[0]
    assert file_identity([tmp_path / "missing.tif"]) is None
    assert file_identity([tmp_path]) is None, "a directory dataset (e.g. of shapefiles) is never cached"


def test_lru_bounds_recency_and_eviction(tmp_path: Path) -> None:
    cache = MetadataCache(max_entries=2, max_bytes=10_000, settle=0.0)
    f = tmp_path / "a.tif"
    f.write_bytes(b"x")
    keys = []
    for band in (1, 2, 3):
        keyed = cache.key(jobs.RasterInfoJob(path=str(f), band=band), [f])
        assert keyed is not None
        assert cache.put(keyed[0], keyed[1], {"band": band})
        keys.append(keyed[0])
    assert len(cache) == 2 and cache.get(keys[0]) is None and cache.get(keys[2]) == {"band": 3}
    got = cache.get(keys[2])
    got["band"] = 99  # a caller modifying its copy does not change the cache
    assert cache.get(keys[2]) == {"band": 3}
    assert not cache.put(keys[1], 0, "y" * 5_000), "an answer over 1/8 of the byte budget is not kept"
    assert cache.size_bytes <= 10_000
    assert cache.evict([tmp_path / "other.tif"]) == 2, "a file written beside the dataset evicts it"
    assert len(cache) == 0

    slow = MetadataCache(settle=5.0)
    keyed = slow.key(jobs.RasterInfoJob(path=str(f)), [f])
    assert keyed is not None and not slow.put(keyed[0], keyed[1], "fresh"), "a just-modified file is not cached"
    assert slow.key(jobs.OverviewsJob(src=str(f), action="add", levels=[2, 4]), [f]) is None, "unhashable job"


# ----- through the server ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path, list[Any]]]:
    ws = tmp_path_factory.mktemp("cachews")
    for name in ("RGB.byte.tif", "slope.tif", "shade.tif"):
        shutil.copy(DATA / "raster" / name, ws / name)
    for part in ("shp", "shx", "dbf", "prj"):
        shutil.copy(DATA / "vector" / f"points.{part}", ws / f"points.{part}")
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    app.cache.settle_ns = int(SETTLE * 1e9)
    ran: list[Any] = []
    real_run = app.executor.run

    async def spy(job: Any, **kwargs: Any) -> Any:
        ran.append(job)
        return await real_run(job, **kwargs)

    app.executor.run = spy  # type: ignore[method-assign]
    yield mcp, app, ws, ran
    app.executor.close()


@pytest.fixture
async def cclient(served: tuple[Any, Any, Path, list[Any]]) -> AsyncIterator[Client]:
    async with Client(served[0]) as c:
        yield c


def info_jobs(ran: list[Any], name: str) -> int:
    return sum(1 for j in ran if isinstance(j, jobs.RasterInfoJob | jobs.VectorInfoJob) and j.path.endswith(name))


async def test_second_call_does_not_reach_a_worker(cclient: Client, served: tuple) -> None:
    _, _, ws, ran = served
    settle()
    err, first = await call(cclient, "raster_info", path="RGB.byte.tif")
    assert not err, first
    err, second = await call(cclient, "raster_info", path="RGB.byte.tif")
    assert not err and second == first
    assert info_jobs(ran, "RGB.byte.tif") == 1
    with rasterio.open(ws / "RGB.byte.tif") as ds:
        assert (first["width"], first["height"], first["path"]) == (ds.width, ds.height, "RGB.byte.tif")
    # Other arguments are other answers.
    err, band = await call(cclient, "raster_info", path="RGB.byte.tif", band=2)
    assert not err and [b["index"] for b in band["bands"]] == [2]
    assert info_jobs(ran, "RGB.byte.tif") == 2
    # stats=true always reads the pixels.
    for _ in range(2):
        err, _res = await call(cclient, "raster_info", path="RGB.byte.tif", stats=True)
        assert not err
    assert info_jobs(ran, "RGB.byte.tif") == 4
    # vector_info and the info resource use the cache too.
    for _ in range(2):
        err, vec = await call(cclient, "vector_info", path="points.shp")
        assert not err, vec
    assert info_jobs(ran, "points.shp") == 1
    for _ in range(2):
        await cclient.read_resource("gdal-mcp://info/raster/slope.tif")
    assert info_jobs(ran, "slope.tif") == 1


async def test_a_rewritten_file_is_read_again(cclient: Client, served: tuple) -> None:
    _, _, ws, ran = served
    target = ws / "changing.tif"
    shutil.copy(ws / "slope.tif", target)
    settle()
    err, before = await call(cclient, "raster_info", path="changing.tif")
    assert not err
    await call(cclient, "raster_info", path="changing.tif")
    assert info_jobs(ran, "changing.tif") == 1
    # Rewrite in place (same inode) with another raster, then put the old mtime back ("touch").
    st = target.stat()
    target.write_bytes((ws / "RGB.byte.tif").read_bytes())
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_ino == st.st_ino
    err, after = await call(cclient, "raster_info", path="changing.tif")
    assert not err and info_jobs(ran, "changing.tif") == 2
    with rasterio.open(target) as ds:
        assert (after["width"], after["height"], len(after["bands"])) == (ds.width, ds.height, ds.count)
    assert (after["width"], len(after["bands"])) != (before["width"], len(before["bands"]))


async def test_an_overwritten_output_is_read_again(cclient: Client, served: tuple) -> None:
    _, app, ws, ran = served
    err, res = await call(cclient, "raster_convert", input="slope.tif", output="out.tif")
    assert not err, res
    settle()
    err, first = await call(cclient, "raster_info", path="out.tif")
    await call(cclient, "raster_info", path="out.tif")
    assert info_jobs(ran, "out.tif") == 1 and len(app.cache) > 0
    err, res = await call(cclient, "raster_convert", input="RGB.byte.tif", output="out.tif", overwrite=True)
    assert not err, res
    err, second = await call(cclient, "raster_info", path="out.tif")
    assert not err and info_jobs(ran, "out.tif") == 2
    with rasterio.open(ws / "out.tif") as ds:
        assert (second["width"], len(second["bands"])) == (ds.width, ds.count)
    assert len(second["bands"]) != len(first["bands"])
