"""The OpenAI client the adapters share, created on first use.

Importing `openai` costs about half a second of cold start, so a Lambda that
never calls OpenAI never imports it, and one that does imports it once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openai import OpenAI


class LazyOpenAIClient:
    def __init__(
        self, *, api_key: str, base_url: str | None, timeout: float, max_retries: int
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._max_retries = max_retries
        self._client: OpenAI | None = None
        self._lock = threading.Lock()

    def __call__(self) -> OpenAI:
        with self._lock:
            if self._client is None:
                from openai import OpenAI

                self._client = OpenAI(
                    api_key=self._api_key,
                    base_url=self._base_url,
                    timeout=self._timeout,
                    max_retries=self._max_retries,
                )
            return self._client
