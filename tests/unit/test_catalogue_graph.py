"""Questions about the documents themselves, through the whole graph: answered from the
catalogue with no model call, cited to the passages where the listed parts start, or
passed on to retrieval (or small talk) when the catalogue cannot answer."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import pytest

from candor import service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_catalogue import SqliteCatalogueStore
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.catalogue.keeping import DocumentCatalogue
from candor.catalogue.reader import Catalogue
from candor.deps import Deps
from candor.errors import StateStoreError
from candor.graph import runner
from candor.ingest.pipeline import ingest
from candor.ingest.records import CompletionRecords
from candor.results import AskResult, Done
from candor.settings import Settings
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

LONG = b"Each setting is read once at start, and a value that cannot be used stops it. " * 12

CONFIGURATION = b"""# Configuration

## Network

%s

| variable | default | what it does |
|---|---|---|
| `EXAMPLE_TIMEOUT` | `30` | seconds before a request fails |
| `EXAMPLE_RETRIES` | `3` | attempts per request |

## Storage

%s

| variable | default | what it does |
|---|---|---|
| `EXAMPLE_DATA_DIR` | `data` | where files are kept |
""" % (LONG, LONG)
DEPLOYING = b"""# Deploying

## Build

Run the build command, then upload the archive to your server.

## Upgrade

