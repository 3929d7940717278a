"""With CANDOR_STORE_QUESTIONS=false no visitor text reaches a log line or an X-Ray subsegment.

A refused or off-schema reply from the provider quotes what the visitor wrote (the
refusal text, pydantic's `input_value`). The question goes through the OpenAI
adapter against the loopback server, in an X-Ray segment kept in memory (as
tests/integration/test_tracing.py does), and its failure through the API's error
table, which logs it; then every captured log record, formatted with its
traceback, and every segment document is searched for the visitor's e-mail
address and SSN-shaped number.

Also: with questions not stored, the keys of the answer cache and the verdict
cache are HMACs under the deployment's secret, so that a guessed question cannot
be confirmed from the keys alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_xray_sdk import global_sdk_config
from aws_xray_sdk.core import xray_recorder
from aws_xray_sdk.core.context import Context

from candor import observability, service
from candor.api.errors import public_error
from candor.backends.openai_chat import OpenAIChatModel
from candor.deps import Deps
from candor.errors import ModelError
from candor.settings import DEFAULT_PRICES
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel
from tests.support.openai_server import Reply, RunningOpenAI, serve

pytestmark = pytest.mark.integration

EMAIL = "jane.doe@example.com"
SSN = "078-05-1120"
QUESTION = f"My address is {EMAIL} and my SSN is {SSN}: why was my push rejected?"


class KeepingEmitter:
    def __init__(self) -> None:
        self.documents: list[dict[str, Any]] = []

    def send_entity(self, entity: Any) -> None:
        self.documents.append(json.loads(entity.serialize()))

    def set_daemon_address(self, address: str | None) -> None: ...

    @property
    def ip(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return 2000


@pytest.fixture
def emitter(monkeypatch: pytest.MonkeyPatch) -> Iterator[KeepingEmitter]:
    keeping = KeepingEmitter()
    tracer = observability.tracer
    was_enabled = global_sdk_config.sdk_enabled()
    global_sdk_config.set_sdk_enabled(True)
    monkeypatch.setattr(tracer, "disabled", False)
    xray_recorder.configure(
        emitter=keeping, context=Context(), sampling=False, streaming_threshold=1000
    )
    yield keeping
    global_sdk_config.set_sdk_enabled(was_enabled)


@pytest.fixture
def server() -> Iterator[RunningOpenAI]:
    with serve() as running:
        yield running


def private(make_deps: MakeDeps, server: RunningOpenAI) -> Deps:
    deps = make_deps(ScriptedChatModel())
    chat = OpenAIChatModel(
        model="gpt-4o-mini",
        api_key="sk-test",
        price=DEFAULT_PRICES["gpt-4o-mini"],
        base_url=server.base_url,
        max_retries=0,
    )
    settings = deps.settings.model_copy(update={"store_questions": False})
    return dataclasses.replace(deps, chat=chat, settings=settings)


# What the provider sends back: each quotes the visitor.
REFUSED = Reply(content=None, refusal=f"I can't act on requests about {EMAIL} or {SSN}.")
OFF_SCHEMA = Reply(content=f"Sure! The visitor {EMAIL} ({SSN}) asks about a push.")
OFF_SCHEMA_JSON = Reply(content=json.dumps({"abusive": False, "kind": EMAIL, "ssn": SSN}))


@pytest.mark.parametrize(
    "reply", [REFUSED, OFF_SCHEMA, OFF_SCHEMA_JSON], ids=["refused", "off_schema", "off_enum"]
)
def test_a_refused_or_off_schema_reply_leaves_no_visitor_text_in_logs_or_subsegments(
    make_deps: MakeDeps,
    server: RunningOpenAI,
    emitter: KeepingEmitter,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
) -> None:
    server.fake.chat.append(reply)
    deps = private(make_deps, server)
    caplog.set_level(logging.DEBUG)

    async def traced() -> ModelError:
        xray_recorder.begin_segment("candor-ask")
        try:
            await service.ask(deps, QUESTION)
        except ModelError as error:
            return error
        finally:
            xray_recorder.end_segment()
        raise AssertionError("the reply was of use")

    error = asyncio.run(traced())
    public = public_error(error, "t" * 32)

    assert public.status == 503
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    logged = "\n".join(formatter.format(record) for record in caplog.records)
    assert "request failed" in logged  # the failure was logged
    traced_text = json.dumps(emitter.documents)
    assert "## moderate" in traced_text  # the node's subsegment was recorded
    for text in (logged, traced_text, str(error), repr(error)):
        assert EMAIL not in text and SSN not in text
    # What it says instead: the kind of failure.
    assert error.kind in {"refused", "off_schema"}
    assert error.kind in logged


def stored_keys(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        cached = {row[0] for row in db.execute("SELECT digest FROM answer_cache")}
        verdicts = {row[0] for row in db.execute("SELECT digest FROM verdicts")}
    return cached | verdicts


def test_without_stored_questions_the_cache_keys_depend_on_the_deployments_secret(
    make_deps: MakeDeps, tmp_path: Path
) -> None:
    from candor.backends.sqlite_state import SqliteStateStore

    def keys(secret: str, *, store_questions: bool, folder: str) -> set[str]:
        chat = ScriptedChatModel(
            {
                "Triage": [{"abusive": False, "kind": "question"}],
                "judge": [True],
                "text": ["It refuses to overwrite work you have not seen [1]."],
            }
        )
        deps = make_deps(chat)
        path = tmp_path / folder / "state.sqlite3"
        state = SqliteStateStore(path)
        update = {"store_questions": store_questions, "session_secret": secret}
        settings = deps.settings.model_validate(deps.settings.model_dump() | update)
        try:
            asyncio.run(
                service.ask(
                    dataclasses.replace(deps, settings=settings, state=state),
                    "What does --force-with-lease do?",
                )
            )
        finally:
            state.close()
        found = stored_keys(path)
        assert len(found) == 2  # the answer and the triage verdict
        return found

    one = keys("deployment-one-secret-0123456789", store_questions=False, folder="a")
    other = keys("deployment-two-secret-0123456789", store_questions=False, folder="b")
    stored = keys("deployment-one-secret-0123456789", store_questions=True, folder="c")
    stored_elsewhere = keys("deployment-two-secret-0123456789", store_questions=True, folder="d")

    # Without the secret, knowing the question and the code does not give its keys.
    assert one.isdisjoint(other)
    assert one.isdisjoint(stored)
    # Questions stored: the keys are plain digests (the question is in the trace anyway).
    assert stored == stored_elsewhere
