"""An answer is sentences with citations: labels, table rows and pasted passages go."""

from __future__ import annotations

import asyncio
import re

import pytest

from candor import service
from candor.graph import prompts
from candor.graph.answer_text import AnswerCleaner, clean_answer
from candor.types import Chunk, Hit
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.unit

LONG = (
    "git bisect run treats exit code 125 as a commit that cannot be tested. Other exit "
    "codes between 1 and 127 mark the commit bad, as far as bisect run is concerned, "
    "and 0 marks it good."
)
PASSAGES = [
    Hit(Chunk("a-0", "gc.auto defaults to 6700.", "git-gc.html", "git-gc(1)", "CONFIGURATION"), 0),
    Hit(Chunk("b-0", LONG, "git-bisect.html", "git-bisect(1)", "OPTIONS > run"), 0),
    Hit(
        Chunk(
            "c-0",
            "| CANDOR_TOP_K | 3 | passages shown |",
            "configuration.md",
            "Configuration",
            "Retrieval",
        ),
        0,
    ),
]
SHOWN = LONG.index(" run is") + 3  # cuts the bisect passage in the middle of "run"


def clean(text: str) -> str:
    return clean_answer(text, PASSAGES, SHOWN)


def test_a_pasted_label_line_is_dropped_and_its_markers_kept() -> None:
    answer = "The default of gc.auto is 6700.\n\n[1] git-gc(1) - CONFIGURATION\n"
    assert clean(answer) == "The default of gc.auto is 6700. [1]"


def test_a_line_opening_with_a_label_keeps_only_its_sentence() -> None:
    answer = "[1] git-gc(1) - CONFIGURATION gc.auto defaults to 6700 loose objects."
    assert clean(answer) == "gc.auto defaults to 6700 loose objects. [1]"


@pytest.mark.parametrize(
    ("answer", "cleaned"),
    [
        ("[1] gc.auto defaults to 6700.", "gc.auto defaults to 6700. [1]"),
        (
            "[1] Exit code 125 skips the commit.\n[2][3] Other codes mark it bad.",
            "Exit code 125 skips the commit. [1]\nOther codes mark it bad. [2][3]",
        ),
        ("[2] Exit code 125 skips the commit [2].", "Exit code 125 skips the commit [2]."),
        ("[1] gc.auto defaults to 6700. [2]", "gc.auto defaults to 6700. [1][2]"),
        ("[1] It packs:\n- loose objects\n", "It packs: [1]\n- loose objects"),
    ],
)
def test_markers_that_open_a_sentence_follow_it(answer: str, cleaned: str) -> None:
    # The model, told to cite after each sentence, often cites before it (9 of 26
    # dev answers, 2026-12-01); a visitor reads the citation where it belongs.
    assert clean(answer) == cleaned


def test_a_title_alone_on_a_line_is_dropped() -> None:
    answer = "Exit code 125 skips the commit [2].\n\n**git-bisect(1)**"
    assert clean(answer) == "Exit code 125 skips the commit [2]."


def test_table_rows_are_dropped() -> None:
    answer = (
        "Set CANDOR_TOP_K to change how many passages are shown [3].\n"
        "| variable | default |\n|---|---|\n| CANDOR_TOP_K | 3 |\n"
        "CANDOR_TOP_K | 3 | passages shown"
    )
    assert clean(answer) == "Set CANDOR_TOP_K to change how many passages are shown [3]."


def test_passage_text_pasted_up_to_where_it_was_cut_is_dropped() -> None:
    answer = (
        "Exit code 125 marks a commit that cannot be tested [2]. Other exit codes between "
        "1 and 127 mark the commit bad, as far as bisect [2]."
    )
    assert clean(answer) == "Exit code 125 marks a commit that cannot be tested [2]."


def test_a_sentence_copied_from_candors_own_instruction_is_dropped() -> None:
    # Seen on the dev set (git-008, 2026-12-01): a rule of the prompt, pasted as prose.
    answer = (
        "gc.auto defaults to 6700 [1]. Use only what the excerpts say: no outside "
        "knowledge and no guesses."
    )
    assert clean(answer) == "gc.auto defaults to 6700 [1]."


