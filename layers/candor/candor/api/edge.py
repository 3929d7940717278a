"""The public edge: who may call the routes that act, and in what shape, before any route runs.

One ASGI middleware, outermost in the app, so that every refusal happens before
a dependency is built or a model is called:

- Each request gets its trace id here, so that errors carry one too.
- A browser may call from the origins in CANDOR_ALLOWED_ORIGINS only: another
  Origin is refused (403), its preflight too, and only a listed origin gets CORS
  headers. A request without an Origin (a server, curl) needs one of the server
  keys in X-Api-Key. `candor serve` with no origins configured (the local demo)
  also takes loopback clients without one.
- The body of a request that acts must be JSON (else 415) of at most 16 KB
  (else 413), checked here rather than left to a FastAPI default that older
  versions lack.
- An exception no handler mapped is a generic 500, logged with the trace id.

GET routes (/health, the API docs) are public and pass with only the trace id.

Keyed routes (`KeyedRoutes`: MCP at /mcp, the OpenAI-compatible API under /v1) are
for servers and assistants only: every request but a preflight needs a server key,
in X-Api-Key or as `Authorization: Bearer KEY` (what OpenAI's clients send), whatever
its Origin (a listed Origin does not stand in for a key there; another is still
refused); a missing or wrong key is 401. Each refusal on them is written in the
route's own protocol (a JSON-RPC error, OpenAI's error object), and the key's id
(`server_key_id`, never the key) is left in the request's state for its per-key limits.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from hashlib import sha256
from uuid import uuid4

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from candor import secrets as keys
from candor.api.errors import (
    TRACE_HEADER,
    ApiKeyRequiredError,
    BodyTooLargeError,
    OriginNotAllowedError,
    ServerKeyRequiredError,
    UnsupportedMediaTypeError,
    error_response,
)
from candor.api.sessions import SessionSigner, signer_for
from candor.errors import CandorError, ConfigurationError
from candor.settings import Settings

logger = logging.getLogger("candor.api")

MAX_BODY_BYTES = 16 * 1024
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
ALLOW_METHODS = "GET, POST, OPTIONS"
ALLOW_HEADERS = "content-type"
EXPOSE_HEADERS = f"{TRACE_HEADER}, retry-after"
PREFLIGHT_MAX_AGE = "600"


@dataclass(frozen=True)
class Edge:
    """What the edge lets through. The keys are read on first use (SSM on AWS)."""

    origins: frozenset[str]
    server_keys: Callable[[], frozenset[str]] = field(default=frozenset)
    sessions: Callable[[], SessionSigner] | None = None
    loopback_without_origin: bool = False
    max_body_bytes: int = MAX_BODY_BYTES

    def signer(self) -> SessionSigner:
        if self.sessions is None:
            raise ConfigurationError("no session signer is configured")
        return self.sessions()


EdgeProvider = Callable[[], Edge]

# How a keyed route writes a refusal: (the error, the trace id) -> its response.
Refusal = Callable[[BaseException, str], Response]
# Where a keyed route finds the id of the key that called it (request.state).
SERVER_KEY_STATE = "server_key_id"


@dataclass(frozen=True, slots=True)
class KeyedRoutes:
    """The routes at `prefix` (it and every path below it): a server key always, and
    refusals written by `refuse` in the routes' own protocol."""

    prefix: str
    refuse: Refusal
    # None: the edge's own limit (16 KB). A chat client resends its whole conversation.
    max_body_bytes: int | None = None

    def covers(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix.rstrip("/") + "/")


def key_id(key: str) -> str:
    """A server key's stable, non-secret id: what its limits and logs are kept under."""
    return sha256(key.encode()).hexdigest()[:24]


def presented_key(headers: Headers) -> str | None:
    """The key a request sends: X-Api-Key, else an `Authorization: Bearer` token."""
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def is_server_key(edge: Edge, presented: str) -> bool:
    """Whether `presented` is one of the edge's server keys, in constant time each.

    Compared as bytes: compare_digest refuses str that is not ASCII (a TypeError,
    which was a text 500), and Starlette reads a header's bytes as Latin-1, so
    encoding back gives exactly the bytes that were sent. A configured key is
    matched by its UTF-8 bytes. Every key is compared, so the time taken says
    nothing of which came close.
    """
    sent = presented.encode("latin-1", "replace")
    matches = [hmac.compare_digest(sent, key.encode()) for key in edge.server_keys()]
    return any(matches)


def build_edge(
    settings: Settings, *, own_origins: Sequence[str] = (), loopback_without_origin: bool = False
) -> Edge:
    """The edge from settings; `own_origins` are those of a page the server itself serves."""

    @cache
    def server_keys() -> frozenset[str]:
        value = keys.optional_secret(
            direct=settings.api_keys,
            parameter=settings.api_keys_parameter,
            region=settings.aws_region,
        )
        return frozenset(k.strip() for k in (value or "").split(",") if k.strip())

    return Edge(
        origins=frozenset(settings.allowed_origins) | {o.lower() for o in own_origins},
        server_keys=server_keys,
        sessions=cache(lambda: signer_for(settings)),
        loopback_without_origin=loopback_without_origin,
    )


