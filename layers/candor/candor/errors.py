"""Library errors. Handlers map these to responses in one place."""


class CandorError(Exception):
    """Base class for every error candor raises on purpose."""


class ConfigurationError(CandorError):
    """The settings cannot build a working system (missing file, bad value)."""


class ModelError(CandorError):
    """A chat model or embedder call failed (timeout, bad output, provider error)."""


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
