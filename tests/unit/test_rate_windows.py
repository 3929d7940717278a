"""The sliding-window rate limit (candor.backends.rate_windows) on the SQLite store.

Whatever times a client sends at, no short burst around a window's edge gets
much past the limit, and no span of one window gets twice the limit; a client
that keeps sending still gets about the limit every window. The DynamoDB store
does the same arithmetic; tests/contract runs the edge cases on both stores.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from fractions import Fraction
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from candor.backends import rate_windows
from candor.backends.sqlite_state import SqliteStateStore

pytestmark = pytest.mark.unit

WINDOW = 60
START = 1_800_000_000.0  # a window boundary (a multiple of 60)


def allowed_times(times: list[float], limit: int) -> list[float]:
    with TemporaryDirectory() as folder:
        store = SqliteStateStore(Path(folder) / "state.sqlite3")
        try:
            return [
                t
                for t in sorted(times)
                if store.hit_rate_limit("client", window_seconds=WINDOW, limit=limit, now=t).allowed
            ]
        finally:
            store.close()


def most_in_a_span(times: list[float], span: float) -> int:
    """The most of `times` inside any span of `span` seconds (closed at its end)."""
    return max((bisect_right(times, t) - bisect_left(times, t - span) for t in times), default=0)


sends = st.lists(
    st.floats(START, START + 5 * WINDOW, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=300,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(times=sends, limit=st.integers(1, 30))
def test_no_burst_across_an_edge_gets_much_past_the_limit(times: list[float], limit: int) -> None:
    allowed = allowed_times(times, limit)
    # Within a tenth of a window the previous window's weight has fallen by at most
    # a tenth, so at most a tenth of the limit more can pass than the limit.
    assert most_in_a_span(allowed, WINDOW / 10) <= limit + math.ceil(limit / 10)
    # And never twice the limit within one window's span, wherever it starts.
    assert most_in_a_span(allowed, WINDOW) < 2 * limit


def test_one_windows_span_can_hold_almost_twice_the_limit() -> None:
    # What docs/guards.md says of the bound: the limit at the end of one window, and
    # again, less one, at the end of the next, when the first has almost faded.
    limit = 20
    times = [START - 0.5] * limit + [START + WINDOW - 0.5] * (2 * limit)
    allowed = allowed_times(times, limit)
    assert len(allowed) == 2 * limit - 1 == 39
    assert most_in_a_span(allowed, WINDOW) == 39


def test_a_client_sending_all_the_time_gets_about_its_limit_each_window() -> None:
    limit, windows = 10, 6
    times = [START + n * WINDOW / 100 for n in range(windows * 100)]  # 100 a window
    allowed = allowed_times(times, limit)
    assert (windows - 1) * (limit - 1) <= len(allowed) <= windows * limit
    assert most_in_a_span(allowed, WINDOW / 10) <= limit + 1


def test_fixed_window_bursts_are_what_the_sliding_count_refuses() -> None:
    # The limit in the last second of a window, then again in the first of the next.
    limit = 20
    times = [START - 0.5] * (2 * limit) + [START + 0.5] * (2 * limit)
    assert len(allowed_times(times, limit)) == limit


def test_the_allowance_weights_the_previous_window_by_what_remains_of_it() -> None:
    w = rate_windows.windows(WINDOW, START + 15)  # a quarter in
    assert w.start == START and w.elapsed == 15
    assert rate_windows.allowance(10, 8, w) == 4  # 8 hits at three quarters weigh 6
    assert rate_windows.allowance(10, 0, w) == 10
    assert rate_windows.allowance(10, 10, rate_windows.windows(WINDOW, START)) == 0


def test_a_float_clock_cannot_round_a_hit_through() -> None:
    # 0.1 s into a window of 10 s, 10 previous hits weigh 9.9: 10 - 9.9 leaves room
    # for no whole hit, whatever 0.1 rounds to as a float.
    w = rate_windows.windows(10, 1_000_000_000.1)
    assert w.elapsed == Fraction(1_000_000_000.1) - 1_000_000_000
    assert rate_windows.allowance(10, 10, w) == 0


def test_retry_after_names_the_second_the_next_request_fits() -> None:
    limit = 4
    w = rate_windows.windows(WINDOW, START + 30)  # halfway; 4 previous hits weigh 2
    # Two current hits: 2 + 1 + 2 > 4; the previous weight must fall to 1, at 45 s.
    assert rate_windows.retry_after(limit, 4, 2, w) == 15
    # A full current window: in the next one, once its 4 hits weigh 3 (15 s in).
    assert rate_windows.retry_after(limit, 0, 4, w) == 30 + 15
    # A limit of one waits for the whole next window to pass.
    assert rate_windows.retry_after(1, 0, 1, w) == 30 + WINDOW


@pytest.mark.parametrize(("previous", "current"), [(4, 2), (0, 4), (3, 3), (9, 0)])
def test_a_request_at_retry_after_is_allowed(previous: int, current: int) -> None:
    limit, now = 4, START + 30
    with TemporaryDirectory() as folder:
        store = SqliteStateStore(Path(folder) / "state.sqlite3")
        try:
            for _ in range(previous):
                store.hit_rate_limit("c", window_seconds=WINDOW, limit=99, now=START - 1)
            for _ in range(current):
                store.hit_rate_limit("c", window_seconds=WINDOW, limit=99, now=now)
            refused = store.hit_rate_limit("c", window_seconds=WINDOW, limit=limit, now=now)
            assert not refused.allowed
            again = now + refused.retry_after
            assert store.hit_rate_limit("c", window_seconds=WINDOW, limit=limit, now=again).allowed
        finally:
            store.close()
