"""Prompt tokens as a hosted chat model counts them, to price a prompt before sending it.

The local model's tokenizer is not OpenAI's: a price at gpt-4o-mini rates is
counted with the tokenizer gpt-4o-mini bills by (o200k_base), which the
`bpe-openai` package ships with its data (no download at run time). Each chat
message adds a few tokens of its own to its content; OpenAI's cookbook counts 3 a
message and 3 to prime the reply, as here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from candor.types import Message

TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3

Counter = Callable[[Sequence[Message]], int]


def openai_counter(model: str) -> Counter | None:
    """A counter of `model`'s prompt tokens; None when bpe-openai is not installed
    or does not know the model (the figures that need it are then left out)."""
    try:
        import bpe_openai
    except ImportError:
        return None
    try:
        encoding = bpe_openai.encoding_for_model(model)
    except Exception:  # its UnsupportedModelError, or a model it cannot map
        return None

    def count(messages: Sequence[Message]) -> int:
        contents = sum(
            len(encoding.encode(message["content"], disallowed_special=())) for message in messages
        )
        return contents + TOKENS_PER_MESSAGE * len(messages) + REPLY_PRIMING

    return count
