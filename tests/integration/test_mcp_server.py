"""MCP through the official `mcp` client: over Streamable HTTP against `candor serve`'s app on
loopback (uvicorn in a thread, the scripted chat model), and over stdio against
`candor mcp` in a subprocess (its chat model the OpenAI-wire test server on loopback).

Both of the client's ways in over HTTP: `legacy` (the initialize handshake) and
`auto` (the 2026-07-28 per-request protocol, which it probes first). What the server
did is read from the scripted model's recorded calls and the state store.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from candor import guards
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.deps import Deps
from tests.conftest import PASSAGES, MakeDeps
from tests.support.edge import SERVER_KEY, allowing
from tests.support.fakes import ScriptedChatModel
from tests.support.openai_server import Reply, serve
from tests.support.widget_server import bound_socket, candor_server

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What does --force-with-lease do?"
TRIAGE = {"abusive": False, "kind": "question"}
ANSWER = "It refuses to overwrite work you have not seen [1]."
ANSWERING: dict[str, list[Any]] = {"Triage": [TRIAGE], "judge": [True], "text": [ANSWER]}
QUOTE = "the push is refused unless the remote ref still points at the commit"
MODES = ["legacy", "auto"]


@dataclass
class Served:
    url: str
    chat: ScriptedChatModel
    deps: Deps

    def client(self, mode: str, key: str = SERVER_KEY) -> Client:
        http = httpx2.AsyncClient(headers={"x-api-key": key})
        return Client(streamable_http_client(self.url, http_client=http), mode=mode)


Start = Callable[..., Served]


@pytest.fixture
def start(make_deps: MakeDeps) -> Iterator[Start]:
    with ExitStack() as stack:

        def run(script: dict[str, list[Any]] | None = None, **settings: Any) -> Served:
            chat = ScriptedChatModel(dict(ANSWERING if script is None else script))
            deps = allowing(make_deps(chat), **settings)
            origin = stack.enter_context(candor_server(deps, bound_socket()))
            return Served(f"{origin}/mcp", chat, deps)

        yield run


def mcp_error(raised: BaseException) -> MCPError:
    """The MCPError the client raised, out of the task groups it may come wrapped in."""
    while isinstance(raised, BaseExceptionGroup):
        (raised,) = raised.exceptions
    assert isinstance(raised, MCPError), raised
    return raised


@pytest.mark.parametrize("mode", MODES)
def test_a_client_lists_the_two_tools_with_their_schemas(start: Start, mode: str) -> None:
    async def listed() -> Any:
        async with start().client(mode) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in asyncio.run(listed())}
    assert set(tools) == {"ask_docs", "search_docs"}
    ask, search = tools["ask_docs"], tools["search_docs"]
    assert "decline" in (ask.description or "") and "citation" in (ask.description or "")
    assert ask.input_schema["required"] == ["question"]
    assert set(ask.input_schema["properties"]) == {"question", "conversation_id"}
    assert search.input_schema["required"] == ["query"]
    assert search.input_schema["properties"]["k"]["maximum"] == 10
    assert ask.output_schema is not None and "sources" in ask.output_schema["properties"]
    assert ask.annotations is not None and ask.annotations.read_only_hint


@pytest.mark.parametrize("mode", MODES)
def test_ask_docs_answers_with_its_sources(start: Start, mode: str) -> None:
    served = start()

    async def asked() -> Any:
        async with served.client(mode) as client:
            return await client.call_tool("ask_docs", {"question": QUESTION})

    result = asyncio.run(asked())
    assert not result.is_error
    found = result.structured_content
    assert (found["answer"], found["decision"]) == (ANSWER, "answered")
    (source,) = found["sources"]
    assert (source["number"], source["title"], source["source"]) == (
        1,
        "git-push(1)",
        "git-push.html",
    )
    assert QUOTE in source["quote"]
    (text,) = result.content
    assert text.text.startswith(f"{ANSWER}\n\nSources:\n[1] git-push(1)")
    assert served.chat.kinds() == ["Triage", "judge", "text"]
    # The same record as an answer of POST /ask: the owner's insights see it.
    assert served.deps.state.get_trace(found["trace_id"], now=time.time()) is not None


def test_a_follow_up_continues_the_conversation_it_names(start: Start) -> None:
    follow_up = {"abusive": False, "kind": "follow_up"}
    served = start({"Triage": [TRIAGE, follow_up], "judge": [True] * 2, "text": [ANSWER] * 2})

    async def conversation() -> tuple[Any, Any]:
        async with served.client("legacy") as client:
            first = await client.call_tool("ask_docs", {"question": QUESTION})
            more = {
                "question": "Tell me more.",
                "conversation_id": first.structured_content["conversation_id"],
            }
            return first, await client.call_tool("ask_docs", more)

    first, second = asyncio.run(conversation())
    assert (
        second.structured_content["conversation_id"] == first.structured_content["conversation_id"]
    )
    graded = [call for call in served.chat.calls if call.kind == "judge"][1]
    assert "force-with-lease" in str(graded.messages)  # graded as the question it continues


def test_a_conversation_id_this_server_did_not_sign_is_invalid_params(start: Start) -> None:
    served = start()

    async def forged() -> None:
        async with served.client("legacy") as client:
            await client.call_tool(
                "ask_docs", {"question": QUESTION, "conversation_id": "forged-id-1234"}
            )

    with pytest.raises(BaseException) as refused:
        asyncio.run(forged())
    error = mcp_error(refused.value)
    assert (error.code, error.data["reason"]) == (-32602, "session_invalid")
    assert served.chat.calls == []


@pytest.mark.parametrize("mode", MODES)
def test_search_docs_returns_scored_passages_without_a_model_call(start: Start, mode: str) -> None:
    served = start()

    async def searched() -> Any:
        async with served.client(mode) as client:
            return await client.call_tool("search_docs", {"query": "force with lease", "k": 2})

    result = asyncio.run(searched())
    passages = result.structured_content["passages"]
    assert len(passages) == 2
    assert passages[0]["source"] == "git-push.html"
    assert passages[0]["heading"] == "OPTIONS > --force-with-lease"
    assert passages[0]["score"] >= passages[1]["score"]
    assert "git-push(1)" in result.content[0].text
    assert served.chat.calls == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"question": ""}, "question"), ({"question": "a\x1bb"}, "question"), ({}, "question")],
)
def test_arguments_the_tool_cannot_take_are_invalid_params(
    start: Start, arguments: dict[str, Any], field: str
) -> None:
    served = start()

    async def called() -> None:
        async with served.client("legacy") as client:
            await client.call_tool("ask_docs", arguments)

    with pytest.raises(BaseException) as refused:
        asyncio.run(called())
    error = mcp_error(refused.value)
    assert error.code == -32602
    assert field in error.message
    assert served.chat.calls == []


@pytest.mark.parametrize("mode", MODES)
def test_a_wrong_key_is_refused_as_a_json_rpc_error(start: Start, mode: str) -> None:
    served = start()

    async def connect() -> None:
        async with served.client(mode, key="not-a-key") as client:
            await client.list_tools()

    with pytest.raises(BaseException) as refused:
        asyncio.run(connect())
    error = mcp_error(refused.value)
    assert (error.code, error.data["reason"]) == (-32061, "invalid_api_key")


def test_a_key_over_its_limit_gets_a_rate_limited_error_with_retry_after(start: Start) -> None:
    served = start(rate_key_limit=2)

    async def calls() -> None:
        async with served.client("legacy") as client:
            await client.call_tool("ask_docs", {"question": QUESTION})
            await client.call_tool("search_docs", {"query": "amend"})  # counts as well
            await client.call_tool("search_docs", {"query": "bisect"})

    with pytest.raises(BaseException) as refused:
        asyncio.run(calls())
    error = mcp_error(refused.value)
    assert (error.code, error.data["reason"]) == (-32069, "rate_limited")
    assert error.data["retry_after"] >= 1
    assert served.chat.kinds() == ["Triage", "judge", "text"]


def test_a_spent_budget_is_an_unavailable_error_and_no_model_call(start: Start) -> None:
    served = start(budget_daily_usd=0)

    async def asked() -> None:
        async with served.client("auto") as client:
            await client.call_tool("ask_docs", {"question": QUESTION})

    with pytest.raises(BaseException) as refused:
        asyncio.run(asked())
    error = mcp_error(refused.value)
    assert (error.code, error.data["reason"]) == (-32073, "budget_exhausted")
    assert "budget" in error.message
    assert served.chat.calls == []
    assert served.deps.state.budget_spent(guards.daily_ledger(time.time())) == 0


# Over stdio: `candor mcp` as a desktop assistant starts it.


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(
        data / "indexes" / "default.sqlite3", embedder.dimensions, embedder=embedder.name
    )
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    index.close()
    return data


def stdio_server(data: Path, **variables: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANDOR_")}
    env |= {"CANDOR_DATA_DIR": str(data), "CANDOR_EMBEDDER_BACKEND": "hashing", **variables}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "candor.cli", "mcp"], env=env, cwd=str(ROOT)
    )


def test_candor_mcp_over_stdio_lists_and_calls_both_tools(index_dir: Path) -> None:
    with serve() as openai:
        # The screening classifier and the names in the passages settle everything but
        # the answer itself: one chat call, streamed by the test server.
        openai.fake.chat.append(Reply(content=ANSWER))
        params = stdio_server(
            index_dir,
            CANDOR_CHAT_BACKEND="openai",
            CANDOR_OPENAI_BASE_URL=openai.base_url,
            CANDOR_OPENAI_API_KEY="sk-test",
        )

        async def session() -> tuple[Any, Any, Any]:
            async with Client(params, mode="legacy") as client:
                tools = (await client.list_tools()).tools
                asked = await client.call_tool("ask_docs", {"question": QUESTION})
                found = await client.call_tool("search_docs", {"query": "bisect", "k": 1})
                return tools, asked, found

        tools, asked, found = asyncio.run(session())
        chat_requests = openai.fake.bodies("/v1/chat/completions")
    assert {tool.name for tool in tools} == {"ask_docs", "search_docs"}
    assert asked.structured_content["decision"] == "answered"
    assert asked.structured_content["answer"] == ANSWER
    assert asked.structured_content["sources"][0]["source"] == "git-push.html"
    assert found.structured_content["passages"][0]["source"] == "git-bisect.html"
    assert len(chat_requests) == 1  # search_docs made none
    assert QUESTION in str(chat_requests[0]["messages"])


def test_candor_mcp_on_an_empty_index_says_so_and_exits(tmp_path: Path) -> None:
    import subprocess

    params = stdio_server(tmp_path / "empty")
    done = subprocess.run(
        [params.command, *params.args],
        env=params.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2
    assert "candor ingest" in done.stderr
    assert done.stdout == ""  # stdout is the protocol's alone
