"""A hand-off webhook receiver on loopback: it records each POST and answers a scripted status."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered


@dataclass
class Receiver:
    url: str
    statuses: list[int]  # answered in order; 200 once they run out
    received: list[Received] = field(default_factory=list)
    _arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Received]:
        """The first `count` requests, waiting for them to arrive."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.received)} of {count} webhook requests came")
                self._arrived.wait(left)
            return list(self.received)

    def accepted(self) -> list[Received]:
        return [r for r in self.received if 200 <= r.status < 300]


@contextmanager
def webhook_receiver(statuses: Sequence[int] = ()) -> Iterator[Receiver]:
    """A receiver at http://127.0.0.1:PORT/hooks/candor, stopped afterwards."""
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with receiver._arrived:
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.received.append(
                    Received({k.lower(): v for k, v in self.headers.items()}, body, status)
                )
                receiver._arrived.notify_all()
            self.send_response(status)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}/hooks/candor", list(statuses))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
