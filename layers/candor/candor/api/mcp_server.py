"""MCP: candor's answers as two tools for assistants (Claude, Cursor, VS Code, ...).

    ask_docs     a question (and the conversation it continues): candor's answer or
                 decline, with its sources (title, URL, quote), as POST /ask gives it
    search_docs  a query (and how many): passages with titles, URLs and scores,
                 from the same hybrid search; no chat model is called

Served over Streamable HTTP at POST /mcp by `candor serve` and the ask function,
statelessly (each POST is a whole exchange, so any instance can take any request:
Lambda behind the REST API), with JSON responses; and over stdio by `candor mcp`,
for a desktop assistant on the same machine. The server is the official `mcp`
SDK's; it is imported on the first MCP request, not when the app starts (the
Lambda's cold start does not pay for it).

Over HTTP the caller needs a server key (candor.api.edge.KeyedRoutes: X-Api-Key or
`Authorization: Bearer`; none or a wrong one is 401 with a JSON-RPC error). Each
tool call counts against the key's limits (candor.key_limits) and spends from the
day's budget; ask_docs goes through candor.service.prepare like POST /ask, with
every guard of a question. Over stdio the caller is the machine's own user: no key,
the same question guards.

A refusal or failure is a JSON-RPC error with a fixed public message and `data`
holding candor's `reason`, the `trace_id` and, when there is one, `retry_after`
(seconds); the detail goes to the log (candor.api.errors). Codes: -32602 for
arguments the tool cannot take (and a conversation id this server did not sign),
-32061 no valid key (HTTP 401), -32063 forbidden (another site's Origin, a
conversation ended by moderation), -32069 rate limited, -32073 unavailable (the
day's budget used up, an outage, the deadline), -32603 a bug.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError, field_validator
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from candor import search, service
from candor.api import errors
from candor.api.base import DepsProvider, edge_of
from candor.api.citing import SourceOut, sources, with_sources
from candor.api.edge import SERVER_KEY_STATE, KeyedRoutes
from candor.api.schemas import SESSION_ID_PATTERN, refuse_control_characters
from candor.api.sessions import SessionSigner
from candor.deps import Deps
from candor.graph.state import Decision
from candor.key_limits import check_key_limits
from candor.types import Hit

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

PATH = "/mcp"
NAME = "candor"

# JSON-RPC error codes (the server's own range, clear of the SDK's -32000 to -32042).
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNAUTHORIZED = -32061
FORBIDDEN = -32063
RATE_LIMITED = -32069
UNAVAILABLE = -32073


# The tools' arguments and results.


class AskDocsArguments(BaseModel):
    question: str = Field(
        min_length=1,
        max_length=1000,
        description="The question, in the user's words (at most 1,000 characters).",
    )
    conversation_id: str | None = Field(
        default=None,
        pattern=SESSION_ID_PATTERN,
        description="The conversation_id of an earlier ask_docs result, to ask a follow-up "
        "in the same conversation ('tell me more'); omit it to start a new one.",
    )

    @field_validator("question")
    @classmethod
    def _a_question(cls, value: str) -> str:
        refuse_control_characters("question", value)
        if not value.strip():
            raise ValueError("question must contain more than whitespace")
        return value.strip()


class AskDocsResult(BaseModel):
    answer: str = Field(description="candor's answer with its citation markers, or its decline.")
    decision: Decision = Field(
        description="answered (from the documents), declined (they do not say), smalltalk, "
        "code_refused, warned or ended (moderation)."
    )
    sources: list[SourceOut] = Field(description="What each marker [n] cites.")
    conversation_id: str = Field(description="Pass it back to ask a follow-up.")
    trace_id: str = Field(description="The operator finds this answer's record by it.")


class SearchDocsArguments(BaseModel):
    query: str = Field(
        min_length=1, max_length=1000, description="What to look for, in words or identifiers."
    )
    k: int = Field(default=5, ge=1, le=search.MAX_RESULTS, description="How many passages (1-10).")

    @field_validator("query")
    @classmethod
    def _a_query(cls, value: str) -> str:
        refuse_control_characters("query", value)
        if not value.strip():
            raise ValueError("query must contain more than whitespace")
        return value.strip()


class PassageOut(BaseModel):
    number: int
    title: str
    url: str | None = Field(default=None, description="The document's public address.")
    source: str = Field(description="The document's path or key in the index.")
    heading: str = Field(description="The section the passage is in.")
    page: int | None = None
    text: str
    score: float = Field(description="The fused search score: higher is better.")


class SearchDocsResult(BaseModel):
    passages: list[PassageOut]


ASK_DESCRIPTION = (
    "Ask the documentation a question. Returns an answer written only from the "
    "documents, with numbered citation markers and, for each, the source's title, URL "
    "and the quote that supports it; or an honest decline when the documents do not "
    "say (decision 'declined'), which is an answer too: do not guess past it. Pass "
    "conversation_id back for a follow-up question."
)
SEARCH_DESCRIPTION = (
    "Search the documentation without writing an answer: the passages that best match "
    "the query, each with its title, URL, section and a score, best first. Use it to "
    "read the sources yourself or to find where something is documented."
)


# Who is calling, for the request at hand: set per HTTP request by the route, once by
# `candor mcp` (stdio).


@dataclass(frozen=True, slots=True)
class Caller:
    deps: DepsProvider
    signer: Callable[[], SessionSigner]
    key_id: str | None = None  # None: the machine's own user, over stdio
    trace_id: str | None = None  # None: one per tool call


_caller: ContextVar[Caller] = ContextVar("candor_mcp_caller")


@contextmanager
def calling_as(caller: Caller) -> Iterator[None]:
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


# Errors.


def _code(status: int, reason: str) -> int:
    if reason == "session_invalid":
        return INVALID_PARAMS  # a conversation id this server did not sign
    if status == 401:
        return UNAUTHORIZED
    if status == 403:
        return FORBIDDEN
    if status == 429:
        return RATE_LIMITED
    if status == 503:
        return UNAVAILABLE
    if status >= 500:
        return INTERNAL_ERROR
    return INVALID_REQUEST


def _error_object(public: errors.PublicError, trace_id: str) -> dict[str, Any]:
    """The JSON-RPC error object of a public error (candor.api.errors' table)."""
    data: dict[str, Any] = {"reason": public.body["reason"], "trace_id": trace_id}
    if "Retry-After" in public.headers:
        data["retry_after"] = int(public.headers["Retry-After"])
    code = _code(public.status, public.body["reason"])
    return {"code": code, "message": public.body["detail"], "data": data}


def error_response(error: BaseException, trace_id: str) -> Response:
    """A refusal before the MCP server reads the request (no key, the Origin, the body)."""
    public = errors.public_error(error, trace_id)
    headers = dict(public.headers)
    if public.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="candor"'
    content = {"jsonrpc": "2.0", "id": None, "error": _error_object(public, trace_id)}
    return JSONResponse(content, public.status, headers=headers)


def keyed_routes() -> KeyedRoutes:
    return KeyedRoutes(PATH, error_response)


def _tool_error(error: BaseException, trace_id: str) -> MCPError:
    from mcp.shared.exceptions import MCPError

    if isinstance(error, ValidationError):
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
            for e in error.errors(include_input=False)
        ]
        data = {"reason": "invalid_arguments", "trace_id": trace_id}
        return MCPError(INVALID_PARAMS, "; ".join(problems)[:500], data)
    body = _error_object(errors.public_error(error, trace_id), trace_id)
    return MCPError(body["code"], body["message"], body["data"])


