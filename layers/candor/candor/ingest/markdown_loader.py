"""Markdown: CommonMark ATX headings (outside fenced code) cut a file into sections."""

from __future__ import annotations

import re

from candor.ingest.document import Document, Section, tidy

# CommonMark ATX headings: up to 3 spaces, 1-6 '#', then a space or the end of the
# line ("#hashtag" is text), and an optional closing run of '#'.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A GitHub-flavoured table's delimiter row, under its header: |---|:--:|, ---|---.
_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
# Emphasis marks around a whole cell: **name**, *name* (not underscores, which
# snake_case names hold).
_CELL_MARKS = re.compile(r"^(\*\*|\*)(.+?)\1$")


def load_markdown(text: str, source: str, stem: str) -> Document:
    sections: list[Section] = []
    heading, level, lines = "", 0, list[str]()
    rows: list[str] = []  # first cells of the section's table rows
    fence = ""  # the opening run of the code block we are in, or ""
    source_lines = text.split("\n")
    table = False  # inside a table's body rows
    skip = False  # the line is a table's delimiter row, already kept
    for number, line in enumerate(source_lines):
        if skip:
            skip = False
            continue
        opening = _FENCE.match(line)
        if fence:
            # A fence closes with a run of the same character, at least as long.
            run = opening.group(1) if opening else ""
            if run[:1] == fence[0] and len(run) >= len(fence) and not line.strip().strip(run[0]):
                fence = ""
        elif opening:
            fence = opening.group(1)
            table = False
        elif match := _ATX.match(line):
            _add_section(sections, heading, level, lines, rows)
            heading, level = (match.group(2) or "").strip(), len(match.group(1))
            lines, rows = [], []
            table = False
            continue
        elif table and "|" in line and line.strip():
            if cell := first_cell(line):
                rows.append(cell)
        else:
            following = source_lines[number + 1] if number + 1 < len(source_lines) else ""
            # A header row, then its delimiter: the header names the columns, so its
            # cells are not entries; the rows after it are.
            table = "|" in line and "-" in following and bool(_TABLE_DELIMITER.match(following))
            if table:
                lines += [line, following]
                skip = True
                continue
        lines.append(line)
    _add_section(sections, heading, level, lines, rows)
    title = next((s.heading for s in sections if s.level == 1 and s.heading), stem)
    return Document(source, title, sections)


def first_cell(row: str) -> str:
    """The text of a table row's first cell, without the marks around it."""
    cells = _CELL_SPLIT.split(row.strip().removeprefix("|"))
    # Code marks go wherever they are: "`CANDOR_API_KEYS` / `..._PARAMETER`" names two.
    cell = cells[0].replace("\\|", "|").replace("`", "").strip() if cells else ""
    while marked := _CELL_MARKS.match(cell):
        cell = marked.group(2).strip()
    return cell


def _add_section(
    sections: list[Section], heading: str, level: int, lines: list[str], rows: list[str]
) -> None:
    text = tidy("\n".join(lines))
    # A heading with no text is kept: its subsections need it for their heading path.
    if text or heading:
        sections.append(Section(heading, text, level, rows=tuple(rows)))
