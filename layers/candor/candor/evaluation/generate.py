"""Questions written from an owner's own documents, to measure retrieval on them.

`candor eval --generate N --corpus DIR` samples N passages spread over the corpus,
asks the chat model for one question a visitor might type that the passage answers,
in the visitor's words rather than the page's, and keeps the questions that pass
the filters below. Each kept question expects the page it was written from (and any
other page that holds the same text); in a PDF, the page of the PDF its passage
starts on (`manual.pdf#page=41`). The result is a question file in the format
of candor.evaluation.questions, so every figure of `candor eval` reads it.

What this measures and what it does not: a generated question is answerable by
construction, so it tests whether retrieval finds the page, not whether the agent
declines what the documents lack. Pages that answer the question in other words are
not listed, so its recall is a lower bound, the same for every strategy. Generated
questions are for measuring; they must never be used to choose prompts.

Every call is bounded: at most `attempts_for(n)` model calls of at most
QUESTION_TOKENS output tokens each, whatever the model writes.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from candor.errors import IngestError
from candor.evaluation.retrieval_metrics import PAGE_MARK
from candor.ingest.loaders import load_document
from candor.ingest.pages import page_finder
from candor.ports import ChatModel
from candor.progress import progress as show_progress
from candor.settings import Settings
from candor.types import Message, Usage

QUESTIONS_FILE = "generated-questions.jsonl"
ABOUT_FILE = "generated-questions.json"

# The excerpt the model reads: long enough to hold a fact worth asking about, short
# enough that the question is about one thing. Windows are whole paragraphs.
MIN_WINDOW_CHARS = 300
MAX_WINDOW_CHARS = 900
MIN_WINDOW_WORDS = 40
# Below this share of letters and spaces a window is code, a table or a list of
# options, which a visitor does not ask about in the page's own layout.
MIN_PROSE_SHARE = 0.8
QUESTION_TOKENS = 64
MIN_QUESTION_WORDS = 4
MAX_QUESTION_WORDS = 30
# A question that repeats this many words of the excerpt in a row is the page's
# wording, which any keyword search finds: not how a visitor asks.
COPIED_RUN = 4
# Sentences at least this long that stand on another page make it expected too.
SHARED_SENTENCE_CHARS = 60

SYSTEM = "You write test questions for the chat assistant of a documentation website."
TASK = (
    "Here is an excerpt from the page {title!r}{heading}.\n\n"
    "<excerpt>\n{excerpt}\n</excerpt>\n\n"
    "Write one question that a visitor to this website might type into its chat box, "
    "and that this excerpt answers. Write it the way a visitor would: short, in everyday "
    "words, about what they want to do or to know. Do not copy phrases from the excerpt, "
    "and do not mention the excerpt, the page or the documentation. "
    "Reply with the question alone."
)
# Words that show the question was written about a text, not by a visitor.
_SELF_REFERENCE = re.compile(
    r"\b(excerpt|passage|this (page|section|text|document|article)|the (text|documentation|"
    r"document|article) (says|states|mentions|describes)|above|mentioned)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_LEAD = re.compile(r"^\s*(?:question\s*\d*\s*[:.-]|q\s*[:.-]|\d+[.)])\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Window:
    """A run of whole paragraphs of one section of one document."""

    source: str
    title: str
    heading: str
    text: str
    page: int | None = None  # the page it starts on, in a paged document (a PDF)

    @property
    def expected(self) -> str:
        """What a question written from it expects: its page of a PDF, else its document."""
        return self.source if self.page is None else f"{self.source}{PAGE_MARK}{self.page}"


@dataclass(slots=True)
class Generated:
    """The question file's rows and what the filters did."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1


def attempts_for(n: int) -> int:
    """The most model calls `generate` makes for `n` questions: twice as many, since the
    filters reject some, and never more."""
    return 2 * n


