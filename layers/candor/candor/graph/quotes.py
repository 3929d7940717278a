"""Quotes: the sentence or two of a cited passage that back what the answer says.

A citation's snippet is the first 240 characters of its passage, whatever they
are: a table's header row and its pipes, a heading, Markdown syntax. A visitor
deciding whether to trust a sentence wants the words of the passage that say the
same thing. The quote is those: the one or two consecutive sentences, table rows
or list items of the passage, as the model was shown it, that share the most with
the answer's sentences carrying that citation's marker (the specifics an answer
states, its numbers, code-like names and quoted values, count most), in plain text.

Plain text means what a reader of the rendered page would read: no table pipes or
separator rows (a row reads "header: value; header: value" when its table's header
row is in the passage), no Markdown or HTML syntax, entities decoded, whitespace
collapsed, cut at a word's end. What is left is still untrusted text from a
document: clients show it as text, never as HTML.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from candor.graph import prompts
from candor.graph.citations import MARKER, sentences
from candor.graph.grounding import mentions
from candor.graph.state import Citation
from candor.graph.support import specifics
from candor.text import content_words
from candor.types import Hit

QUOTE_CHARS = 300
ELLIPSIS = "\u2026"
# A specific the answer states and the passage holds says far more about which of
# its sentences backs the answer than a shared word does: "5" or `CANDOR_TOP_K`
# picks the row of a settings table; "passages" is in every row.
SPECIFIC_WEIGHT = 3
# A second sentence or row must add more than one shared word: one common word
# ("many", "each") is no reason to make a visitor read a whole other table row.
SECOND_UNIT_COST = 1
MARKDOWN_SUFFIXES = (".md", ".markdown")  # as candor.ingest.loaders reads them
# A sentence that opens by pointing back ("In that case, drop all locks") is
# quoted with the one it points back to.
_LEANS_BACK = re.compile(
    r"(?:In (?:that|this|such|either) case|This|That|These|Those|It|Its|They|Such|However"
    r"|Otherwise|Then|Also|But|Instead|Hence|Therefore|Thus)\b"
)


def attach(
    answer: str, citations: Sequence[Citation], shown: Sequence[Hit], passage_chars: int
) -> tuple[Citation, ...]:
    """`citations`, each with the quote of its own passage that backs the sentences citing it.

    `answer` carries the markers [1]..[n] of `citations`; `shown` are the passages
    the prompt showed (found by id), each quoted as the model saw it: its text cut
    at `passage_chars`, never a part it was not shown or another passage.
    """
    by_id = {hit.chunk.id: hit for hit in shown}
    citing = citing_sentences(answer)
    quoted: list[Citation] = []
    for number, citation in enumerate(citations, start=1):
        hit = by_id.get(citation.id)
        if hit is None:
            quoted.append(citation)
            continue
        seen = prompts.shown_text(hit.chunk.text, passage_chars)
        quote = quote_for(citing.get(number, ()), seen, markdown=is_markdown(hit.chunk.source))
        quoted.append(replace(citation, quote=quote))
    return tuple(quoted)


def is_markdown(source: str) -> bool:
    """Whether a document's text is Markdown, whose syntax (and inline HTML) is markup.

    The HTML and PDF loaders' text is what a reader of the page reads: a `<b>` in
    it was written on the page, not a tag (the tags are gone), so it stays.
    """
    return PurePosixPath(source).suffix.lower() in MARKDOWN_SUFFIXES


def citing_sentences(answer: str) -> dict[int, list[str]]:
    """The sentences of `answer` each citation marker stands for, by marker number.

    A marker stands for its sentence and the unmarked sentences just before it: a
    model citing once for two sentences cites after the second, and an unmarked
    answer's attribution puts every marker at its end. Unmarked sentences after the
    last marker go with the last marked sentence.
    """
    citing: dict[int, list[str]] = {}
    pending: list[str] = []
    last: list[int] = []
    for sentence in sentences(answer):
        numbers = list(dict.fromkeys(int(n) for n in MARKER.findall(sentence)))
        body = re.sub(r"\s+(?=[.,;:!?])", "", " ".join(MARKER.sub(" ", sentence).split()))
        if not numbers:
            if body:
                pending.append(body)
            continue
        for number in numbers:
            citing.setdefault(number, []).extend([*pending, body] if body else pending)
        pending, last = [], numbers
    for number in last:
        citing[number].extend(pending)
    return citing


def quote_for(cited_sentences: Sequence[str], passage_text: str, *, markdown: bool = True) -> str:
    """The one or two consecutive sentences, rows or items of `passage_text` that best
    back `cited_sentences`, readable; the passage's opening when none shares a word.

    `markdown`: the passage is Markdown (see `readable`).
    """
    units = _units(passage_text, markdown)
    if not any(unit.quotable for unit in units):
        return ""
    start, stop = _best_window(units, cited_sentences)
    if stop - start == 1 and start > 0 and _LEANS_BACK.match(units[start].text):
        before = units[start - 1]
        if (
            before.quotable
            and before.block == units[start].block
            and len(_joined(units[start - 1 : stop])) <= QUOTE_CHARS
        ):
            start -= 1
    return _cut(_joined(units[start:stop]))


def _best_window(units: Sequence[_Unit], cited_sentences: Sequence[str]) -> tuple[int, int]:
    """units[start:stop], one quotable unit or two consecutive ones of a block, that
    shares the most with the cited sentences; the first quotable unit if none does."""
    words = content_words(" ".join(MARKER.sub(" ", s) for s in cited_sentences))
    named = list(dict.fromkeys(s for sentence in cited_sentences for s in specifics(sentence)))

    def score(window: Sequence[_Unit]) -> int:
        text = " ".join(unit.text for unit in window)
        shared = len(words & content_words(text))
        value = SPECIFIC_WEIGHT * sum(1 for name in named if mentions(text, name)) + shared
        return value - SECOND_UNIT_COST * (len(window) - 1)

    windows = [(i, i + 1) for i, unit in enumerate(units) if unit.quotable]
    windows += [
        (i, i + 2)
        for i in range(len(units) - 1)
        if units[i].quotable
        and units[i + 1].quotable
        and units[i].block == units[i + 1].block
        and len(_joined(units[i : i + 2])) <= QUOTE_CHARS
    ]
    # On a tie the shorter, then the earlier window wins.
    scored = [(score(units[a:b]), a - b, -a, (a, b)) for a, b in windows]
    best = max(scored)
    if best[0] <= 0:
        return windows[0]
    return best[3]


def readable(text: str, *, markdown: bool = True) -> str:
    """`text` as a reader of the rendered page reads it, at most QUOTE_CHARS long.

    Table rows and list items read as text either way. With `markdown`, its syntax
    and inline HTML also go: headings, emphasis, code marks, links (their text
    stays), tags, entities. Without, `<b>` is text the page showed.
    """
    return _cut(_joined(_units(text, markdown)))


# -- the passage as units ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Unit:
    text: str  # readable
    block: int  # units of one block (paragraph, table, list) are consecutive
    quotable: bool = True  # headings are not: the chip already shows the title


_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s+|$)")
_RULE = re.compile(r"^\s{0,3}(?:[-*_=]\s*){3,}$")
_BLOCKQUOTE = re.compile(r"^\s{0,3}(?:>\s?)+")
_BULLET = re.compile(r"^\s*[-*+•]\s+")
_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+")
_MARKDOWN_ROW = re.compile(r"^\s{0,3}\|.*\|\s*$")
_CELL_SEPARATOR = re.compile(r"(?<!\\)\|")
# A line that opens a block, is short and ends without punctuation, with text
# under it, is a heading or a term ("Bisect run", "--force-with-lease").
_LABEL_CHARS = 60
_ENDS_SENTENCE = re.compile(r"[.,;:!?)\]…]$")
# A sentence ends at . ! or ? (and a closing quote or bracket) before a space and
# what starts a sentence: not inside `gc.auto` or 3.5, nor after "e.g.".
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s+[A-Z0-9\"'`(\[-])")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|cf|vs)\.$", re.IGNORECASE)


def _units(text: str, markdown: bool) -> list[_Unit]:
    """The passage's sentences, table rows, list items and code lines, in order."""
    markup = _Markup(markdown, _closed_tags(text) if markdown else frozenset())
    units: list[_Unit] = []
    for block, lines in enumerate(_blocks(text, markdown)):
        units += _block_units(lines, block, markup)
    return units


