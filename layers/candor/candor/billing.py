"""What a request's model calls may have been billed, whatever became of them.

A provider bills a request it received, whether or not its reply is of any use:
a structured reply cut at max_tokens, refused or off the schema; an attempt that
timed out while the model generated; a stream cut by the deadline or by a client
that hung up. The budget is trued up to what the run's Meter holds (candor.service),
so the Meter must hold no less than that, and never more than was reserved:

- each metered call (candor.graph.runner) opens a Bill with the call's bound, the
  most it can consume (candor.graph.limits), priced;
- an adapter that knows its attempts (candor.backends.openai_client,
  openai_chat, openai_embedder, pinecone_reranker) `track`s the bill and records
  each attempt on it: `sent` as it goes out, then `replied` with the usage a reply
  reported (of use or not) or `unbilled` when the provider answered with an error
  status or was never reached. An attempt with no such word (it timed out, the
  connection broke, the stream was cut, the call was cancelled) stays at the bound;
- a closed bill charges its attempts so; a bill no adapter tracked charges what
  the call returned, or its bound when the call failed; a bill still open when the
  run ends (a worker thread outlived a cancelled request) is counted at its worst.

Each call is admitted only if what the run has been charged plus its bound fits
in the reservation (`Meter.open`), and an attempt that may have been billed is
retried only if another attempt at the bound still fits (`Bill.may_retry`), so
reserved >= charged >= billed holds on every path, retries included.

The run's Meter is in a context variable (as the deadline is, candor.deadline):
`asyncio.to_thread` and candor.backends.threaded copy it into worker threads.
The graph makes one call at a time, so the Meter's current bill is the call's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from candor.errors import ModelError
from candor.types import NO_USAGE, Usage

# Float sums of per-call prices against the one Decimal reservation: a nano-dollar,
# the precision both state stores keep, absorbs the rounding.
TOLERANCE_USD = 1e-9


class Bill:
    """The attempts of one model call, embedding or reranking, as its adapter saw them."""

    def __init__(self, bound: Usage, room: float | None) -> None:
        self.bound = bound  # the most one attempt can consume, priced
        self._room = room  # what the request may still spend, this call included
        self._attempts: list[Usage | None] = []  # None: no reply said what it cost
        self._tracked = False
        self._lock = threading.Lock()

    @property
    def tracked(self) -> bool:
        return self._tracked

    def track(self) -> None:
        """The adapter records each attempt: charge those, not a guess."""
        self._tracked = True

    def sent(self) -> None:
        """An attempt goes out: it is charged the bound until a reply says otherwise."""
        with self._lock:
            self._attempts.append(None)

    def replied(self, usage: Usage) -> None:
        """The reply of the last attempt reported what it consumed."""
        self._settle_last(usage)

    def unbilled(self) -> None:
        """The last attempt got an error status, or never reached the provider: no bill."""
        self._settle_last(NO_USAGE)

    def _settle_last(self, usage: Usage) -> None:
        with self._lock:
            if self._attempts:
                self._attempts[-1] = usage

    def total(self) -> Usage:
        """What the attempts so far can have been billed."""
        with self._lock:
            attempts = list(self._attempts)
        return sum((self.bound if a is None else a for a in attempts), NO_USAGE)

    def may_retry(self) -> bool:
        """Whether another attempt at the bound still fits in what the request reserved."""
        if self._room is None:
            return True
        return self.total().cost_usd + self.bound.cost_usd <= self._room + TOLERANCE_USD

    def charge(self, returned: Usage | None) -> Usage:
        """What the call is charged; `returned`: what the call returned, None if it failed."""
        if self._tracked:
            return self.total()
        return self.bound if returned is None else returned


class Meter:
    """Adds up what one run's model calls, embeddings and rerankings consumed.

    The total is what the budget is trued up to, also for a run that fails or is
    cancelled halfway; `take` gives the part since the last take, one trace step's
    worth. `allowance` is what the request reserved (None: a reservation set by
    hand, which is only recorded against, not enforced).
    """

    def __init__(self, allowance: float | None = None) -> None:
        self.allowance = allowance
        self._closed = NO_USAGE
        self._step = NO_USAGE
        self._open: list[Bill] = []
        self._current: Bill | None = None
        self._lock = threading.Lock()

    @property
    def usage(self) -> Usage:
        """What the run has been charged, a call still open counted at its worst."""
        with self._lock:
            return self._charged()

    def _charged(self) -> Usage:
        return sum((bill.charge(None) for bill in self._open), self._closed)

    def open(self, bound: Usage, what: str) -> Bill:
        """A call of at most `bound` is about to be made; ModelError if the reservation
        cannot cover it (only after retries of attempts that may have been billed)."""
        with self._lock:
            spent = self._charged().cost_usd
            room = None if self.allowance is None else self.allowance - spent
            if room is not None and bound.cost_usd > room + TOLERANCE_USD:
                raise ModelError(
                    f"{what} could cost ${bound.cost_usd:.7f}; the request has "
                    f"${max(room, 0.0):.7f} left of what it reserved",
                    "over_budget",
                )
            bill = Bill(bound, room)
            self._open.append(bill)
            self._current = bill
        return bill

    def close(self, bill: Bill, returned: Usage | None) -> None:
        """The call is over: charge it (`returned`: its usage, None when it failed)."""
        with self._lock:
            if bill not in self._open:
                return  # closed already
            self._open.remove(bill)
            if self._current is bill:
                self._current = None
            charged = bill.charge(returned)
            self._closed = self._closed + charged
            self._step = self._step + charged

    def current(self) -> Bill | None:
        return self._current

    def take(self) -> Usage:
        with self._lock:
            step, self._step = self._step, NO_USAGE
        return step


_current: ContextVar[Meter | None] = ContextVar("candor_meter", default=None)


@contextmanager
def metering(meter: Meter) -> Iterator[None]:
    """Make `meter` the run's, for the adapters called inside."""
    token = _current.set(meter)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> Bill | None:
    """The bill of the call in progress, or None outside a metered call (ingest, the CLI)."""
    meter = _current.get()
    return None if meter is None else meter.current()
