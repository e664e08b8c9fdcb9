"""open_raster in a tiles.Session (Keeper): tiles run one after another share their open sources; nothing else does."""

from __future__ import annotations

import contextlib
import functools
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine import tiles
from gdal_mcp.engine.raster import opening
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.warp import reproject
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

RGB = str(DATA / "raster" / "RGB.byte.tif")


@pytest.fixture
def opens(monkeypatch) -> list[str]:
    """The paths GDAL is asked to open, in order."""
    seen: list[str] = []
    real = rasterio.open

    def counting(path, *args, **kwargs):
        seen.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(opening.rasterio, "open", counting)
    return seen


def test_inside_a_tile_session_a_plain_open_reuses_the_dataset(opens) -> None:
    session = tiles.Session()
    with session.active():
        with open_raster(RGB) as a:
            first = a.read(1, window=((0, 10), (0, 10)))
        with open_raster(RGB) as b:
            assert b is a and not b.closed  # kept open after the first block ended
            assert np.array_equal(b.read(1, window=((0, 10), (0, 10))), first)
        with open_raster(RGB, sharing=False) as c:  # other arguments: a dataset of its own, closed after
            assert c is not a
        assert c.closed
    assert opens == [RGB, RGB]
    with open_raster(RGB) as d:  # outside the active block: a fresh dataset, as always
        assert d is not a
    assert not a.closed
    session.close()
    assert a.closed


def test_outside_tiles_every_open_is_closed_after_its_block(opens) -> None:
    with open_raster(RGB) as a:
        pass
    with open_raster(RGB) as b:
        pass
    assert a is not b and a.closed and b.closed and opens == [RGB, RGB]


def test_a_session_is_this_threads_only() -> None:
    session = tiles.Session()
    seen: list[object] = []

    def other() -> None:
        with open_raster(RGB) as ds:
            seen.append(ds)

    with session.active(), open_raster(RGB) as mine:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen[0] is not mine and seen[0].closed  # type: ignore[attr-defined]
    session.close()


def test_a_failed_open_keeps_nothing_and_raises_the_usual_error(tmp_path: Path) -> None:
    bad = tmp_path / "not_a_raster.tif"
    bad.write_text("plain text")
    session = tiles.Session()
    with session.active():
        for _ in range(2):
            with pytest.raises(GdalMcpError) as info, open_raster(str(bad)):
                pass
            assert info.value.code == "unsupported"
    assert not session.resource("rasters", opening.Keeper)._open
    session.close()


def test_at_most_max_kept_unused_datasets_stay_open_and_none_in_use_is_closed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(opening, "MAX_KEPT", 3)
    paths = []
    for i in range(6):
        paths.append(str(tmp_path / f"copy{i}.tif"))
        shutil.copy(RGB, paths[-1])
    session = tiles.Session()
    with session.active():
        # All six in use at once (a tile reading six sources): none may be closed under it.
        with open_all(paths) as datasets:
            assert all(not ds.closed for ds in datasets)
            assert [int(ds.read(1, window=((0, 1), (0, 1)))[0, 0]) for ds in datasets] == [0] * 6
        # Released: the three used least recently are closed, the last three kept.
        assert [ds.closed for ds in datasets] == [True, True, True, False, False, False]
        assert list(session.resource("rasters", opening.Keeper)._open) == paths[3:]
        with open_raster(paths[0]) as again:  # opened anew, and now the most recent
            assert again is not datasets[0] and not again.closed
        assert list(session.resource("rasters", opening.Keeper)._open) == [*paths[4:], paths[0]]
    session.close()
    assert again.closed and all(ds.closed for ds in datasets)


@contextlib.contextmanager
def open_all(paths: list[str]):
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(open_raster(p)) for p in paths]


def test_local_tiles_open_the_source_once_and_give_the_same_pixels(tmp_path: Path, opens, monkeypatch) -> None:
    """A reprojection in many tiles on the local executor: the source opened once for all its tiles (besides the
    job's own open), and pixels identical to tiles that each open the source themselves."""
    monkeypatch.setattr(tiles, "TILE_ALIGN", 128)
    monkeypatch.setattr(tiles, "plan", functools.partial(tiles.plan, tile_bytes=1))
    reproject(
        RGB,
        str(tmp_path / "kept.tif"),
        dst_crs="EPSG:4326",
        format="GTiff",
        options={"TILED": "YES", "BLOCKXSIZE": "128", "BLOCKYSIZE": "128"},
    )
    with rasterio.open(tmp_path / "kept.tif") as out:
        count = len(tiles.plan(out.width, out.height, bytes_per_pixel=3))
    assert count >= 20
    assert opens.count(RGB) == 2  # the job's (its grid), then one for every tile

    class NoSession(tiles.Session):
        def active(self):  # type: ignore[override]
            return contextlib.nullcontext()

    monkeypatch.setattr(tiles, "Session", NoSession)
    opens.clear()
    reproject(
        RGB,
        str(tmp_path / "fresh.tif"),
        dst_crs="EPSG:4326",
        format="GTiff",
        options={"TILED": "YES", "BLOCKXSIZE": "128", "BLOCKYSIZE": "128"},
    )
    assert opens.count(RGB) == 1 + count
    with rasterio.open(tmp_path / "kept.tif") as a, rasterio.open(tmp_path / "fresh.tif") as b:
        assert a.profile == b.profile
        assert np.array_equal(a.read(), b.read())


def _reader(seen: list):
    """A tile function reading RGB.byte.tif through open_raster, recording the dataset it got; tile 3 fails."""

    def tile(i: int) -> int:
        if i == 3:
            raise ValueError("tile 3 failed")
        with open_raster(RGB) as ds:
            seen.append(ds)
            return int(ds.read(1, window=((i, i + 1), (0, 1)))[0, 0])

    return tile


@pytest.mark.parametrize("how", ["exhausted", "closed early", "a tile raised"])
def test_the_local_mapper_closes_what_its_tiles_kept(how: str) -> None:
    seen: list = []
    items = [0, 1, 2] if how != "a tile raised" else [0, 1, 2, 3, 4]
    run = tiles.run_here(_reader(seen), items)
    if how == "exhausted":
        assert [i for i, _ in run] == [0, 1, 2]
    elif how == "closed early":
        next(run)
        next(run)
        assert not seen[0].closed  # still kept between tiles
        run.close()
    else:
        with pytest.raises(ValueError, match="tile 3"):
            list(run)
    assert len({id(ds) for ds in seen}) == 1  # one dataset for every tile of the session
    assert seen and all(ds.closed for ds in seen)


def test_each_thread_of_run_threads_keeps_its_own_and_all_are_closed() -> None:
    seen: list = []
    out = dict(tiles.run_threads(_reader(seen), [0, 1, 2, 4, 5, 6, 7, 8], 2))
    with rasterio.open(RGB) as ds:
        assert out == {n: int(ds.read(1, window=((i, i + 1), (0, 1)))[0, 0]) for n, i in enumerate([0, 1, 2, 4, 5, 6, 7, 8])}
    assert 1 <= len({id(ds) for ds in seen}) <= 2 and all(ds.closed for ds in seen)


def test_close_all_closes_everything_then_raises_the_first_error() -> None:
    closed: list[str] = []

    class Thing:
        def __init__(self, name: str, fails: bool = False) -> None:
            self.name, self.fails = name, fails

        def close(self) -> None:
            closed.append(self.name)
            if self.fails:
                raise OSError(self.name)

    with pytest.raises(OSError, match="b"):
        tiles.close_all([Thing("a"), Thing("b", True), Thing("c", True), Thing("d")])
    assert closed == ["a", "b", "c", "d"]
