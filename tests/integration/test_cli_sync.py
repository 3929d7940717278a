"""`candor sync URL` on a served site: counts, exit codes, and `candor stats` after it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from candor.cli import EXIT_FAILED, EXIT_USAGE, main
from candor.settings import get_settings
from tests.conftest import clear_candor_env
from tests.support.site_server import SiteServer
from tests.support.sites import build_site, listed_pages, loopback_only

__all__ = ["loopback_only"]

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("loopback_only")]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SiteServer]:
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    monkeypatch.setenv("CANDOR_SYNC_DELAY_SECONDS", "0")
    monkeypatch.setenv("CANDOR_SYNC_CONTACT_URL", "https://docs.example.com/bot")
    get_settings.cache_clear()
    with SiteServer() as server:
        build_site(server)
        yield server


def sync(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["sync", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_candor_sync_reads_the_site_and_a_second_run_embeds_nothing(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = sync(capsys, site.url)

    assert code == 0, err
    pages = len(listed_pages())
    assert f"{pages} new" in out and "1 skipped by robots" in out and "1 refused" in out
    assert "refused: http://other.example/elsewhere.html" in err
    assert site.requests[0].headers["user-agent"] == "candor/0.2.0 (+https://docs.example.com/bot)"

    code, out, _ = sync(capsys, site.url, "--json")
    summary = json.loads(out)
    assert code == 0
    assert (summary["unchanged"], summary["new"], summary["embedded"]) == (pages, 0, 0)
    assert summary["corpus_version"] is None  # nothing changed, nothing bumped


def test_candor_stats_shows_each_sites_pages_and_last_sync(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    sync(capsys, site.url)

    assert main(["stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    (synced,) = stats["sites"]
    assert synced["site"] == site.url
    assert synced["pages"] == len(listed_pages())
    assert synced["last_sync"] is not None
    assert main(["stats"]) == 0
    assert f"site {site.url}: {len(listed_pages())} pages, last synced" in capsys.readouterr().out


def test_held_removals_exit_non_zero_and_accept_removals_applies_them(
    site: SiteServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sync(capsys, site.url)
    for path in listed_pages()[1:]:
        site.remove(path)

    code, out, err = sync(capsys, site.url)
    assert code == EXIT_FAILED
    assert "0 removed" in out and "--accept-removals" in err

    code, out, _ = sync(capsys, site.url, "--accept-removals")
    assert code == 0
    assert f"{len(listed_pages()) - 1} removed" in out


def test_a_url_candor_cannot_sync_is_a_usage_error(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = sync(capsys, "ftp://docs.example.com/")
    assert code == EXIT_USAGE
    assert "not an http(s) URL" in err


def test_a_site_that_is_down_exits_non_zero_and_says_why(
    site: SiteServer, capsys: pytest.CaptureFixture[str]
) -> None:
    site.page("/robots.txt", "busy", status=503, validators=False)

    code, _, err = sync(capsys, site.url)

    assert code == EXIT_FAILED
    assert "robots.txt answered HTTP 503: nothing is fetched" in err
