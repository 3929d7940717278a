"""Warm start: the process loads what the first question needs before it comes.

GET /health answers 503 `warming` until the warm-up is done (the Lambda Web
Adapter's readiness check waits for that), `candor serve` starts it at start, and
the embedded chat model is handed every fixed system prompt the graph sends.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from candor.api.app import create_app
from candor.api.local import create_local_app
from candor.deps import built_once
from candor.graph import prompts
from candor.ports import Preloadable
from candor.settings import Settings
from candor.warmup import Warmup
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel, SlowToLoadChat
from tests.support.outages import DownIndex

pytestmark = pytest.mark.unit


def test_health_says_warming_with_503_until_the_model_has_loaded(make_deps: MakeDeps) -> None:
    chat = SlowToLoadChat({})
    deps = make_deps(chat)
    app = create_app(lambda: deps)
    http = TestClient(app)

    warming = http.get("/health")
    assert warming.status_code == 503
    assert warming.json()["status"] == "warming"
    assert set(warming.json()["dependencies"].values()) == {"warming"}
    assert warming.headers["retry-after"].isdigit()

    chat.loaded.set()
    assert app.state.warmup.wait(10)
    ready = http.get("/health")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ok"
    assert chat.preloaded == list(prompts.fixed_systems(deps.settings.site_name))


def test_the_preloaded_prompts_are_every_system_prompt_the_graph_sends() -> None:
    fixed = set(prompts.fixed_systems("Example Docs"))
    sent = [
        prompts.moderation("hi"),
        prompts.triage("hi"),
        prompts.grade("<passage>x</passage>", "why?"),
        prompts.answer("<passage>x</passage>", "why?"),
        prompts.answer_again("<passage>x</passage>", "why?"),
        prompts.rewrite("why?", ["why"]),
        prompts.converse("hello", "Example Docs"),
    ]
    for messages in sent:
        systems = [m["content"] for m in messages if m["role"] == "system"]
        assert systems and set(systems) <= fixed


def test_the_embedded_chat_model_is_preloadable(tmp_path: Path) -> None:
    from candor.backends.llama_chat import LlamaChatModel

    assert isinstance(LlamaChatModel(tmp_path / "model.gguf"), Preloadable)
    assert not isinstance(ScriptedChatModel({}), Preloadable)


def test_a_failed_warmup_leaves_health_degraded_not_warming(make_deps: MakeDeps) -> None:
    deps = dataclasses.replace(make_deps(ScriptedChatModel({})), index=DownIndex())
    app = create_app(lambda: deps)

    response = TestClient(app).get("/health")

    assert app.state.warmup.status == "failed"
    assert response.status_code == 200
    assert response.json()["status"] == "degraded"


def test_warm_start_off_builds_the_dependencies_and_loads_nothing(make_deps: MakeDeps) -> None:
    chat = SlowToLoadChat({})
    deps = make_deps(chat)
    deps = dataclasses.replace(
        deps, settings=deps.settings.model_copy(update={"warm_start": False})
    )

    response = TestClient(create_app(lambda: deps)).get("/health")

    assert response.status_code == 200
    assert chat.preloaded == []


def test_serve_starts_warming_before_any_request(settings: Settings) -> None:
    # A cloud chat backend: nothing to preload, no call made (the key is never used).
    served = settings.model_copy(
        update={
            "chat_backend": "openai",
            "openai_api_key": SecretStr("sk-unused"),
            "screening": True,
        }
    )

    app = create_local_app(served, warm=True)

    assert app.state.warmup.wait(30)
    assert app.state.warmup.status == "ready"
    assert {"state", "index", "retrieval", "screening"} <= set(app.state.warmup.steps)


def test_a_warmup_and_a_first_request_build_the_dependencies_once() -> None:
    builds: list[int] = []

    def build() -> int:
        time.sleep(0.2)  # long enough for the other threads to arrive meanwhile
        builds.append(1)
        return len(builds)

    provider = built_once(build)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(provider())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert builds == [1]
    assert results == [1, 1, 1, 1]


def test_warmup_starts_once() -> None:
    started = threading.Event()
    calls: list[int] = []

    def provider() -> object:
        calls.append(1)
        started.wait(5)
        raise RuntimeError("no dependencies in this test")

    warmup = Warmup(provider)  # type: ignore[arg-type]
    warmup.start()
    warmup.start()
    assert warmup.status == "warming"
    started.set()
    assert warmup.wait(5)
    warmup.start()
    assert calls == [1]
    finished: str = warmup.status  # (mypy narrowed it to "warming" above)
    assert finished == "failed"


def test_the_code_digest_of_the_answer_cache_is_computed_in_the_warmup(
    make_deps: MakeDeps,
) -> None:
    # The answer cache keys on a digest of the package (1.4 MB read): computed by
    # the first cacheable question, it was paid by a visitor, not by the start.
    from candor import release, warmup

    deps = make_deps(ScriptedChatModel({}))
    assert deps.settings.cache_enabled
    release.code_digest.cache_clear()
    steps = warmup.warm(deps)
    assert "code" in steps
    assert release.code_digest.cache_info().currsize == 1
