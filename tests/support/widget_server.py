"""Real HTTP servers on loopback for the widget's browser tests.

`candor_server` runs the very app `candor serve` builds (create_local_app: the
routers, the edge, the widget), with the test's dependencies (a scripted chat model,
the hashing embedder, SQLite index and state) in place of the factory's, under
uvicorn in a thread. `static_site` serves a few fixed pages, as another website
embedding the widget would. Each listens on a socket bound to port 0 before it
starts, so the port is known first and no two tests race for one.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import uvicorn
from fastapi import FastAPI

from candor.api.local import create_local_app
from candor.deps import Deps

START_TIMEOUT_SECONDS = 10.0


def bound_socket() -> socket.socket:
    """A listening-ready TCP socket on 127.0.0.1 and a free port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def origin_of(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def local_app_with(deps: Deps, port: int) -> FastAPI:
    """The app of `candor serve` on `port`, answering with `deps` instead of the factory's."""
    app = create_local_app(deps.settings, host="127.0.0.1", port=port)
    app.state.deps_provider = lambda: deps
    return app


@contextmanager
def serve(app: FastAPI, sock: socket.socket) -> Iterator[str]:
    """Serve `app` under uvicorn in a thread on `sock`; yields its origin."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the candor test server did not start")
        time.sleep(0.02)
    try:
        yield origin_of(sock)
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT_SECONDS)
        sock.close()


def candor_server(deps: Deps, sock: socket.socket) -> AbstractContextManager[str]:
    """Serve `candor serve`'s app with `deps` on `sock`; yields its origin."""
    return serve(local_app_with(deps, sock.getsockname()[1]), sock)


@contextmanager
def static_site(pages: Mapping[str, str], sock: socket.socket) -> Iterator[str]:
    """Serve fixed HTML `pages` ({path: html}) on `sock`; yields the site's origin."""

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = pages.get(self.path.split("?", 1)[0])
            body = (page or "not found").encode()
            self.send_response(200 if page is not None else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the tests say what failed

    sock.listen()
    server = ThreadingHTTPServer(sock.getsockname(), Pages, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield origin_of(sock)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(START_TIMEOUT_SECONDS)
