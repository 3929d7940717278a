"""A network namespace of the test's own, for a client on an address that is not loopback.

`unshare -n` as root; `unshare -rn` (a user namespace of its own, mapping the user to
root in it) elsewhere, where the kernel allows unprivileged user namespaces. Either
way the namespace's loopback device can take a second address, and no packet leaves
it. Where neither works, or `unshare` or `ip` is missing, a test needing one skips,
unless CANDOR_REQUIRE_NETWORK_NAMESPACE=1 (`make test`), which makes that a failure.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

import pytest

REQUIRE_ENV = "CANDOR_REQUIRE_NETWORK_NAMESPACE"
# Tried in this order: plain -n needs root; -rn needs user namespaces.
COMMANDS = (("unshare", "-n"), ("unshare", "-rn"))


@functools.cache
def _command() -> tuple[str, ...] | str:
    """The unshare command that makes a namespace here, or why there is none."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare or ip is not installed (util-linux, iproute2)"
    for command in COMMANDS:
        probe = subprocess.run([*command, "true"], capture_output=True, check=False)
        if probe.returncode == 0:
            return command
    return "cannot make a network namespace here (unshare -n needs root; -rn user namespaces)"


def unshare_command() -> list[str]:
    """The command to run a program in a network namespace of its own.

    Skips the test when none can be made here, or fails it under
    CANDOR_REQUIRE_NETWORK_NAMESPACE=1.
    """
    found = _command()
    if isinstance(found, str):
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{found}; {REQUIRE_ENV}=1 requires a network namespace", pytrace=False)
        pytest.skip(found)
    return list(found)
