"""Citations of an answer: the markers the model wrote, or else the passages it used.

The model is asked to mark each sentence with the passages it comes from, like
[1]. A small local model sometimes writes a sound answer and forgets the markers;
declining such an answer wastes it. `attribute` then finds the passages the
answer's own words come from, and only an answer made mostly of one passage's
words is kept: one that the passages do not account for is still declined.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from candor.graph.state import Citation
from candor.text import content_words
from candor.types import Hit

SNIPPET_CHARS = 240
MARKER = re.compile(r"\[(\d{1,2})\]")
# A marker in the forms a model that has read CJK text writes for [1]: full-width
# brackets (U+FF3B, U+FF3D) or digits (U+FF10-U+FF19), which NFKC reads as [1], and
# lenticular brackets (U+3010, U+3011), which it does not: ［1］, ［１］, [１], 【1】.
ANY_WIDTH_MARKER = re.compile(r"[\[\uff3b\u3010](\d{1,2})[\]\uff3d\u3011]")
# The share of an answer's content words (besides the question's own) that must
# appear in a passage for the passage to count as a source. On the git dev set the
# passage a model marked itself held 0.6-1.0 of them when the answer was taken from
# it, and other passages 0.0-0.35.
ATTRIBUTION_THRESHOLD = 0.5
# A sentence of this many words of its own (besides the question's) or fewer, such
# as "To deploy it, follow these steps:", states nothing a source must account for.
CONNECTIVE_WORDS = 2
# At most this many passages are cited for an unmarked answer that several hold:
# a one-line answer's few words are in every passage about its subject, and six
# markers after one sentence (git-043 on the dev set) tell the reader nothing more.
WHOLE_ANSWER_SOURCES = 2
# A sentence ends at . ! or ? before a space or the end (not inside `gc.auto` or
# 3.5), with the citation markers right after it; or at a line break.
# A list item's number or bullet ("2.", "3)", "-"): the list's, not a value stated.
ENUMERATOR = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])(?:\s+|$)")
_SENTENCE_END = re.compile(r"[.!?]+(?:[ \t]*\[\d{1,2}\])*(?=\s|$)|\n")
# Markers standing after a sentence's end ("32767 [1]. [2]"): the clean-up lets out
# the markers of a sentence it dropped after the text already shown.
_STRANDED = re.compile(r"([.!?])([ \t]+(?:[ \t]*\[\d{1,2}\])+)(?=\s|$)")
# A run of markers written together ("[1][2][1]"): each passage in it is named once.
_MARKER_RUN = re.compile(r"(?:\[\d{1,2}\])+")


def cite(text: str, shown: Sequence[Hit]) -> tuple[str, tuple[Citation, ...]]:
    """Keep only citation markers that name a passage the model was shown.

    `shown` are the passages exactly as the prompt numbered them (from 1): any
    other number, such as one copied from a document or the question, is dropped.
    Markers are renumbered in order of first use so the reader sees [1], [2], ...
    matching the citations list.
    """
    numbering: dict[int, int] = {}
    citations: list[Citation] = []

    def renumber(match: re.Match[str]) -> str:
        given = int(match.group(1))
        if not 1 <= given <= len(shown):
            return ""
        if given not in numbering:
            numbering[given] = len(numbering) + 1
            citations.append(citation(shown[given - 1]))
        return f"[{numbering[given]}]"

    cleaned = MARKER.sub(renumber, _without_dangling_intro(text.strip()))
    cleaned = re.sub(r"[ \t]+([.,;:])", r"\1", cleaned)
    cleaned = _MARKER_RUN.sub(_each_once, _STRANDED.sub(_tucked, cleaned))
    return cleaned.strip(), tuple(citations)


def ascii_markers(text: str) -> str:
    """`text` with each citation marker written as `[n]` in ASCII, as every rule reads it.

    Only whole markers change: a full-width bracket or digit anywhere else is the
    document's or the visitor's text, and stays as written.
    """

    def plain(match: re.Match[str]) -> str:
        marker = match.group(0)
        return marker if marker.isascii() else f"[{int(match.group(1))}]"

    return ANY_WIDTH_MARKER.sub(plain, text)


def markers_in(text: str) -> str:
    """The citation markers of `text`, in the order written ("[2][1]")."""
    return "".join(marker.group(0) for marker in MARKER.finditer(text))


def _without_dangling_intro(text: str) -> str:
    """The answer without a last sentence that introduces what never came ("For
    example, consider the following session:" ended sqlite-005's answer): the list
    or code after it was not written or was dropped, so it promises nothing. Its
    markers stay, on the sentence before: often the answer's only citation."""
    pieces = sentences(text)
    if len(pieces) < 2 or not MARKER.sub("", pieces[-1]).rstrip().endswith(":"):
        return text
    markers = markers_in(pieces[-1])
    return "".join(pieces[:-1]).rstrip() + (f" {markers}" if markers else "")


def _each_once(run: re.Match[str]) -> str:
    numbers = dict.fromkeys(MARKER.findall(run.group(0)))  # in order, without repeats
    return "".join(f"[{number}]" for number in numbers)


def _tucked(match: re.Match[str]) -> str:
    """Stranded markers moved before the end of the sentence they follow; a list
    item's number ("1. [1] Pack ...") is not a sentence's end and keeps them."""
    text = match.string
    line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
    if not line.strip() or line.strip().isdigit():
        return match.group(0)
    markers = markers_in(match.group(2))
    space = "" if text[match.start() - 1 : match.start()] in ("]", " ") else " "
    return space + markers + match.group(1)


def sentences(text: str) -> list[str]:
    """`text` cut into sentences that join back into it exactly. A list item's
    number ("2. Build it.") stays with its item."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        while end < len(text) and text[end] in " \t\n":
            end += 1
        pieces.append(text[start:end])
        start = end
    if start < len(text):
        pieces.append(text[start:])
    joined: list[str] = []
    for piece in pieces:
        if joined and ENUMERATOR.fullmatch(joined[-1]):
            joined[-1] += piece
        elif piece:
            joined.append(piece)
    return joined


def _shown_words(hit: Hit, shown_chars: int) -> set[str]:
    chunk = hit.chunk
    return content_words(f"{chunk.title} {chunk.heading} {chunk.text[:shown_chars]}")


def covering_pair(
    sentence: str, question: str, passages: Sequence[Hit], shown_chars: int
) -> list[int]:
    """Two passages that together account for a sentence no one passage does, or [].

    A sentence that sums up steps from two excerpts ("create the indexes in your
    region, store the keys in SSM and run sam deploy") holds too few of either's
    words to be attributed to one, though every word comes from the two. The best
    passage is taken, then the one that adds most of the words it lacks; the pair
    counts when it holds ATTRIBUTION_THRESHOLD of the sentence's words and each
    passage brings at least one of them. The support check still reads the
    sentence's specifics against both.
    """
    words = content_words(MARKER.sub(" ", sentence)) - content_words(question)
    if not words:
        return []
    held = [_shown_words(hit, shown_chars) & words for hit in passages]
    ranked = sorted(range(len(held)), key=lambda i: (-len(held[i]), i))
    if not ranked or not held[ranked[0]]:
        return []
    first = ranked[0]
    second = max(
        ranked[1:],
        key=lambda i: (len(held[i] - held[first]), -i),
        default=None,
    )
    if second is None or not held[second] - held[first]:
        return []
    if len(held[first] | held[second]) < ATTRIBUTION_THRESHOLD * len(words):
        return []
    return [first + 1, second + 1]


def attribute(answer: str, question: str, passages: Sequence[Hit], shown_chars: int) -> list[int]:
    """The 1-based numbers of the passages an unmarked answer is made of, best first.

    Words of the question are left out: an answer repeats them whatever it is based
    on. Only the part of each passage the model was shown (`shown_chars`) counts.
    """
    words = content_words(MARKER.sub(" ", answer)) - content_words(question)
    if not words:
        return []
    shares = []
    for number, hit in enumerate(passages, start=1):
        shown = _shown_words(hit, shown_chars)
        shares.append((len(words & shown) / len(words), number))
    shares.sort(key=lambda pair: (-pair[0], pair[1]))
    return [number for share, number in shares if share >= ATTRIBUTION_THRESHOLD]


def with_attribution(
    answer: str, question: str, passages: Sequence[Hit], shown_chars: int
) -> tuple[str, tuple[Citation, ...]]:
    """The unmarked answer with markers for the passages its words come from.

    An answer made mostly of one passage's words gets that passage's marker at its
    end. Otherwise each sentence is attributed on its own (a list of steps drawn
    from several pages): each sentence a passage accounts for gets its marker, a
    connective one (few words of its own, or one that introduces a list with a
    colon) stays unmarked, one no passage accounts for is left out. The
    attributed sentences must still hold at least ATTRIBUTION_THRESHOLD of the
    answer's own words, or nothing is cited and the answer is declined.
    """
    numbers = attribute(answer, question, passages, shown_chars)[:WHOLE_ANSWER_SOURCES]
    if numbers:
        markers = "".join(f"[{n}]" for n in range(1, len(numbers) + 1))
        marked = _marked(answer.strip(), markers)
        return marked, tuple(citation(passages[n - 1]) for n in numbers)
    asked = content_words(question)
    kept: list[str] = []
    own = covered = 0
    for sentence in sentences(MARKER.sub("", answer)):
        words = content_words(ENUMERATOR.sub("", sentence)) - asked
        own += len(words)
        if len(words) <= CONNECTIVE_WORDS or sentence.rstrip().endswith(":"):
            kept.append(sentence)
            continue
        best = attribute(sentence, question, passages, shown_chars)[:1] or covering_pair(
            sentence, question, passages, shown_chars
        )
        if best:
            covered += len(words)
            kept.append(_marked(sentence, "".join(f"[{n}]" for n in best)))
    if not own or covered < ATTRIBUTION_THRESHOLD * own:
        return answer.strip(), ()
    return cite("".join(kept).rstrip(), passages)


def _marked(sentence: str, markers: str) -> str:
    """The sentence with `markers` ("[2]") before its closing punctuation."""
    body = sentence.rstrip()
    end = len(body.rstrip(".!?:;"))
    return f"{body[:end]} {markers}{body[end:]}{sentence[len(body) :]}"


def citation(hit: Hit) -> Citation:
    chunk = hit.chunk
    return Citation(
        chunk.id, chunk.source, chunk.title, _snippet(chunk.text), chunk.page, chunk.url
    )


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1].rstrip() + "…"
