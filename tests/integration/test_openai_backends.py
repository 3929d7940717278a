"""The OpenAI ChatModel and Embedder against an OpenAI-wire-compatible server on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Iterator

import numpy as np
import pytest

from candor import service
from candor.backends.openai_chat import OpenAIChatModel
from candor.backends.openai_embedder import OpenAIEmbedder, dimensions_of
from candor.errors import ConfigurationError, ModelError
from candor.graph.schemas import Rewrite, Triage
from candor.ports import ChatModel, Embedder, TextPiece
from candor.settings import DEFAULT_PRICES
from candor.types import Message, Usage
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel
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


def chat(server: RunningOpenAI, **options: float) -> OpenAIChatModel:
    return OpenAIChatModel(
        model="gpt-4o-mini",
        api_key="sk-test",
        price=DEFAULT_PRICES["gpt-4o-mini"],
        base_url=server.base_url,
        timeout=float(options.get("timeout", 5.0)),
        max_retries=int(options.get("max_retries", 2)),
    )


def test_the_adapters_implement_the_ports(server: RunningOpenAI) -> None:
    embedder = OpenAIEmbedder(
        model="text-embedding-3-small", api_key="k", price=DEFAULT_PRICES["local"]
    )
    assert isinstance(chat(server), ChatModel)
    assert isinstance(embedder, Embedder)


def test_a_structured_call_sends_the_schema_and_parses_the_reply(server: RunningOpenAI) -> None:
    server.fake.chat.append(Reply(content='{"abusive": false, "kind": "question"}'))

    result = asyncio.run(chat(server).structured(MESSAGES, Triage, max_tokens=40))

    assert result.value == Triage(abusive=False, kind="question")
    (body,) = server.fake.bodies("/v1/chat/completions")
    assert body["model"] == "gpt-4o-mini"
    assert body["max_completion_tokens"] == 40
    assert body["messages"] == MESSAGES
    schema = body["response_format"]
    assert schema["type"] == "json_schema"
    assert schema["json_schema"]["strict"] is True
    assert set(schema["json_schema"]["schema"]["properties"]) == {"abusive", "kind"}


def test_usage_is_reported_with_its_cost_from_the_price_table(server: RunningOpenAI) -> None:
    server.fake.chat.append(Reply(content='{"query": "git push"}', usage=(1_000, 200)))

    usage = asyncio.run(chat(server).structured(MESSAGES, Rewrite)).usage

    assert (usage.tokens_in, usage.tokens_out, usage.calls) == (1_000, 200, 1)
    assert usage.cost_usd == pytest.approx((1_000 * 0.15 + 200 * 0.60) / 1e6)


def test_prompt_tokens_read_from_openais_cache_are_not_counted_as_evaluated(
    server: RunningOpenAI,
) -> None:
    # Given replies whose prompts OpenAI read partly from its prompt cache
    server.fake.chat.append(
        Reply(content='{"query": "git push"}', usage=(1_280, 9), cached_tokens=1_024)
    )
    server.fake.chat.append(
        Reply(pieces=("Use ", "git push."), usage=(1_300, 4), cached_tokens=1_152)
    )
    model = chat(server)

    # When a structured and a streamed call report their usage
    structured = asyncio.run(model.structured(MESSAGES, Rewrite)).usage

    async def read() -> list[TextPiece]:
        return [piece async for piece in model.stream(MESSAGES, max_tokens=64)]

    streamed = asyncio.run(read())[-1]

    # Then each counts as evaluated only what the cache did not hold, of all it sent
    assert (structured.tokens_in, structured.tokens_evaluated) == (1_280, 256)
    assert isinstance(streamed, Usage)
    assert (streamed.tokens_in, streamed.tokens_evaluated) == (1_300, 148)


def test_a_reply_that_reports_no_cached_tokens_counts_its_whole_prompt_as_evaluated(
    server: RunningOpenAI,
) -> None:
    server.fake.chat.append(Reply(content='{"query": "git push"}', usage=(700, 9)))

    usage = asyncio.run(chat(server).structured(MESSAGES, Rewrite)).usage

    assert (usage.tokens_in, usage.tokens_evaluated) == (700, 700)


def test_a_text_call_returns_the_stripped_answer(server: RunningOpenAI) -> None:
    server.fake.chat.append(Reply(content="  Use git push [1].\n", usage=(50, 7)))

    result = asyncio.run(chat(server).text(MESSAGES, max_tokens=64))

    assert result.text == "Use git push [1]."
    assert (result.usage.tokens_in, result.usage.tokens_out) == (50, 7)
    (body,) = server.fake.bodies("/v1/chat/completions")
    assert "response_format" not in body
    assert body["stream"] is True  # text() is the stream, read to the end


def test_a_stream_yields_the_pieces_in_order_then_the_usage_with_its_cost(
    server: RunningOpenAI,
) -> None:
    server.fake.chat.append(Reply(pieces=("Use ", "git ", "push [1]."), usage=(1_000, 200)))

    async def read() -> list[TextPiece]:
        return [piece async for piece in chat(server).stream(MESSAGES, max_tokens=64)]

    *pieces, usage = asyncio.run(read())

    assert pieces == ["Use ", "git ", "push [1]."]
    assert isinstance(usage, Usage)
    assert (usage.tokens_in, usage.tokens_out) == (1_000, 200)
    assert usage.cost_usd == pytest.approx((1_000 * 0.15 + 200 * 0.60) / 1e6)
    (body,) = server.fake.bodies("/v1/chat/completions")
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 64


def test_the_first_piece_arrives_before_the_reply_is_complete(server: RunningOpenAI) -> None:
    server.fake.chat.append(Reply(pieces=("a ", "b ", "c ", "d "), gap=0.3))

    async def arrivals() -> list[float]:
        started = time.perf_counter()
        return [time.perf_counter() - started async for _ in chat(server).stream(MESSAGES)]

    times = asyncio.run(arrivals())

    # Buffered, all four would arrive together; streamed, three gaps of 0.3 s apart.
    assert times[-1] - times[0] >= 0.8


def test_a_consumer_that_stops_early_hangs_up_on_the_stream(server: RunningOpenAI) -> None:
    server.fake.chat.append(Reply(pieces=tuple(f"w{i} " for i in range(50)), gap=0.05))

    async def read_two() -> list[TextPiece]:
        pieces: list[TextPiece] = []
        stream = chat(server).stream(MESSAGES)
        async for piece in stream:
            pieces.append(piece)
            if len(pieces) == 2:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return pieces

    assert asyncio.run(read_two()) == ["w0 ", "w1 "]
    deadline = time.monotonic() + 5
    while server.fake.streams_cut == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.fake.streams_cut == 1  # the server saw the connection close mid-reply


def test_an_error_status_on_a_stream_is_a_model_error(server: RunningOpenAI) -> None:
    server.fake.chat.extend(Reply(status=401) for _ in range(3))

    async def read() -> list[TextPiece]:
        return [piece async for piece in chat(server).stream(MESSAGES)]

    with pytest.raises(ModelError, match="AuthenticationError"):
        asyncio.run(read())


@pytest.mark.parametrize(
    "reply",
    [
        Reply(content='{"abusive": "perhaps"}'),  # does not match the schema
        Reply(content='{"abusive": fal', finish_reason="length"),  # cut off
        Reply(content=None, refusal="I cannot help with that."),
    ],
    ids=["invalid", "truncated", "refusal"],
)
def test_a_reply_that_is_not_the_schema_is_a_model_error(
    server: RunningOpenAI, reply: Reply
) -> None:
    server.fake.chat.append(reply)

    with pytest.raises(ModelError):
        asyncio.run(chat(server).structured(MESSAGES, Triage))


def test_a_server_error_is_retried_a_bounded_number_of_times_then_a_model_error(
    server: RunningOpenAI,
) -> None:
    server.fake.chat.extend(Reply(status=500) for _ in range(5))

    with pytest.raises(ModelError, match="InternalServerError") as raised:
        asyncio.run(chat(server, max_retries=2).text(MESSAGES))

    assert len(server.fake.bodies("/v1/chat/completions")) == 3  # one try, two retries
    assert raised.value.__cause__ is not None  # the SDK's error stays attached


def test_a_retry_that_succeeds_is_invisible(server: RunningOpenAI) -> None:
    server.fake.chat.extend([Reply(status=503), Reply(content="fine")])

    assert asyncio.run(chat(server, max_retries=2).text(MESSAGES)).text == "fine"


def test_a_timeout_is_a_model_error(server: RunningOpenAI) -> None:
    server.fake.chat.extend([Reply(content="late", delay=1.0), Reply(content="late", delay=1.0)])

    started = time.perf_counter()
    with pytest.raises(ModelError, match="Timeout"):
        asyncio.run(chat(server, timeout=0.2, max_retries=1).text(MESSAGES))

    assert time.perf_counter() - started < 5


def test_a_refused_key_is_a_model_error_and_not_retried(server: RunningOpenAI) -> None:
    server.fake.chat.extend(Reply(status=401) for _ in range(3))

    with pytest.raises(ModelError, match="AuthenticationError"):
        asyncio.run(chat(server).text(MESSAGES))

    assert len(server.fake.bodies("/v1/chat/completions")) == 1


# -- embeddings -------------------------------------------------------------------


def embedder(server: RunningOpenAI, **options: int) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        model="text-embedding-3-small",
        api_key="sk-test",
        price=DEFAULT_PRICES["text-embedding-3-small"],
        base_url=server.base_url,
        dimensions=options.get("dimensions"),
        max_retries=options.get("max_retries", 2),
    )


def test_embeddings_come_back_in_input_order_at_unit_length(server: RunningOpenAI) -> None:
    texts = ["git push", "git stash", "", "rerere.enabled"]

    vectors = embedder(server).embed(texts)

    assert vectors.shape == (4, 1536) and vectors.dtype == np.float32
    # The server answers in reverse order; each row must still be its own text's.
    from candor.backends.hashing_embedder import HashingEmbedder

    expected = HashingEmbedder(1536).embed(["git push", "git stash", " ", "rerere.enabled"])
    assert np.allclose(vectors, expected, atol=1e-6)
    (body,) = server.fake.bodies("/v1/embeddings")
    assert body["input"][2] == " "  # the API refuses an empty string
    assert "dimensions" not in body  # the model's own width is not sent


def test_embeddings_are_requested_in_bounded_batches_and_usage_adds_up(
    server: RunningOpenAI,
) -> None:
    model = embedder(server, dimensions=256)

    vectors = model.embed([f"text number {i}" for i in range(600)])

    assert vectors.shape == (600, 256)
    sizes = [len(body["input"]) for body in server.fake.bodies("/v1/embeddings")]
    assert sizes == [256, 256, 88]
    assert all(body["dimensions"] == 256 for body in server.fake.bodies("/v1/embeddings"))
    assert model.tokens == 600 * 3
    assert model.cost_usd == pytest.approx(600 * 3 * 0.02 / 1e6)


def test_an_embedding_failure_is_a_model_error(server: RunningOpenAI) -> None:
    server.fake.embeddings.extend(Reply(status=500) for _ in range(3))

    with pytest.raises(ModelError):
        embedder(server, max_retries=1).embed(["a"])

    assert len(server.fake.bodies("/v1/embeddings")) == 2


def test_nothing_to_embed_makes_no_request(server: RunningOpenAI) -> None:
    assert embedder(server).embed([]).shape == (0, 1536)
    assert server.fake.requests == []


def test_the_width_comes_from_the_model_or_the_setting() -> None:
    assert dimensions_of("text-embedding-3-small", None) == 1536
    assert dimensions_of("text-embedding-3-large", 1024) == 1024
    with pytest.raises(ConfigurationError, match="CANDOR_EMBEDDING_DIMENSIONS"):
        dimensions_of("some-other-model", None)
    with pytest.raises(ConfigurationError):
        dimensions_of("text-embedding-3-small", 4096)


def test_the_request_is_json_the_server_can_read(server: RunningOpenAI) -> None:
    # Guards the test server itself: bodies are recorded as the SDK sent them.
    asyncio.run(chat(server).text(MESSAGES))
    assert json.dumps(server.fake.requests)


def test_a_judged_choice_reads_the_options_from_the_first_tokens_logprobs(
    server: RunningOpenAI,
) -> None:
    # "Yes" and " yes" both open "yes"; "Maybe" opens neither option.
    top = (("Yes", math.log(0.6)), (" yes", math.log(0.1)), ("No", math.log(0.1)), ("Maybe", -1.0))
    server.fake.chat.append(
        Reply(content="Yes", top_logprobs=top, usage=(1_100, 1), cached_tokens=1_024)
    )

    judged = asyncio.run(chat(server).judge(MESSAGES, ("yes", "no")))

    assert judged.probability("yes") == pytest.approx(0.875)
    assert judged.probability("no") == pytest.approx(0.125)
    assert judged.usage.tokens_in == 1_100 and judged.usage.tokens_out == 1
    assert judged.usage.tokens_evaluated == 76
    (body,) = server.fake.bodies("/v1/chat/completions")
    assert body["max_completion_tokens"] == 1 and body["logprobs"] is True
    assert body["top_logprobs"] >= 5


def test_a_judged_reply_without_logprobs_is_taken_as_written(server: RunningOpenAI) -> None:
    server.fake.chat.append(Reply(content="No.", top_logprobs=()))

    judged = asyncio.run(chat(server).judge(MESSAGES, ("yes", "no")))

    assert judged.probabilities == {"yes": 0.0, "no": 1.0}


def test_a_judged_reply_whose_likeliest_tokens_name_no_option_holds_no_mass_on_them(
    server: RunningOpenAI,
) -> None:
    server.fake.chat.append(Reply(content="Perhaps", top_logprobs=(("Perhaps", -0.1),)))

    judged = asyncio.run(chat(server).judge(MESSAGES, ("yes", "no")))

    assert judged.mass == 0.0


def test_a_judged_reply_without_logprobs_that_names_no_option_is_a_model_error(
    server: RunningOpenAI,
) -> None:
    server.fake.chat.append(Reply(content="Perhaps", top_logprobs=()))

    with pytest.raises(ModelError, match="names none"):
        asyncio.run(chat(server).judge(MESSAGES, ("yes", "no")))


@pytest.mark.parametrize(
    "top",
    [
        # A 0.01% "yes" and no "no" among the likeliest tokens: renormalised, a sure yes.
        (("Sure", math.log(0.9)), ("yes", math.log(0.0001))),
        # A 97% "Partially": 0.2% yes and 0.01% no renormalised to 0.95.
        (("Partially", math.log(0.97)), ("yes", math.log(0.002)), ("no", math.log(0.0001))),
    ],
)
def test_a_grade_whose_first_token_is_neither_yes_nor_no_declines_the_question(
    server: RunningOpenAI, make_deps: MakeDeps, top: tuple[tuple[str, float], ...]
) -> None:
    server.fake.chat.extend(
        [
            Reply(content='{"abusive": false, "kind": "question"}'),
            Reply(content=top[0][0], top_logprobs=top, usage=(900, 1)),
            Reply(content="It refuses to overwrite work you have not seen [1]."),
        ]
    )
    deps = make_deps(ScriptedChatModel())
    # One attempt: a failed grade is a "no", which would otherwise be rewritten and tried again.
    settings = deps.settings.model_copy(update={"max_attempts": 1})
    deps = dataclasses.replace(deps, chat=chat(server), settings=settings)

    result = asyncio.run(service.ask(deps, "What does --force-with-lease protect?"))

    (grade,) = result.grades
    assert (grade.by, grade.answerable) == ("model", False)
    assert grade.option_mass is not None and grade.option_mass < 0.01
    assert result.decision == "declined"
