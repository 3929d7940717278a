"""The catalogue's functions and the rules that read a question into one of them."""

from __future__ import annotations

import pytest

from candor.catalogue import answers, asks, functions
from candor.catalogue.extract import record_of
from candor.catalogue.records import DocumentRecord
from candor.ingest.chunking import chunk_document
from candor.ingest.loaders import load_document

pytestmark = pytest.mark.unit


def page(source: str, text: str, *, changed_at: float = 0.0) -> DocumentRecord:
    document = load_document(text.encode(), source)
    return record_of(
        document,
        chunk_document(document),
        url=f"https://docs.example.com/{source}",
        size=len(text),
        fingerprint="f",
        changed_at=changed_at,
    )


def options_page(command: str, options: list[str]) -> str:
    rows = "\n".join(f"| `{option}` | what it does |" for option in options)
    return (
        f"# tool-{command}\n\n## Synopsis\n\ntool {command} [options]\n\n"
        f"## Options\n\n| option | meaning |\n|---|---|\n{rows}\n\n## Examples\n\nRun it.\n"
    )


SITE = [
    page("tool-push.md", options_page("push", ["--all", "--force", "--dry-run"])),
    page("tool-http-push.md", options_page("http-push", ["--verbose"])),
    page("tool-pull.md", options_page("pull", ["--rebase", "--ff-only"])),
    page(
        "configuration.md",
        "# Configuration\n\n## Network\n\n| variable | default |\n|---|---|\n"
        "| `TIMEOUT` | 30 |\n| `RETRIES` | 3 |\n\n## Storage\n\n| variable | default |\n"
        "|---|---|\n| `DATA_DIR` | data |\n",
        changed_at=500.0,
    ),
    page(
        "hooks.md",
        "# Hooks\n\n## Hooks\n\n### pre-push\n\nRuns before.\n\n### post-merge\n\nRuns after.\n"
        "\n### pre-commit\n\nRuns first.\n",
    ),
]


@pytest.mark.parametrize(
    ("question", "function"),
    [
        ("What can you help me with?", "overview"),
        ("What topics do your docs cover?", "overview"),
        ("How many pages does the documentation have?", "count"),
        ("Which pages were updated most recently?", "recent"),
        ("Which pages are about storage?", "pages"),
        ("What does the configuration page cover?", "outline"),
        # Read as a listing of entries called "sections" before, and passed to retrieval.
        ("What are the sections of the deploying page?", "outline"),
        ("List the headings of the configuration page.", "outline"),
        ("What are the options of tool push?", "entries"),
        ("List every setting.", "entries"),
        ("Which hooks are there?", "entries"),
    ],
)
def test_a_question_about_the_documents_reads_as_its_function(question: str, function: str) -> None:
    ask = asks.parse(question)

    assert ask is not None and ask.function == function
    assert asks.routable(ask)


@pytest.mark.parametrize(
    "question",
    [
        "How do I push a branch?",
        "What does --force do?",
        "Which setting changes the timeout?",
        "Why did my push fail?",
    ],
)
def test_a_content_question_reads_as_no_catalogue_function(question: str) -> None:
    assert asks.parse(question) is None


def test_a_list_of_what_passages_answer_is_not_routed_by_the_rules_alone() -> None:
    ask = asks.parse("What are the differences between push and pull?")

    assert ask is None or not asks.routable(ask)


def test_the_options_of_a_command_come_from_its_own_page_not_a_longer_name() -> None:
    listing = functions.entries(SITE, "tool push", "options")

    assert listing is not None and listing.scope is not None
    assert listing.scope.record.source == "tool-push.md"
    assert [item.text for item in listing.items] == ["--all", "--force", "--dry-run"]
    assert listing.total == 3


def test_settings_are_found_on_the_page_titled_configuration_with_their_sections() -> None:
    listing = functions.entries(SITE, "", "settings")

    assert listing is not None
    assert [(item.text, item.group) for item in listing.items] == [
        ("TIMEOUT", "Network"),
        ("RETRIES", "Network"),
        ("DATA_DIR", "Storage"),
    ]
    written = answers.write(listing, asks.Ask("entries", noun="settings"), "Example")
    assert written.text.startswith("Configuration lists 3 settings [1]:")
    assert "- Network [2]: `TIMEOUT`, `RETRIES`" in written.text
    assert [mark.heading for mark in written.marks] == [-1, 0, 1]


def test_a_section_named_by_the_question_narrows_the_list() -> None:
    listing = functions.entries(SITE, "storage", "settings")

    assert listing is not None and [item.text for item in listing.items] == ["DATA_DIR"]


