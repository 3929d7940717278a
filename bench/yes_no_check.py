"""The yes/no check (candor.graph.yes_no) measured with the local model.

Usage: python bench/yes_no_check.py [--cases bench/yes_no_cases.jsonl] [EVAL_OUT_DIR ...]

Two measurements, each judge call timed and its prompt tokens evaluated counted:

- The cases written for it (bench/yes_no_cases.jsonl, a made-up manual): each a
  passage, a yes/no question, an opening that agrees with the passage and one that
  does not. How often the check keeps the right opening and catches the wrong one.
- The answers of `candor eval` runs (each EVAL_OUT_DIR with report.json and the
  run's traces in state.sqlite3): every answered question that asks for a yes or a
  no and whose answer opens with one, judged against the excerpts its answer
  prompt showed. Read each opening against its page to tell right from wrong.

As in the graph, the same excerpts and question were read just before (the grade
prompt is judged first, untimed), so the check's call evaluates only its task.
Seconds were measured on a shared machine: an upper bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from candor.factory import build_chat
from candor.graph import prompts, yes_no
from candor.ports import ChatModel
from candor.settings import Settings
from candor.types import Chunk, Hit


async def _judged(
    chat: ChatModel, passages_text: str, question: str, answer: str
) -> dict[str, Any]:
    await chat.judge(
        prompts.grade(passages_text, question), prompts.GRADE_OPTIONS
    )  # warm, as the graph
    first = yes_no.opening(answer) or answer
    started = time.perf_counter()
    verdict = await chat.judge(
        prompts.yes_no(passages_text, question, first), prompts.GRADE_OPTIONS
    )
    seconds = time.perf_counter() - started
    return {
        "opening": first,
        "agree": round(verdict.probability(prompts.YES), 4),
        "mass": round(verdict.mass, 4),
        "kept": not (
            verdict.mass >= yes_no.MIN_OPTION_MASS
            and verdict.probability(prompts.YES) < yes_no.AGREE_THRESHOLD
        ),
        "seconds": round(seconds, 2),
        "tokens_in": verdict.usage.tokens_in,
        "tokens_evaluated": verdict.usage.tokens_evaluated,
    }


def _line(judged: dict[str, Any]) -> str:
    return (
        f"agree={judged['agree']:.3f} kept={judged['kept']} {judged['seconds']}s "
        f"{judged['tokens_evaluated']}/{judged['tokens_in']} tokens"
    )


def _case_passages(case: dict[str, str]) -> str:
    title, _, heading = case["label"].partition(" - ")
    chunk = Chunk(case["id"], case["passage"], f"{case['id']}.html", title, heading)
    return prompts.format_passages([Hit(chunk, 0.0)], 2000)


def _eval_answers(folder: Path) -> list[dict[str, Any]]:
    """Answered yes/no questions of a run whose answers open with yes or no, with the
    excerpts their answer prompt showed."""
    report = json.loads((folder / "report.json").read_text())
    answered = {
        q["id"]: q for q in report.get("agent_questions", []) if q["decision"] == "answered"
    }
    db = sqlite3.connect(folder / "state.sqlite3")
    bodies = [json.loads(row[0]) for row in db.execute("SELECT body FROM traces")]
    db.close()
    by_answer = {
        (b.get("answer") or "").strip(): b for b in bodies if b.get("decision") == "answered"
    }
    found = []
    for qid, record in answered.items():
        trace = by_answer.get(record["answer"].strip())
        question = (trace or {}).get("question") or ""
        if (
            trace is None
            or not yes_no.asks_yes_or_no(question)
            or yes_no.opening(record["answer"]) is None
        ):
            continue
        user = next(m["content"] for m in trace["prompt"] if m["role"] == "user")
        passages_text = user[: user.index("\n\n<question>\n")]
        found.append(
            {
                "id": qid,
                "question": question,
                "answer": record["answer"],
                "passages": passages_text,
                "correct": record.get("answer_correct"),
            }
        )
    return found


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", type=Path, default=Path(__file__).with_name("yes_no_cases.jsonl")
    )
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    parser.add_argument("runs", nargs="*", type=Path)
    args = parser.parse_args()
    chat = build_chat(Settings())
    results: dict[str, Any] = {"cases": [], "answers": []}
    for line in args.cases.read_text().splitlines():
        case = json.loads(line)
        passages_text = _case_passages(case)
        for side in ("right", "wrong"):
            judged = await _judged(chat, passages_text, case["question"], case[side])
            results["cases"].append({"id": case["id"], "side": side, **judged})
            print(f"{case['id']} {side}: {_line(judged)}", flush=True)
    for folder in args.runs:
        for item in _eval_answers(folder):
            judged = await _judged(chat, item["passages"], item["question"], item["answer"])
            results["answers"].append(
                {"run": str(folder), "id": item["id"], "correct": item["correct"], **judged}
            )
            print(
                f"{folder} {item['id']}: {_line(judged)} :: {judged['opening'][:160]}", flush=True
            )
    cases = results["cases"]
    right = [c for c in cases if c["side"] == "right"]
    wrong = [c for c in cases if c["side"] == "wrong"]
    calls = cases + results["answers"]
    summary = {
        "right_kept": f"{sum(c['kept'] for c in right)}/{len(right)}",
        "wrong_caught": f"{sum(not c['kept'] for c in wrong)}/{len(wrong)}",
        "eval_answers_judged": len(results["answers"]),
        "eval_answers_declined": sum(not a["kept"] for a in results["answers"]),
        "seconds_mean": round(sum(c["seconds"] for c in calls) / max(len(calls), 1), 2),
        "tokens_evaluated_mean": round(
            sum(c["tokens_evaluated"] for c in calls) / max(len(calls), 1), 1
        ),
    }
    results["summary"] = summary
    print(json.dumps(summary))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
