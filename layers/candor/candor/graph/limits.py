"""The most each model call of the graph may consume, and so the most a request can cost.

The budget reserves this before a request (candor.guards) and the runner holds
every run to it (candor.graph.runner), so the reservation is an upper bound by
construction rather than an estimate:

- calls: each node's visits are capped (`visits`, from the graph's loop cap),
  and each visit makes at most the calls listed in NODE_CALLS; the runner
  refuses a visit or a call past them.
- output: each call's `max_tokens` is one of the constants here, which the
  nodes pass and which the providers enforce.
- input: a byte-level BPE token (OpenAI's, Qwen's) is at least one byte, so a
  prompt costs at most its UTF-8 bytes in tokens, plus the framing of its
  messages. Prompts cut every piece of outside text at a fixed length
  (candor.graph.prompts), so the longest prompt of each call is the one built
  from the longest, widest text: `call_bounds` builds exactly that prompt and
  counts it. The runner checks each real prompt against it before the call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pydantic import BaseModel

from candor import packing, planning
from candor.curated import lookup
from candor.graph import prompts
from candor.graph.schemas import Moderation, Rewrite, Triage
from candor.settings import Settings
from candor.types import Chunk, Hit, Message

# Output caps (tokens). A decision is a few JSON tokens; 128 leaves room to spare.
STRUCTURED_MAX_TOKENS = 128
# A judged choice reads one token's probabilities (ChatModel.judge).
JUDGE_MAX_TOKENS = 1
REWRITE_MAX_TOKENS = 48
CONVERSE_MAX_TOKENS = 60
# The answer's cap is the setting answer_max_tokens.

# What a backend adds around the text of a prompt, in tokens: ChatML's
# <|im_start|>, role, <|im_end|> and newline per message and the opening of the
# reply (OpenAI documents about 3 per message and 3 per reply).
MESSAGE_FRAMING_TOKENS = 8
CALL_FRAMING_TOKENS = 8
# A structured call on OpenAI also sends its JSON schema, which is billed as input:
# counted as the schema's bytes plus this much for the text around it.
SCHEMA_FRAMING_TOKENS = 64

# The model calls one visit of each node makes at most, in order. A slot with
# two kinds makes one call of either kind (generate answers or converses).
Slot = tuple[str, ...]
NODE_CALLS: dict[str, tuple[Slot, ...]] = {
    # Triage and the focused moderation call, in either order: a message the
    # screening classifier flags gets the moderation call first, then triage when
    # the look clears it and the classifier was unsure of its kind. Often neither.
    "moderate": (("triage", "moderation"), ("triage", "moderation")),
    "route": (),
    "curated": (),  # embeds the question and a few words: EMBEDDINGS
    "catalogue": (),  # reads the catalogue and writes from a template: no model call
    "plan": (),  # splits by rules and searches each part: EMBEDDINGS
    "retrieve": (),  # embeds the query and the sentences it packs: EMBEDDINGS
    "grade": (("grade",),),
    "rewrite": (("rewrite",),),
    # The second: answer_again, only when the first answer held no sentence.
    "generate": (("answer", "converse"), ("answer_again",)),
}
# The index reads (queries and fetches) one visit of each node makes at most:
# retrieve one query (dense and keyword together) and, with widen_passages, one
# fetch of the passages' neighbours; grade the grounding gate's, all its names in
# one query, the product names ranked by the question in a second, and (once per
# request) whether the index answers keyword queries at all (candor.graph.grounding);
# catalogue one fetch of the passages where the pages it lists start; plan what
# retrieve reads, once for each part. The runner refuses a read past them.
RETRIEVE_READS = 2
INDEX_READS: dict[str, int] = {
    "retrieve": RETRIEVE_READS,
    "grade": 3,
    "catalogue": 1,
    "plan": RETRIEVE_READS * planning.MAX_PARTS,
}
QUERY_CHARS = prompts.QUESTION_CHARS
# The texts each visit may embed, as the most characters of each: retrieve embeds
# its query (cut at QUERY_CHARS), then the sentences it packs (candor.packing: at
# most MAX_UNITS, each cut at UNIT_EMBED_CHARS).
EMBEDDINGS: dict[str, tuple[int, ...]] = {
    "curated": lookup.embedding_bounds(),
    "retrieve": (QUERY_CHARS,) + (packing.UNIT_EMBED_CHARS,) * packing.MAX_UNITS,
    # A planned question: each part's query and the sentences packed for it.
    "plan": ((QUERY_CHARS,) + (packing.UNIT_EMBED_CHARS,) * packing.MAX_UNITS) * planning.MAX_PARTS,
}

_WIDEST = "\U0010ffff"  # a character of 4 bytes, the most UTF-8 takes


def visits(max_attempts: int) -> dict[str, int]:
    """How many times each node can run in one request.

    retrieve counts the attempts and grade follows each; rewrite runs only while
    attempts remain (candor.graph.edges.after_grade), so once fewer.
    """
    return {
        "moderate": 1,
        "route": 1,
        "curated": 1,
        "catalogue": 1,
        "plan": 1,
        "retrieve": max_attempts,
        "grade": max_attempts,
        "rewrite": max_attempts - 1,
        "generate": 1,
    }


@dataclass(frozen=True, slots=True)
class CallBound:
    """The most one model call can consume."""

    tokens_in: int
    tokens_out: int

    def covers(self, other: CallBound) -> bool:
        return self.tokens_in >= other.tokens_in and self.tokens_out >= other.tokens_out


def text_bytes(text: str) -> int:
    # surrogatepass: a lone surrogate a client sent counts 3 bytes, more than the
    # "?" a backend replaces it with.
    return len(text.encode("utf-8", "surrogatepass"))


def input_tokens(messages: Sequence[Message], schema: type[BaseModel] | None = None) -> int:
    """The most input tokens `messages` can be billed as, on any byte-level BPE tokenizer."""
    tokens = CALL_FRAMING_TOKENS + sum(
        text_bytes(m["role"]) + text_bytes(m["content"]) + MESSAGE_FRAMING_TOKENS for m in messages
    )
    if schema is not None:
        tokens += text_bytes(json.dumps(schema.model_json_schema())) + SCHEMA_FRAMING_TOKENS
    return tokens


def embedding_tokens(texts: Sequence[str]) -> int:
    return sum(text_bytes(text) + CALL_FRAMING_TOKENS for text in texts)


def embedding_bounds(node: str) -> list[int]:
    """The most tokens each text one visit of `node` embeds can be billed as."""
    return [embedding_tokens([_WIDEST * chars]) for chars in EMBEDDINGS.get(node, ())]


def _longest(chars: int) -> str:
    # Past the cut, so the prompt also carries the mark of a cut.
    return _WIDEST * (chars + 1)


@lru_cache(maxsize=16)
def _bounds(
    passage_chars: int, excerpts: int, answer_max_tokens: int, site_name: str
) -> dict[str, CallBound]:
    question = _longest(prompts.QUESTION_CHARS)
    label = _longest(prompts.LABEL_CHARS)
    hit = Hit(Chunk("x", _longest(passage_chars), "x", label, label), 0.0)
    passages = prompts.format_passages([hit] * excerpts, passage_chars)
    longest: dict[str, tuple[list[Message], type[BaseModel] | None, int]] = {
        "triage": (prompts.triage(question), Triage, STRUCTURED_MAX_TOKENS),
        "moderation": (prompts.moderation(question), Moderation, STRUCTURED_MAX_TOKENS),
        "grade": (prompts.grade(passages, question), None, JUDGE_MAX_TOKENS),
        "rewrite": (
            prompts.rewrite(question, [question] * prompts.MAX_TRIED),
            Rewrite,
            REWRITE_MAX_TOKENS,
        ),
        "answer": (prompts.answer(passages, question), None, answer_max_tokens),
        "answer_again": (prompts.answer_again(passages, question), None, answer_max_tokens),
        "converse": (prompts.converse(question, site_name), None, CONVERSE_MAX_TOKENS),
    }
    return {
        kind: CallBound(input_tokens(messages, schema), max_tokens)
        for kind, (messages, schema, max_tokens) in longest.items()
    }


def call_bounds(settings: Settings) -> Mapping[str, CallBound]:
    """The most each kind of call can consume with these settings: a prompt shows at
    most the settings' top_k excerpts, or the most a request may ask for."""
    excerpts = min(max(settings.top_k, prompts.REQUEST_MAX_PASSAGES), prompts.MAX_PASSAGES)
    return _bounds(settings.passage_chars, excerpts, settings.answer_max_tokens, settings.site_name)


