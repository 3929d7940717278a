"""An OpenAI-wire-compatible test server on loopback: chat completions and embeddings.

Replies are scripted per route, in order; with no script left, chat answers "ok"
and embeddings come from the HashingEmbedder. A scripted reply can be an HTTP
error status or a delay (for timeouts). Every request body is recorded.

A chat request with `"stream": true` is answered as the API does: server-sent
events, one `chat.completion.chunk` per piece of the reply, a last chunk with
the usage and no choices when `stream_options.include_usage` is set, then
`data: [DONE]`. A client that hangs up mid-stream is counted in `streams_cut`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from candor.backends.hashing_embedder import HashingEmbedder


@dataclass
class Reply:
    content: str | None = None  # the assistant message (chat)
    status: int = 200
    delay: float = 0.0
    finish_reason: str = "stop"
    refusal: str | None = None
    usage: tuple[int, int] | None = (12, 3)  # prompt, completion tokens
    # Of the prompt tokens, those read from OpenAI's prompt cache: sent as
    # `usage.prompt_tokens_details.cached_tokens` when given.
    cached_tokens: int | None = None
    pieces: tuple[str, ...] | None = None  # how a streamed reply is cut; else word by word
    gap: float = 0.0  # seconds between streamed chunks
    # The first token's likeliest alternatives, as (token, logprob): sent as `logprobs`.
    top_logprobs: tuple[tuple[str, float], ...] | None = None


@dataclass
class FakeOpenAI:
    chat: deque[Reply] = field(default_factory=deque)
    embeddings: deque[Reply] = field(default_factory=deque)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    streams_cut: int = 0  # streamed replies whose client hung up before the end
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.requests if p == path]


def chat_completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content,
        "refusal": reply.refusal,
    }
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": reply.finish_reason}
    if reply.top_logprobs is not None:
        top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in reply.top_logprobs]
        first = top[0] if top else {"token": reply.content or "", "logprob": 0.0, "bytes": None}
        choice["logprobs"] = {"content": [first | {"top_logprobs": top}], "refusal": None}
    response: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test"),
        "choices": [choice],
    }
    if reply.usage is not None:
        response["usage"] = usage(reply)
    return response


def usage(reply: Reply) -> dict[str, Any]:
    """A reply's `usage` object, as the API reports it."""
    assert reply.usage is not None
    prompt, completion = reply.usage
    reported: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.cached_tokens is not None:
        reported["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return reported


def chat_chunks(body: dict[str, Any], reply: Reply) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed chat completion, as the API sends them."""
    base = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "test"),
    }
    content = reply.content or ""
    pieces = reply.pieces if reply.pieces is not None else re.findall(r"\s*\S+\s*", content)
    first = {"role": "assistant", "content": ""}
    yield base | {"choices": [{"index": 0, "delta": first, "finish_reason": None}]}
    for piece in pieces:
        delta = {"content": piece}
        yield base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    end = {"index": 0, "delta": {}, "finish_reason": reply.finish_reason}
    yield base | {"choices": [end]}
    if (body.get("stream_options") or {}).get("include_usage") and reply.usage is not None:
        yield base | {"choices": [], "usage": usage(reply)}


def embeddings(body: dict[str, Any], reply: Reply | None) -> dict[str, Any]:
    inputs = body["input"]
    inputs = [inputs] if isinstance(inputs, str) else inputs
    width = int(body.get("dimensions") or 1536)
    vectors = HashingEmbedder(width).embed(inputs)
    tokens = sum(len(text.split()) for text in inputs)
    data = [
        {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
        for i in range(len(inputs))
    ]
    data.reverse()  # the API does not promise input order; the client must sort
    return {
        "object": "list",
        "data": data,
        "model": body.get("model"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?", 1)[0]
        with fake.lock:
            fake.requests.append((path, body))
            queue = {"/v1/chat/completions": fake.chat, "/v1/embeddings": fake.embeddings}.get(path)
            reply = queue.popleft() if queue else None
        if queue is None:
            self._send(404, {"error": {"message": f"no route {path}", "type": "invalid_request"}})
            return
        if reply is not None and reply.delay:
            time.sleep(reply.delay)
        if reply is not None and reply.status != 200:
            # retry-after-ms keeps the SDK's retries of a test fast.
            self._send(
                reply.status,
                {"error": {"message": "injected failure", "type": "server_error"}},
                headers={"retry-after-ms": "10"},
            )
            return
        if path == "/v1/chat/completions" and body.get("stream"):
            self._stream(body, reply or Reply(content="ok"))
        elif path == "/v1/chat/completions":
            self._send(200, chat_completion(body, reply or Reply(content="ok")))
        else:
            self._send(200, embeddings(body, reply))

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _stream(self, body: dict[str, Any], reply: Reply) -> None:
        # HTTP/1.0 with no content-length: the body ends when the connection closes.
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for i, chunk in enumerate(chat_chunks(body, reply)):
                if i > 1 and reply.gap:
                    time.sleep(reply.gap)
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with self.server.fake.lock:
                self.server.fake.streams_cut += 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeOpenAI) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


@dataclass
class RunningOpenAI:
    base_url: str
    fake: FakeOpenAI


@contextmanager
def serve() -> Iterator[RunningOpenAI]:
    server = _Server(FakeOpenAI())
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.02},
        name="openai-test-server",
        daemon=True,
    )
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield RunningOpenAI(f"http://{host!s}:{port}/v1", server.fake)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
