"""A question's embeddings are metered in its trace and charged to the budget.

The OpenAI embedder against the OpenAI-wire test server, which bills a token per
word; the chat model is scripted and free, so what the ledger holds is the
embeddings alone: the question's, and the sentences retrieve packs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor import guards, service
from candor.backends.openai_embedder import OpenAIEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import PASSAGES
from tests.support.fakes import ScriptedChatModel
from tests.support.openai_server import RunningOpenAI, serve

pytestmark = pytest.mark.integration

QUESTION = "What does --force-with-lease do?"


@pytest.fixture
def server() -> Iterator[RunningOpenAI]:
    with serve() as running:
        yield running


def test_the_question_and_packing_embeddings_are_in_the_trace_and_on_the_ledger(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    price = DEFAULT_PRICES["text-embedding-3-small"]
    embedder = OpenAIEmbedder(
        model="text-embedding-3-small",
        api_key="sk-test",
        price=price,
        base_url=server.base_url,
        dimensions=64,
    )
    settings = Settings(
        data_dir=tmp_path,
        embedder_backend="openai",
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
    )
    index = SqliteVectorIndex(settings.index_path, 64, embedder=embedder.name)
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))  # ingestion: no request
    state = SqliteStateStore(settings.state_path)
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )

    before = len(server.fake.bodies("/v1/embeddings"))
    result = asyncio.run(service.ask(Deps(settings, chat, embedder, index, None, state), QUESTION))

    (retrieve,) = [step for step in result.trace if step.node == "retrieve"]
    # What the server billed for this question (a token per word it was sent).
    asked = server.fake.bodies("/v1/embeddings")[before:]
    sent = [text for body in asked for text in body["input"]]
    words = sum(len(text.split()) for text in sent)
    assert sent[0] == QUESTION and len(sent) > 1  # the question, then the packed sentences
    assert retrieve.tokens_in == words
    assert retrieve.cost_usd == pytest.approx(price.cost(words, 0))
    spent = state.budget_spent(guards.daily_ledger(time.time()))
    assert spent == guards.usd(price.cost(words, 0))
    state.close()
    index.close()
