"""`candor serve --host 0.0.0.0` and a client on another address, in a network namespace.

The test makes its own namespace (`unshare -n`): its loopback device gets a second,
non-loopback address, the server binds 0.0.0.0 there, and the client connects from
that address, so no packet leaves the namespace (tests/support/netns_serve.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def namespace_unavailable() -> str | None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare or ip is not installed"
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        return "cannot make a network namespace here (unshare -n needs root or user namespaces)"
    return None


def test_serve_on_every_address_with_no_origins_admits_no_client_from_the_network() -> None:
    reason = namespace_unavailable()
    if reason is not None:
        pytest.skip(reason)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CANDOR_")},
        "PYTHONPATH": f"{ROOT / 'layers' / 'candor'}{os.pathsep}{ROOT}",
    }

    run = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.support.netns_serve"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )

    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    # Refused at start, with a message naming the fix; or, were it served, the
    # network client sending the server's own Origin is turned away at the edge.
    if "refused" in outcome:
        assert "CANDOR_ALLOWED_ORIGINS" in outcome["refused"]
    else:
        assert outcome["status"] == 403, outcome
