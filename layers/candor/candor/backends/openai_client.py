"""The OpenAI client the adapters share, created on first use, and its retries.

Importing `openai` costs about half a second of cold start, so a Lambda that
never calls OpenAI never imports it, and one that does imports it once.

Retries are candor's, not the SDK's: the SDK sleeps for whatever Retry-After a
server sends, up to two minutes, and knows nothing of the request's deadline.
Here each attempt is cut at the configured timeout or the time left before the
deadline (candor.deadline), whichever is less, and a retry is made only when its
wait and a useful attempt still fit. When time runs out the call raises
DeadlineExceededError; other failures are the SDK's errors, for the adapter to
turn into ModelError.

Each attempt is recorded on the current call's bill (candor.billing): one that
got an error status, or never connected, bills nothing; one that timed out or
lost its connection after it was sent may have been billed and stays at the
call's bound, and is retried only if the request's reservation still covers
another attempt. The adapter records the usage of a reply that arrived.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from candor import billing, deadline
from candor.errors import DeadlineExceededError, ModelError, ModelErrorKind

if TYPE_CHECKING:
    from openai import OpenAI, OpenAIError

T = TypeVar("T")

# An attempt with less time than this left is not started: it could not finish.
MIN_ATTEMPT_SECONDS = 0.25
# The SDK's own backoff: 0.5 s doubling to 8 s, less up to a quarter of jitter.
INITIAL_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 8.0
# A server-directed wait longer than this is not waited for, deadline or not.
MAX_RETRY_AFTER_SECONDS = 60.0


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
                    max_retries=0,  # see call()
                )
            return self._client

    def call(self, request: Callable[[OpenAI, float], T], what: str) -> T:
        """`request(client, timeout)`, retried within the attempts and the deadline.

        `what` names the call in a DeadlineExceededError.
        """
        from openai import OpenAIError

        client = self()
        bill = billing.current()
        if bill is not None:
            bill.track()
        for attempt in range(self._max_retries + 1):
            left = deadline.remaining()
            if left is not None and left < MIN_ATTEMPT_SECONDS:
                raise DeadlineExceededError(f"no time left for {what}")
            timeout = self._timeout if left is None else min(self._timeout, left)
            if bill is not None:
                bill.sent()
            try:
                return request(client, timeout)
            except OpenAIError as error:
                billed = may_be_billed(error)
                if bill is not None and not billed:
                    bill.unbilled()
                wait = _retry_wait(error, attempt)
                left = deadline.remaining()
                if left is not None and left < MIN_ATTEMPT_SECONDS:
                    raise DeadlineExceededError(f"{what} ran out of time") from error
                if wait is None or attempt == self._max_retries:
                    raise
                if billed and bill is not None and not bill.may_retry():
                    raise  # what the request reserved would not cover another attempt
                if left is not None and wait + MIN_ATTEMPT_SECONDS > left:
                    raise DeadlineExceededError(f"no time left to retry {what}") from error
                time.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")


def model_error(model: str, error: OpenAIError) -> ModelError:
    """The ModelError an SDK error becomes: its type, kind and status, never its text.

    An error's text quotes what the provider sent back (a status body, a refusal, a
    reply that did not parse), which can quote the visitor; raise it `from
    withheld(error)`.
    """
    from openai import (
        APIConnectionError,
        APIStatusError,
        ContentFilterFinishReasonError,
        LengthFinishReasonError,
    )

    kind: ModelErrorKind = "failed"
    detail = type(error).__name__
    if isinstance(error, LengthFinishReasonError):
        kind = "truncated"
    elif isinstance(error, ContentFilterFinishReasonError):
        kind = "refused"
    elif isinstance(error, APIStatusError):
        kind, detail = "status", f"{detail} (status {error.status_code})"
    elif isinstance(error, APIConnectionError):  # a timeout is one too
        kind = "unreachable"
    return ModelError(f"{model}: {detail}", kind)


# httpx's (and httpx2's, which the SDK may use) errors of a request that never
# left: named, not imported, so that either transport's are known.
_NEVER_SENT = frozenset({"ConnectError", "ConnectTimeout", "PoolTimeout"})


def may_be_billed(error: OpenAIError) -> bool:
    """Whether a failed attempt may have been billed: it reached the provider and no
    error status says it was not served (a timeout, a connection lost mid-reply)."""
    from openai import APIStatusError

    if isinstance(error, APIStatusError):
        return False  # the provider answered with an error: it bills none
    return type(error.__cause__).__name__ not in _NEVER_SENT


def _retry_wait(error: OpenAIError, attempt: int) -> float | None:
    """Seconds to wait before retrying after `error`, or None if it is not worth retrying.

    The same errors as the SDK retries: connection errors and timeouts, 408, 409,
    429 and 5xx, unless the server says otherwise (x-should-retry).
    """
    from openai import APIConnectionError, APIStatusError

    if isinstance(error, APIConnectionError):
        return _backoff(attempt)
    if not isinstance(error, APIStatusError):
        return None
    headers = error.response.headers
    should = headers.get("x-should-retry")
    status = error.status_code
    if should == "false" or (should != "true" and status not in (408, 409, 429) and status < 500):
        return None
    retry_after = _retry_after(headers.get("retry-after-ms"), 1000) or _retry_after(
        headers.get("retry-after"), 1
    )
    if retry_after is None:
        return _backoff(attempt)
    return retry_after if retry_after <= MAX_RETRY_AFTER_SECONDS else None


def _retry_after(value: str | None, per_second: float) -> float | None:
    try:
        seconds = float(value) / per_second if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare from OpenAI; fall back to the backoff
    return seconds if seconds is not None and seconds >= 0 else None


def _backoff(attempt: int) -> float:
    delay = min(INITIAL_BACKOFF_SECONDS * 2.0**attempt, MAX_BACKOFF_SECONDS)
    return delay * (1 - 0.25 * random.random())  # jitter, not security
