"""The one call behind POST /ask and `candor ask`."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import asdict, dataclass

from candor.deps import Deps
from candor.errors import SessionEndedError
from candor.graph import nodes, runner
from candor.graph.state import Citation, Decision, GraphState, TraceStep
from candor.ports import Turn


@dataclass(frozen=True, slots=True)
class AskResult:
    answer: str
    decision: Decision
    citations: tuple[Citation, ...]
    attempts: int
    session_id: str
    trace_id: str
    trace: tuple[TraceStep, ...]

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {
            "citations": [asdict(c) for c in self.citations],
            "trace": [asdict(s) for s in self.trace],
        }


def new_session_id() -> str:
    return uuid.uuid4().hex


async def ask(
    deps: Deps, question: str, *, session_id: str | None = None, top_k: int | None = None
) -> AskResult:
    """Answer one question in a session; raise SessionEndedError if moderation ended it."""
    session_id = session_id or new_session_id()
    session = await asyncio.to_thread(deps.state.get_session, session_id)
    if session.status == "ended":
        raise SessionEndedError(session_id)
    settings = deps.settings
    history = session.history[-settings.history_turns :] if settings.history_turns else []
    final = await runner.run(
        GraphState(
            question=question,
            session_id=session_id,
            top_k=top_k or settings.top_k,
            history=tuple(history),
        ),
        deps,
    )
    decision: Decision = final.decision or "declined"
    if settings.history_turns:
        await asyncio.to_thread(
            deps.state.append_turn,
            session_id,
            Turn(nodes.subject(final), final.answer, decision),
            keep=settings.history_turns,
        )
    return AskResult(
        answer=final.answer,
        decision=decision,
        citations=final.citations,
        attempts=final.attempts,
        session_id=session_id,
        trace_id=uuid.uuid4().hex,
        trace=final.trace,
    )
