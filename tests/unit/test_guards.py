"""The guards around POST /ask: rate limits, the spending budget and the answer cache.

The embedded backends (SQLite state) and the scripted model, whose recorded
calls show whether a request reached the model at all.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shutil
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor import guards, release
from candor.api.app import create_app
from candor.api.local import create_local_app
from candor.deps import Deps
from candor.errors import ConfigurationError, ModelError, StateStoreError
from candor.settings import Settings
from tests.conftest import MakeDeps
from tests.support.edge import ORIGIN, SESSION_SECRET, allowing, browser
from tests.support.fakes import NotSent, ScriptedChatModel
from tests.support.lambda_ import set_header

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What does --force-with-lease do?"
CONTACT = {"abusive": False, "kind": "contact"}  # answered without retrieval or generation
ANSWERABLE: dict[str, Any] = {"abusive": False, "kind": "question"}


def answering(times: int = 1, *, cost: float = 0.0) -> ScriptedChatModel:
    return ScriptedChatModel(
        {
            "Triage": [ANSWERABLE] * times,
            "judge": [True] * times,
            "text": ["It refuses to overwrite work you have not seen [1]."] * times,
        },
        cost_per_call=cost,
    )


def guarded(make_deps: MakeDeps, chat: ScriptedChatModel, **settings: Any) -> Deps:
    deps = make_deps(chat)
    return dataclasses.replace(deps, settings=deps.settings.model_copy(update=settings))


def http(deps: Deps) -> TestClient:
    # A browser on the configured site; the state store is the same object as deps'.
    allowed = allowing(deps)
    return browser(create_app(lambda: allowed))


def today_spent(deps: Deps) -> Decimal:
    return deps.state.budget_spent(guards.daily_ledger(time.time()))


# Rate limits.


def test_requests_over_the_address_limit_get_429_with_retry_after_and_a_reason(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"Triage": [CONTACT] * 3})
    client = http(guarded(make_deps, chat, rate_address_limit=2))

    statuses = [client.post("/ask", json={"question": f"contact {n}?"}) for n in range(3)]

    refused = statuses[-1]
    assert [r.status_code for r in statuses] == [200, 200, 429]
    # Within the next window: this one's hits fade over it (candor.backends.rate_windows).
    assert 1 <= int(refused.headers["Retry-After"]) <= 2 * 60
    assert "your address" in refused.json()["detail"]
    assert len(chat.calls) == 2


def test_requests_over_the_session_limit_get_429_naming_the_conversation(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"Triage": [CONTACT] * 3})
    client = http(guarded(make_deps, chat, rate_session_limit=1))
    first = client.post("/ask", json={"question": "contact?"}).json()

    again = client.post("/ask", json={"question": "email?", "session_id": first["session_id"]})

    assert again.status_code == 429
    assert "conversation" in again.json()["detail"]
    assert "Retry-After" in again.headers


def test_a_forged_x_forwarded_for_does_not_escape_the_address_limit(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"Triage": [CONTACT] * 3})
    client = http(guarded(make_deps, chat, rate_address_limit=1))
    client.post("/ask", json={"question": "contact?"}, headers={"X-Forwarded-For": "198.51.100.1"})

    forged = client.post(
        "/ask", json={"question": "email?"}, headers={"X-Forwarded-For": "198.51.100.2"}
    )

    assert forged.status_code == 429


def test_behind_a_trusted_proxy_each_forwarded_address_has_its_own_limit(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({"Triage": [CONTACT] * 2})
    client = http(guarded(make_deps, chat, rate_address_limit=1, trusted_proxy_hops=1))

    first = client.post(
        "/ask", json={"question": "contact?"}, headers={"X-Forwarded-For": "1.1.1.1, 198.51.100.1"}
    )
    second = client.post(
        "/ask", json={"question": "email?"}, headers={"X-Forwarded-For": "1.1.1.1, 198.51.100.2"}
    )

    assert (first.status_code, second.status_code) == (200, 200)


def from_address(address: str) -> dict[str, str]:
    # Behind one trusted proxy (trusted_proxy_hops=1) its entry is the client's address.
    return {"X-Forwarded-For": address}


@pytest.mark.parametrize(
    ("neighbours", "outsider"),
    [
        (["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"], "203.0.114.1"),
        (
            ["2001:db8:5:1::1", "2001:db8:5:2::1", "2001:db8:5:3::1", "2001:db8:5:4::1"],
            "2001:db8:6::1",
        ),
    ],
    ids=["ipv4-24", "ipv6-48"],
)
def test_addresses_of_one_network_share_a_network_rate_limit(
    make_deps: MakeDeps, neighbours: list[str], outsider: str
) -> None:
    # Each address is under its own limit; together the /24 (or /48) is over its own.
    chat = ScriptedChatModel({"Triage": [CONTACT] * 5})
    client = http(guarded(make_deps, chat, trusted_proxy_hops=1, rate_network_limit=3))

    statuses = [
        client.post("/ask", json={"question": f"contact {n}?"}, headers=from_address(a))
        for n, a in enumerate(neighbours)
    ]
    elsewhere = client.post("/ask", json={"question": "email?"}, headers=from_address(outsider))

    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    refused = statuses[-1].json()
    assert refused["reason"] == "rate_limited" and "your network" in refused["detail"]
    assert "Retry-After" in statuses[-1].headers
    assert elsewhere.status_code == 200
    assert len(chat.calls) == 4


class Context:
    function_name = "candor-ask"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:candor-ask"
    aws_request_id = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def test_on_lambda_the_address_is_api_gateways_source_ip(
    make_deps: MakeDeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANDOR_ALLOWED_ORIGINS", ORIGIN)
    monkeypatch.setenv("CANDOR_SESSION_SECRET", SESSION_SECRET)
    spec = importlib.util.spec_from_file_location("ask_app", ROOT / "functions/ask/app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    chat = ScriptedChatModel({"Triage": [CONTACT] * 2})
    deps = guarded(make_deps, chat, rate_address_limit=1)
    module.app.state.deps_provider = lambda: deps
    event: dict[str, Any] = json.loads((ROOT / "events/ask.json").read_text())
    module.handler(event, Context())

    set_header(event, "x-forwarded-for", "192.0.2.99")  # the client writes this header
    event["body"] = json.dumps({"question": "How do I reach you?"})
    response = module.handler(event, Context())

    assert response["statusCode"] == 429
    assert "Retry-After" in {name.title() for name in response["headers"]}


# Spending.


def test_a_spent_daily_budget_refuses_with_503_and_makes_no_model_call(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel({})
    # The address's and the network's shares set high: only the day refuses.
    deps = guarded(
        make_deps,
        chat,
        budget_daily_usd=Decimal("0.01"),
        budget_address_usd=Decimal(1),
        budget_network_usd=Decimal(1),
    )
    deps.state.reserve_budget(
        guards.daily_ledger(time.time()), Decimal("0.01"), cap=Decimal("0.01"), expires_at=2**31
    )

    response = http(deps).post("/ask", json={"question": QUESTION})

    assert response.status_code == 503
    assert "daily spending budget" in response.json()["detail"]
    assert chat.calls == []


def test_a_spent_session_budget_refuses_and_returns_the_daily_hold(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel({})
    deps = guarded(make_deps, chat, budget_session_usd=Decimal("0.000001"))

    response = http(deps).post("/ask", json={"question": QUESTION})

    assert response.status_code == 503
    assert "conversation" in response.json()["detail"]
    assert chat.calls == []
    assert today_spent(deps) == 0


def test_the_ledger_is_trued_up_to_the_cost_in_the_trace(make_deps: MakeDeps) -> None:
    deps = guarded(make_deps, answering(cost=0.001))

    body = http(deps).post("/ask", json={"question": QUESTION}).json()

    traced = sum(step["cost_usd"] for step in body["trace"])
    assert traced == pytest.approx(0.003)
    assert today_spent(deps) == Decimal("0.003")


def test_a_request_that_fails_before_sending_anything_is_refunded_in_full(
    make_deps: MakeDeps,
) -> None:
    chat = ScriptedChatModel(
        {"Triage": [NotSent(ModelError("no time left for it"))]}, cost_per_call=0.001
    )
    deps = guarded(make_deps, chat)

    response = http(deps).post("/ask", json={"question": QUESTION})

    assert response.status_code == 503
    assert today_spent(deps) == 0


def test_a_request_that_fails_halfway_is_charged_what_it_spent(make_deps: MakeDeps) -> None:
    chat = ScriptedChatModel(
        {"Triage": [ANSWERABLE], "judge": [NotSent(ModelError("no connection"))]},
        cost_per_call=0.001,
    )
    deps = guarded(make_deps, chat)

    http(deps).post("/ask", json={"question": QUESTION})

    assert today_spent(deps) == Decimal("0.001")


def test_a_call_that_failed_after_it_was_sent_is_charged_its_bound_within_the_reservation(
    make_deps: MakeDeps,
) -> None:
    # A timeout after the request left: the provider may bill it, and no reply said
    # what it cost, so it is charged the most it could cost (candor.billing).
    chat = ScriptedChatModel(
        {"Triage": [ANSWERABLE], "judge": [ModelError("timed out")]}, cost_per_call=0.001
    )
    deps = guarded(make_deps, chat)
    held = guards.reservation_usd(deps.settings, chat.name, deps.embedder)

    http(deps).post("/ask", json={"question": QUESTION})

    assert Decimal("0.001") < today_spent(deps) <= held


def test_one_ipv6_48_cannot_spend_the_days_budget_for_everyone(make_deps: MakeDeps) -> None:
    # One /48 holds 65,536 /64s, each with its own address limit: 40 of them ask
    # one question each. They may spend the network's share (20% of the day), not
    # the day, and a visitor from elsewhere is still answered.
    chat = answering(times=41, cost=0.01)
    deps = guarded(
        make_deps,
        chat,
        trusted_proxy_hops=1,
        cache_enabled=False,
        budget_daily_usd=Decimal("1"),
        budget_reserve_usd=Decimal("0.03"),  # what one answer costs: three calls at $0.01
    )
    client = http(deps)
    block = [f"2001:db8:7:{n:x}::1" for n in range(40)]

    statuses = [
        client.post("/ask", json={"question": f"{QUESTION} ({n})"}, headers=from_address(a))
        for n, a in enumerate(block)
    ]
    outsider = client.post("/ask", json={"question": QUESTION}, headers=from_address("192.0.2.7"))

    assert outsider.status_code == 200
    served = [r for r in statuses if r.status_code == 200]
    refused = [r.json() for r in statuses if r.status_code != 200]
    assert len(served) == 6  # the network's $0.20 holds six answers of $0.03
    assert {(r["reason"], "your network" in r["detail"]) for r in refused} == {
        ("budget_exhausted", True)
    }
    assert all(r.status_code == 503 for r in statuses if r.status_code != 200)
    assert today_spent(deps) == Decimal("0.21")


def test_one_address_cannot_spend_more_than_its_share_of_the_day(make_deps: MakeDeps) -> None:
    chat = answering(times=6, cost=0.01)
    deps = guarded(
        make_deps,
        chat,
        trusted_proxy_hops=1,
        cache_enabled=False,
        rate_address_limit=100,
        budget_daily_usd=Decimal("2"),  # 5% of it: $0.10 per address, three answers
        budget_reserve_usd=Decimal("0.03"),
    )
    client = http(deps)

    own = [
        client.post("/ask", json={"question": f"{QUESTION} {n}"}, headers=from_address("192.0.2.9"))
        for n in range(5)
    ]
    calls = len(chat.calls)
    neighbour = client.post("/ask", json={"question": QUESTION}, headers=from_address("192.0.2.10"))

    assert [r.status_code for r in own] == [200, 200, 200, 503, 503]
    refused = own[-1].json()
    assert refused["reason"] == "budget_exhausted" and "your address" in refused["detail"]
    assert calls == 3 * 3  # the refused requests made no model call
    assert neighbour.status_code == 200
    assert today_spent(deps) == Decimal("0.12")


def test_a_refused_later_hold_returns_the_address_and_network_holds(make_deps: MakeDeps) -> None:
    deps = guarded(
        make_deps,
        ScriptedChatModel({}),
        trusted_proxy_hops=1,
        budget_reserve_usd=Decimal("0.01"),
        budget_session_usd=Decimal("0.001"),  # less than one reservation
    )

    response = http(deps).post(
        "/ask", json={"question": QUESTION}, headers=from_address("192.0.2.11")
    )

    assert response.status_code == 503
    assert "conversation" in response.json()["detail"]
    now = time.time()
    assert deps.state.budget_spent(guards.address_ledger("192.0.2.11", now)) == 0
    assert deps.state.budget_spent(guards.network_ledger("192.0.2.11", now)) == 0
    assert today_spent(deps) == 0


class ThrottledDayLedger:
    """The SQLite store whose writes to the day's ledger raise, as a throttled or timed-out
    DynamoDB write does, rather than refuse."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def reserve_budget(self, ledger_key: str, amount: Decimal, **kw: Any) -> bool:
        if ledger_key.startswith("day#"):
            raise StateStoreError("DynamoDB UpdateItem failed: ThrottlingException")
        result: bool = self.inner.reserve_budget(ledger_key, amount, **kw)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_store_error_on_the_day_ledger_returns_the_address_and_network_holds(
    make_deps: MakeDeps,
) -> None:
    # Seven failed requests used to lock an address out until midnight, nothing spent.
    chat = answering()
    deps = guarded(make_deps, chat, trusted_proxy_hops=1)
    throttled = dataclasses.replace(deps, state=ThrottledDayLedger(deps.state))
    client = http(throttled)

    failed = [
        client.post(
            "/ask", json={"question": f"{QUESTION} {n}"}, headers=from_address("192.0.2.31")
        )
        for n in range(7)
    ]

    assert {r.json()["reason"] for r in failed} == {"state_unavailable"}
    now = time.time()
    assert deps.state.budget_spent(guards.address_ledger("192.0.2.31", now)) == 0
    assert deps.state.budget_spent(guards.network_ledger("192.0.2.31", now)) == 0
    recovered = http(deps).post(
        "/ask", json={"question": QUESTION}, headers=from_address("192.0.2.31")
    )
    assert recovered.status_code == 200


