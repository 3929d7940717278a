"""No request goes where a sync must not: each redirect hop, each resolved address checked.

The site is served on 127.0.0.1, which a sync may reach only because the owner
named that address as the start URL. Names the tests need resolve through a
resolver the test controls, so a private or metadata address is refused before
any connection is made: no test sends a packet anywhere but loopback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpcore
import pytest

from candor.sync.addresses import AddressGuard
from candor.sync.fetch import BlockedAddress, Budget, Refused, SiteClient
from candor.sync.polite import HostPacer
from candor.sync.scope import Scope
from tests.support.site_server import SiteServer
from tests.support.sites import LocalSync, counting, html, local_sync, loopback_only

__all__ = ["loopback_only"]

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("loopback_only")]

BUDGET = Budget(1_000_000, 10.0)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalSync]:
    with local_sync(tmp_path) as parts:
        yield parts


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer() as server:
        server.page("/robots.txt", "", content_type="text/plain")
        server.page("/", html("Home", "The kite manual."))
        yield server


def resolving(table: dict[str, list[str]]) -> tuple[object, list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise AssertionError(f"the test did not expect {host} to be resolved")
        return table[host]

    return counting(resolve)


def failure(summary_failures: list[dict[str, str]], url_end: str) -> dict[str, str]:
    (found,) = [f for f in summary_failures if f["url"].endswith(url_end)]
    return found


def test_a_redirect_to_the_metadata_address_is_refused(site: SiteServer, local: LocalSync) -> None:
    site.sitemap("/sitemap.xml", ["/", "/meta.html"])
    site.redirect("/meta.html", "http://169.254.169.254/latest/meta-data/iam/")
    resolver, asked = resolving({})

    summary = local.run(site.url, resolver=resolver)  # type: ignore[arg-type]

    refused = failure(summary.failures, "/meta.html")
    assert refused["what"] == "refused"
    assert "169.254.169.254" in refused["reason"]
    assert asked == []  # never resolved, never connected
    assert summary.counts["new"] == 1


def test_a_redirect_to_another_host_is_not_followed(site: SiteServer, local: LocalSync) -> None:
    # "localhost" is the very same server: reachable, and still another host.
    site.sitemap("/sitemap.xml", ["/", "/moved.html"])
    site.redirect("/moved.html", f"http://localhost:{site.port}/elsewhere.html")
    site.page("/elsewhere.html", html("Elsewhere", "Another host's page."))

    summary = local.run(site.url)

    assert failure(summary.failures, "/moved.html")["what"] == "refused"
    assert site.asked("/elsewhere.html") == []


def test_a_redirect_to_a_private_address_by_dns_name_is_refused(
    site: SiteServer, local: LocalSync
) -> None:
    # The owner lets the sync follow the site onto intranet.example, whose name
    # resolves to a private address: the address check still refuses it.
    site.sitemap("/sitemap.xml", ["/", "/wiki.html"])
    site.redirect("/wiki.html", "http://intranet.example/wiki/")
    resolver, asked = resolving({"intranet.example": ["10.20.30.40"]})

    summary = local.run(site.url, resolver=resolver, hosts=("intranet.example",))  # type: ignore[arg-type]

    refused = failure(summary.failures, "/wiki.html")
    assert refused["what"] == "refused"
    assert "10.20.30.40" in refused["reason"] and "private" in refused["reason"]
    assert asked == ["intranet.example"]


def test_a_sitemap_that_lists_a_url_on_another_host_is_not_fetched(
    site: SiteServer, local: LocalSync
) -> None:
    site.sitemap("/sitemap.xml", ["/", "http://attacker.example/steal", "http://127.0.0.2/x"])
    resolver, asked = resolving({})

    summary = local.run(site.url, resolver=resolver)  # type: ignore[arg-type]

    assert summary.counts["refused"] == 2
    assert asked == []


def test_a_redirect_to_a_port_the_site_does_not_use_is_refused(
    site: SiteServer, local: LocalSync
) -> None:
    site.sitemap("/sitemap.xml", ["/", "/admin.html"])
    site.redirect("/admin.html", "http://127.0.0.1:6379/")

    summary = local.run(site.url)

    assert failure(summary.failures, "/admin.html")["what"] == "refused"


def test_no_cookie_a_site_sets_is_sent_back(site: SiteServer, local: LocalSync) -> None:
    site.page("/", html("Home", "Kites."), headers={"Set-Cookie": "session=abc; Path=/"})
    site.sitemap("/sitemap.xml", ["/", "/next.html"])
    site.page("/next.html", html("Next", "More kites."))

    local.run(site.url)

    assert all("cookie" not in request.headers for request in site.requests)


def test_a_proxy_in_the_environment_is_not_used(
    site: SiteServer, local: LocalSync, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy would see (and could rewrite) every request; the sync goes direct.
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9/")
    site.sitemap("/sitemap.xml", ["/"])

    summary = local.run(site.url)

    assert summary.counts["new"] == 1


def test_a_name_that_rebinds_to_a_private_address_is_refused_on_the_next_connection(
    site: SiteServer,
) -> None:
    # docs.example resolves to the site (an address the owner permitted) and then,
    # for the next connection, to a private one: that connection is refused.
    answers = [["127.0.0.1"], ["10.0.0.1"]]

    def rebinding(host: str, port: int) -> list[str]:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    site.page("/a.html", html("A", "Kites."), headers={"Connection": "close"})
    # As if the owner had vouched for docs.example at 127.0.0.1, the way a start URL
    # written as an address is vouched for.
    permitted = AddressGuard.for_site("127.0.0.1").permitted
    guard = AddressGuard(rebinding, "docs.example", permitted)
    scope = Scope.of(f"http://docs.example:{site.port}/")
    with SiteClient(scope, guard=guard, user_agent="candor/test", pacer=HostPacer(0, 1)) as client:
        first = client.get(f"http://docs.example:{site.port}/a.html", BUDGET)
        with pytest.raises(BlockedAddress, match=r"10\.0\.0\.1"):
            client.get(f"http://docs.example:{site.port}/a.html", BUDGET)

    assert first.status == 200
    assert len(site.asked("/a.html")) == 1


def test_a_name_resolving_to_loopback_is_not_the_owners_named_address(site: SiteServer) -> None:
    # The exception is for the address the owner wrote, not for names that resolve to it.
    scope = Scope.of(f"http://docs.example:{site.port}/")
    guard = AddressGuard.for_site("docs.example", resolver=lambda host, port: ["127.0.0.1"])
    with (
        SiteClient(scope, guard=guard, user_agent="candor/test", pacer=HostPacer(0, 1)) as client,
        pytest.raises(Refused, match="loopback"),
    ):
        client.get(f"http://docs.example:{site.port}/", BUDGET)
    assert site.requests == []


def test_a_name_that_does_not_resolve_fails_without_a_connection() -> None:
    def unresolvable(host: str, port: int) -> list[str]:
        raise httpcore.ConnectError(f"cannot resolve {host}")

    scope = Scope.of("http://nowhere.invalid/")
    guard = AddressGuard(unresolvable)
    with (
        SiteClient(scope, guard=guard, user_agent="candor/test", pacer=HostPacer(0, 1)) as client,
        pytest.raises(Exception, match="cannot resolve"),
    ):
        client.get("http://nowhere.invalid/", BUDGET)
