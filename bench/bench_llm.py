"""Benchmark the local chat model: load, prompt evaluation, decoding, KV-prefix reuse.

Prints `name=value` lines. The answered-question figures replay the three calls of
one question (triage, grade over 4 passages, generate reusing the grade prefix) on
different questions and report p50/max wall seconds.

    python bench/bench_llm.py [--threads N] [--model PATH] [--questions N]
                              [--saved-system-prompts N] [--quiet-wait SECONDS]

Run on a quiet machine: another busy process on one of 2 cores slows llama.cpp
several-fold. Before each measured step the bench waits (up to --quiet-wait seconds)
for the CPUs to be at least 90% idle, and it prints `cpu_share_min`: the least share
of `threads` cores this process got during a measured step (1.00 = undisturbed).
Treat figures with a share well below 0.9 as contended.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from candor.backends.llama_chat import SAVED_SYSTEM_PROMPTS, CallTimings, LlamaChatModel
from candor.backends.model_files import default_model_path
from candor.settings import Settings
from candor.types import Message

PASSAGES = [
    "Backups. Every project on the Standard plan is backed up once a day at 02:00 UTC and "
    "the last fourteen daily copies are kept. The Business plan adds hourly snapshots that are "
    "kept for forty-eight hours. Backups cover the database and uploaded files but not build "
    "caches or logs. To restore, open the project settings, choose Backups, pick a copy and "
    "press Restore; the project is read-only while the restore runs, which usually takes two "
    "to ten minutes depending on size. A restore replaces the current data entirely, so "
    "download a fresh copy first if you might need anything written since the backup.",
    "Custom domains. You can point up to five domains at a project on the Standard plan and "
    "up to fifty on the Business plan. Add the domain under Settings, Domains, then create "
    "the CNAME record we show at your DNS provider. Certificates are issued automatically "
    "once the record resolves, normally within fifteen minutes, and renewed thirty days "
    "before they expire. Apex domains cannot use a CNAME at most providers: use the two A "
    "records listed on the same page instead. If issuance fails three times we stop "
    "retrying and email the project owners with the reason.",
    "Billing. Plans are billed monthly in advance on the day you subscribed. Usage above "
    "the plan's included bandwidth is charged at the end of the month at the rate shown on "
    "the pricing page. Invoices are emailed to the billing contact and can be downloaded as "
    "PDF from the Billing tab. Downgrading takes effect at the next billing date; upgrading "
    "takes effect at once and the difference is prorated by day. We do not refund partial "
    "months after a cancellation, but your data stays available for thirty days so that "
    "you can export it.",
    "Team access. Project owners can invite members by email from the Team tab. Members "
    "can deploy and read logs; only owners can change billing, delete the project or "
    "manage domains. An invitation expires after seven days and can be resent at any time. "
    "Single sign-on with SAML is available on the Business plan: upload your identity "
    "provider's metadata file under Team, Security, and map groups to roles. Removing a "
    "member revokes their access tokens immediately, though a deploy they already started "
    "will still finish.",
]

QUESTIONS = [
    "How long are daily backups kept on the Standard plan?",
    "Can I get a refund if I cancel halfway through the month?",
    "Who is allowed to manage custom domains?",
    "How soon is a certificate issued after I add a domain?",
    "What happens to running deploys when I remove a team member?",
]

TRIAGE_SYSTEM = (
    "You route messages for a website's help assistant. Decide what the user's message is: "
    '"question" if it asks for information the site documentation could answer, "greeting" '
    'for hello or thanks, "abuse" for insults or threats, "other" otherwise. Also say '
    "whether it needs the documentation. Answer with JSON only."
)
RAG_SYSTEM = (
    "You are the help assistant of a hosting service. You answer only from the numbered "
    "passages below, and cite them like [1]. If they do not contain the answer, say so."
)


class Triage(BaseModel):
    kind: Literal["question", "greeting", "abuse", "other"]
    needs_documents: bool


class Grade(BaseModel):
    relevant: list[int]
    answerable: bool


def rag_head(question: str) -> str:
    passages = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(PASSAGES, start=1))
    return f"Passages:\n\n{passages}\n\nQuestion: {question}\n\n"


def grade_messages(question: str) -> list[Message]:
    return [
        {"role": "system", "content": RAG_SYSTEM},
        {
            "role": "user",
            "content": rag_head(question) + "Task: list the numbers of the passages that help "
            "answer the question, and say whether they answer it. Answer with JSON.",
        },
    ]


def generate_messages(question: str) -> list[Message]:
    # Same tokens as the grade call up to the task line, so only the tail is evaluated.
    return [
        {"role": "system", "content": RAG_SYSTEM},
        {
            "role": "user",
            "content": rag_head(question) + "Task: answer the question in one paragraph "
            "of about 80 words, citing the passages you use.",
        },
    ]


def triage_messages(question: str) -> list[Message]:
    return [
        {"role": "system", "content": TRIAGE_SYSTEM},
        {"role": "user", "content": question},
    ]


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:9]]
    return sum(fields), fields[3] + fields[4]  # total, idle + iowait


def wait_quiet(max_seconds: float, *, idle_share: float = 0.9) -> bool:
    """Wait until the machine's CPUs are mostly idle for 2 s; False if they never were."""
    deadline = time.monotonic() + max_seconds
    while True:
        total, idle = _cpu_times()
        time.sleep(2)
        total2, idle2 = _cpu_times()
        if (idle2 - idle) >= idle_share * max(total2 - total, 1):
            return True
        if time.monotonic() > deadline:
            return False


