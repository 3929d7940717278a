"""A blocking iterator run in a worker thread, consumed as an async iterator.

Both chat backends stream from blocking code: llama.cpp generates token by token
under its model lock, and the OpenAI SDK's synchronous client reads server-sent
events (the async client's connections belong to the event loop that opened them,
see openai_chat). The iterator is opened, advanced and closed in one thread, so
a lock it takes is released by the thread that took it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Item(Generic[T]):
    value: T


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


class _End:
    pass


async def iterate_in_thread(open_iterator: Callable[[], Iterator[T]]) -> AsyncIterator[T]:
    """Yield the items of `open_iterator()` as the worker thread produces them.

    When the consumer stops early (aclose, or its task is cancelled) the worker
    stops after the item in hand and closes the iterator: llama.cpp stops
    decoding, the SDK closes its HTTP response. The consumer does not wait for
    that: a read that hangs would hold its clean-up until the SDK's timeout.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[_Item[T] | _Failed | _End] = asyncio.Queue()
    stop = threading.Event()

    def put(entry: _Item[T] | _Failed | _End) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, entry)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            stop.set()

    def work() -> None:
        try:
            iterator = open_iterator()
            try:
                for item in iterator:
                    put(_Item(item))
                    if stop.is_set():
                        break
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
        except BaseException as error:  # handed to the consumer, raised there
            put(_Failed(error))
        else:
            put(_End())

    # As asyncio.to_thread does: the default executor (asyncio.run waits for it),
    # and the caller's context, which holds the request's deadline.
    loop.run_in_executor(None, contextvars.copy_context().run, work)
    try:
        while True:
            entry = await queue.get()
            if isinstance(entry, _End):
                break
            if isinstance(entry, _Failed):
                raise entry.error
            yield entry.value
    finally:
        stop.set()