def test_holds_settled_twice_are_refunded_once(make_deps: MakeDeps) -> None:
    deps = guarded(make_deps, ScriptedChatModel({}))
    holds = guards.reserve(
        deps.state, deps.settings, session_id="s" * 16, amount=Decimal("0.01"), now=time.time()
    )

    guards.settle(deps.state, holds, Decimal(0))
    guards.settle(deps.state, holds, Decimal(0))  # a retry, or a second path that returns them

    assert today_spent(deps) == 0


def smallest_named(error: ConfigurationError) -> Decimal:
    found = re.search(r"CANDOR_BUDGET_DAILY_USD to at least \$([0-9.]+)", str(error))
    assert found, str(error)
    return Decimal(found.group(1))


def test_a_daily_budget_whose_address_share_cannot_cover_one_request_is_refused_at_start(
    tmp_path: Path, state: Any
) -> None:
    # Below the smallest workable budget no visitor can ask at all, and each is told
    # that their address has used its share: refuse such settings at start instead.
    small = Settings(data_dir=tmp_path, chat_backend="openai", budget_daily_usd=Decimal("0.5"))
    with pytest.raises(ConfigurationError) as refused:
        create_local_app(small)
    smallest = smallest_named(refused.value)

    workable = small.model_copy(update={"budget_daily_usd": smallest})
    create_local_app(workable)  # starts
    amount = guards.reservation_usd(workable, workable.chat_model)
    holds = guards.reserve(
        state, workable, session_id="s" * 16, amount=amount, now=time.time(), address="192.0.2.41"
    )
    assert len(holds) == 3  # the address's share, the network's and the day's each held it
    cent_less = small.model_copy(update={"budget_daily_usd": smallest - Decimal("0.01")})
    with pytest.raises(ConfigurationError):
        create_local_app(cent_less)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("budget_address_usd", "0.01"),
        ("budget_network_usd", "0.01"),
        ("budget_session_usd", "0.01"),
    ],
)
def test_a_share_or_session_budget_set_below_one_request_is_refused_at_start(
    tmp_path: Path, setting: str, value: str
) -> None:
    base = Settings(data_dir=tmp_path, chat_backend="openai")
    settings = base.model_copy(update={setting: Decimal(value)})
    with pytest.raises(ConfigurationError, match=f"CANDOR_{setting.upper()}"):
        create_local_app(settings)


