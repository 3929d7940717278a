"""The first question after start against the same question asked later, with and
without warm start.

Usage: python bench/bench_first_question.py [--modes warm,cold] [--rounds N]

Runs `candor serve` on loopback, as `make demo` does, on an index of the bundled
docs (built once under .candor/bench/first). In `warm` mode it waits until GET
/health stops answering `warming`; in `cold` mode (CANDOR_WARM_START=false) it
asks as soon as the port answers. Then it asks the questions below over HTTP, one
at a time. It starts the server once per round, N rounds (default: one per
question), and each round begins one question further down the list, so that
every question is asked first once and later in every other round.

Questions differ in length (a five-sentence answer against a one-line one), so
the first question is compared with itself: per question, its seconds when it
came first over the median of its seconds when it came later. Prints one line
per question asked, then per mode: startup_s (start to ready, median of the
rounds), first_over_later (the median of those per-question ratios) with each
ratio, and first_s / later_s (the medians over all rounds). Run it on a quiet
machine: another busy process slows the local model many times over.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".candor/bench/first"
QUESTIONS = (
    "How do I deploy candor to AWS?",
    "Which setting changes how many passages are retrieved?",
    "How does candor decide that it cannot answer?",
    "What does a visitor's thumbs down do?",
    "How much does a question cost on OpenAI?",
)
READY_TIMEOUT_S = 600
ASK_TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def candor(*args: str) -> list[str]:
    return [sys.executable, "-m", "candor.cli", *args]


def environment(warm: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANDOR_")}
    env |= {
        "CANDOR_DATA_DIR": str(DATA),
        "CANDOR_WARM_START": "true" if warm else "false",
        # Every question measured on its own: no cached answers, no history.
        "CANDOR_CACHE_ENABLED": "false",
        "CANDOR_HISTORY_TURNS": "0",
    }
    return env


def ensure_index() -> None:
    if (DATA / "indexes").exists():
        return
    subprocess.run(candor("ingest", str(ROOT / "docs")), env=environment(True), check=True)


def ready(base: str, process: subprocess.Popen[bytes], warm: bool) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < READY_TIMEOUT_S:
        if process.poll() is not None:
            raise SystemExit(f"candor serve exited with {process.returncode}")
        try:
            status = httpx.get(f"{base}/health", timeout=5).status_code
            if not warm or status < 500:
                return time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"candor serve was not ready in {READY_TIMEOUT_S} s")


def round_seconds(mode: str, order: Sequence[str]) -> tuple[float, list[float]]:
    """Start a server, ask `order` one at a time; (startup seconds, each question's seconds)."""
    warm = mode == "warm"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        candor("serve", "--host", "127.0.0.1", "--port", str(port)),
        env=environment(warm),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ready(base, process, warm)
        startup = time.perf_counter() - started
        seconds: list[float] = []
        for position, question in enumerate(order):
            asked = time.perf_counter()
            response = httpx.post(f"{base}/ask", json={"question": question}, timeout=ASK_TIMEOUT_S)
            seconds.append(time.perf_counter() - asked)
            decision = response.json().get("decision", response.status_code)
            print(f"{mode} #{position + 1} {seconds[-1]:6.1f} s {decision} {question}", flush=True)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return startup, seconds


def run(mode: str, rounds: int) -> None:
    startups: list[float] = []
    first: dict[str, float] = {}
    later: dict[str, list[float]] = {question: [] for question in QUESTIONS}
    for shift in range(rounds):
        order = [QUESTIONS[(shift + i) % len(QUESTIONS)] for i in range(len(QUESTIONS))]
        startup, seconds = round_seconds(mode, order)
        startups.append(startup)
        first.setdefault(order[0], seconds[0])
        for question, value in zip(order[1:], seconds[1:], strict=True):
            later[question].append(value)
    ratios = {
        question: first[question] / statistics.median(later[question])
        for question in first
        if later[question]
    }
    print(f"{mode}_startup_s={statistics.median(startups):.1f}")
    print(f"{mode}_first_s={statistics.median(first.values()):.1f}")
    print(f"{mode}_later_s={statistics.median(v for vs in later.values() for v in vs):.1f}")
    for n, (question, ratio) in enumerate(ratios.items(), 1):
        print(f"{mode}_first_over_later_{n}={ratio:.2f}  # {question}")
    if ratios:
        print(f"{mode}_first_over_later={statistics.median(ratios.values()):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="warm,cold")
    parser.add_argument("--rounds", type=int, default=len(QUESTIONS))
    args = parser.parse_args()
    ensure_index()
    for mode in args.modes.split(","):
        run(mode, args.rounds)


if __name__ == "__main__":
    main()
