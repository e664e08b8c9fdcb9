"""tiles.plan: the tiles cover the grid exactly once, halos are clipped to it, plans are deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from gdal_mcp.engine import tiles


@pytest.mark.parametrize(
    ("width", "height", "bpp", "halo", "tile_bytes"),
    [
        (1, 1, 1, 0, tiles.TILE_BYTES),
        (791, 718, 3, 0, tiles.TILE_BYTES),  # one tile
        (791, 718, 3, 1, 512 * 512 * 3),  # 2 x 2 tiles of 512, halo 1
        (1500, 1100, 8, 3, 1),  # the smallest side (TILE_ALIGN), halo 3
        (5000, 3000, 6, 0, tiles.TILE_BYTES),  # 2048 tiles (32 MB / 6 bytes)
        (9000, 200, 1, 2, tiles.TILE_BYTES),  # capped at MAX_TILE_SIDE
    ],
)
def test_plan_covers_the_grid_exactly_once_with_clipped_halos(width, height, bpp, halo, tile_bytes) -> None:
    plan = tiles.plan(width, height, bytes_per_pixel=bpp, halo=halo, tile_bytes=tile_bytes)
    assert [t.index for t in plan] == list(range(len(plan)))
    cover = np.zeros((height, width), dtype=int)
    for t in plan:
        col, row, w, h = t.window
        cover[row : row + h, col : col + w] += 1
        # The read window: the tile grown by `halo` on each side, clipped to the grid (computed independently).
        c0, r0, rw, rh = t.read
        assert (c0, r0) == (max(0, col - halo), max(0, row - halo))
        assert (c0 + rw, r0 + rh) == (min(width, col + w + halo), min(height, row + h + halo))
        assert t.offset == (col - c0, row - r0)
    assert (cover == 1).all()
    # Sides: multiples of TILE_ALIGN (only the last column / row is shorter), never above MAX_TILE_SIDE, and about
    # tile_bytes of pixels when that is between the two.
    side = plan[0].window[2] if len(plan) > 1 else None
    if side is not None:
        assert side % tiles.TILE_ALIGN == 0 and tiles.TILE_ALIGN <= side <= tiles.MAX_TILE_SIDE
        assert all(t.window[2] == side or t.window[0] + t.window[2] == width for t in plan)
        assert all(t.window[3] == side or t.window[1] + t.window[3] == height for t in plan)
        ideal = (tile_bytes / bpp) ** 0.5
        if tiles.TILE_ALIGN <= ideal <= tiles.MAX_TILE_SIDE:
            assert ideal - tiles.TILE_ALIGN < side <= ideal


@pytest.mark.parametrize(
    ("width", "height", "bpp", "halo", "tile_bytes"),
    [
        (791, 718, 3, 1, tiles.TILE_BYTES),  # one strip: the whole grid
        (21000, 15000, 6, 0, tiles.TILE_BYTES),  # 266 rows of 126 kB
        (1500, 1100, 8, 2, 1),  # TILE_ALIGN / 2 rows, halo 2
    ],
)
def test_full_width_plans_are_strips_of_whole_rows(width, height, bpp, halo, tile_bytes) -> None:
    plan = tiles.plan(width, height, bytes_per_pixel=bpp, halo=halo, tile_bytes=tile_bytes, full_width=True)
    cover = np.zeros(height, dtype=int)
    for t in plan:
        col, row, w, h = t.window
        assert (col, w) == (0, width) and t.read[0] == 0 and t.read[2] == width
        assert t.read[1] == max(0, row - halo) and t.read[1] + t.read[3] == min(height, row + h + halo)
        cover[row : row + h] += 1
    assert (cover == 1).all()
    rows = plan[0].window[3]
    assert rows == min(height, tiles.MAX_TILE_SIDE, max(tiles.TILE_ALIGN // 2, tile_bytes // (width * bpp)))
    assert all(t.window[3] == rows for t in plan[:-1])


def test_plan_is_deterministic_and_row_major() -> None:
    a = tiles.plan(5000, 3000, bytes_per_pixel=6, halo=1)
    b = tiles.plan(5000, 3000, bytes_per_pixel=6, halo=1)
    assert a == b and len(a) == 3 * 2
    assert [t.window[:2] for t in a] == [(c, r) for r in (0, 2048) for c in (0, 2048, 4096)]
    assert tiles.plan(0, 10, bytes_per_pixel=1) == [] and tiles.plan(10, 0, bytes_per_pixel=1) == []


def test_map_tiles_refuses_functions_a_cluster_worker_cannot_import() -> None:
    with pytest.raises(TypeError):
        list(tiles.map_tiles(lambda x: x, [1]))


def test_run_threads_yields_every_tile_once_and_stops_when_closed() -> None:
    import threading
    import time

    started: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            started.append(i)
        time.sleep(0.02 * (3 - i % 3))  # later tiles finish first now and then
        return i * i

    out = list(tiles.run_threads(work, list(range(12)), 2))
    assert sorted(out) == [(i, i * i) for i in range(12)]
    assert [i for i, _ in out] != list(range(12)), "two threads should finish some tiles out of order"
    started.clear()
    gen = tiles.run_threads(work, list(range(50)), 2)
    next(gen)
    gen.close()
    assert len(started) <= 4, started  # at most the running tiles and one refill; the rest never start


@pytest.mark.parametrize("contiguous", [False, True])
def test_run_threads_yields_every_tile_once_and_stops_when_closed_in_both_orders(contiguous: bool) -> None:
    """Data loss class: a tile skipped or run twice by the scheduler. Both tile orders run every tile exactly once,
    keep at most `threads` tiles going, and drop the rest when the consumer stops."""
    import threading
    import time

    started: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            started.append(i)
        time.sleep(0.005 * (1 + i % 3))
        return i * i

    for n in (1, 2, 3, 17):
        started.clear()
        out = list(tiles.run_threads(work, list(range(n)), 2, contiguous=contiguous))
        assert sorted(out) == [(i, i * i) for i in range(n)] and sorted(started) == list(range(n))
    started.clear()
    gen = tiles.run_threads(work, list(range(50)), 2, contiguous=contiguous)
    next(gen)
    gen.close()
    assert len(started) <= 4, started


def test_contiguous_threads_each_work_through_their_own_run_of_neighbouring_tiles() -> None:
    """Speed (source blocks near tile edges decoded by one thread, not by each): with contiguous=True each thread
    takes its own run of consecutive tiles in order, and a thread whose run is done takes tiles from the end of the
    run left (so what it takes is contiguous too); the default hands the next tile to whichever thread is free."""
    import threading
    import time

    by_thread: dict[int, list[int]] = {}
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            by_thread.setdefault(threading.get_ident(), []).append(i)
        time.sleep(0.03 if i < 10 else 0.01)  # the first run is slower: its thread gets help from the other
        return i

    assert sorted(i for i, _ in tiles.run_threads(work, list(range(20)), 2, contiguous=True)) == list(range(20))
    first, second = sorted(by_thread.values(), key=lambda seq: seq[0])
    assert first == list(range(len(first))), first  # 0, 1, 2 … in order
    own = [i for i in second if i >= 10]
    assert own == list(range(10, 20)), second  # 10 … 19 in order
    stolen = [i for i in second if i < 10]
    assert stolen and stolen == sorted(stolen, reverse=True) and stolen[0] == 9, second  # from the end of the run
    assert sorted(first + second) == list(range(20))

    by_thread.clear()
    list(tiles.run_threads(work, list(range(20)), 2))
    assert all(any(b - a > 1 for a, b in zip(seq, seq[1:], strict=False)) for seq in by_thread.values()), by_thread


def test_mapped_stops_the_tiles_when_its_block_ends_even_while_an_error_holds_the_frame() -> None:
    """Cancel on a cluster: a job's error or cancel must stop its tiles at once, not when the garbage collector gets
    to a tile generator that the exception's traceback (the job's frame) still holds."""
    from gdal_mcp.engine.raster.relief import range_tile  # any engine tile function: the mapper below runs none

    stopped: list[str] = []

    def mapper(fn, items):  # noqa: ANN001, ANN202 - a stand-in executor
        try:
            yield from enumerate(items)
        finally:
            stopped.append("closed")

    caught = None
    with tiles.using(mapper):
        try:
            with tiles.mapped(range_tile, [1, 2, 3]) as results:
                for _ in results:
                    raise RuntimeError("a cancel")
        except RuntimeError as e:
            caught = e  # the traceback, and with it the frame holding `results`, stays alive here
            assert stopped == ["closed"]
    assert caught is not None and caught.__traceback__ is not None
    # without the with-block the same generator stays suspended while the error is held
    stopped.clear()
    with tiles.using(mapper):
        try:
            results = tiles.map_tiles(range_tile, [1, 2, 3])
            for _ in results:
                raise RuntimeError("a cancel")
        except RuntimeError:
            assert stopped == []
    results.close()
    assert stopped == ["closed"]
