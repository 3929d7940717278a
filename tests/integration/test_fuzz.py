"""A fuzz pass over every route of the OpenAPI spec: no 500, and every response as declared.

schemathesis generates valid and invalid requests from the app's own schema and
checks each response's status, content type, headers and body against what the
route declares. The app is the one `candor serve` builds, with the embedded
index and state and a scripted model that answers any question; requests come
from a listed origin with a server key, so they get past the edge to the routes
(MCP and the OpenAI-compatible API need the key). Bounded: several hundred cases,
a few minutes.

A second pass sends what the schema cannot describe, on every route: lone
surrogates and NUL bytes in any field, non-finite and huge numbers, nesting deeper
than the JSON parser goes, and header bytes that are not ASCII. None may be a 500,
and every refusal is JSON with a reason and a trace id.

A third sends questions made of hundreds of names (flags, settings, versions,
product names), each of which the grounding gate would look up: the index reads
each answer's trace counts stay within the bound the budget reserves for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode, checks
from schemathesis.core.result import Ok

from candor.api.local import create_local_app
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.graph import limits
from candor.settings import DEFAULT_PRICES, Settings
from tests.conftest import PASSAGES
from tests.support.edge import ORIGIN, SERVER_KEY, allowing
from tests.support.fakes import ScriptedChatModel
from tests.support.webhook_server import webhook_receiver

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
    receiver = webhook_receiver()
    hook = receiver.__enter__()
    base = Settings(
        data_dir=tmp_path,
        embedder_backend="hashing",
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
        # The guards are tested elsewhere; here they would only turn cases into 429s.
        rate_address_limit=1_000_000,
        rate_session_limit=1_000_000,
        # Hand-offs on, forwarded to a receiver on loopback.
        handoff_webhook_url=hook.url,
        handoff_webhook_secret="webhook-secret-0123456789",
        handoff_hourly_limit=100,
        rate_key_limit=1_000_000,
        rate_key_daily_limit=1_000_000,
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
    receiver.__exit__(None, None, None)


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
    # Random session ids are not signed (401); without one, a valid address and message
    # store a hand-off (202) and forward it to the loopback receiver.
    ("POST /handoff", GenerationMode.POSITIVE): 50,
    ("POST /handoff", GenerationMode.NEGATIVE): 50,
    ("GET /widget/config", GenerationMode.POSITIVE): 5,
    # MCP's messages: initialize, tools/list, each tool's call, ping; and what is not one.
    ("POST /mcp", GenerationMode.POSITIVE): 60,
    ("POST /mcp", GenerationMode.NEGATIVE): 40,
    ("POST /v1/chat/completions", GenerationMode.POSITIVE): 60,
    ("POST /v1/chat/completions", GenerationMode.NEGATIVE): 60,
    ("GET /v1/models", GenerationMode.POSITIVE): 5,
    ("GET /v1/models/{model}", GenerationMode.POSITIVE): 10,
}
HEADERS = {"Origin": ORIGIN, "X-Api-Key": SERVER_KEY}


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
            case.call_and_validate(headers=HEADERS, checks=CHECKS)

        call()


# Hostile input the schema-driven pass does not make: text no JSON response can carry,
# numbers past float, nesting past the parser, and header bytes that are not ASCII.

HOSTILE_TEXT = st.sampled_from(
    ["\ud800", "\udfff x", "a\x00b", "\x00", "\u202e", "\ufeff", "\uff1c/question\uff1e", "é" * 50]
)
HOSTILE_NUMBER = st.sampled_from(
    ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1" * 5000, "1e-400", "-0", "10e30"]
)
HOSTILE_HEADER = st.binary(min_size=1, max_size=40).filter(
    lambda b: b"\r" not in b and b"\n" not in b
)


def hostile_value() -> st.SearchStrategy[str]:
    """A JSON value as text: json.dumps cannot write most of these, a client can."""
    text = HOSTILE_TEXT.map(lambda t: json.dumps(t))  # lone surrogates become \\ud800 escapes
    leaf = st.one_of(text, HOSTILE_NUMBER, st.just("null"), st.just("[]"), st.just("{}"))
    deep = st.integers(1, 6_000).map(lambda n: "[" * n + "]" * n)
    return st.one_of(leaf, deep)


FIELDS = {
    "/ask": ["question", "session_id", "top_k"],
    "/ask/stream": ["question", "session_id", "top_k"],
    "/feedback": ["trace_id", "session_id", "score", "reason", "comment", "better_answer"],
    "/handoff": ["session_id", "email", "message"],
    "/v1/chat/completions": ["model", "messages", "stream", "user", "n", "stream_options"],
    "/mcp": ["jsonrpc", "id", "method", "params"],
}
# What each route needs to read further than its first check, for the fields not drawn.
BASES = {
    "/ask": {"question": '"ok?"'},
    "/ask/stream": {"question": '"ok?"'},
    "/v1/chat/completions": {
        "model": '"candor"',
        "messages": '[{"role": "user", "content": "ok?"}]',
    },
    "/mcp": {
        "jsonrpc": '"2.0"',
        "id": "1",
        "method": '"tools/call"',
        "params": '{"name": "ask_docs", "arguments": {"question": "ok?"}}',
    },
}


@st.composite
def hostile_body(draw: st.DrawFn, path: str) -> str:
    fields = draw(st.lists(st.sampled_from(FIELDS[path]), min_size=1, unique=True))
    parts = [f'"{name}": {draw(hostile_value())}' for name in fields]
    parts += [
        f'"{name}": {value}' for name, value in BASES.get(path, {}).items() if name not in fields
    ]
    return "{" + ", ".join(parts) + "}"


def assert_json_error_or_ok(response: Any) -> None:
    assert response.status_code != 500, response.text
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/json"), response.text
        body = response.json()
        if "jsonrpc" in body:  # /mcp: a JSON-RPC error; the edge's carry the trace id
            assert body["error"]["message"] and isinstance(body["error"]["code"], int)
        elif "error" in body:  # /v1: OpenAI's error object
            assert body["error"]["message"] and len(body["error"]["trace_id"]) == 32
        else:
            assert body["reason"] and len(body["trace_id"]) == 32


def fuzz_body(client: TestClient, path: str) -> None:
    @given(body=hostile_body(path), origin=st.booleans())
    @settings(
        max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def post(body: str, origin: bool) -> None:
        headers = [(b"content-type", b"application/json"), (b"x-api-key", SERVER_KEY.encode())]
        headers.append((b"accept", b"application/json, text/event-stream"))
        if origin:
            headers.append((b"origin", ORIGIN.encode()))
        response = client.post(path, content=body.encode("utf-8", "surrogatepass"), headers=headers)
        assert_json_error_or_ok(response)

    post()


def test_hostile_input_on_every_route_is_a_json_4xx_never_a_500(app: FastAPI) -> None:
    client = TestClient(app)
    for path in FIELDS:
        fuzz_body(client, path)

    @given(
        path=st.sampled_from([*FIELDS, "/health", "/v1/models", "/nowhere"]),
        name=st.sampled_from(
            [
                b"x-api-key",
                b"authorization",
                b"origin",
                b"content-type",
                b"x-forwarded-for",
                b"content-length",
            ]
        ),
        value=HOSTILE_HEADER,
    )
    @settings(
        max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def header(path: str, name: bytes, value: bytes) -> None:
        headers = [(b"content-type", b"application/json"), (name, value)]
        if name != b"origin":
            headers.append((b"origin", ORIGIN.encode()))
        if name not in (b"x-api-key", b"authorization"):
            headers.append((b"x-api-key", SERVER_KEY.encode()))
        method = "GET" if path in ("/health", "/v1/models") else "POST"
        try:
            response = client.request(method, path, content=b'{"question": "ok?"}', headers=headers)
        except Exception as error:  # the client itself refused to send it (content-length)
            assert "content-length" in str(error).lower() or name == b"content-length", error
            return
        assert_json_error_or_ok(response)

    header()


# Questions of as many names as 1,000 characters hold: each one a lookup for the gate.
NAME = st.one_of(
    st.from_regex(r"--[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True),
    st.from_regex(r"[a-z]{2,6}\.[a-z]{2,8}", fullmatch=True),
    st.from_regex(r"[A-Z]{3,6}_[A-Z]{3,6}", fullmatch=True),
    st.from_regex(r"[0-9]\.[0-9]{1,2}", fullmatch=True),
    st.from_regex(r"[a-z][A-Z][a-z]{1,4}|[A-Z][a-z]{2,5}[A-Z][a-z]{1,4}", fullmatch=True),
    st.from_regex(r"`[a-z]{2,8}\(\)`", fullmatch=True),
)


@st.composite
def names_question(draw: st.DrawFn) -> str:
    names = draw(st.lists(NAME, min_size=50, max_size=400))
    return ("Compare " + ", ".join(names))[:1_000]


def test_a_question_of_hundreds_of_names_stays_within_the_index_reads_reserved(
    app: FastAPI,
) -> None:
    client = TestClient(app)
    most = limits.envelope(app.state.deps_provider().settings).index_reads

    @given(question=names_question())
    @settings(
        max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def ask(question: str) -> None:
        response = client.post("/ask", json={"question": question}, headers={"Origin": ORIGIN})
        assert response.status_code == 200, response.text
        reads = sum(step["index_reads"] for step in response.json()["trace"])
        assert reads <= most, question

    ask()
