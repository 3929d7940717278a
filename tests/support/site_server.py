"""A docs site served on loopback for the sync's tests: pages the test can change
between syncs, conditional answers (ETag, Last-Modified), redirects, gzip, and a
log of every request it was sent.

`with SiteServer() as site: site.page("/guide.html", "<h1>..."); site.url` ...
Only 127.0.0.1 is bound; nothing here reaches another address.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


@dataclass
class Resource:
    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    validators: bool = True  # ETag and Last-Modified, and 304 when they match
    gzip: bool = False  # sent with Content-Encoding: gzip
    # Raw bytes sent as the body whatever `gzip` says (a bomb is sent pre-compressed).
    raw: bytes | None = None
    version: int = 1

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'

    @property
    def last_modified(self) -> str:
        return formatdate(1_700_000_000 + self.version * 3600, usegmt=True)


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    at: float  # time.monotonic() when it arrived


class SiteServer:
    def __init__(self) -> None:
        self.resources: dict[str, Resource] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                site._serve(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def __enter__(self) -> SiteServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    # What the site serves.

    def page(self, path: str, body: str | bytes, **kwargs: object) -> Resource:
        data = body.encode() if isinstance(body, str) else body
        old = self.resources.get(path)
        resource = Resource(data, **kwargs)  # type: ignore[arg-type]
        if old is not None:
            resource.version = old.version + (old.body != data)
        self.resources[path] = resource
        return resource

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.resources[path] = Resource(b"", None, status, {"Location": location}, validators=False)

    def remove(self, path: str) -> None:
        self.resources.pop(path, None)

    def sitemap(self, path: str, urls: list[str], *, gzipped: bool = False) -> None:
        entries = "".join(f"<url><loc>{self.absolute(u)}</loc></url>" for u in urls)
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        ).encode()
        self._xml(path, xml, gzipped)

    def sitemap_index(self, path: str, sitemaps: list[str], *, gzipped: bool = False) -> None:
        entries = "".join(f"<sitemap><loc>{self.absolute(u)}</loc></sitemap>" for u in sitemaps)
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{entries}</sitemapindex>"
        ).encode()
        self._xml(path, xml, gzipped)

    def _xml(self, path: str, xml: bytes, gzipped: bool) -> None:
        if gzipped:
            self.page(path, gzip.compress(xml, mtime=0), content_type="application/x-gzip")
        else:
            self.page(path, xml, content_type="application/xml")

    def absolute(self, url: str) -> str:
        return url if "://" in url else f"http://127.0.0.1:{self.port}{url}"

    # What the site was asked.

    def asked(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def paths(self) -> Iterator[str]:
        with self._lock:
            return iter([r.path for r in self.requests])

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            self.requests.append(Request(handler.path, headers, time.monotonic()))
        resource = self.resources.get(handler.path)
        if resource is None:
            self._send(handler, 404, {"Content-Type": "text/html"}, b"<h1>Not found</h1>")
            return
        out = dict(resource.headers)
        if resource.validators and resource.status == 200:
            out["ETag"] = resource.etag
            out["Last-Modified"] = resource.last_modified
            if headers.get("if-none-match") == resource.etag or (
                "if-none-match" not in headers
                and headers.get("if-modified-since") == resource.last_modified
            ):
                self._send(handler, 304, out, b"")
                return
        if resource.content_type is not None:
            out["Content-Type"] = resource.content_type
        body = resource.body
        if resource.raw is not None:
            body = resource.raw
        elif resource.gzip:
            body = gzip.compress(body, mtime=0)
        if resource.gzip or resource.raw is not None:
            out.setdefault("Content-Encoding", "gzip")
        self._send(handler, resource.status, out, body)

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        if status != 304:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if status != 304:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                handler.wfile.write(body)
