"""The grounding gate: code-like names in a question, looked up in the passages and the index."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.graph import grounding, proper_names
from candor.graph.state import GroundingCheck
from candor.types import Chunk, Hit, Rankings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("What does `git push --force-with-lease` do?", ["git push", "--force-with-lease"]),
        ("What is the default value of gc.auto?", ["gc.auto"]),
        ("Does PRAGMA wal_compression exist?", ["wal_compression"]),
        ("What does SQLITE_MISUSE mean?", ["SQLITE_MISUSE"]),
        ("What new features came with Git 3.5?", ["3.5"]),
        ("Which exit code 125 or error 21?", ["125", "21"]),
        ("How do I use the .import command?", [".import"]),
        ("What is the difference between sum() and total()?", ["sum", "total"]),
        ("What does `.mode yaml` print?", [".mode yaml", ".mode"]),
        ("What line does `git cherry-pick -x` add?", ["git cherry-pick", "-x"]),
    ],
)
def test_code_like_names_are_found_in_a_question(question: str, names: list[str]) -> None:
    assert grounding.code_names(question) == names


@pytest.mark.parametrize(
    "question",
    [
        "How do I take back my last commit but keep my edits?",
        "Why is my build.log tracked, e.g. after a clean?",
        "What does the A...B notation mean?",
        "Is Git LFS supported?",  # an acronym is a word the documents may spell out
    ],
)
def test_words_file_names_and_notations_are_not_names(question: str) -> None:
    assert grounding.code_names(question) == []


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("How do I turn on branch protection on GitHub?", ["GitHub"]),
        ("How do I set up Litestream to replicate my database to S3?", ["Litestream"]),
        ("How do I open an SQLCipher-encrypted database?", ["SQLCipher"]),
        (
            "Can I push to Bitbucket Cloud from Visual Studio Code?",
            ["Bitbucket Cloud", "Visual Studio Code"],
        ),
        ("Bitbucket Cloud rejects my push. Why?", ["Bitbucket Cloud"]),
        ("Does it run on AWS Lambda, macOS or Windows?", ["AWS Lambda", "macOS", "Windows"]),
        ("Is GitHub's web editor the same as GitHub?", ["GitHub"]),
    ],
)
def test_product_and_project_names_are_found_in_a_question(question: str, names: list[str]) -> None:
    assert proper_names.product_names(question) == names


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Rebase or merge: which keeps history linear?", []),  # a sentence's first word
        ("I pushed on Monday. Then what? Nothing. Please help, thanks!", []),
        ("How Do I Reset My Branch To The Remote?", []),  # title case
        ("Is Git's LFS the same as SQL?", ["Git"]),  # acronyms alone are not names
        ("What does `Bitbucket` print?", []),  # code, read by code_names
        ('What does "Already up to date" mean?', []),  # a quoted message opens a sentence
        ("Why are my row IDs and URLs reused?", []),  # plural acronyms
        ("**Track Used Rows**: keep a list of them.", []),  # a bold heading
    ],
)
def test_first_words_courtesies_title_case_acronyms_and_code_are_not_product_names(
    question: str, names: list[str]
) -> None:
    assert proper_names.product_names(question) == names


def test_a_product_name_is_held_in_any_case_and_before_digits_but_not_inside_a_word() -> None:
    assert proper_names.holds("run sqlite3 test.db", "SQLite")
    assert proper_names.holds("hosted on github or elsewhere", "GitHub")
    assert proper_names.holds("see visual-studio-code", "Visual Studio Code")
    assert not proper_names.holds("raw.githubusercontent.com", "GitHub")


def test_a_name_is_mentioned_in_any_case_and_with_a_hyphen_for_a_space() -> None:
    assert grounding.mentions("See git-range-diff(1).", "git range-diff")
    assert grounding.mentions("push.autoSetupRemote: if true", "push.autosetupremote")
    assert grounding.mentions("Released as v3.5.1 in May", "3.5")


def test_a_name_inside_a_longer_name_or_number_is_not_mentioned() -> None:
    assert not grounding.mentions("PRAGMA wal_autocheckpoint", "wal")
    assert not grounding.mentions("exit with 1125", "125")
    assert not grounding.mentions("version 13.5", "3.5")
    assert not grounding.mentions("--force-if-includes", "--force-if-newer")


def hit(cid: str, text: str, source: str = "page.html") -> Hit:
    return Hit(Chunk(cid, text, source, source.removesuffix(".html")), 0.0)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SqliteVectorIndex]:
    embedder = HashingEmbedder()
    chunks = [
        Chunk("d-0", "gc.auto: above this many loose objects gc runs. Default 6700.", "gc.html"),
        Chunk("d-1", "Loose objects are packed by git gc.", "gc.html"),
        Chunk("d-2", "git commit --amend replaces the tip of the branch.", "commit.html"),
        Chunk(
            "d-3",
            "Hosting services such as github keep a bare repository in the cloud.",
            "hosting.html",
        ),
        Chunk(
            "d-4", "In the Visual editor, open the Studio window and the Code menu.", "editor.html"
        ),
    ]
    index = SqliteVectorIndex(tmp_path / "index.sqlite3", embedder.dimensions)
    index.upsert(chunks, embedder.embed([c.text for c in chunks]))
    yield index
    index.close()


def check(
    question: str, passages: list[Hit], index: SqliteVectorIndex, top_k: int = 2
) -> tuple[GroundingCheck, tuple[Hit, ...]]:
    found, shown, _ = asyncio.run(
        grounding.check(question, passages, index, passage_chars=600, top_k=top_k)
    )
    return found, shown


def test_a_name_in_the_passages_shown_changes_nothing(index: SqliteVectorIndex) -> None:
    shown = [hit("d-0", "gc.auto: above this many loose objects gc runs. Default 6700.")]
    found, passages = check("What is gc.auto?", shown, index)
    assert found.shown == ("gc.auto",) and not found.in_index and not found.absent
    assert passages == tuple(shown)


def test_a_name_only_in_the_index_brings_its_passage_first(index: SqliteVectorIndex) -> None:
    shown = [hit("d-1", "Loose objects are packed by git gc."), hit("d-2", "git commit --amend")]
    found, passages = check("What is the default of gc.auto?", shown, index)
    assert found.in_index == ("gc.auto",) and found.added == ("d-0",)
    assert [p.chunk.id for p in passages] == ["d-0", "d-1"]  # cut to top_k


def test_a_name_in_no_document_is_absent(index: SqliteVectorIndex) -> None:
    shown = [hit("d-0", "gc.auto: above this many loose objects gc runs. Default 6700.")]
    found, passages = check("What does gc.autoCompact do, unlike gc.auto?", shown, index)
    assert found.absent == ("gc.autoCompact",)
    assert found.shown == ("gc.auto",)
    assert passages == tuple(shown)


def test_the_name_beyond_the_shown_part_of_a_passage_is_not_shown(
    index: SqliteVectorIndex,
) -> None:
    # The model reads the first passage_chars of a passage; a name past them is not shown.
    long = hit("d-9", "Loose objects are packed. " + "x " * 400 + "gc.auto is here")
    found, _, _ = asyncio.run(
        grounding.check("What is gc.auto?", [long], index, passage_chars=100, top_k=2)
    )
    assert found.shown == () and found.in_index == ("gc.auto",)


class DenseOnly:
    """An index whose keyword ranking is always empty, like Pinecone without a sparse index."""

    def __init__(self, inner: SqliteVectorIndex) -> None:
        self.inner = inner

    def query(self, **kw: Any) -> Rankings:
        rankings = self.inner.query(**kw)
        return Rankings(dense=rankings.dense, keyword=[])


def test_an_index_without_keyword_search_cannot_make_the_gate_decline(
    index: SqliteVectorIndex,
) -> None:
    shown = [hit("d-1", "Loose objects are packed by git gc.")]
    found, passages, _ = asyncio.run(
        grounding.check(
            "What does gc.autoCompact do?",
            shown,
            DenseOnly(index),  # type: ignore[arg-type]
            passage_chars=600,
            top_k=2,
        )
    )
    assert found.absent == () and found.unchecked == ("gc.autoCompact",)
    assert passages == tuple(shown)


# -- product names -------------------------------------------------------------

GC_SHOWN = [hit("d-1", "Loose objects are packed by git gc.")]


def test_a_product_no_document_names_is_absent(index: SqliteVectorIndex) -> None:
    # A third-party product on documents that never name it: the gate declines.
    found, passages = check("How do I set up Litestream to back up after git gc?", GC_SHOWN, index)
    assert found.absent == ("Litestream",)
    assert found.products == ("Litestream",)
    assert passages == tuple(GC_SHOWN)


def test_a_product_the_index_names_in_another_case_is_brought_in_not_declined(
    index: SqliteVectorIndex,
) -> None:
    found, passages = check("Does git gc run on GitHub?", GC_SHOWN, index)
    assert found.absent == ()
    assert found.in_index == ("GitHub",) and found.products == ("GitHub",)
    assert [p.chunk.id for p in passages] == ["d-3", "d-1"]


def test_a_multiword_name_is_absent_only_when_one_of_its_words_is(
    index: SqliteVectorIndex,
) -> None:
    # No document says "Visual Studio Code", but each of its words is held somewhere...
    held, _ = check("Can I run git gc from Visual Studio Code?", GC_SHOWN, index)
    assert held.absent == ()
    # ... while no document holds "Bitbucket" at all.
    found, _ = check("Can I run git gc on Bitbucket Cloud?", GC_SHOWN, index)
    assert found.absent == ("Bitbucket",)


def test_a_name_the_passages_shown_hold_is_shown_without_a_lookup(
    index: SqliteVectorIndex,
) -> None:
    shown = [hit("x-1", "Pushing to GitHub works like any remote.")]
    found, passages = check("How do I push to GitHub?", shown, index)
    assert found.shown == ("GitHub",) and found.in_index == () and found.absent == ()
    assert passages == tuple(shown)


def test_a_name_no_document_holds_is_absent_in_an_index_full_of_its_words(
    tmp_path: Path,
) -> None:
    # Regression of 6fcb4d4: a name was absent only when the lookup returned fewer
    # chunks than it asked for. In a real manual the words of "CREATE PROCEDURE",
    # "PRAGMA key" or "SQLCipher"'s neighbours fill any lookup, so no name was ever
    # absent: validation's sqlite-026 and sqlite-032, declined by the gate on
    # 2026-12-05, were answered from unrelated passages on 2026-12-06.
    embedder = HashingEmbedder()
    full = grounding.MAX_LOOKUP_CANDIDATES + 10
    chunks = [
        Chunk(f"c-{n}", f"CREATE TABLE t{n} makes a table. PRAGMA key_{n} sets a key.", "x.html")
        for n in range(full)
    ]
    chunks += [Chunk(f"o-{n}", f"Other page {n} on backups.", "o.html") for n in range(2 * full)]
    index = SqliteVectorIndex(tmp_path / "full.sqlite3", embedder.dimensions)
    index.upsert(chunks, embedder.embed([c.text for c in chunks]))
    try:
        shown = [hit("c-0", chunks[0].text, "x.html")]
        found, _ = check("How do I write a stored procedure with `CREATE PROCEDURE`?", shown, index)
        assert found.absent == ("CREATE PROCEDURE",)
        both, _ = check("How do I give SQLCipher its passphrase with `PRAGMA key`?", shown, index)
        assert set(both.absent) == {"PRAGMA key", "SQLCipher"}
        # A name the index holds, among as many chunks of its words, is still found.
        held, _ = check("What does `CREATE TABLE` do with `PRAGMA key_7`?", [], index)
        assert held.absent == ()
    finally:
        index.close()
