"""A fuzz pass over every route of the OpenAPI spec: no 500, and every response as declared.

schemathesis generates valid and invalid requests from the app's own schema and
checks each response's status, content type, headers and body against what the
route declares. The app is the one `candor serve` builds, with the embedded
index and state and a scripted model that answers any question; requests come
from a listed origin, so they get past the edge to the routes. Bounded: a few
hundred cases, well under two minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, GenerationMode, checks
from schemathesis.core.result import Ok

from candor.api.local import create_local_app
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import PASSAGES
from tests.support.edge import ORIGIN, allowing
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.integration

ANY_QUESTION = 5_000  # more scripted replies than the pass can use
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]


def answering_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}] * ANY_QUESTION,
            "judge": [True] * ANY_QUESTION,
            # A question that finds no passage is rewritten before it is declined.
            "Rewrite": [{"query": "force with lease"}] * ANY_QUESTION,
            "text": ["It refuses to overwrite work you have not seen [1]."] * ANY_QUESTION,
        }
    )


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    base = Settings(
        data_dir=tmp_path,
        embedder_backend="hashing",
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
        # The guards are tested elsewhere; here they would only turn cases into 429s.
        rate_address_limit=1_000_000,
        rate_session_limit=1_000_000,
    )
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(base.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    state = SqliteStateStore(base.state_path)
    deps = allowing(Deps(base, answering_model(), embedder, index, None, state))
    app = create_local_app(deps.settings)
    app.state.deps_provider = lambda: deps
    yield app
    index.close()
    state.close()


# Cases per operation and generation mode: valid requests, and requests that break
# the schema (a route without inputs has no invalid request to make).
EXAMPLES = {
    ("POST /ask", GenerationMode.POSITIVE): 150,
    ("POST /ask", GenerationMode.NEGATIVE): 150,
    # The same guards and body as /ask; fewer cases, each a whole streamed run.
    ("POST /ask/stream", GenerationMode.POSITIVE): 50,
    ("POST /ask/stream", GenerationMode.NEGATIVE): 50,
    ("GET /health", GenerationMode.POSITIVE): 10,
    # Random trace ids name no trace (404), and random session ids are not signed (401).
    ("POST /feedback", GenerationMode.POSITIVE): 50,
    ("POST /feedback", GenerationMode.NEGATIVE): 50,
}


def test_no_route_answers_500_or_outside_its_schema(app: FastAPI) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    results = list(schema.get_all_operations())
    assert all(isinstance(r, Ok) for r in results), results  # the spec itself is valid
    operations = {r.ok().label: r.ok() for r in results if isinstance(r, Ok)}
    assert set(operations) == {label for label, _ in EXAMPLES}  # every route, no other
    for (label, mode), examples in EXAMPLES.items():

        @given(case=operations[label].as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def call(case: Case[Any]) -> None:
            case.call_and_validate(headers={"Origin": ORIGIN}, checks=CHECKS)

        call()
