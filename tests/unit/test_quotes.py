"""Quotes: the sentence or two of a cited passage that back the answer, as plain text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from candor import service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.graph import prompts
from candor.graph.citations import citation
from candor.graph.quotes import QUOTE_CHARS, attach, citing_sentences, quote_for, readable
from candor.settings import Settings
from candor.types import Chunk, Hit
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

# A settings table as candor's own docs/configuration.md writes it.
SETTINGS_TABLE = (
    "| variable | default | what it does |\n"
    "|---|---|---|\n"
    "| `CANDOR_TOP_K` | `3` | Passages shown to the model for each question (1 to 10). |\n"
    "| `CANDOR_CANDIDATES` | `20` | How many results each of the dense and keyword searches "
    "returns before fusion. |\n"
    "| `CANDOR_RERANK` | `false` | Rerank the fused candidates with the configured reranker. |"
)
# The same table's rows in the next passage of a long section: the header stayed behind.
SETTINGS_ROWS = (
    "| `CANDOR_PASSAGE_CHARS` | `600` | How much of each passage the model reads. |\n"
    "| `CANDOR_MAX_ATTEMPTS` | `2` | Retrievals before candor declines. |"
)
# A table as the HTML loader writes one (candor.ingest.loaders): cells joined by " | ",
# no separator row. From SQLite's fileformat2.html.
SERIAL_TYPES = (
    "Serial Type Codes Of The Record Format\n\n"
    "Serial Type | Content Size | Meaning\n"
    "0 | 0 | Value is a NULL.\n"
    "1 | 1 | Value is an 8-bit twos-complement integer.\n"
    "6 | 8 | Value is a big-endian 64-bit twos-complement integer.\n"
    "7 | 8 | Value is a big-endian IEEE 754-2008 64-bit floating point number."
)
GC_CONFIG = (
    "gc.auto: When there are approximately more than this many loose objects in the "
    "repository, git gc --auto will pack them. The default value is 6700.\n\n"
    "gc.autoPackLimit: When there are more than this many packs that are not marked with "
    "*.keep file in the repository, git gc --auto consolidates them into one larger pack. "
    "The default value is 50."
)


def test_a_table_row_reads_as_header_value_pairs_without_pipes() -> None:
    quote = quote_for(["`CANDOR_CANDIDATES` is 20 by default [1]."], SETTINGS_TABLE)

    assert quote == (
        "variable: CANDOR_CANDIDATES; default: 20; what it does: How many results each of "
        "the dense and keyword searches returns before fusion."
    )


def test_rows_whose_header_row_is_not_in_the_passage_read_as_their_values() -> None:
    quote = quote_for(["The model reads 600 characters of each passage [1]."], SETTINGS_ROWS)

    assert quote == "CANDOR_PASSAGE_CHARS; 600; How much of each passage the model reads."


def test_a_table_the_html_loader_wrote_reads_with_its_header_row() -> None:
    quote = quote_for(["Serial type 6 is a big-endian 64-bit integer [1]."], SERIAL_TYPES)

    assert quote == (
        "Serial Type: 6; Content Size: 8; Meaning: Value is a big-endian 64-bit "
        "twos-complement integer."
    )


def test_a_two_cell_row_without_a_header_reads_as_a_label_and_its_text() -> None:
    passage = (
        "DESCRIPTION\nNote | Using this helper will store your passwords unencrypted on disk, "
        "protected only by filesystem permissions."
    )

    quote = quote_for(["It stores passwords unencrypted on disk [1]."], passage, markdown=False)

    assert quote == (
        "Note: Using this helper will store your passwords unencrypted on disk, protected "
        "only by filesystem permissions."
    )


def test_the_pipes_of_a_synopsis_are_not_a_table() -> None:
    passage = "SYNOPSIS\ngit archive [--format=<fmt>] [-o <file> | --output=<file>] <tree-ish>"

    assert readable(passage, markdown=False) == (
        "SYNOPSIS. git archive [--format=<fmt>] [-o <file> | --output=<file>] <tree-ish>"
    )


def test_markdown_and_html_syntax_are_gone_and_placeholders_stay() -> None:
    passage = (
        "## Install\n\n"
        "Run **`pip install candor`**, then read the [guide](https://docs.example.com/guide) "
        "&amp; the <em>notes</em>.<br>\n"
        "Pass the folder as `<dir>`; a file is <b>fine</b> too.\n\n"
        "- one bullet with *emphasis*\n"
        "* another with __strong__ text and ~~old~~ words\n\n"
        "<!-- an editor's note -->"
    )

    assert readable(passage) == (
        "Install. Run pip install candor, then read the guide & the notes. Pass the folder "
        "as <dir>; a file is fine too. one bullet with emphasis. another with strong text "
        "and old words"
    )


def test_a_page_that_shows_a_tag_as_text_keeps_it() -> None:
    # SQLite's fts5.html shows this query; the HTML loader's text has the tags as text.
    passage = "SELECT highlight(email, 2, '<b>', '</b>') FROM email WHERE email MATCH 'fts5'"

    assert readable(passage, markdown=False) == passage


def test_the_sentence_with_the_answers_specific_is_quoted() -> None:
    # Both sentences about a default share the answer's words; only one holds its 50.
    quote = quote_for(["git gc --auto consolidates packs; the default is 50 [1]."], GC_CONFIG)

    assert quote == (
        "gc.autoPackLimit: When there are more than this many packs that are not marked with "
        "*.keep file in the repository, git gc --auto consolidates them into one larger pack. "
        "The default value is 50."
    )


def test_one_sentence_is_quoted_when_its_neighbour_adds_nothing() -> None:
    passage = (
        "The online backup API allows the contents of one database to be copied into "
        "another database file. The copy may be done incrementally. Other connections "
        "can use the source database meanwhile."
    )

    quote = quote_for(["The backup API copies one database into another file [1]."], passage)

    assert quote == (
        "The online backup API allows the contents of one database to be copied into "
        "another database file."
    )


def test_a_sentence_that_points_back_is_quoted_with_the_one_before() -> None:
    passage = (
        "If we fail to acquire these locks it means another process is already trying to "
        "do the rollback. In that case, drop all locks, close the database, and return "
        "SQLITE_BUSY."
    )

    quote = quote_for(["The library then returns SQLITE_BUSY [1]."], passage, markdown=False)

    assert quote == passage


def test_a_long_sentence_is_cut_at_a_word_end_with_an_ellipsis() -> None:
    passage = "The setting applies " + "to every remote and branch " * 20 + "in the repository."

    quote = quote_for(["The setting applies to every remote [1]."], passage)

    assert len(quote) <= QUOTE_CHARS and quote.endswith("…")
    shown = quote.removesuffix("…")
    assert passage.startswith(shown) and passage[len(shown)] == " "


def test_a_passage_cut_where_the_model_stopped_reading_ends_with_an_ellipsis() -> None:
    text = "Rerere records conflicted automerge results and the resolutions of them."
    seen = prompts.shown_text(text, 40)

    assert (
        quote_for(["Rerere records conflicts [1]."], seen) == "Rerere records conflicted automerge…"
    )


def test_text_after_a_closing_fence_is_prose_in_a_passage_cut_from_inside_code() -> None:
    # The chunker cut README's widget section inside its ```html block.
    passage = (
        'src="https://YOUR-API/widget/candor-widget.js" defer></script>\n```\n\n'
        "It is one file, no framework and no build step: **8,720 bytes** gzipped\n"
        "(`gzip -9c candor-widget.js | wc -c`)."
    )

    quote = quote_for(["The widget is 8,720 bytes gzipped [1]."], passage)

    assert quote == (
        "It is one file, no framework and no build step: 8,720 bytes gzipped "
        "(gzip -9c candor-widget.js | wc -c)."
    )


def test_a_marker_stands_for_its_sentence_and_the_unmarked_ones_before_it() -> None:
    answer = (
        "Rerere records resolutions. It replays them [1]. Enable it with rerere.enabled [2][1]."
    )

    assert citing_sentences(answer) == {
        1: ["Rerere records resolutions.", "It replays them.", "Enable it with rerere.enabled."],
        2: ["Enable it with rerere.enabled."],
    }


# -- attaching quotes to an answer's citations ---------------------------------------

PUSH = Hit(
    Chunk(
        "push-0",
        "--force-with-lease protects the remote ref. The push is refused unless the remote "
        "ref still points at the commit your remote-tracking branch records.",
        "git-push.html",
        "git-push(1)",
        "OPTIONS > --force-with-lease",
    ),
    0.0,
)
BISECT = Hit(
    Chunk(
        "bisect-0",
        "git bisect run uses the exit code of the script. The code 125 means the commit "
        "cannot be tested and should be skipped.",
        "git-bisect.html",
        "git-bisect(1)",
        "Bisect run",
    ),
    0.0,
)


def test_each_citation_quotes_its_own_passage() -> None:
    answer = (
        "A push is refused unless the remote ref still points at your commit [1]. "
        "Exit code 125 skips a commit that cannot be tested [2]."
    )

    quoted = attach(answer, (citation(PUSH), citation(BISECT)), (PUSH, BISECT), 600)

    assert [c.quote for c in quoted] == [
        "The push is refused unless the remote ref still points at the commit your "
        "remote-tracking branch records.",
        "The code 125 means the commit cannot be tested and should be skipped.",
    ]


def test_a_quote_comes_only_from_the_part_of_the_passage_the_model_was_shown() -> None:
    # The sentence naming 125 lies beyond the 60 characters the model read.
    quoted = attach("Exit code 125 skips the commit [1].", (citation(BISECT),), (BISECT,), 60)

    assert quoted[0].quote == "git bisect run uses the exit code of the script."


def test_a_citation_of_a_passage_not_shown_gets_no_quote() -> None:
    quoted = attach("It is refused [1].", (citation(PUSH),), (BISECT,), 600)

    assert quoted[0].quote == ""


# -- through the graph ---------------------------------------------------------------

CONFIGURATION = Chunk("cfg-0", SETTINGS_TABLE, "configuration.md", "Configuration", "Retrieval")


@pytest.fixture
def deps_with_the_settings_table(settings: Settings) -> Iterator[Deps]:
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert([CONFIGURATION], embedder.embed([CONFIGURATION.text]))
    state = SqliteStateStore(settings.state_path)
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["`CANDOR_CANDIDATES` sets how many results each search returns (20) [1]."],
        }
    )
    yield Deps(settings, chat, embedder, index, None, state)
    index.close()
    state.close()


def test_an_answered_question_cites_with_a_readable_quote_of_its_passage(
    deps_with_the_settings_table: Deps,
) -> None:
    result = asyncio.run(
        service.ask(deps_with_the_settings_table, "How many candidates does each search return?")
    )

    assert result.decision == "answered"
    (cited,) = result.citations
    assert cited.id == CONFIGURATION.id
    assert cited.quote == (
        "variable: CANDOR_CANDIDATES; default: 20; what it does: How many results each of "
        "the dense and keyword searches returns before fusion."
    )
    assert cited.snippet.startswith("| variable | default |")  # kept for older clients
