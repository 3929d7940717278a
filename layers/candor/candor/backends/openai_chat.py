"""The production ChatModel: OpenAI chat completions through the `openai` SDK.

Decisions use structured outputs: the pydantic schema goes to the API as a strict
JSON schema (`chat.completions.parse`), so the reply parses into the schema or the
call fails with a ModelError; a judged choice (the grade) asks for one token and
reads the options' probabilities from its `top_logprobs`; answers are plain text,
streamed (server-sent events, with `include_usage` so that the last chunk reports
the tokens). Every call reports its tokens, priced from the settings' price table,
and the prompt tokens OpenAI did not read from its prompt cache
(`Usage.tokens_evaluated`). The price counts every prompt token at the input
price: an upper bound, since cached ones are billed at a discount. A reply that
is of no use (cut at max_tokens, refused, off the schema, naming no option) is
billed by OpenAI all the same: its usage goes on the call's bill before the
ModelError, and an attempt whose reply never said (a timeout, a cut stream) is
charged its bound (candor.billing). A ModelError names its kind (refused, off
the schema, cut at its cap, an error status) and never the provider's text, which
can quote the visitor (candor.errors.ModelError).

The SDK is imported on first use, not at import: it costs about half a second of
cold start, which a Lambda that answers from the cache never needs to pay.
The synchronous client runs in a worker thread rather than the SDK's async one:
an async client's connections belong to the event loop that opened them, and
both Mangum and `asyncio.run` (the CLI, tests) may run each request in a new loop.

`timeout` bounds each attempt and `max_retries` the attempts after the first
(connection errors, 408, 409, 429 and 5xx, with backoff), both within the
request's deadline (candor.backends.openai_client). What still fails becomes
candor.errors.ModelError; running out of time, DeadlineExceededError.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from pydantic import ValidationError

from candor import billing, deadline
from candor.backends.openai_client import LazyOpenAIClient, model_error
from candor.backends.threaded import iterate_in_thread
from candor.errors import ModelError
from candor.ports import Judged, M, Structured, Text, TextPiece, read_text
from candor.settings import Price
from candor.types import Message, Usage
from candor.withheld import withheld


def _usage_in(response: Any) -> Any:
    """The `usage` of a raw chat completion response, as the SDK's type, or None."""
    from openai.types import CompletionUsage

    try:
        reported = response.json().get("usage")
    except ValueError:  # not JSON: the parse that follows says so
        return None
    try:
        return CompletionUsage.model_validate(reported) if isinstance(reported, dict) else None
    except ValidationError:
        return None


# The most alternatives the API returns for one token: where the options are read.
TOP_LOGPROBS = 20


def _option_of(token: str, options: Sequence[str]) -> str | None:
    """The option a reply token opens ("Yes", " yes", "YES" open "yes"), if exactly one."""
    word = token.strip().strip(".,!:\"'").casefold()
    if not word:
        return None
    opened = [option for option in options if option.casefold().startswith(word)]
    return opened[0] if len(opened) == 1 else None


