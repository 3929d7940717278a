"""What one question's run returns: the result POST /ask gives, and the events of its stream.

A leaf module (it imports only the graph's state types), so that the service,
the traces and the API can all name these without importing each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from candor.graph.state import Citation, Decision, GradeRecord, SupportCheck, TraceStep


@dataclass(frozen=True, slots=True)
class AskResult:
    answer: str
    decision: Decision
    citations: tuple[Citation, ...]
    attempts: int
    session_id: str
    trace_id: str
    trace: tuple[TraceStep, ...]
    cached: bool = False
    # What the checks outside the model did: each grade (and the grounding gate's
    # findings), and the support check of the answer.
    grades: tuple[GradeRecord, ...] = ()
    support: SupportCheck | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {
            "citations": [asdict(c) for c in self.citations],
            "trace": [asdict(s) for s in self.trace],
        }


@dataclass(frozen=True, slots=True)
class Done:
    """The run is over: `result` is exactly what POST /ask returns."""

    result: AskResult


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing has happened for the idle interval: a point to keep a connection open."""
