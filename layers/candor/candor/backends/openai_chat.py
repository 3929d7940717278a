"""The production ChatModel: OpenAI chat completions through the `openai` SDK.

Decisions use structured outputs: the pydantic schema goes to the API as a strict
JSON schema (`chat.completions.parse`), so the reply parses into the schema or the
call fails with a ModelError; answers are plain text. Every call reports its
tokens, priced from the settings' price table.

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
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from candor.backends.openai_client import LazyOpenAIClient
from candor.errors import ModelError
from candor.ports import M, Structured, Text
from candor.settings import Price
from candor.types import Message, Usage


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
        completion = await asyncio.to_thread(self._parse, messages, schema, max_tokens)
        message = completion.choices[0].message
        if message.refusal:
            raise ModelError(f"{self.name} refused a {schema.__name__}: {message.refusal[:200]}")
        value = message.parsed
        if not isinstance(value, schema):
            raise ModelError(f"{self.name}: no {schema.__name__} in the reply")
        return Structured(value, self._usage(completion))

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        completion = await asyncio.to_thread(self._create, messages, max_tokens)
        content = completion.choices[0].message.content or ""
        return Text(content.strip(), self._usage(completion))

    def _parse(self, messages: Sequence[Message], schema: type[M], max_tokens: int) -> Any:
        from openai import OpenAIError

        try:
            return self.client.call(
                lambda client, timeout: client.chat.completions.parse(
                    model=self.name,
                    messages=[dict(m) for m in messages],  # type: ignore[misc]
                    response_format=schema,
                    max_completion_tokens=max_tokens,
                    temperature=self._temperature,
                    timeout=timeout,
                ),
                f"a {self.name} call",
            )
        # A reply cut off by max_tokens, filtered, or not matching the schema is
        # as much a failed decision as a provider error.
        except (OpenAIError, ValidationError) as e:
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}") from e

    def _create(self, messages: Sequence[Message], max_tokens: int) -> Any:
        from openai import OpenAIError

        try:
            return self.client.call(
                lambda client, timeout: client.chat.completions.create(
                    model=self.name,
                    messages=[dict(m) for m in messages],  # type: ignore[misc]
                    max_completion_tokens=max_tokens,
                    temperature=self._temperature,
                    timeout=timeout,
                ),
                f"a {self.name} call",
            )
        except OpenAIError as e:
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}") from e

    def _usage(self, completion: Any) -> Usage:
        usage = completion.usage
        tokens_in = int(usage.prompt_tokens) if usage is not None else 0
        tokens_out = int(usage.completion_tokens) if usage is not None else 0
        return Usage(tokens_in, tokens_out, self.price.cost(tokens_in, tokens_out))
