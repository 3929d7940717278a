"""The grade a question's names settle: no model call when every name of a question
that names an exact thing stands in the passages the answer reads."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from candor import service
from candor.graph.grounding import specific_name
from candor.results import AskResult
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

QUESTION = {"abusive": False, "kind": "question"}
ANSWER = "It refuses to overwrite a remote ref you have not seen [1]."


def ask(make_deps: MakeDeps, chat: ScriptedChatModel, question: str, *, on: bool) -> AskResult:
    deps = make_deps(chat)
    settings = deps.settings.model_copy(update={"grade_by_names": on})
    return asyncio.run(service.ask(dataclasses.replace(deps, settings=settings), question))


def test_a_flag_the_passages_show_is_answered_without_a_grade_call(make_deps: MakeDeps) -> None:
    # No judge is scripted: a grade call would fail the test.
    chat = ScriptedChatModel({"Triage": [QUESTION], "text": [ANSWER]})
    result = ask(make_deps, chat, "What does --force-with-lease protect?", on=True)
    assert chat.kinds() == ["Triage", "text"]
    assert result.decision == "answered"
    grade = result.grades[-1]
    assert (grade.by, grade.answerable, grade.score) == ("names", True, None)
    assert grade.grounding.shown == ("--force-with-lease",)


def test_the_setting_off_asks_the_model_to_grade_the_same_question(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({"Triage": [QUESTION], "judge": [True], "text": [ANSWER]})
    result = ask(make_deps, chat, "What does --force-with-lease protect?", on=False)
    assert chat.kinds() == ["Triage", "judge", "text"]
    assert result.grades[-1].by == "model"


def test_a_command_alone_still_goes_to_the_grade(make_deps: MakeDeps) -> None:
    # Every page of a manual names `git commit`: that it is shown says nothing.
    chat = ScriptedChatModel({"Triage": [QUESTION], "judge": [True], "text": [ANSWER]})
    result = ask(make_deps, chat, "How do I sign every `git commit` I make?", on=True)
    assert chat.kinds() == ["Triage", "judge", "text"]
    assert result.grades[-1].by == "model"


def test_a_question_without_names_still_goes_to_the_grade(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {"Triage": [QUESTION], "judge": [False, False], "Rewrite": [{"query": "x"}]}
    )
    result = ask(make_deps, chat, "How do I fix the last commit message?", on=True)
    assert "judge" in chat.kinds()
    assert result.decision == "declined"


@pytest.mark.parametrize(
    ("name", "specific"),
    [
        ("--force-with-lease", True),
        ("-n", True),
        ("gc.auto", True),
        ("SQLITE_BUSY", True),
        (".import", True),
        ("2.40", True),
        ("125", True),
        ("git log", False),
        ("rebase", False),
        ("GitHub", False),
    ],
)
def test_which_names_are_specific_enough_to_settle_a_grade(name: str, specific: bool) -> None:
    assert specific_name(name) is specific


def test_a_flag_named_in_a_question_about_something_else_goes_to_the_grade(
    make_deps: MakeDeps,
) -> None:
    # The passage shows the flag, but the question asks for a limerick about a cat:
    # the flag alone does not say the passages answer it.
    chat = ScriptedChatModel(
        {"Triage": [QUESTION], "judge": [False, False], "Rewrite": [{"query": "limerick cat"}]}
    )
    result = ask(
        make_deps, chat, "Write me a limerick about my cat, not about --force-with-lease.", on=True
    )
    assert "judge" in chat.kinds()
    assert all(grade.by != "names" for grade in result.grades)
    assert result.decision == "declined"


def test_a_question_about_the_flag_in_the_passages_own_words_is_still_settled(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"Triage": [QUESTION], "text": [ANSWER]})
    result = ask(make_deps, chat, "Which remote ref does --force-with-lease protect?", on=True)
    assert chat.kinds() == ["Triage", "text"]
    assert result.grades[-1].by == "names"
