# ruff: noqa: F811 (the fixtures imported from test_widget are parameters here)
"""The widget's hand-off, starter questions and kept conversation, in real Chromium.

The same stack as tests/e2e/test_widget.py (candor serve's app on loopback with the
scripted model, a customer's site on another origin), and a hand-off webhook
receiver on loopback that records what it is sent.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import SecretStr

from candor import suggestions
from candor.deps import Deps
from candor.handoffs import forward
from tests.e2e.test_widget import (  # noqa: F401 (fixtures)
    ANSWER,
    QUESTION,
    WAIT_MS,
    StartStack,
    Widget,
    answered_chat,
    browser,
    embed_page,
    page,
    start,
)
from tests.support import browser as chromium
from tests.support.fakes import ScriptedChatModel
from tests.support.webhook_server import Receiver, webhook_receiver

pytestmark = pytest.mark.e2e

from playwright.sync_api import Page, expect  # noqa: E402

SECRET = "webhook-secret-0123456789"
DECLINED_QUESTION = "How do I sync my repository to a cloud drive?"
VISITOR = "visitor@example.org"


def declining() -> dict[str, list[Any]]:
    return {"Triage": [QUESTION], "judge": [False, False], "Rewrite": [{"query": "x"}]}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as running:
        yield running


def handoffs(receiver: Receiver, **settings: Any) -> dict[str, Any]:
    return {
        "handoff_webhook_url": receiver.url,
        # model_copy does not validate: the setting's own type.
        "handoff_webhook_secret": SecretStr(SECRET),
        "handoff_retry_seconds": 0.3,
        **settings,
    }


def fill_handoff(page: Page, email: str = VISITOR) -> None:
    form = page.locator("form.person")
    expect(form).to_be_visible()
    form.get_by_label("Your e-mail address").fill(email)
    form.get_by_role("button", name="Send to the team").click()


# Hand-off


def test_a_declined_visitor_hands_off_and_the_webhook_gets_the_conversation_signed(
    page: Page, start: StartStack, receiver: Receiver
) -> None:
    stack = start(declining(), **handoffs(receiver))
    widget = Widget(page, stack)
    widget.open()
    reply = widget.ask(DECLINED_QUESTION)
    declined = reply.locator(".answer").inner_text()

    reply.get_by_role("button", name="Ask a person").click()

    form = page.locator("form.person")
    expect(form.get_by_label("Your e-mail address")).to_be_focused()
    expect(form.get_by_label("Your message")).to_have_value(DECLINED_QUESTION)
    expect(form).to_contain_text("This conversation goes to the site's team with your message.")
    fill_handoff(page)
    expect(page.locator(".msg.bot").last).to_have_text(
        f"Assistant: Sent. The site's team will reply to {VISITOR}."
    )
    expect(page.locator("form.person")).to_have_count(0)
    [request] = receiver.wait_for(1)
    assert forward.verify(request.body, request.headers["x-candor-signature"], SECRET)
    handoff = json.loads(request.body)["handoff"]
    assert handoff["email"] == VISITOR and handoff["after_decline"] is True
    assert handoff["message"] == DECLINED_QUESTION
    assert [(t["question"], t["decision"]) for t in handoff["transcript"]] == [
        (DECLINED_QUESTION, "declined")
    ]
    assert handoff["transcript"][0]["answer"] == declined


def test_a_second_handoff_past_the_limit_is_refused_in_the_panel(
    page: Page, start: StartStack, receiver: Receiver
) -> None:
    stack = start(declining(), **handoffs(receiver, handoff_hourly_limit=1))
    widget = Widget(page, stack)
    widget.open()
    widget.ask(DECLINED_QUESTION).get_by_role("button", name="Ask a person").click()
    fill_handoff(page)
    expect(page.locator(".msg.bot").last).to_have_text(
        f"Assistant: Sent. The site's team will reply to {VISITOR}."
    )

    # The quiet link under the question box opens the form again.
    page.locator(".panel > .link").click()
    fill_handoff(page)

    expect(page.locator("form.person [role=status]")).to_have_text(
        "You have asked for a person several times already. Please try again later."
    )
    receiver.wait_for(1)
    assert len(receiver.received) == 1


def test_a_webhook_that_fails_for_a_while_still_receives_the_handoff_once(
    page: Page, start: StartStack
) -> None:
    with webhook_receiver(statuses=[503, 502]) as failing:
        stack = start(declining(), **handoffs(failing))
        widget = Widget(page, stack)
        widget.open()
        widget.ask(DECLINED_QUESTION).get_by_role("button", name="Ask a person").click()
        fill_handoff(page)
        expect(page.locator(".msg.bot").last).to_contain_text("Sent.")

        received = failing.wait_for(3)
        page.wait_for_timeout(1500)  # time for a fourth, were one to be sent

    assert [r.status for r in failing.received] == [503, 502, 200]
    assert len({json.loads(r.body)["handoff"]["id"] for r in received}) == 1


def test_without_a_destination_no_handoff_is_offered(page: Page, start: StartStack) -> None:
    stack = start(declining())
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask(DECLINED_QUESTION)

    expect(reply.get_by_role("button", name="Ask a person")).to_have_count(0)
    expect(page.locator(".panel > .link")).to_be_hidden()


def test_the_handoff_form_says_when_only_the_follow_up_window_goes(
    page: Page, start: StartStack, receiver: Receiver
) -> None:
    stack = start(
        declining(), **handoffs(receiver, store_questions=False, history_ttl_seconds=1800)
    )
    widget = Widget(page, stack)
    widget.open()

    widget.ask(DECLINED_QUESTION).get_by_role("button", name="Ask a person").click()

    expect(page.locator("form.person")).to_contain_text(
        "The last 30 minutes of this conversation go to the site's team with your message."
    )


# Starter questions


def test_the_panel_opens_with_starters_the_graph_checked_and_a_click_asks_one(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat(), suggest_questions=True)
    # The refresh writes one question and the graph answers it, before any visit.
    checking = ScriptedChatModel(
        {
            "text": ["Why would my push be turned down after a teammate pushed?", ANSWER],
            "Triage": [QUESTION],
            "judge": [True],
        }
    )
    deps = stack.deps
    checked = Deps(deps.settings, checking, deps.embedder, deps.index, None, deps.state)
    stack.deps.state.bump_corpus_version(deps.settings.index_name)
    long_page = deps.index.fetch(["a1-0"])[0]
    deps.index.upsert(
        [
            type(long_page)(
                "a1-1",
                " ".join([long_page.text] * 3),
                long_page.source,
                long_page.title,
                long_page.heading,
            )
        ],
        deps.embedder.embed([" ".join([long_page.text] * 3)]),
    )
    # Playwright's sync API holds this thread's event loop: the refresh runs in another.
    with ThreadPoolExecutor(1) as other:
        done = other.submit(asyncio.run, suggestions.refresh(checked, version=1)).result()
    assert done.kept == ["Why would my push be turned down after a teammate pushed?"]
    widget = Widget(page, stack)

    widget.open()

    starters = page.get_by_role("group", name="Suggested questions")
    starter = starters.get_by_role("button", name=done.kept[0])
    expect(starter).to_be_visible()
    calls = len(stack.chat.calls)
    starter.click()
    expect(page.locator(".log")).to_have_attribute("aria-busy", "false")
    expect(widget.reply.locator(".answer")).to_have_text(ANSWER)
    expect(starters).to_have_count(0)
    assert stack.asked[-1]["question"] == done.kept[0]
    assert stack.chat.kinds()[calls:].count("text") == 1  # its own answer, nothing else


def test_data_suggestions_replace_the_servers_starters(page: Page, start: StartStack) -> None:
    stack = start(answered_chat(), suggested_questions=("From the server?",))
    themed = (
        f'<!doctype html><html lang="en"><head><title>t</title></head><body><main>x</main>'
        f'<script src="{stack.api}/widget/candor-widget.js" data-api="{stack.api}" '
        """data-suggestions='["What does --force-with-lease do?", "Where are tags kept?"]' """
        "defer></script></body></html>"
    )
    page.route(f"{stack.api}/own.html", lambda r: r.fulfill(body=themed, content_type="text/html"))
    widget = Widget(page, stack, url=f"{stack.api}/own.html")
    widget.open()

    buttons = page.get_by_role("group", name="Suggested questions").get_by_role("button")

    expect(buttons).to_have_text(["What does --force-with-lease do?", "Where are tags kept?"])


# A conversation that stays


def test_the_conversation_survives_a_reload_with_its_chips_and_rating(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    widget.open()
    reply = widget.ask("What does --force-with-lease do?")
    reply.get_by_role("button", name="Helpful", exact=True).click()
    expect(reply.get_by_text("Thank you for the feedback.")).to_be_visible()

    page.reload()
    widget.open()

    expect(page.locator(".msg.user")).to_have_text(["You said: What does --force-with-lease do?"])
    again = widget.reply
    expect(again.locator(".answer")).to_have_text(ANSWER)
    expect(again.get_by_role("link", name="[1]git-push(1) (opens in a new tab)")).to_be_visible()
    expect(again.get_by_role("button", name="Helpful", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(page.get_by_role("group", name="Suggested questions")).to_have_count(0)
    assert len(stack.chat.calls) == 3, "a reload asks nothing again"


def test_the_conversation_follows_the_visitor_to_another_page_of_the_site(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    embed = f"{stack.site}/embed.html"
    widget = Widget(page, stack, url=embed)
    widget.open()
    widget.ask("What does --force-with-lease do?")
    # Another page of the site: the static site serves its one embedding page at any
    # query (a page fulfilled by the test itself would be a public page to Chromium,
    # which then refuses it the API on loopback).
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{stack.site}/embed.html?page=other")
    assert errors == []
    widget.open()

    expect(widget.reply.locator(".answer")).to_have_text(ANSWER)


def test_new_conversation_starts_over_with_a_new_session(page: Page, start: StartStack) -> None:
    stack = start({"Triage": [QUESTION] * 2, "judge": [True] * 2, "text": [ANSWER] * 2})
    widget = Widget(page, stack)
    widget.open()
    widget.ask("What does --force-with-lease do?")
    assert widget.session()

    page.get_by_role("button", name="New conversation").click()

    expect(page.locator(".msg")).to_have_count(1)  # the greeting
    expect(widget.input).to_be_focused()
    assert widget.session() is None
    widget.ask("And --force?")
    assert "session_id" not in stack.asked[-1]
    page.reload()
    widget.open()
    expect(page.locator(".msg.user")).to_have_text(["You said: And --force?"])


def test_a_stored_conversation_is_bounded(page: Page, start: StartStack) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    big = {"k": "b", "answer": "x" * 5000, "decision": "answered", "citations": []}
    page.evaluate(
        "([key, entry]) => sessionStorage.setItem(key, JSON.stringify(Array(30).fill(entry)))",
        [f"candor-log {stack.api}", big],
    )
    page.reload()
    widget.open()
    widget.ask("What does --force-with-lease do?")

    stored = page.evaluate("key => sessionStorage.getItem(key)", f"candor-log {stack.api}")

    assert len(stored) <= 60_000
    assert json.loads(stored)[-1]["answer"] == ANSWER


# Theme, language, keyboard, accessibility


def test_dark_mode_follows_the_system_unless_data_theme_says_otherwise(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    page.emulate_media(color_scheme="dark")
    widget = Widget(page, stack)
    widget.open()
    expect(page.get_by_role("dialog")).to_have_css("background-color", "rgb(32, 33, 36)")

    light = embed_page(stack.api).replace("data-api=", 'data-theme="light" data-api=')
    page.route(f"{stack.api}/light.html", lambda r: r.fulfill(body=light, content_type="text/html"))
    page.goto(f"{stack.api}/light.html")
    widget.open()

    expect(page.get_by_role("dialog")).to_have_css("background-color", "rgb(255, 255, 255)")


def test_every_new_string_has_a_french_version(page: Page, start: StartStack) -> None:
    source = (chromium.ROOT / "layers/candor/candor/api/static/candor-widget.js").read_text()
    tables = re.search(r"en: \{(.*?)\n    \},\n    fr: \{(.*?)\n    \},", source, re.S)
    assert tables is not None
    keys = [set(re.findall(r"^\s{6}(\w+):", table, re.M)) for table in tables.groups()]
    assert keys[0] == keys[1]
    assert {"person", "newChat", "starters", "sent", "handoffAll", "handoffWindow"} <= keys[0]


def test_keyboard_alone_reaches_and_sends_the_handoff_form(
    page: Page, start: StartStack, receiver: Receiver
) -> None:
    stack = start(declining(), **handoffs(receiver))
    widget = Widget(page, stack)
    widget.open()
    widget.ask(DECLINED_QUESTION)
    offer = widget.reply.get_by_role("button", name="Ask a person")

    offer.focus()
    page.keyboard.press("Enter")
    page.keyboard.type(VISITOR)  # the address field has the focus
    page.keyboard.press("Tab")
    page.keyboard.press("End")
    page.keyboard.type(" I use Dropbox.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")

    expect(page.locator(".msg.bot").last).to_have_text(
        f"Assistant: Sent. The site's team will reply to {VISITOR}."
    )
    [request] = receiver.wait_for(1)
    assert json.loads(request.body)["handoff"]["message"] == DECLINED_QUESTION + " I use Dropbox."


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_with_the_handoff_form_and_the_starters_showing(
    page: Page, start: StartStack, receiver: Receiver, scheme: str
) -> None:
    stack = start(
        declining(),
        suggested_questions=("What does --force-with-lease do?", "Where are tags kept?"),
        **handoffs(receiver),
    )
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    widget = Widget(page, stack)
    widget.open()
    expect(page.get_by_role("group", name="Suggested questions")).to_be_visible()
    page.add_script_tag(content=chromium.axe_script())
    with_starters = page.evaluate("() => axe.run(document)")
    widget.ask(DECLINED_QUESTION).get_by_role("button", name="Ask a person").click()
    expect(page.locator("form.person")).to_be_visible()

    with_form = page.evaluate("() => axe.run(document)")

    for results in (with_starters, with_form):
        violations = [(v["id"], [n["target"] for n in v["nodes"]]) for v in results["violations"]]
        assert violations == []
        assert [v["id"] for v in results["incomplete"]] == []
        assert results["passes"]
    assert WAIT_MS  # the page's default wait applies to every expect above
