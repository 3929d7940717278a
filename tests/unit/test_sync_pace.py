"""The pace per host: requests start at least the delay apart, at most N in flight."""

from __future__ import annotations

import pytest

from candor.sync.engine import Run
from candor.sync.polite import MAX_CRAWL_DELAY, HostPacer

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def starts(pacer: HostPacer, clock: Clock, host: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        with pacer.turn(host):
            times.append(clock.now)
    return times


def test_requests_to_one_host_start_the_delay_apart() -> None:
    clock = Clock()
    pacer = HostPacer(0.5, 2, clock=clock, sleep=clock.sleep)

    assert starts(pacer, clock, "docs.example.com", 3) == [100.0, 100.5, 101.0]


def test_hosts_are_paced_apart_from_each_other() -> None:
    clock = Clock()
    pacer = HostPacer(0.5, 2, clock=clock, sleep=clock.sleep)
    with pacer.turn("a.example"):
        pass
    with pacer.turn("b.example"):
        pass
    assert clock.slept == []


def test_a_crawl_delay_slows_its_host_but_never_below_the_setting_nor_past_the_cap() -> None:
    clock = Clock()
    pacer = HostPacer(0.5, 1, clock=clock, sleep=clock.sleep)
    pacer.slow_down("slow.example", 2.0)
    pacer.slow_down("fast.example", 0.1)
    pacer.slow_down("silly.example", 86_400)

    assert starts(pacer, clock, "slow.example", 2)[1] - 100.0 == 2.0
    assert pacer.interval_of("fast.example") == 0.5
    assert pacer.interval_of("silly.example") == MAX_CRAWL_DELAY


def test_a_run_survives_being_saved_as_a_cursor() -> None:
    run = Run("https://docs.example.com/", 1.5, mode="crawl")
    run.todo.extend(["https://docs.example.com/a", "https://docs.example.com/b"])
    run.seen.update(run.todo)
    run.count("failed", "https://docs.example.com/c", "HTTP 500")
    run.incomplete("a note")

    again = Run.from_bytes(run.to_bytes())

    assert again == run
