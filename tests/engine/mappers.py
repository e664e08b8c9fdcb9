"""A real parallel tile executor for tests: a pool of spawned processes, items submitted in reverse order and
yielded as they finish, so results can only be right if they do not depend on order or on the process."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any


class ProcessMapper:
    """tiles.Mapper on a process pool; `orders` records the order the indexes came in, one list per call."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool
        self.orders: list[list[int]] = []

    def __call__(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        futures: dict[Future[Any], int] = {self.pool.submit(fn, items[i]): i for i in reversed(range(len(items)))}
        order: list[int] = []
        self.orders.append(order)
        try:
            for future in as_completed(futures):
                order.append(futures[future])
                yield futures[future], future.result()
        finally:
            for future in futures:
                future.cancel()


@contextmanager
def spawned_pool() -> Iterator[ProcessPoolExecutor]:
    """Two spawned processes (a forked child would inherit the locks of GDAL's thread pools)."""
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool
