"""Which URLs are a site's pages, spelled one way each, and the document each becomes."""

from __future__ import annotations

import pytest

from candor.sync.scope import BadSiteUrl, Scope, normalise, source_of

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("HTTP://Docs.Example.COM:80/a/../b/", "http://docs.example.com/b/"),
        ("https://docs.example.com", "https://docs.example.com/"),
        ("https://docs.example.com:443/x#part", "https://docs.example.com/x"),
        ("https://docs.example.com/a b", "https://docs.example.com/a%20b"),
        ("https://docs.example.com/%2F", "https://docs.example.com/%2F"),
        ("http://B\u00fccher.example/", "http://xn--bcher-kva.example/"),
        ("http://[::1]:8000/", "http://[::1]:8000/"),
    ],
)
def test_a_url_is_spelled_one_way(given: str, expected: str) -> None:
    assert normalise(given) == expected


@pytest.mark.parametrize(
    "bad", ["ftp://docs.example.com/", "file:///etc/passwd", "http://user:pw@docs.example.com/"]
)
def test_a_url_that_is_never_fetched_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        normalise(bad)
    with pytest.raises(BadSiteUrl):
        Scope.of(bad)


def test_a_pages_source_is_its_host_and_path_whatever_its_scheme() -> None:
    assert source_of("https://docs.example.com/guide/") == "site/docs.example.com/guide/index.html"
    assert source_of("http://docs.example.com/guide/") == source_of(
        "https://docs.example.com/guide/"
    )
    assert source_of("http://127.0.0.1:8000/a.html") == "site/127.0.0.1:8000/a.html"
    with_query = source_of("https://docs.example.com/page?id=1")
    assert with_query.startswith("site/docs.example.com/page~q")
    assert with_query != source_of("https://docs.example.com/page?id=2")


def test_a_very_long_path_gets_a_source_short_enough_for_an_s3_key() -> None:
    long = "https://docs.example.com/" + "a" * 3000
    source = source_of(normalise(long[:2000]))
    assert len(source.encode()) <= 1024


def test_the_site_is_its_hosts_port_and_folder() -> None:
    scope = Scope.of("http://docs.example.com:8080/docs/index.html", ("cdn.example.com",))

    assert scope.prefix == "/docs/"
    assert scope.in_site("http://docs.example.com:8080/docs/a.html")
    assert scope.in_site("https://docs.example.com/docs/a.html")  # moved to https
    assert not scope.in_site("http://docs.example.com:8080/blog/a.html")  # another folder
    assert scope.on_site("http://docs.example.com:8080/blog/a.html")
    assert not scope.on_site("http://docs.example.com:6379/docs/")  # another port
    assert scope.on_site("https://cdn.example.com/docs/x.pdf")  # a host the owner lists
    assert not scope.on_site("https://cdn.example.com:8443/docs/x.pdf")
    assert not scope.on_site("https://evil.example/docs/")
    assert not scope.on_site("javascript:alert(1)")


def test_a_sitemap_as_the_start_url_covers_the_whole_host() -> None:
    assert Scope.of("https://docs.example.com/sub/sitemap.xml").prefix == "/"
