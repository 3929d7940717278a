"""The documented shape of a POST /ask response, shared by the API, handler and e2e tests."""

ASK_RESPONSE_KEYS = frozenset(
    {"answer", "decision", "citations", "attempts", "session_id", "trace_id", "trace", "cached"}
)