# The tools.


async def ask_docs(caller: Caller, arguments: Mapping[str, Any], trace_id: str) -> AskDocsResult:
    args = AskDocsArguments.model_validate(arguments)
    deps = caller.deps()
    signer = caller.signer()
    session_id = signer.verify(args.conversation_id) if args.conversation_id else signer.issue()
    await _count(caller, deps)
    prepared = await service.prepare(deps, args.question, session_id=session_id, trace_id=trace_id)
    result = await prepared.result()
    return AskDocsResult(
        answer=result.answer,
        decision=result.decision,
        sources=sources(result.citations),
        conversation_id=result.session_id,
        trace_id=result.trace_id,
    )


async def search_docs(caller: Caller, arguments: Mapping[str, Any]) -> SearchDocsResult:
    args = SearchDocsArguments.model_validate(arguments)
    deps = caller.deps()
    await _count(caller, deps)
    hits = await search.search(deps, args.query, k=args.k)
    return SearchDocsResult(passages=[_passage(n, hit) for n, hit in enumerate(hits, start=1)])


async def _count(caller: Caller, deps: Deps) -> None:
    if caller.key_id is not None:
        await asyncio.to_thread(
            check_key_limits, deps.state, deps.settings, caller.key_id, now=time.time()
        )


def _passage(number: int, hit: Hit) -> PassageOut:
    chunk = hit.chunk
    return PassageOut(
        number=number,
        title=chunk.title or chunk.source,
        url=chunk.url,
        source=chunk.source,
        heading=chunk.heading,
        page=chunk.page,
        text=chunk.text,
        score=round(hit.score, 6),
    )


