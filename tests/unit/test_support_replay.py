"""scripts.support_replay: which answered sentences the support check's newer rules
would newly remove, against the whole text of the cited pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.support_replay import replay

pytestmark = pytest.mark.unit

PAGE = (
    "<html><head><title>File format</title></head><body><h1>File format</h1>"
    "<p>Files written by version 3 are read by every later release. "
    "The default page size is 4096 bytes.</p></body></html>"
)


def answered(answer: str) -> dict[str, object]:
    return {"id": "q-1", "decision": "answered", "answer": answer, "cited_sources": ["f.html"]}


def test_only_sentences_that_lose_by_the_newer_rules_are_counted(tmp_path: Path) -> None:
    (tmp_path / "f.html").write_text(PAGE)
    report = {
        "agent_questions": [
            answered("Pages are 4096 bytes [1]. Files stay readable for 3 years [1]."),
            # 9000 is in no page: the earlier rules removed this sentence too.
            {**answered("Pages hold 9000 rows and last 3 years [1]."), "id": "q-2"},
            {"id": "q-3", "decision": "declined", "answer": "", "cited_sources": []},
        ]
    }
    questions = {"q-1": "How long?", "q-2": "How big?", "q-3": "Why?"}
    result = replay(report, tmp_path, questions)
    assert result["answered"] == 2
    assert result["newly_trimmed"] == [
        {
            "id": "q-1",
            "sentences": [
                {
                    "sentence": "Files stay readable for 3 years [1].",
                    "missing": ["quantity: 3 years"],
                }
            ],
        }
    ]
