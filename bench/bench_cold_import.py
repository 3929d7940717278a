"""Each Lambda handler's cold import time: `python -X importtime`, median of 5.

Usage: python -m bench.bench_cold_import [--runs N]

Imports functions/<name>/app.py the way Lambda does (the layer's library and the
function's folder on the path, a fresh interpreter each run), in the environment
the template gives it, without AWS_SAM_LOCAL (so Powertools behaves as deployed).
Prints, per handler, the median and the slowest of the runs of the self-reported
cumulative import time of `app`, and the five top-level packages it spends most on
in the median run. What the handler does at init after its imports (building its
dependencies on the first request) is not in these figures.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from scripts.invoke import FUNCTIONS, lambda_environment

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def import_profile(function: str) -> tuple[float, dict[str, float]]:
    """(seconds to import app, cumulative seconds per top-level package) of one run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANDOR_", "PYTHON"))}
    env |= lambda_environment(function)
    for local_only in ("AWS_SAM_LOCAL", "POWERTOOLS_TRACE_DISABLED"):
        env.pop(local_only)
    env["PYTHONPATH"] = f"{ROOT / 'layers/candor'}{os.pathsep}{ROOT / 'functions' / function}"
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import app"],
        env=env,
        cwd=ROOT / "functions" / function,
        capture_output=True,
        text=True,
        check=True,
    )
    total = 0.0
    packages: dict[str, float] = {}
    for match in LINE.finditer(run.stderr):
        cumulative_us, depth, name = int(match[2]), len(match[3]) // 2, match[4]
        if name == "app":
            total = cumulative_us / 1e6
        elif depth == 1:  # imported by app itself: its cost includes what it pulls in
            top = name.split(".")[0]
            packages[top] = packages.get(top, 0.0) + cumulative_us / 1e6
    return total, packages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for function in FUNCTIONS:
        runs = sorted((import_profile(function) for _ in range(args.runs)), key=lambda r: r[0])
        median_s, packages = runs[len(runs) // 2]
        top = sorted(packages.items(), key=lambda item: -item[1])[:5]
        shown = ", ".join(f"{name} {seconds:.2f}" for name, seconds in top)
        slowest = runs[-1][0]
        print(
            f"{function:9} cold_import_median_s={median_s:.2f} slowest_s={slowest:.2f} "
            f"(of {args.runs}) top: {shown}"
        )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
