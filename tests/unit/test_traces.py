"""Stored traces: every answer's trace_id names a trace in the state store."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import pytest
from pydantic import BaseModel

from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.ports import Judged, StoredTrace, Structured, Text, TextPiece, read_text
from candor.results import AskResult
from candor.service import ask
from candor.traces import Trace, traces_since
from candor.types import Message, Usage
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel

M = TypeVar("M", bound=BaseModel)

pytestmark = pytest.mark.unit

QUESTION = "What does --force-with-lease do?"


def answering() -> ScriptedChatModel:
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )


def stored(deps: Deps, result: AskResult) -> Trace:
    # now=0: a trace written during the test is live at any earlier moment.
    found = deps.state.get_trace(result.trace_id, now=0.0)
    assert found is not None, "the answer's trace_id names no stored trace"
    return Trace.from_stored(found)


def test_the_trace_id_of_an_answer_names_a_stored_trace(make_deps: MakeDeps) -> None:
    # The defect: every answer returned a trace_id that referred to nothing stored.
    deps = make_deps(answering())

    result = asyncio.run(ask(deps, QUESTION))

    trace = stored(deps, result)
    assert trace.trace_id == result.trace_id
    assert trace.session_id == result.session_id


def test_a_trace_holds_what_the_request_did(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())

    result = asyncio.run(ask(deps, QUESTION))

    trace = stored(deps, result)
    assert trace.question == QUESTION
    assert trace.queries == (QUESTION,)
    assert trace.decision == "answered"
    assert trace.answer == result.answer
    assert trace.citations == result.citations
    assert trace.citations[0].id in trace.passage_ids
    assert [step.node for step in trace.steps] == [step.node for step in result.trace]
    assert trace.tokens_in == sum(step.tokens_in for step in result.trace) > 0
    assert (trace.chat_model, trace.embedder) == ("scripted", deps.embedder.name)
    assert trace.corpus_version == 0
    assert trace.cached is False
    assert trace.seconds >= 0
    # The prompt holds the question and the passages as the model saw them.
    generate_call = deps.chat.calls[-1]  # type: ignore[attr-defined]
    prompt_text = trace.prompt[-1]["content"]
    assert QUESTION in prompt_text
    assert generate_call.messages[-1]["content"] == prompt_text


@dataclass
class PromptCachingChat:
    """A ChatModel answering from a script that reports, as a backend with a prompt cache
    does, fewer prompt tokens evaluated than sent: a fixed number per kind of call."""

    script: ScriptedChatModel
    evaluated: dict[str, int] = field(default_factory=dict)
    name: str = "scripted"  # priced in the test settings

    def _cached(self, kind: str, usage: Usage) -> Usage:
        assert self.evaluated[kind] < usage.tokens_in
        return dataclasses.replace(usage, tokens_evaluated=self.evaluated[kind])

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        result = await self.script.structured(messages, schema, max_tokens=max_tokens)
        return Structured(result.value, self._cached(schema.__name__, result.usage))

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        result = await self.script.judge(messages, options)
        return Judged(result.probabilities, self._cached("judge", result.usage))

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        async for piece in self.script.stream(messages, max_tokens=max_tokens):
            yield self._cached("text", piece) if isinstance(piece, Usage) else piece


def test_each_step_sums_the_prompt_tokens_its_calls_evaluated(make_deps: MakeDeps) -> None:
    # Given a model with a prompt cache, and a message the triage flags but the focused
    # moderation clears: moderate makes two calls
    script = ScriptedChatModel(
        {
            "Triage": [{"abusive": True, "kind": "question"}],
            "Moderation": [{"insulting": False}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )
    chat = PromptCachingChat(script, {"Triage": 7, "Moderation": 5, "judge": 11, "text": 13})
    deps = dataclasses.replace(make_deps(script), chat=chat)

    # When it answers
    result = asyncio.run(ask(deps, QUESTION))

    # Then each step holds what its own calls evaluated, and the stored trace the sum
    evaluated = {step.node: step.tokens_evaluated for step in result.trace}
    assert evaluated == {"moderate": 12, "route": 0, "retrieve": 0, "grade": 11, "generate": 13}
    trace = stored(deps, result)
    assert [s.tokens_evaluated for s in trace.steps] == [s.tokens_evaluated for s in result.trace]
    assert trace.tokens_evaluated == 36 < trace.tokens_in


def test_a_model_that_cannot_tell_counts_every_prompt_token_as_evaluated(
    make_deps: MakeDeps,
) -> None:
    deps = make_deps(answering())

    result = asyncio.run(ask(deps, QUESTION))

    assert all(step.tokens_evaluated == step.tokens_in for step in result.trace)
    assert stored(deps, result).tokens_evaluated == stored(deps, result).tokens_in > 0


def test_a_trace_stored_before_evaluated_tokens_were_recorded_still_reads(
    make_deps: MakeDeps,
) -> None:
    script = answering()
    chat = PromptCachingChat(script, {"Triage": 1, "judge": 2, "text": 3})
    deps = dataclasses.replace(make_deps(script), chat=chat)
    result = asyncio.run(ask(deps, QUESTION))
    raw = deps.state.get_trace(result.trace_id, now=0.0)
    assert raw is not None
    body = json.loads(raw.body)
    for step in body["steps"]:
        del step["tokens_evaluated"]

    trace = Trace.from_stored(dataclasses.replace(raw, body=json.dumps(body)))

    # Nothing said what was cached: every prompt token sent counts as evaluated
    assert [s.tokens_evaluated for s in trace.steps] == [s.tokens_in for s in result.trace]
    assert trace.tokens_in == sum(s.tokens_in for s in result.trace) > 0


def test_a_trace_expires_after_the_configured_days(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())
    deps = dataclasses.replace(
        deps, settings=deps.settings.model_copy(update={"trace_ttl_days": 2})
    )

    result = asyncio.run(ask(deps, QUESTION))

    raw = deps.state.get_trace(result.trace_id, now=0.0)
    assert raw is not None
    assert raw.expires_at == int(raw.created_at) + 2 * 86_400
    assert deps.state.get_trace(result.trace_id, now=raw.expires_at + 1) is None


def test_a_cached_answer_stores_its_own_trace(make_deps: MakeDeps) -> None:
    chat = answering()
    deps = make_deps(chat)
    first = asyncio.run(ask(deps, QUESTION))

    again = asyncio.run(ask(deps, QUESTION.lower()))

    assert again.cached and again.trace_id != first.trace_id
    trace = stored(deps, again)
    assert trace.cached is True
    assert trace.answer == first.answer
    assert trace.question == QUESTION.lower()
    assert [step.node for step in trace.steps] == ["cache"]


def test_questions_stay_out_of_traces_when_told(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())
    settings = deps.settings.model_copy(update={"store_questions": False})
    deps = dataclasses.replace(deps, settings=settings)

    result = asyncio.run(ask(deps, QUESTION))

    trace = stored(deps, result)
    assert trace.question is None
    assert trace.queries == ()
    assert trace.prompt == ()
    assert QUESTION not in deps.state.get_trace(result.trace_id, now=0.0).body  # type: ignore[union-attr]
    assert trace.decision == "answered"


def test_a_trace_records_what_the_support_check_removed(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": [
                "It refuses to overwrite work you have not seen [1]. "
                "The lease lasts 30 seconds [1]."
            ],
        }
    )
    deps = make_deps(chat)

    result = asyncio.run(ask(deps, QUESTION))

    trace = stored(deps, result)
    assert trace.answer == "It refuses to overwrite work you have not seen [1]."
    assert trace.support is not None
    assert trace.support.unsupported == ("30 seconds",)
    assert trace.support.removed == ("The lease lasts 30 seconds [1].",)
    assert trace.support == result.support
    assert [(g.by, g.answerable) for g in trace.grades] == [("model", True)]
    assert trace.grades == result.grades


def test_a_trace_records_the_grounding_gates_decline(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "question"}]})
    deps = make_deps(chat)

    result = asyncio.run(ask(deps, "What is the default of `core.autoCompactHistory`?"))

    trace = stored(deps, result)
    assert trace.decision == "declined"
    assert trace.support is None
    assert trace.grades[-1].by == "gate"
    assert trace.grades[-1].grounding.absent == ("core.autoCompactHistory",)


def test_the_gates_names_stay_out_of_traces_with_the_question(make_deps: MakeDeps) -> None:
    deps = make_deps(ScriptedChatModel({"Triage": [{"abusive": False, "kind": "question"}]}))
    settings = deps.settings.model_copy(update={"store_questions": False})
    deps = dataclasses.replace(deps, settings=settings)

    result = asyncio.run(ask(deps, "What is the default of `core.autoCompactHistory`?"))

    trace = stored(deps, result)
    assert trace.grades[-1].by == "gate"
    assert trace.grades[-1].grounding.absent == ()
    assert "autoCompactHistory" not in deps.state.get_trace(result.trace_id, now=0.0).body  # type: ignore[union-attr]


def test_a_product_decline_is_traced_and_a_grounding_stored_without_products_reads(
    make_deps: MakeDeps,
) -> None:
    deps = make_deps(ScriptedChatModel({"Triage": [{"abusive": False, "kind": "question"}]}))
    result = asyncio.run(ask(deps, "How do I set up Litestream for git bisect run?"))
    raw = deps.state.get_trace(result.trace_id, now=0.0)
    assert raw is not None
    assert Trace.from_stored(raw).grades[-1].grounding.products == ("Litestream",)

    body = json.loads(raw.body)  # as stored before the gate read product names
    del body["grades"][-1]["grounding"]["products"]
    trace = Trace.from_stored(dataclasses.replace(raw, body=json.dumps(body)))

    assert trace.grades[-1].grounding.absent == ("Litestream",)
    assert trace.grades[-1].grounding.products == ()


def test_a_trace_stored_before_the_checks_were_recorded_still_reads(
    make_deps: MakeDeps,
) -> None:
    deps = make_deps(answering())
    result = asyncio.run(ask(deps, QUESTION))
    raw = deps.state.get_trace(result.trace_id, now=0.0)
    assert raw is not None
    body = json.loads(raw.body)
    del body["grades"], body["support"]

    trace = Trace.from_stored(dataclasses.replace(raw, body=json.dumps(body)))

    assert (trace.grades, trace.support) == ((), None)
    assert trace.answer == result.answer


def test_a_trace_records_that_the_triage_call_judged_the_message(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())  # screening off: the triage call decides

    trace = stored(deps, asyncio.run(ask(deps, QUESTION)))

    assert trace.screening is not None
    assert (trace.screening.by, trace.screening.kind) == ("model", "question")
    assert trace.screening.confidence is None
    assert not trace.screening.without_model


def test_a_trace_stored_before_screening_was_recorded_still_reads(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())
    result = asyncio.run(ask(deps, QUESTION))
    raw = deps.state.get_trace(result.trace_id, now=0.0)
    assert raw is not None
    body = json.loads(raw.body)
    del body["screening"]

    trace = Trace.from_stored(dataclasses.replace(raw, body=json.dumps(body)))

    assert trace.screening is None
    assert trace.answer == result.answer


def test_a_trace_keeps_each_citations_quote(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())
    result = asyncio.run(ask(deps, QUESTION))

    trace = stored(deps, result)

    assert [c.quote for c in trace.citations] == [c.quote for c in result.citations]
    assert trace.citations[0].quote.startswith("--force-with-lease protects the remote ref")


def test_a_trace_stored_before_citations_had_quotes_still_reads(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())
    result = asyncio.run(ask(deps, QUESTION))
    raw = deps.state.get_trace(result.trace_id, now=0.0)
    assert raw is not None
    body = json.loads(raw.body)
    for cited in body["citations"]:
        del cited["quote"]

    trace = Trace.from_stored(dataclasses.replace(raw, body=json.dumps(body)))

    assert [c.quote for c in trace.citations] == [""]
    assert [c.id for c in trace.citations] == [c.id for c in result.citations]


class FailingTraces(SqliteStateStore):
    """The real SQLite store, except that writing a trace fails."""

    def put_trace(self, trace: StoredTrace) -> None:
        raise OSError("disk full")


def test_a_trace_that_cannot_be_stored_does_not_fail_the_answer(
    make_deps: MakeDeps, caplog: pytest.LogCaptureFixture
) -> None:
    deps = make_deps(answering())
    deps = dataclasses.replace(deps, state=FailingTraces(deps.settings.data_dir / "other.sqlite3"))

    with caplog.at_level(logging.WARNING, logger="candor.traces"):
        result = asyncio.run(ask(deps, QUESTION))

    assert result.decision == "answered"
    assert deps.state.get_trace(result.trace_id, now=0.0) is None
    assert any(result.trace_id in r.getMessage() for r in caplog.records)


def test_traces_since_reads_the_last_days(make_deps: MakeDeps) -> None:
    deps = make_deps(answering())
    result = asyncio.run(ask(deps, QUESTION))
    raw = deps.state.get_trace(result.trace_id, now=0.0)
    assert raw is not None

    today = traces_since(deps.state, 1, now=raw.created_at)
    tomorrow = traces_since(deps.state, 1, now=raw.created_at + 86_400)
    both = traces_since(deps.state, 2, now=raw.created_at + 86_400)

    assert [t.trace_id for t in today] == [result.trace_id]
    assert tomorrow == []
    assert [t.trace_id for t in both] == [result.trace_id]


class BuggyWrites(SqliteStateStore):
    """The real SQLite store, except that the writes after an answer meet a bug whose
    message quotes the visitor (as a KeyError of a looked-up question would)."""

    def put_trace(self, trace: StoredTrace) -> None:
        raise KeyError(f"no slot for {QUESTION!r}")

    def append_turn(self, session_id: str, turn: object, *, keep: int, expires_at: int) -> None:
        raise KeyError(f"no history for {QUESTION!r}")


def test_a_failed_write_after_the_answer_logs_its_type_but_not_the_visitors_words(
    make_deps: MakeDeps, caplog: pytest.LogCaptureFixture
) -> None:
    deps = make_deps(answering())
    deps = dataclasses.replace(deps, state=BuggyWrites(deps.settings.data_dir / "other.sqlite3"))

    with caplog.at_level(logging.DEBUG):
        result = asyncio.run(ask(deps, QUESTION, session_id="s-1"))

    assert result.decision == "answered"
    failed = [r for r in caplog.records if r.exc_info]
    assert {r.name for r in failed} >= {"candor.traces", "candor.service"}
    for record in caplog.records:  # every logger, every level, with its traceback
        assert "force-with-lease" not in logging.Formatter().format(record)
    for record in failed:
        assert "KeyError" in logging.Formatter().format(record)