def _search_text(result: SearchDocsResult) -> str:
    if not result.passages:
        return "No passage matches."
    blocks = []
    for p in result.passages:
        where = p.url or p.source
        heading = f" > {p.heading}" if p.heading else ""
        blocks.append(f"[{p.number}] {p.title}{heading} ({where}), score {p.score}\n{p.text}")
    return "\n\n".join(blocks)


@cache
def server() -> Server[Any]:
    """The MCP server: the two tools, on whoever `calling_as` names (imports the SDK)."""
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    from candor import __version__

    tools = [
        types.Tool(
            name="ask_docs",
            title="Ask the documentation",
            description=ASK_DESCRIPTION,
            input_schema=AskDocsArguments.model_json_schema(),
            output_schema=AskDocsResult.model_json_schema(),
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        types.Tool(
            name="search_docs",
            title="Search the documentation",
            description=SEARCH_DESCRIPTION,
            input_schema=SearchDocsArguments.model_json_schema(),
            output_schema=SearchDocsResult.model_json_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        ),
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = _caller.get(None)
        trace_id = (caller and caller.trace_id) or uuid.uuid4().hex
        arguments = params.arguments or {}
        try:
            if caller is None:  # a transport started outside `calling_as`: a bug
                raise RuntimeError("the MCP server was started with no caller")
            match params.name:
                case "ask_docs":
                    asked = await ask_docs(caller, arguments, trace_id)
                    text = with_sources(asked.answer, asked.sources)
                    result: BaseModel = asked
                case "search_docs":
                    found = await search_docs(caller, arguments)
                    text = _search_text(found)
                    result = found
                case other:
                    raise MCPError(INVALID_PARAMS, f"no tool named {other[:80]!r}")
        except MCPError:
            raise
        except Exception as error:  # the table's code and fixed text; the detail is logged
            raise _tool_error(error, trace_id) from None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=result.model_dump(mode="json"),
        )

    return Server(
        NAME,
        version=__version__,
        instructions="Answers from this site's documentation, with citations, or declines.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# Streamable HTTP: POST /mcp.


class _Exchange(Response):
    """Hands the request to the SDK's transport: one stateless exchange, answered as JSON.

    A session manager of its own per request, so that no task group outlives the
    request (the ask function runs with no lifespan) and any instance can answer.
    """

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        manager = StreamableHTTPSessionManager(
            app=server(), stateless=True, json_response=True, security_settings=None
        )
        with calling_as(self.caller):
            async with manager.run():
                await manager.handle_request(scope, receive, send)


JSONRPC_ID: dict[str, Any] = {"anyOf": [{"type": "string", "maxLength": 64}, {"type": "integer"}]}


def _request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["jsonrpc", "id", "method", "params"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": JSONRPC_ID,
            "method": {"const": method},
            "params": params,
        },
    }


def _tool_call(name: str, arguments: type[BaseModel]) -> dict[str, Any]:
    return _request(
        "tools/call",
        {
            "type": "object",
            "required": ["name", "arguments"],
            "properties": {"name": {"const": name}, "arguments": arguments.model_json_schema()},
        },
    )


REQUEST_SCHEMA: dict[str, Any] = {
    "description": "One JSON-RPC message of the Model Context Protocol; these are the ones "
    "candor answers besides the protocol's own.",
    "anyOf": [
        _request(
            "initialize",
            {
                "type": "object",
                "required": ["protocolVersion", "capabilities", "clientInfo"],
                "properties": {
                    "protocolVersion": {"type": "string", "enum": ["2025-06-18", "2025-11-25"]},
                    "capabilities": {"type": "object"},
                    "clientInfo": {
                        "type": "object",
                        "required": ["name", "version"],
                        "properties": {
                            "name": {"type": "string", "maxLength": 64},
                            "version": {"type": "string", "maxLength": 32},
                        },
                    },
                },
            },
        ),
        _request("tools/list", {"type": "object"}),
        _tool_call("ask_docs", AskDocsArguments),
        _tool_call("search_docs", SearchDocsArguments),
        _request("ping", {"type": "object"}),
    ],
}

RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["jsonrpc"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        # The request's id, whatever it was; null when it could not be read.
        "id": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "result": {"type": "object"},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
        },
    },
}