class CpuShare:
    """The share of `threads` cores this process used between start() and stop()."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.shares: list[float] = []

    def start(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def stop(self) -> None:
        wall = time.perf_counter() - self._wall
        self.shares.append((time.process_time() - self._cpu) / (wall * self.threads))


def timings(model: LlamaChatModel) -> CallTimings:
    assert model.last_timings is not None
    return model.last_timings


async def cold_and_reused(
    model: LlamaChatModel, question: str, share: CpuShare
) -> dict[str, float]:
    """A cold grade call then a generate call sharing its prefix: the core speed figures."""
    await model.text(triage_messages("unrelated warm-up"), max_tokens=1)  # evicts any prefix
    share.start()
    await model.structured(grade_messages(question), Grade, max_tokens=24)
    cold = timings(model)
    await model.text(generate_messages(question), max_tokens=128)
    warm = timings(model)
    share.stop()
    return {
        "prompt_tokens": cold.prompt_tokens,
        "prompt_eval_tok_s": cold.prompt_evaluated / cold.prompt_seconds,
        "prompt_eval_s": cold.prompt_seconds,
        "structured_decode_tok_s": cold.generated_tokens / cold.decode_seconds,
        "reuse_prompt_tokens": warm.prompt_tokens,
        "reuse_prompt_evaluated": warm.prompt_evaluated,
        "reuse_prompt_eval_s": warm.prompt_seconds,
        "prefix_reuse_speedup": cold.prompt_seconds / max(warm.prompt_seconds, 1e-9),
        "decode_tokens": warm.generated_tokens,
        "decode_tok_s": warm.generated_tokens / warm.decode_seconds,
    }


async def answered_question(
    model: LlamaChatModel, question: str, share: CpuShare
) -> dict[str, float]:
    share.start()
    started = time.perf_counter()
    await model.structured(triage_messages(question), Triage, max_tokens=24)
    triage = time.perf_counter()
    await model.structured(grade_messages(question), Grade, max_tokens=24)
    grade = time.perf_counter()
    answer = await model.text(generate_messages(question), max_tokens=150)
    done = time.perf_counter()
    share.stop()
    return {
        "triage_s": triage - started,
        "grade_s": grade - triage,
        "generate_s": done - grade,
        "total_s": done - started,
        "answer_tokens": answer.usage.tokens_out,
    }


def emit(name: str, value: float | int | str) -> None:
    if isinstance(value, float):
        value = f"{value:.2f}"
    print(f"{name}={value}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, default=None, help="GGUF file (default: joined)")
    parser.add_argument("--threads", type=int, default=0, help="0: one per core")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    parser.add_argument(
        "--saved-system-prompts",
        type=int,
        default=SAVED_SYSTEM_PROMPTS,
        help="0: re-evaluate system prompts",
    )
    parser.add_argument("--quiet-wait", type=float, default=300, help="seconds; 0: no wait")
    args = parser.parse_args()

    settings = Settings()
    emit("loadavg_1m_before", os.getloadavg()[0])
    started = time.perf_counter()
    path = args.model or settings.local_model_path or default_model_path(settings.model_cache_dir)
    emit("model_path_s", time.perf_counter() - started)
    model = LlamaChatModel(
        path,
        threads=args.threads or settings.llm_threads,
        saved_system_prompts=args.saved_system_prompts,
    )
    emit("threads", model.threads)
    emit("load_s", model.load())

    share = CpuShare(model.threads)
    questions = QUESTIONS[: max(1, args.questions)]
    pairs = []
    for q in questions[:3]:
        wait_quiet(args.quiet_wait)
        pairs.append(asyncio.run(cold_and_reused(model, q, share)))
    for name in pairs[0]:
        emit(name, float(statistics.median(pair[name] for pair in pairs)))

    runs = []
    for q in questions:
        wait_quiet(args.quiet_wait)
        runs.append(asyncio.run(answered_question(model, q, share)))
    for key in ("triage_s", "grade_s", "generate_s", "total_s", "answer_tokens"):
        values = [run[key] for run in runs]
        emit(f"question_{key}_p50", float(statistics.median(values)))
        emit(f"question_{key}_max", float(max(values)))
    emit("cpu_share_min", min(share.shares))
    emit("cpu_share_median", float(statistics.median(share.shares)))
    emit("loadavg_1m_after", os.getloadavg()[0])


if __name__ == "__main__":
    main()
