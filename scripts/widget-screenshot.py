"""docs/widget.png: the demo page of `make demo` answering a starter question in the widget.

Ingests docs/ into a temporary data folder, writes the starter questions with the
local model (`candor suggestions refresh`, which keeps those candor answers), starts
`candor serve` on a free port with hand-offs on (a webhook on loopback that is never
called), clicks the first starter question in Debian's chromium under Playwright
(or asks --question), and saves the page once the answer is in.

    .venv/bin/python scripts/widget-screenshot.py [--out docs/widget.png] [--question Q]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

# Three calls of the local model; on two busy cores that can take minutes.
ANSWER_TIMEOUT_MS = 20 * 60 * 1000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_up(url: str, server: subprocess.Popen[bytes]) -> None:
    for _ in range(120):
        if server.poll() is not None:
            raise SystemExit("candor serve exited at start")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("candor serve did not answer within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/widget.png")
    parser.add_argument("--question", default=None, help="unset: the first starter question")
    args = parser.parse_args()
    candor = [sys.executable, "-m", "candor.cli"]
    with tempfile.TemporaryDirectory() as data:
        env = os.environ | {
            "CANDOR_DATA_DIR": data,
            # Shows "Ask a person"; nothing is handed off, so nothing is sent there.
            "CANDOR_HANDOFF_WEBHOOK_URL": "http://127.0.0.1:9/hooks/candor",
            "CANDOR_HANDOFF_WEBHOOK_SECRET": "screenshot-only-secret",
        }
        subprocess.run([*candor, "ingest", str(ROOT / "docs")], env=env, check=True)
        if args.question is None:
            subprocess.run([*candor, "suggestions", "refresh"], env=env, check=True)
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([*candor, "serve", "--port", str(port)], env=env)
        try:
            wait_until_up(f"{api}/health", server)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
                )
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                page.goto(f"{api}/")
                page.get_by_role("button", name="Ask a question").click()
                if args.question is None:
                    starters = page.get_by_role("group", name="Suggested questions")
                    starters.get_by_role("button").first.click()
                else:
                    page.get_by_label("Your question").fill(args.question)
                    page.get_by_label("Your question").press("Enter")
                expect(page.locator(".log")).to_have_attribute(
                    "aria-busy", "false", timeout=ANSWER_TIMEOUT_MS
                )
                # The answer's first line at the top of the log: the prose, then its chips.
                page.locator(".msg.bot").last.evaluate("m => m.scrollIntoView({block: 'start'})")
                page.screenshot(path=str(args.out))
                answer = page.locator(".msg.bot .answer").last.inner_text()
                browser.close()
        finally:
            server.terminate()
            server.wait(30)
    print(f"wrote {args.out}: {answer[:200]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
