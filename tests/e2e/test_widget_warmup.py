"""The widget on a server that is still loading its models: it says so, then stops saying it.

Debian's chromium under Playwright against `candor serve`'s app on loopback; the
scripted model preloads until the test lets it finish (tests.support.fakes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.settings import Settings
from tests.support import browser as chromium
from tests.support.fakes import SlowToLoadChat
from tests.support.widget_server import bound_socket, candor_server

pytestmark = pytest.mark.e2e

chromium.require_browser()

from playwright.sync_api import expect, sync_playwright  # noqa: E402

WAIT_MS = 15_000


@pytest.fixture
def loading(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, SlowToLoadChat]]:
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    state = SqliteStateStore(settings.state_path)
    chat = SlowToLoadChat({})
    sock = bound_socket()
    try:
        with candor_server(Deps(settings, chat, embedder, index, None, state), sock) as api:
            yield api, chat
    finally:
        chat.loaded.set()
        index.close()
        state.close()


def test_the_widget_says_it_is_starting_until_the_server_is_warm(
    loading: tuple[str, SlowToLoadChat],
) -> None:
    api, chat = loading
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium.CHROMIUM), args=chromium.CHROMIUM_ARGS
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{api}/")
            page.get_by_role("button", name="Ask a question").click()

            note = page.get_by_role("dialog").get_by_text("Starting up")
            expect(note).to_be_visible()
            chat.loaded.set()
            expect(note).to_have_count(0)
            assert chat.preloaded  # the warm-up, not a question, loaded the model
        finally:
            browser.close()
