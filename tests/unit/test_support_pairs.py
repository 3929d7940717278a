"""Pairs that belong together: specifics of one answer sentence that name each other
(a code and its name, a command and its lock mode, a setting and its default) must
stand in one block of one passage, not merely each somewhere in what is cited.

The passages are written for these tests (a table of error codes, a table of
commands and their locks, a list of settings with their defaults); no case comes
from the evaluation sets' questions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from candor import service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.graph import pairs
from candor.graph.citations import citation
from candor.graph.support import Verified, verify
from candor.settings import Settings
from candor.types import Chunk, Hit
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

ERROR_CODES = Chunk(
    "errcodes-0",
    "Class 55 - Object Not In Prerequisite State\n"
    "Error Code | Condition Name\n"
    "55000 | object_not_in_prerequisite_state\n"
    "55006 | object_in_use\n"
    "55P02 | cant_change_runtime_param\n"
    "55P03 | lock_not_available\n"
    "55P04 | unsafe_new_enum_value_usage",
    "errcodes.html",
    "Error Codes",
    "Class 55",
)
LOCKS = Chunk(
    "locks-0",
    "| Command | Lock mode |\n"
    "|---|---|\n"
    "| `SELECT` | `ACCESS SHARE` |\n"
    "| `CREATE INDEX` | `SHARE` |\n"
    "| `VACUUM` | `SHARE UPDATE EXCLUSIVE` |\n"
    "| `ALTER TABLE` | `ACCESS EXCLUSIVE` |",
    "locks.md",
    "Table-level locks",
    "Locks taken by each command",
)
SETTINGS = Chunk(
    "settings-0",
    "The replication settings, with their defaults:\n"
    "- `max_wal_senders`: the most concurrent connections from standby servers. "
    "Default 10.\n"
    "- `max_replication_slots`: the most replication slots the server can hold. "
    "Default 12.\n"
    "- `wal_keep_size`: the least size of past WAL files kept. Default 0.",
    "replication.md",
    "Replication",
    "Sending servers",
)
# A definition entry is a section of its own, named by its term (the HTML loader
# writes a manual's top-level definition lists so): the label holds the term.
ENTRY = Chunk(
    "entry-0",
    "Sets the most concurrent connections from standby servers. The default is 10.",
    "config.html",
    "Server configuration",
    "Replication > max_wal_senders (integer)",
)
OTHER_ENTRY = Chunk(
    "entry-1",
    "Sets the most replication slots the server can hold. The default is 12.",
    "config.html",
    "Server configuration",
    "Replication > max_replication_slots (integer)",
)


def checked(answer: str, chunks: list[Chunk], question: str = "?") -> Verified:
    hits = [Hit(chunk, 0.0) for chunk in chunks]
    cited = [citation(hit) for hit in hits]
    return verify(answer, cited, hits, question, passage_chars=2000)


# -- the defects -------------------------------------------------------------------


def test_a_code_paired_with_the_condition_name_two_rows_away_is_removed() -> None:
    # 55P03 and unsafe_new_enum_value_usage both stand in the cited table, each in
    # its own row: the check of specifics one by one passed this answer.
    answer = (
        "Error code 55P03 belongs to class 55 [1]. "
        "The condition name for error code 55P03 is unsafe_new_enum_value_usage [1]."
    )
    result = checked(answer, [ERROR_CODES], "What is the condition name for 55P03?")
    assert result.answer == "Error code 55P03 belongs to class 55 [1]."
    assert result.check.unpaired == ("55P03 + unsafe_new_enum_value_usage",)
    assert result.check.removed == (
        "The condition name for error code 55P03 is unsafe_new_enum_value_usage [1].",
    )
    assert result.check.unsupported == ()


def test_a_command_given_the_lock_mode_of_another_command_in_the_table_is_removed() -> None:
    # SHARE is the lock of CREATE INDEX, in another row of the same table.
    answer = "`ALTER TABLE` takes a `SHARE` lock [1]."
    result = checked(answer, [LOCKS], "Which lock does ALTER TABLE take?")
    assert result.check.declined
    assert result.answer == ""
    assert result.check.unpaired == ("ALTER TABLE + SHARE",)


def test_a_lock_mode_written_without_backticks_is_read_as_a_pair_too() -> None:
    result = checked("ALTER TABLE acquires a SHARE UPDATE EXCLUSIVE lock [1].", [LOCKS])
    assert result.check.declined
    assert result.check.unpaired == ("ALTER TABLE + SHARE UPDATE EXCLUSIVE",)


def test_a_setting_given_the_default_of_the_next_setting_in_a_list_is_removed() -> None:
    answer = (
        "`max_wal_senders` limits the concurrent connections from standby servers [1]. "
        "The default value of `max_wal_senders` is 12 [1]."
    )
    result = checked(answer, [SETTINGS], "What is the default of max_wal_senders?")
    assert result.answer == (
        "`max_wal_senders` limits the concurrent connections from standby servers [1]."
    )
    assert result.check.unpaired == ("max_wal_senders + 12",)


def test_a_setting_given_the_default_of_another_definition_entry_is_removed() -> None:
    # Each entry holds its own default; the answer cites both and pairs them crosswise.
    answer = "The default of `max_wal_senders` is 12 [1][2]."
    result = checked(answer, [ENTRY, OTHER_ENTRY])
    assert result.check.declined
    assert result.check.unpaired == ("max_wal_senders + 12",)


def test_a_wrong_pair_through_the_graph_is_declined(
    make_deps: MakeDeps, lock_index: SqliteVectorIndex
) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["`VACUUM` takes an `ACCESS EXCLUSIVE` lock [1]."],
        }
    )
    result = asyncio.run(service.ask(make_deps(chat), "Which lock does VACUUM take?"))
    assert result.decision == "declined"
    assert result.citations == ()
    assert result.support is not None
    assert result.support.unpaired == ("VACUUM + ACCESS EXCLUSIVE",)


# -- what stays ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "chunks"),
    [
        ("The condition name for error code 55P03 is lock_not_available [1].", [ERROR_CODES]),
        ("Error 55P03 (lock_not_available) means a lock could not be taken [1].", [ERROR_CODES]),
        ("`CREATE INDEX` takes a `SHARE` lock [1].", [LOCKS]),
        ("ALTER TABLE acquires an ACCESS EXCLUSIVE lock [1].", [LOCKS]),
        ("The default value of `max_wal_senders` is 10 [1].", [SETTINGS]),
        ("The default of `max_replication_slots` is 12 [1].", [ENTRY, OTHER_ENTRY]),
    ],
)
def test_a_pair_one_row_item_or_entry_holds_is_kept(answer: str, chunks: list[Chunk]) -> None:
    result = checked(answer, chunks)
    assert result.answer == answer
    assert result.check.unpaired == ()
    assert result.check.verdict == "supported"


def test_specifics_listed_together_are_not_a_pair() -> None:
    # Two commands named side by side, a command put together with the page's
    # options: each stands somewhere, and none is said to be the other's value.
    answer = "`SELECT` and `VACUUM` take different locks; so do `CREATE INDEX`, `ALTER TABLE` [1]."
    result = checked(answer, [LOCKS])
    assert result.answer == answer
    assert pairs.linked_pairs("Run `git log --oneline --graph` [1].") == []
    assert pairs.linked_pairs("Use `git format-patch` with the `--base=auto` option [1].") == []


def test_code_is_not_read_for_pairs() -> None:
    # An example's values are its own choice: `--depth=1`, `x = 10`, a line of code.
    assert pairs.linked_pairs("Clone with `git clone --depth=12 URL` [1].") == []
    assert pairs.linked_pairs("It inserts `x = 10` [1].") == []
    answer = (
        "Take the lock explicitly:\n"
        "```sql\nSELECT name FROM t; -- CREATE INDEX: ACCESS SHARE lock\n```"
    )
    result = checked(answer + " [1]", [LOCKS])
    assert result.check.unpaired == ()
    assert result.check.removed == ()


def test_a_pair_the_cited_passage_holds_apart_is_cited_to_the_passage_that_binds_it() -> None:
    # The model cited the list (where 10 and max_replication_slots both stand, in
    # different items); the entry shown as passage 2 gives this very pair.
    hits = [Hit(SETTINGS, 0.0), Hit(OTHER_ENTRY, 0.0)]
    answer = "The default of `max_replication_slots` is 12 [1]."
    wrong = "The default of `max_replication_slots` is 10 [1]."
    kept = verify(answer, [citation(hits[0])], hits, "?", passage_chars=2000)
    assert kept.answer == answer
    removed = verify(wrong, [citation(hits[0])], hits, "?", passage_chars=2000)
    assert removed.check.declined
    assert removed.check.unpaired == ("max_replication_slots + 10",)
    # 12 is the entry's, not the list's: passage 2 binds it, and the sentence is cited to it.
    entry_first = verify(answer, [citation(hits[1])], hits[::-1], "?", passage_chars=2000)
    assert entry_first.answer == answer


def test_a_pair_in_two_passages_is_apart() -> None:
    # The code from one page and a name from another: no block holds both.
    other = Chunk("codes-1", "lock_timeout | aborts a wait for a lock", "c.html", "Settings")
    answer = "Error code 55P04 is lock_timeout [1][2]."
    result = checked(answer, [ERROR_CODES, other])
    assert result.check.declined
    assert result.check.unpaired == ("55P04 + lock_timeout",)


def test_a_pair_whose_one_side_only_the_question_names_is_judged_by_its_specifics() -> None:
    answer = "The default of `max_wal_senders` is 10 [1]."
    chunk = Chunk("x-0", "The default is 10 connections.", "x.html", "Replication")
    assert checked(answer, [chunk], "What is the default of max_wal_senders?").answer == answer


# -- blocks --------------------------------------------------------------------------


def test_packed_rows_on_either_side_of_a_skip_stay_two_blocks() -> None:
    # Packing writes " … " where it skipped text, which may be rows between two rows.
    text = "55P02 | cant_change_runtime_param … 55P04 | unsafe_new_enum_value_usage"
    assert pairs.blocks(text) == [
        "55P02 | cant_change_runtime_param",
        "55P04 | unsafe_new_enum_value_usage",
    ]


def test_a_term_line_and_the_text_under_it_are_one_block() -> None:
    text = (
        "gc.auto\nWhen there are more loose objects than this, pack them.\n"
        "The default value is 6700.\ngc.autoPackLimit\nThe default value is 50."
    )
    assert pairs.blocks(text) == [
        "gc.auto\nWhen there are more loose objects than this, pack them.\n"
        "The default value is 6700.",
        "gc.autoPackLimit\nThe default value is 50.",
    ]


@pytest.fixture
def lock_index(index: SqliteVectorIndex, settings: Settings) -> Iterator[SqliteVectorIndex]:
    """The shared test index, with the lock table in it."""
    embedder = HashingEmbedder()
    index.upsert([LOCKS], embedder.embed([LOCKS.text]))
    yield index
