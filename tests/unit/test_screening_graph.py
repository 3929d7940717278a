"""moderate with screening on: the calls it skips, the calls it still makes.

The scripted model raises on any call its script does not hold, so a script
without a Triage item proves the triage call was skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from candor import service
from candor.deps import Deps
from candor.errors import StateStoreError
from candor.results import AskResult
from candor.screening import policy
from candor.screening.classifier import shipped
from candor.settings import Settings
from candor.traces import Trace
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel
from tests.support.outages import FailingState

pytestmark = pytest.mark.unit

# Messages the shipped classifier is unsure of, or flags: each test checks its
# premise first, so that a retrained model that decides otherwise says so.
UNSURE_CONTACT = "who can help me with my account?"
UNSURE_GREETING = "greetings from sunny lisbon"
UNSURE_FOLLOW_UP = "and for tags?"
UNSURE_QUESTION = "what about the pricing?"
FLAGGED_UNSURE_KIND = "hey you idiot, what is a rebase"
ANSWER = "It refuses to overwrite work you have not seen [1]."
LEVEL = Settings.model_fields["screening_confidence"].default


def screened(make_deps: MakeDeps, chat: ScriptedChatModel, **settings: object) -> Deps:
    deps = make_deps(chat)
    update = {"screening": True} | settings
    return dataclasses.replace(deps, settings=deps.settings.model_copy(update=update))


def ask(deps: Deps, question: str, **kw: object) -> AskResult:
    return asyncio.run(service.ask(deps, question, **kw))  # type: ignore[arg-type]


def premise(message: str, expected: policy.Outcome) -> None:
    screen = shipped().screen(message)
    assert policy.outcome(screen, LEVEL) == expected, f"premise: {message!r} -> {screen}"


def stored(deps: Deps, result: AskResult) -> Trace:
    found = deps.state.get_trace(result.trace_id, now=0.0)
    assert found is not None
    return Trace.from_stored(found)


def test_a_question_the_classifier_is_sure_of_makes_no_triage_call(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"judge": [True], "text": [ANSWER]})
    deps = screened(make_deps, chat)

    result = ask(deps, "What does --force-with-lease do?")

    assert result.decision == "answered"
    assert chat.kinds() == ["judge", "text"]
    moderate = result.trace[0]
    assert (moderate.node, moderate.tokens_in, moderate.cost_usd) == ("moderate", 0, 0.0)
    screening = stored(deps, result).screening
    assert screening is not None and screening.without_model
    assert (screening.by, screening.kind) == ("classifier", "question")
    assert screening.confidence is not None and screening.confidence >= LEVEL


def test_a_question_about_abusive_messages_is_searched_not_warned(make_deps: MakeDeps) -> None:
    # Issue 20: on the bundled docs this question was warned as abusive.
    chat = ScriptedChatModel({"judge": [False, False], "Rewrite": [{"query": "warned abusive"}]})
    deps = screened(make_deps, chat)

    result = ask(deps, "What happens when a visitor sends a second abusive message?")

    assert result.decision == "declined"  # the test index holds no page on it
    assert "Triage" not in chat.kinds() and "Moderation" not in chat.kinds()
    assert deps.state.get_session(result.session_id).status == "active"


def test_an_insult_gets_the_moderation_call_before_the_session_is_warned(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"Moderation": [{"insulting": True}]})
    deps = screened(make_deps, chat)

    result = ask(deps, "you useless bot")

    assert result.decision == "warned"
    assert chat.kinds() == ["Moderation"]
    assert deps.state.get_session(result.session_id).status == "warned"
    screening = stored(deps, result).screening
    assert screening is not None and screening.moderated and not screening.without_model


def test_the_classifier_alone_never_warns(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"Moderation": [{"insulting": False}], "text": ["Hello!"]})
    deps = screened(make_deps, chat)

    result = ask(deps, "you useless bot")

    assert result.decision == "smalltalk"
    assert chat.kinds() == ["Moderation", "text"]
    assert deps.state.get_session(result.session_id).status == "active"


def test_a_flagged_message_the_look_clears_is_triaged_for_its_kind_after_it(
    make_deps: MakeDeps,
) -> None:
    # Moderation first, then triage: the node's two call slots take either order.
    premise(FLAGGED_UNSURE_KIND, "flagged")
    assert shipped().screen(FLAGGED_UNSURE_KIND).confidence < LEVEL
    chat = ScriptedChatModel(
        {
            "Moderation": [{"insulting": False}],
            "Triage": [{"abusive": True, "kind": "question"}],
            "judge": [False, False],
            "Rewrite": [{"query": "rebase"}],
        }
    )
    deps = screened(make_deps, chat)

    result = ask(deps, FLAGGED_UNSURE_KIND)

    assert chat.kinds()[:2] == ["Moderation", "Triage"]
    assert result.decision == "declined"  # searched; triage's own flag was answered
    assert deps.state.get_session(result.session_id).status == "active"


def test_a_message_the_classifier_is_unsure_of_reaches_the_triage_call(
    make_deps: MakeDeps,
) -> None:
    premise(UNSURE_CONTACT, "unsure")
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "contact"}]})
    deps = screened(make_deps, chat)

    result = ask(deps, UNSURE_CONTACT)

    assert chat.kinds() == ["Triage"]
    assert result.decision == "smalltalk" and "help@example.com" in result.answer
    screening = stored(deps, result).screening
    assert screening is not None and screening.by == "model"


def test_a_repeated_contact_question_costs_no_model_call_the_second_time(
    make_deps: MakeDeps,
) -> None:
    premise(UNSURE_CONTACT, "unsure")
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "contact"}]})
    deps = screened(make_deps, chat)
    first = ask(deps, UNSURE_CONTACT)

    second = ask(deps, "Who can help me with my account")  # another visitor, another case

    assert chat.kinds() == ["Triage"]
    assert second.answer == first.answer
    assert sum(step.tokens_in for step in second.trace) == 0
    screening = stored(deps, second).screening
    assert screening is not None and screening.by == "cache" and screening.without_model


def test_a_repeated_greeting_costs_no_triage_call_the_second_time(make_deps: MakeDeps) -> None:
    premise(UNSURE_GREETING, "unsure")
    chat = ScriptedChatModel(
        {"Triage": [{"abusive": False, "kind": "greeting"}], "text": ["Hello!", "Hello again!"]}
    )
    deps = screened(make_deps, chat)

    ask(deps, UNSURE_GREETING)
    second = ask(deps, UNSURE_GREETING)

    assert chat.kinds() == ["Triage", "text", "text"]  # the replies; one triage call
    assert second.decision == "smalltalk"


def test_a_message_triage_flagged_is_judged_afresh_every_time(make_deps: MakeDeps) -> None:
    premise(UNSURE_QUESTION, "unsure")
    flagged = {"abusive": True, "kind": "question"}
    chat = ScriptedChatModel(
        {
            "Triage": [flagged, flagged],
            "Moderation": [{"insulting": True}, {"insulting": True}],
        }
    )
    deps = screened(make_deps, chat)

    first = ask(deps, UNSURE_QUESTION)
    second = ask(deps, UNSURE_QUESTION, session_id=first.session_id)

    assert chat.kinds() == ["Triage", "Moderation"] * 2
    assert (first.decision, second.decision) == ("warned", "ended")


def test_a_follow_up_verdict_is_not_kept(make_deps: MakeDeps) -> None:
    premise(UNSURE_FOLLOW_UP, "unsure")
    follow_up = {"abusive": False, "kind": "follow_up"}
    chat = ScriptedChatModel(
        {"Triage": [follow_up, follow_up], "judge": [True] * 2, "text": [ANSWER] * 2}
    )
    deps = screened(make_deps, chat)

    ask(deps, UNSURE_FOLLOW_UP)
    ask(deps, UNSURE_FOLLOW_UP)

    assert chat.kinds().count("Triage") == 2


def test_with_the_cache_off_no_verdict_is_kept(make_deps: MakeDeps) -> None:
    premise(UNSURE_CONTACT, "unsure")
    contact = {"abusive": False, "kind": "contact"}
    chat = ScriptedChatModel({"Triage": [contact, contact]})
    deps = screened(make_deps, chat, cache_enabled=False)

    ask(deps, UNSURE_CONTACT)
    ask(deps, UNSURE_CONTACT)

    assert chat.kinds() == ["Triage", "Triage"]


def test_a_verdict_cache_that_fails_costs_the_triage_call_not_the_answer(
    make_deps: MakeDeps,
) -> None:
    premise(UNSURE_CONTACT, "unsure")
    contact = {"abusive": False, "kind": "contact"}
    chat = ScriptedChatModel({"Triage": [contact, contact]})
    deps = screened(make_deps, chat)
    failing = FailingState(
        deps.state, {"verdict_get", "verdict_put"}, StateStoreError("DynamoDB throttled")
    )
    deps = dataclasses.replace(deps, state=failing)

    first = ask(deps, UNSURE_CONTACT)
    second = ask(deps, UNSURE_CONTACT)

    assert (first.decision, second.decision) == ("smalltalk", "smalltalk")
    assert chat.kinds() == ["Triage", "Triage"]
    assert failing.calls["verdict_get"] == 2


def test_with_screening_off_every_message_gets_the_triage_call(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "greeting"}], "text": ["Hi!"]})
    deps = screened(make_deps, chat, screening=False)

    result = ask(deps, "hi")

    assert chat.kinds() == ["Triage", "text"]
    screening = stored(deps, result).screening
    assert screening is not None and screening.by == "model" and screening.abusive is None


def test_a_verdict_kept_for_branch_D_is_not_given_to_branch_d(make_deps: MakeDeps) -> None:
    # The verdict cache is keyed as the answer cache is: the case of a code-like name
    # makes another message; the case of a plain word, spacing and closing punctuation
    # do not.
    contact = {"abusive": False, "kind": "contact"}
    chat = ScriptedChatModel({"Triage": [contact, contact]})
    deps = screened(make_deps, chat, screening=False)

    ask(deps, "Who do I ask about git branch -D?")
    ask(deps, "who do I ask about git branch -d")
    ask(deps, "WHO do I ask about  git branch -D")

    assert chat.kinds() == ["Triage", "Triage"]