def slot_bound(slot: Slot, bounds: Mapping[str, CallBound]) -> CallBound:
    """A bound on one call of any kind in `slot`."""
    return CallBound(
        max(bounds[kind].tokens_in for kind in slot),
        max(bounds[kind].tokens_out for kind in slot),
    )


@dataclass(frozen=True, slots=True)
class Envelope:
    """The most one request can consume: chat tokens in and out, embedding tokens,
    index reads."""

    calls: int
    chat_in: int
    chat_out: int
    embedding_in: int
    index_reads: int = 0


# Nodes that are each one attempt of the search, and so share the attempts: plan is
# the first attempt of a question it splits, in place of retrieve's first, so a
# request makes at most max_attempts visits of the two together (the runner refuses
# one more). Their visits are counted as max_attempts of retrieve and, once, what a
# plan's visit takes beyond a retrieve's.
SEARCHES = ("plan", "retrieve")


def envelope(settings: Settings) -> Envelope:
    bounds = call_bounds(settings)
    calls = chat_in = chat_out = embedding_in = index_reads = 0
    for node, times in visits(settings.max_attempts).items():
        for slot in NODE_CALLS[node]:
            bound = slot_bound(slot, bounds)
            calls += times
            chat_in += times * bound.tokens_in
            chat_out += times * bound.tokens_out
        if node == "plan":
            embedding_in += times * (
                sum(embedding_bounds("plan")) - sum(embedding_bounds("retrieve"))
            )
            index_reads += times * (INDEX_READS["plan"] - INDEX_READS["retrieve"])
            continue
        embedding_in += times * sum(embedding_bounds(node))
        index_reads += times * INDEX_READS.get(node, 0)
    return Envelope(calls, chat_in, chat_out, embedding_in, index_reads)
