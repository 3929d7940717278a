"""An answer is sentences with citations: what a small model pastes from its prompt goes.

A 1.5B model shown numbered passages often copies their furniture into its answer:
a passage's label line ("[1] git-gc(1) - CONFIGURATION"), rows of a Markdown
table, the same sentence twice, a sentence of candor's own instruction, the passage
text up to where it was cut off ("... as far as bisect ru"), or a last sentence that
the token limit cut off.
None of that is an answer; a visitor should never see it.

The cleaner reads the answer as it is written and lets text out as soon as it has
decided on it, so the same rules hold when answer tokens are streamed to a
visitor: feed it the tokens, send on what each call returns, then what `finish`
returns. A short line (one that could be a label) and a table row are decided at
their line break; in a longer line each sentence goes out word by word once its
first 60 characters show it is not one dropped whole (`words`), else when it ends.
Citation markers in text that is dropped are kept, so what they cite stays cited.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from candor.graph.citations import ascii_markers, markers_in
from candor.graph.prompts import (
    ANSWER_TASK,
    CUT,
    GRADE_TASK,
    PASSAGES_SYSTEM,
    passage_label,
    shown_text,
)
from candor.text import without_meta_opening
from candor.types import Hit

_MARKER = re.compile(r"\[\d{1,2}\]")
_MARKERS = re.compile(r"(?:\s*\[\d{1,2}\])+")
_LEADING_MARKERS = re.compile(r"\s*(?:\[\d{1,2}\]\s*)+")
_TRAILING_MARKERS = re.compile(r"(?:\[\d{1,2}\]\s*)*\[\d{1,2}\]$")
_TABLE_ROW = re.compile(r"^\s*\|.*\||^\s*:?-{3,}:?\s*\||\S\s+\|\s+\S.*\s+\|\s+\S")
# What may dress a label that a model copies: bullets, emphasis, heading marks, quotes.
_DRESSING = " \t*_#`>\"'-•:"
_SEPARATORS = re.compile(r"\s+[-—–>]\s+")
# A sentence ends at . ! or ? (and any closing quote, bracket or emphasis), then space.
_SENTENCE_END = re.compile(r"[.!?][\"')\]`*]*(?:\s*\[\d{1,2}\])*(?=\s)")
_ENDS_WELL = re.compile(r"(?:[.!?:;)\"'`*]|```)$")
# A copied tail of a cut-off passage: long enough to be no coincidence.
_TAIL_CHARS = 24
_MIN_DUPLICATE = 30
# A line longer than every label by this much is prose.
_LABEL_SLACK = 12
# A sentence whose citation stands where its object should ("you should run [4].",
# seen on the dev set): the model cited the passage instead of saying what it says.
# Narrow on purpose: a sentence may end in "from", "option" or "to use".
_DANGLING = re.compile(
    r"\b(?:should|can|could|must|need\s+to|have\s+to|please)\s+"
    r"(?:run|use|execute|type|enter|call|try)\s*[:.]?\s*$"
    # An order after a comma, or opening the sentence ("To undo it, run [1].").
    r"|(?:^|[,;])\s*(?:run|use|execute|type|enter|call|try)\s*[:.]?\s*$"
    r"|\bthe\s+following(?:\s+(?:command|commands|option|options|steps))?\s*[:.]?\s*$",
    re.IGNORECASE,
)
# The same where a verb or preposition is followed by the citation itself ("The
# option to change this timeout is [2].", "The output is formatted as [1]."): read
# with the markers, as a sentence may end in "is" or "as" without one.
_CITED_IN_PLACE = re.compile(
    r"(?<![\w-])(?:is|are|was|were|as|be|by|with|the|a|an)\s*(?:\[\d{1,2}\]\s*)+[:.]?\s*$",
    re.IGNORECASE,
)
# A sentence streams word by word once this much of it is written: enough to tell
# it from an opening about the passages or a sentence written before.
_JUDGE_CHARS = 60
# This much of a sentence standing word for word in a cut passage is a copy of it.
_COPIED_CHARS = 40
# A last line of this many words without an ending was cut off by the token limit.
_MIN_CUT_WORDS = 4


def _plain(text: str) -> str:
    """Text compared as a label: no markers, no dressing, one kind of separator."""
    text = _MARKERS.sub(" ", text).strip(_DRESSING).casefold()
    return " ".join(_SEPARATORS.sub(" - ", text).split())


# candor's own instructions, which the model sometimes pastes back as a sentence.
_INSTRUCTIONS = _plain(" ".join((PASSAGES_SYSTEM, GRADE_TASK, ANSWER_TASK)))


def _opened(text: str, *, keep_markers: bool = False) -> str:
    """A sentence without an opening that only talks about the passages; its leading
    citation markers kept in front (for _cited_after to move) or left out."""
    lead = _LEADING_MARKERS.match(text)
    markers = lead.group(0) if lead else ""
    body = without_meta_opening(text[len(markers) :])
    if keep_markers:
        return markers + body
    # The space before the sentence stays: it separates it from the one before.
    spaces = text[: len(text) - len(text.lstrip())]
    return spaces + body.lstrip()


def _cited_after(sentence: str) -> str:
    """A sentence that opens with citation markers, with them after it instead.

    Told to cite after each sentence, the model often cites before it, at the start
    of a line ("[1] The exit codes are ..."). Markers within a line already follow
    the sentence before them, so only a line's first sentence can open with some.
    """
    lead = _LEADING_MARKERS.match(sentence)
    if lead is None or lead.end() == len(sentence):
        return sentence
    spaces = sentence[: len(sentence) - len(sentence.lstrip())]
    body = sentence[lead.end() :].rstrip()
    after = sentence[lead.end() + len(body) :]
    present = set(_MARKER.findall(body))
    moved = "".join(m for m in _MARKER.findall(lead.group(0)) if m not in present)
    if not moved:
        return spaces + body + after
    trailing = _TRAILING_MARKERS.search(body)
    if trailing is None:
        return f"{spaces}{body} {moved}{after}"
    # Before the markers the sentence already ends with, in the order they were written.
    start = trailing.start()
    return f"{spaces}{body[:start]}{moved}{body[start:]}{after}"


class AnswerCleaner:
    """Feed it an answer's text in pieces; each call returns what is ready to be shown."""

    def __init__(self, passages: Sequence[Hit], shown_chars: int, *, words: bool = True) -> None:
        self._labels: set[str] = set()
        self._heads: list[str] = []  # full labels, which a line may start with
        self._tails: list[str] = []  # the last characters shown of each cut passage
        self._cut_texts: list[str] = []  # the text shown of each cut passage, spaces evened
        for hit in passages:
            chunk = hit.chunk
            full = passage_label(hit)
            self._labels |= {_plain(part) for part in (chunk.title, chunk.heading, full) if part}
            if full:
                self._heads.append(full)
            shown = shown_text(chunk.text, shown_chars)
            if len(chunk.text) > shown_chars and shown.endswith(CUT):
                tail = shown.removesuffix(CUT)[-_TAIL_CHARS:]
                if len(tail) == _TAIL_CHARS:
                    self._tails.append(tail)
                    self._cut_texts.append(" ".join(shown.removesuffix(CUT).split()))
        self._decide_at = max((len(h) for h in self._heads), default=0) + _LABEL_SLACK
        self._line = ""  # the current line, as far as it has not gone out
        self._prose = False  # the current line is prose: its sentences go out as they end
        self._rest_dropped = False  # the current line pasted a cut-off passage
        self._breaks = ""  # line breaks held until kept text follows them
        self._started = False  # some text has gone out
        self._seen: set[str] = set()
        self._in_code = False  # inside a ``` block, where lines are kept as written
        self._cited: set[str] = set()  # markers of the last text let out
        # Let a sentence out word by word while it is written (a visitor's stream), or
        # only once it is whole (the answer kept, which drops what a whole sentence shows).
        self._words_out = words
        self._streaming = False  # the sentence being written is going out word by word
        self._streamed = ""  # what of it has gone out

    def feed(self, text: str) -> str:
        # The whole line, not the piece: a marker streams in pieces ("［", "１", "］"),
        # and until it is whole it is the end of a word, which is never let out early.
        self._line = ascii_markers(self._line + text)
        out: list[str] = []
        while "\n" in self._line:
            self._line, rest = self._line.split("\n", 1)
            out.append(self._flow())
            out.append(self._end_line())
            self._line = rest
        out.append(self._flow())
        return "".join(out)

    def finish(self) -> str:
        """What is left: the last line, without a sentence the token limit cut off."""
        line, self._line = self._line, ""
        body = _MARKERS.sub("", line).strip()
        cut_off = (
            self._started
            and not self._in_code
            and not _ENDS_WELL.search(body)
            and (self._prose or len(body.split()) >= _MIN_CUT_WORDS)
        )
        if cut_off:
            return self._inline(markers_in(line))
        self._line = line
        return self._end_line()

    # -- deciding ---------------------------------------------------------------------

    def _flow(self) -> str:
        """Let out the finished sentences of a line that is long enough to be prose."""
        if not self._prose:
            body = self._line.lstrip()
            if self._in_code or body.startswith("`"):
                return ""  # code, and fences, are decided at their line break
            if len(body) <= self._decide_at or body.startswith("|"):
                return ""
            if _TABLE_ROW.search(self._line):
                return ""  # a row that runs long: decided at its line break
            self._prose = True
            self._line = self._without_head(self._line)
        out: list[str] = []
        while (end := _SENTENCE_END.search(self._line)) is not None:
            sentence, self._line = self._line[: end.end()], self._line[end.end() :]
            out.append(self._sentence(sentence))
        out.append(self._words())
        return "".join(out)

    def _words(self) -> str:
        """The finished words of the sentence being written, once it can be judged.

        A sentence goes out word by word as soon as its opening is long enough to
        tell it from what the clean-up drops whole: a pasted instruction, a sentence
        written before, an opening that only talks about the passages. Its leading
        markers are held, to follow it.
        """
        partial = self._line
        if not self._words_out or self._rest_dropped:
            return ""
        if any(tail in partial for tail in self._tails):
            return ""
        # Text copied from a passage that was cut may run on to the cut, and then goes
        # whole: it waits for the sentence's end.
        flat = " ".join(partial.split())[-_COPIED_CHARS:]
        if len(flat) == _COPIED_CHARS and any(flat in text for text in self._cut_texts):
            return ""
        if not self._streaming:
            key = _plain(partial)
            if len(partial.strip()) < _JUDGE_CHARS or key in _INSTRUCTIONS:
                return ""
            if any(seen.startswith(key[:_MIN_DUPLICATE]) for seen in self._seen):
                return ""
        shaped = _opened(partial)
        ready = shaped[: max(shaped.rfind(" "), 0)].rstrip()
        if len(ready) <= len(self._streamed):
            return ""
        piece, self._streamed = ready[len(self._streamed) :], ready
        self._streaming = True
        return self._out(piece, keep_cited=True)

    def _end_line(self) -> str:
        line, self._line = self._line, ""
        prose, self._prose = self._prose, False
        dropped, self._rest_dropped = self._rest_dropped, False
        if line.lstrip().startswith("```") or self._in_code:
            if line.lstrip().startswith("```"):
                self._in_code = not self._in_code
            out = self._out(line)
        elif dropped:
            out = self._inline(markers_in(line))
        elif prose:
            out = self._sentence(line) if line.strip() else ""
        elif not line.strip():
            out = ""
        elif _TABLE_ROW.search(line) or _plain(line) in self._labels or not _plain(line):
            out = self._inline(markers_in(line))
        else:
            out = self._sentence(self._without_head(line))
        if self._started:
            self._breaks += "\n"
        return out

    def _sentence(self, text: str) -> str:
        """One finished sentence (or short line) of the answer: let out, or dropped."""
        streamed, self._streamed = self._streamed, ""
        if self._streaming:
            # Its opening went out already: the rest follows as it was judged then.
            self._streaming = False
            key = _plain(text)
            if key:
                self._seen.add(key)
            if self._rest_dropped or any(tail in text for tail in self._tails):
                self._rest_dropped = True
                return self._inline(markers_in(text))
            whole = _cited_after(_opened(text, keep_markers=True))
            return self._out(whole[len(streamed) :], keep_cited=False)
        if self._rest_dropped:
            return self._inline(markers_in(text))
        for tail in self._tails:
            if tail in text:
                self._rest_dropped = True  # the passage goes on pasting to its cut
                return self._inline(markers_in(text))
        key = _plain(text)
        if (
            not key
            or key in self._labels
            or _DANGLING.search(_MARKERS.sub("", text))
            or _CITED_IN_PLACE.search(text.rstrip())
        ):
            return self._inline(markers_in(text))
        if len(key) >= _MIN_DUPLICATE:
            if key in self._seen or key in _INSTRUCTIONS:
                return self._inline(markers_in(text))
            self._seen.add(key)
        return self._out(_cited_after(_opened(text, keep_markers=True)))

    def _without_head(self, line: str) -> str:
        """The line without a passage label it opens with ("[1] title - heading ...")."""
        lead = _LEADING_MARKERS.match(line)
        start = lead.end() if lead else 0
        body = line[start:].lstrip()
        for head in self._heads:
            if body.startswith(head):
                rest = body[len(head) :].lstrip(" :-—–")
                markers = markers_in(line[:start])
                return f"{markers} {rest}" if markers and rest else rest or markers
        return line

    # -- letting text out -------------------------------------------------------------

    def _out(self, text: str, *, keep_cited: bool = False) -> str:
        if not keep_cited:
            self._cited = set(_MARKER.findall(text))
        if not self._started:
            self._started = True
            return text.lstrip()
        breaks, self._breaks = self._breaks[:2], ""
        if breaks:
            return breaks + text.lstrip(" ")
        return text

    def _inline(self, markers: str) -> str:
        """Markers of dropped text, after the text already let out (none before any)."""
        fresh = [m for m in _MARKER.findall(markers) if m not in self._cited]
        if not fresh or not self._started:
            return ""
        self._cited |= set(fresh)
        return " " + "".join(fresh)


def clean_answer(text: str, passages: Sequence[Hit], shown_chars: int) -> str:
    """The whole answer through an AnswerCleaner at once."""
    cleaner = AnswerCleaner(passages, shown_chars, words=False)
    return (cleaner.feed(text) + cleaner.finish()).strip()
