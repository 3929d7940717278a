"""`python -m candor.evaluation.grade_replay`: grade prompts judged on a run's own passages.

An agent run takes most of an hour on the local model, and a different grade
changes everything after it (rewrites, passages, answers), so two runs differ
in more than the grade. This replays only the grade: every model grade in a
run's traces (`candor eval` keeps them beside its report, in state.sqlite3) is
asked again, of the same passages and question, with each variant prompt, and
each verdict is placed in the grading confusion matrix
(candor.evaluation.grading) by the same answer-context test. The `recorded`
row is what the run's grade said. On the dev run of 2026-12-01 every variant
but `shipped` said answerable to 4 or 5 of the 5 unanswerable questions' grades
(results/2026-12-01-grade-replay), so the strict grade stays. Usage:

    python -m candor.evaluation.grade_replay --traces RUN/state.sqlite3 \
        --index INDEX.sqlite3 --questions FILE [--variants a,b] [--out F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from candor.evaluation.grading import GradeOutcome, confusion, context_of
from candor.evaluation.questions import Question, load_questions
from candor.graph import limits, prompts
from candor.graph.schemas import Grade
from candor.ports import ChatModel, VectorIndex
from candor.traces import Trace, traces_since
from candor.types import Hit, Message

PLAIN_GRADE = (
    "GRADE: decide whether the passages say what the question asks. Answerable is true when "
    "a passage states the answer, in its own words, a list or a table row. Answerable is "
    "false when the passages are about something else, or when the question names a "
    "command, option, setting or version that no passage mentions.\n"
)
_STRICT_GRADE = prompts.PASSAGES_SYSTEM[
    prompts.PASSAGES_SYSTEM.index("GRADE:") : prompts.PASSAGES_SYSTEM.index("ANSWER:")
]

OWN_SYSTEM = (
    "You check whether numbered passages from a documentation site answer a question. "
    "Each passage is between <passage N> and </passage N>; the question is between "
    "<question> and </question>. "
    + prompts._data_rule("passage", "question")
    + " Answerable is true when a passage states the answer, in its own words, a list or "
    "a table row. Answerable is false when the passages are about something else, or when "
    "the question names a command, option, setting or version that no passage mentions."
)


class CitedGrade(BaseModel):
    """The passage that holds the answer first (0: none), then the verdict."""

    passage: int
    answerable: bool


def _grade_with(
    passages_text: str, question: str, *, system: str | None = None, task: str | None = None
) -> list[Message]:
    """The shipped grade prompt with its system turn or its task line replaced."""
    system_turn, user_turn = prompts.grade(passages_text, question)
    content = user_turn["content"]
    if task is not None:
        content = content.removesuffix(prompts.GRADE_TASK) + task
    return [
        {"role": "system", "content": system or system_turn["content"]},
        {"role": "user", "content": content},
    ]


def shipped(passages_text: str, question: str) -> list[Message]:
    return prompts.grade(passages_text, question)


def plain_shared(passages_text: str, question: str) -> list[Message]:
    """The shared system prompt with a plainer GRADE paragraph: llama.cpp's prefix reuse stays."""
    system = prompts.PASSAGES_SYSTEM.replace(_STRICT_GRADE, PLAIN_GRADE)
    return _grade_with(passages_text, question, system=system)


def own_system(passages_text: str, question: str) -> list[Message]:
    """A system prompt of the grade's own: generate then evaluates the passages again."""
    return _grade_with(
        passages_text, question, system=OWN_SYSTEM, task="Does a passage answer the question?"
    )


def cite_first(passages_text: str, question: str) -> list[Message]:
    """The shipped prompt, but the verdict must follow the number of the passage that holds it."""
    task = (
        "Task: GRADE. Give the number of the passage that answers the question (0 if none), "
        "then whether the question can be answered from the passages above."
    )
    return _grade_with(passages_text, question, task=task)


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[str, str], list[Message]]
    schema: type[BaseModel] = Grade


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("shipped", shipped),
        Variant("plain_shared", plain_shared),
        Variant("own_system", own_system),
        Variant("cite_first", cite_first, CitedGrade),
    )
}


@dataclass(frozen=True)
class Replayed:
    """One model grade of a run: what it judged, its answer context, and what it said."""

    question: Question
    passages: tuple[Hit, ...]
    context: str  # one of candor.evaluation.grading.CONTEXTS
    recorded: bool


def model_grades(
    traces: Sequence[Trace],
    index: VectorIndex,
    questions: Sequence[Question],
    *,
    passage_chars: int,
) -> list[Replayed]:
    """Every grade the model made in a run's traces, with the passages it judged."""
    by_text = {q.question: q for q in questions}
    found: list[Replayed] = []
    for trace in traces:
        question = by_text.get(trace.question or "")
        if question is None:
            continue
        for grade in trace.grades:
            if grade.by != "model":
                continue
            chunks = {c.id: c for c in index.fetch(grade.passage_ids)}
            hits = tuple(Hit(chunks[i], 0.0) for i in grade.passage_ids if i in chunks)
            context = context_of(
                hits,
                question.answer_keywords,
                answerable_kind=question.answerable,
                passage_chars=passage_chars,
            )
            found.append(Replayed(question, hits, context, grade.answerable))
    return found


async def replay(
    chat: ChatModel, items: Sequence[Replayed], variant: Variant, passage_chars: int
) -> tuple[list[GradeOutcome], float]:
    outcomes: list[GradeOutcome] = []
    started = time.perf_counter()
    for item in items:
        text = prompts.format_passages(item.passages, passage_chars)
        verdict = await chat.structured(
            variant.build(text, item.question.question),
            variant.schema,
            max_tokens=limits.STRUCTURED_MAX_TOKENS,
        )
        answerable = bool(verdict.value.model_dump()["answerable"])
        outcomes.append(GradeOutcome(answerable, "model", item.context))
        sys.stderr.write(f"{variant.name} {item.question.id} {answerable}\n")
    return outcomes, time.perf_counter() - started


def row(name: str, outcomes: Sequence[GradeOutcome], seconds: float | None) -> dict[str, Any]:
    matrix = confusion(outcomes)["model"]
    return {
        "variant": name,
        "grades": len(outcomes),
        "matrix": matrix,
        "seconds_per_grade": round(seconds / len(outcomes), 1) if seconds and outcomes else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    from candor.backends.sqlite_index import SqliteVectorIndex
    from candor.backends.sqlite_state import SqliteStateStore
    from candor.factory import build_chat
    from candor.settings import Settings

    parser = argparse.ArgumentParser(prog="python -m candor.evaluation.grade_replay")
    parser.add_argument("--traces", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")

    settings = Settings()
    questions = load_questions(args.questions)
    with sqlite3.connect(f"file:{args.index}?mode=ro", uri=True) as db:
        dimensions = int(
            db.execute("SELECT value FROM meta WHERE key = 'dimensions'").fetchone()[0]
        )
    traces = traces_since(SqliteStateStore(args.traces), settings.trace_ttl_days)
    with SqliteVectorIndex(args.index, dimensions) as index:
        items = model_grades(traces, index, questions, passage_chars=settings.passage_chars)
    recorded = [GradeOutcome(i.recorded, "model", i.context) for i in items]
    rows = [row("recorded", recorded, None)]
    chat = build_chat(settings)
    for name in args.variants.split(","):
        outcomes, seconds = asyncio.run(replay(chat, items, VARIANTS[name], settings.passage_chars))
        rows.append(row(name, outcomes, seconds))
        sys.stderr.write(json.dumps(rows[-1]) + "\n")
    report = {"traces": str(args.traces), "grades": len(items), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
