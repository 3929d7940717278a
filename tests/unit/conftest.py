"""What no test under tests/unit may do, besides opening sockets (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.support.weights import refuse_weights


@pytest.fixture(autouse=True)
def _no_model_weights_in_unit_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_weights(monkeypatch, request.node.nodeid)
