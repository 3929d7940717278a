"""The public edge, on the app as `candor serve` builds it (candor.api.local).

Origins, server keys, preflight, content type and body size, and session ids the
server signs. The scripted model's recorded calls show that a refusal makes none.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import stat
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastapi
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from packaging.requirements import Requirement

from candor.api.app import create_app
from candor.api.edge import Edge
from candor.api.local import create_local_app
from candor.api.sessions import SECRET_FILE, SessionSigner, signer_for
from candor.deps import Deps
from candor.errors import ConfigurationError
from candor.settings import Settings
from tests.conftest import MakeDeps
from tests.support.edge import ORIGIN, SERVER_KEY, SESSION_SECRET, allowing
from tests.support.fakes import ScriptedChatModel
from tests.support.outages import DownIndex

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PORT = 8123
FOREIGN = "https://evil.example"
QUESTION = {"question": "What does --force-with-lease do?"}
ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}] * 3,
    "judge": [True] * 3,
    "text": ["It refuses to overwrite work you have not seen [1]."] * 3,
}


def served(deps: Deps) -> FastAPI:
    """`candor serve --port PORT` with these dependencies in place of the built ones."""
    app = create_local_app(deps.settings, port=PORT)
    app.state.deps_provider = lambda: deps
    return app


@pytest.fixture
def chat() -> ScriptedChatModel:
    return ScriptedChatModel(ANSWERING)


@pytest.fixture
def deps(make_deps: MakeDeps, chat: ScriptedChatModel) -> Deps:
    return allowing(make_deps(chat))


@pytest.fixture
def http(deps: Deps) -> Iterator[TestClient]:
    with TestClient(served(deps)) as client:
        yield client


def post(client: TestClient, body: Any = None, **headers: str) -> Any:
    return client.post("/ask", json=QUESTION if body is None else body, headers=headers)


def rate_windows(deps: Deps) -> int:
    with sqlite3.connect(deps.settings.state_path) as db:
        (n,) = db.execute("SELECT count(*) FROM rate_windows").fetchone()
    return int(n)


# Origins and server keys.


def test_a_request_without_origin_or_key_is_refused_403(
    http: TestClient, chat: ScriptedChatModel
) -> None:
    response = post(http)
    assert response.status_code == 403
    assert response.json()["reason"] == "api_key_required"
    assert chat.calls == []


def test_a_request_from_a_foreign_origin_is_refused_403_without_cors_headers(
    http: TestClient, chat: ScriptedChatModel
) -> None:
    response = post(http, Origin=FOREIGN)
    assert response.status_code == 403
    assert response.json()["reason"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in response.headers
    assert chat.calls == []


def test_a_foreign_origin_is_refused_even_with_a_server_key(http: TestClient) -> None:
    assert post(http, Origin=FOREIGN, **{"X-Api-Key": SERVER_KEY}).status_code == 403


def test_a_listed_origin_is_answered_with_its_cors_headers(http: TestClient) -> None:
    response = post(http, Origin=ORIGIN)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "origin" in response.headers["vary"].lower()
    assert "x-trace-id" in response.headers["access-control-expose-headers"]


def test_serve_allows_its_own_origin_so_its_pages_work(http: TestClient) -> None:
    for own in (f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}"):
        assert post(http, Origin=own).status_code == 200, own
    assert post(http, Origin="http://127.0.0.1:9999").status_code == 403


def test_a_server_key_lets_a_request_without_origin_in(http: TestClient) -> None:
    assert post(http, **{"X-Api-Key": SERVER_KEY}).status_code == 200
    wrong = post(http, **{"X-Api-Key": SERVER_KEY + "x"})
    assert wrong.status_code == 403


def test_server_keys_that_cannot_be_read_are_a_503_not_a_500(deps: Deps) -> None:
    def unreadable() -> frozenset[str]:
        raise ConfigurationError("cannot read SSM parameter /candor/api-keys: AccessDenied")

    edge = Edge(origins=frozenset({ORIGIN}), server_keys=unreadable)
    app = create_app(lambda: deps, edge_provider=lambda: edge)

    response = post(TestClient(app), **{"X-Api-Key": SERVER_KEY})

    assert response.status_code == 503
    assert response.json()["reason"] == "misconfigured"
    assert "SSM" not in response.text


def test_while_no_origins_are_set_loopback_clients_need_no_origin(
    make_deps: MakeDeps, chat: ScriptedChatModel
) -> None:
    deps = allowing(make_deps(chat), allowed_origins=(), api_keys=None)
    app = served(deps)
    assert post(TestClient(app, client=("127.0.0.1", 40000))).status_code == 200
    assert post(TestClient(app, client=("::1", 40000))).status_code == 200
    assert post(TestClient(app, client=("192.0.2.7", 40000))).status_code == 403


def test_once_origins_are_set_loopback_clients_need_a_key_like_any_other(deps: Deps) -> None:
    local = TestClient(served(deps), client=("127.0.0.1", 40000))
    assert post(local).status_code == 403


def test_get_routes_stay_public(http: TestClient) -> None:
    assert http.get("/health").status_code == 200
    assert http.get("/health", headers={"Origin": FOREIGN}).status_code == 200
    assert http.get("/openapi.json").status_code == 200


# Preflight.


def preflight(client: TestClient, origin: str) -> Any:
    return client.options(
        "/ask",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )


def test_a_preflight_from_a_listed_origin_is_answered_204(
    http: TestClient, chat: ScriptedChatModel
) -> None:
    response = preflight(http, ORIGIN)
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "content-type" in response.headers["access-control-allow-headers"]
    assert chat.calls == []


def test_a_preflight_from_a_foreign_origin_is_refused(http: TestClient) -> None:
    response = preflight(http, FOREIGN)
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers


# Content type and size: checked by the edge, whatever FastAPI's default is.


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_body_that_is_not_json_is_refused_415(
    http: TestClient, chat: ScriptedChatModel, content_type: str
) -> None:
    # A cross-site form or fetch can send text/plain without a preflight.
    response = http.post(
        "/ask",
        content=json.dumps(QUESTION),
        headers={"Origin": ORIGIN, "Content-Type": content_type},
    )
    assert response.status_code == 415
    assert response.json()["reason"] == "unsupported_media_type"
    assert chat.calls == []


def test_json_with_a_charset_is_json(http: TestClient) -> None:
    response = http.post(
        "/ask",
        content=json.dumps(QUESTION),
        headers={"Origin": ORIGIN, "Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200


def test_a_20_kb_body_is_refused_413(http: TestClient, chat: ScriptedChatModel) -> None:
    body = {"question": "What?", "padding": "x" * 20 * 1024}
    response = post(http, body, Origin=ORIGIN)
    assert response.status_code == 413
    assert response.json()["reason"] == "body_too_large"
    assert chat.calls == []


def test_a_chunked_body_over_16_kb_is_refused_413_without_a_length(http: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"question": "'
        for _ in range(20):
            yield b"x" * 1024
        yield b'"}'

    response = http.post(
        "/ask", content=chunks(), headers={"Origin": ORIGIN, "Content-Type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413


def test_the_project_admits_only_the_fastapi_the_edge_was_tested_with() -> None:
    # The 415 and 413 above come from candor.api.edge; they ran on this FastAPI.
    pinned = next(
        Requirement(line)
        for line in (ROOT / "layers/candor/requirements.txt").read_text().splitlines()
        if line.startswith("fastapi==")
    )
    (pin,) = pinned.specifier
    assert fastapi.__version__ == pin.version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = next(Requirement(d) for d in project["dependencies"] if d.startswith("fastapi"))
    assert wanted.specifier.contains(pin.version)
    assert not wanted.specifier.contains("0.115.0")  # no strict content-type check of its own


# Sessions the server owns.


def test_a_new_conversation_gets_a_signed_session_id(http: TestClient, deps: Deps) -> None:
    session_id = post(http, Origin=ORIGIN).json()["session_id"]
    assert signer_for(deps.settings).verify(session_id) == session_id
    again = post(http, {**QUESTION, "session_id": session_id}, Origin=ORIGIN)
    assert again.status_code == 200
    assert again.json()["session_id"] == session_id


@pytest.mark.parametrize(
    "forged",
    [
        "attacker-chosen-id",
        "AAAAAAAAAAAAAAAAAAAAAA.1700000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    ],
)
def test_a_forged_session_id_is_refused_401_and_nothing_is_written(
    http: TestClient, deps: Deps, chat: ScriptedChatModel, forged: str
) -> None:
    response = post(http, {**QUESTION, "session_id": forged}, Origin=ORIGIN)
    assert response.status_code == 401
    assert response.json()["reason"] == "session_invalid"
    assert chat.calls == []
    assert rate_windows(deps) == 0
    assert deps.state.get_session(forged).history == []


def test_a_tampered_session_id_is_refused_401(http: TestClient) -> None:
    session_id = post(http, Origin=ORIGIN).json()["session_id"]
    nonce, issued, mac = session_id.split(".")
    tampered = f"{nonce}.{int(issued) + 1}.{mac}"
    response = post(http, {**QUESTION, "session_id": tampered}, Origin=ORIGIN)
    assert response.status_code == 401


def test_an_expired_session_id_is_refused_401(http: TestClient, deps: Deps) -> None:
    signer = signer_for(deps.settings)
    old = signer.issue(now=time.time() - deps.settings.session_max_age_seconds - 1)
    response = post(http, {**QUESTION, "session_id": old}, Origin=ORIGIN)
    assert response.status_code == 401
    assert response.json()["reason"] == "session_invalid"


def test_an_id_signed_with_another_key_is_refused(http: TestClient) -> None:
    other = SessionSigner("another-secret-0123456789", max_age_seconds=3600).issue()
    assert post(http, {**QUESTION, "session_id": other}, Origin=ORIGIN).status_code == 401


def test_moderation_state_follows_only_signed_ids(
    make_deps: MakeDeps,
) -> None:
    abusive = {"abusive": True, "kind": "question"}
    chat = ScriptedChatModel({"Triage": [abusive] * 2, "Moderation": [{"insulting": True}] * 2})
    deps = allowing(make_deps(chat))
    http = TestClient(served(deps), headers={"Origin": ORIGIN})
    session_id = post(http, {"question": "You idiot."}).json()["session_id"]
    post(http, {"question": "Moron.", "session_id": session_id})

    assert deps.state.get_session(session_id).status == "ended"
    # Knowing the id of a session is no way in without the key that signed it.
    assert post(http, {"question": "Hello?", "session_id": session_id + "x"}).status_code == 401


def test_the_embedded_default_generates_its_session_key_once_private(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    first = signer_for(settings).issue()
    path = tmp_path / "data" / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_text()
    assert signer_for(Settings(data_dir=tmp_path / "data")).verify(first) == first
    assert path.read_text() == key


def test_the_configured_session_secret_is_used(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, session_secret=SESSION_SECRET)
    session_id = signer_for(settings).issue()
    assert SessionSigner(SESSION_SECRET, max_age_seconds=60).verify(session_id) == session_id
    assert not (tmp_path / SECRET_FILE).exists()


# Outages through the served app.


def test_an_index_outage_through_serve_is_a_503_with_a_fixed_message(deps: Deps) -> None:
    down = dataclasses.replace(deps, index=DownIndex())
    response = post(TestClient(served(down)), Origin=ORIGIN)
    assert response.status_code == 503
    assert response.json()["detail"] == "the document index is unavailable; try again shortly"
    assert response.headers["access-control-allow-origin"] == ORIGIN


# candor serve on an address other machines can reach.


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.0.2.7", "docs.internal"])
def test_candor_serve_on_a_reachable_address_with_no_origins_refuses_to_start(
    settings: Settings, host: str
) -> None:
    # Anyone on the network could otherwise send Origin: http://127.0.0.1:8000 and be answered.
    with pytest.raises(ConfigurationError, match="CANDOR_ALLOWED_ORIGINS"):
        create_local_app(settings, host=host)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_candor_serve_on_loopback_with_no_origins_starts(settings: Settings, host: str) -> None:
    create_local_app(settings, host=host)


def test_candor_serve_on_a_reachable_address_starts_once_origins_are_set(
    settings: Settings,
) -> None:
    create_local_app(settings.model_copy(update={"allowed_origins": (ORIGIN,)}), host="0.0.0.0")


def test_the_serve_command_says_why_it_refuses_and_exits_non_zero(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from candor import cli

    monkeypatch.setenv("CANDOR_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("CANDOR_ALLOWED_ORIGINS", raising=False)

    code = cli.main(["serve", "--host", "0.0.0.0", "--port", "8765"])

    assert code != 0
    err = capsys.readouterr().err
    assert "refusing to serve on 0.0.0.0" in err and "CANDOR_ALLOWED_ORIGINS" in err
