"""The request's deadline bounds every outbound call: OpenAI attempts and retries, Pinecone queries.

Against the OpenAI-wire and Pinecone-wire test servers on loopback, which can
delay or fail their replies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import numpy as np
import pytest

from candor import deadline
from candor.backends.openai_chat import OpenAIChatModel
from candor.backends.pinecone_index import PineconeVectorIndex
from candor.errors import DeadlineExceededError
from candor.settings import DEFAULT_PRICES
from candor.types import Message
from tests.support import pinecone_server
from tests.support.openai_server import Reply, RunningOpenAI, serve

pytestmark = pytest.mark.integration

MESSAGES: list[Message] = [
    {"role": "system", "content": "Judge the message."},
    {"role": "user", "content": "How do I push?"},
]


@pytest.fixture
def server() -> Iterator[RunningOpenAI]:
    with serve() as running:
        yield running


def chat(server: RunningOpenAI, *, timeout: float, max_retries: int) -> OpenAIChatModel:
    model = OpenAIChatModel(
        model="gpt-4o-mini",
        api_key="sk-test",
        price=DEFAULT_PRICES["gpt-4o-mini"],
        base_url=server.base_url,
        timeout=timeout,
        max_retries=max_retries,
    )
    model.client()  # import the SDK now, not on the clock
    return model


def test_a_stalled_openai_call_ends_at_the_deadline_not_after_its_attempts(
    server: RunningOpenAI,
) -> None:
    # Each attempt may take 10 s and there are three: 30 s, past the function's 28 s.
    server.fake.chat.extend(Reply(content="late", delay=3.0) for _ in range(3))
    model = chat(server, timeout=10.0, max_retries=2)

    started = time.perf_counter()
    with deadline.bound(deadline.after(1.0)), pytest.raises(DeadlineExceededError):
        asyncio.run(model.text(MESSAGES))

    assert time.perf_counter() - started < 2.0
    assert len(server.fake.bodies("/v1/chat/completions")) == 1


def test_retries_stop_when_the_deadline_leaves_no_time_for_another_attempt(
    server: RunningOpenAI,
) -> None:
    server.fake.chat.extend(Reply(status=500, delay=0.3) for _ in range(6))
    model = chat(server, timeout=10.0, max_retries=5)

    started = time.perf_counter()
    with deadline.bound(deadline.after(0.8)), pytest.raises(DeadlineExceededError):
        asyncio.run(model.text(MESSAGES))

    assert time.perf_counter() - started < 1.3
    # Two fit in 0.8 s; the other four retries are not made.
    assert len(server.fake.bodies("/v1/chat/completions")) < 6


def test_without_a_deadline_the_configured_attempts_still_apply(server: RunningOpenAI) -> None:
    server.fake.chat.extend([Reply(status=503), Reply(status=503), Reply(content="fine")])

    assert asyncio.run(chat(server, timeout=5.0, max_retries=2).text(MESSAGES)).text == "fine"


def test_a_pinecone_query_that_keeps_failing_ends_at_the_deadline() -> None:
    from pinecone import Pinecone

    with pinecone_server.serve("dense", 8) as dense:
        # The SDK retries a 503 three times, sleeping at least 0.25 s before each.
        dense.index.failures.extend([503] * 4)
        index = PineconeVectorIndex(
            Pinecone(api_key="test-key").index(host=dense.url), dimensions=8, attempt_timeout=5.0
        )
        vector = np.ones(8, dtype=np.float32) / np.sqrt(8)

        started = time.perf_counter()
        with deadline.bound(deadline.after(0.3)), pytest.raises(DeadlineExceededError):
            index.query(vector=vector, keywords=None, top_k=3)

        assert time.perf_counter() - started < 0.6
        index.close()