def test_a_sentence_written_twice_appears_once() -> None:
    sentence = "Setting gc.auto to 0 disables automatic packing entirely."
    assert clean(f"{sentence} [1]\n\n{sentence}\n") == f"{sentence} [1]"


def test_a_last_sentence_cut_off_by_the_token_limit_is_dropped() -> None:
    answer = "gc.auto defaults to 6700 [1]. Setting it to 0 disables automatic packing, which"
    assert clean(answer) == "gc.auto defaults to 6700 [1]."


def test_markers_alone_on_a_line_join_the_sentence_before_them() -> None:
    assert clean("gc.auto defaults to 6700.\n\n[1][2]") == "gc.auto defaults to 6700. [1][2]"


def test_code_blocks_are_kept_as_written() -> None:
    answer = "Run this [2]:\n\n```sh\n$ git bisect run make test\n| not a table |\n```"
    assert clean(answer) == answer


def test_an_ordinary_answer_is_left_as_it_is() -> None:
    answer = (
        "gc.auto defaults to 6700 [1]. Exit code 125 tells bisect run to skip a commit [2].\n\n"
        "Both are documented on their own pages."
    )
    assert clean(answer) == answer


@pytest.mark.parametrize("size", [1, 2, 5, 17])
def test_streamed_in_pieces_the_answer_comes_out_the_same(size: int) -> None:
    # Given an answer with every kind of furniture, fed as tokens would arrive
    answer = (
        "[1] git-gc(1) - CONFIGURATION gc.auto defaults to 6700 [1].\n\n"
        "| CANDOR_TOP_K | 3 |\n[2]\nOther exit codes between 1 and 127 mark the commit "
        "bad, as far as bisect run.\nExit code 125 skips the commit [2]. And then the"
    )
    cleaner = AnswerCleaner(PASSAGES, SHOWN)
    pieces = [cleaner.feed(answer[i : i + size]) for i in range(0, len(answer), size)]
    streamed = "".join(pieces) + cleaner.finish()

    # Then what goes out piece by piece is what the whole answer cleans to
    assert streamed.strip() == clean(answer)
    assert "CONFIGURATION" not in streamed and "|" not in streamed
    assert "bisect run." not in streamed and "And then" not in streamed


def test_a_long_sentence_goes_out_before_the_answer_ends() -> None:
    cleaner = AnswerCleaner(PASSAGES, SHOWN)
    first = cleaner.feed("gc.auto defaults to 6700 loose objects in the repository [1]. Then")
    assert first == "gc.auto defaults to 6700 loose objects in the repository [1]."


def test_a_one_sentence_answer_streams_word_by_word_not_at_its_end() -> None:
    # Seen with `candor serve`: a one-sentence answer came as one token event, with done.
    sentence = (
        "Set CANDOR_TOP_K in the environment to change how many excerpts the model "
        "reads for each question [3]."
    )
    cleaner = AnswerCleaner(PASSAGES, SHOWN)
    pieces = [cleaner.feed(word) for word in re.findall(r"\S+\s*", sentence)]
    pieces.append(cleaner.finish())

    shown = [piece for piece in pieces if piece]
    assert len(shown) > 5  # words go out while the sentence is written
    assert "".join(pieces).strip() == clean(sentence) == sentence


@pytest.mark.parametrize(
    ("answer", "cleaned"),
    [
        (
            "The passage in <passage 1> states that gc.auto defaults to 6700 [1].",
            "gc.auto defaults to 6700 [1].",
        ),
        ("According to [2], exit code 125 skips the commit.", "Exit code 125 skips the commit."),
        (
            "[1] The excerpt says that the default is 6700 loose objects in all.",
            "The default is 6700 loose objects in all. [1]",
        ),
    ],
)
def test_an_opening_that_talks_about_the_passages_goes_streamed_or_whole(
    answer: str, cleaned: str
) -> None:
    cleaner = AnswerCleaner(PASSAGES, SHOWN)
    streamed = "".join(cleaner.feed(w) for w in re.findall(r"\S+\s*", answer))
    streamed += cleaner.finish()
    assert clean(answer) == cleaned
    assert streamed.strip() == cleaned


