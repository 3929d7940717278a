"""The budget reservation is an upper bound: a property test over questions and settings.

Every request takes the true worst path (triage flags the message and moderation
clears it, every retrieval attempt is used, the first answer holds no sentence so
the answer is asked again: every call slot) against a model that bills as a
provider would at most: a token per UTF-8 byte of each message's role and content,
OpenAI's framing of each message and reply, the JSON schema of a structured call,
and every call at its max_tokens. Query embeddings are priced too. One call may
fail at a drawn point: before it is sent (nothing billed), after it is billed (its
usage reported, then an error), or mid-reply (billed, no usage ever reported), as
the OpenAI adapter reports them on the call's bill (candor.billing). The
reservation is read from the ledger while the request runs, not recomputed:
reserved >= charged >= billed, and the day's ledger never passes its cap.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from candor import billing, guards, service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.errors import BudgetExhaustedError, ModelError
from candor.ports import Judged, Structured, Text, TextPiece, Turn, Vectors, read_text
from candor.settings import DEFAULT_PRICES, MAX_CONTEXT_CHARS, MAX_EXCERPTS, Settings
from candor.types import Chunk, Message, Usage
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

M = TypeVar("M", bound=BaseModel)
CHAT_PRICE = DEFAULT_PRICES["gpt-4o-mini"]
EMBEDDING_MODEL = "text-embedding-3-small"
EMBEDDING_PRICE = DEFAULT_PRICES[EMBEDDING_MODEL]
WIDE = "\U0001f9ea"  # four bytes in UTF-8


def utf8(text: str) -> int:
    return len(text.encode())


@dataclass
class Spend:
    """What the fakes report having consumed, in dollars, as the provider would bill it."""

    dollars: Decimal = Decimal(0)

    def add(self, cost: float) -> None:
        self.dollars += guards.usd(cost)


# OpenAI's framing: about 3 tokens a message and 3 priming the reply; counted high.
PER_MESSAGE_TOKENS = 4
PER_CALL_TOKENS = 3
FAILS = ("before_send", "after_billed", "mid_reply")


@dataclass
class TrueUsageModel:
    """A ChatModel answering from a script, billing the most a real call could be billed.

    `fail_at` (a call's index) fails that call at `fail_how`, recorded on its bill
    as the OpenAI adapter records its attempts.
    """

    script: ScriptedChatModel
    spend: Spend
    before_call: Callable[[], None]
    fail_at: int | None = None
    fail_how: str = "before_send"
    name: str = "true-usage"
    calls: int = 0

    def _billed(
        self, messages: Sequence[Message], max_tokens: int, schema: type[BaseModel] | None = None
    ) -> Usage:
        tokens_in = PER_CALL_TOKENS + sum(
            utf8(m["role"]) + utf8(m["content"]) + PER_MESSAGE_TOKENS for m in messages
        )
        if schema is not None:
            tokens_in += utf8(json.dumps(schema.model_json_schema()))
        cost = CHAT_PRICE.cost(tokens_in, max_tokens)
        self.spend.add(cost)
        return Usage(tokens_in, max_tokens, cost)

    def _send(
        self, messages: Sequence[Message], max_tokens: int, schema: type[BaseModel] | None = None
    ) -> Usage | None:
        """The call goes out: its bill, or the drawn failure. None: billed, no usage yet."""
        self.before_call()
        index, self.calls = self.calls, self.calls + 1
        bill = billing.current()
        assert bill is not None
        bill.track()
        failing = index == self.fail_at
        if failing and self.fail_how == "before_send":
            raise ModelError("no time left for the call")
        bill.sent()
        usage = self._billed(messages, max_tokens, schema)
        if failing and self.fail_how == "after_billed":
            bill.replied(usage)
            raise ModelError("a reply cut at max_tokens")
        if failing:  # mid_reply: billed, and no reply will say so
            raise ModelError("the connection broke")
        bill.replied(usage)
        return usage

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        usage = self._send(messages, max_tokens, schema)
        result = await self.script.structured(messages, schema, max_tokens=max_tokens)
        assert usage is not None
        return Structured(result.value, usage)

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        usage = self._send(messages, 1)
        result = await self.script.judge(messages, options)
        assert usage is not None
        return Judged(result.probabilities, usage)

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        usage = self._send(messages, max_tokens)
        async for piece in self.script.stream(messages, max_tokens=max_tokens):
            yield usage if isinstance(piece, Usage) and usage is not None else piece


@dataclass
class PricedHashingEmbedder:
    """A hosted embedder's billing (a token per UTF-8 byte) over the hashing embedder's vectors."""

    spend: Spend
    inner: HashingEmbedder = field(default_factory=HashingEmbedder)
    name: str = EMBEDDING_MODEL
    dimensions: int = HashingEmbedder().dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self.embed_with_usage(texts)[0]

    def embed_with_usage(self, texts: Sequence[str]) -> tuple[Vectors, Usage]:
        tokens = sum(utf8(text) for text in texts)
        cost = EMBEDDING_PRICE.cost(tokens, 0)
        self.spend.add(cost)
        return self.inner.embed(texts), Usage(tokens, 0, cost)


def worst_chunks() -> list[Chunk]:
    """More passages than a prompt shows, each longer and wider than any cut."""
    return [
        Chunk(f"{n:032x}-0", WIDE * 3_000, f"page-{n}.html", WIDE * 300, WIDE * 300)
        for n in range(24)
    ]


CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
EMOJI = st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF)
ANY = st.characters(codec="utf-8")
texts = st.one_of(
    st.text(ANY, min_size=1, max_size=3_000),
    st.text(CJK, min_size=1, max_size=3_000),
    st.text(EMOJI, min_size=1, max_size=3_000),
    st.text(st.one_of(ANY, CJK, EMOJI), min_size=1, max_size=300),
)


@dataclass(frozen=True)
class Case:
    question: str
    topic: str  # the previous question a follow-up borrows
    kind: str
    rewrites: tuple[str, ...]
    max_attempts: int
    passage_chars: int
    # A hosted model's budget shows more excerpts than a request may ask for.
    top_k: int
    context_chars: int
    answer_max_tokens: int
    cap: Decimal
    fail_at: int | None  # which call fails, if one does
    fail_how: str


cases = st.builds(
    Case,
    question=texts,
    topic=texts,
    kind=st.sampled_from(["question", "follow_up"]),
    rewrites=st.lists(st.text(st.one_of(ANY, CJK, EMOJI), min_size=1, max_size=200), max_size=4),
    max_attempts=st.integers(1, 5),
    passage_chars=st.integers(100, 1_500),
    top_k=st.integers(1, MAX_EXCERPTS),
    context_chars=st.integers(100, MAX_CONTEXT_CHARS),
    answer_max_tokens=st.integers(16, 2_048),
    cap=st.decimals(Decimal("0.05"), Decimal("1"), places=4),
    fail_at=st.one_of(st.none(), st.integers(0, 7)),
    fail_how=st.sampled_from(FAILS),
)


def worst_path(case: Case) -> dict[str, list[Any]]:
    attempts = case.max_attempts
    rewrites = [{"query": q} for q in (*case.rewrites, "git push options")][: attempts - 1]
    rewrites += [{"query": "git push"}] * (attempts - 1 - len(rewrites))
    return {
        "Triage": [{"abusive": True, "kind": case.kind}],
        "Moderation": [{"insulting": False}],
        "judge": [False] * (attempts - 1) + [True],
        "Rewrite": rewrites,
        # A marker alone holds no sentence: the answer is asked again (the seventh call).
        "text": ["[1]", f"It refuses unseen work {case.question[:50]} [1]."],
    }


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases)
def test_a_request_is_never_charged_more_than_it_reserved_and_the_ledger_stays_under_its_cap(
    case: Case,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spend = Spend()
        embedder = PricedHashingEmbedder(spend)
        config = Settings(
            data_dir=Path(tmp),
            embedder_backend="hashing",
            max_attempts=case.max_attempts,
            passage_chars=case.passage_chars,
            answer_max_tokens=case.answer_max_tokens,
            top_k=case.top_k,
            context_chars=case.context_chars,
            cache_enabled=False,
            # Screening could spare the triage call; off, every request takes the
            # worst path (the same two calls at most: candor.graph.limits.NODE_CALLS).
            screening=False,
            rate_address_limit=1_000,
            rate_session_limit=1_000,
            budget_daily_usd=case.cap,
            prices={
                **DEFAULT_PRICES,
                "true-usage": CHAT_PRICE,
                EMBEDDING_MODEL: EMBEDDING_PRICE,
            },
        )
        index = SqliteVectorIndex(config.index_path, embedder.dimensions, embedder=embedder.name)
        chunks = worst_chunks()
        index.upsert(chunks, embedder.inner.embed([c.text for c in chunks]))
        state = SqliteStateStore(config.state_path)
        ledger = guards.daily_ledger(time.time())
        held: list[Decimal] = []

        def before_call() -> None:
            assert state.budget_spent(ledger) <= case.cap
            held.append(state.budget_spent(ledger))

        try:
            for served in range(4):
                state.append_turn(
                    "s" * 16,
                    Turn(case.topic, "An earlier answer [1].", "answered"),
                    keep=3,
                    expires_at=2**31,
                )
                before, spent_before = state.budget_spent(ledger), spend.dollars
                held.clear()
                model = TrueUsageModel(
                    ScriptedChatModel(worst_path(case)),
                    spend,
                    before_call,
                    fail_at=case.fail_at,
                    fail_how=case.fail_how,
                )
                deps = Deps(config, model, embedder, index, None, state)
                try:
                    asyncio.run(service.ask(deps, case.question, session_id="s" * 16))
                except ModelError:
                    event(f"failed {case.fail_how}")
                except BudgetExhaustedError:
                    event(f"refused after {served} served")
                    assert not held, "a refused request made a model call"
                    assert state.budget_spent(ledger) == before
                    break
                event(f"{model.calls} calls")
                reserved = held[0] - before
                charged = state.budget_spent(ledger) - before
                # Every billed call is charged (the ledger rounds the sum, the fakes each call).
                assert charged >= spend.dollars - spent_before - Decimal("1e-7")
                assert charged <= reserved
                event(f"charged/reserved {float(charged / reserved):.1f}")
                assert state.budget_spent(ledger) <= case.cap
        finally:
            state.close()
            index.close()
