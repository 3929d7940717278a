"""The Pinecone Reranker against the loopback inference server: the order it gives,
what it costs (in the trace and the budget's bound), and what it does when the
service is busy or refuses."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from decimal import Decimal

import pytest
from pydantic import SecretStr

from candor import service
from candor.backends.pinecone_reranker import (
    DOCUMENT_CHARS,
    MAX_DOCUMENTS,
    QUERY_CHARS,
    PineconeReranker,
    rerank_cost_upper_bound,
)
from candor.deps import Deps
from candor.errors import ConfigurationError, ModelError
from candor.factory import build_reranker
from candor.results import AskResult
from candor.settings import Settings
from candor.types import Chunk
from tests.conftest import MakeDeps
from tests.support import pinecone_server
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.integration

PRICE = 0.002  # dollars per rerank unit, as configured by default for bge-reranker-v2-m3


@pytest.fixture
def server() -> Iterator[pinecone_server.RunningInference]:
    with pinecone_server.serve_inference() as running:
        yield running


def reranker(
    server: pinecone_server.RunningInference, model: str = "bge-reranker-v2-m3", retries: int = 0
) -> PineconeReranker:
    from pinecone import Pinecone, RetryConfig

    client = Pinecone(
        api_key="test-key", host=server.url, retry_config=RetryConfig(max_retries=retries)
    )
    return PineconeReranker(client.inference, model=model, price_per_unit=PRICE)


def chunks(*texts: str) -> list[Chunk]:
    return [
        Chunk(f"d-{n}", text, "kite.md", "Kite manual", "Parts") for n, text in enumerate(texts)
    ]


def test_scores_come_back_in_the_order_the_passages_were_given(
    server: pinecone_server.RunningInference,
) -> None:
    passages = chunks("the sail and the frame", "wind the winch line slowly", "the winch")

    result = reranker(server).rerank("winch line", passages)

    # The server ranks best first; the scores map back to each passage's position
    assert result.scores == [0.0, 1.0, 0.5]
    (call,) = server.inference.reranks
    assert call.model == "bge-reranker-v2-m3"
    # Each passage is sent as the embedder sees it: title and heading, then the text
    assert call.documents[1] == {"text": "Kite manual — Parts\nwind the winch line slowly"}


def test_a_request_costs_its_rerank_units_at_the_configured_price(
    server: pinecone_server.RunningInference,
) -> None:
    result = reranker(server).rerank("winch", chunks("winch", "line"))

    assert result.usage.cost_usd == pytest.approx(1 * PRICE)
    assert result.usage.calls == 1


def test_candidates_past_one_request_keep_their_fused_order_below_the_reranked(
    server: pinecone_server.RunningInference,
) -> None:
    passages = chunks(*[f"passage {n} about the winch" for n in range(MAX_DOCUMENTS + 20)])

    scores = reranker(server).rerank("winch", passages).scores

    assert len(server.inference.reranks[0].documents) == MAX_DOCUMENTS
    head, tail = scores[:MAX_DOCUMENTS], scores[MAX_DOCUMENTS:]
    assert max(tail) < min(head)
    assert tail == sorted(tail, reverse=True)


def test_long_passages_and_queries_are_cut_to_the_models_limits(
    server: pinecone_server.RunningInference,
) -> None:
    # Given a passage and a question far over bge-reranker-v2-m3's token limits
    long_text = "winch " * 2_000

    result = reranker(server).rerank("winch " * 400, chunks(long_text, "short"))

    (call,) = server.inference.reranks
    assert len(call.documents[0]["text"]) == DOCUMENT_CHARS
    assert len(call.query) == QUERY_CHARS
    assert call.parameters == {"truncate": "END"}
    assert result.scores[0] > result.scores[1]


def test_a_model_that_takes_no_truncate_parameter_is_sent_none(
    server: pinecone_server.RunningInference,
) -> None:
    result = reranker(server, "cohere-rerank-3.5").rerank("winch", chunks("winch", "kite"))

    assert server.inference.reranks[0].parameters == {}
    assert result.scores == [1.0, 0.0]


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_reranker_keeps_the_fused_order_and_costs_nothing(
    server: pinecone_server.RunningInference, status: int
) -> None:
    server.inference.failures.append(status)

    result = reranker(server).rerank("winch", chunks("kite", "winch", "line"))

    assert result.scores == sorted(result.scores, reverse=True)
    assert result.usage.cost_usd == 0


def test_an_unknown_model_is_a_model_error_not_a_silent_fallback(
    server: pinecone_server.RunningInference,
) -> None:
    with pytest.raises(ModelError, match="NotFoundError"):
        reranker(server, "no-such-reranker").rerank("winch", chunks("winch"))


def test_no_passages_make_no_request(server: pinecone_server.RunningInference) -> None:
    result = reranker(server).rerank("winch", [])

    assert result.scores == [] and result.usage.cost_usd == 0
    assert server.inference.calls == []


# -- in the graph and the budget ---------------------------------------------------


def test_a_rerank_that_timed_out_is_charged_the_unit_it_may_have_been_billed(
    server: pinecone_server.RunningInference, make_deps: MakeDeps
) -> None:
    from pinecone import Pinecone, RetryConfig

    # The first reranking outlasts its timeout: Pinecone may bill its unit all the same.
    server.inference.delays.append(1.0)
    client = Pinecone(
        api_key="test-key", host=server.url, timeout=0.3, retry_config=RetryConfig(max_retries=0)
    )
    timed_out = PineconeReranker(client.inference, model="bge-reranker-v2-m3", price_per_unit=PRICE)

    def pinecone_deps(chat: ScriptedChatModel) -> Deps:
        deps = make_deps(chat)  # with settings that say so, as in production
        return dataclasses.replace(
            deps, settings=deps.settings.model_copy(update={"reranker_backend": "pinecone"})
        )

    result = ask_twice_unanswerable(pinecone_deps, timed_out)

    retrieves = [step for step in result.trace if step.node == "retrieve"]
    assert len(server.inference.reranks) == 2  # both were received, and billed
    assert [step.cost_usd for step in retrieves] == [pytest.approx(PRICE)] * 2


def ask_twice_unanswerable(deps_for: MakeDeps, reranker: PineconeReranker) -> AskResult:
    """A question the grader finds unanswerable on both attempts: two retrievals."""
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [False, False],
            "Rewrite": [{"query": "force push safely"}],
        }
    )
    deps = dataclasses.replace(deps_for(chat), reranker=reranker)
    return asyncio.run(service.ask(deps, "What does --force-with-lease do?"))


def test_the_rerank_cost_is_the_retrieve_steps_cost_in_the_trace(
    server: pinecone_server.RunningInference, make_deps: MakeDeps, settings: Settings
) -> None:
    result = ask_twice_unanswerable(make_deps, reranker(server))

    retrieves = [step for step in result.trace if step.node == "retrieve"]
    assert len(retrieves) == 2 == len(server.inference.reranks)
    assert [step.cost_usd for step in retrieves] == [pytest.approx(PRICE)] * 2
    # The budget's worst case for reranking is what this run, the longest, cost
    bound = rerank_cost_upper_bound(settings.model_copy(update={"reranker_backend": "pinecone"}))
    assert bound == Decimal(str(PRICE)) * settings.max_attempts
    assert sum(step.cost_usd for step in retrieves) == pytest.approx(float(bound))


def test_without_a_reranker_reranking_costs_nothing_in_the_budget(settings: Settings) -> None:
    assert settings.reranker_backend == "none"
    assert rerank_cost_upper_bound(settings) == 0


# -- built from settings -------------------------------------------------------------


def test_the_factory_builds_the_pinecone_reranker_from_settings(
    server: pinecone_server.RunningInference, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK reads its API host from PINECONE_CONTROLLER_HOST when none is given
    monkeypatch.setenv("PINECONE_CONTROLLER_HOST", server.url)
    settings = Settings(
        reranker_backend="pinecone",
        rerank_model="pinecone-rerank-v0",
        pinecone_api_key=SecretStr("test-key"),
        rerank_prices={"pinecone-rerank-v0": 0.003},
    )

    built = build_reranker(settings)
    assert isinstance(built, PineconeReranker)
    result = built.rerank("winch", chunks("kite", "winch"))

    assert result.scores == [0.0, 1.0]
    assert result.usage.cost_usd == pytest.approx(0.003)
    assert server.inference.reranks[0].model == "pinecone-rerank-v0"


def test_an_unpriced_reranker_is_refused_at_start() -> None:
    settings = Settings(
        reranker_backend="pinecone",
        rerank_model="rerank-unpriced",
        pinecone_api_key=SecretStr("test-key"),
    )

    with pytest.raises(ConfigurationError, match="CANDOR_RERANK_PRICES"):
        build_reranker(settings)
