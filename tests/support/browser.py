"""Debian's chromium under Python Playwright, and axe-core, for the widget's browser tests.

Never `playwright install`: it downloads a browser build of its own. The tests use
/usr/bin/chromium (`scripts/browser-deps.sh` installs it and axe-core when missing;
`make test` runs it). Without them a browser test skips, unless
CANDOR_REQUIRE_BROWSER=1 (`make test`), which makes a missing browser a failure.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REQUIRE_ENV = "CANDOR_REQUIRE_BROWSER"
CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
AXE_ENV = "CANDOR_AXE_JS"
AXE_DEFAULT = ROOT / ".candor/axe-core/node_modules/axe-core/axe.min.js"
# As root, chromium needs --no-sandbox; without the networking flags it keeps
# trying hosts this machine cannot reach.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _missing(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}; run scripts/browser-deps.sh", pytrace=False)
    pytest.skip(f"{reason}: run scripts/browser-deps.sh (`make test` does)")


def require_browser() -> None:
    """Skip (or, under `make test`, fail) when chromium or Playwright is missing."""
    if importlib.util.find_spec("playwright") is None:
        _missing("the Python package playwright is not installed")
    if not CHROMIUM.is_file():
        _missing(f"no chromium at {CHROMIUM}")


def axe_script() -> str:
    """The text of axe.min.js, to inject into a page."""
    configured = os.environ.get(AXE_ENV)
    path = Path(configured) if configured else AXE_DEFAULT
    if not path.is_file():
        _missing(f"axe-core is not installed at {path}")
    return path.read_text()