def test_the_agent_never_shows_a_pasted_label(make_deps: MakeDeps) -> None:
    # Given a model that answers, then pastes the passage's label line
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": [
                "It refuses to overwrite work you have not seen [1].\n\n"
                "[1] git-push(1) - OPTIONS > --force-with-lease"
            ],
        }
    )
    result = asyncio.run(service.ask(make_deps(chat), "What does --force-with-lease do?"))

    # Then the answer is the sentence with its citation, and nothing else
    assert result.decision == "answered"
    assert result.answer == "It refuses to overwrite work you have not seen [1]."
    assert [c.source for c in result.citations] == ["git-push.html"]


def test_the_model_is_shown_whole_words_where_a_passage_is_cut() -> None:
    # A word cut in half ("bisect ru") is what a small model copies into its answer
    shown = prompts.passage_text(PASSAGES[1], SHOWN)
    assert shown.endswith("as far as bisect ...")
    assert shown.startswith("git-bisect(1) - OPTIONS > run\n")


def test_the_sentence_after_one_whose_markers_moved_keeps_its_space() -> None:
    # Seen on the dev set (git-003): "... cannot be tested. [3]If the script exits ..."
    raw = (
        "[3] Exit code 125 is used when the current source code cannot be tested. If the "
        "script exits with this code, the current revision will be skipped."
    )
    cleaner = AnswerCleaner(PASSAGES, SHOWN)
    streamed = "".join(cleaner.feed(w) for w in re.findall(r"\S+\s*", raw)) + cleaner.finish()
    expected = (
        "Exit code 125 is used when the current source code cannot be tested. [3] If the "
        "script exits with this code, the current revision will be skipped."
    )
    assert clean(raw) == expected and streamed.strip() == expected


def test_a_sentence_whose_marker_stands_for_its_object_is_dropped() -> None:
    # Seen on the dev set (git-010): the command to run was never written.
    answer = "To take back your last commit but keep your edits, you should run [4]."
    assert clean(answer) == ""


@pytest.mark.parametrize(
    "answer",
    [
        # The dev set, 2026-12-05 (git-010): an order whose command is the citation.
        "To undo the last commit but keep what you changed, run [2].",
        "Run [1].",
        # A value or a format given as the citation (git-007 of plain_rag, git-013).
        "The option that sets how long credentials are cached is [2].",
        "The report it prints is formatted as [1].",
        "The answer is [3].",
    ],
)
def test_a_sentence_that_cites_in_place_of_what_it_should_say_is_dropped(answer: str) -> None:
    assert clean(answer) == ""


@pytest.mark.parametrize(
    "sentence",
    [
        "Pick the value the page recommends, which is 6700 [1].",
        "Use `git reset --soft HEAD^` and run the commit again [1].",
        "That is what the cache is keyed by.",
        "It is the index the query planner will actually use [2].",
        # The dev set, 2026-12-02 (git-016): "as-is" is a word, not "is".
        "Give it the last commit you want to retain as-is [2].",
    ],
)
def test_a_sentence_that_ends_in_a_verb_or_a_value_with_its_citation_is_kept(
    sentence: str,
) -> None:
    assert clean(sentence) == sentence


@pytest.mark.parametrize(
    "sentence",
    [
        # Seen on the dev set (git-009, git-013, git-015): whole answers lost their point.
        'It appends "(cherry picked from commit …)" to say which commit it was picked from.',
        "To find who changed a line, you can use the `git blame` command.",
        "To hide them from git status, you can use the `--untracked-files=no` option.",
    ],
)
def test_a_sentence_that_ends_in_a_preposition_or_a_noun_is_kept(sentence: str) -> None:
    assert clean(sentence) == sentence
