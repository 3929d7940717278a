"""Answers that cited what has since changed or gone: from the traces and the ingest records."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.graph.state import Citation
from candor.ingest.pipeline import HASH_KEY, complete, delete_document, ingest
from candor.ingest.records import CompletionRecords
from candor.service import ask
from candor.settings import Settings
from candor.stale_citations import StaleCitations, stale_citations
from candor.traces import DOC_HASH_KEY, Trace, traces_since
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

PAGE = "push.md"
V1 = b"# Push\n\nThe --guarded option replaces a remote kite only if it is still the one you saw.\n"
V2 = b"# Push\n\nThe --guarded option was removed; use --force instead.\n"
OTHER = b"# Config\n\nThe push.aviary setting names the default aviary.\n"
QUESTION = "What does --guarded do?"


@pytest.fixture
def site(settings: Settings, tmp_path: Path) -> Iterator[tuple[Deps, CompletionRecords]]:
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(
        tmp_path / "docs.sqlite3", embedder.dimensions, embedder=embedder.name
    )
    state = SqliteStateStore(settings.state_path)
    records = CompletionRecords(state, settings.index_name)
    ingest([(PAGE, V1), ("config.md", OTHER)], embedder=embedder, index=index, records=records)
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It replaces a remote kite only if it is still the one you saw [1]."],
        }
    )
    yield Deps(settings, chat, embedder, index, None, state), records
    index.close()
    state.close()


def answered(deps: Deps) -> Trace:
    result = asyncio.run(ask(deps, QUESTION))
    assert result.decision == "answered" and result.citations[0].source == PAGE
    (trace,) = traces_since(deps.state, 1)
    return trace


def rows(deps: Deps, records: CompletionRecords) -> list[tuple[str, str, bool | None]]:
    found = stale_citations(traces_since(deps.state, 1), StaleCitations(deps.index, records))
    return [(row.source, row.status, row.still_quoted) for row in found]


def test_the_trace_keeps_the_version_of_each_document_it_cited(
    site: tuple[Deps, CompletionRecords],
) -> None:
    deps, records = site
    trace = answered(deps)
    assert DOC_HASH_KEY == HASH_KEY
    assert trace.cited_versions == ((PAGE, records.record(PAGE)),)


def test_an_answer_whose_page_is_unchanged_is_not_listed(
    site: tuple[Deps, CompletionRecords],
) -> None:
    deps, records = site
    answered(deps)
    # Re-ingesting the same bytes changes nothing.
    ingest([(PAGE, V1)], embedder=deps.embedder, index=deps.index, records=records)
    assert rows(deps, records) == []


def test_an_answer_whose_page_was_removed_is_listed(site: tuple[Deps, CompletionRecords]) -> None:
    deps, records = site
    trace = answered(deps)

    complete([delete_document(PAGE, index=deps.index, records=records)], records)

    (row,) = stale_citations(traces_since(deps.state, 1), StaleCitations(deps.index, records))
    assert (row.trace_id, row.question, row.source, row.status) == (
        trace.trace_id,
        QUESTION,
        PAGE,
        "removed",
    )
    assert row.still_quoted is None


def test_an_answer_whose_page_changed_is_listed_with_whether_its_words_remain(
    site: tuple[Deps, CompletionRecords],
) -> None:
    deps, records = site
    answered(deps)

    ingest([(PAGE, V2)], embedder=deps.embedder, index=deps.index, records=records)

    assert rows(deps, records) == [(PAGE, "changed", False)]


def test_without_a_recorded_version_the_quoted_words_decide(
    site: tuple[Deps, CompletionRecords], settings: Settings
) -> None:
    # A trace from the cache (or from before versions were kept) names no version.
    deps, records = site
    quote = "The --guarded option replaces a remote kite only if it is still the one you saw."
    trace = Trace(
        trace_id="f" * 32,
        session_id="s" * 16,
        created_at=1_796_083_260.0,
        decision="answered",
        answer="...",
        question=QUESTION,
        citations=(Citation(f"{'0' * 32}-0", PAGE, "Push", "", quote=quote),),
        cached=True,
    )
    finder = StaleCitations(deps.index, records)
    assert stale_citations([trace], finder) == []

    ingest([(PAGE, V2)], embedder=deps.embedder, index=deps.index, records=records)

    (row,) = stale_citations([trace], StaleCitations(deps.index, records))
    assert (row.status, row.still_quoted) == ("changed", False)


def test_the_owners_curated_answer_is_never_listed(site: tuple[Deps, CompletionRecords]) -> None:
    deps, records = site
    trace = Trace(
        trace_id="e" * 32,
        session_id="s" * 16,
        created_at=1_796_083_260.0,
        decision="answered",
        answer="Mine.",
        question=QUESTION,
        citations=(Citation("curated:a0123456789ab", "curated:a0123456789ab", "x", ""),),
        curated_id="a0123456789ab",
    )
    assert stale_citations([trace], StaleCitations(deps.index, records)) == []
