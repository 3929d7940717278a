"""The open gaps as a question set for `candor eval`: do the documents answer them now?

One line per question (each gap's distinct questions, most recent first, at most
`per_gap`), in the question file's format (candor.evaluation.questions), kind
"factual", with the gap's id in "gap". The documents that will answer a gap are not
known until they do, so a gap's questions name no expected sources: `candor eval`
then measures whether they are answered and declined, and leaves them out of the
figures that need a page (Recall@k, citation accuracy). A closed gap's questions
(with `closed`) expect the documents that closed it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from candor.curated.records import CITATION_PREFIX
from candor.gaps.checking import questions_to_ask
from candor.gaps.records import Gap


def question_lines(gaps: Iterable[Gap], *, per_gap: int, closed: bool = False) -> list[str]:
    lines: list[str] = []
    for gap in gaps:
        if gap.status == "closed" and not closed:
            continue
        expected = [s for s in gap.closed_by if not s.startswith(CITATION_PREFIX)]
        for n, question in enumerate(questions_to_ask(gap, per_gap), 1):
            row: dict[str, object] = {
                "id": f"{gap.id}-{n}",
                "question": question.question,
                "kind": "factual",
                "gap": gap.id,
                "notes": f"{question.why} on {question.trace_id}",
            }
            if gap.status == "closed" and expected:
                row["expected_sources"] = expected
            lines.append(json.dumps(row, ensure_ascii=False))
    return lines