def test_a_free_model_starts_with_any_budget(tmp_path: Path) -> None:
    create_local_app(Settings(data_dir=tmp_path, budget_daily_usd=Decimal(0)))


def test_the_address_and_network_shares_default_to_parts_of_the_day(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, budget_daily_usd=Decimal("5"))
    assert guards.address_share(settings) == Decimal("0.25")
    assert guards.network_share(settings) == Decimal("1")
    fixed = settings.model_copy(update={"budget_address_usd": Decimal("0.5")})
    assert guards.address_share(fixed) == Decimal("0.5")


# The answer cache.


def test_an_exact_repeat_is_answered_from_the_cache_without_a_model_call(
    make_deps: MakeDeps,
) -> None:
    chat = answering()
    client = http(guarded(make_deps, chat))
    first = client.post("/ask", json={"question": QUESTION}).json()
    calls = len(chat.calls)

    repeat = client.post("/ask", json={"question": "  WHAT does  --force-with-lease DO "}).json()

    assert repeat["cached"] is True and first["cached"] is False
    assert (repeat["answer"], repeat["citations"]) == (first["answer"], first["citations"])
    assert [step["node"] for step in repeat["trace"]] == ["cache"]
    assert len(chat.calls) == calls


def test_a_cache_hit_reserves_nothing_from_the_budget(make_deps: MakeDeps) -> None:
    deps = guarded(make_deps, answering())
    client = http(deps)
    client.post("/ask", json={"question": QUESTION})
    # Whatever remains of the day's budget is now spoken for.
    deps.state.reserve_budget(
        guards.daily_ledger(time.time()),
        deps.settings.budget_daily_usd,
        cap=deps.settings.budget_daily_usd * 2,
        expires_at=2**31,
    )

    repeat = client.post("/ask", json={"question": QUESTION})

    assert repeat.status_code == 200
    assert repeat.json()["cached"] is True


