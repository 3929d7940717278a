"""X-Ray: each graph node runs in a subsegment annotated with the node and its decision.

The recorder is the real aws_xray_sdk one, with its emitter replaced by one that
keeps the segment documents instead of sending them to the daemon's UDP port, and
a thread-local context, as on Lambda, where the coroutines share one thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_xray_sdk import global_sdk_config
from aws_xray_sdk.core import xray_recorder
from aws_xray_sdk.core.context import Context

from candor import observability
from candor.graph import runner
from candor.graph.state import GraphState
from tests.conftest import MakeDeps
from tests.support.fakes import ScriptedChatModel

pytestmark = pytest.mark.integration


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
    tracer = observability.tracer  # made here outside Lambda: it disables the SDK
    was_enabled = global_sdk_config.sdk_enabled()
    global_sdk_config.set_sdk_enabled(True)
    monkeypatch.setattr(tracer, "disabled", False)
    xray_recorder.configure(
        emitter=keeping, context=Context(), sampling=False, streaming_threshold=1000
    )
    yield keeping
    global_sdk_config.set_sdk_enabled(was_enabled)


def test_each_node_is_a_subsegment_annotated_with_its_decision(
    emitter: KeepingEmitter, make_deps: MakeDeps
) -> None:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [True],
            "text": ["It refuses to overwrite work you have not seen [1]."],
        }
    )
    state = GraphState(question="What does --force-with-lease do?", session_id="s" * 16, top_k=3)

    async def traced_run() -> GraphState:
        xray_recorder.begin_segment("candor-ask")
        try:
            return await runner.run(state, make_deps(chat))
        finally:
            xray_recorder.end_segment()

    final = asyncio.run(traced_run())

    (segment,) = emitter.documents
    subsegments = segment["subsegments"]
    assert [s["name"] for s in subsegments] == [f"## {step.node}" for step in final.trace]
    assert [s["annotations"]["node"] for s in subsegments] == [step.node for step in final.trace]
    generate = subsegments[-1]
    assert generate["annotations"]["decision"] == "answered"
    assert "decision" not in subsegments[0]["annotations"]


def test_a_node_outside_any_segment_still_runs(
    emitter: KeepingEmitter, make_deps: MakeDeps
) -> None:
    # X-Ray hands out no subsegment when there is no segment; the request goes on.
    chat = ScriptedChatModel({"Triage": [{"abusive": False, "kind": "greeting"}], "text": ["Hi!"]})
    state = GraphState(question="Hello", session_id="s" * 16, top_k=3)

    final = asyncio.run(runner.run(state, make_deps(chat)))

    assert (final.decision, final.answer) == ("smalltalk", "Hi!")
    assert emitter.documents == []
