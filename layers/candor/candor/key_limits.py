"""The limits of one server key on the routes for servers and assistants.

MCP (/mcp, `ask_docs` and `search_docs`) and the OpenAI-compatible API
(/v1/chat/completions) are called by servers and assistants with a server key,
often on behalf of many people at once from one address: the per-address and
per-network windows of /ask would throttle them all together. Each key counts in
a window of its own (CANDOR_RATE_KEY_LIMIT a minute) and in a day's
(CANDOR_RATE_KEY_DAILY_LIMIT), both sliding windows in the state store, one
atomic conditional write each, as every guard is. The day's spending budget
still holds for them all (candor.guards.reserve).

The key itself is never stored: its id (candor.api.edge.key_id) is.
"""

from __future__ import annotations

from candor import observability
from candor.errors import RateLimitedError
from candor.ports import StateStore
from candor.settings import Settings

DAY_SECONDS = 86_400


def check_key_limits(state: StateStore, settings: Settings, key_id: str, *, now: float) -> None:
    """Count one request against the key's window and its day's; raise when one is full."""
    checks = (
        (
            f"key#{key_id}",
            settings.rate_key_window_seconds,
            settings.rate_key_limit,
            "too many requests with this key",
        ),
        (
            f"keyday#{key_id}",
            DAY_SECONDS,
            settings.rate_key_daily_limit,
            "this key has made its requests for the day",
        ),
    )
    for key, seconds, limit, what in checks:
        decision = state.hit_rate_limit(key, window_seconds=seconds, limit=limit, now=now)
        if not decision.allowed:
            observability.count("rate_limited")
            raise RateLimitedError(
                decision.retry_after,
                f"{what}: at most {limit} every {seconds} s; try again in {decision.retry_after} s",
            )