def require_production_edge(settings: Settings) -> None:
    """What a deployed API cannot start without: its origins and a shared session key."""
    missing = []
    if not settings.allowed_origins:
        missing.append("CANDOR_ALLOWED_ORIGINS")
    if settings.session_secret is None and not settings.session_secret_parameter:
        missing.append("CANDOR_SESSION_SECRET_PARAMETER (or CANDOR_SESSION_SECRET)")
    if missing:
        raise ConfigurationError(f"the API cannot start without {' and '.join(missing)}")


def _is_loopback(scope: Scope) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return False


def _media_type(headers: Headers) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _declared_length(headers: Headers) -> int | None:
    value = headers.get("content-length")
    # isascii: "²" (a Latin-1 byte of a header) is a digit to isdigit and not to int().
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


class EdgeMiddleware:
    def __init__(
        self, app: ASGIApp, *, edge: EdgeProvider, keyed: Sequence[KeyedRoutes] = ()
    ) -> None:
        self.app = app
        self.edge = edge
        self.keyed = tuple(keyed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        trace_id = uuid4().hex
        scope.setdefault("state", {})["trace_id"] = trace_id
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        method = scope["method"]
        keyed = next((k for k in self.keyed if k.covers(scope.get("path", ""))), None)
        refuse: Refusal = keyed.refuse if keyed is not None else error_response
        try:
            edge = self.edge()
        except CandorError as error:
            if keyed is not None or method not in SAFE_METHODS - {"OPTIONS"}:
                await refuse(error, trace_id)(scope, receive, send)
                return
            # A public GET (/health above all) still answers, without CORS headers.
            edge = Edge(origins=frozenset())
        listed = origin is not None and origin.lower() in edge.origins
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                response_headers = MutableHeaders(scope=message)
                if TRACE_HEADER not in response_headers:
                    response_headers.append(TRACE_HEADER, trace_id)
                response_headers.add_vary_header("Origin")
                if listed and origin is not None:
                    response_headers["access-control-allow-origin"] = origin
                    response_headers["access-control-expose-headers"] = EXPOSE_HEADERS
            await send(message)

        if method == "OPTIONS" and origin is not None:
            response = self._preflight(listed, trace_id, refuse)
            await response(scope, receive, send_with_headers)
            return
        if method not in SAFE_METHODS or (keyed is not None and method != "OPTIONS"):
            try:
                if keyed is not None:
                    refusal = self._keyed_refusal(edge, scope, headers, origin, listed)
                else:
                    refusal = self._refusal(edge, scope, headers, origin, listed)
            except CandorError as error:  # the server keys cannot be read (SSM)
                refusal = error
            except Exception as error:
                # A bug in the checks themselves: still the JSON 500 with the trace
                # id and CORS headers, never the server's bare text one.
                await refuse(error, trace_id)(scope, receive, send_with_headers)
                return
            if refusal is None and method not in SAFE_METHODS:
                limit = (keyed and keyed.max_body_bytes) or edge.max_body_bytes
                body = await self._read_body(receive, headers, limit)
                if body is None:
                    refusal = BodyTooLargeError()
                else:
                    receive = _replay(body, receive)
            if refusal is not None:
                await refuse(refusal, trace_id)(scope, receive, send_with_headers)
                return
        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as error:
            if started:
                raise
            # No handler took it: a bug. Generic text out, the detail in the log.
            await refuse(error, trace_id)(scope, receive, send_with_headers)

    def _preflight(self, listed: bool, trace_id: str, refuse: Refusal) -> Response:
        if not listed:
            return refuse(OriginNotAllowedError(), trace_id)
        return Response(
            status_code=204,
            headers={
                "access-control-allow-methods": ALLOW_METHODS,
                "access-control-allow-headers": ALLOW_HEADERS,
                "access-control-max-age": PREFLIGHT_MAX_AGE,
            },
        )

    def _refusal(
        self, edge: Edge, scope: Scope, headers: Headers, origin: str | None, listed: bool
    ) -> CandorError | None:
        if origin is not None and not listed:
            return OriginNotAllowedError()
        if origin is None and not self._trusted_without_origin(edge, scope, headers):
            return ApiKeyRequiredError()
        if _media_type(headers) != "application/json":
            return UnsupportedMediaTypeError()
        return None

    def _keyed_refusal(
        self, edge: Edge, scope: Scope, headers: Headers, origin: str | None, listed: bool
    ) -> CandorError | None:
        if origin is not None and not listed:
            return OriginNotAllowedError()
        presented = presented_key(headers)
        if presented is None or not is_server_key(edge, presented):
            return ServerKeyRequiredError()
        scope.setdefault("state", {})[SERVER_KEY_STATE] = key_id(presented)
        if scope["method"] not in SAFE_METHODS and _media_type(headers) != "application/json":
            return UnsupportedMediaTypeError()
        return None

    @staticmethod
    def _trusted_without_origin(edge: Edge, scope: Scope, headers: Headers) -> bool:
        presented = headers.get("x-api-key")
        if presented and is_server_key(edge, presented):
            return True
        return edge.loopback_without_origin and _is_loopback(scope)

    @staticmethod
    async def _read_body(receive: Receive, headers: Headers, limit: int) -> bytes | None:
        """The whole body, or None as soon as it is over `limit` bytes."""
        declared = _declared_length(headers)
        if declared is not None and declared > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away; the route sees an empty body
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the route the body already read, then the real channel."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
