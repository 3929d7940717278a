"""The ask function's DynamoDB grant against what curated answers make it call.

A visitor's question reads the curated answers' count and generation, then a
candidate (GetItem on curated#<index>); the owner's `candor answers` writes them. The
grant must admit the first and refuse the second: a flaw in the public function must
not let a visitor write what candor answers in the owner's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor.api.app import create_app
from candor.backends.dynamodb_curated import DynamoDBCuratedAnswers
from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.curated import library
from candor.curated.library import Curation
from candor.deps import Deps
from candor.settings import Settings
from tests.integration.test_ingest_policy import DynamoDBCalls, allowed
from tests.support import dynamodb_local
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel
from tests.unit.test_template import policy_statements

pytestmark = pytest.mark.integration

CURATED = "What does git branch -d do?"


@pytest.fixture
def table(dynamodb_endpoint: str) -> Iterator[tuple[Any, str]]:
    client = dynamodb_local.client(dynamodb_endpoint)
    name = dynamodb_local.create_state_table(client)
    yield client, name
    client.delete_table(TableName=name)


def test_the_ask_function_may_read_curated_answers_and_not_write_them(
    table: tuple[Any, str], settings: Settings, index: SqliteVectorIndex, tmp_path: Path
) -> None:
    # Given an owner's curated answer on the DynamoDB store, written as the owner does
    client, name = table
    embedder = HashingEmbedder()
    curated_index = SqliteVectorIndex(
        tmp_path / "curated.sqlite3", embedder.dimensions, embedder=embedder.name
    )
    curation = Curation(
        DynamoDBCuratedAnswers(name, client=client), curated_index, settings.index_name
    )
    recorder = DynamoDBCalls()
    client.meta.events.register("provide-client-params.dynamodb", recorder)
    kept = library.add(curation, embedder, CURATED, "It deletes a merged branch.")
    owner, recorder.calls = recorder.calls, []

    # When visitors ask it, and something else, through the app
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}] * 2,
            "judge": [False, False],
            "Rewrite": [{"query": "branch"}],
        }
    )
    deps = allowing(
        Deps(
            settings.model_copy(update={"curated_threshold": 0.8}),
            chat,
            embedder,
            index,
            None,
            DynamoDBStateStore(name, client=client),
            curated=curation,
        )
    )
    http: TestClient = browser(create_app(lambda: deps))
    served = http.post("/ask", json={"question": "Explain what git branch -d does."}).json()
    missed = http.post("/ask", json={"question": "How do I rename a branch?"}).json()
    asked = recorder.calls
    curated_index.close()

    # Then every call the questions made is one the ask function's grant allows
    assert served["answer"] == "It deletes a merged branch."
    assert missed["decision"] == "declined"
    statements = policy_statements("AskFunction")
    assert (
        "dynamodb:GetItem",
        f"curated#{settings.index_name}",
    ) in asked
    assert [(a, k) for a, k in asked if not allowed(statements, a, k)] == []
    # And none of the owner's writes would be
    assert {action for action, _ in owner} >= {"dynamodb:TransactWriteItems"}
    writes = [(a, k) for a, k in owner if a != "dynamodb:GetItem"]
    assert writes and not any(allowed(statements, a, k) for a, k in writes)
    assert kept.id
