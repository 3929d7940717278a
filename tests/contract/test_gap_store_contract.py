"""The gaps' store contract: the same assertions on SQLite and DynamoDB Local.

A gap is saved whole, conditioned on the version it was read at; two writers racing
on one version must see exactly one win, which only a real implementation shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from candor.backends.dynamodb_gaps import DynamoDBGaps
from candor.backends.sqlite_gaps import SqliteGaps
from candor.gaps.records import Gap, GapQuestion, GapStore, QuestionCheck
from tests.contract.conftest import StateBacking
from tests.support.concurrency import together

pytestmark = pytest.mark.integration

INDEX = "docs"
NOW = 1_796_083_260.0


@pytest.fixture
def opener(state_backing: StateBacking) -> Callable[[], GapStore]:
    """Opens stores on one shared backing, each as its own process would."""

    def open_store() -> GapStore:
        if state_backing.kind == "sqlite":
            return state_backing.closing(SqliteGaps(state_backing.path))
        return DynamoDBGaps(state_backing.table, client=state_backing.client())

    return open_store


@pytest.fixture
def store(opener: Callable[[], GapStore]) -> GapStore:
    return opener()


def new_gap(gap_id: str = "g0123456789", opened_at: float = NOW) -> Gap:
    question = GapQuestion("How do I set up Git LFS?", "a" * 32, opened_at, "declined")
    return Gap(gap_id, INDEX, "open", opened_at, (), 0).with_questions([question])


def test_a_gap_is_kept_as_written(store: GapStore) -> None:
    gap = dataclasses.replace(
        new_gap(),
        checks=(QuestionCheck("How do I set up Git LFS?", False, "declined", ("x.md",), "no"),),
    )

    assert store.save_gap(gap)

    assert store.get_gap(INDEX, gap.id) == gap
    assert store.list_gaps(INDEX) == [gap]
    assert store.get_gap("other", gap.id) is None


def test_a_new_gap_is_written_once(store: GapStore) -> None:
    assert store.save_gap(new_gap())
    assert not store.save_gap(dataclasses.replace(new_gap(), asked=9))
    stored = store.get_gap(INDEX, "g0123456789")
    assert stored is not None and stored.asked == 1


def test_a_save_needs_the_version_it_was_read_at(store: GapStore) -> None:
    gap = new_gap()
    store.save_gap(gap)
    closed = dataclasses.replace(gap, status="closed", closed_at=NOW, version=2)

    assert store.save_gap(closed)
    assert not store.save_gap(dataclasses.replace(gap, asked=5, version=2))  # read at 1
    assert not store.save_gap(dataclasses.replace(gap, version=4))  # skips one

    assert store.get_gap(INDEX, gap.id) == closed


def test_gaps_list_oldest_first_per_index(store: GapStore) -> None:
    later, earlier = new_gap("g1111111111", NOW + 60), new_gap("g2222222222", NOW)
    store.save_gap(later)
    store.save_gap(earlier)
    store.save_gap(dataclasses.replace(new_gap("g3333333333"), index_name="other"))

    assert [g.id for g in store.list_gaps(INDEX)] == ["g2222222222", "g1111111111"]


def test_of_writers_racing_on_one_version_exactly_one_wins(
    opener: Callable[[], GapStore],
) -> None:
    first = opener()
    gap = new_gap()
    first.save_gap(gap)
    stores = [opener() for _ in range(12)]

    wins = together(
        list(enumerate(stores)),
        lambda pair: pair[1].save_gap(dataclasses.replace(gap, asked=pair[0], version=2)),
    )

    assert sum(wins) == 1
    stored = first.get_gap(INDEX, gap.id)
    assert stored is not None and stored.version == 2
    assert stored.asked == wins.index(True)
