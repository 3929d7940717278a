"""A model call that was sent is charged, whatever becomes of it (issue 21, item 1).

OpenAI bills a request it received whether or not its reply is of use: a
structured reply cut at max_tokens, refused or off the schema; an attempt that
timed out while the model generated; a stream the deadline cut. Each case runs a
whole question through candor.service against the OpenAI-wire test server on
loopback, which reports the usage scripted here as the provider's bill, and
reads the day's ledger afterwards: it must hold no less than that bill.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from candor import billing, guards, service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.openai_chat import OpenAIChatModel
from candor.backends.openai_embedder import OpenAIEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.errors import DeadlineExceededError, ModelError
from candor.graph.schemas import Triage
from candor.ports import Embedder
from candor.settings import DEFAULT_PRICES, Settings
from candor.types import Message, Usage
from tests.conftest import PASSAGES
from tests.support.openai_server import Reply, RunningOpenAI, serve

pytestmark = pytest.mark.integration

QUESTION = "What does --force-with-lease do?"
CHAT = "gpt-4o-mini"
PRICE = DEFAULT_PRICES[CHAT]
EMBEDDING = "text-embedding-3-small"
TRIAGE = json.dumps({"abusive": False, "kind": "question"})
ANSWER = "It refuses the push unless the remote ref is where you last saw it [1]."


@pytest.fixture
def server() -> Iterator[RunningOpenAI]:
    with serve() as running:
        yield running


def billed(*usages: tuple[int, int]) -> Decimal:
    """What the provider bills for these (prompt, completion) usages."""
    return guards.usd(sum(PRICE.cost(prompt, completion) for prompt, completion in usages))


def cut(server: RunningOpenAI) -> bool:
    """Whether the test server saw a client hang up on a stream (within a second)."""
    waited = time.monotonic() + 1.0
    while server.fake.streams_cut == 0 and time.monotonic() < waited:
        time.sleep(0.02)
    return server.fake.streams_cut == 1


def ask(
    server: RunningOpenAI,
    tmp_path: Path,
    *,
    embedder: Embedder | None = None,
    **overrides: Any,
) -> tuple[BaseException | None, Decimal]:
    """Ask QUESTION with the OpenAI chat model; what it raised (or None) and the day's ledger."""
    settings = Settings(
        data_dir=tmp_path,
        embedder_backend="openai" if embedder is not None else "hashing",
        screening=False,  # every question takes the triage call
        grade_by_names=False,  # and the grade call
        cache_enabled=False,
        prices={**DEFAULT_PRICES},
        **overrides,
    )
    chat = OpenAIChatModel(
        model=CHAT,
        api_key="sk-test",
        price=PRICE,
        base_url=server.base_url,
        timeout=settings.openai_timeout_seconds,
        max_retries=settings.openai_max_retries,
    )
    chat.client()  # import the SDK now, not on the request's clock
    embedder = embedder or HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert(PASSAGES, HashingEmbedder(embedder.dimensions).embed([c.text for c in PASSAGES]))
    state = SqliteStateStore(settings.state_path)
    raised: BaseException | None = None
    try:
        asyncio.run(service.ask(Deps(settings, chat, embedder, index, None, state), QUESTION))
    except (ModelError, DeadlineExceededError) as error:
        raised = error
    spent = state.budget_spent(guards.daily_ledger(time.time()))
    state.close()
    index.close()
    return raised, spent


