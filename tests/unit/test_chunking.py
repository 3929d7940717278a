"""Chunking: sections kept whole where they fit, long ones split with overlap, stable ids."""

from __future__ import annotations

import hashlib
import re

import pytest

from candor.ingest.chunking import chunk_document, chunk_id, doc_prefix
from candor.ingest.document import Document, Section
from candor.ingest.loaders import load_document

pytestmark = pytest.mark.unit


def _doc(*sections: tuple[str, str, int], title: str = "Doc", source: str = "doc.md") -> Document:
    return Document(source, title, [Section(h, t, level) for h, t, level in sections])


def _sentences(n: int, word: str = "word") -> str:
    return " ".join(f"{word}{i} says something short here." for i in range(n))


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


def test_chunk_id_is_md5_hex_of_the_source_then_the_index() -> None:
    md5 = hashlib.md5(b"docs/guide.md").hexdigest()

    assert doc_prefix("docs/guide.md") == f"{md5}-"
    assert chunk_id("docs/guide.md", 7) == f"{md5}-7"


def test_one_documents_prefix_matches_only_its_own_ids() -> None:
    sources = [f"doc{n}.md" for n in range(20)]  # doc1.md, doc10.md... share text, not ids
    ids = {source: [chunk_id(source, i) for i in range(12)] for source in sources}

    for source in sources:
        matching = [cid for all_ids in ids.values() for cid in all_ids]
        matching = [cid for cid in matching if cid.startswith(doc_prefix(source))]
        assert matching == ids[source]


def test_ids_number_the_chunks_from_zero_in_document_order() -> None:
    doc = _doc(("A", _sentences(30, "alpha"), 2), ("B", _sentences(30, "beta"), 2))

    chunks = chunk_document(doc, max_chars=300, overlap=50)

    assert [c.id for c in chunks] == [chunk_id("doc.md", i) for i in range(len(chunks))]
    texts = " ".join(c.text for c in chunks)
    assert texts.index("alpha0") < texts.index("alpha29") < texts.index("beta0")


def test_chunks_carry_source_title_and_heading_but_text_holds_neither() -> None:
    doc = _doc(("Install", "Run the installer.", 2), title="Guide", source="g.md")

    (chunk,) = chunk_document(doc)

    assert (chunk.source, chunk.title, chunk.heading) == ("g.md", "Guide", "Install")
    assert chunk.text == "Run the installer."


@pytest.mark.parametrize(("max_chars", "overlap"), [(800, 100), (300, 60), (120, 0), (50, 10)])
def test_no_chunk_is_empty_or_longer_than_max_chars(max_chars: int, overlap: int) -> None:
    doc = _doc(
        ("", "Preamble text.", 0),
        ("Top", "", 1),
        ("Empty", "", 2),
        ("Long", "\n\n".join(_sentences(6, f"p{i}w") for i in range(8)), 2),
        ("Code", "line one\n" + "x" * 700 + "\n    indented", 3),
        ("Unbroken", "y" * 1000, 3),
        ("Tiny", "ok", 2),
    )

    chunks = chunk_document(doc, max_chars=max_chars, overlap=overlap)

    assert chunks
    assert all(c.text.strip() and len(c.text) <= max_chars for c in chunks)


def test_no_text_is_lost() -> None:
    doc = _doc(
        ("Intro", _sentences(5, "intro"), 2),
        ("Long", "\n\n".join(_sentences(7, f"para{i}w") for i in range(6)), 2),
        ("Sub", _sentences(3, "sub"), 3),
        ("Last", "Final words.", 2),
    )

    chunks = chunk_document(doc, max_chars=250, overlap=40)

    found = set().union(*(_words(c.text) | _words(c.heading) for c in chunks))
    expected = set().union(*(_words(s.text) | _words(s.heading) for s in doc.sections))
    assert expected <= found


def test_small_sibling_sections_share_a_chunk_under_their_parents_heading() -> None:
    doc = _doc(
        ("DESCRIPTION", "", 2),
        ("Modes", "Two modes exist.", 3),
        ("Hooks", "Hooks run after.", 3),
        ("OPTIONS", _sentences(40), 2),
    )

    chunks = chunk_document(doc)

    # Each section's heading stays right above its text; the chunk's heading is
    # the one true of both.
    assert (chunks[0].heading, chunks[0].text) == (
        "DESCRIPTION",
        "Modes\nTwo modes exist.\n\nHooks\nHooks run after.",
    )


def test_a_section_alone_in_its_chunk_keeps_its_full_heading_path() -> None:
    doc = _doc(("OPTIONS", "", 2), ("--all", _sentences(20), 3), ("--tags", _sentences(20), 3))

    chunks = chunk_document(doc)

    assert [c.heading for c in chunks] == ["OPTIONS > --all", "OPTIONS > --tags"]
    assert chunks[0].text == _sentences(20)


def test_a_parent_that_fits_is_one_chunk_with_its_subsections_inline() -> None:
    doc = _doc(
        ("OPTIONS", "", 2),
        ("--all", "Push all branches.", 3),
        ("-n, --dry-run", "Do everything except send.", 3),
    )

    (chunk,) = chunk_document(doc)

    assert chunk.heading == "OPTIONS"
    assert chunk.text == "--all\nPush all branches.\n\n-n, --dry-run\nDo everything except send."


