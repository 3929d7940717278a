"""Answer context by budget: what the model is shown at each budget, beside the pool
it is packed from and beside the `plain` reference at the same characters.

*Answer context* is whether the excerpts a model is shown hold every expected
keyword of a question: no model's answer can hold a fact its excerpts lack. Packing
(candor.packing) chooses the excerpts from the top `pack_candidates` candidates of
the ranking, so those candidates shown whole are its *pool ceiling*: packing can
reach it, never pass it. Every `candor eval` report gives both at each chat
backend's default budget (settings.CONTEXT_BUDGETS), and `--context-chars` adds a
sweep of budgets, each with the prompt tokens of the two calls that read the
excerpts (the grade and the answer) counted as OpenAI counts them, and what those
calls cost at the hosted chat model's rates.

A sweep's budget of C characters shows whole passages (excerpts of up to
chunk_chars, 800 by default, where the local default cuts them at 600) and at most
max(6, C / 600) of them (at most `pack_candidates`): 6 at 1,800 and 3,600, 10 at
6,000, 15 at 9,000. On the Flask set, 6,000 characters in excerpts of 600 held every
keyword for 0.909 of the questions, in whole passages 0.955, and 3,600 in 6 excerpts
less than 1,800 did (0.773 against 0.818: six full excerpts leave no room for a
seventh page), so the cut and the count grow with the budget. The candidates are
scored once per question and packed at every budget, so a sweep costs one search and
one scoring a question, whatever the number of budgets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from candor import packing, retrieval
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.evaluation import paired, plain
from candor.evaluation.questions import Question
from candor.evaluation.retrieval_metrics import has_all_keywords
from candor.evaluation.tokens import Counter
from candor.graph import prompts
from candor.ports import Embedder, VectorIndex
from candor.progress import progress as show_progress
from candor.settings import CONTEXT_BUDGETS, Settings
from candor.types import Hit

# The budgets `candor eval --context-chars` is asked for in docs/quality.md.
SWEEP = (1800, 3600, 6000, 9000)
LOCAL = CONTEXT_BUDGETS["local"]
# The fewest excerpts a budget shows: the local default's.
MIN_EXCERPTS = LOCAL.excerpts
CEILING = "ceiling"


@dataclass(frozen=True, slots=True)
class Budget:
    chars: int
    excerpts: int
    excerpt_chars: int
    sentences: bool = True  # packed sentences; False: the first passages whole
    name: str = ""  # "local" or "openai" for a backend's default; "" for a sweep's

    @property
    def key(self) -> str:
        shape = "sentences" if self.sentences else "whole"
        return f"{self.chars}x{self.excerpts}x{self.excerpt_chars}-{shape}"


def sweep_budget(chars: int, settings: Settings, *, sentences: bool = True) -> Budget:
    """The budget of `chars` characters: excerpts up to a whole passage, as many as
    fill it at the local default's cut, 6 at the fewest."""
    excerpts = max(MIN_EXCERPTS, math.ceil(chars / LOCAL.excerpt_chars))
    whole = max(settings.chunk_chars, LOCAL.excerpt_chars)
    return Budget(chars, min(excerpts, settings.pack_candidates), whole, sentences)


def budgets_for(settings: Settings, sweep: Sequence[int] = ()) -> list[Budget]:
    """Each chat backend's default budget, then the sweep's that are not one of them."""
    found: list[Budget] = []
    for name, default in CONTEXT_BUDGETS.items():
        excerpts = min(default.excerpts, settings.pack_candidates)
        budget = Budget(default.chars, excerpts, default.excerpt_chars, default.sentences, name)
        same = next((i for i, other in enumerate(found) if other.key == budget.key), None)
        if same is None:
            found.append(budget)
        else:  # two backends with one budget: one row, named for both
            named = f"{found[same].name}, {name}"
            found[same] = Budget(
                budget.chars, budget.excerpts, budget.excerpt_chars, budget.sentences, named
            )
    for chars in sweep:
        for sentences in (True, False):
            budget = sweep_budget(chars, settings, sentences=sentences)
            if all(budget.key != other.key for other in found):
                found.append(budget)
    return sorted(found, key=lambda b: (b.chars, b.excerpts, b.excerpt_chars, not b.sentences))