def test_a_truncated_triage_is_charged_what_openai_reported(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    # Cut at max_tokens: 1,500 tokens in and 128 out, billed, and of no use.
    server.fake.chat.append(
        Reply(content='{"abusive": fal', finish_reason="length", usage=(1_500, 128))
    )

    raised, spent = ask(server, tmp_path)

    assert isinstance(raised, ModelError)
    assert spent == billed((1_500, 128))


def test_a_refused_structured_reply_is_charged_what_openai_reported(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    server.fake.chat.append(Reply(refusal="I can't help with that.", usage=(900, 7)))

    raised, spent = ask(server, tmp_path)

    assert isinstance(raised, ModelError)
    assert spent == billed((900, 7))


def test_an_off_schema_structured_reply_is_charged_what_openai_reported(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    server.fake.chat.append(Reply(content='{"mood": "curious"}', usage=(900, 9)))

    raised, spent = ask(server, tmp_path)

    assert isinstance(raised, ModelError)
    assert spent == billed((900, 9))


def test_a_judged_reply_that_names_no_option_is_charged_what_openai_reported(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    server.fake.chat.extend(
        [
            Reply(content=TRIAGE, usage=(400, 9)),
            # No logprobs to read and a reply that names neither option: no grade at all.
            Reply(content="Perhaps", top_logprobs=(), usage=(700, 1)),
        ]
    )

    raised, spent = ask(server, tmp_path)

    assert isinstance(raised, ModelError)
    assert spent == billed((400, 9), (700, 1))


def test_an_answer_streamed_past_the_deadline_is_charged_no_less_than_openai_bills(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    # The answer streams a word every 0.2 s: the 2 s deadline passes mid-stream, and
    # OpenAI bills what it generated (here, at most the whole reply it would report).
    server.fake.chat.extend(
        [
            Reply(content=TRIAGE, usage=(400, 9)),
            Reply(content="yes", usage=(700, 1)),
            Reply(content=ANSWER * 3, gap=0.2, usage=(600, 220)),
        ]
    )

    raised, spent = ask(server, tmp_path, request_deadline_seconds=2.0)

    assert isinstance(raised, DeadlineExceededError)
    assert cut(server)  # the stream was cut, not finished
    assert spent >= billed((400, 9), (700, 1), (600, 220))


def test_an_attempt_that_timed_out_is_charged_before_its_retry(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    # The first triage attempt outlasts its 0.5 s timeout: OpenAI may bill it all the
    # same (here 300 in, 9 out), and the retry is billed again.
    server.fake.chat.extend(
        [
            Reply(content=TRIAGE, delay=1.0, usage=(300, 9)),
            Reply(content=TRIAGE, usage=(300, 9)),
            Reply(content="yes", usage=(700, 1)),
            Reply(content=ANSWER, usage=(600, 20)),
        ]
    )

    raised, spent = ask(server, tmp_path, openai_timeout_seconds=0.5)

    assert raised is None
    assert len(server.fake.bodies("/v1/chat/completions")) == 4
    assert spent >= billed((300, 9), (300, 9), (700, 1), (600, 20))


def test_an_embedding_attempt_that_timed_out_is_charged_before_its_retry(
    server: RunningOpenAI, tmp_path: Path
) -> None:
    price = DEFAULT_PRICES[EMBEDDING]
    embedder = OpenAIEmbedder(
        model=EMBEDDING,
        api_key="sk-test",
        price=price,
        base_url=server.base_url,
        dimensions=64,
        timeout=0.5,
        max_retries=1,
    )
    embedder.client()
    # The question's embedding: its first attempt times out, the retry answers.
    server.fake.embeddings.append(Reply(delay=1.0))
    server.fake.chat.extend(
        [
            Reply(content=TRIAGE, usage=(400, 9)),
            Reply(content="yes", usage=(700, 1)),
            Reply(content=ANSWER, usage=(600, 20)),
        ]
    )

    raised, spent = ask(server, tmp_path, embedder=embedder)

    assert raised is None
    # The test server bills an embedding a token per word it was sent, the timed-out
    # attempt included.
    sent = [text for body in server.fake.bodies("/v1/embeddings") for text in body["input"]]
    assert sent[0] == sent[1] == QUESTION  # sent twice
    words = sum(len(text.split()) for text in sent)
    chat_bill = billed((400, 9), (700, 1), (600, 20))
    assert spent >= chat_bill + guards.usd(price.cost(words, 0))


@pytest.mark.parametrize(("room", "attempts"), [(1.5, 1), (2.5, 2)])
def test_an_attempt_that_timed_out_is_retried_only_if_the_reservation_covers_another(
    server: RunningOpenAI, room: float, attempts: int
) -> None:
    # Every attempt outlasts its timeout and may be billed at the call's bound: with
    # room for one and a half such attempts, none is retried; with two and a half, one.
    server.fake.chat.extend(Reply(content=TRIAGE, delay=1.0) for _ in range(3))
    model = OpenAIChatModel(
        model=CHAT,
        api_key="sk-test",
        price=PRICE,
        base_url=server.base_url,
        timeout=0.3,
        max_retries=2,
    )
    model.client()
    bound = Usage(1_000, 128, 0.001)
    meter = billing.Meter(allowance=room * bound.cost_usd)
    messages: list[Message] = [{"role": "user", "content": QUESTION}]

    async def call() -> None:
        await model.structured(messages, Triage)

    with billing.metering(meter):
        bill = meter.open(bound, "a triage")
        with pytest.raises(ModelError):
            asyncio.run(call())
        meter.close(bill, None)

    assert len(server.fake.bodies("/v1/chat/completions")) == attempts
    assert meter.usage.cost_usd == pytest.approx(attempts * bound.cost_usd)
    assert meter.usage.cost_usd <= meter.allowance  # type: ignore[operator]
