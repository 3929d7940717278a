"""A question with two asks is split and searched one ask at a time (candor.planning);
a question with one ask takes the path it took before, with no added step or call."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from candor import planning, service
from candor.deps import Deps
from candor.graph import limits
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "How do I turn my commits into patches, and how does the maintainer apply them?",
            ("How do I turn my commits into patches?", "How does the maintainer apply them?"),
        ),
        (
            "What does `gc.auto` control, and then what happens if I set it to 0?",
            ("What does `gc.auto` control?", "What happens if I set it to 0?"),
        ),
        (
            "Where is the URL kept? Which state is a submodule left in after an update?",
            ("Where is the URL kept?", "Which state is a submodule left in after an update?"),
        ),
        (
            "How do I find a common ancestor and how does it relate to `A...B`?",
            ("How do I find a common ancestor?", "How does it relate to `A...B`?"),
        ),
    ],
)
def test_a_question_with_two_asks_is_split_into_them(question: str, parts: tuple[str, ...]) -> None:
    assert planning.split(question).parts == parts


@pytest.mark.parametrize(
    "question",
    [
        "When using `git bisect run`, which exit code skips a commit?",
        "Which tags exist and are signed?",
        "How do I list branches, tags and remotes?",
        "What does --force-with-lease do, and why?",
        "tell me about push",
    ],
)
def test_a_question_with_one_ask_is_not_split(question: str) -> None:
    plan = planning.split(question)

    assert not plan.multiple
    assert plan.queries == (" ".join(question.split()),)


def test_context_sentences_and_what_it_points_at_go_into_each_query() -> None:
    plan = planning.split(
        "I deleted a worktree by hand. How do I clean up `git worktree` data, "
        "and when would gc do it for me?"
    )

    assert plan.queries == (
        "I deleted a worktree by hand. How do I clean up `git worktree` data?",
        "I deleted a worktree by hand. When would gc do it for me? `git worktree`",
    )


def test_more_asks_than_parts_share_the_last_part() -> None:
    plan = planning.split("What is A? What is B? What is C? What is D?")

    assert plan.parts == ("What is A?", "What is B?", "What is C? What is D?")
    assert len(plan.parts) == planning.MAX_PARTS


TWO_ASKS = (
    "Why is --force-with-lease safer than a plain force push, "
    "and how do I fix a typo in the last commit message?"
)


def planning_on(deps: Deps) -> Deps:
    """The deps with CANDOR_PLAN_QUESTIONS=true (off by default)."""
    return replace(deps, settings=deps.settings.model_copy(update={"plan_questions": True}))


def test_each_ask_keeps_an_excerpt_and_the_whole_is_graded_once(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": [
                "It refuses to overwrite work you have not seen [1]. "
                "Use git commit --amend to fix the message [2]."
            ],
        }
    )

    result = asyncio.run(service.ask(planning_on(make_deps(chat)), TWO_ASKS))

    assert [step.node for step in result.trace] == [
        "moderate",
        "route",
        "plan",
        "grade",
        "generate",
    ]
    assert chat.kinds() == ["Triage", "judge", "text"]  # no call of its own
    graded = chat.calls[1].messages[-1]["content"]
    assert "--force-with-lease protects the remote ref" in graded
    assert "git commit --amend replaces the tip" in graded
    assert {c.source for c in result.citations} == {"git-push.html", "git-commit.html"}


def test_a_question_with_one_ask_takes_the_path_it_took_before(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )

    result = asyncio.run(
        service.ask(planning_on(make_deps(chat)), "Why is --force-with-lease safe?")
    )

    assert [step.node for step in result.trace] == [
        "moderate",
        "route",
        "retrieve",
        "grade",
        "generate",
    ]


def test_with_planning_off_a_question_with_two_asks_is_searched_whole(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )
    result = asyncio.run(service.ask(make_deps(chat), TWO_ASKS))  # off by default

    assert "plan" not in [step.node for step in result.trace]


def test_the_budget_reserves_for_every_part_of_a_plan() -> None:
    bounds = limits.embedding_bounds("plan")
    one_part = limits.embedding_bounds("retrieve")

    assert len(bounds) == planning.MAX_PARTS * len(one_part)
    assert limits.visits(2)["plan"] == 1


def test_a_planned_question_every_grade_declines_stays_within_its_reserved_reads(
    make_deps: MakeDeps,
) -> None:
    # The plan searched three parts under an allowance of no index reads at all: the
    # runner refused its first query, and a question of two asks failed.
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [False, False],
            "Rewrite": [{"query": "force with lease"}],
            "text": ["I could not find that in the documents."],
        }
    )
    deps = planning_on(make_deps(chat))
    question = (
        "Why is --force-with-lease safe, and how do I fix a commit message, "
        "and what does git commit --amend replace?"
    )

    result = asyncio.run(service.ask(deps, question))

    nodes = [step.node for step in result.trace]
    assert nodes[nodes.index("plan") :] == [
        "plan",
        "grade",
        "rewrite",
        "retrieve",
        "grade",
        "generate",
    ]
    assert len(planning.split(question).parts) == planning.MAX_PARTS
    envelope = limits.envelope(deps.settings)
    assert 0 < sum(step.index_reads for step in result.trace) <= envelope.index_reads
    plan_step = next(step for step in result.trace if step.node == "plan")
    assert 1 < plan_step.index_reads <= limits.INDEX_READS["plan"]
