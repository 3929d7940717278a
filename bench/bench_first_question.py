"""The first question after start against the ones after it, with and without warm start.

Usage: python bench/bench_first_question.py [--modes warm,cold]

Runs `candor serve` on loopback, as `make demo` does, on an index of the bundled
docs (built once under .candor/bench/first). In `warm` mode it waits until GET
/health stops answering `warming`; in `cold` mode (CANDOR_WARM_START=false) it
asks as soon as the port answers. Then it asks the questions below over HTTP, one
at a time, and the first one once more at the end, when it can no longer find its
own prompt in the model's cache. Prints one line per question, then per mode:
startup_s (start to ready), first_s, rest_p50_s, first_over_rest_p50 and
first_over_same_later (the first question against itself asked last).
Run it on a quiet machine: another busy process slows the local model many times over.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
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


def run(mode: str) -> None:
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
        for question in (*QUESTIONS, QUESTIONS[0]):
            asked = time.perf_counter()
            response = httpx.post(f"{base}/ask", json={"question": question}, timeout=ASK_TIMEOUT_S)
            seconds.append(time.perf_counter() - asked)
            decision = response.json().get("decision", response.status_code)
            print(f"{mode} {seconds[-1]:6.1f} s {decision} {question}")
    finally:
        process.terminate()
        process.wait(timeout=30)
    first, rest, again = seconds[0], seconds[1:-1], seconds[-1]
    print(f"{mode}_startup_s={startup:.1f}")
    print(f"{mode}_first_s={first:.1f}")
    print(f"{mode}_rest_p50_s={statistics.median(rest):.1f}")
    print(f"{mode}_first_over_rest_p50={first / statistics.median(rest):.2f}")
    print(f"{mode}_first_over_same_later={first / again:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="warm,cold")
    args = parser.parse_args()
    ensure_index()
    for mode in args.modes.split(","):
        run(mode)


if __name__ == "__main__":
    main()
