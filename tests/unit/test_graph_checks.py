"""The checks outside the model, through the whole graph with a scripted model:
the grounding gate before the grade, the support check after generation, and
courtesies that never become answers."""

from __future__ import annotations

import asyncio

import pytest

from candor import service
from candor.graph import nodes
from candor.graph.state import GraphState
from candor.results import AskResult
from candor.types import Hit
from tests.conftest import PASSAGES, MakeDeps
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

QUESTION = {"abusive": False, "kind": "question"}


def ask(deps_for: MakeDeps, chat: ScriptedChatModel, question: str, **kw: object) -> AskResult:
    return asyncio.run(service.ask(deps_for(chat), question, **kw))  # type: ignore[arg-type]


# -- the grounding gate --------------------------------------------------------


def test_a_setting_no_document_names_is_declined_without_asking_the_model(
    make_deps: MakeDeps,
) -> None:
    # Only the triage is scripted: a grade, rewrite or answer call would fail the test.
    chat = ScriptedChatModel({"Triage": [QUESTION]})
    result = ask(make_deps, chat, "What is the default value of `core.autoCompactHistory`?")
    assert result.decision == "declined"
    assert chat.kinds() == ["Triage"]
    assert [s.node for s in result.trace] == ["moderate", "route", "retrieve", "grade", "generate"]
    assert result.grades[-1].by == "gate"
    assert result.grades[-1].grounding.absent == ("core.autoCompactHistory",)


def test_a_third_party_product_no_document_names_is_declined_without_asking_the_model(
    make_deps: MakeDeps,
) -> None:
    # Not code-like: a proper noun. The passages are about git bisect, never Litestream.
    chat = ScriptedChatModel({"Triage": [QUESTION]})
    result = ask(make_deps, chat, "How do I install Litestream next to git bisect run?")
    assert result.decision == "declined"
    assert chat.kinds() == ["Triage"]
    assert result.grades[-1].by == "gate"
    assert result.grades[-1].grounding.absent == ("Litestream",)
    assert result.grades[-1].grounding.products == ("Litestream",)


def test_a_made_up_flag_next_to_a_real_command_is_declined(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"Triage": [QUESTION]})
    result = ask(make_deps, chat, "What does git push --force-if-newer do?")
    assert result.decision == "declined"
    assert result.grades[-1].grounding.absent == ("--force-if-newer",)


def test_a_name_the_passages_lack_brings_in_the_passage_that_holds_it_before_the_grade(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"judge": [True]})
    deps = make_deps(chat)
    amend = Hit(PASSAGES[1], 0.5)  # retrieval found the commit page only
    state = GraphState(
        question="What does --force-with-lease protect?",
        session_id="s",
        top_k=3,
        query="What does --force-with-lease protect?",
        attempts=1,
        passages=(amend,),
    )
    update = asyncio.run(nodes.grade(state, deps))
    grade_prompt = chat.calls[0].messages[-1]["content"]
    assert "[1] git-push(1)" in grade_prompt
    assert "[2] git-commit(1)" in grade_prompt
    assert [hit.chunk.id for hit in update["passages"]] == ["a1-0", "b2-0"]
    record = update["grades"][-1]
    assert record.by == "model" and record.answerable
    assert record.grounding.in_index == ("--force-with-lease",)
    assert record.passage_ids == ("a1-0", "b2-0")


def test_a_question_whose_names_are_all_shown_is_graded_as_before(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [QUESTION],
            "judge": [True],
            "text": ["It refuses the push unless the remote ref is unchanged [1]."],
        }
    )
    result = ask(make_deps, chat, "What does --force-with-lease do?")
    assert result.decision == "answered"
    assert result.grades[-1].grounding.shown == ("--force-with-lease",)
    assert result.grades[-1].grounding.added == ()


# -- the support check ---------------------------------------------------------