def _blocks(text: str, markdown: bool) -> Iterator[list[tuple[str, bool]]]:
    """Runs of lines between blank lines, each line with whether it is code."""
    all_lines = text.split("\n")
    fences = [match for line in all_lines if markdown and (match := _FENCE.match(line))]
    # A passage cut from inside a code block starts in code: its fences are odd in
    # number, and the first one is bare, as a closing fence is ("```", not "```sh").
    first = fences[0] if len(fences) % 2 else None
    starts_in_code = first is not None and not first.string[first.end() :].strip()
    fence = first.group(1) if first is not None and starts_in_code else ""
    lines: list[tuple[str, bool]] = []
    for line in all_lines:
        opening = _FENCE.match(line) if markdown else None
        if fence or opening:
            if opening and (not fence or opening.group(1)[0] == fence[0]):
                # A fence line is furniture: it ends the text before it and the code.
                if lines:
                    yield lines
                lines = []
                fence = "" if fence else opening.group(1)
            elif line.strip():
                lines.append((line, True))
            continue
        if not line.strip():
            if lines:
                yield lines
            lines = []
        else:
            lines.append((line, False))
    if lines:
        yield lines


def _block_units(lines: list[tuple[str, bool]], block: int, markup: _Markup) -> list[_Unit]:
    units: list[_Unit] = []
    prose: list[str] = []  # lines of the sentence run (a paragraph or a list item)
    rows: list[list[str]] = []  # the table being read
    header: list[str] | None = None
    markdown = False  # the table is Markdown: its header row, if any, is marked

    def end_prose() -> None:
        if prose:
            units.extend(_Unit(s, block) for s in _sentences(markup.plain(" ".join(prose))))
            prose.clear()

    def end_table() -> None:
        nonlocal header, markdown
        data = rows
        if (
            header is None
            and not markdown
            and len(rows) > 1
            and _looks_like_header(rows[0], rows[1])
        ):
            header, data = rows[0], rows[1:]
        units.extend(_Unit(_row_text(row, header, markup), block) for row in data)
        rows.clear()
        header, markdown = None, False

    for number, (raw, code) in enumerate(lines):
        line = _BLOCKQUOTE.sub("", raw) if markup.markdown and not code else raw
        if code:
            end_prose()
            end_table()
            if text := " ".join(line.split()):
                units.append(_Unit(text, block))
            continue
        if _is_separator(line):
            if rows:
                # The row above a separator row is a Markdown table's header.
                header, markdown = rows.pop(), True
            continue
        cells = _cells(line, alone=_is_alone(lines, number))
        if cells is not None:
            end_prose()
            markdown = markdown or bool(_MARKDOWN_ROW.match(line))
            rows.append(cells)
            continue
        end_table()
        if markup.markdown and _RULE.match(line):
            end_prose()
            continue
        if markup.markdown and _ATX_HEADING.match(line):
            end_prose()
            units.append(_Unit(markup.plain(_ATX_HEADING.sub("", line)), block, False))
            continue
        if _BULLET.match(line) or _NUMBERED.match(line):
            end_prose()
            prose.append(_BULLET.sub("", line))
            continue
        if not prose and number + 1 < len(lines) and _is_label(line, lines[number + 1][0]):
            units.append(_Unit(markup.plain(line), block, False))
            continue
        prose.append(line)
    end_prose()
    end_table()
    return [unit for unit in units if unit.text]


