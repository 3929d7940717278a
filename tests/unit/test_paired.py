"""Paired differences, their bootstrap intervals and the rule that keeps a change."""

from __future__ import annotations

import pytest

from candor.evaluation.paired import Paired, paired, pooled, verdict, verdict_of_one

pytestmark = pytest.mark.unit


def run(n: int, right: int, prefix: str = "q") -> dict[str, bool | float]:
    """n questions, the first `right` of them right."""
    return {f"{prefix}{i}": i < right for i in range(n)}


def test_identical_runs_differ_by_zero_with_an_interval_of_zero() -> None:
    result = paired(run(28, 9), run(28, 9), higher_is_better=True)
    assert (result.n, result.difference, result.low, result.high) == (28, 0.0, 0.0, 0.0)
    assert (result.better, result.worse, result.same) == (0, 0, 28)
    assert verdict_of_one(result, higher_is_better=True).reason == "no difference"


def test_ten_of_28_questions_turned_right_is_an_interval_above_zero() -> None:
    result = paired(run(28, 0), run(28, 10), higher_is_better=True)
    assert result.before == 0.0 and result.after == pytest.approx(10 / 28)
    assert result.low is not None and result.high is not None
    assert 0 < result.low < result.difference < result.high  # type: ignore[operator]
    assert (result.better, result.worse, result.same) == (10, 0, 18)
    assert verdict_of_one(result, higher_is_better=True).kept


def test_one_question_of_28_is_within_noise() -> None:
    result = paired(run(28, 0), run(28, 1), higher_is_better=True)
    assert result.low == 0.0 and result.high is not None and result.high > 0
    judged = verdict_of_one(result, higher_is_better=True)
    assert not judged.kept and judged.reason == "within noise"


def test_fewer_declines_count_as_better_when_lower_is_better() -> None:
    # Declined (True) on 12 questions before, on 2 after.
    result = paired(run(28, 12), run(28, 2), higher_is_better=False)
    assert result.difference is not None and result.difference < 0
    assert (result.better, result.worse) == (10, 0)
    assert verdict_of_one(result, higher_is_better=False).reason == "helps"
    # The same move of a figure where higher is better loses.
    assert verdict_of_one(result, higher_is_better=True).reason == "loses"


def test_only_the_questions_both_runs_measured_are_paired() -> None:
    before = {"a": 1.0, "b": 2.0, "c": 3.0}
    after = {"b": 5.0, "c": 3.0, "d": 9.0}
    result = paired(before, after, higher_is_better=False)
    assert result.n == 2
    assert result.difference == 1.5  # b: +3, c: 0
    assert (result.better, result.worse, result.same) == (0, 1, 1)


def test_no_question_in_common_is_not_measured() -> None:
    result = paired({"a": True}, {"b": True}, higher_is_better=True)
    assert result == Paired(0, None, None, None, None, None, 0, 0, 0)
    assert verdict({"dev": result}, result, higher_is_better=True).reason == "not measured"


def test_a_report_written_twice_gives_the_same_interval() -> None:
    before = {f"q{i}": float(i % 7) for i in range(40)}
    after = {f"q{i}": float((i * 3) % 5) for i in range(40)}
    first = paired(before, after, higher_is_better=True)
    assert first.low is not None and first.low < first.high  # type: ignore[operator]
    assert paired(before, after, higher_is_better=True) == first
    assert paired(before, after, higher_is_better=True, seed=7) == paired(
        before, after, higher_is_better=True, seed=7
    )


def test_the_pooled_difference_is_the_mean_over_every_question_of_every_set() -> None:
    big = pooled(
        [run(100, 0, "a"), run(10, 0, "b")],
        [run(100, 100, "a"), run(10, 0, "b")],
        higher_is_better=True,
    )
    together = paired(
        run(100, 0, "a") | run(10, 0, "b"),
        run(100, 100, "a") | run(10, 0, "b"),
        higher_is_better=True,
    )
    assert big.n == together.n == 110
    assert big.difference == together.difference
    # Each set is resampled within itself, so every resample holds 100 questions of
    # the first set, all of which moved: the pooled interval is that one value (a
    # bootstrap over all 110 at once would draw more or fewer of them).
    assert big.low == pytest.approx(100 / 110) and big.high == pytest.approx(100 / 110)


def test_pooling_decides_what_neither_set_can_alone() -> None:
    dev = (run(28, 0, "d"), run(28, 3, "d"))
    validation = (run(28, 0, "v"), run(28, 3, "v"))
    per_set = {
        "dev": paired(*dev, higher_is_better=True),
        "validation": paired(*validation, higher_is_better=True),
    }
    pool = pooled([dev[0], validation[0]], [dev[1], validation[1]], higher_is_better=True)
    assert all(result.low == 0.0 for result in per_set.values())  # each within noise
    assert pool.low is not None and pool.low > 0
    assert verdict(per_set, pool, higher_is_better=True).reason == "helps"


def test_a_change_that_helps_pooled_but_loses_beyond_its_interval_on_one_set_is_not_kept() -> None:
    dev = (run(150, 0, "d"), run(150, 60, "d"))  # 60 of 150 better
    validation = (run(28, 10, "v"), run(28, 0, "v"))  # 10 of 28 worse
    per_set = {
        "dev": paired(*dev, higher_is_better=True),
        "validation": paired(*validation, higher_is_better=True),
    }
    pool = pooled([dev[0], validation[0]], [dev[1], validation[1]], higher_is_better=True)
    assert pool.low is not None and pool.low > 0  # the pool alone would say it helps
    judged = verdict(per_set, pool, higher_is_better=True)
    assert not judged.kept and judged.reason == "loses on validation"


def test_a_loss_within_one_sets_interval_does_not_stop_a_pooled_gain() -> None:
    dev = (run(150, 0, "d"), run(150, 60, "d"))
    validation = (run(28, 1, "v"), run(28, 0, "v"))  # one question worse: noise
    per_set = {
        "dev": paired(*dev, higher_is_better=True),
        "validation": paired(*validation, higher_is_better=True),
    }
    pool = pooled([dev[0], validation[0]], [dev[1], validation[1]], higher_is_better=True)
    judged = verdict(per_set, pool, higher_is_better=True)
    assert judged.kept and judged.reason == "helps"


def test_pooled_sets_must_be_matched_one_to_one() -> None:
    with pytest.raises(ValueError, match="2 sets before and 1 after"):
        pooled([run(3, 1), run(3, 1)], [run(3, 1)], higher_is_better=True)
