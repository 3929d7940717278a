"""The yes/no check (CANDOR_YES_NO_CHECK): an answer that opens with "Yes" or "No" to a
question asking for one is judged against its excerpts, once, and declined when they
do not agree; off by default (docs/quality.md, "Yes/no answers")."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from candor import service
from candor.graph import prompts, yes_no
from candor.results import AskResult
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

QUESTION = {"abusive": False, "kind": "question"}
ASKED = "Is exit code 125 the one that makes git bisect run skip a commit?"


def ask(
    make_deps: MakeDeps, reply: str, judged: list[object], question: str = ASKED, *, on: bool = True
) -> tuple[AskResult, ScriptedChatModel]:
    chat = ScriptedChatModel({"Triage": [QUESTION], "judge": [True, *judged], "text": [reply]})
    deps = make_deps(chat)
    deps = dataclasses.replace(deps, settings=deps.settings.model_copy(update={"yes_no_check": on}))
    return asyncio.run(service.ask(deps, question)), chat


def test_a_yes_its_excerpts_do_not_agree_with_is_declined(make_deps: MakeDeps) -> None:
    # Every specific stands in the cited passage; only "No" is wrong, which no text
    # check reads.
    reply = "No, git bisect run skips a commit when the script exits with 125 [1]."
    result, chat = ask(make_deps, reply, [0.1])
    assert result.decision == "declined"
    assert result.citations == ()
    judged = [call for call in chat.calls if call.kind == "judge"]
    assert len(judged) == 2  # the grade, then the check
    task = judged[1].messages[-1]["content"]
    assert task.endswith(prompts.YES_NO_TASK)
    assert f"<answer>\n{reply}\n</answer>" in task
    # The excerpts and the question are the grade's own: a local model reads only the
    # task anew.
    grade = judged[0].messages[-1]["content"]
    assert task.split("\n\n<answer>")[0] == grade.removesuffix(prompts.GRADE_TASK).rstrip("\n")


def test_a_yes_its_excerpts_agree_with_is_kept(make_deps: MakeDeps) -> None:
    reply = "Yes, git bisect run skips a commit when the script exits with 125 [1]."
    result, _ = ask(make_deps, reply, [0.9])
    assert result.decision == "answered"
    assert result.answer == reply


def test_no_call_is_made_when_off_or_when_nothing_opens_with_yes_or_no(make_deps: MakeDeps) -> None:
    reply = "Yes, git bisect run skips a commit when the script exits with 125 [1]."
    assert ask(make_deps, reply, [], on=False)[0].decision == "answered"
    plain = "git bisect run skips a commit when the script exits with 125 [1]."
    assert ask(make_deps, plain, [])[0].decision == "answered"
    which = "Which exit code makes git bisect run skip a commit?"
    assert ask(make_deps, reply, [], which)[0].decision == "answered"


def test_questions_and_openings_read() -> None:
    assert yes_no.asks_yes_or_no("Is the default enough for logical decoding?")
    assert yes_no.asks_yes_or_no("Can I back up without stopping the server?")
    assert not yes_no.asks_yes_or_no("Which lock does VACUUM take?")
    assert yes_no.opening("Yes [1]. It is.") == "Yes [1]."
    assert yes_no.opening("No, it is off by default [1]. Turn it on.") == (
        "No, it is off by default [1]."
    )
    assert yes_no.opening("Nothing is enforced [1].") is None
    assert yes_no.opening("No-op pragmas do nothing [1].") is None
