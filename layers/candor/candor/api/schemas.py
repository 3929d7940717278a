"""Request and response bodies of the HTTP API."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from candor.graph.prompts import REQUEST_MAX_PASSAGES
from candor.graph.state import Decision

# The shape of an id the server signs (candor.api.sessions); only the signature
# check tells a real one from a forgery.
SESSION_ID_PATTERN = r"^[A-Za-z0-9_.-]{8,128}$"

# C0 controls, DEL and C1 controls: no visitor types them, and NUL or an escape
# sequence (ESC, or C1's CSI U+009B) has no business in a prompt, a trace or the
# owner's terminal. Tab, newline and carriage return are how text spans lines:
# allowed. Format characters (bidirectional overrides, zero-width marks) are left
# to whoever shows the text (candor.review.printable escapes them): some scripts
# need them.
CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def refuse_control_characters(field: str, value: str) -> str:
    """`value`, or a ValueError naming the first control character by code point.

    The message names the character and its position, never the text around it:
    a 422 does not repeat the visitor's words (candor.api.errors.invalid_fields).
    """
    found = CONTROL_CHARACTER.search(value)
    if found is not None:
        raise ValueError(
            f"{field} must not contain control characters (U+{ord(found.group()):04X} at "
            f"character {found.start() + 1}); tab, newline and carriage return are allowed"
        )
    return value


class AskRequest(BaseModel):
    question: str = Field(min_length=1, max_length=1000, description="The visitor's message.")
    session_id: str | None = Field(
        default=None,
        pattern=SESSION_ID_PATTERN,
        description=(
            "Continue a conversation with the session_id of an earlier response; omit it to "
            "start a new one. An id this server did not sign, or an expired one, gets 401."
        ),
    )
    top_k: int | None = Field(
        default=None, ge=1, le=REQUEST_MAX_PASSAGES, description="Passages to retrieve."
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Before stripping: str.strip() takes \x0b, \x0c and \x1c-\x1f for whitespace.
        refuse_control_characters("question", value)
        if not value.strip():
            raise ValueError("question must contain more than whitespace")
        return value.strip()


class CitationOut(BaseModel):
    id: str
    source: str
    title: str
    snippet: str = Field(
        description=(
            "The passage's first 240 characters, whitespace collapsed; `quote` reads better."
        )
    )
    page: int | None = Field(
        default=None,
        description="For a PDF, the page the passage starts on: link to `source#page=N`.",
    )
    url: str | None = Field(
        default=None,
        description=(
            "The document's public http(s) address: its S3 object's `x-amz-meta-url`, or "
            "CANDOR_SOURCE_BASE_URL and its path. Absent when it has none."
        ),
    )
    quote: str = Field(
        default="",
        description=(
            "The sentence or two of the passage that back the answer's sentences citing "
            "it, as plain text (no Markdown, HTML or table syntax; a table row reads "
            '"header: value; header: value"), at most about 300 characters. Show it as '
            "text: it is still the document's words. Empty in answers stored before quotes."
        ),
    )


class TraceStepOut(BaseModel):
    node: str
    ms: float
    tokens_in: int = Field(description="Prompt tokens sent to the model by this step's calls.")
    tokens_evaluated: int = Field(
        description=(
            "Of tokens_in, those the model computed; the rest it read from a cache of an "
            "earlier prompt's beginning (the local model's saved system prompts and shared "
            "passages, OpenAI's prompt caching). Equal to tokens_in where the backend "
            "cannot tell."
        )
    )
    tokens_out: int = Field(description="Tokens the model generated.")
    cost_usd: float
    index_reads: int = Field(
        default=0,
        description=(
            "Queries and fetches this step made of the index (the retrieval, the grounding "
            "gate's lookups); bounded per step, whatever the question."
        ),
    )


class AskResponse(BaseModel):
    answer: str
    decision: Decision
    citations: list[CitationOut]
    attempts: int
    session_id: str
    trace_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    trace: list[TraceStepOut]
    cached: bool = Field(
        default=False, description="Answered from the cache of exact repeats: no model call."
    )


class ErrorResponse(BaseModel):
    detail: str = Field(description="What went wrong, for the visitor; never internal detail.")
    reason: str = Field(description="A stable code, such as session_invalid or rate_limited.")
    trace_id: str = Field(
        pattern=r"^[0-9a-f]{32}$", description="Quote it to the operator: the log has the detail."
    )


class InvalidField(BaseModel):
    """One thing wrong with the input; the input itself is never repeated."""

    loc: list[str | int] = Field(
        description='Where: ["body", "question"], or ["body", position] for JSON that '
        "cannot be parsed."
    )
    msg: str = Field(description="Why, for a person.")
    type: str = Field(description="Why, as pydantic's stable code (string_too_long ...).")


class ValidationErrorResponse(BaseModel):
    detail: list[InvalidField] = Field(description="Each field that is wrong, and why.")
    reason: Literal["invalid_request"]
    trace_id: str = Field(pattern=r"^[0-9a-f]{32}$")


Status = Literal["ok", "degraded", "warming"]


class HealthResponse(BaseModel):
    status: Status
    dependencies: dict[str, Status]


def error_responses(**described: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for error statuses, so that the schema names every response."""
    return {
        int(status): {"model": ErrorResponse, "description": d} for status, d in described.items()
    }


# What the edge (candor.api.edge) and the error table (candor.api.errors) can answer.
EDGE_RESPONSES = error_responses(
    **{
        "400": "The body is not valid JSON.",
        "403": "The Origin is not allowed, a request without one has no valid X-Api-Key, "
        "or the session was ended by moderation.",
        "413": "The body is over 16 KB.",
        "415": "The body is not application/json.",
        "500": "A bug; the body is generic and the log has the detail under the trace id.",
    }
)
