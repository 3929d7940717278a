"""The ask function's DynamoDB grant against the calls it makes.

The app runs questions through its routes on the DynamoDB state store (DynamoDB Local,
the table built from the template's StateTable): answered, repeated from
the cache, a follow-up, a warned and an ended session, an address over its limit.
Every DynamoDB call is recorded, and each must be one the template's policy allows,
condition included. The ingest function's items (its completion records, and the
corpus version it bumps) are kept in the same table by the same store: the ask
function may read the corpus version and nothing else of them, so that a flaw in the
public function cannot rewrite what the index is said to hold or retire every
cached answer at will.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from candor.api.app import create_app
from candor.api.handoff import Handoffs
from candor.backends.dynamodb_catalogue import DynamoDBCatalogueStore
from candor.backends.dynamodb_handoffs import DynamoDBHandoffStore
from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.catalogue.keeping import DocumentCatalogue
from candor.catalogue.reader import Catalogue
from candor.deps import Deps
from candor.ingest.reading import Chunking, read
from candor.ingest.records import CompletionRecords
from candor.settings import Settings
from tests.integration.test_ingest_policy import DynamoDBCalls, allowed
from tests.support import dynamodb_local
from tests.support.edge import allowing, browser
from tests.support.fakes import ScriptedChatModel
from tests.unit.test_template import policy_statements

pytestmark = pytest.mark.integration

QUESTION = {"abusive": False, "kind": "question"}
CATALOGUE = {"abusive": False, "kind": "catalogue"}
GUIDE = (
    b"# Guide\n\n## Settings\n\n| name | default |\n|---|---|\n"
    b"| `TIMEOUT` | 30 |\n| `RETRIES` | 3 |\n"
)
ABUSIVE = {"abusive": True, "kind": "question"}


@pytest.fixture
def table(dynamodb_endpoint: str) -> Iterator[tuple[Any, str]]:
    client = dynamodb_local.client(dynamodb_endpoint)
    name = dynamodb_local.create_state_table(client)
    yield client, name
    client.delete_table(TableName=name)


@pytest.fixture
def recorder(table: tuple[Any, str]) -> DynamoDBCalls:
    calls = DynamoDBCalls()
    client, _ = table
    client.meta.events.register("provide-client-params.dynamodb", calls)
    return calls


def ask_as_visitors_do(
    settings: Settings,
    index: SqliteVectorIndex,
    store: DynamoDBStateStore,
    handoffs: DynamoDBHandoffStore,
    client: Any,
    name: str,
) -> list[int]:
    """Each path of the ask function that touches the table; the statuses it answered."""
    chat = ScriptedChatModel(
        {
            "Triage": [QUESTION, QUESTION, CATALOGUE, ABUSIVE, ABUSIVE, QUESTION],
            "Moderation": [{"insulting": True}, {"insulting": True}],
            "judge": [True, True, True],
            "text": ["It refuses to overwrite work you have not seen [1]."] * 3,
        }
    )
    catalogue = Catalogue(DynamoDBCatalogueStore(name, client=client), settings.index_name)
    deps = allowing(
        Deps(settings, chat, HashingEmbedder(), index, None, store, catalogue=catalogue),
        cache_enabled=True,
        rate_address_limit=8,
        # Hand-offs on: the ask function stores each and queues it (the queue is the
        # hand-off function's, and no part of this grant).
        handoff_webhook_url="https://hooks.example.com/candor",
    )
    app = create_app(lambda: deps)
    app.state.handoffs_provider = lambda: Handoffs(handoffs, Queued())
    http: TestClient = browser(app)
    statuses = []

    def ask(question: str, session: str | None = None) -> dict[str, Any]:
        body = {"question": question} | ({"session_id": session} if session else {})
        response = http.post("/ask", json=body)
        statuses.append(response.status_code)
        found: dict[str, Any] = response.json()
        return found

    first = ask("What does --force-with-lease do?")  # answered; trace, ledgers, cache
    ask("What does --force-with-lease do?")  # from the cache
    ask("And what does it refuse?", first["session_id"])  # a follow-up: the history
    listed = ask("List all the settings.")  # from the catalogue: one Query
    assert "`TIMEOUT`, `RETRIES`" in listed["answer"], listed
    rude = ask("You idiot.")  # warned
    ask("Moron.", rude["session_id"])  # ended
    ask("Hello?", rude["session_id"])  # refused: the session is over
    while statuses[-1] != 429:  # the address's window is full
        ask("How do I fix the last commit message?")
    http.post(
        "/feedback",
        json={"trace_id": first["trace_id"], "session_id": first["session_id"], "score": 1},
    )
    statuses.append(http.get("/widget/config").status_code)
    handoff = {"session_id": first["session_id"], "email": "v@example.org", "message": "Help?"}
    statuses.append(http.post("/handoff", json=handoff).status_code)  # stored, then queued
    return statuses


class Queued:
    """The ask function's forwarder on AWS puts the id on SQS: no table call of its own."""

    async def dispatch(self, handoff_id: str) -> None:
        pass


