"""The website widget in a real browser: Debian's chromium under Playwright, against
`candor serve`'s app on loopback with the scripted chat model.

Each test starts the API (the app create_local_app builds, with a scripted model,
the hashing embedder and SQLite index and state) and a static site on another
origin that embeds the widget as a customer's page would, and serves the pages the
citations link to. What the widget shows is read through the page, as a visitor
would read it; what the server did is read from the scripted model and the store.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from candor.api.local import create_local_app
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.errors import ModelError
from candor.ingest import ingest
from candor.settings import Settings
from candor.types import Chunk
from tests.conftest import clear_candor_env
from tests.support import browser as chromium
from tests.support import local_models
from tests.support.fakes import (
    OneInstantRateLimits,
    ScriptedChatModel,
    Stall,
    Streamed,
    words,
)
from tests.support.widget_server import (
    bound_socket,
    candor_server,
    origin_of,
    serve,
    static_site,
)

pytestmark = pytest.mark.e2e

chromium.require_browser()

from playwright.sync_api import (  # noqa: E402 (only once the browser is known to be there)
    Browser,
    Page,
    Response,
    expect,
    sync_playwright,
)

QUESTION = {"abusive": False, "kind": "question"}
ABUSIVE = {"abusive": True, "kind": "question"}
ANSWER = "It refuses to overwrite work you have not seen [1]."
ANSWERING: dict[str, list[Any]] = {
    "Triage": [QUESTION],
    "judge": [True],
    "text": [ANSWER],
}
CONTACT = "help@example.com"
WAIT_MS = 15_000


def push_page(site: str) -> Chunk:
    return Chunk(
        "a1-0",
        "--force-with-lease protects the remote ref: the push is refused unless the "
        "remote ref still points at the commit your remote-tracking branch records.",
        f"{site}/docs/git-push.html",
        "git-push(1)",
        "OPTIONS > --force-with-lease",
    )


def embed_page(api: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Another site</title>'
        "</head><body><main><h1>Another site</h1><p>It embeds candor.</p></main>"
        f'<script src="{api}/widget/candor-widget.js" data-api="{api}" defer></script>'
        "</body></html>"
    )


DOC_PAGE = (
    '<!doctype html><html lang="en"><head><title>git-push(1)</title></head>'
    "<body><h1>git-push(1)</h1><p>--force-with-lease</p></body></html>"
)


@dataclass
class Stack:
    """The API and two other sites: `site` is an allowed origin, `stranger` is not."""

    api: str
    site: str
    stranger: str
    chat: ScriptedChatModel
    deps: Deps
    # The bodies the browser posted to /ask or /ask/stream, and to /feedback, with their url.
    asked: list[dict[str, Any]] = field(default_factory=list)
    rated: list[dict[str, Any]] = field(default_factory=list)


StartStack = Callable[..., Stack]


@pytest.fixture
def start(settings: Settings) -> Iterator[StartStack]:
    """start(script, chunks=..., **settings) -> a running Stack, stopped after the test."""
    with ExitStack() as running:

        def start_(
            script: dict[str, list[Any]],
            *,
            chunks: Callable[[str], list[Chunk]] = lambda site: [push_page(site)],
            state_type: type[SqliteStateStore] = SqliteStateStore,
            **overrides: Any,
        ) -> Stack:
            api_sock, site_sock, stranger_sock = bound_socket(), bound_socket(), bound_socket()
            api, site = origin_of(api_sock), origin_of(site_sock)
            configured = settings.model_copy(update={"allowed_origins": (site,), **overrides})
            embedder = HashingEmbedder()
            index = SqliteVectorIndex(
                configured.index_path, embedder.dimensions, embedder=embedder.name
            )
            running.callback(index.close)
            passages = chunks(site)
            index.upsert(passages, embedder.embed([c.text for c in passages]))
            state = state_type(configured.state_path)
            running.callback(state.close)
            chat = ScriptedChatModel(script)
            deps = Deps(configured, chat, embedder, index, None, state)
            pages = {"/embed.html": embed_page(api), "/docs/git-push.html": DOC_PAGE}
            running.enter_context(candor_server(deps, api_sock))
            site = running.enter_context(static_site(pages, site_sock))
            stranger = running.enter_context(static_site(pages, stranger_sock))
            return Stack(api, site, stranger, chat, deps)

        yield start_


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # launch() gives every run a fresh, temporary user-data directory of its own.
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(chromium.CHROMIUM), args=chromium.CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    yield opened
    context.close()


class Widget:
    """The widget on a page, used the way a visitor uses it."""

    def __init__(self, page: Page, stack: Stack, url: str | None = None) -> None:
        self.page = page
        self.stack = stack
        page.on("response", self._record)
        page.goto(url or f"{stack.api}/")

    def _record(self, response: Response) -> None:
        # A 404 from /ask/stream is the widget finding that a server cannot stream.
        request = response.request
        if request.method != "POST" or response.status == 404:
            return
        body = {"url": request.url, **json.loads(request.post_data or "{}")}
        if request.url.startswith(f"{self.stack.api}/ask"):
            self.stack.asked.append(body)
        elif request.url == f"{self.stack.api}/feedback":
            self.stack.rated.append(body)

    @property
    def launcher(self) -> Any:
        return self.page.get_by_role("button", name="Ask a question")

    @property
    def input(self) -> Any:
        return self.page.get_by_label("Your question")

    @property
    def reply(self) -> Any:
        return self.page.locator(".msg.bot").last

    def open(self) -> None:
        self.launcher.click()
        expect(self.page.get_by_role("dialog", name="Ask the docs")).to_be_visible()

    def ask(self, question: str) -> Any:
        """Send `question` and wait until the reply is complete; returns the reply."""
        self.input.fill(question)
        self.input.press("Enter")
        expect(self.page.locator(".log")).to_have_attribute("aria-busy", "false")
        return self.reply

    def session(self) -> str | None:
        value: str | None = self.page.evaluate(
            "key => sessionStorage.getItem(key)", f"candor-session {self.stack.api}"
        )
        return value


def answered_chat() -> dict[str, list[Any]]:
    return {kind: list(items) for kind, items in ANSWERING.items()}


# A streamed answer, citations, the fallback


def test_the_answer_streams_step_by_step_from_ask_stream(page: Page, start: StartStack) -> None:
    # A slow grading step, so that the status line can be seen while it runs.
    script = answered_chat() | {"judge": [Stall(1.0, True)]}
    stack = start(script)
    widget = Widget(page, stack)
    widget.open()
    widget.input.fill("What does --force-with-lease do?")
    with page.expect_response(f"{stack.api}/ask/stream") as streamed:
        widget.input.press("Enter")
    expect(widget.reply.locator(".status")).to_have_text("Checking the passages…")
    expect(page.locator(".log")).to_have_attribute("aria-busy", "false")
    assert streamed.value.headers["content-type"].startswith("text/event-stream")
    expect(widget.reply.locator(".answer")).to_have_text(ANSWER)
    assert [a["url"] for a in stack.asked] == [f"{stack.api}/ask/stream"]


def test_an_answer_shows_a_citation_chip_that_opens_its_source(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_have_text(ANSWER)
    link = reply.get_by_role("link", name="[1]git-push(1) (opens in a new tab)")
    expect(link).to_have_attribute("href", f"{stack.site}/docs/git-push.html")
    with page.context.expect_page() as opened:
        link.click()
    source = opened.value
    source.wait_for_load_state()
    assert source.url == f"{stack.site}/docs/git-push.html"
    expect(source.get_by_role("heading", name="git-push(1)")).to_be_visible()


def test_a_citation_chip_links_to_the_address_the_server_gave_the_document(
    page: Page, start: StartStack
) -> None:
    # Given a document whose source is a bare path, ingested with a base URL
    # (CANDOR_SOURCE_BASE_URL), so only the server's citation url can make it a link
    stack = start(answered_chat(), chunks=lambda site: [])
    document = DOC_PAGE.replace(
        "<p>--force-with-lease</p>",
        "<p>--force-with-lease protects the remote ref: the push is refused unless the "
        "remote ref still points at the commit your remote-tracking branch records.</p>",
    )
    report = ingest(
        [("git-push.html", document.encode())],
        embedder=stack.deps.embedder,
        index=stack.deps.index,
        source_base_url=f"{stack.site}/docs/",
    )
    assert report.documents_changed == 1
    widget = Widget(page, stack)
    widget.open()

    # When a visitor asks
    reply = widget.ask("What does --force-with-lease do?")

    # Then the chip opens the document at that address
    expect(reply.locator(".answer")).to_have_text(ANSWER)
    link = reply.locator(".sources a")
    expect(link).to_have_attribute("href", f"{stack.site}/docs/git-push.html")
    with page.context.expect_page() as opened:
        link.click()
    opened.value.wait_for_load_state()
    assert opened.value.url == f"{stack.site}/docs/git-push.html"


SETTINGS_TABLE = (
    "| variable | default | what it does |\n"
    "|---|---|---|\n"
    "| `CANDOR_TOP_K` | `3` | Passages shown to the model for each question. |\n"
    "| `CANDOR_CANDIDATES` | `20` | How many results each search returns before fusion. |"
)


def settings_page(site: str) -> list[Chunk]:
    return [
        Chunk(
            "cfg-0", SETTINGS_TABLE, f"{site}/docs/configuration.md", "Configuration", "Retrieval"
        )
    ]


def test_a_chip_shows_the_title_and_the_quote_that_backs_the_answer(
    page: Page, start: StartStack
) -> None:
    # Given a passage that is a Markdown table, and an answer citing one of its rows
    answer = "Each search returns 20 results before fusion (`CANDOR_CANDIDATES`) [1]."
    script = answered_chat() | {"text": [answer]}
    stack = start(script, chunks=settings_page)
    widget = Widget(page, stack)
    widget.open()

    # When a visitor asks
    reply = widget.ask("How many results does each search return?")

    # Then the chip shows the document's title and that row, in words, not table syntax
    chip = reply.get_by_role("link", name="[1]Configuration (opens in a new tab)")
    expect(chip).to_have_attribute("href", f"{stack.site}/docs/configuration.md")
    expect(chip.locator(".quote")).to_have_text(
        "variable: CANDOR_CANDIDATES; default: 20; what it does: How many results each "
        "search returns before fusion."
    )
    expect(chip.locator(".quote")).to_be_visible()
    expect(reply.locator(".sources")).not_to_contain_text("|")


def test_code_in_an_answer_shows_as_code_without_its_backticks(
    page: Page, start: StartStack
) -> None:
    # The defect: the answer's Markdown code spans reached the visitor with their
    # backticks ("Answer yes to `Allow SAM CLI IAM role creation`", docs/widget.png).
    answer = "Each search returns 20 results before fusion (`CANDOR_CANDIDATES`) [1]."
    stack = start(answered_chat() | {"text": [answer]}, chunks=settings_page)
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("How many results does each search return?")

    expect(reply.locator(".answer")).to_have_text(
        "Each search returns 20 results before fusion (CANDOR_CANDIDATES) [1]."
    )
    expect(reply.locator(".answer code")).to_have_text("CANDOR_CANDIDATES")


def test_a_code_span_shows_as_code_while_the_answer_is_still_streaming(
    page: Page, start: StartStack
) -> None:
    # The defect: code spans became <code> only when `done` came, so a visitor read
    # the backticks for as long as the answer streamed.
    answer = "Each search returns 20 results before fusion (`CANDOR_CANDIDATES`) [1]."
    slowly = Streamed(words(answer) + words(" It is a setting of the index [1]."), gap=0.4)
    stack = start(answered_chat() | {"text": [slowly]}, chunks=settings_page)
    widget = Widget(page, stack)
    widget.open()

    widget.input.fill("How many results does each search return?")
    widget.input.press("Enter")  # not widget.ask: that waits for the whole reply
    reply = widget.reply

    expect(reply.locator(".answer code")).to_have_text("CANDOR_CANDIDATES")
    assert reply.locator(".sources").count() == 0, "the answer had finished streaming"
    assert "`" not in reply.locator(".answer").inner_text()


def test_from_a_server_older_than_quotes_a_chip_shows_the_snippet(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    page.route(f"{stack.api}/ask/stream", lambda route: route.fulfill(status=404, body="{}"))

    def without_quotes(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        for cited in body["citations"]:
            del cited["quote"]
        route.fulfill(response=response, json=body)

    page.route(f"{stack.api}/ask", without_quotes)
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".sources .quote")).to_have_text(
        "--force-with-lease protects the remote ref: the push is refused unless the remote "
        "ref still points at the commit your remote-tracking branch records."
    )


def test_without_ask_stream_it_falls_back_to_post_ask(page: Page, start: StartStack) -> None:
    stack = start(answered_chat())
    # A server (or a proxy) that cannot stream: the route is not there.
    page.route(f"{stack.api}/ask/stream", lambda route: route.fulfill(status=404, body="{}"))
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_have_text(ANSWER)
    expect(reply.get_by_role("link", name="[1]git-push(1) (opens in a new tab)")).to_be_visible()
    assert stack.asked[-1]["url"] == f"{stack.api}/ask"


# Every outcome is a clear message


def test_a_decline_says_so_and_names_the_configured_contact(page: Page, start: StartStack) -> None:
    stack = start({"Triage": [QUESTION], "judge": [False] * 2, "Rewrite": [{"query": "x"}]})
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("How do I sync my repository to a cloud drive?")

    expect(reply.locator(".answer")).to_contain_text(CONTACT)
    expect(reply.locator(".sources")).to_have_count(0)


def test_a_warning_then_an_ended_session_that_stays_ended_after_a_reload(
    page: Page, start: StartStack
) -> None:
    confirmed = {"insulting": True}
    stack = start({"Triage": [ABUSIVE, ABUSIVE], "Moderation": [confirmed, confirmed]})
    widget = Widget(page, stack)
    widget.open()

    warned = widget.ask("You idiot.")
    expect(warned).to_have_class("msg bot warned")
    expect(warned.locator(".tag")).to_have_text("Warning")
    expect(widget.input).to_be_enabled()

    ended = widget.ask("Moron.")
    expect(ended.locator(".tag")).to_have_text("This conversation has ended.")
    expect(widget.input).to_be_disabled()

    # The conversation is kept in sessionStorage: after a reload it shows as ended.
    session = widget.session()
    page.reload()
    widget.open()
    expect(widget.reply.locator(".tag")).to_have_text("This conversation has ended.")
    expect(widget.input).to_be_disabled()
    # And the server refuses the session itself: a widget that forgot what it showed
    # (its stored conversation gone, the session id kept) is told so again.
    page.evaluate("key => sessionStorage.removeItem(key)", f"candor-log {stack.api}")
    page.reload()
    widget.open()
    refused = widget.ask("Hello?")
    expect(refused.locator(".answer")).to_have_text("This conversation has ended.")
    expect(widget.input).to_be_disabled()
    assert stack.asked[-1]["session_id"] == session
    assert stack.chat.kinds() == ["Triage", "Moderation", "Triage", "Moderation"]


def test_a_rate_limit_says_when_to_try_again(page: Page, start: StartStack) -> None:
    stack = start(
        answered_chat(),
        state_type=OneInstantRateLimits,
        rate_session_limit=1,
        rate_session_window_seconds=60,
    )
    widget = Widget(page, stack)
    widget.open()
    widget.ask("What does --force-with-lease do?")

    limited = widget.ask("And --force?")

    # A sliding window's next opening is up to two windows away: the hit fades out
    # over the window after its own (candor.backends.rate_windows).
    expect(limited.locator(".answer")).to_have_text(
        re.compile(
            r"^You are sending messages faster than I can answer\. "
            r"Please try again in (?:[1-9][0-9]?|1[01][0-9]|120) s\.$"
        )
    )
    assert len(stack.chat.calls) == 3, "a limited request calls no model"


def test_a_spent_budget_is_a_friendly_message_and_no_model_call(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat(), budget_daily_usd=0)
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_have_text(
        "The assistant has answered all it can for now. Please try again later."
    )
    expect(reply.get_by_role("button", name="Try again")).to_have_count(0)
    assert stack.chat.calls == []


def test_an_outage_says_when_to_retry_and_the_retry_answers(page: Page, start: StartStack) -> None:
    script = answered_chat() | {"Triage": [ModelError("timed out"), QUESTION]}
    stack = start(script)
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")
    expect(reply.locator(".answer")).to_have_text(
        "The assistant is unavailable right now. Please try again in 10 s."
    )
    reply.get_by_role("button", name="Try again").click()

    expect(reply.locator(".answer")).to_have_text(ANSWER)


def test_a_network_failure_offers_a_retry_that_answers(page: Page, start: StartStack) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    page.route(f"{stack.api}/ask**", lambda route: route.abort("internetdisconnected"))
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")
    expect(reply.locator(".answer")).to_have_text(
        "Could not reach the assistant. Check your connection and try again."
    )
    assert stack.chat.calls == []
    page.unroute(f"{stack.api}/ask**")
    reply.get_by_role("button", name="Try again").click()

    expect(reply.locator(".answer")).to_have_text(ANSWER)


# Sessions


def test_the_session_is_kept_across_page_loads(page: Page, start: StartStack) -> None:
    stack = start({"Triage": [QUESTION, QUESTION], "judge": [True] * 2, "text": [ANSWER] * 2})
    widget = Widget(page, stack)
    widget.open()
    widget.ask("What does --force-with-lease do?")
    first = widget.session()

    page.reload()
    widget.open()
    widget.ask("Tell me more.")

    assert first
    assert "session_id" not in stack.asked[0]
    assert stack.asked[1]["session_id"] == first
    assert widget.session() == first


def test_a_session_the_server_did_not_sign_is_replaced_by_a_new_one(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    forged = "forged-session.1700000000.not-a-real-mac"
    page.evaluate(
        "([key, value]) => sessionStorage.setItem(key, value)",
        [f"candor-session {stack.api}", forged],
    )
    page.reload()
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_have_text(ANSWER)
    assert [a.get("session_id") for a in stack.asked] == [forged, None]
    renewed = widget.session()
    assert renewed and renewed != forged


# Feedback


def test_thumbs_down_with_a_reason_and_a_comment_is_stored_on_the_server(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    widget.open()
    reply = widget.ask("What does --force-with-lease do?")

    reply.get_by_role("button", name="Not helpful").click()
    reply.get_by_label("The answer is incomplete").check()
    reply.get_by_label("Comment (optional)").fill("It does not say what a rejected push does.")
    reply.get_by_role("button", name="Send feedback").click()

    expect(reply.get_by_text("Thank you for the feedback.")).to_be_visible()
    [posted] = stack.rated
    stored = stack.deps.state.get_trace(posted["trace_id"], now=time.time())
    assert stored is not None and stored.feedback is not None
    rating = json.loads(stored.feedback)
    assert (rating["score"], rating["reason"]) == (-1, "incomplete")
    assert rating["comment"] == "It does not say what a rejected push does."
    assert posted["session_id"] == widget.session()


def test_an_older_answer_is_rated_with_the_session_that_received_it_after_a_renewal(
    page: Page, start: StartStack
) -> None:
    # Given an answer in one session, then a 401 that made the widget start another
    stack = start({"Triage": [QUESTION] * 2, "judge": [True] * 2, "text": [ANSWER] * 2})
    widget = Widget(page, stack)
    widget.open()
    widget.ask("What does --force-with-lease do?")
    first = page.locator(".msg.bot").nth(1)  # after the greeting
    received = widget.session()
    invalid = json.dumps({"detail": "start a new one", "reason": "session_invalid"})
    page.route(
        f"{stack.api}/ask/stream",
        lambda route: route.fulfill(status=401, body=invalid, content_type="application/json"),
        times=1,
    )
    widget.ask("And --force?")
    renewed = widget.session()
    assert received and renewed and renewed != received

    # When the visitor rates the first answer
    first.get_by_role("button", name="Helpful", exact=True).click()

    # Then the rating names the session that received it, and the server takes it
    expect(first.get_by_text("Thank you for the feedback.")).to_be_visible()
    [posted] = stack.rated
    assert posted["session_id"] == received


def test_a_403_without_a_reason_of_ours_does_not_end_the_conversation(
    page: Page, start: StartStack
) -> None:
    # API Gateway's own 403 (or a firewall's) has no `reason`: it is not session_ended.
    stack = start(answered_chat())
    widget = Widget(page, stack)
    page.route(
        f"{stack.api}/ask/stream",
        lambda route: route.fulfill(
            status=403, body='{"message":"Forbidden"}', content_type="application/json"
        ),
        times=1,
    )
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_have_text("Something went wrong. Please try again.")
    expect(reply).not_to_have_class(re.compile(r"\bended\b"))
    expect(widget.input).to_be_enabled()
    reply.get_by_role("button", name="Try again").click()
    expect(reply.locator(".answer")).to_have_text(ANSWER)


def test_an_error_event_s_retry_after_is_the_wait_the_widget_names(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    failed = {
        "status": 503,
        "detail": "the language model is unavailable; try again shortly",
        "reason": "model_unavailable",
        "trace_id": "0" * 32,
        "retry_after": 37,
    }
    page.route(
        f"{stack.api}/ask/stream",
        lambda route: route.fulfill(
            status=200,
            body=f"event: step\ndata: {{}}\n\nevent: error\ndata: {json.dumps(failed)}\n\n",
            content_type="text/event-stream",
        ),
    )
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_have_text(
        "The assistant is unavailable right now. Please try again in 37 s."
    )


# Safety: server data is text, links are http(s) only


HOSTILE_TITLE = "<img src=x onerror=\"window.__pwned='title'\">"
HOSTILE_TEXT = "<script>window.__pwned='snippet'</script> --force-with-lease refuses the push."
# In Markdown an entity is text: its quote reads as the tag the page would show.
HOSTILE_MARKDOWN = "--force-with-lease &lt;img src=x onerror=\"window.__pwned='quote'\"&gt; works."


def hostile_pages(site: str) -> list[Chunk]:
    return [
        Chunk("h1-0", HOSTILE_TEXT, f"{site}/docs/git-push.html", HOSTILE_TITLE),
        Chunk(
            "h2-0",
            "--force-with-lease " + HOSTILE_TEXT,
            "javascript:window.__pwned='link'",
            "javascript link",
        ),
        Chunk("h3-0", HOSTILE_MARKDOWN, "notes/push.md", "push notes"),
    ]


def test_html_in_answers_titles_and_quotes_renders_as_text_and_runs_nothing(
    page: Page, start: StartStack
) -> None:
    # Its code-like names are the passages' own, or the support check would remove
    # the sentence and decline; it ends as a sentence, or it would be taken for a
    # fragment and asked again.
    hostile_answer = "<img src=x onerror=\"window.__pwned='snippet'\"> [1] [2] [3]."
    stack = start(
        {"Triage": [QUESTION], "judge": [True], "text": [hostile_answer]},
        chunks=hostile_pages,
    )
    widget = Widget(page, stack)
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_contain_text("<img src=x onerror=")
    expect(reply.locator(".sources")).to_contain_text(HOSTILE_TITLE)
    expect(reply.locator(".sources")).to_contain_text("<script>window.__pwned='snippet'</script>")
    expect(reply.locator(".sources")).to_contain_text(
        "<img src=x onerror=\"window.__pwned='quote'\">"
    )
    assert page.evaluate("() => window.__pwned") is None
    assert reply.locator("img, script").count() == 0
    # The javascript: source is shown as a title and quote, not as a link.
    hrefs = [a.get_attribute("href") for a in reply.get_by_role("link").all()]
    assert hrefs == [f"{stack.site}/docs/git-push.html"]
    expect(reply.locator("span.chip", has_text="javascript link")).to_have_count(1)


# Origins


def test_the_widget_on_an_allowed_second_origin_answers(page: Page, start: StartStack) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack, url=f"{stack.site}/embed.html")
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply.locator(".answer")).to_have_text(ANSWER)


def test_the_widget_on_an_origin_not_allowed_is_refused_before_any_model_call(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack, url=f"{stack.stranger}/embed.html")
    widget.open()

    reply = widget.ask("What does --force-with-lease do?")

    expect(reply).to_have_class("msg bot error")
    expect(reply.locator(".answer")).not_to_contain_text("overwrite")
    assert stack.chat.calls == []


# Keyboard and accessibility


def test_keyboard_only_open_ask_close_with_escape_and_focus_returns(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)

    # The demo page's one link comes first, then the launcher.
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(widget.launcher).to_be_focused()
    page.keyboard.press("Enter")
    expect(widget.input).to_be_focused()
    page.keyboard.type("What does --force-with-lease do?")
    page.keyboard.press("Enter")
    expect(widget.reply.locator(".answer")).to_have_text(ANSWER)
    expect(page.locator("div.sr[role=status]")).to_have_text(f"New reply: {ANSWER}")
    expect(widget.input).to_be_focused()

    page.keyboard.press("Escape")

    expect(page.get_by_role("dialog")).to_be_hidden()
    expect(widget.launcher).to_be_focused()
    expect(widget.launcher).to_have_attribute("aria-expanded", "false")


def test_axe_core_finds_no_violations_in_the_open_widget(page: Page, start: StartStack) -> None:
    stack = start(answered_chat())
    widget = Widget(page, stack)
    widget.open()
    reply = widget.ask("What does --force-with-lease do?")
    reply.get_by_role("button", name="Not helpful").click()  # the feedback form too

    page.add_script_tag(content=chromium.axe_script())
    results = page.evaluate("() => axe.run(document)")

    violations = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]]) for v in results["violations"]
    ]
    assert violations == []
    # Nothing left for a person to review either (axe's "incomplete").
    assert [v["id"] for v in results["incomplete"]] == []
    assert results["passes"], "axe checked nothing"


def test_data_attributes_pick_the_language_the_accent_and_the_side(
    page: Page, start: StartStack
) -> None:
    stack = start(answered_chat())
    themed = embed_page(stack.api).replace(
        "data-api=", 'data-lang="fr" data-accent="#7b1fa2" data-position="left" data-api='
    )
    page.route(
        f"{stack.api}/themed.html",
        lambda route: route.fulfill(body=themed, content_type="text/html"),
    )
    page.goto(f"{stack.api}/themed.html")
    launcher = page.get_by_role("button", name="Poser une question")

    launcher.click()

    expect(page.get_by_role("dialog", name="Interroger la documentation")).to_be_visible()
    expect(page.get_by_role("button", name="Envoyer")).to_be_visible()
    expect(launcher).to_have_css("background-color", "rgb(123, 31, 162)")
    box = launcher.bounding_box()
    assert box is not None and box["x"] < page.viewport_size["width"] / 2  # type: ignore[index]


def test_with_reduced_motion_nothing_animates(page: Page, start: StartStack) -> None:
    stack = start(answered_chat())
    page.emulate_media(reduced_motion="reduce")
    widget = Widget(page, stack)

    widget.open()

    expect(page.get_by_role("dialog")).to_have_css("animation-name", "none")


# The real local model


KITE_DOCS = Path(__file__).resolve().parents[1] / "fixtures/docs"


@pytest.mark.slow
def test_the_real_local_model_answers_through_the_widget(
    page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_models.require(*local_models.CHAT, *local_models.EMBEDDER)
    clear_candor_env(monkeypatch)
    data = tmp_path / "data"
    env = os.environ | {"CANDOR_DATA_DIR": str(data), "CANDOR_CONTACT": CONTACT}
    subprocess.run(
        [sys.executable, "-m", "candor.cli", "ingest", str(KITE_DOCS), "--json"],
        env=env,
        capture_output=True,
        timeout=600,
        check=True,
    )
    sock = bound_socket()
    # No starter questions: writing them is minutes of the same model beside the question.
    settings = Settings(data_dir=data, contact=CONTACT, suggest_questions=False)
    app = create_local_app(settings, host="127.0.0.1", port=sock.getsockname()[1])
    with serve(app, sock) as api:
        page.goto(f"{api}/")
        page.get_by_role("button", name="Ask a question").click()
        question = page.get_by_label("Your question")
        question.fill("What does kite push --guarded do differently from a plain --force?")
        question.press("Enter")
        log = page.locator(".log")
        # Three model calls; on two busy cores the local model can take minutes.
        expect(log).to_have_attribute("aria-busy", "false", timeout=600_000)

    # Whether the small model answers or declines is the graph's business (make eval
    # measures it); the widget must show either in full, with its feedback buttons.
    reply = page.locator(".msg.bot").last
    expect(reply).to_have_class("msg bot")
    expect(reply.locator(".answer")).not_to_be_empty()
    expect(reply.get_by_role("button", name="Helpful", exact=True)).to_be_visible()
    decision = reply.get_attribute("data-decision")
    assert decision in {"answered", "declined"}
    if decision == "answered":
        expect(reply.locator(".sources li")).not_to_have_count(0)