def _json_rpc(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": RESPONSE_SCHEMA}},
    }


def _empty(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {}, "text/plain": {}}}


RESPONSES: dict[int | str, dict[str, Any]] = {
    200: _json_rpc(
        "The JSON-RPC response: the result, or an error (a refusal, a failure) whose `data` "
        "holds `reason`, `trace_id` and, when there is one, `retry_after`."
    ),
    202: _empty("A notification, accepted."),
    400: _json_rpc("Not a JSON-RPC message the server can read."),
    401: _json_rpc("No valid server key in X-Api-Key or Authorization: Bearer."),
    403: _json_rpc("The Origin is not one of the allowed origins."),
    404: _json_rpc("No such method."),
    406: _empty("The Accept header must name both application/json and text/event-stream."),
    413: _json_rpc("The body is over 16 KB."),
    415: _json_rpc("The body is not application/json."),
    500: _json_rpc("A bug; the message is generic and the log has the detail under the trace id."),
    503: _json_rpc("The server keys cannot be read, or the service is not configured."),
}

router = APIRouter(tags=["mcp"])


@router.post(
    PATH,
    response_class=Response,
    responses=RESPONSES,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": REQUEST_SCHEMA}},
        },
        "parameters": [
            {
                "name": "accept",
                "in": "header",
                "required": True,
                "schema": {"type": "string", "enum": ["application/json, text/event-stream"]},
            }
        ],
    },
)
async def mcp(request: Request) -> Response:
    """The MCP server over Streamable HTTP (stateless): the tools ask_docs and search_docs."""
    key: str | None = getattr(request.state, SERVER_KEY_STATE, None)
    if key is None:  # only an app whose edge does not guard this route gets here
        raise errors.ServerKeyRequiredError()
    deps_provider: DepsProvider = request.app.state.deps_provider
    edge = edge_of(request)
    caller = Caller(
        deps=deps_provider, signer=edge.signer, key_id=key, trace_id=errors.trace_id_of(request)
    )
    return _Exchange(caller)
