"""Run calls at the same moment: the shared driver of the concurrency tests and `make stress`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def together(items: Sequence[T], call: Callable[[T], R]) -> list[R]:
    """Run `call` once per item, each in its own thread, all released at the same moment."""
    start = threading.Barrier(len(items))

    def one(item: T) -> R:
        start.wait()
        return call(item)

    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(one, items))
