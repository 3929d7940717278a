"""Test doubles that implement candor's ports for real (no MagicMock of our own ports)."""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from candor import billing
from candor.backends.sqlite_state import SqliteStateStore
from candor.errors import ModelError
from candor.ports import Judged, RateDecision, Structured, Text, TextPiece, read_text
from candor.types import Message, Usage

M = TypeVar("M", bound=BaseModel)


@dataclass
class Call:
    kind: str  # the schema's class name, or "text"
    messages: Sequence[Message]


@dataclass(frozen=True)
class Stall:
    """A script item: wait `seconds` (a hung model), then answer `then`."""

    seconds: float
    then: Any


@dataclass(frozen=True)
class Streamed:
    """A script item for a text call: these pieces, `gap` seconds apart, then `fail`.

    A plain string in the script streams word by word with no gap.
    """

    pieces: tuple[str, ...]
    gap: float = 0.0
    fail: Exception | None = None


@dataclass(frozen=True)
class NotSent:
    """A script item: the call fails before its request leaves (no time left for it,
    no connection), as the OpenAI adapter reports it on the call's bill
    (candor.billing): nothing to charge. A plain exception in a script is a call
    that failed after it was sent, with no reply saying what it cost."""

    error: Exception


def words(text: str) -> tuple[str, ...]:
    """`text` in the pieces a model would stream: each word with the spaces after it."""
    return tuple(re.findall(r"\s*\S+\s*", text)) or (text,)


@dataclass
class ScriptedChatModel:
    """A ChatModel that answers from a script, in order, per schema (or "text").

    An unscripted call fails the test: every model call a test causes must be expected.
    """

    script: dict[str, list[Any]] = field(default_factory=dict)
    name: str = "scripted"
    cost_per_call: float = 0.0
    calls: list[Call] = field(default_factory=list)
    streamed: list[str] = field(default_factory=list)  # every text piece handed out

    def __post_init__(self) -> None:
        self._queues = {kind: deque(items) for kind, items in self.script.items()}

    def _next(self, kind: str, messages: Sequence[Message]) -> Any:
        self.calls.append(Call(kind, list(messages)))
        queue = self._queues.get(kind)
        if not queue:
            raise AssertionError(f"unexpected {kind} call: {messages[-1]['content'][:200]!r}")
        item = queue.popleft()
        if isinstance(item, NotSent):
            bill = billing.current()
            if bill is not None:
                bill.track()  # and records no attempt
            raise item.error
        if isinstance(item, Exception):
            raise item
        return item

    def _usage(self, messages: Sequence[Message], output: str) -> Usage:
        tokens_in = sum(len(m["content"]) for m in messages) // 4 + 1
        return Usage(tokens_in, len(output) // 4 + 1, self.cost_per_call)

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        item = await _after_stall(self._next(schema.__name__, messages))
        value = item if isinstance(item, schema) else schema.model_validate(item)
        return Structured(value, self._usage(messages, value.model_dump_json()))

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        """A script item of "judge": True or False (the first option, or the second, is
        certain), a float (the first option's probability) or a dict of probabilities."""
        item = await _after_stall(self._next("judge", messages))
        if isinstance(item, dict):
            probabilities = {option: float(item.get(option, 0.0)) for option in options}
        else:
            first = float(item)  # True is 1.0, False 0.0
            rest = (1.0 - first) / max(1, len(options) - 1)
            probabilities = {o: (first if i == 0 else rest) for i, o in enumerate(options)}
        return Judged(probabilities, self._usage(messages, options[0]))

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        item = await _after_stall(self._next("text", messages))
        streamed = item if isinstance(item, Streamed) else Streamed(words(str(item)))
        for i, piece in enumerate(streamed.pieces):
            if i and streamed.gap:
                await asyncio.sleep(streamed.gap)
            self.streamed.append(piece)
            yield piece
        if streamed.fail is not None:
            raise streamed.fail
        yield self._usage(messages, "".join(streamed.pieces))

    def kinds(self) -> list[str]:
        return [call.kind for call in self.calls]


async def _after_stall(item: Any) -> Any:
    if isinstance(item, Stall):
        await asyncio.sleep(item.seconds)
        return item.then
    return item


def model_failure(reason: str = "the model timed out") -> ModelError:
    return ModelError(reason)


@dataclass
class SlowToLoadChat(ScriptedChatModel):
    """A scripted model that preloads as the embedded one does (candor.ports.Preloadable):
    its preload records the system prompts and returns once the test sets `loaded`."""

    loaded: threading.Event = field(default_factory=threading.Event)
    preloaded: list[str] = field(default_factory=list)

    def preload(self, system_prompts: Sequence[str]) -> None:
        self.preloaded.extend(system_prompts)
        if not self.loaded.wait(30):
            raise AssertionError("the test never let the model finish loading")


class OneInstantRateLimits(SqliteStateStore):
    """The SQLite state store with every rate-limit hit counted at the first hit's time.

    Rate windows are aligned to the epoch and the previous window's hits fade as
    the current one passes (candor.backends.rate_windows), so a request a few
    seconds after a refused one can be allowed. A test about what a refusal looks
    like pins the clock here instead; the windows themselves are tested in the
    state contract.
    """

    _first_hit: float | None = None

    def hit_rate_limit(
        self, key: str, *, window_seconds: int, limit: int, now: float
    ) -> RateDecision:
        if self._first_hit is None:
            self._first_hit = now
        return super().hit_rate_limit(
            key, window_seconds=window_seconds, limit=limit, now=self._first_hit
        )


# What EndlessChat answers each kind of call with, when it does not fail.
ENDLESS_REPLIES: dict[str, Any] = {
    "Triage": {"abusive": False, "kind": "question"},
    "Moderation": {"insulting": False},
    "Rewrite": {"query": "git push options"},
    "judge": True,
    "text": "It refuses to overwrite work you have not seen [1].",
}


@dataclass
class EndlessChat(ScriptedChatModel):
    """A scripted model whose script never runs out, for load runs (bench/stress_mixed.py).

    Every call gets ENDLESS_REPLIES' reply for its kind after a latency drawn from
    `latency` (seconds, low and high), or fails with ModelError at `failure_rate`:
    before it answers, or for a streamed reply partway through, after some pieces.
    A call costs `cost_of(messages)` dollars (else `cost_per_call`). Seeded: a run
    with the same seed and the same order of calls draws the same.
    """

    seed: int = 0
    failure_rate: float = 0.0
    latency: tuple[float, float] = (0.0, 0.0)
    cost_of: Callable[[Sequence[Message]], float] | None = None
    failures: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._random = random.Random(self.seed)

    def _next(self, kind: str, messages: Sequence[Message]) -> Any:
        self.calls.append(Call(kind, list(messages)))
        reply = ENDLESS_REPLIES[kind]
        if self._random.random() < self.failure_rate:
            self.failures += 1
            if kind == "text" and self._random.random() < 0.5:
                # Cut off mid-answer, as a dropped connection would.
                reply = Streamed(words(str(reply))[:3], fail=model_failure("the stream broke"))
            else:
                raise model_failure()
        seconds = self._random.uniform(*self.latency)
        return Stall(seconds, reply) if seconds > 0 else reply

    def _usage(self, messages: Sequence[Message], output: str) -> Usage:
        usage = super()._usage(messages, output)
        if self.cost_of is None:
            return usage
        return Usage(usage.tokens_in, usage.tokens_out, self.cost_of(messages))
