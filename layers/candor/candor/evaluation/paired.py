"""Paired differences between two runs on the same questions, with a bootstrap interval.

Two runs of 28 questions that differ by 0.036 may differ by one question, which is
noise; the same 0.036 from ten questions better and nine worse is noise too. So
each figure is compared question by question: the difference after - before of
each question both runs measured, its mean, and a 95% percentile bootstrap
interval of that mean (the questions resampled with replacement, 10,000 times,
from a fixed seed so that a report is the same every time it is written).

Several sets (dev and validation) pool into one difference: each set is resampled
within itself, and the pooled difference is the question-weighted mean over all
of them, so a set of 150 questions counts for more than one of 28.

The rule that keeps a change (`verdict`), for one figure whose better direction
is declared (higher or lower):

- it *loses on* a set when that set's interval lies entirely on the losing side
  of 0 (the loss is larger than the set's own noise): not kept, whatever the
  pooled figure says;
- otherwise it *helps* when the pooled interval lies entirely on the better side
  of 0: kept;
- otherwise it *loses* when the pooled interval lies entirely on the losing side;
- otherwise the difference is *within noise* (the pooled interval holds 0), or
  there is *no difference* (no question moved): not kept, since nothing shows
  that it helps.

An interval that touches 0 holds it; a comparison on one set is its own pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

RESAMPLES = 10_000
SEED = 20261201
CONFIDENCE = 0.95

# One question's value of a figure: a yes/no (counted as 1/0) or a number.
Values = Mapping[str, bool | float]


@dataclass(frozen=True, slots=True)
class Paired:
    """after - before over the questions both runs measured (`n` of them)."""

    n: int
    before: float | None  # the mean of each run over those questions
    after: float | None
    difference: float | None
    low: float | None  # the 95% interval of `difference`
    high: float | None
    # Questions that moved in the better direction, the worse one, or not at all.
    better: int
    worse: int
    same: int

    def to_json(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "n": self.n,
            "before": rounded(self.before),
            "after": rounded(self.after),
            "difference": rounded(self.difference),
            "low": rounded(self.low),
            "high": rounded(self.high),
            "better": self.better,
            "worse": self.worse,
            "same": self.same,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    kept: bool
    # "helps", "loses on <set>", "loses", "within noise", "no difference", "not measured"
    reason: str


def _matched(before: Values, after: Values) -> tuple[list[float], list[float]]:
    common = sorted(before.keys() & after.keys())
    return [float(before[q]) for q in common], [float(after[q]) for q in common]


def paired(
    before: Values,
    after: Values,
    *,
    higher_is_better: bool,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Paired:
    """after - before on the questions both hold, with its 95% bootstrap interval."""
    return pooled(
        [before], [after], higher_is_better=higher_is_better, resamples=resamples, seed=seed
    )


def pooled(
    before: Sequence[Values],
    after: Sequence[Values],
    *,
    higher_is_better: bool,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Paired:
    """The question-weighted difference over several sets, matched by position.

    Each resample draws every set's questions from that set alone (a stratified
    bootstrap), so the pooled interval keeps each set's size and spread.
    """
    if len(before) != len(after):
        raise ValueError(f"{len(before)} sets before and {len(after)} after")
    rng = np.random.default_rng(seed)
    sums = np.zeros(resamples, dtype=np.float64)
    firsts: list[float] = []
    seconds: list[float] = []
    for old, new in zip(before, after, strict=True):
        first, second = _matched(old, new)
        if not first:
            continue
        moved = np.array(second) - np.array(first)
        draws = rng.integers(0, moved.size, size=(resamples, moved.size))
        sums += moved[draws].sum(axis=1)
        firsts += first
        seconds += second
    n = len(firsts)
    if n == 0:
        return Paired(0, None, None, None, None, None, 0, 0, 0)
    moved = np.array(seconds) - np.array(firsts)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(sums / n, [tail, 100 - tail])
    up, down = int((moved > 0).sum()), int((moved < 0).sum())
    return Paired(
        n=n,
        before=float(np.mean(firsts)),
        after=float(np.mean(seconds)),
        difference=float(moved.mean()),
        low=float(low),
        high=float(high),
        better=up if higher_is_better else down,
        worse=down if higher_is_better else up,
        same=n - up - down,
    )


def _side(result: Paired, *, higher_is_better: bool) -> int:
    """+1 when the interval lies wholly on the better side of 0, -1 on the worse, else 0."""
    if result.low is None or result.high is None:
        return 0
    if result.low > 0:
        return 1 if higher_is_better else -1
    if result.high < 0:
        return -1 if higher_is_better else 1
    return 0


def verdict(per_set: Mapping[str, Paired], pool: Paired, *, higher_is_better: bool) -> Verdict:
    """The module's rule (see its docstring): kept only when it helps and loses nowhere."""
    if pool.n == 0:
        return Verdict(False, "not measured")
    losing = [
        name
        for name, result in per_set.items()
        if _side(result, higher_is_better=higher_is_better) < 0
    ]
    if losing and len(per_set) > 1:
        return Verdict(False, "loses on " + ", ".join(losing))
    side = _side(pool, higher_is_better=higher_is_better)
    if side > 0:
        return Verdict(True, "helps")
    if side < 0:
        return Verdict(False, "loses")
    if pool.better == pool.worse == 0:
        return Verdict(False, "no difference")
    return Verdict(False, "within noise")


def verdict_of_one(result: Paired, *, higher_is_better: bool) -> Verdict:
    """The rule on a single set, which is its own pool."""
    return verdict({"": result}, result, higher_is_better=higher_is_better)