def test_small_entries_of_a_long_list_are_packed_whole_in_order() -> None:
    entries = [(f"--option-{i}", _sentences(4, f"o{i}w"), 3) for i in range(6)]
    doc = _doc(("OPTIONS", "", 2), *entries)

    chunks = chunk_document(doc, max_chars=300, overlap=50)

    assert [c.heading for c in chunks] == ["OPTIONS"] * 3
    assert chunks[0].text == f"--option-0\n{entries[0][1]}\n\n--option-1\n{entries[1][1]}"


def test_sections_that_fit_are_never_split_across_chunks() -> None:
    a, b, c = _sentences(12, "a"), _sentences(12, "b"), _sentences(3, "c")
    assert 300 < len(a) < 400 and len(c) < 150
    doc = _doc(("A", a, 2), ("B", b, 2), ("C", c, 2))

    chunks = chunk_document(doc, max_chars=500, overlap=100)

    assert [(ch.heading, ch.text) for ch in chunks] == [("A", a), ("", f"B\n{b}\n\nC\n{c}")]


def test_heading_path_joins_the_enclosing_headings() -> None:
    long = _sentences(40, "lease")
    doc = _doc(
        ("git-push(1) Manual Page", "", 1), ("OPTIONS", "", 2), ("--force-with-lease", long, 3)
    )

    chunks = chunk_document(doc, max_chars=400, overlap=50)

    assert len(chunks) > 2
    # Every part of a long entry names it: the term is never cut off from its text.
    assert {c.heading for c in chunks} == {"OPTIONS > --force-with-lease"}


def test_several_level_one_headings_stay_in_the_path_unless_one_is_the_title() -> None:
    doc = _doc(
        ("Git User Manual", "", 1),
        ("Chapter 1", "", 1),
        ("Branches", "x" * 500, 2),
        ("Chapter 2", "", 1),
        ("Tags", "y" * 500, 2),
        title="Git User Manual",
    )

    chunks = chunk_document(doc, max_chars=504, overlap=50)

    assert [c.heading for c in chunks] == ["Chapter 1 > Branches", "Chapter 2 > Tags"]


def test_subsection_chunks_do_not_absorb_the_next_section_of_another_parent() -> None:
    doc = _doc(
        ("A", "", 2),
        ("A1", _sentences(12, "a1"), 3),
        ("A2", "Short end of A.", 3),
        ("B", "Short B.", 2),
    )

    chunks = chunk_document(doc, max_chars=400, overlap=50)

    assert chunks[-1].heading == "B"
    assert chunks[-1].text == "Short B."
    assert "Short end of A." in chunks[-2].text


def test_the_last_part_of_a_long_section_is_shared_with_the_next_sibling() -> None:
    long, short = _sentences(14, "long"), "Overwrite anyway."
    doc = _doc(("OPTIONS", "", 2), ("--lease", long, 3), ("--force", short, 3))

    chunks = chunk_document(doc, max_chars=300, overlap=0)

    assert {c.heading for c in chunks[:-1]} == {"OPTIONS > --lease"}
    last = chunks[-1]
    assert last.heading == "OPTIONS"
    assert last.text.startswith("--lease\n")
    assert last.text.endswith(f"\n\n--force\n{short}")


def test_long_section_splits_at_paragraphs_and_carries_an_overlap() -> None:
    paragraphs = [_sentences(5, f"p{i}w") for i in range(4)]
    assert all(len(p) < 200 for p in paragraphs)
    doc = _doc(("Long", "\n\n".join(paragraphs), 2))

    chunks = chunk_document(doc, max_chars=450, overlap=60)

    assert len(chunks) == 2
    assert chunks[0].text == "\n\n".join(paragraphs[:2])
    # The second passage opens with the last sentence or words of the first.
    carried, rest = chunks[1].text.split("\n\n", 1)
    assert chunks[0].text.endswith(carried)
    assert 0 < len(carried) <= 60
    assert rest == "\n\n".join(paragraphs[2:])


def test_a_paragraph_longer_than_max_chars_splits_between_sentences() -> None:
    doc = _doc(("S", _sentences(20), 2))

    chunks = chunk_document(doc, max_chars=200, overlap=0)

    assert len(chunks) > 1
    assert all(c.text.endswith(".") for c in chunks)


def test_text_without_any_break_is_cut_hard() -> None:
    doc = _doc(("Blob", "z" * 1000, 2))

    chunks = chunk_document(doc, max_chars=300, overlap=0)

    assert [len(c.text) for c in chunks] == [300, 300, 300, 100]
    assert "".join(c.text for c in chunks) == "z" * 1000


def test_empty_document_has_no_chunks() -> None:
    assert chunk_document(_doc(("Heading only", "", 2))) == []


def test_markdown_end_to_end_chunks_by_heading() -> None:
    data = b"# Guide\n\nWelcome.\n\n## Install\n\nRun it.\n\n## Use\n\nCall it.\n"

    chunks = chunk_document(load_document(data, "guide.md"), max_chars=20, overlap=5)

    assert [(c.heading, c.text) for c in chunks] == [
        ("", "Welcome."),
        ("Install", "Run it."),
        ("Use", "Call it."),
    ]


@pytest.mark.parametrize(("max_chars", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_bad_sizes_are_refused(max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_document(_doc(("A", "text", 1)), max_chars=max_chars, overlap=overlap)
