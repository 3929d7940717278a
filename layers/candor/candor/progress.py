"""Progress for long commands: a tqdm bar on a terminal, plain lines in a log.

A run of `candor eval` takes tens of minutes with the local model, often under
`make` or CI where stderr is not a terminal: there it prints a line at most every
`interval` seconds (and at the end), so a log shows that the run is alive.
"""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class LineProgress:
    """`desc: done/total (percent)` lines, throttled to one per `interval` seconds."""

    def __init__(self, total: int, desc: str, *, stream: TextIO, interval: float = 10.0) -> None:
        self.total = total
        self.desc = desc
        self.stream = stream
        self.interval = interval
        self.done = 0
        self._started = time.monotonic()
        self._printed_at: float | None = None
        self._printed_done = -1

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self._printed_at is None or now - self._printed_at >= self.interval:
            self._print(now)

    def close(self) -> None:
        if self.done != self._printed_done:
            self._print(time.monotonic())

    def _print(self, now: float) -> None:
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        elapsed = now - self._started
        print(f"{self.desc}: {self.done}/{self.total}{share}, {elapsed:.0f} s", file=self.stream)
        self.stream.flush()
        self._printed_at = now
        self._printed_done = self.done


def progress(total: int, desc: str, unit: str, *, enabled: bool = True) -> Progress:
    if not enabled:
        return _Silent()
    if not sys.stderr.isatty():
        return LineProgress(total, desc, stream=sys.stderr)
    from tqdm import tqdm

    bar: Progress = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)
    return bar
