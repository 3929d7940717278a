"""The OpenAI-compatible API: candor as a model called `candor`, for any tool that speaks it.

    POST /v1/chat/completions    the last user message is the question, the turns
                                 before it the history; the answer with its sources
    GET  /v1/models              one model, `candor`

A client points OpenAI's own SDK (or any tool built on it) at `<base>/v1` with a
server key as its API key. The question goes through the same call as POST /ask
(candor.service.prepare): the same graph, the same guards (the day's budget,
moderation, the deadline), with the key's own limits (candor.key_limits) in
place of the address's. The reply is a chat completion whose content is the
answer with its citation markers and a numbered list of sources; its `candor`
field carries the citations, the decision (answered, declined, warned, ...) and
the trace id, which the log and `candor insights` know it by.

What a chat model takes and candor does not:

- Sampling and length (temperature, top_p, max_tokens, stop, seed, penalties,
  logit_bias), `store`, `metadata` and other parameters that do not change what
  the answer may say are ignored; so are system and developer messages: candor
  answers by its own rules, from the documents only.
- What candor cannot honour is refused with OpenAI's error object (400 naming the
  parameter): several choices (`n` > 1), tools and function calling, a
  `response_format` other than text, `logprobs`, and content other than text.

Streamed (`stream: true`), the role goes out at once, a comment line
(`: keep-alive`) whenever nothing else has for a while, then the answer in pieces
once it is checked (candor never streams text it would have to take back: a
sentence no passage supports is dropped, and markers are renumbered at the end),
a last chunk with `finish_reason` and the `candor` field, the usage chunk when
`stream_options.include_usage` asks for it, and `data: [DONE]`. An error after the
stream started is a `data: {"error": ...}` event, which OpenAI's SDK raises.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from hashlib import sha256
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.responses import Response

from candor import service
from candor.api import errors, stream
from candor.api.base import DepsDep
from candor.api.citing import SourceOut, sources, with_sources
from candor.api.edge import SERVER_KEY_STATE, KeyedRoutes
from candor.api.errors import ServerKeyRequiredError
from candor.api.schemas import CONTROL_CHARACTER
from candor.graph.citations import sentences
from candor.graph.state import Decision
from candor.key_limits import check_key_limits
from candor.ports import Turn
from candor.results import AskResult, Done, Idle

PREFIX = "/v1"
MODEL = "candor"
# Born with the first release that answered as a model; `created` is a fixed date.
MODEL_CREATED = 1_764_547_200  # 2025-12-01T00:00:00Z
QUESTION_MAX_CHARS = 1000  # as POST /ask's question
# What one earlier turn may bring into the history: the route step reads only the
# last question of it, and the graph cuts that at its own bound.
TURN_MAX_CHARS = 2000
# A client resends the whole conversation each time; only the last turns are read.
MAX_BODY_BYTES = 256 * 1024


# Errors, in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.


class OpenAIError(BaseModel):
    message: str = Field(description="What went wrong; never internal detail.")
    type: str = Field(
        description="invalid_request_error, permission_error, rate_limit_error, "
        "insufficient_quota or server_error."
    )
    param: str | None = Field(default=None, description="The parameter at fault, if one is.")
    code: str | None = Field(
        default=None, description="candor's stable reason, such as invalid_api_key."
    )
    trace_id: str | None = Field(default=None, description="Quote it to the operator.")


class OpenAIErrorResponse(BaseModel):
    error: OpenAIError


class InvalidRequestError(Exception):
    """A request candor can read but will not carry out as asked (400, or 404 for a model)."""

    def __init__(
        self, message: str, *, param: str | None, code: str = "invalid_request", status: int = 400
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.status = status


def _type_of(status: int, reason: str) -> str:
    if reason == "budget_exhausted":
        return "insufficient_quota"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def _shaped(error: BaseException, trace_id: str) -> tuple[int, OpenAIErrorResponse, dict[str, str]]:
    """The status, OpenAI-shaped body and headers of `error` (candor.api.errors' table)."""
    if isinstance(error, InvalidRequestError):
        body = OpenAIError(
            message=error.message,
            type="invalid_request_error",
            param=error.param,
            code=error.code,
            trace_id=trace_id,
        )
        return error.status, OpenAIErrorResponse(error=body), {errors.TRACE_HEADER: trace_id}
    public = errors.public_error(error, trace_id)
    reason = public.body["reason"]
    status = public.status
    headers = dict(public.headers)
    if reason == "budget_exhausted":
        # What OpenAI answers when an account's quota is spent, which tools know to
        # show rather than retry: the budget is back tomorrow, not in a few seconds.
        status = 429
        headers["x-should-retry"] = "false"
    body = OpenAIError(
        message=public.body["detail"], type=_type_of(status, reason), code=reason, trace_id=trace_id
    )
    return status, OpenAIErrorResponse(error=body), headers


def error_response(error: BaseException, trace_id: str) -> Response:
    """`error` as OpenAI's clients read one; the edge writes its refusals here with this."""
    status, body, headers = _shaped(error, trace_id)
    return JSONResponse(body.model_dump(), status, headers=headers)


def _invalid_fields(error: RequestValidationError) -> InvalidRequestError:
    """The first field at fault, named as OpenAI names parameters (messages.0.content)."""
    problems = errors.invalid_fields(error)
    first = problems[0] if problems else {"loc": [], "msg": "the body is not valid"}
    location = [str(part) for part in first["loc"] if part != "body"]
    param = ".".join(location) or None
    if first.get("type") == "json_invalid":
        return InvalidRequestError("the body is not valid JSON", param=None)
    return InvalidRequestError(f"{param or 'body'}: {first['msg']}", param=param)


class OpenAIRoute(APIRoute):
    """Every answer of these routes in OpenAI's shape, a bad body and a bug included."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def shaped(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as error:
                return error_response(_invalid_fields(error), errors.trace_id_of(request))
            except HTTPException as error:  # FastAPI's own: a body it cannot decode
                refused = InvalidRequestError(
                    str(error.detail), param=None, code="bad_request", status=error.status_code
                )
                return error_response(refused, errors.trace_id_of(request))
            except Exception as error:  # the table's status and fixed text; a bug a 500
                return error_response(error, errors.trace_id_of(request))

        return shaped


def keyed_routes() -> KeyedRoutes:
    return KeyedRoutes(PREFIX, error_response, max_body_bytes=MAX_BODY_BYTES)


# Requests.


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = Field(max_length=64)
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = Field(max_length=64)


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat completion request; parameters not listed here are ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256, description=f"`{MODEL}`.")
    messages: list[ChatMessage] = Field(
        min_length=1,
        max_length=500,
        description="The conversation; the last message is the user's question (at most "
        f"{QUESTION_MAX_CHARS} characters). System and developer messages are ignored.",
    )
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(
        default=None,
        max_length=256,
        description="Your id for the person asking: their requests share a conversation's "
        "limits and moderation state (a second abusive message ends it for them).",
    )
    n: int | None = Field(default=None, description="Only 1: candor gives one answer.")
    tools: list[Any] | None = Field(default=None, description="Refused: candor calls no tools.")
    functions: list[Any] | None = Field(default=None, description="Refused, as tools.")
    response_format: ResponseFormat | None = Field(default=None, description="Only `text`.")
    logprobs: bool | None = Field(default=None, description="Refused: not available.")


def _text(message: ChatMessage, where: str) -> str:
    """A message's text; content other than text is refused where it would be read."""
    content = message.content
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for number, part in enumerate(content):
        if part.type != "text" or part.text is None:
            raise InvalidRequestError(
                f"{where}: only text content is supported, not {part.type!r}",
                param=f"{where}.content.{number}",
                code="unsupported_content",
            )
        parts.append(part.text)
    return "\n".join(parts)


def _refuse_unsupported(body: ChatCompletionRequest) -> None:
    if body.model != MODEL:
        raise InvalidRequestError(
            f"The model `{body.model[:80]}` does not exist; the one model here is `{MODEL}`",
            param="model",
            code="model_not_found",
            status=404,
        )
    if body.n is not None and body.n != 1:
        raise InvalidRequestError("n: candor gives exactly one answer", param="n")
    if body.tools or body.functions:
        param = "tools" if body.tools else "functions"
        raise InvalidRequestError(f"{param}: candor calls no tools", param=param)
    if body.response_format is not None and body.response_format.type != "text":
        raise InvalidRequestError(
            "response_format: candor answers in text only", param="response_format"
        )
    if body.logprobs:
        raise InvalidRequestError("logprobs: not available from candor", param="logprobs")


def conversation(body: ChatCompletionRequest) -> tuple[str, list[Turn]]:
    """The question (the last message, a user's) and the turns before it, oldest first.

    Each user message before the question is a turn with the assistant message
    that follows it (or none); system, developer and tool messages are not read.
    """
    _refuse_unsupported(body)
    last = len(body.messages) - 1
    if body.messages[last].role != "user":
        raise InvalidRequestError(
            "the last message must be the user's question", param=f"messages.{last}.role"
        )
    text = _text(body.messages[last], f"messages.{last}")
    # Before stripping: str.strip() takes \x0b, \x0c and \x1c-\x1f for whitespace.
    found = CONTROL_CHARACTER.search(text)
    if found is not None:
        raise InvalidRequestError(
            f"the question must not contain control characters (U+{ord(found.group()):04X}); "
            "tab, newline and carriage return are allowed",
            param=f"messages.{last}.content",
        )
    question = text.strip()
    if not question:
        raise InvalidRequestError(
            "the question must contain more than whitespace", param=f"messages.{last}.content"
        )
    if len(question) > QUESTION_MAX_CHARS:
        raise InvalidRequestError(
            f"the question is at most {QUESTION_MAX_CHARS} characters",
            param=f"messages.{last}.content",
        )
    turns: list[Turn] = []
    for number, message in enumerate(body.messages[:last]):
        where = f"messages.{number}"
        if message.role == "user":
            turns.append(Turn(_text(message, where)[:TURN_MAX_CHARS], "", "answered"))
        elif message.role == "assistant" and turns and not turns[-1].answer:
            answer = _text(message, where)[:TURN_MAX_CHARS]
            turns[-1] = Turn(turns[-1].question, answer, "answered")
    return question, turns


# Responses.


class CandorExtras(BaseModel):
    """What candor adds to OpenAI's shape: how it decided, and from what."""

    decision: Decision
    citations: list[SourceOut]
    trace_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    cached: bool = Field(description="Answered from the cache of exact repeats: no model call.")


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str = Field(description="The answer with its markers, then its numbered sources.")
    refusal: None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str = MODEL
    choices: list[Choice]
    usage: Usage
    candor: CandorExtras


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


def _usage(result: AskResult) -> Usage:
    prompt = sum(step.tokens_in for step in result.trace)
    completion = sum(step.tokens_out for step in result.trace)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def _extras(result: AskResult) -> CandorExtras:
    return CandorExtras(
        decision=result.decision,
        citations=sources(result.citations),
        trace_id=result.trace_id,
        cached=result.cached,
    )


def completion(result: AskResult, *, created: int) -> ChatCompletion:
    return ChatCompletion(
        id=f"chatcmpl-{result.trace_id}",
        created=created,
        choices=[
            Choice(
                message=AssistantMessage(
                    content=with_sources(result.answer, sources(result.citations))
                )
            )
        ],
        usage=_usage(result),
        candor=_extras(result),
    )


def _data(payload: object) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


async def chunks(
    prepared: service.PreparedAsk,
    *,
    created: int,
    include_usage: bool,
    keepalive_seconds: float = stream.KEEPALIVE_SECONDS,
) -> AsyncIterator[bytes]:
    """The run as OpenAI's stream of chat.completion.chunk events (see the module)."""
    head: dict[str, Any] = {"id": f"chatcmpl-{prepared.trace_id}"}
    head |= {"object": "chat.completion.chunk", "created": created, "model": MODEL}

    def chunk(delta: dict[str, str], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return head | {"choices": [choice]}

    yield _data(chunk({"role": "assistant", "content": ""}))
    try:
        async for event in prepared.events(idle_seconds=keepalive_seconds):
            match event:
                case Idle():
                    yield stream.KEEPALIVE
                case Done(result=result):
                    for piece in sentences(with_sources(result.answer, sources(result.citations))):
                        yield _data(chunk({"content": piece}))
                    extras = _extras(result).model_dump(mode="json")
                    yield _data(chunk({}, "stop") | {"candor": extras})
                    if include_usage:
                        usage = _usage(result).model_dump()
                        yield _data(head | {"choices": [], "usage": usage})
                    yield b"data: [DONE]\n\n"
                case _:
                    pass  # steps and unchecked tokens: see the module's docstring
    except Exception as error:  # after the status line: the error as an event
        _, body, _ = _shaped(error, prepared.trace_id)
        yield _data(body.model_dump())


# Routes.

router = APIRouter(prefix=PREFIX, tags=["openai"], route_class=OpenAIRoute)

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": OpenAIErrorResponse, "description": text}
    for status, text in {
        400: "The body is not a chat completion candor can carry out; `param` names why.",
        401: "No valid server key in X-Api-Key or Authorization: Bearer.",
        403: "The Origin is not allowed, or this user's conversation was ended by moderation.",
        404: "The model is not `candor`.",
        413: f"The body is over {MAX_BODY_BYTES // 1024} KB.",
        415: "The body is not application/json.",
        429: "Rate limited (see Retry-After), or the day's spending budget is used up "
        "(type insufficient_quota; not retried).",
        500: "A bug; the message is generic and the log has the detail under the trace id.",
        503: "A dependency (model, index, state store) is unavailable, or the question took "
        "too long; see Retry-After.",
    }.items()
}


def _key_of(request: Request) -> str:
    key: str | None = getattr(request.state, SERVER_KEY_STATE, None)
    if key is None:  # only an app whose edge does not guard these routes gets here
        raise ServerKeyRequiredError()
    return key


def _session_for(key: str, user: str | None) -> str | None:
    """One conversation per end user a key names in `user`; without one, a new one."""
    if not user:
        return None
    return "user-" + sha256(f"{key}\0{user}".encode()).hexdigest()[:32]


@router.get("/models", response_model=ModelList, responses=ERRORS)
async def models(request: Request) -> ModelList:
    """The one model: `candor`, the documents' answers."""
    _key_of(request)
    return ModelList(data=[_model()])


@router.get("/models/{model}", response_model=Model, responses=ERRORS)
async def model(model: str, request: Request) -> Model:
    """The model `candor`; any other is 404 model_not_found."""
    _key_of(request)
    if model != MODEL:
        raise InvalidRequestError(
            f"The model `{model[:80]}` does not exist",
            param="model",
            code="model_not_found",
            status=404,
        )
    return _model()


def _model() -> Model:
    return Model(id=MODEL, created=MODEL_CREATED, owned_by="candor")


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={
        **ERRORS,
        200: {
            "description": "The chat completion; with `stream: true`, server-sent events of "
            "chat.completion.chunk objects (the answer once it is checked), then "
            "`data: [DONE]`.",
            "content": {stream.MEDIA_TYPE: {"schema": {"type": "string"}}},
        },
    },
)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, deps: DepsDep
) -> ChatCompletion | StreamingResponse:
    """Answer the last user message from the documents, with citations, or decline."""
    key = _key_of(request)
    question, history = conversation(body)
    created = int(time.time())
    await asyncio.to_thread(check_key_limits, deps.state, deps.settings, key, now=created)
    prepared = await service.prepare(
        deps,
        question,
        session_id=_session_for(key, body.user),
        trace_id=errors.trace_id_of(request),
        history=history,
    )
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        events = chunks(
            prepared,
            created=created,
            include_usage=include_usage,
            keepalive_seconds=request.app.state.keepalive_seconds,
        )
        return StreamingResponse(events, media_type=stream.MEDIA_TYPE, headers=stream.HEADERS)
    return completion(await prepared.result(), created=created)
