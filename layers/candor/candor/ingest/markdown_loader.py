"""Markdown: CommonMark ATX headings (outside fenced code) cut a file into sections."""

from __future__ import annotations

import re

from candor.ingest.document import Document, Section, tidy

# CommonMark ATX headings: up to 3 spaces, 1-6 '#', then a space or the end of the
# line ("#hashtag" is text), and an optional closing run of '#'.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def load_markdown(text: str, source: str, stem: str) -> Document:
    sections: list[Section] = []
    heading, level, lines = "", 0, list[str]()
    fence = ""  # the opening run of the code block we are in, or ""
    for line in text.split("\n"):
        opening = _FENCE.match(line)
        if fence:
            # A fence closes with a run of the same character, at least as long.
            run = opening.group(1) if opening else ""
            if run[:1] == fence[0] and len(run) >= len(fence) and not line.strip().strip(run[0]):
                fence = ""
        elif opening:
            fence = opening.group(1)
        elif match := _ATX.match(line):
            _add_section(sections, heading, level, lines)
            heading, level, lines = (match.group(2) or "").strip(), len(match.group(1)), []
            continue
        lines.append(line)
    _add_section(sections, heading, level, lines)
    title = next((s.heading for s in sections if s.level == 1 and s.heading), stem)
    return Document(source, title, sections)


def _add_section(sections: list[Section], heading: str, level: int, lines: list[str]) -> None:
    text = tidy("\n".join(lines))
    # A heading with no text is kept: its subsections need it for their heading path.
    if text or heading:
        sections.append(Section(heading, text, level))
