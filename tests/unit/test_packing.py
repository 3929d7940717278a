"""Packing: the best sentences of the top candidates, with their neighbours, in one budget."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from candor import packing
from candor.backends.hashing_embedder import HashingEmbedder
from candor.ports import Vectors
from candor.types import Chunk, Hit

pytestmark = pytest.mark.unit

FILLER = " ".join(f"Filler sentence {n} talks about nothing in particular." for n in range(8))


def hit(cid: str, text: str, source: str = "a.html", heading: str = "") -> Hit:
    return Hit(Chunk(cid, text, source, source.removesuffix(".html"), heading), 0.0)


class CountingEmbedder:
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name = self.inner.name
        self.dimensions = self.inner.dimensions
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_units_are_sentences_and_lines_and_short_ones_join_the_next() -> None:
    text = (
        "Default:\nThe first sentence here is long enough. "
        "And a second sentence, as long, follows it!\n"
        "- a list item that stands on a line of its own"
    )
    spans = packing.units_of(text)
    assert [text[a:b] for a, b in spans] == [
        "Default:\nThe first sentence here is long enough.",  # "Default:" joins its value
        "And a second sentence, as long, follows it!",
        "- a list item that stands on a line of its own",
    ]


def test_a_table_row_is_one_unit_and_the_rule_under_its_header_none() -> None:
    # The bundled docs, 2026-12-02: a row's second sentence was packed without the
    # cells naming its setting ("show the first `CANDOR_TOP_K` passages ... |"), and
    # the model answered with that fragment.
    row = "| `CANDOR_PACK_CONTEXT` | `true` | Pack the best sentences. Off: show the first ones. |"
    header = "| environment variable | default value | what it does to candor |"
    text = f"{header}\n|---|---|---|\n{row}\n{row}"
    units = [text[a:b] for a, b in packing.units_of(text)]
    assert units == [header, row, row]


def test_a_long_line_is_cut_into_units_at_word_ends() -> None:
    text = "word " * 300
    spans = packing.units_of(text.strip())
    assert len(spans) > 1
    assert all(b - a <= packing.MAX_UNIT_CHARS for a, b in spans)


def test_the_sentence_that_answers_comes_from_a_lower_candidate() -> None:
    # Given three candidates, the answer in the middle of the third
    answer = "The bisect run script exits with code 125 to skip a commit."
    candidates = [
        hit("a-0", FILLER),
        hit("b-0", FILLER.replace("Filler", "Padding"), "b.html"),
        hit("c-0", f"{FILLER} {answer} {FILLER}", "c.html"),
    ]

    # When they are packed into a budget smaller than any one of them
    packed = packing.pack(
        "Which exit code skips a commit in bisect run?",
        candidates,
        HashingEmbedder(),
        budget=300,
        max_excerpts=3,
        excerpt_chars=300,
    )

    # Then the answer is shown, from its own passage, cut out of its surroundings
    excerpt = next(h for h in packed if answer in h.chunk.text)
    assert excerpt.chunk.id == "c-0" and excerpt.chunk.source == "c.html"
    assert excerpt.chunk.text.startswith(packing.GAP.strip())
    assert sum(len(h.chunk.text) for h in packed) <= 300


def test_every_excerpt_fits_its_bound_and_all_of_them_the_budget() -> None:
    candidates = [hit(f"p-{n}", FILLER, f"p{n}.html") for n in range(10)]
    packed = packing.pack(
        "filler sentence",
        candidates,
        HashingEmbedder(),
        budget=700,
        max_excerpts=4,
        excerpt_chars=250,
    )
    assert 0 < len(packed) <= 4
    assert all(len(h.chunk.text) <= 250 for h in packed)
    assert sum(len(h.chunk.text) for h in packed) <= 700


def test_excerpts_keep_their_passage_and_are_grouped_by_page_in_document_order() -> None:
    # Given two passages of one page and one of another, in rank order 1, other, 0
    candidates = [
        hit("aaa-1", "Kites need wind to fly. Strong wind lifts a kite high.", "kites.html"),
        hit("bbb-0", "A winch pulls the kite line back in when the wind drops.", "winch.html"),
        hit("aaa-0", "Kites are flown on a line. The line is held tight in wind.", "kites.html"),
    ]
    packed = packing.pack(
        "kite wind line",
        candidates,
        HashingEmbedder(),
        budget=2000,
        max_excerpts=3,
        excerpt_chars=400,
    )
    sources = [h.chunk.source for h in packed]
    assert sorted(h.chunk.id for h in packed) == ["aaa-0", "aaa-1", "bbb-0"]
    # a page's excerpts stand together, in the order they stand on the page
    assert sources in (
        ["kites.html", "kites.html", "winch.html"],
        ["winch.html", "kites.html", "kites.html"],
    )
    kite_ids = [h.chunk.id for h in packed if h.chunk.source == "kites.html"]
    assert kite_ids == ["aaa-0", "aaa-1"]
    assert all(h.chunk.title for h in packed)


def test_neighbours_of_the_best_sentence_come_with_it() -> None:
    text = "Before it comes context. The setting gc.auto triggers packing. After it the default."
    (packed,) = packing.pack(
        "gc.auto",
        [hit("g-0", text)],
        HashingEmbedder(),
        budget=500,
        max_excerpts=1,
        excerpt_chars=500,
    )
    assert packed.chunk.text == text


def test_the_sentences_scored_are_bounded_whatever_the_candidates_hold() -> None:
    many = " ".join(f"Sentence number {n} is here to be scored." for n in range(100))
    embedder = CountingEmbedder()
    packing.pack(
        "sentence",
        [hit(f"m-{n}", many) for n in range(10)],
        embedder,
        budget=500,
        max_excerpts=3,
        excerpt_chars=300,
    )
    assert embedder.texts <= 1 + packing.MAX_UNITS


def test_nothing_to_pack_gives_no_excerpt() -> None:
    assert (
        packing.pack("q", [], HashingEmbedder(), budget=500, max_excerpts=3, excerpt_chars=300)
        == []
    )
