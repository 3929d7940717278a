"""Time to the first streamed token and to the whole answer, with the local models.

Usage: python bench/bench_stream.py CORPUS_DIR [--answered N] [--limit N]
       python bench/bench_stream.py docs --readme

Uses the same index as bench_answer.py (.candor/bench/answer, built once from the
corpus), then asks the dev set's factual and vague questions through the same
events POST /ask/stream sends, until N (default 10) have been answered. With
--readme it asks the README's three questions instead (the third is declined), on
an index of its own (.candor/bench/stream-readme, built once from CORPUS_DIR: give
it `docs`). The models are loaded before the clock starts, as a warm `candor serve`
has them. For each answered question it records the seconds from the request to
its first `token` event and to `done`, and prints each step's milliseconds and the
prompt tokens the model evaluated. Then first_token_p50_s, done_p50_s and their ratio.
Declined questions stream no answer and are not counted. Run it on a quiet
machine: another busy process slows a small model many times over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from candor.deps import Deps
from candor.factory import build_deps
from candor.graph import runner
from candor.ingest.files import iter_paths
from candor.ingest.pipeline import ingest
from candor.results import AskResult, Done
from candor.service import prepare
from candor.settings import Settings
from candor.warmup import warm

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "data/eval/git-doc-questions.jsonl"
# The questions the README shows `candor ask` answering on the bundled docs.
README_QUESTIONS = (
    "How do I deploy candor to AWS?",
    "Which setting changes how many passages are retrieved?",
    "What is the capital of France?",
)


async def timed(deps: Deps, question: str) -> tuple[float | None, float, AskResult]:
    """(seconds to the first token or None, seconds to done, the result)."""
    started = time.perf_counter()
    first: float | None = None
    prepared = await prepare(deps, question)
    async for event in prepared.events():
        if isinstance(event, runner.TokenEvent) and first is None:
            first = time.perf_counter() - started
        elif isinstance(event, Done):
            return first, time.perf_counter() - started, event.result
    raise AssertionError("unreachable: events() ends with Done or raises")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--answered", type=int, default=10, help="answered questions to time")
    parser.add_argument("--limit", type=int, default=24, help="questions to try at most")
    parser.add_argument("--readme", action="store_true", help="the README's questions")
    args = parser.parse_args()

    data_dir = ROOT / (".candor/bench/stream-readme" if args.readme else ".candor/bench/answer")
    # No answer cache: a second run must measure the model, not the cache.
    settings = Settings(data_dir=data_dir, history_turns=0, cache_enabled=False)
    deps = build_deps(settings)
    if deps.index.count() == 0:
        started = time.perf_counter()
        report = ingest(iter_paths([args.corpus]), embedder=deps.embedder, index=deps.index)
        print(f"indexed {report.chunks} chunks in {time.perf_counter() - started:.0f} s")

    warm(deps)
    rows: list[dict[str, str]]
    if args.readme:
        rows = [{"id": f"readme-{n}", "question": q} for n, q in enumerate(README_QUESTIONS, 1)]
    else:
        rows = [json.loads(line) for line in args.questions.read_text().splitlines() if line]
        rows = [r for r in rows if r["kind"] in ("factual", "vague")][: args.limit]
    firsts: list[float] = []
    dones: list[float] = []
    asked = 0
    for row in rows:
        if len(dones) >= args.answered:
            break
        asked += 1
        first, done, result = asyncio.run(timed(deps, row["question"]))
        shown = f"{first:5.1f} s" if first is not None else "    -  "
        print(f"{row['id']} {result.decision:9} first_token={shown} done={done:5.1f} s")
        steps = " ".join(f"{s.node}={s.ms / 1000:.2f}s/{s.tokens_evaluated}t" for s in result.trace)
        print(f"    {steps}")
        if result.decision == "answered" and first is not None:
            firsts.append(first)
            dones.append(done)
    print(f"questions={asked} answered={len(dones)}")
    if dones:
        first_p50, done_p50 = statistics.median(firsts), statistics.median(dones)
        print(f"first_token_p50_s={first_p50:.2f}")
        print(f"done_p50_s={done_p50:.2f}")
        print(f"first_token_over_done={first_p50 / done_p50:.2f}")


if __name__ == "__main__":
    main()
