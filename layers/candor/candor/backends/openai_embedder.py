"""The production Embedder: OpenAI embeddings through the `openai` SDK (imported on first use).

Texts go in requests of at most 256 inputs (the API takes 2048 inputs and 300k
tokens per request; 256 passages of 800 characters stay far below both). Vectors
come back in input order and unit length. Each call reports its usage
(`embed_with_usage`, so that a question's embedding is traced and charged), and
usage also accumulates on the instance (`tokens`, `cost_usd`) for ingest reports.
SDK errors become ModelError; running out of the request's time,
DeadlineExceededError (candor.backends.openai_client).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from candor import billing
from candor.backends.openai_client import LazyOpenAIClient, model_error
from candor.errors import ConfigurationError, ModelError
from candor.ports import Vectors
from candor.settings import Price
from candor.types import Usage
from candor.withheld import withheld

# The width each model returns unless asked for fewer (text-embedding-3-* accept
# `dimensions`; ada-002 does not).
NATIVE_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
MAX_INPUTS = 256


def dimensions_of(model: str, requested: int | None) -> int:
    native = NATIVE_DIMENSIONS.get(model)
    if requested is not None:
        if native is not None and requested > native:
            raise ConfigurationError(
                f"{model} returns at most {native} dimensions, not {requested}"
            )
        return requested
    if native is None:
        raise ConfigurationError(
            f"the width of embedding model {model!r} is unknown: set CANDOR_EMBEDDING_DIMENSIONS"
        )
    return native


class OpenAIEmbedder:
    """Embedder backed by an OpenAI (or OpenAI-compatible) embeddings API."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        price: Price,
        dimensions: int | None = None,
        base_url: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 2,
    ) -> None:
        self.name = model
        self.dimensions = dimensions_of(model, dimensions)
        # Only a width other than the model's own is sent: ada-002 refuses the field.
        self._request_dimensions = (
            None if dimensions == NATIVE_DIMENSIONS.get(model) else dimensions
        )
        self.price = price
        self.tokens = 0
        self.cost_usd = 0.0
        self.client = LazyOpenAIClient(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
        self._lock = threading.Lock()  # guards the usage counters across worker threads

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self.embed_with_usage(texts)[0]

    def embed_with_usage(self, texts: Sequence[str]) -> tuple[Vectors, Usage]:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        tokens = 0
        for start in range(0, len(texts), MAX_INPUTS):
            batch = texts[start : start + MAX_INPUTS]
            out[start : start + len(batch)], batch_tokens = self._embed_batch(batch)
            tokens += batch_tokens
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        calls = 1 if texts else 0
        return out, Usage(tokens_in=tokens, cost_usd=self.price.cost(tokens, 0), calls=calls)

    def _embed_batch(self, texts: Sequence[str]) -> tuple[Vectors, int]:
        """The batch's vectors and the tokens the API counted for it."""
        from openai import OpenAIError, omit

        # The API refuses an empty string; a space embeds to "nothing in particular".
        inputs = [text if text.strip() else " " for text in texts]
        try:
            response = self.client.call(
                lambda client, timeout: client.embeddings.create(
                    model=self.name,
                    input=inputs,
                    dimensions=(
                        omit if self._request_dimensions is None else self._request_dimensions
                    ),
                    encoding_format="float",
                    timeout=timeout,
                ),
                f"a {self.name} call",
            )
        except OpenAIError as e:
            raise model_error(self.name, e) from withheld(e)
        reported = response.usage is not None
        tokens = int(response.usage.prompt_tokens) if reported else 0
        bill = billing.current()
        if bill is not None and reported:
            # Billed once answered, whether or not the vectors below are of use; a
            # reply with no usage stays at the call's bound (candor.billing).
            bill.replied(Usage(tokens_in=tokens, cost_usd=self.price.cost(tokens, 0)))
        rows = sorted(response.data, key=lambda item: item.index)
        if [row.index for row in rows] != list(range(len(inputs))):
            raise ModelError(f"{self.name}: {len(rows)} embeddings for {len(inputs)} inputs")
        matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
        if matrix.shape != (len(inputs), self.dimensions):
            raise ModelError(
                f"{self.name}: embeddings of shape {matrix.shape}; "
                f"expected ({len(inputs)}, {self.dimensions})"
            )
        with self._lock:  # counted per batch: an ingest that fails later still reports it
            self.tokens += tokens
            self.cost_usd += self.price.cost(tokens, 0)
        return matrix, tokens
