"""On Pinecone every index read of a request is billed: it is in the trace's cost, charged
to the budget, and covered by the reservation.

The index is the Pinecone adapter against the loopback servers (dense and sparse),
which report what each query was billed (`usage.readUnits`), as Pinecone does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
from pydantic import SecretStr

from candor import guards, service
from candor.factory import build_index
from candor.graph import limits
from candor.ingest import ingest
from candor.results import AskResult
from tests.conftest import MakeDeps
from tests.support import pinecone_server
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.integration

UNIT_USD = 0.001  # dear, so that a read shows in the trace's cost
DOCUMENT = b"# Push\n\n--force-with-lease refuses to overwrite a remote ref you have not seen.\n"


@pytest.fixture
def servers() -> Iterator[tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex]]:
    with (
        pinecone_server.serve("dense", 384) as dense,
        pinecone_server.serve("sparse") as sparse,
    ):
        yield dense, sparse


def ask_on_pinecone(
    make_deps: MakeDeps,
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
    question: str,
    **settings: object,
) -> tuple[AskResult, Decimal, Decimal]:
    """Ask on a Pinecone index; the result, what the day's ledger holds, and the reservation."""
    dense, sparse = servers
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite a remote ref you have not seen [1]."],
        }
    )
    deps = make_deps(chat)
    update = {
        "index_backend": "pinecone",
        "pinecone_host": dense.url,
        "pinecone_sparse_host": sparse.url,
        "pinecone_api_key": SecretStr("pc-test"),
        "pinecone_read_unit_usd": UNIT_USD,
        "cache_enabled": False,
        **settings,
    }
    configured = deps.settings.model_copy(update=update)
    index = build_index(configured, deps.embedder)
    ingest([("push.md", DOCUMENT)], embedder=deps.embedder, index=index)
    deps = dataclasses.replace(deps, settings=configured, index=index)
    reserved = guards.reservation_usd(configured, chat.name, deps.embedder)
    result = asyncio.run(service.ask(deps, question))
    spent = deps.state.budget_spent(guards.daily_ledger(time.time()))
    return result, spent, reserved


def test_each_pinecone_read_is_charged_at_what_pinecone_reported(
    make_deps: MakeDeps,
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    dense, sparse = servers
    dense.index.query_read_units = sparse.index.query_read_units = 3

    result, spent, reserved = ask_on_pinecone(
        make_deps, servers, "What does --force-with-lease protect?"
    )

    retrieve = next(step for step in result.trace if step.node == "retrieve")
    assert retrieve.index_reads == 1
    # One hybrid query: a request to each index, each billed 3 read units.
    assert retrieve.cost_usd == pytest.approx(2 * 3 * UNIT_USD)
    assert spent == guards.usd(sum(step.cost_usd for step in result.trace))
    assert Decimal(0) < spent <= reserved


def test_a_query_that_reports_no_usage_is_charged_its_bound_within_the_reservation(
    make_deps: MakeDeps,
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    dense, _ = servers
    dense.index.query_read_units = None  # a response that does not say what it cost

    result, spent, reserved = ask_on_pinecone(
        make_deps, servers, "What does --force-with-lease protect?", pinecone_query_read_units=4
    )

    retrieve = next(step for step in result.trace if step.node == "retrieve")
    # The query's bound: two requests at the most one is billed (the setting, 4 units).
    assert retrieve.cost_usd == pytest.approx(2 * 4 * UNIT_USD)
    assert spent == guards.usd(sum(step.cost_usd for step in result.trace)) <= reserved


def test_the_reservation_covers_every_read_the_graph_can_make(
    make_deps: MakeDeps,
    servers: tuple[pinecone_server.RunningIndex, pinecone_server.RunningIndex],
) -> None:
    # A question of made-up names: the gate's lookups, each a billed keyword query.
    question = ", ".join(f"Zq{chr(97 + n)}Wx" for n in range(26)) + " and --no-such-flag?"
    dense, sparse = servers
    dense.index.query_read_units = sparse.index.query_read_units = 10  # the setting's default

    result, spent, reserved = ask_on_pinecone(make_deps, servers, question)

    reads = sum(step.index_reads for step in result.trace)
    assert 1 < reads <= limits.envelope(make_deps(ScriptedChatModel()).settings).index_reads
    assert result.decision == "declined"
    assert Decimal(0) < spent <= reserved
