"""A short mixed load run (bench/stress_mixed.py) through the real app, on DynamoDB Local.

Clients on many loopback addresses, some over their rate limits and their share of
the budget, a model that is slow and fails at random: no 500, every refusal of its
kind, every ledger equal to its charges and under its cap, every rate window exact,
no trace or rating lost. `make stress` runs the full one on both stores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.stress_mixed import Plan, run
from candor.backends.dynamodb_state import DynamoDBStateStore
from tests.support import dynamodb_local

pytestmark = pytest.mark.integration


def test_a_short_mixed_run_holds_every_guard_and_loses_nothing(
    dynamodb_endpoint: str, tmp_path: Path
) -> None:
    table = dynamodb_local.create_state_table(dynamodb_local.client(dynamodb_endpoint))
    store = DynamoDBStateStore(table, client=dynamodb_local.client(dynamodb_endpoint))
    plan = Plan(requests=200, clients=20, sessions=100, seed=3)

    summary = run(plan, store, tmp_path, "dynamodb-local")

    assert summary["500s"] == 0
    assert summary["ledger_difference"] == 0
    assert (summary["lost_traces"], summary["lost_ratings"]) == (0, 0)
    for kind in ("rate_address", "rate_network", "rate_session", "budget_address"):
        assert summary["refusals"].get(kind, 0) > 0, json.dumps(summary)
    assert summary["ok"], json.dumps(summary)
