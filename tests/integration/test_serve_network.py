"""`candor serve --host 0.0.0.0` and a client on another address, in a network namespace.

The test makes its own namespace (tests/support/namespaces.py: `unshare -n`, or
`unshare -rn` without root): its loopback device gets a second, non-loopback address,
the server binds 0.0.0.0 there, and the client connects from that address, so no
packet leaves the namespace (tests/support/netns_serve.py). Without a way to make
one the test skips, unless CANDOR_REQUIRE_NETWORK_NAMESPACE=1 (`make test`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import namespaces

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_serve_on_every_address_with_no_origins_admits_no_client_from_the_network() -> None:
    unshare = namespaces.unshare_command()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CANDOR_")},
        "PYTHONPATH": f"{ROOT / 'layers' / 'candor'}{os.pathsep}{ROOT}",
    }

    run = subprocess.run(
        [*unshare, sys.executable, "-m", "tests.support.netns_serve"],
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