def _sentences(text: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for end in _SENTENCE_END.finditer(text):
        if not _ABBREVIATION.search(text, start, end.end()):
            pieces.append(text[start : end.end()])
            start = end.end()
    pieces.append(text[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def _is_label(line: str, next_line: str) -> bool:
    """Whether a block's first line names what follows rather than starting a sentence
    that wraps onto the next line (which then goes on in lower case)."""
    stripped = line.strip()
    if len(stripped) > _LABEL_CHARS or _ENDS_SENTENCE.search(stripped):
        return False
    return stripped.isupper() or not next_line.lstrip()[:1].islower()


def _is_separator(line: str) -> bool:
    stripped = line.strip()
    return "|" in stripped and "-" in stripped and not stripped.strip("|-: ")


def _is_alone(lines: list[tuple[str, bool]], number: int) -> bool:
    """Whether line `number` has no neighbour that reads as a table row of its own."""
    neighbours = [lines[i] for i in (number - 1, number + 1) if 0 <= i < len(lines)]
    return not any(not code and _cells(line, alone=False) is not None for line, code in neighbours)


def _cells(line: str, *, alone: bool) -> list[str] | None:
    """The cells of a table row, or None when `line` is not one.

    Markdown rows open and close with a pipe. The HTML loader writes a row as its
    cells joined by " | ", which a command's synopsis also has ("[-o <file> |
    --output=<file>]"); a cell with an unclosed bracket or quote is such a line, not
    a row. A lone such line is a row only as a label and its text ("Note | ..."):
    "Run git log | less" is a sentence.
    """
    if _MARKDOWN_ROW.match(line):
        inner = line.strip()[1:-1]
        return [cell.strip().replace("\\|", "|") for cell in _CELL_SEPARATOR.split(inner)]
    if line[:1].isspace() or " | " not in line:
        return None
    cells = [cell.strip() for cell in line.split(" | ")]
    if not all(cells) or not all(_balanced(cell) for cell in cells):
        return None
    if alone and (len(cells) != 2 or len(cells[0].split()) > 2 or _ENDS_SENTENCE.search(cells[0])):
        return None
    return cells


_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"), ("<", ">"))


def _balanced(cell: str) -> bool:
    return all(cell.count(o) == cell.count(c) for o, c in _PAIRS) and all(
        cell.count(q) % 2 == 0 for q in ("`", '"')
    )


# A header cell names a column: a few words, no values (digits, code, quotes).
_HEADER_CELL = re.compile(r"[A-Za-z][A-Za-z /&()'-]{0,39}")


def _looks_like_header(first: list[str], second: list[str]) -> bool:
    """Whether the first row of a table the HTML loader wrote is its header row.

    The loader writes header and data rows alike; a header row has as many cells
    as the rows under it, each a short name without digits, code or a full stop.
    """
    return len(first) == len(second) and all(_HEADER_CELL.fullmatch(cell) for cell in first)


def _row_text(cells: list[str], header: list[str] | None, markup: _Markup) -> str:
    values = [markup.plain(cell) for cell in cells]
    if header is not None:
        names = [markup.plain(cell) for cell in header]
        named = [
            f"{names[i]}: {value}" if i < len(names) and names[i] else value
            for i, value in enumerate(values)
            if value
        ]
        return "; ".join(named)
    values = [value for value in values if value]
    # A table without a header row of two columns is names and what they mean.
    if len(values) == 2:
        return f"{values[0]}: {values[1]}"
    return "; ".join(values)


# -- inline markup -----------------------------------------------------------------

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SCRIPT = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)|\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s]+)>")
_TAG = re.compile(r"</?\s*([A-Za-z][\w-]*)((?:\s+[^<>]*?)?)\s*/?>")
# Tags of HTML that documents write inline. Only these are markup: `<file>`,
# `<commit>` and `<option>` in a synopsis are placeholders a reader must see.
_HTML_TAG_NAMES = """
    a abbr b big blockquote br caption center cite code col colgroup dd del details dfn
    div dl dt em figcaption figure font h1 h2 h3 h4 h5 h6 hr i img ins kbd li mark ol p pre
    q s samp small span strike strong sub summary sup table tbody td tfoot th thead tr tt
    u ul var wbr
"""
_HTML_TAGS = frozenset(_HTML_TAG_NAMES.split())
_VOID_TAGS = frozenset({"br", "hr", "img", "wbr"})
_EMPHASIS = (
    re.compile(r"(?<![\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])"),
    re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"),
    re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"),
    re.compile(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)"),
    re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"),
)
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")


