"""A blocking iterator consumed from the event loop: order, errors, and stopping early."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from candor.backends.threaded import iterate_in_thread
from candor.errors import ModelError

pytestmark = pytest.mark.unit


def test_items_arrive_in_order_and_the_loop_stays_free() -> None:
    def slow() -> Iterator[int]:
        for n in range(3):
            time.sleep(0.05)
            yield n

    async def main() -> tuple[list[int], int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        items = [n async for n in iterate_in_thread(slow)]
        ticker.cancel()
        return items, ticks

    items, ticks = asyncio.run(main())

    assert items == [0, 1, 2]
    assert ticks >= 5  # the loop ran other work while the thread produced


def test_an_error_in_the_iterator_is_raised_in_the_consumer() -> None:
    def failing() -> Iterator[str]:
        yield "first"
        raise ModelError("decoding failed")

    async def main() -> list[str]:
        seen: list[str] = []
        async for item in iterate_in_thread(failing):
            seen.append(item)
        return seen

    with pytest.raises(ModelError, match="decoding failed"):
        asyncio.run(main())


@pytest.mark.parametrize("how", ["break", "cancel"])
def test_a_consumer_that_stops_early_closes_the_iterator_in_its_own_thread(how: str) -> None:
    produced: list[int] = []
    closed_in: list[int] = []
    opened_in: list[int] = []
    closed = threading.Event()
    three = threading.Event()

    def endless() -> Iterator[int]:
        opened_in.append(threading.get_ident())
        try:
            n = 0
            while True:
                time.sleep(0.01)
                produced.append(n)
                if len(produced) == 3:
                    three.set()
                yield n
                n += 1
        finally:
            closed_in.append(threading.get_ident())
            closed.set()

    async def consume() -> None:
        stream = iterate_in_thread(endless)
        async for n in stream:
            if n == 2 and how == "break":
                break
        await stream.aclose()  # type: ignore[attr-defined]

    async def main() -> None:
        if how == "break":
            await consume()
            return
        task = asyncio.create_task(consume())
        await asyncio.to_thread(three.wait, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())

    assert closed.wait(2)
    assert closed_in == opened_in  # closed by the thread that opened it (a lock it took)
    assert len(produced) < 10
