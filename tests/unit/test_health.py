"""GET /health is public, cheap and terse; `candor health` prints the details."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from candor.api.app import create_app
from candor.api.health import CACHE_SECONDS, HealthCache
from candor.cli import main
from candor.deps import Deps
from candor.errors import ConfigurationError
from tests.conftest import MakeDeps, clear_candor_env
from tests.support.fakes import ScriptedChatModel
from tests.support.outages import INTERNAL_TEXT, DownIndex, FailingState

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_health_of_a_down_index_is_degraded_without_its_exception_text(
    make_deps: MakeDeps,
) -> None:
    deps = dataclasses.replace(make_deps(ScriptedChatModel({})), index=DownIndex())

    response = TestClient(create_app(lambda: deps)).get("/health")

    assert response.status_code == 200
    assert response.json() == {
        "status": "degraded",
        "dependencies": {"index": "degraded", "state": "ok", "embedder": "ok", "chat": "ok"},
    }
    for secret in INTERNAL_TEXT.split():
        assert secret not in response.text


def test_health_checks_the_backends_at_most_once_every_30_seconds(make_deps: MakeDeps) -> None:
    deps = make_deps(ScriptedChatModel({}))
    state = FailingState(deps.state)
    # The warm-up reads the state store once too (tests/unit/test_warmup.py); this
    # test counts the health checks' reads alone.
    settings = deps.settings.model_copy(update={"warm_start": False})
    counted = dataclasses.replace(deps, state=state, settings=settings)
    app = create_app(lambda: counted)
    clock = Clock()
    app.state.health = HealthCache(clock=clock)
    http = TestClient(app)

    for _ in range(20):
        assert http.get("/health").status_code == 200
    assert state.calls["get_session"] == 1

    clock.now += CACHE_SECONDS - 1
    http.get("/health")
    assert state.calls["get_session"] == 1

    clock.now += 1
    http.get("/health")
    assert state.calls["get_session"] == 2


def test_health_when_the_dependencies_cannot_be_built_is_degraded_and_terse() -> None:
    def broken() -> Deps:
        raise ConfigurationError(f"cannot read SSM parameter {INTERNAL_TEXT}")

    response = TestClient(create_app(broken)).get("/health")

    assert response.status_code == 200
    assert response.json()["status"] == "degraded"
    assert set(response.json()["dependencies"].values()) == {"degraded"}
    assert "SSM" not in response.text


@pytest.fixture
def local_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment of a local install whose model file exists but is not loaded."""
    clear_candor_env(monkeypatch)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    monkeypatch.setenv("CANDOR_LOCAL_MODEL_PATH", str(model))
    return tmp_path


def test_candor_health_prints_each_dependency_with_its_details(
    local_settings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["health", "--json"])

    report = json.loads(capsys.readouterr().out)
    assert code == 1  # the index is empty
    assert report["status"] == "degraded"
    assert report["dependencies"]["index"]["detail"] == "empty: run `candor ingest`"
    assert report["dependencies"]["state"]["ok"] is True
    assert report["dependencies"]["embedder"]["backend"] == "hashing"


def test_candor_health_names_the_dependency_that_cannot_be_built(
    local_settings: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CANDOR_STATE_BACKEND", "dynamodb")  # without CANDOR_STATE_TABLE

    code = main(["health"])

    out = capsys.readouterr().out
    assert code == 1
    (state,) = [line for line in out.splitlines() if line.startswith("state")]
    assert "DEGRADED" in state and "CANDOR_STATE_TABLE" in state