def windows_of(source: str, data: bytes) -> list[Window]:
    """The document's prose windows, each of whole paragraphs of one section."""
    try:
        document = load_document(data, source)
    except IngestError:
        return []
    found: list[Window] = []
    page_of = page_finder(document.pages) if document.pages else None
    for section in document.sections:
        pending: list[str] = []
        for paragraph in (p.strip() for p in re.split(r"\n\s*\n", section.text)):
            if not paragraph:
                continue
            if len(paragraph) > MAX_WINDOW_CHARS:
                pending = []
                continue
            if sum(map(len, pending)) + len(paragraph) > MAX_WINDOW_CHARS:
                pending = pending[1:] if len(pending) > 1 else []
            pending.append(paragraph)
            text = "\n\n".join(pending)
            if len(text) >= MIN_WINDOW_CHARS:
                if is_prose(text):
                    page = page_of(text) if page_of is not None else None
                    found.append(Window(source, document.title, section.heading, text, page))
                pending = []
    return found


def is_prose(text: str) -> bool:
    """Mostly words: not code, a table or a list of option names."""
    letters = sum(1 for c in text if c.isalpha() or c.isspace())
    return (
        letters / max(len(text), 1) >= MIN_PROSE_SHARE
        and len(_WORD.findall(text)) >= MIN_WINDOW_WORDS
        and not text.lstrip().startswith(("|", "```", "    "))
    )


def sample_windows(
    documents: Sequence[tuple[str, bytes]], count: int, *, seed: int
) -> list[Window]:
    """Up to `count` windows, spread over the documents: a shuffled round over the
    documents, one random window of each per round, none twice."""
    rng = random.Random(seed)
    pools = {source: windows_of(source, data) for source, data in sorted(documents)}
    order = [source for source, pool in pools.items() if pool]
    rng.shuffle(order)
    for source in order:
        rng.shuffle(pools[source])
    chosen: list[Window] = []
    while len(chosen) < count and order:
        for source in list(order):
            if len(chosen) >= count:
                break
            pool = pools[source]
            chosen.append(pool.pop())
            if not pool:
                order.remove(source)
    return chosen


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(unicodedata.normalize("NFKC", text))]


def copied_run(question: str, excerpt: str) -> int:
    """The most words of the question that stand in the excerpt in the same order, in a row."""
    asked, source = words(question), words(excerpt)
    positions: dict[str, list[int]] = {}
    for i, word in enumerate(source):
        positions.setdefault(word, []).append(i)
    best = 0
    for start in range(len(asked)):
        for at in positions.get(asked[start], ()):
            length = 1
            while (
                start + length < len(asked)
                and at + length < len(source)
                and asked[start + length] == source[at + length]
            ):
                length += 1
            best = max(best, length)
    return best


def clean_question(reply: str) -> str:
    """The question a reply holds: its first non-empty line, without a label or quotes."""
    line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    line = _LEAD.sub("", line).strip().strip("\"'“”‘’`*").strip()
    return re.sub(r"\s+", " ", line)


def rejection(question: str, excerpt: str, seen: set[str]) -> str | None:
    """Why a question is not kept, or None: the filters, cheapest first."""
    if not question:
        return "empty"
    if not question.endswith("?") or question.count("?") > 1:
        return "not one question"
    count = len(words(question))
    if count < MIN_QUESTION_WORDS or count > MAX_QUESTION_WORDS:
        return "too short or too long"
    if _SELF_REFERENCE.search(question):
        return "speaks of the text"
    if copied_run(question, excerpt) >= COPIED_RUN:
        return "copies the page"
    if " ".join(words(question)) in seen:
        return "duplicate"
    return None


def also_expected(window: Window, documents: Sequence[tuple[str, str]]) -> list[str]:
    """Other documents that hold one of the window's long sentences word for word."""
    sentences = [
        " ".join(s.split())
        for s in re.split(r"(?<=[.!?])\s+", window.text)
        if len(s) >= SHARED_SENTENCE_CHARS
    ]
    if not sentences:
        return []
    return [
        source
        for source, flat in documents
        if source != window.source and any(s in flat for s in sentences)
    ]


