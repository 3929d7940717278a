"""One deadline per request: no model call starts after it, and what was spent is settled."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from decimal import Decimal
from typing import Any

import pytest

from candor import guards, service
from candor.deps import Deps
from candor.errors import DeadlineExceededError
from candor.settings import Settings
from tests.conftest import MakeDeps, clear_candor_env
from tests.support.fakes import ScriptedChatModel, Stall

pytestmark = pytest.mark.unit

QUESTION = {"abusive": False, "kind": "question"}


def with_deadline(make_deps: MakeDeps, chat: ScriptedChatModel, seconds: float) -> Deps:
    deps = make_deps(chat)
    update: dict[str, Any] = {"request_deadline_seconds": seconds}
    return dataclasses.replace(deps, settings=deps.settings.model_copy(update=update))


def spent_today(deps: Deps) -> Decimal:
    return deps.state.budget_spent(guards.daily_ledger(time.time()))


def test_a_model_that_stalls_past_the_deadline_ends_the_request_and_is_charged_what_it_cost(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel(
        {"Triage": [Stall(0.4, QUESTION)], "judge": [True], "text": ["x [1]"]},
        cost_per_call=0.001,
    )
    deps = with_deadline(make_deps, chat, 0.2)

    started = time.perf_counter()
    with pytest.raises(DeadlineExceededError):
        asyncio.run(service.ask(deps, "What does --force-with-lease do?"))

    assert chat.kinds() == ["Triage"]  # the grade call never started
    assert time.perf_counter() - started < 2
    assert spent_today(deps) == Decimal("0.001")  # the reservation settled to the spend


def test_a_request_whose_deadline_has_passed_makes_no_model_call_and_is_refunded(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"Triage": [QUESTION]}, cost_per_call=0.001)
    deps = with_deadline(make_deps, chat, 1e-9)

    with pytest.raises(DeadlineExceededError):
        asyncio.run(service.ask(deps, "What does --force-with-lease do?"))

    assert chat.calls == []
    assert spent_today(deps) == 0


def test_a_request_within_its_deadline_is_answered(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [Stall(0.05, QUESTION)],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )
    deps = with_deadline(make_deps, chat, 5)

    result = asyncio.run(service.ask(deps, "What does --force-with-lease do?"))

    assert result.decision == "answered"


def test_the_deadline_is_25_seconds_for_a_hosted_model_and_none_for_the_local_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clear_candor_env(monkeypatch)
    # 25 s: under the ask function's 28 s timeout and API Gateway's 29 s.
    assert Settings(chat_backend="openai").request_deadline() == 25
    assert Settings(chat_backend="local").request_deadline() is None
    assert Settings(chat_backend="local", request_deadline_seconds=9).request_deadline() == 9