def test_two_pages_that_match_alike_answer_nothing() -> None:
    # Every tool page has Options: which one is meant is unclear.
    assert functions.entries(SITE, "", "options") is None


def test_a_section_made_of_subsections_lists_them() -> None:
    listing = functions.entries(SITE, "", "hooks")

    assert listing is not None
    assert [item.text for item in listing.items] == ["pre-push", "post-merge", "pre-commit"]


def test_strict_matching_needs_every_word_of_the_subject() -> None:
    assert functions.entries(SITE, "tool push undo", "options", strict=True) is None
    assert functions.entries(SITE, "tool push", "options", strict=True) is not None


def test_a_long_list_gives_its_count_the_first_entries_and_the_page() -> None:
    many = [f"--option-{n}" for n in range(functions.MAX_LISTED + 7)]
    site = [page("tool-big.md", options_page("big", many))]

    listing = functions.entries(site, "tool big", "options")
    assert listing is not None
    written = answers.write(listing, asks.Ask("entries", noun="options"), "Example")

    assert listing.total == len(many)
    assert len(listing.items) == functions.MAX_LISTED
    assert f"tool-big lists {len(many)} options under Options [1]:" in written.text
    assert written.text.endswith(
        f"These are the first {functions.MAX_LISTED} of {len(many)}. "
        "tool-big has them all: https://docs.example.com/tool-big.md"
    )
    assert f"`--option-{functions.MAX_LISTED - 1}`" in written.text
    assert f"--option-{functions.MAX_LISTED}`" not in written.text


def test_an_overview_of_a_small_site_names_every_page_with_its_sections() -> None:
    listing = functions.overview(SITE)
    assert listing is not None
    written = answers.write(listing, asks.Ask("overview", greeting=True), "Example")

    lines = written.text.splitlines()
    assert lines[0] == "I answer questions from the documents of Example."
    assert lines[1] == "They cover 5 pages:"
    assert "- Configuration [1]: Network; Storage" in lines or any(
        line.startswith("- Configuration") and "Network; Storage" in line for line in lines
    )
    assert len(written.marks) == 5


def test_an_overview_of_a_large_site_gives_the_count_and_the_pages_with_most_text() -> None:
    site = [page(f"p{n:03d}.md", f"# Page {n}\n\n" + "word " * n) for n in range(40)]

    listing = functions.overview(site)
    assert listing is not None
    written = answers.write(listing, asks.Ask("overview"), "Example")

    assert written.text.startswith("The documents of Example hold 40 pages.")
    assert "Page 39 [1], Page 38 [2]" in written.text
    assert len(written.marks) == answers.MAX_CITATIONS


def test_pages_named_for_a_topic_come_before_pages_with_a_section_on_it() -> None:
    listing = functions.pages_about(SITE, "hooks")

    assert listing is not None
    assert [item.record.source for item in listing.items] == ["hooks.md"]
    assert functions.pages_about(SITE, "nothing-like-this") is None


def test_the_outline_of_a_page_lists_its_sections() -> None:
    listing = functions.outline(SITE, "configuration")

    assert listing is not None
    assert [item.text for item in listing.items] == ["Network", "Storage"]


def test_recent_pages_come_newest_first_with_their_day() -> None:
    listing = functions.recent(SITE)
    assert listing is not None
    written = answers.write(listing, asks.Ask("recent"), "Example")

    assert listing.items[0].record.source == "configuration.md"
    assert "- Configuration [1], changed on 1970-01-01" in written.text


def test_every_listed_entry_is_one_the_documents_hold() -> None:
    held = {e.term for r in SITE for e in r.entries} | {h.text for r in SITE for h in r.headings}
    for question in (
        "List every setting.",
        "What are the options of tool pull?",
        "Which hooks are there?",
    ):
        ask = asks.parse(question)
        assert ask is not None
        listing = functions.answer(SITE, ask)
        assert listing is not None
        assert {item.text for item in listing.items} <= held


def test_how_many_pages_gives_the_count_and_names_the_pages() -> None:
    ask = asks.parse("How many pages are there?")
    assert ask is not None
    listing = functions.answer(SITE, ask)
    assert listing is not None
    written = answers.write(listing, ask, "Example")

    assert written.text.splitlines()[0] == "The documents of Example hold 5 pages."
    assert len(written.marks) == 5


def test_one_page_about_a_topic_is_written_in_the_singular() -> None:
    # It read "1 page of the documents are about widget".
    ask = asks.parse("Which pages are about storage?")
    assert ask is not None
    listing = functions.answer(SITE, ask)
    assert listing is not None and listing.total == 1
    written = answers.write(listing, ask, "Example")

    assert written.text.splitlines()[0] == "1 page of the documents is about storage:"
