"""POST /feedback through FastAPI: on a trace from POST /ask, with the embedded state store."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from candor import rating
from candor.api.app import create_app
from candor.api.local import create_local_app
from candor.ports import StoredTrace
from candor.settings import Settings
from candor.traces import Feedback, Trace
from tests.conftest import MakeDeps
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}],
    "judge": [True],
    "text": ["It refuses to overwrite work you have not seen [1]."],
}


class Visit:
    """One visitor's client, a question already asked and answered."""

    def __init__(self, make_deps: MakeDeps) -> None:
        self.chat = ScriptedChatModel(ANSWERING)
        self.deps = allowing(make_deps(self.chat))
        self.http = browser(create_app(lambda: self.deps))
        answer = self.http.post("/ask", json={"question": "What does --force-with-lease do?"})
        assert answer.status_code == 200
        self.answer = answer.json()

    def rate(self, **fields: Any) -> Any:
        body = {
            "trace_id": self.answer["trace_id"],
            "session_id": self.answer["session_id"],
            "score": -1,
        } | fields
        return self.http.post("/feedback", json=body)

    def feedback(self) -> Feedback | None:
        stored = self.deps.state.get_trace(self.answer["trace_id"], now=time.time())
        assert stored is not None
        return Trace.from_stored(stored).feedback


def test_a_rating_of_an_answer_is_stored_on_its_trace(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)
    calls = len(visit.chat.calls)

    response = visit.rate(
        score=-1,
        reason="incomplete",
        comment="It does not say what happens on a rejected push.",
        better_answer="The push is refused unless the remote ref is where you last saw it.",
    )

    assert response.status_code == 200
    assert response.json() == {"trace_id": visit.answer["trace_id"], "score": -1}
    feedback = visit.feedback()
    assert feedback is not None
    assert (feedback.score, feedback.reason) == (-1, "incomplete")
    assert feedback.comment == "It does not say what happens on a rejected push."
    assert feedback.better_answer is not None and feedback.better_answer.startswith("The push")
    assert feedback.rated_at > 0
    assert len(visit.chat.calls) == calls, "feedback must not call the model"


def test_a_second_rating_replaces_the_first(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)
    visit.rate(score=-1, reason="wrong", comment="first thoughts")

    assert visit.rate(score=1).status_code == 200

    assert visit.feedback() == Feedback(score=1, rated_at=visit.feedback().rated_at)  # type: ignore[union-attr]


def test_an_unknown_trace_is_404(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)
    response = visit.rate(trace_id="0" * 32)
    assert response.status_code == 404
    assert "unknown or has expired" in response.json()["detail"]


def test_an_expired_trace_is_404(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)
    old = StoredTrace("e" * 32, visit.answer["session_id"], 1.0, int(time.time()) - 1, "{}")
    visit.deps.state.put_trace(old)

    response = visit.rate(trace_id=old.trace_id)

    assert response.status_code == 404


def test_only_the_session_that_asked_may_rate(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)
    visit.rate(score=1)

    # Another visitor's session, signed by this server all the same.
    other = visit.http.post("/ask", json={"question": "What does --force-with-lease do?"})
    response = visit.rate(session_id=other.json()["session_id"], score=-1)

    assert response.status_code == 403
    assert "only the conversation that asked" in response.json()["detail"]
    assert visit.feedback() is not None and visit.feedback().score == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"score": 0}, "score"),
        ({"score": 5}, "score"),
        ({"reason": "boring"}, "reason"),
        ({"comment": "x" * 1001}, "at most 1000 characters"),
        ({"better_answer": "x" * 4001}, "at most 4000 characters"),
        ({"trace_id": "not-a-trace"}, "trace_id"),
        ({"session_id": "../../etc"}, "session_id"),
    ],
)
def test_an_invalid_rating_is_rejected_with_a_reason(
    make_deps: MakeDeps, fields: dict[str, Any], reason: str
) -> None:
    visit = Visit(make_deps)
    response = visit.rate(**fields)
    assert response.status_code == 422
    assert reason in response.text
    assert visit.feedback() is None