def _closed_tags(text: str) -> frozenset[str]:
    return frozenset(name.lower() for name in re.findall(r"</\s*([A-Za-z][\w-]*)\s*>", text))


@dataclass(frozen=True, slots=True)
class _Markup:
    """How a passage's lines become plain text.

    `closed` are the tag names a Markdown passage closes somewhere (`</b>`): an
    opening tag of HTML counts as markup when it has attributes, is one that never
    closes (<br>), or is closed in the passage; else it may be a placeholder.
    """

    markdown: bool
    closed: frozenset[str]

    def plain(self, text: str) -> str:
        """One line or cell as plain text, whitespace collapsed."""
        return _inline(text, self.closed) if self.markdown else " ".join(text.split())


def _inline(text: str, closed: frozenset[str]) -> str:
    """Markdown and HTML markup off `text`; code spans read as written."""
    text = _SCRIPT.sub(" ", _COMMENT.sub(" ", text))
    # Code reads as written: it is set aside while the markup around it goes.
    code: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        code.append(match.group(2).strip())
        return f"\x00{len(code) - 1}\x00"

    text = _markup_free(_CODE_SPAN.sub(set_aside, text.replace("\x00", " ")), closed)
    text = re.sub(r"\x00(\d+)\x00", lambda m: code[int(m.group(1))], text)
    return " ".join(text.split())


def _markup_free(text: str, closed: frozenset[str]) -> str:
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2), text)
    text = _AUTOLINK.sub(r"\1", text)

    def tag(match: re.Match[str]) -> str:
        name = match.group(1).lower()
        is_markup = name in _HTML_TAGS and (
            match.group(0).startswith("</")
            or "=" in match.group(2)
            or name in _VOID_TAGS
            or name in closed
        )
        if not is_markup:
            return match.group(0)
        return " " if name in _VOID_TAGS or name in ("p", "div", "li", "td", "th", "tr") else ""

    text = _TAG.sub(tag, text)
    for emphasis in _EMPHASIS:
        text = emphasis.sub(r"\1", text)
    return html.unescape(_ESCAPE.sub(r"\1", text))


# -- joining and cutting -----------------------------------------------------------


def _joined(units: Sequence[_Unit]) -> str:
    parts: list[str] = []
    for unit in units:
        text = re.sub(r"\s*\.\.\.$", ELLIPSIS, unit.text)  # where the shown text was cut
        if parts and not _ENDS_SENTENCE.search(parts[-1]):
            parts[-1] += "."
        parts.append(text)
    return " ".join(parts)


def _cut(text: str) -> str:
    """`text` cut at a word's end to at most QUOTE_CHARS, with an ellipsis."""
    if len(text) <= QUOTE_CHARS:
        return text
    cut = text[: QUOTE_CHARS - 1]
    space = cut.rfind(" ")
    if space >= QUOTE_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + ELLIPSIS
