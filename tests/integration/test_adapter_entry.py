"""functions/ask/run.sh as the Lambda Web Adapter starts it: a real process, a real HTTP client.

The script is started on a loopback port as the adapter starts it (LAMBDA_TASK_ROOT,
AWS_LWA_PORT), and polled on GET /health as the adapter's readiness check does.
The chat model is OpenAI's wire protocol from a test server on loopback, which
streams its reply in pieces a few tenths of a second apart; index and state are
the embedded SQLite ones. POST /ask/stream must then deliver its events as they
happen (the first token well before `done`), and POST /ask the usual JSON.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.settings import Settings
from tests.conftest import PASSAGES
from tests.support import sse
from tests.support.api_shape import ASK_RESPONSE_KEYS
from tests.support.edge import ORIGIN, SESSION_SECRET
from tests.support.openai_server import Reply, RunningOpenAI, serve

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ASK = ROOT / "functions" / "ask"
QUESTION = {"question": "What does --force-with-lease do?"}
# Whole sentences, each longer than a passage's label line: the stream lets the
# answer out a sentence at a time (a shorter line waits: it could be a pasted label).
PIECES = (
    "It refuses to overwrite work on the remote that you have not seen [1]. ",
    "It checks that the remote ref is still where you last fetched it [1]. ",
    "When someone else pushed in the meantime, your push is refused [1]. ",
    "Fetch, look at their commits, and then push again [1].",
)
GAP = 0.4  # seconds between the streamed pieces


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def openai() -> Iterator[RunningOpenAI]:
    with serve() as running:
        yield running


@pytest.fixture
def entry(tmp_path: Path, openai: RunningOpenAI) -> Iterator[str]:
    """The base URL of run.sh's server, once it answers its readiness check."""
    embedder = HashingEmbedder()
    settings = Settings(data_dir=tmp_path, embedder_backend="hashing")
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    index.close()
    port = free_port()
    environment = {
        # What the Lambda runtime and the template give the function, on this machine.
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "PYTHONPATH": f"{ROOT / 'layers' / 'candor'}",
        "LAMBDA_TASK_ROOT": str(ASK),
        "AWS_LWA_PORT": str(port),
        "CANDOR_ALLOWED_ORIGINS": ORIGIN,
        "CANDOR_SESSION_SECRET": SESSION_SECRET,
        "CANDOR_DATA_DIR": str(tmp_path),
        "CANDOR_EMBEDDER_BACKEND": "hashing",
        "CANDOR_CHAT_BACKEND": "openai",
        "CANDOR_OPENAI_API_KEY": "sk-test",
        "CANDOR_OPENAI_BASE_URL": openai.base_url,
        # The script below starts with the triage reply, which screening would skip.
        "CANDOR_SCREENING": "false",
        # And its judge reply: the names of its question would settle the grade.
        "CANDOR_GRADE_BY_NAMES": "false",
    }
    process = subprocess.Popen(
        [str(ASK / "run.sh")],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"run.sh exited: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "run.sh did not answer GET /health in 60 s"
            time.sleep(0.2)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def script(openai: RunningOpenAI) -> None:
    openai.fake.chat.extend(
        [
            Reply(content=json.dumps({"abusive": False, "kind": "question"})),
            Reply(content="yes", top_logprobs=(("yes", -0.1), ("no", -2.4))),
            Reply(pieces=PIECES, gap=GAP, usage=(400, 12)),
        ]
    )


def test_the_entry_streams_events_as_they_happen_to_a_real_client(
    entry: str, openai: RunningOpenAI
) -> None:
    script(openai)
    arrivals: list[tuple[float, str]] = []
    started = time.perf_counter()
    with httpx.stream(
        "POST", f"{entry}/ask/stream", json=QUESTION, headers={"Origin": ORIGIN}, timeout=30
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["access-control-allow-origin"] == ORIGIN
        for line in response.iter_lines():
            arrivals.append((time.perf_counter() - started, line))

    events = sse.parse(line for _, line in arrivals)
    names = [e for e in sse.names(events) if e != sse.KEEPALIVE]
    assert names == ["step"] * 4 + ["token"] * len(PIECES) + ["step", "done"]
    assert sse.tokens(events) == "".join(PIECES)
    done = events[-1].data
    assert done["decision"] == "answered"
    assert set(done) == ASK_RESPONSE_KEYS
    first_token = next(t for t, line in arrivals if line == "event: token")
    done_at = next(t for t, line in arrivals if line == "event: done")
    # Streamed, not buffered: the pieces came GAP apart and so did their events.
    assert done_at - first_token >= (len(PIECES) - 1) * GAP * 0.9


def test_the_entry_answers_post_ask_with_the_json(entry: str, openai: RunningOpenAI) -> None:
    script(openai)

    response = httpx.post(f"{entry}/ask", json=QUESTION, headers={"Origin": ORIGIN}, timeout=30)

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == ASK_RESPONSE_KEYS
    assert body["answer"].startswith("It refuses to overwrite work")
