"""Sliding-window rate limits from two fixed windows, the arithmetic both state stores share.

A fixed window lets a client send its limit at the end of one window and its
limit again at the start of the next: twice the limit in a moment. The sliding
counter counts a request against the current window's hits plus the previous
window's, weighted by how much of the previous window still lies inside the
last `window_seconds`:

    count = current + previous * (1 - elapsed / window)

So at a window's start the previous window counts in full and fades out over
the window. Each store reads the previous window's hits (a closed window: no
request writes to it any more) and makes one conditional write on the current
window's, `hits < allowance`, so racing requests still cannot pass the limit.

Fractions, not floats: the allowance is compared with whole hits, and a float
rounding either way would let one request too many through or refuse one too many.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class Windows:
    """The two fixed windows a request at `now` is counted in."""

    window_seconds: int
    start: int  # of the current window
    elapsed: Fraction  # seconds since `start`, in [0, window_seconds)

    @property
    def previous_start(self) -> int:
        return self.start - self.window_seconds

    @property
    def end(self) -> int:
        return self.start + self.window_seconds

    @property
    def expires_at(self) -> int:
        """A window is read as the previous one until the next window ends."""
        return self.end + self.window_seconds


def windows(window_seconds: int, now: float) -> Windows:
    exact = Fraction(now)
    start = math.floor(exact / window_seconds) * window_seconds
    return Windows(window_seconds, start, exact - start)


def _previous_weight(w: Windows, previous_hits: int) -> Fraction:
    return previous_hits * (w.window_seconds - w.elapsed) / w.window_seconds


def allowance(limit: int, previous_hits: int, w: Windows) -> int:
    """The number of hits the current window may hold after this request.

    A request is allowed when the current window holds fewer hits than this:
    current + 1 + previous * (1 - elapsed / window) <= limit.
    """
    return limit - math.ceil(_previous_weight(w, previous_hits))


def retry_after(limit: int, previous_hits: int, current_hits: int, w: Windows) -> int:
    """Whole seconds until a refused client's next request would be allowed.

    Later in this window, if the previous window's fading weight is what refuses
    it; else in the next window, where this window's hits fade in their turn.
    At least 1. Other clients' hits in the meantime can make it later.
    """
    room = limit - current_hits - 1  # what the previous window's weight may still be
    if room >= 0 and previous_hits > 0:
        # previous * (window - t) / window <= room  <=>  t >= window * (1 - room / previous)
        at = w.window_seconds * (1 - Fraction(room, previous_hits))
        if at < w.window_seconds:
            return max(1, math.ceil(at - w.elapsed))
    # In the next window: 1 + current * (window - t) / window <= limit.
    wait = w.window_seconds - w.elapsed
    if current_hits > limit - 1:
        wait += w.window_seconds * (1 - Fraction(limit - 1, current_hits))
    return max(1, math.ceil(wait))