def answered(make_deps: MakeDeps, reply: str, question: str) -> AskResult:
    chat = ScriptedChatModel({"Triage": [QUESTION], "judge": [True], "text": [reply]})
    return ask(make_deps, chat, question)


def test_a_sentence_stating_a_value_no_cited_passage_gives_is_removed(
    make_deps: MakeDeps,
) -> None:
    reply = (
        "git bisect run skips a commit when the script exits with 125 [1]. "
        "The default timeout for the script is 30 seconds [1]."
    )
    result = answered(make_deps, reply, "Which exit code makes git bisect run skip a commit?")
    assert result.decision == "answered"
    assert result.answer == "git bisect run skips a commit when the script exits with 125 [1]."
    assert result.support is not None
    assert result.support.unsupported == ("30 seconds",)
    assert result.support.removed == ("The default timeout for the script is 30 seconds [1].",)


def test_a_count_whose_digits_the_passage_gives_for_something_else_is_removed(
    make_deps: MakeDeps,
) -> None:
    # 125 stands in the cited passage as an exit code, not as a number of years, and
    # E125 is a code no passage holds.
    reply = (
        "git bisect run skips a commit when the script exits with 125 [1]. "
        "This has worked for 125 years [1]. Other codes print E125 [1]."
    )
    result = answered(make_deps, reply, "Which exit code makes git bisect run skip a commit?")
    assert result.decision == "answered"
    assert result.answer == "git bisect run skips a commit when the script exits with 125 [1]."
    assert result.support is not None
    assert result.support.unsupported == ("125 years", "E125")


def test_an_answer_with_nothing_supported_left_is_declined(make_deps: MakeDeps) -> None:
    reply = 'The default value is 1000 and it is set with "wal_compression=on" [1].'
    result = answered(make_deps, reply, "What does git bisect run do?")
    assert result.decision == "declined"
    assert result.citations == ()
    assert result.support is not None and result.support.declined
    assert "help@example.com" in result.answer


def test_a_specific_taken_from_the_question_is_supported(make_deps: MakeDeps) -> None:
    reply = "Exit code 125 tells git bisect run to skip the commit; 3 other codes exist [1]."
    result = answered(make_deps, reply, "Are there 3 other exit codes besides 125?")
    assert result.decision == "answered"
    assert result.support is not None and result.support.verdict == "supported"
    assert result.answer == reply


def test_citations_are_renumbered_after_a_sentence_is_removed(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [QUESTION],
            "judge": [True],
            "text": [
                "The lease check runs 7 times [1]. "
                "git bisect run skips a commit on exit code 125 [2]."
            ],
        }
    )
    result = ask(make_deps, chat, "What happens in git bisect run and git push?")
    assert result.decision == "answered"
    assert result.answer == "git bisect run skips a commit on exit code 125 [1]."
    # The one citation left is the passage the kept sentence named as [2].
    answer_prompt = chat.calls[-1].messages[-1]["content"]
    second = answer_prompt.split("\n[2] ", 1)[1].split(" - ", 1)[0]
    assert [c.title for c in result.citations] == [second]


# -- courtesies ----------------------------------------------------------------


def test_a_farewell_the_model_calls_a_question_gets_small_talk_without_citations(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [QUESTION],  # the small model's mistake
            "judge": [True],
            "text": ["You're welcome [1]! Have a good day."],
        }
    )
    result = ask(make_deps, chat, "thanks, that's all I needed, bye")
    assert result.decision == "smalltalk"
    assert result.citations == ()
    assert "[1]" not in result.answer
    assert "retrieve" not in [s.node for s in result.trace]


def test_a_greeting_reply_never_carries_passage_markers(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {"Triage": [{"abusive": False, "kind": "greeting"}], "text": ["Hello [2] there!"]}
    )
    result = ask(make_deps, chat, "Good morning! How are you doing today?")
    assert result.decision == "smalltalk"
    assert result.answer == "Hello there!"