@dataclass(slots=True)
class Measured:
    """Per question: answer context at each budget (by Budget.key, and CEILING), for
    candor and for `plain`, and the prompt tokens of the calls that read the excerpts."""

    candor: dict[str, dict[str, bool]]
    plain: dict[str, dict[str, bool]]
    tokens: dict[str, dict[str, int]]
    shown_chars: dict[str, dict[str, int]]


def measure(
    questions: Sequence[Question],
    budgets: Sequence[Budget],
    *,
    settings: Settings,
    embedder: Embedder,
    index: VectorIndex,
    plain_index: SqliteVectorIndex | None,
    count_tokens: Counter | None,
    bar: bool = False,
) -> Measured:
    """Answer context at every budget for each question with expected keywords."""
    targets = [q for q in questions if q.answer_keywords]
    keys = [budget.key for budget in budgets]
    measured = Measured(
        candor={key: {} for key in [*keys, CEILING]},
        plain={key: {} for key in [*keys, CEILING]},
        tokens={key: {} for key in keys},
        shown_chars={key: {} for key in keys},
    )
    most_chars = max((budget.chars for budget in budgets), default=0)
    ticker = show_progress(len(targets), "context budgets", "question", enabled=bar)
    try:
        for question in targets:
            _measure_one(
                question,
                budgets,
                measured,
                settings=settings,
                embedder=embedder,
                index=index,
                plain_index=plain_index,
                plain_top_k=max(settings.pack_candidates, most_chars // 200 + 1),
                count_tokens=count_tokens,
            )
            ticker.update(1)
    finally:
        ticker.close()
    return measured


def _measure_one(
    question: Question,
    budgets: Sequence[Budget],
    measured: Measured,
    *,
    settings: Settings,
    embedder: Embedder,
    index: VectorIndex,
    plain_index: SqliteVectorIndex | None,
    plain_top_k: int,
    count_tokens: Counter | None,
) -> None:
    asked, keywords, qid = question.question, question.answer_keywords, question.id
    vector = embedder.embed([asked])[0]
    pool = retrieval.pool(
        asked,
        settings,
        embedder=embedder,
        index=index,
        reranker=None,
        strategy="hybrid",
        vector=vector,
    )
    scored = packing.score_units(asked, pool, embedder, vector)
    measured.candor[CEILING][qid] = _holds(pool, keywords)
    for budget in budgets:
        packed = (
            packing.pack(
                asked,
                pool,
                embedder,
                budget=budget.chars,
                max_excerpts=budget.excerpts,
                excerpt_chars=budget.excerpt_chars,
                question_vector=vector,
                scored=scored,
            )
            if budget.sentences
            else retrieval.whole_passages(
                pool, budget=budget.chars, excerpts=budget.excerpts, chars=budget.excerpt_chars
            )
        )
        text = prompts.format_passages(packed, budget.excerpt_chars)
        measured.candor[budget.key][qid] = has_all_keywords(text, keywords)
        measured.shown_chars[budget.key][qid] = sum(len(hit.chunk.text) for hit in packed)
        if count_tokens is not None:
            measured.tokens[budget.key][qid] = count_tokens(
                prompts.grade(text, asked)
            ) + count_tokens(prompts.answer(text, asked))
    if plain_index is None:
        return
    ranked = plain.search(
        asked,
        embedder=embedder,
        index=plain_index,
        top_k=plain_top_k,
        candidates=max(settings.candidates, plain_top_k),
    )
    measured.plain[CEILING][qid] = _holds(ranked[: settings.pack_candidates], keywords)
    for budget in budgets:
        shown = retrieval.within(ranked, budget=budget.chars, passage_chars=budget.excerpt_chars)
        measured.plain[budget.key][qid] = has_all_keywords(
            prompts.format_passages(shown, budget.excerpt_chars), keywords
        )


def _holds(candidates: Sequence[Hit], keywords: Sequence[str]) -> bool:
    """Whether the candidates, shown whole, hold every keyword."""
    return has_all_keywords("\n\n".join(hit.chunk.text for hit in candidates), keywords)


def _share(values: Mapping[str, bool]) -> float | None:
    return round(sum(values.values()) / len(values), 4) if values else None


def _mean(values: Mapping[str, int]) -> float | None:
    return round(sum(values.values()) / len(values), 1) if values else None


def summarise(budgets: Sequence[Budget], measured: Measured, settings: Settings) -> dict[str, Any]:
    """The report's `context_budgets` section: one row per budget, the pool ceiling,
    and per budget candor against `plain` and against the ceiling, paired per question."""
    price = settings.prices.get(settings.chat_model)
    ceiling = _share(measured.candor[CEILING])
    rows: list[dict[str, Any]] = []
    for budget in budgets:
        context = measured.candor[budget.key]
        share = _share(context)
        tokens = _mean(measured.tokens[budget.key])
        rows.append(
            {
                "chars": budget.chars,
                "excerpts": budget.excerpts,
                "excerpt_chars": budget.excerpt_chars,
                "shown": "sentences" if budget.sentences else "whole passages",
                "default_for": budget.name or None,
                "n": len(context),
                "answer_context": share,
                "plain_answer_context": _share(measured.plain[budget.key]),
                "share_of_ceiling": (
                    round(share / ceiling, 4) if share is not None and ceiling else None
                ),
                "chars_shown": _mean(measured.shown_chars[budget.key]),
                "prompt_tokens": tokens,
                # The grade's one token and the answer at its cap: an upper bound.
                "usd_per_question": (
                    round(price.cost(round(tokens), settings.answer_max_tokens + 1), 7)
                    if price is not None and tokens is not None
                    else None
                ),
                "versus_plain": _paired(measured.plain[budget.key], context),
                "versus_ceiling": _paired(measured.candor[CEILING], context),
            }
        )
    return {
        "pool_candidates": settings.pack_candidates,
        "ceiling": ceiling,
        "plain_ceiling": _share(measured.plain[CEILING]),
        "ceiling_n": len(measured.candor[CEILING]),
        "price_model": settings.chat_model,
        "budgets": rows,
    }


def _paired(before: Mapping[str, bool], after: Mapping[str, bool]) -> dict[str, Any] | None:
    if not before or not after:
        return None
    return paired.paired(before, after, higher_is_better=True).to_json()


def per_question(measured: Measured) -> dict[str, Any]:
    """The report's `context_questions`: each question's answer context per budget."""
    return {"candor": measured.candor, "plain": measured.plain, "tokens": measured.tokens}


def _interval(found: Mapping[str, Any] | None) -> str:
    if not found or found.get("difference") is None:
        return "–"
    return (
        f"{found['difference']:+.3f} [{found['low']:+.3f}, {found['high']:+.3f}] "
        f"({found['better']} better, {found['worse']} worse)"
    )


def markdown(section: Mapping[str, Any] | None) -> list[str]:
    """The report.md lines of the `context_budgets` section."""
    if not section or not section.get("ceiling_n"):
        return []

    def cell(value: Any, digits: int = 3) -> str:
        if value is None:
            return "–"
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    lines = [
        "",
        "## Answer context by budget",
        "",
        "Whether the excerpts shown hold every expected keyword, for candor's packed "
        "context and for `plain`'s first passages at the same characters, on the "
        f"{section['ceiling_n']} questions with keywords. *Pool ceiling*: the top "
        f"{section['pool_candidates']} candidates packing chooses from, shown whole: "
        f"candor {cell(section['ceiling'])}, plain {cell(section['plain_ceiling'])}. "
        "Prompt tokens: the grade's and the answer's prompts together, counted with "
        f"`{section['price_model']}`'s tokenizer; price: those tokens at its input rate "
        "and the answer at its token cap at its output rate (an upper bound on those calls).",
        "",
        "| characters | excerpts | excerpt at most | shown | default for | answer context "
        "| plain | share of ceiling | characters shown | prompt tokens | $ per question "
        "| candor − plain [95%] |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in section["budgets"]:
        cells = [
            f"{row['chars']:,}",
            str(row["excerpts"]),
            str(row.get("excerpt_chars", "–")),
            str(row.get("shown", "sentences")),
            row["default_for"] or "",
            cell(row["answer_context"]),
            cell(row["plain_answer_context"]),
            cell(row["share_of_ceiling"]),
            cell(row["chars_shown"], 0),
            cell(row["prompt_tokens"], 0),
            cell(row["usd_per_question"], 6),
            _interval(row["versus_plain"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
