"""What `candor serve` hands a browser for the widget, checked without one."""

from __future__ import annotations

import gzip
import re

import pytest
from fastapi.testclient import TestClient

from candor.api.local import create_local_app
from candor.settings import Settings

pytestmark = pytest.mark.unit

# Issue #12: at most 15 kB gzipped, the size a site pays to embed candor.
MAX_GZIPPED_BYTES = 15 * 1024


@pytest.fixture
def http(settings: Settings) -> TestClient:
    # The routes are static: no dependency is built for them.
    return TestClient(create_local_app(settings))


def test_serve_hands_out_the_widget_script(http: TestClient) -> None:
    response = http.get("/widget/candor-widget.js")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "attachShadow" in response.text


def test_serve_shows_a_demo_page_that_embeds_the_widget(http: TestClient) -> None:
    response = http.get("/")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert '<script src="/widget/candor-widget.js" defer></script>' in response.text


def test_the_widget_is_at_most_15_kb_gzipped(http: TestClient) -> None:
    script = http.get("/widget/candor-widget.js").content

    assert len(gzip.compress(script, compresslevel=9)) <= MAX_GZIPPED_BYTES


def test_the_widget_never_parses_strings_as_html(http: TestClient) -> None:
    source = http.get("/widget/candor-widget.js").text
    # The header comment may name them; the code must not use them.
    code = re.sub(r"/\*.*?\*/", "", source, flags=re.S)

    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in code
