"""`candor answers measure`: how often the curated match serves a paraphrase, and a near miss.

A set is JSON lines, one curated answer each (data/eval/curated): its question,
answer and URL, three paraphrases that must be served it, and three near misses
that must not (`other_question`: same topic, another question; `case_flipped`: an
option's case flipped; `other_number`: another version or number). Every answer is
added through the real path (candor.curated.library, into a store and a curated
index in a temporary folder), and every probe is looked up through the real path
(candor.curated.lookup), so the figures are those of a running candor with this
embedder.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from candor.curated import library, lookup
from candor.curated.library import Curation
from candor.curated.matching import MatchRule
from candor.ports import Embedder

NEAR_MISS_KINDS = ("other_question", "case_flipped", "other_number")


@dataclass(frozen=True, slots=True)
class Item:
    id: str
    question: str
    answer: str
    url: str | None
    paraphrases: tuple[str, ...]
    near_misses: tuple[tuple[str, str], ...]  # (kind, text)


def read_set(path: Path) -> list[Item]:
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        data: dict[str, Any] = json.loads(line)
        near = tuple((n["kind"], n["text"]) for n in data["near_misses"])
        unknown = {kind for kind, _ in near} - set(NEAR_MISS_KINDS)
        if unknown:
            raise ValueError(f"{path}:{number}: unknown near-miss kinds {sorted(unknown)}")
        items.append(
            Item(
                data["id"],
                data["question"],
                data["answer"],
                data.get("url"),
                tuple(data["paraphrases"]),
                near,
            )
        )
    return items


@dataclass
class Figures:
    """What one threshold served, over one set."""

    threshold: float
    items: int = 0
    paraphrases: int = 0
    paraphrases_served: int = 0  # with their own answer
    wrong_answer: int = 0  # a probe served another item's answer
    near_misses: Counter[str] = field(default_factory=Counter)
    near_misses_served: Counter[str] = field(default_factory=Counter)
    missed: list[str] = field(default_factory=list)
    served_near: list[str] = field(default_factory=list)

    @property
    def paraphrase_rate(self) -> float:
        return self.paraphrases_served / self.paraphrases if self.paraphrases else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "items": self.items,
            "paraphrases": self.paraphrases,
            "paraphrases_served": self.paraphrases_served,
            "paraphrase_rate": round(self.paraphrase_rate, 4),
            "wrong_answer": self.wrong_answer,
            "near_misses": sum(self.near_misses.values()),
            "near_misses_served": sum(self.near_misses_served.values()),
            "near_misses_by_kind": {
                kind: [self.near_misses_served[kind], self.near_misses[kind]]
                for kind in NEAR_MISS_KINDS
            },
            "missed_paraphrases": self.missed,
            "served_near_misses": self.served_near,
        }


def measure(items: Sequence[Item], embedder: Embedder, rules: Iterable[MatchRule]) -> list[Figures]:
    """Each rule's figures over `items`, every answer curated in a fresh store and index."""
    from candor.backends.sqlite_curated import SqliteCuratedAnswers
    from candor.backends.sqlite_index import SqliteVectorIndex

    with tempfile.TemporaryDirectory(prefix="candor-measure-") as folder:
        store = SqliteCuratedAnswers(Path(folder) / "state.sqlite3")
        index = SqliteVectorIndex(
            Path(folder) / "curated.sqlite3", embedder.dimensions, embedder=embedder.name
        )
        try:
            curation = Curation(store, index, "measure")
            ids = {
                library.add(curation, embedder, item.question, item.answer, url=item.url).id: item
                for item in items
            }
            owner = {item.id: answer_id for answer_id, item in ids.items()}
            return [_figures(items, curation, embedder, rule, owner) for rule in rules]
        finally:
            index.close()
            store.close()


def _figures(
    items: Sequence[Item],
    curation: Curation,
    embedder: Embedder,
    rule: MatchRule,
    owner: dict[str, str],
) -> Figures:
    figures = Figures(rule.threshold, items=len(items))
    for item in items:
        for text in item.paraphrases:
            figures.paraphrases += 1
            found = lookup.find(text, curation, embedder, rule)
            if found is not None and found.answer.id == owner[item.id]:
                figures.paraphrases_served += 1
            else:
                figures.missed.append(text)
                if found is not None:
                    figures.wrong_answer += 1
        for kind, text in item.near_misses:
            figures.near_misses[kind] += 1
            found = lookup.find(text, curation, embedder, rule)
            if found is not None:
                figures.near_misses_served[kind] += 1
                figures.served_near.append(text)
                if found.answer.id != owner[item.id]:
                    figures.wrong_answer += 1
    return figures


def to_markdown(path: Path, embedder: str, rows: Sequence[Figures], synonym: float) -> str:
    lines = [
        f"## {path.name} ({rows[0].items if rows else 0} curated answers), embedder {embedder}",
        "",
        f"Word synonym similarity {synonym}. Served: a paraphrase given its own answer; "
        "a near miss given any answer.",
        "",
        "| threshold | paraphrases served | near misses served "
        "(other question / case flipped / other number) | another item's answer |",
        "|---|---|---|---|",
    ]
    for f in rows:
        kinds = " / ".join(f"{f.near_misses_served[k]}/{f.near_misses[k]}" for k in NEAR_MISS_KINDS)
        lines.append(
            f"| {f.threshold:.2f} | {f.paraphrases_served}/{f.paraphrases} "
            f"({f.paraphrase_rate:.2f}) | {sum(f.near_misses_served.values())}/"
            f"{sum(f.near_misses.values())} ({kinds}) | {f.wrong_answer} |"
        )
    return "\n".join(lines) + "\n"
