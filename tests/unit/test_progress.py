"""Progress lines for logs (stderr not a terminal): throttled, and always the final count."""

from __future__ import annotations

import io

import pytest

from candor.progress import LineProgress

pytestmark = pytest.mark.unit


def test_lines_are_throttled_but_the_final_count_is_always_printed() -> None:
    stream = io.StringIO()
    ticker = LineProgress(45, "agent", stream=stream, interval=3600)

    for _ in range(45):
        ticker.update(1)
    ticker.close()

    lines = stream.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == ["agent: 1/45 (2%)", "agent: 45/45 (100%)"]


def test_every_update_prints_without_throttle_and_close_does_not_repeat() -> None:
    stream = io.StringIO()
    ticker = LineProgress(2, "retrieval", stream=stream, interval=0)

    ticker.update(1)
    ticker.update(1)
    ticker.close()

    assert len(stream.getvalue().splitlines()) == 2