Stop the service, replace the archive and start it again.
"""


@pytest.fixture
def site(settings: Settings) -> Iterator[tuple[Settings, SqliteVectorIndex, SqliteStateStore]]:
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    state = SqliteStateStore(settings.state_path)
    store = SqliteCatalogueStore(settings.state_path)
    report = ingest(
        [("configuration.md", CONFIGURATION), ("deploying.md", DEPLOYING)],
        embedder=embedder,
        index=index,
        records=CompletionRecords(state, settings.index_name),
        catalogue=DocumentCatalogue(store, settings.index_name),
        source_base_url="https://docs.example.com/",
    )
    assert not report.failures
    yield settings, index, state
    store.close()
    state.close()
    index.close()


def deps_for(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
    chat: ScriptedChatModel,
    *,
    screening: bool = True,
    catalogue: bool = True,
) -> Deps:
    settings, index, state = site
    settings = settings.model_copy(update={"screening": screening})
    reader = Catalogue(SqliteCatalogueStore(settings.state_path), settings.index_name)
    return Deps(
        settings,
        chat,
        HashingEmbedder(),
        index,
        None,
        state,
        catalogue=reader if catalogue else None,
    )


def ask(deps: Deps, question: str) -> AskResult:
    return asyncio.run(service.ask(deps, question))


def test_every_setting_is_listed_from_the_catalogue_with_no_model_call(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    chat = ScriptedChatModel()  # any model call would fail the test

    result = ask(deps_for(site, chat), "List all the settings.")

    assert result.decision == "answered"
    assert chat.calls == []
    # Network starts in the page's first passage, which [1] cites already.
    assert result.answer.splitlines() == [
        "Configuration lists 3 settings [1]:",
        "- Network: `EXAMPLE_TIMEOUT`, `EXAMPLE_RETRIES`",
        "- Storage [2]: `EXAMPLE_DATA_DIR`",
    ]
    assert [c.source for c in result.citations] == ["configuration.md"] * 2
    assert [c.quote for c in result.citations] == ["Configuration", "Storage"]
    assert result.citations[0].url == "https://docs.example.com/configuration.md"
    assert result.citations[0].id != result.citations[1].id
    assert [step.node for step in result.trace] == ["moderate", "route", "catalogue"]


def test_the_triage_call_can_name_a_catalogue_question(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "catalogue"}]})

    result = ask(deps_for(site, chat, screening=False), "What does the deploying page cover?")

    assert result.decision == "answered"
    assert chat.kinds() == ["Triage"]
    assert result.answer.splitlines() == [
        "Deploying has these sections [1]:",
        "- Build",
        "- Upgrade",
    ]


def test_what_can_you_help_with_names_the_documents_topics(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    # Screened as a greeting by the model: still the site's real topics, not small talk.
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "greeting"}]})

    result = ask(deps_for(site, chat, screening=False), "What can you help me with?")

    assert result.decision == "answered"
    assert result.answer.splitlines() == [
        "I answer questions from the documents of Example Docs.",
        "They cover 2 pages:",
        "- Configuration [1]: Network; Storage",
        "- Deploying [2]: Build; Upgrade",
    ]
    assert [c.source for c in result.citations] == ["configuration.md", "deploying.md"]


def test_without_a_catalogue_what_can_you_help_with_is_small_talk(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "greeting"}],
            "text": ["Happy to help with questions about the documentation."],
        }
    )

    result = ask(
        deps_for(site, chat, screening=False, catalogue=False), "What can you help me with?"
    )

    assert result.decision == "smalltalk"


def test_a_catalogue_question_the_catalogue_cannot_answer_goes_to_retrieval(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "catalogue"}],
            "judge": [True],
            "text": ["Run the build command, then upload the archive [1]."],
        }
    )

    result = ask(deps_for(site, chat, screening=False), "List the steps to upgrade.")

    assert [step.node for step in result.trace][:4] == [
        "moderate",
        "route",
        "catalogue",
        "retrieve",
    ]
    assert result.decision == "answered"


def test_a_catalogue_that_cannot_be_read_leaves_the_question_to_retrieval(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    class Unreadable(SqliteCatalogueStore):
        def catalogue(self, index_name: str) -> list[bytes]:
            raise StateStoreError("the table is gone (test)")

    settings = site[0]
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "catalogue"}],
            "judge": [True],
            "text": ["`EXAMPLE_TIMEOUT` is the seconds before a request fails [1]."],
        }
    )
    broken = Catalogue(Unreadable(settings.state_path), settings.index_name)
    deps = dataclasses.replace(deps_for(site, chat, screening=False), catalogue=broken)

    result = ask(deps, "List all the settings.")

    assert "retrieve" in [step.node for step in result.trace]
    assert result.decision == "answered"


def test_a_content_question_is_not_answered_with_a_list(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["`EXAMPLE_TIMEOUT` sets the seconds before a request fails [1]."],
        }
    )

    result = ask(deps_for(site, chat, screening=False), "Which setting changes the timeout?")

    assert "catalogue" not in [step.node for step in result.trace]
    assert result.answer.startswith("`EXAMPLE_TIMEOUT`")


def test_a_citation_whose_passage_is_gone_is_dropped_and_the_rest_renumbered(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    index = site[1]
    chat = ScriptedChatModel()
    deps = deps_for(site, chat)
    # The passages of the configuration page past its first are gone (a half-finished
    # re-ingest): its sections are cited to its first passage instead, once.
    ids = [
        chunk.id
        for chunk in index.fetch(list(index.list_ids()))
        if chunk.source == "configuration.md"
    ]
    first = min(ids, key=lambda cid: int(cid.rsplit("-", 1)[1]))
    assert len(ids) > 1
    index.delete([cid for cid in ids if cid != first])

    result = ask(deps, "List all the settings.")

    assert result.decision == "answered"
    assert [c.id for c in result.citations] == [first]
    assert result.answer.splitlines()[2] == "- Storage: `EXAMPLE_DATA_DIR`"


def test_a_catalogue_answer_streams_as_a_written_answer_does(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    deps = deps_for(site, ScriptedChatModel())

    async def streamed() -> tuple[str, str]:
        prepared = await service.prepare(deps, "List all the settings.")
        text, answer = [], ""
        async for event in prepared.events():
            if isinstance(event, runner.TokenEvent):
                text.append(event.text)
            elif isinstance(event, Done):
                answer = event.result.answer
        return "".join(text), answer

    tokens, answer = asyncio.run(streamed())

    assert tokens.strip() == answer


def test_candor_eval_counts_a_catalogue_answers_citations_as_valid(
    site: tuple[Settings, SqliteVectorIndex, SqliteStateStore],
) -> None:
    # The eval held a citation valid only when a query had returned its passage; the
    # catalogue fetches the passages it cites, so its every citation counted invalid.
    from candor.evaluation.instruments import CountingChatModel, RecordingIndex
    from candor.evaluation.questions import Question
    from candor.evaluation.runner import evaluate_agent

    deps = deps_for(site, ScriptedChatModel())
    deps = dataclasses.replace(
        deps, chat=CountingChatModel(deps.chat), index=RecordingIndex(deps.index)
    )
    question = Question(
        "c1", "List all the settings.", "list", ("configuration.md",), entries=("EXAMPLE_RETRIES",)
    )

    (record,) = evaluate_agent([question], deps, bar=False, timeout=60)

    assert record.decision == "answered", record.error
    assert record.cited_sources == ("configuration.md", "configuration.md")
    assert record.citations_valid == 2
