"""MCP and the OpenAI-compatible API end to end with the real local models and real Git pages.

Ten pages of the dev corpus are ingested through the CLI; `candor serve`'s app
(create_local_app, the factory's own dependencies) answers on loopback under uvicorn.
OpenAI's client gets a cited answer, streamed and not; the `mcp` client calls both
tools over Streamable HTTP, and over stdio against `candor mcp`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from openai import OpenAI

from candor.api.local import create_local_app
from candor.settings import Settings
from tests.e2e.test_local_end_to_end import PAGES, corpus_dir
from tests.support import local_models
from tests.support.widget_server import bound_socket, serve

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

local_models.require(*local_models.CHAT, *local_models.EMBEDDER)

ROOT = Path(__file__).resolve().parents[2]
KEY = "assistant-key-0123456789"
BISECT = (
    "When using `git bisect run`, which exit code should my test script return "
    "if the current commit cannot be tested?"
)
LFS = "How do I configure Git LFS to track large video files in my repository?"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pages = tmp_path_factory.mktemp("pages")
    for name in PAGES:
        shutil.copy(corpus_dir() / name, pages / name)
    data = tmp_path_factory.mktemp("data")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CANDOR_")}
    env = clean | {"CANDOR_DATA_DIR": str(data), "CANDOR_CONTACT": "docs@example.com"}
    done = subprocess.run(
        [sys.executable, "-m", "candor.cli", "ingest", str(pages), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert json.loads(done.stdout)["failed"] == 0
    return env


@pytest.fixture(scope="module")
def origin(env: dict[str, str]) -> Iterator[str]:
    settings = Settings(
        data_dir=Path(env["CANDOR_DATA_DIR"]), contact="docs@example.com", api_keys=KEY
    )
    sock = bound_socket()
    app = create_local_app(settings, port=sock.getsockname()[1])
    with serve(app, sock) as served:
        yield served


def test_the_openai_client_gets_a_cited_answer_streamed_and_not(origin: str) -> None:
    client = OpenAI(base_url=f"{origin}/v1", api_key=KEY, max_retries=0, timeout=600)
    asked: Any = [{"role": "user", "content": BISECT}]
    whole = client.chat.completions.create(model="candor", messages=asked)
    extras: dict[str, Any] = whole.candor  # type: ignore[attr-defined]
    content = whole.choices[0].message.content or ""
    assert extras["decision"] == "answered", content
    assert "125" in content
    assert "git-bisect.html" in {c["source"] for c in extras["citations"]}
    assert "\n\nSources:\n[1] " in content
    # The same question again, streamed: the answer cache serves it, in chunks.
    chunks = list(client.chat.completions.create(model="candor", messages=asked, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == content
    assert chunks[-1].candor["cached"] is True  # type: ignore[attr-defined]


def test_an_mcp_client_calls_both_tools_over_http(origin: str) -> None:
    async def session() -> tuple[Any, Any]:
        http = httpx2.AsyncClient(headers={"x-api-key": KEY}, timeout=600)
        async with Client(streamable_http_client(f"{origin}/mcp", http_client=http)) as client:
            asked = await client.call_tool("ask_docs", {"question": LFS})
            found = await client.call_tool("search_docs", {"query": "git worktree add", "k": 3})
            return asked, found

    asked, found = asyncio.run(session())
    assert asked.structured_content["decision"] == "declined", asked.structured_content
    assert "docs@example.com" in asked.structured_content["answer"]
    assert asked.structured_content["sources"] == []
    sources = [p["source"] for p in found.structured_content["passages"]]
    assert sources[0] == "git-worktree.html", sources


def test_candor_mcp_answers_over_stdio_with_the_local_model(env: dict[str, str]) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "candor.cli", "mcp"], env=env, cwd=str(ROOT)
    )

    async def session() -> Any:
        async with Client(params, read_timeout_seconds=600) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {
                "ask_docs",
                "search_docs",
            }
            return await client.call_tool("ask_docs", {"question": "Hi there!"})

    greeted = asyncio.run(session())
    assert greeted.structured_content["decision"] == "smalltalk"
    assert greeted.structured_content["answer"]
