"""A search (MCP's search_docs) spends from the day's budget what its embedding was billed,
and makes no request the budget cannot cover.

The OpenAI embedder against the OpenAI-wire test server on loopback, which bills a
token per word; no chat model is involved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from candor import guards, search
from candor.backends.openai_embedder import OpenAIEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.errors import BudgetExhaustedError
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import PASSAGES
from tests.support.fakes import ScriptedChatModel
from tests.support.openai_server import RunningOpenAI, serve

pytestmark = pytest.mark.integration

PRICE = DEFAULT_PRICES["text-embedding-3-small"]
DepsFor = Callable[..., Deps]


@pytest.fixture
def server() -> Iterator[RunningOpenAI]:
    with serve() as running:
        yield running


@pytest.fixture
def deps_for(server: RunningOpenAI, tmp_path: Path) -> Iterator[DepsFor]:
    opened: list[SqliteVectorIndex | SqliteStateStore] = []

    def build(**settings: object) -> Deps:
        embedder = OpenAIEmbedder(
            model="text-embedding-3-small",
            api_key="sk-test",
            price=PRICE,
            base_url=server.base_url,
            dimensions=64,
        )
        configured = Settings.model_validate(
            {"data_dir": tmp_path, "embedder_backend": "openai", **settings}
        )
        index = SqliteVectorIndex(configured.index_path, 64, embedder=embedder.name)
        index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
        state = SqliteStateStore(configured.state_path)
        opened.extend((index, state))
        return Deps(configured, ScriptedChatModel({}), embedder, index, None, state)

    yield build
    for resource in opened:
        resource.close()


def test_a_search_is_charged_what_its_embedding_was_billed(
    server: RunningOpenAI, deps_for: DepsFor
) -> None:
    deps = deps_for()
    before = len(server.fake.bodies("/v1/embeddings"))
    hits = asyncio.run(search.search(deps, "force with lease", k=2))
    assert hits[0].chunk.source == "git-push.html"
    (sent,) = server.fake.bodies("/v1/embeddings")[before:]
    assert sent["input"] == ["force with lease"]
    spent = deps.state.budget_spent(guards.daily_ledger(time.time()))
    assert spent == guards.usd(PRICE.cost(3, 0)) > 0  # three words, a token each
    assert spent <= search.reservation_usd(deps)


def test_a_search_the_budget_cannot_cover_sends_nothing(
    server: RunningOpenAI, deps_for: DepsFor
) -> None:
    deps = deps_for(budget_daily_usd=0)
    before = len(server.fake.bodies("/v1/embeddings"))
    with pytest.raises(BudgetExhaustedError):
        asyncio.run(search.search(deps, "force with lease", k=2))
    assert server.fake.bodies("/v1/embeddings")[before:] == []
