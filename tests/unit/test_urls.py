"""Which addresses a citation may link to, and a document's address under a base URL."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from candor.settings import Settings
from candor.urls import MAX_URL_CHARS, public_url, source_url

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "url",
    [
        "https://docs.example.com/guides/push.html",
        "http://127.0.0.1:8000/docs/a%20b.md",
        "HTTPS://Docs.Example.com/x?y=1#page=2",
        "https://[::1]:8443/x",
    ],
)
def test_an_absolute_http_or_https_address_is_kept(url: str) -> None:
    assert public_url(url, source="doc.md") == url


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        " javascript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
        "//docs.example.com/push.html",
        "/guides/push.html",
        "https://",
        "https://docs.example.com/a\nb",
        "https://docs.example.com/\x00",
        "http://[::1",
        "https://docs.example.com/" + "a" * MAX_URL_CHARS,
    ],
)
def test_anything_else_is_dropped_with_a_log_line_that_names_the_document(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="candor.urls")

    assert public_url(url, source="guides/push.md") is None

    (record,) = caplog.records
    assert "guides/push.md" in record.getMessage()
    assert "\n" not in record.getMessage()  # the untrusted value cannot start a log line


def test_no_url_is_not_worth_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="candor.urls")

    assert public_url(None, source="a.md") is None
    assert public_url("  ", source="a.md") is None
    assert caplog.records == []


@pytest.mark.parametrize(
    ("base", "source", "url"),
    [
        ("https://docs.example.com", "guides/push.md", "https://docs.example.com/guides/push.md"),
        (
            "https://docs.example.com/v2/",
            "a b/c#d?.md",
            "https://docs.example.com/v2/a%20b/c%23d%3F.md",
        ),
        ("http://127.0.0.1:8000/docs", "été.md", "http://127.0.0.1:8000/docs/%C3%A9t%C3%A9.md"),
    ],
)
def test_a_documents_address_is_the_base_and_its_quoted_path(
    base: str, source: str, url: str
) -> None:
    assert source_url(base, source) == url


def test_the_base_url_setting_must_be_an_http_or_https_address() -> None:
    assert Settings(source_base_url="https://docs.example.com/").source_base_url == (
        "https://docs.example.com/"
    )
    assert Settings(source_base_url="").source_base_url is None
    with pytest.raises(ValidationError, match="http"):
        Settings(source_base_url="javascript:alert(1)//")
