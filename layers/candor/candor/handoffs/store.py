"""The hand-off records: their own small port, one module per backend.

A record is written once, whole, before anything is forwarded, and only its
delivery state changes after that. A delivery first claims the record (one
conditional write: it is still pending and nobody else holds it), so that two
deliverers (the queue's at-least-once delivery, a retry from the command line)
never forward it twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol, runtime_checkable

HandoffState = Literal["pending", "delivered", "failed"]
STATES: tuple[HandoffState, ...] = ("pending", "delivered", "failed")


def handoff_day(created_at: float) -> str:
    """The UTC day a hand-off is listed under."""
    return datetime.fromtimestamp(created_at, UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True, slots=True)
class Handoff:
    """One hand-off as a store keeps it: the fields it indexes and checks, and the
    content itself as JSON (candor.handoffs.content.Content), which it does not read."""

    id: str
    session_id: str
    created_at: float
    expires_at: int
    body: str
    state: HandoffState = "pending"
    attempts: int = 0
    # The channels ("webhook", "email") that have taken it: a retry sends only the rest.
    delivered_to: tuple[str, ...] = ()
    last_error: str = ""
    # Until when a deliverer holds it (epoch seconds); 0 when nobody does.
    lease_until: float = 0.0

    @property
    def day(self) -> str:
        return handoff_day(self.created_at)


@runtime_checkable
class HandoffStore(Protocol):
    """Where hand-offs wait until they are delivered, and stay for the owner to list."""

    def put_handoff(self, handoff: Handoff) -> bool:
        """Store a new hand-off; False (and nothing written) if its id exists."""
        ...

    def get_handoff(self, handoff_id: str, *, now: float) -> Handoff | None:
        """The hand-off, or None when absent or expired."""
        ...

    def claim_handoff(self, handoff_id: str, *, lease_until: float, now: float) -> Handoff | None:
        """Hold an undelivered hand-off (pending, or failed and tried again) for one
        attempt until `lease_until`, in one conditional write: None when it is absent,
        expired, delivered, or held by another attempt whose lease has not run out.
        The claim counts one attempt."""
        ...

    def finish_attempt(
        self,
        handoff_id: str,
        *,
        state: HandoffState,
        delivered_to: tuple[str, ...],
        error: str,
    ) -> None:
        """Record how the claimed attempt went, and release the claim."""
        ...

    def handoffs_on(self, day: str, *, now: float) -> list[Handoff]:
        """Every live hand-off created on a UTC day ("YYYY-MM-DD"), oldest first."""
        ...
