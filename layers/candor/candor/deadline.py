"""One deadline per request, seen by every outbound call made on its behalf.

On AWS the ask function is killed at 28 s and API Gateway gives up at 29 s: a
request that is still waiting on a model then is lost mid-way, with nothing
settled. So each request gets one deadline (CANDOR_REQUEST_DEADLINE_SECONDS),
and everything it waits on derives its timeouts from the time left: the graph
checks it before each model call, and the OpenAI and Pinecone adapters cut each
attempt, and give up retrying, at it. Past it, DeadlineExceededError.

The runner sets the deadline in a context variable for the duration of a run.
`asyncio.to_thread` copies the context, so a backend running in a worker thread
sees it; a thread pool does not, so a backend that fans out reads `remaining()`
first. Outside a run (ingestion, the CLI's other commands) there is none.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from candor.errors import DeadlineExceededError


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float  # time.time() when the request must have its answer

    def remaining(self) -> float:
        return self.at - time.time()

    def check(self, before: str) -> None:
        """Raise DeadlineExceededError if the deadline has passed; `before` names what waits."""
        if self.remaining() <= 0:
            raise DeadlineExceededError(f"the request's deadline passed before {before}")


def after(seconds: float | None, *, start: float | None = None) -> Deadline | None:
    """The deadline `seconds` after `start` (default: now); None for no deadline."""
    if seconds is None:
        return None
    return Deadline((time.time() if start is None else start) + seconds)


_current: ContextVar[Deadline | None] = ContextVar("candor_deadline", default=None)


@contextmanager
def bound(deadline: Deadline | None) -> Iterator[None]:
    """Make `deadline` the current one (None: no deadline) for the calls inside."""
    token = _current.set(deadline)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> Deadline | None:
    return _current.get()


def remaining() -> float | None:
    """Seconds left before the current deadline, or None when there is none."""
    deadline = _current.get()
    return None if deadline is None else deadline.remaining()
