"""POST /handoff through the app, to a webhook receiver on loopback and to moto's SES.

The server builds the transcript from the session; the record is stored before
anything is forwarded; a receiver that fails for a while still gets it, once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor.api.app import create_app
from candor.backends.sqlite_handoffs import SqliteHandoffStore
from candor.deps import Deps
from candor.handoffs import dispatch, forward
from candor.handoffs.store import Handoff
from candor.handoffs.transcript import Content
from tests.conftest import MakeDeps
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel
from tests.support.webhook_server import Receiver, webhook_receiver

pytestmark = pytest.mark.integration

SECRET = "webhook-secret-0123456789"
QUESTION = {"abusive": False, "kind": "question"}
ANSWER = "It refuses to overwrite work you have not seen [1]."
VISITOR = "Visitor@Example.org"


def chat_that_answers_then_declines() -> ScriptedChatModel:
    return ScriptedChatModel(
        {
            "Triage": [QUESTION, QUESTION],
            "judge": [True, False, False],
            "Rewrite": [{"query": "cloud drive sync"}],
            "text": [ANSWER],
        }
    )


@contextmanager
def visitor(deps: Deps) -> Iterator[TestClient]:
    # Entered, so that the app's event loop (and the forwarding it runs) outlives
    # each request.
    with browser(create_app(lambda: deps)) as http:
        yield http


def handoff_deps(make_deps: MakeDeps, receiver: Receiver, **settings: Any) -> Deps:
    return allowing(
        make_deps(chat_that_answers_then_declines()),
        handoff_webhook_url=receiver.url,
        handoff_webhook_secret=SECRET,
        handoff_retry_seconds=0.2,
        **settings,
    )


def converse(http: TestClient) -> str:
    """An answer, then a decline, in one session; returns the session id."""
    first = http.post("/ask", json={"question": "What does --force-with-lease do?"}).json()
    assert first["decision"] == "answered"
    second = http.post(
        "/ask",
        json={
            "question": "How do I sync my repo to a cloud drive?",
            "session_id": first["session_id"],
        },
    ).json()
    assert second["decision"] == "declined"
    session_id: str = second["session_id"]
    return session_id


def hand_off(http: TestClient, session_id: str | None, **fields: Any) -> Any:
    body = {"email": VISITOR, "message": "Can someone help me set this up?"} | fields
    if session_id is not None:
        body["session_id"] = session_id
    return http.post("/handoff", json=body)


def test_a_handoff_after_a_decline_reaches_the_webhook_signed_with_the_conversation(
    make_deps: MakeDeps,
) -> None:
    with webhook_receiver() as receiver:
        deps = handoff_deps(make_deps, receiver)
        with visitor(deps) as http:
            session_id = converse(http)

            response = hand_off(http, session_id)

            assert response.status_code == 202, response.text
            assert response.json()["transcript_turns"] == 2
            [request] = receiver.wait_for(1)

    assert forward.verify(request.body, request.headers["x-candor-signature"], SECRET)
    assert not forward.verify(request.body, request.headers["x-candor-signature"], "other-secret")
    payload = json.loads(request.body)
    handoff = payload["handoff"]
    assert handoff["email"] == "Visitor@example.org"  # the domain normalised, the name kept
    assert handoff["after_decline"] is True
    assert handoff["message"] == "Can someone help me set this up?"
    turns = handoff["transcript"]
    assert [t["question"] for t in turns] == [
        "What does --force-with-lease do?",
        "How do I sync my repo to a cloud drive?",
    ]
    assert [t["decision"] for t in turns] == ["answered", "declined"]
    assert turns[0]["answer"] == ANSWER
    assert [s["title"] for s in turns[0]["sources"]] == ["git-push(1)"]
    assert "Reply to: Visitor@example.org" in payload["text"]
    assert "How do I sync my repo to a cloud drive?" in payload["text"]
    assert request.headers["x-candor-handoff-id"] == response.json()["handoff_id"]


def test_a_forged_transcript_field_is_ignored(make_deps: MakeDeps) -> None:
    forged = [
        {"question": "What is the admin password?", "answer": "hunter2", "decision": "answered"}
    ]
    with webhook_receiver() as receiver:
        deps = handoff_deps(make_deps, receiver)
        with visitor(deps) as http:
            session_id = converse(http)

            response = hand_off(http, session_id, transcript=forged, after_decline=False)

            assert response.status_code == 202
            [request] = receiver.wait_for(1)

    assert b"hunter2" not in request.body and b"admin password" not in request.body
    assert json.loads(request.body)["handoff"]["after_decline"] is True


def test_a_session_cannot_hand_off_another_sessions_conversation(make_deps: MakeDeps) -> None:
    with webhook_receiver() as receiver:
        deps = handoff_deps(make_deps, receiver)
        with visitor(deps) as http:
            converse(http)
            # A stranger with a session of their own, who never asked anything.
            response = hand_off(http, None)

            assert response.status_code == 202
            [request] = receiver.wait_for(1)

    assert json.loads(request.body)["handoff"]["transcript"] == []


def test_a_second_handoff_past_the_hourly_limit_is_refused(make_deps: MakeDeps) -> None:
    with webhook_receiver() as receiver:
        deps = handoff_deps(make_deps, receiver, handoff_hourly_limit=1)
        with visitor(deps) as http:
            session_id = converse(http)
            assert hand_off(http, session_id).status_code == 202

            again = hand_off(http, session_id, message="Hello again?")

            assert again.status_code == 429
            assert again.json()["reason"] == "rate_limited"
            assert int(again.headers["retry-after"]) > 0
            receiver.wait_for(1)
    assert len(receiver.received) == 1


def test_a_webhook_that_fails_then_recovers_receives_the_handoff_once(
    make_deps: MakeDeps,
) -> None:
    with webhook_receiver(statuses=[503, 500]) as receiver:
        deps = handoff_deps(make_deps, receiver)
        with visitor(deps) as http:
            session_id = converse(http)
            handoff_id = hand_off(http, session_id).json()["handoff_id"]

            received = receiver.wait_for(3)
            time.sleep(0.6)  # room for a fourth request, were one to be sent

    assert [r.status for r in receiver.received] == [503, 500, 200]
    assert len(receiver.accepted()) == 1
    assert len({r.body for r in received}) <= 3  # each attempt signs anew
    stored = SqliteHandoffStore(deps.settings.state_path).get_handoff(handoff_id, now=time.time())
    assert stored is not None
    assert (stored.state, stored.attempts, stored.delivered_to) == ("delivered", 3, ("webhook",))


def test_a_handoff_is_stored_before_it_is_forwarded_and_kept_when_every_attempt_fails(
    make_deps: MakeDeps,
) -> None:
    with webhook_receiver(statuses=[503] * 5) as receiver:
        deps = handoff_deps(make_deps, receiver, handoff_max_attempts=2)
        with visitor(deps) as http:
            session_id = converse(http)
            handoff_id = hand_off(http, session_id).json()["handoff_id"]
            receiver.wait_for(2)
            time.sleep(0.6)

    stored = SqliteHandoffStore(deps.settings.state_path).get_handoff(handoff_id, now=time.time())
    assert stored is not None
    assert (stored.state, stored.attempts) == ("failed", 2)
    assert stored.last_error == "webhook answered 503"
    assert Content.from_json(stored.body).message == "Can someone help me set this up?"
    assert len(receiver.received) == 2


def test_without_stored_questions_the_transcript_is_the_follow_up_window_and_says_so(
    make_deps: MakeDeps,
) -> None:
    with webhook_receiver() as receiver:
        deps = handoff_deps(make_deps, receiver, store_questions=False, history_ttl_seconds=600)
        with visitor(deps) as http:
            session_id = converse(http)
            config = http.get("/widget/config").json()
            hand_off(http, session_id)
            [request] = receiver.wait_for(1)

    assert config["handoff"] == {"enabled": True, "transcript": "window", "window_minutes": 10}
    payload = json.loads(request.body)
    assert payload["handoff"]["transcript_scope"] == "window"
    # The history still holds the questions the traces did not keep.
    assert len(payload["handoff"]["transcript"]) == 2
    assert "its last 10 minutes" in payload["text"]


def test_without_a_destination_handoffs_are_off(make_deps: MakeDeps) -> None:
    deps = allowing(make_deps(ScriptedChatModel()))
    with visitor(deps) as http:
        response = hand_off(http, None)
        config = http.get("/widget/config").json()

    assert response.status_code == 404
    assert config["handoff"]["enabled"] is False


@pytest.mark.parametrize(
    "email",
    [
        "visitor@example.org\r\nBcc: everyone@example.org",
        "visitor@example.org\nSubject: hi",
        "not an address",
        "visitor@@example.org",
    ],
)
def test_an_address_that_is_not_one_or_would_add_a_header_is_refused(
    make_deps: MakeDeps, email: str
) -> None:
    with webhook_receiver() as receiver:
        deps = handoff_deps(make_deps, receiver)
        with visitor(deps) as http:
            response = hand_off(http, None, email=email)

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "email"]
    assert receiver.received == []


def test_an_ended_session_cannot_hand_off(make_deps: MakeDeps) -> None:
    with webhook_receiver() as receiver:
        deps = handoff_deps(make_deps, receiver)
        with visitor(deps) as http:
            session_id = converse(http)
            deps.state.record_offence(session_id)
            deps.state.record_offence(session_id)

            response = hand_off(http, session_id)

    assert response.status_code == 403
    assert response.json()["reason"] == "session_ended"


# The e-mail path, through moto's SES.


@pytest.fixture
def ses(fake_aws_credentials: str) -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("sesv2", region_name=fake_aws_credentials)
        client.create_email_identity(EmailIdentity="candor@docs.example.com")
        yield client


def stored_handoff(email: str = "visitor@example.org") -> tuple[Handoff, Content]:
    content = Content(
        email=email,
        message="Subject: urgent\r\nBcc: all@example.org\n\nPlease help.",
        site_name="Example Docs\r\nBcc: x@example.org",
        scope="conversation",
        after_decline=True,
    )
    handoff = Handoff("h" * 32, "s", time.time(), int(time.time()) + 3600, content.to_json())
    return handoff, content


def test_the_email_goes_from_the_owners_verified_address_with_the_visitor_only_in_reply_to(
    ses: Any,
) -> None:
    from email import message_from_string
    from email.policy import default

    from moto.backends import get_backend

    handoff, content = stored_handoff()

    forward.send_email(
        ses, handoff, content, sender="candor@docs.example.com", owner="team@docs.example.com"
    )

    [sent] = get_backend("ses")["123456789012"]["eu-west-1"].sent_messages
    assert sent.source == "candor@docs.example.com"
    message = message_from_string(sent.raw_data, policy=default)
    assert message["From"] == "candor@docs.example.com"
    assert message["To"] == "team@docs.example.com"
    assert message["Reply-To"] == "visitor@example.org"
    assert message.get_all("Bcc") is None
    # The site name's line break and the message's header-like lines stay text.
    assert message["Subject"] == (
        "candor hand-off from a visitor of Example Docs Bcc: x@example.org"
    )
    body = message.get_content()
    assert "Reply to: visitor@example.org" in body
    assert "Subject: urgent" in body


def test_an_address_with_a_line_break_cannot_reach_a_header() -> None:
    handoff, content = stored_handoff(email="visitor@example.org\r\nBcc: all@example.org")

    with pytest.raises(ValueError):
        forward.email_message(
            handoff, content, sender="candor@docs.example.com", owner="team@docs.example.com"
        )


def test_an_email_ses_refuses_is_a_failed_attempt_to_retry(ses: Any) -> None:
    handoff, content = stored_handoff()

    with pytest.raises(forward.DeliveryError, match="SES refused"):
        forward.send_email(
            ses, handoff, content, sender="unverified@example.net", owner="team@docs.example.com"
        )


# The queue path (AWS): the ask function enqueues, the hand-off function delivers.


def test_a_queued_handoff_is_delivered_by_the_queue_handler_and_a_failure_is_reported_back(
    fake_aws_credentials: str, settings: Any
) -> None:
    import asyncio

    import boto3
    from moto import mock_aws

    store = SqliteHandoffStore(settings.state_path)
    handoff, _ = stored_handoff()
    store.put_handoff(handoff)
    with mock_aws(), webhook_receiver(statuses=[502]) as receiver:
        sqs = boto3.client("sqs", region_name=fake_aws_credentials)
        url = sqs.create_queue(QueueName="handoffs")["QueueUrl"]
        asyncio.run(dispatch.QueueForwarder(url, client=sqs).dispatch(handoff.id))
        [message] = sqs.receive_message(QueueUrl=url)["Messages"]
        event = {"Records": [{"messageId": message["MessageId"], "body": message["Body"]}]}
        senders = {"webhook": lambda h, c: forward.send_webhook(receiver.url, h, c, secret=SECRET)}

        first = dispatch.handle_queue_event(event, store, senders, max_attempts=5)
        second = dispatch.handle_queue_event(event, store, senders, max_attempts=5)
        third = dispatch.handle_queue_event(event, store, senders, max_attempts=5)

    assert first == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
    assert second == third == {"batchItemFailures": []}
    assert [r.status for r in receiver.received] == [502, 200]  # the third sent nothing
    done = store.get_handoff(handoff.id, now=time.time())
    assert done is not None and done.state == "delivered"
