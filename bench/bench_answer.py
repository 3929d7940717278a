"""Seconds per answered question with the local models, on the dev corpus.

Usage: python bench/bench_answer.py CORPUS_DIR [--limit N]

Builds (once) an index of the corpus under .candor/bench/answer, then asks the
dev set's factual and vague questions through the full graph. Prints one line per
question (with each model-calling step's prompt tokens, sent/evaluated) and then
answered_p50_s, answered_p95_s, model_calls_per_answered and the prompt tokens sent
and evaluated per answered question. The questions run in one process, as a server
answers them: the first pays for the system prompts the later ones restore.
Run it on a quiet machine: another busy process slows a small model many times over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from candor.factory import build_deps
from candor.ingest.files import iter_paths
from candor.ingest.pipeline import ingest
from candor.service import ask
from candor.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "data/eval/git-doc-questions.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--limit", type=int, default=12)
    args = parser.parse_args()

    # No answer cache: a second run must measure the model, not the cache.
    settings = Settings(
        data_dir=ROOT / ".candor/bench/answer", history_turns=0, cache_enabled=False
    )
    deps = build_deps(settings)
    if deps.index.count() == 0:
        started = time.perf_counter()
        report = ingest(iter_paths([args.corpus]), embedder=deps.embedder, index=deps.index)
        print(f"indexed {report.chunks} chunks in {time.perf_counter() - started:.0f} s")

    rows = [json.loads(line) for line in args.questions.read_text().splitlines() if line]
    rows = [r for r in rows if r["kind"] in ("factual", "vague")][: args.limit]
    answered: list[float] = []
    calls: list[int] = []
    tokens: list[tuple[int, int, int]] = []
    for row in rows:
        started = time.perf_counter()
        result = asyncio.run(ask(deps, row["question"]))
        seconds = time.perf_counter() - started
        n_calls = sum(1 for step in result.trace if step.tokens_in)
        prompts = " ".join(
            f"{step.node}={step.tokens_in}/{step.tokens_evaluated}"
            for step in result.trace
            if step.tokens_in
        )
        print(
            f"{row['id']} {result.decision:9} {seconds:5.1f} s calls={n_calls} "
            f"attempts={result.attempts} prompt_tokens={prompts} "
            f"cites={[c.source for c in result.citations]}"
        )
        if result.decision == "answered":
            answered.append(seconds)
            calls.append(n_calls)
            tokens.append(
                (
                    sum(step.tokens_in for step in result.trace),
                    sum(step.tokens_out for step in result.trace),
                    sum(step.tokens_evaluated for step in result.trace),
                )
            )
    print(f"questions={len(rows)} answered={len(answered)}")
    if answered:
        answered.sort()
        print(f"answered_p50_s={statistics.median(answered):.2f}")
        print(f"answered_p95_s={answered[min(len(answered) - 1, int(len(answered) * 0.95))]:.2f}")
        print(f"model_calls_per_answered={statistics.mean(calls):.2f}")
        tokens_in = statistics.mean(t[0] for t in tokens)
        tokens_out = statistics.mean(t[1] for t in tokens)
        print(f"tokens_in_per_answered={tokens_in:.0f}")
        print(f"tokens_evaluated_per_answered={statistics.mean(t[2] for t in tokens):.0f}")
        print(f"tokens_out_per_answered={tokens_out:.0f}")
        # What the same tokens would cost on the production default model (the
        # local model is free; OpenAI's tokenizer counts differ by a few percent).
        price = settings.price("gpt-4o-mini")
        usd = price.cost(round(tokens_in), round(tokens_out))
        print(f"usd_per_answered_at_gpt_4o_mini={usd:.6f}")


if __name__ == "__main__":
    main()