def test_a_new_corpus_version_never_serves_an_old_cached_answer(make_deps: MakeDeps) -> None:
    chat = answering(times=2)
    deps = guarded(make_deps, chat)
    client = http(deps)
    client.post("/ask", json={"question": QUESTION})

    deps.state.bump_corpus_version(deps.settings.index_name)
    again = client.post("/ask", json={"question": QUESTION}).json()

    assert again["cached"] is False
    # The answer is made afresh; the triage verdict is not: it does not depend on
    # the documents, and the verdict cache kept it (candor.screening.verdicts).
    assert chat.kinds() == ["Triage", "judge", "text", "judge", "text"]


def test_an_upgrade_that_keeps_the_version_never_serves_an_old_cached_answer(
    make_deps: MakeDeps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The defect: the key held the version string (0.2.0 through many releases of
    # new prompts and checks), so after an upgrade an answer or a decline of the old
    # code was served for a day (CANDOR_CACHE_TTL_SECONDS).
    chat = answering(times=2)
    deps = guarded(make_deps, chat)
    client = http(deps)
    client.post("/ask", json={"question": QUESTION})
    # The upgrade: the same package with one prompt changed.
    upgraded = tmp_path / "candor"
    shutil.copytree(release.PACKAGE, upgraded, ignore=shutil.ignore_patterns("__pycache__"))
    prompts = upgraded / "graph" / "prompts.py"
    prompts.write_text(prompts.read_text() + "\n# a changed prompt\n")
    monkeypatch.setattr(release, "code_digest", lambda: release.tree_digest(upgraded))

    again = client.post("/ask", json={"question": QUESTION}).json()

    assert again["cached"] is False
    assert chat.kinds() == ["Triage", "judge", "text", "judge", "text"]


def test_the_code_digest_changes_with_any_file_but_not_with_bytecode(tmp_path: Path) -> None:
    (tmp_path / "graph").mkdir()
    (tmp_path / "graph" / "prompts.py").write_text("ANSWER = 'Answer.'\n")
    (tmp_path / "model.npz").write_bytes(b"\x00\x01")
    before = release.tree_digest(tmp_path)
    (tmp_path / "graph" / "__pycache__").mkdir()
    (tmp_path / "graph" / "__pycache__" / "prompts.cpython-311.pyc").write_bytes(b"\x42")
    assert release.tree_digest(tmp_path) == before
    (tmp_path / "model.npz").write_bytes(b"\x00\x02")
    assert release.tree_digest(tmp_path) != before


def test_an_ended_session_is_refused_before_the_cache_is_consulted(
    make_deps: MakeDeps,
) -> None:
    abusive = {"abusive": True, "kind": "question"}
    chat = ScriptedChatModel(
        {
            "Triage": [ANSWERABLE, abusive, abusive],
            "Moderation": [{"insulting": True}, {"insulting": True}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )
    client = http(guarded(make_deps, chat))
    client.post("/ask", json={"question": QUESTION})
    session = client.post("/ask", json={"question": "You idiot."}).json()["session_id"]
    client.post("/ask", json={"question": "Moron.", "session_id": session})

    refused = client.post("/ask", json={"question": QUESTION, "session_id": session})

    assert refused.status_code == 403


def test_answers_to_follow_ups_are_not_cached(make_deps: MakeDeps) -> None:
    follow_up = {"abusive": False, "kind": "follow_up"}
    chat = ScriptedChatModel(
        {
            "Triage": [follow_up, follow_up],
            "judge": [True] * 2,
            "text": ["More about the lease check [1]."] * 2,
        }
    )
    client = http(guarded(make_deps, chat))
    client.post("/ask", json={"question": "tell me more"})

    again = client.post("/ask", json={"question": "tell me more"}).json()

    assert again["cached"] is False


# The pieces, one by one.


@pytest.mark.parametrize(
    ("peer", "forwarded", "hops", "expected"),
    [
        ("203.0.113.17", "198.51.100.1", 0, "203.0.113.17"),  # header ignored: client-written
        ("10.0.0.2", "198.51.100.1, 203.0.113.17", 1, "203.0.113.17"),  # the proxy's entry
        ("10.0.0.2", "203.0.113.17, 10.0.0.1", 2, "203.0.113.17"),
        ("10.0.0.2", None, 1, "10.0.0.2"),  # fewer entries than proxies: the peer
    ],
)
def test_client_address(peer: str, forwarded: str | None, hops: int, expected: str) -> None:
    assert guards.client_address(peer, forwarded, hops) == expected


def test_ipv6_addresses_share_a_limit_per_64_block() -> None:
    first = guards.address_key("2001:db8:1:2::1")
    second = guards.address_key("2001:db8:1:2:ffff::9")
    assert first == second == "2001:db8:1:2::/64"
    assert guards.address_key("203.0.113.17") == "203.0.113.17"


def test_networks_are_ipv4_24_and_ipv6_48_blocks() -> None:
    assert guards.network_key("203.0.113.17") == "203.0.113.0/24"
    assert guards.network_key("2001:db8:1:2::1") == guards.network_key("2001:db8:1:ff::9")
    assert guards.network_key("2001:db8:1:2::1") == "2001:db8:1::/48"


def test_an_ipv4_mapped_ipv6_address_counts_as_its_ipv4_address() -> None:
    assert guards.address_key("::ffff:203.0.113.17") == "203.0.113.17"
    assert guards.network_key("::ffff:203.0.113.17") == "203.0.113.0/24"


def test_the_configured_reservation_is_used_as_is(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, budget_reserve_usd=Decimal("0.02"))
    assert guards.reservation_usd(settings, "unpriced-model") == Decimal("0.02")


def test_a_free_model_reserves_nothing(tmp_path: Path) -> None:
    assert guards.reservation_usd(Settings(data_dir=tmp_path), "local") == 0


def test_questions_differing_in_case_spacing_and_closing_punctuation_are_one() -> None:
    assert guards.normalise("  What does  X do?! ") == guards.normalise("what does x do")
    assert guards.normalise("Why is HEAD detached？") == guards.normalise("why is head detached")


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("How do I use git branch -D?", "how do I use git branch -d"),
        ("What does git grep -S do", "what does git grep -s do"),
        ("Is SQLITE_BUSY retried?", "is sqlite_busy retried?"),
        ("What does `git commit -C` take?", "what does `git commit -c` take?"),
    ],
)
def test_the_case_of_a_code_like_name_makes_a_new_question(one: str, other: str) -> None:
    assert guards.normalise(one) != guards.normalise(other)


def test_an_answer_cached_for_branch_D_is_not_served_to_another_visitor_asking_branch_d(
    make_deps: MakeDeps,
) -> None:
    # -D deletes a branch even when it is not merged; -d refuses to. Whoever asks first
    # must not decide what the next visitor reads.
    chat = ScriptedChatModel(
        {
            "Triage": [ANSWERABLE] * 2,
            "judge": [True] * 2,
            "text": [
                "It deletes the branch even when it is not merged [1].",
                "It deletes the branch only when it is merged [1].",
            ],
        }
    )
    deps = guarded(make_deps, chat, trusted_proxy_hops=1)
    client = http(deps)
    first = client.post(
        "/ask",
        json={"question": "How do I use git branch -D?"},
        headers=from_address("192.0.2.21"),
    ).json()

    second = client.post(
        "/ask",
        json={"question": "how do I use git branch -d"},
        headers=from_address("198.51.100.7"),
    ).json()
    repeat = client.post(
        "/ask",
        json={"question": "HOW do I  use git branch -D"},
        headers=from_address("203.0.113.5"),
    ).json()

    assert first["cached"] is False
    assert second["cached"] is False
    assert chat.kinds().count("text") == 2
    assert repeat["cached"] is True and repeat["answer"] == first["answer"]


def test_the_settings_fingerprint_changes_with_what_shapes_an_answer(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)

    def fingerprint(s: Settings, top_k: int = 4) -> str:
        return guards.settings_fingerprint(s, chat="local", embedder="e", top_k=top_k)

    assert fingerprint(settings) != fingerprint(settings, top_k=5)
    assert fingerprint(settings) != fingerprint(settings.model_copy(update={"contact": "x"}))
    assert fingerprint(settings) == fingerprint(
        settings.model_copy(update={"cache_ttl_seconds": 9})
    )


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("grade_threshold", 0.9),
        ("pack_context", False),
        ("pack_candidates", 5),
        ("context_chars", 900),
    ],
)
def test_a_cached_answer_is_not_served_under_another_grade_or_context(
    tmp_path: Path, setting: str, value: object
) -> None:
    # A decline cached under one grade threshold was served under another.
    settings = Settings(data_dir=tmp_path)
    other = settings.model_copy(update={setting: value})
    assert guards.settings_fingerprint(
        settings, chat="local", embedder="e", top_k=6
    ) != guards.settings_fingerprint(other, chat="local", embedder="e", top_k=6)
