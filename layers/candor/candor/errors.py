"""Library errors. Handlers map these to responses in one place."""

from typing import Literal


class CandorError(Exception):
    """Base class for every error candor raises on purpose."""


class ConfigurationError(CandorError):
    """The settings cannot build a working system (missing file, bad value)."""


# How a model call failed, as a ModelError says it.
ModelErrorKind = Literal[
    "refused",  # the provider declined to answer (a refusal, its content filter)
    "off_schema",  # a structured reply that is not the schema
    "truncated",  # a reply cut at its output cap
    "status",  # the provider answered with an error status
    "unreachable",  # a timeout, or a connection lost or never made
    "no_option",  # a judged reply that names none of the options
    "over_budget",  # the request's reservation cannot cover the call
    "local",  # the local model or embedder failed
    "failed",  # anything else: a reply the adapter could not use
]


class ModelError(CandorError):
    """A chat model, embedder or reranker call failed; `kind` says how.

    Its message is candor's own words: the backend, the kind, a status code or a
    schema's name. Never the provider's text or the reply: a refusal, an error body
    or pydantic's `input_value` can quote the visitor, and the message goes to the
    log and to the X-Ray subsegment of the node that raised it. Adapters raise it
    `from withheld(error)` (candor.withheld), which keeps the cause's type and
    frames without its text.
    """

    def __init__(self, message: str, kind: ModelErrorKind = "failed") -> None:
        super().__init__(message)
        self.kind: ModelErrorKind = kind


class IndexError_(CandorError):
    """The vector index refused or failed an operation."""


class SessionEndedError(CandorError):
    """The session was ended by moderation; later requests on it are refused."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} was ended after repeated abuse")
        self.session_id = session_id


class IngestError(CandorError):
    """One document could not be ingested; the reason says why."""


class CuratedAnswerError(CandorError):
    """A curated answer the owner gave cannot be kept as given; the reason says why."""


class RateLimitedError(CandorError):
    """Too many requests from one address or in one session within a window."""

    def __init__(self, retry_after: int, reason: str) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.reason = reason


class BudgetExhaustedError(CandorError):
    """The spending budget cannot cover another request; no model call was made.

    `ledger` names the budget that refused: "address", "network", "session" or "day".
    """

    def __init__(self, reason: str, ledger: str = "day") -> None:
        super().__init__(reason)
        self.reason = reason
        self.ledger = ledger


class StateStoreError(CandorError):
    """The state store failed or stayed contended; the request was not served."""


class DeadlineExceededError(CandorError):
    """The request ran past its deadline; what was spent is settled."""


class SessionInvalidError(CandorError):
    """A session id the server did not sign, or signed too long ago; nothing was written."""