class OpenAIChatModel:
    """ChatModel backed by an OpenAI (or OpenAI-compatible) chat completions API."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        price: Price,
        base_url: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 2,
        temperature: float = 0.0,
    ) -> None:
        self.name = model
        self.price = price
        self._temperature = temperature
        self.client = LazyOpenAIClient(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        return await asyncio.to_thread(self._structured, messages, schema, max_tokens)

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        completion = await asyncio.to_thread(self._judged, messages)
        usage = self._reported(completion.usage)  # billed, whatever the reply names
        choice = completion.choices[0]
        content = choice.logprobs.content if choice.logprobs is not None else None
        top = content[0].top_logprobs if content else []
        mass = {option: 0.0 for option in options}
        for candidate in top:
            option = _option_of(str(candidate.token), options)
            if option is not None:
                mass[option] += math.exp(float(candidate.logprob))
        total = sum(mass.values())
        if not top:
            # A server that returns no logprobs: take the reply as written.
            option = _option_of(str(choice.message.content or ""), options)
            if option is None:
                raise ModelError(
                    f"{self.name}: the reply names none of {list(options)}", "no_option"
                )
            mass, total = {o: float(o == option) for o in options}, 1.0
        if total <= 0:
            # None of the likeliest tokens opens an option: they hold none of the reply.
            return Judged({option: 0.0 for option in options}, usage, mass=0.0)
        probabilities = {option: value / total for option, value in mass.items()}
        # The tokens past the 20 likeliest hold at most a sliver: the mass read is a
        # lower bound, off by less than the 20th token's probability.
        return Judged(probabilities, usage, mass=min(total, 1.0))

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        async for piece in iterate_in_thread(lambda: self._pieces(messages, max_tokens)):
            yield piece

    def _structured(
        self, messages: Sequence[Message], schema: type[M], max_tokens: int
    ) -> Structured[M]:
        """The reply parsed into `schema` (runs in a worker thread).

        The raw response is read first, so that what a reply of no use reported
        (cut at max_tokens, filtered, refused, off the schema) is on the call's
        bill before the ModelError (candor.billing): OpenAI bills it all the same.
        """
        from openai import OpenAIError

        try:
            raw = self.client.call(
                lambda client, timeout: client.chat.completions.with_raw_response.parse(
                    model=self.name,
                    messages=[dict(m) for m in messages],  # type: ignore[misc]
                    response_format=schema,
                    max_completion_tokens=max_tokens,
                    temperature=self._temperature,
                    timeout=timeout,
                ),
                f"a {self.name} call",
            )
        except OpenAIError as e:
            raise model_error(self.name, e) from withheld(e)
        usage = self._reported(_usage_in(raw.http_response))
        try:
            completion = raw.parse()
        # A reply cut off by max_tokens, filtered, or not matching the schema is
        # as much a failed decision as a provider error.
        except OpenAIError as e:
            raise model_error(self.name, e) from withheld(e)
        except ValidationError as e:
            raise ModelError(
                f"{self.name}: the reply is not a {schema.__name__}", "off_schema"
            ) from (withheld(e))
        message = completion.choices[0].message
        if message.refusal:
            # The refusal's text can quote the visitor: that it refused is what the log gets.
            raise ModelError(f"{self.name} refused a {schema.__name__}", "refused")
        value = message.parsed
        if not isinstance(value, schema):
            raise ModelError(f"{self.name}: no {schema.__name__} in the reply", "off_schema")
        return Structured(value, usage)

    def _judged(self, messages: Sequence[Message]) -> Any:
        from openai import OpenAIError

        wire: Any = [dict(m) for m in messages]
        try:
            return self.client.call(
                lambda client, timeout: client.chat.completions.create(
                    model=self.name,
                    messages=wire,
                    max_completion_tokens=1,
                    temperature=self._temperature,
                    logprobs=True,
                    top_logprobs=TOP_LOGPROBS,
                    timeout=timeout,
                ),
                f"a {self.name} call",
            )
        except OpenAIError as e:
            raise model_error(self.name, e) from withheld(e)

    def _pieces(self, messages: Sequence[Message], max_tokens: int) -> Iterator[TextPiece]:
        """The reply's text as the chunks arrive, then the usage (runs in a worker thread).

        Closing the generator early closes the HTTP response, which ends the generation.
        """
        from openai import OpenAIError

        usage: Any = None
        wire: Any = [dict(m) for m in messages]  # the SDK types each role's dict apart
        try:
            # Opening the stream is the request: its status (a 429, a 5xx) arrives
            # before the first chunk, so it is retried like any other call. A
            # stream that breaks later is not: its first pieces are already out.
            chunks = self.client.call(
                lambda client, timeout: client.chat.completions.create(
                    model=self.name,
                    messages=wire,
                    max_completion_tokens=max_tokens,
                    temperature=self._temperature,
                    stream=True,
                    stream_options={"include_usage": True},
                    timeout=timeout,
                ),
                f"a {self.name} call",
            )
            with chunks:
                for chunk in chunks:
                    # The attempt's timeout bounds each read, not the whole stream.
                    current = deadline.current()
                    if current is not None:
                        current.check(f"the rest of a {self.name} stream")
                    usage = chunk.usage or usage
                    for choice in chunk.choices:
                        if choice.delta.content:
                            yield choice.delta.content
        except OpenAIError as e:
            raise model_error(self.name, e) from withheld(e)
        yield self._reported(usage)

    def _reported(self, usage: Any) -> Usage:
        """The usage a reply reported, priced, and put on the call's bill (candor.billing).

        A reply that reports none leaves its attempt at the call's bound on the bill:
        the budget is not charged less than the provider may bill.
        """
        priced = self._usage_of(usage)
        bill = billing.current()
        if bill is not None and usage is not None:
            bill.replied(priced)
        return priced

    def _usage_of(self, usage: Any) -> Usage:
        tokens_in = int(usage.prompt_tokens) if usage is not None else 0
        tokens_out = int(usage.completion_tokens) if usage is not None else 0
        # OpenAI caches prompt beginnings of 1,024 tokens or more by itself and says
        # how many it read from the cache; an older or compatible server may not.
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", None) or 0)
        return Usage(
            tokens_in,
            tokens_out,
            self.price.cost(tokens_in, tokens_out),
            tokens_evaluated=max(0, tokens_in - cached),
        )