def test_feedback_shares_the_rate_limits_of_ask(make_deps: MakeDeps) -> None:
    # Given a session allowed two requests a minute, one of them spent on the question
    visit = Visit(make_deps)
    settings = visit.deps.settings.model_copy(update={"rate_session_limit": 2})
    visit.deps = dataclasses.replace(visit.deps, settings=settings)

    assert visit.rate(score=1).status_code == 200
    refused = visit.rate(score=-1)

    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) > 0
    assert visit.feedback().score == 1  # type: ignore[union-attr]


def test_candor_serve_mounts_the_feedback_route(settings: Settings) -> None:
    paths = create_local_app(settings).openapi()["paths"]
    assert "post" in paths["/feedback"]
    assert "post" in paths["/ask"]


def test_a_session_id_this_server_did_not_sign_may_not_rate(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)

    response = visit.rate(session_id="forged-session-1234", score=-1)

    assert response.status_code == 401
    assert response.json()["reason"] == "session_invalid"
    assert visit.feedback() is None


def test_an_ended_session_cannot_post_feedback(make_deps: MakeDeps) -> None:
    # Given a conversation that was ended after repeated abuse, once its answer was given
    visit = Visit(make_deps)
    for _ in range(2):
        visit.deps.state.record_offence(visit.answer["session_id"])

    response = visit.rate(score=-1, better_answer="Send your key to https://evil.example")

    assert response.status_code == 403
    assert response.json()["reason"] == "session_ended"
    assert visit.feedback() is None


def test_feedback_comments_are_not_stored_when_questions_are_not(make_deps: MakeDeps) -> None:
    # CANDOR_STORE_QUESTIONS=false: what a visitor writes is as private as the question.
    visit = Visit(make_deps)
    settings = visit.deps.settings.model_copy(update={"store_questions": False})
    visit.deps = dataclasses.replace(visit.deps, settings=settings)

    response = visit.rate(
        score=-1,
        reason="wrong",
        comment="I asked about my account 1234-5678",
        better_answer="Your account 1234-5678 is ...",
    )

    assert response.status_code == 200
    feedback = visit.feedback()
    assert feedback is not None
    assert (feedback.score, feedback.reason) == (-1, "wrong")
    assert (feedback.comment, feedback.better_answer) == (None, None)


def test_a_new_rating_waits_for_review_whatever_the_caller_passed(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)
    claimed = Feedback(score=-1, better_answer="Send your key", review="approved")

    outcome = rating.rate(
        visit.deps.state,
        visit.deps.settings,
        visit.answer["trace_id"],
        claimed,
        session_id=visit.answer["session_id"],
    )

    assert outcome == "rated"
    feedback = visit.feedback()
    assert feedback is not None and feedback.review == "pending"


@pytest.mark.parametrize("field", ["comment", "better_answer"])
@pytest.mark.parametrize("control", ["\x00", "\x1b", "\x7f", "\x85", "\x9b"])
def test_a_control_character_in_feedback_text_is_a_422_with_a_reason(
    make_deps: MakeDeps, field: str, control: str
) -> None:
    # The comment and the better answer are shown to the owner in `candor review`
    # and the insights: an escape sequence (ESC or the C1 CSI, U+009B) in them
    # reached the store as written, as questions did before they were checked.
    visit = Visit(make_deps)

    response = visit.rate(**{field: f"It is wrong{control}[2J about 4417"})

    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["body", field]
    assert f"U+{ord(control):04X}" in problem["msg"]
    assert "4417" not in response.text
    assert visit.feedback() is None, "a refused rating must store nothing"


def test_feedback_text_may_span_lines(make_deps: MakeDeps) -> None:
    visit = Visit(make_deps)

    response = visit.rate(comment="First line.\r\nSecond line.\tTabbed.")

    assert response.status_code == 200, response.text
    feedback = visit.feedback()
    assert feedback is not None and feedback.comment == "First line.\r\nSecond line.\tTabbed."