def use_the_store_as_the_ingest_function_does(
    store: DynamoDBStateStore, catalogue: DynamoDBCatalogueStore
) -> None:
    records = CompletionRecords(store, "default")
    records.record("guide.md")
    records.begin("guide.md")
    records.bump()
    records.complete("guide.md", "f" * 64)
    kept = DocumentCatalogue(catalogue, "default")
    kept.current("guide.md", "f" * 64, None)
    kept.remove("guide.md")


def catalogued(settings: Settings, index: SqliteVectorIndex, catalogue: DocumentCatalogue) -> None:
    """The ingest function's work before the visitors come: the guide's catalogue record,
    and its passages, which the catalogue's answer cites."""
    embedder = HashingEmbedder()
    document, chunks = read("guide.md", GUIDE, Chunking(), None)
    index.upsert(chunks, embedder.embed([chunk.text for chunk in chunks]))
    catalogue.write(document, chunks, size=len(GUIDE), fingerprint="f" * 64, url=None)


def test_the_ask_functions_table_grant_is_scoped_by_key_prefix(
    table: tuple[Any, str],
    recorder: DynamoDBCalls,
    settings: Settings,
    index: SqliteVectorIndex,
) -> None:
    # Given the ask function's policy, and the calls it makes on every path
    client, name = table
    store = DynamoDBStateStore(name, client=client)
    statements = policy_statements("AskFunction")
    handoffs = DynamoDBHandoffStore(name, client=client)
    catalogue_store = DynamoDBCatalogueStore(name, client=client)
    catalogued(settings, index, DocumentCatalogue(catalogue_store, settings.index_name))
    recorder.calls = []
    statuses = ask_as_visitors_do(settings, index, store, handoffs, client, name)
    made, recorder.calls = recorder.calls, []

    # Then each call it makes is allowed, so the scoped grant breaks nothing
    assert {200, 202, 403, 429} <= set(statuses)
    assert {action for action, _ in made} == {
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
    }
    assert {key.split("#", 1)[0] for _, key in made if key} >= {
        "session",
        "history",
        "rate",
        "budget",
        "cache",
        "verdict",
        "corpus",
        "trace",
        "handoff",
        "catalogue",
    }
    refused = [(action, key) for action, key in made if not allowed(statements, action, key)]
    assert refused == []

    # And of the ingest function's items it may only read the corpus version and query
    # the catalogue: neither bump the version (which retires every cached answer) nor
    # touch a completion record or write a catalogue record
    use_the_store_as_the_ingest_function_does(store, catalogue_store)
    ingest = recorder.calls
    assert {key.split("#", 1)[0] for _, key in ingest if key} == {"corpus", "ingest", "catalogue"}
    admitted = [
        (action, key)
        for _, key in ingest
        for action in ("dynamodb:GetItem", "dynamodb:UpdateItem")
        if allowed(statements, action, key)
    ]
    assert admitted == [("dynamodb:GetItem", "corpus#default")]