def prompt(window: Window) -> list[Message]:
    heading = f", section {window.heading!r}" if window.heading else ""
    task = TASK.format(title=window.title, heading=heading, excerpt=window.text)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]


async def write_question(
    window: Window, chat: ChatModel, seen: set[str]
) -> tuple[str, str | None, Usage]:
    """One model call: a question the window answers, why it is not kept (None: kept,
    and added to `seen`), and the call's usage."""
    reply = await chat.text(prompt(window), max_tokens=QUESTION_TOKENS)
    question = clean_question(reply.text)
    reason = rejection(question, window.text, seen)
    if reason is None:
        seen.add(" ".join(words(question)))
    return question, reason, reply.usage


async def generate(
    documents: Sequence[tuple[str, bytes]],
    chat: ChatModel,
    n: int,
    *,
    seed: int,
    progress: Callable[[int], object] = lambda _: None,
) -> Generated:
    """Up to `n` questions from the documents, at most attempts_for(n) model calls."""
    if n < 1:
        raise ValueError("n must be at least 1")
    windows = sample_windows(documents, attempts_for(n), seed=seed)
    flat = [(source, " ".join(_text_of(source, data).split())) for source, data in documents]
    result = Generated()
    seen: set[str] = set()
    for window in windows:
        if len(result.rows) >= n:
            break
        question, reason, usage = await write_question(window, chat, seen)
        result.attempts += 1
        result.tokens_in += usage.tokens_in
        result.tokens_out += usage.tokens_out
        result.cost_usd += float(usage.cost_usd)
        progress(1)
        if reason is not None:
            result.reject(reason)
            continue
        result.rows.append(
            {
                "id": f"gen-{len(result.rows) + 1:04d}",
                "question": question,
                "kind": "factual",
                "expected_sources": [window.expected, *also_expected(window, flat)],
                "excerpt": window.text,
            }
        )
    return result


def _text_of(source: str, data: bytes) -> str:
    try:
        document = load_document(data, source)
    except IngestError:
        return ""
    return "\n".join(section.text for section in document.sections)


def write_generated(
    settings: Settings, corpus: Path, out: Path, n: int, *, seed: int
) -> tuple[Path, dict[str, Any]]:
    """Generate `n` questions from the corpus with the settings' chat model; write the
    question file and, beside it, how it was made. Returns the file's path and that."""
    from candor.evaluation.corpus import read_corpus
    from candor.evaluation.runner import EvalError
    from candor.factory import build_chat

    documents = read_corpus(corpus)
    if not documents:
        raise EvalError(f"{corpus}: no supported documents (.md, .txt, .html, .pdf)")
    chat = build_chat(settings)
    ticker = show_progress(attempts_for(n), "generate", "call", enabled=sys.stderr.isatty())
    started = time.perf_counter()
    try:
        result = asyncio.run(generate(documents, chat, n, seed=seed, progress=ticker.update))
    finally:
        ticker.close()
    if not result.rows:
        raise EvalError(f"{corpus}: no question passed the filters ({result.rejected})")
    out.mkdir(parents=True, exist_ok=True)
    path = out / QUESTIONS_FILE
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in result.rows),
        encoding="utf-8",
    )
    about = {
        "corpus": str(corpus),
        "documents": len(documents),
        "model": chat.name,
        "seed": seed,
        "requested": n,
        "kept": len(result.rows),
        "attempts": result.attempts,
        "max_attempts": attempts_for(n),
        "rejected": dict(sorted(result.rejected.items())),
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost_usd": round(result.cost_usd, 6),
        "seconds": round(time.perf_counter() - started, 1),
        "prompt": {"system": SYSTEM, "task": TASK},
    }
    (out / ABOUT_FILE).write_text(json.dumps(about, indent=2) + "\n", encoding="utf-8")
    return path, about
