"""Prompt tokens the local model evaluates per answered question, for any candor release.

Usage: python bench/bench_evaluated.py CORPUS_DIR QUESTIONS.jsonl [--data DIR] [--limit N]
       PYTHONPATH=OLD/layers/candor python bench/bench_evaluated.py ...   (an older release)

The count is taken inside llama-cpp-python, not by candor: every decode of a
position before the end of the prompt being completed (`Llama.eval` during
`Llama.generate`), and every decode outside a completion (a saved system prompt, a
grade read from the next token's probabilities), is a prompt token evaluated. So a
release from before candor counted them itself (2026-12-02) is measured the same
way as this one, and on this one the figure can be checked against the trace's own
`tokens_evaluated`.

It uses only the command line every release has: `candor ingest` (once, into
--data, by the release being measured) and `candor ask --json`, all in one process
as a server answers: the model stays loaded between questions and its cache holds
what the previous call left. One question is asked first to warm up and is not
counted. The answer cache is off and each question starts a new conversation.
Prints one line per question and then evaluated_per_answered (mean and p50),
sent_per_answered, and answered. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import llama_cpp


class _Count:
    """Prompt tokens evaluated since the last reset; `end` is the completion's prompt length."""

    evaluated = 0
    end: int | None = None


_original_eval = llama_cpp.Llama.eval
_original_generate = llama_cpp.Llama.generate


def _counting_eval(self: llama_cpp.Llama, tokens: Sequence[int]) -> None:
    start = self.n_tokens
    _original_eval(self, tokens)
    end = start + len(tokens) if _Count.end is None else _Count.end
    _Count.evaluated += max(0, min(start + len(tokens), end) - start)


def _counting_generate(
    self: llama_cpp.Llama, tokens: Sequence[int], **kwargs: Any
) -> Iterator[int]:
    _Count.end = len(tokens)
    try:
        yield from _original_generate(self, tokens, **kwargs)
    finally:
        _Count.end = None


def ask(question: str) -> dict[str, Any]:
    from candor.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["ask", "--json", question])
    if code != 0:
        raise SystemExit(f"candor ask exited with {code} on {question!r}")
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("questions", type=Path)
    parser.add_argument("--data", type=Path, default=Path(".candor/bench/evaluated"))
    parser.add_argument("--limit", type=int, default=0, help="the first N answerable questions")
    args = parser.parse_args()
    os.environ |= {
        "CANDOR_DATA_DIR": str(args.data),
        "CANDOR_CACHE_ENABLED": "false",
        "CANDOR_HISTORY_TURNS": "0",
    }
    from candor.cli import main as candor

    if not (args.data / "indexes").exists() and candor(["ingest", str(args.corpus)]) != 0:
        raise SystemExit("candor ingest failed")
    llama_cpp.Llama.eval = _counting_eval  # type: ignore[method-assign]
    llama_cpp.Llama.generate = _counting_generate  # type: ignore[method-assign,assignment]

    rows = [json.loads(line) for line in args.questions.read_text().splitlines() if line]
    rows = [r for r in rows if r["kind"] in ("factual", "multi_hop", "vague")]
    rows = rows[: args.limit] if args.limit else rows
    ask("What does this site's documentation cover?")  # warm-up, not counted
    evaluated: list[int] = []
    sent: list[int] = []
    for row in rows:
        _Count.evaluated = 0
        result = ask(row["question"])
        steps = result["trace"]
        own = sum(step.get("tokens_evaluated", 0) for step in steps)
        print(
            f"{row['id']} {result['decision']:9s} evaluated={_Count.evaluated:5d} "
            f"sent={sum(step['tokens_in'] for step in steps):5d} trace_evaluated={own}",
            flush=True,
        )
        if result["decision"] == "answered":
            evaluated.append(_Count.evaluated)
            sent.append(sum(step["tokens_in"] for step in steps))
    if evaluated:
        print(f"evaluated_per_answered_mean={statistics.mean(evaluated):.0f}")
        print(f"evaluated_per_answered_p50={statistics.median(evaluated):.0f}")
        print(f"sent_per_answered_mean={statistics.mean(sent):.0f}")
    print(f"answered={len(evaluated)} of {len(rows)}")


if __name__ == "__main__":
    main()
