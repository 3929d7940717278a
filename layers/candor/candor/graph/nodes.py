"""The graph's nodes: `async def node(state, deps) -> Update`.

A node reads the state, may call ports, and returns only the fields it changes.
Blocking port calls (embedding, index, state store) run in a worker thread so
that a server keeps serving other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence

from candor import planning, question_keys, retrieval
from candor.catalogue import asks as catalogue_asks
from candor.deps import Deps
from candor.errors import StateStoreError
from candor.graph import grounding, limits, prompts, quotes, smalltalk, support, yes_no
from candor.graph.answer_text import AnswerCleaner, clean_answer
from candor.graph.citations import MARKER, cite, with_attribution
from candor.graph.schemas import Moderation, Rewrite, Triage
from candor.graph.state import GraphState, Intent, ScreenedBy, ScreeningRecord, Update
from candor.screening import classifier, policy, verdicts
from candor.screening.classifier import Screen
from candor.settings import Settings
from candor.text import words
from candor.types import Hit, Message

logger = logging.getLogger(__name__)


async def moderate(state: GraphState, deps: Deps) -> Update:
    """Judge the new message alone; the verdict on abuse ignores the history.

    The screening classifier goes first (candor.screening.policy). What it is sure
    of needs no model call: the kind, and that the message is not abusive. What it
    flags as abusive gets the focused moderation call, which alone can warn. The
    rest goes to one structured triage call, which also classifies the message's
    kind (so that route needs no call of its own), unless the store holds the
    triage call's verdict on the same message (candor.screening.verdicts). A
    message triage flags gets the focused look too before the session is warned:
    a false warning costs a visitor far more than one extra call.
    """
    settings = deps.settings
    screen = classifier.shipped().screen(state.question) if settings.screening else None
    outcome = policy.outcome(screen, settings.screening_confidence) if screen else "unsure"
    if screen is not None and outcome == "sure":
        return _screened(screen.kind, "classifier", screen)
    if screen is not None and outcome == "flagged":
        if await _insulting(state, deps):
            return await _offence(state, deps, _screened(screen.kind, "classifier", screen, True))
        if screen.confidence >= settings.screening_confidence:
            return _screened(screen.kind, "classifier", screen, True)
        verdict = await _triage(state, deps)  # its flag is answered: the look cleared it
        return _screened(verdict.kind, "model", screen, True)
    key = ""
    if settings.cache_enabled:
        secret = await asyncio.to_thread(question_keys.key_for, settings)
        key = verdicts.digest(state.question, chat_model=deps.chat.name, secret=secret)
    cached = await _cached_verdict(key, deps) if settings.cache_enabled else None
    if cached is not None:
        return _screened(cached, "cache", screen)
    verdict = await _triage(state, deps)
    if verdict.abusive:
        screened = _screened(verdict.kind, "model", screen, True)
        return await _offence(state, deps, screened) if await _insulting(state, deps) else screened
    if settings.cache_enabled and verdicts.cacheable(verdict.kind):  # nothing flagged it
        await _keep_verdict(key, verdict.kind, deps)
    return _screened(verdict.kind, "model", screen)


def _screened(
    kind: Intent, by: ScreenedBy, screen: Screen | None, moderated: bool = False
) -> Update:
    record = ScreeningRecord(
        by,
        kind,
        confidence=round(screen.confidence, 4) if screen else None,
        abusive=round(screen.abusive, 4) if screen else None,
        moderated=moderated,
    )
    return {"intent": kind, "screening": record}


async def _triage(state: GraphState, deps: Deps) -> Triage:
    return (
        await deps.chat.structured(
            prompts.triage(state.question), Triage, max_tokens=limits.STRUCTURED_MAX_TOKENS
        )
    ).value


async def _insulting(state: GraphState, deps: Deps) -> bool:
    second = await deps.chat.structured(
        prompts.moderation(state.question), Moderation, max_tokens=limits.STRUCTURED_MAX_TOKENS
    )
    return second.value.insulting


async def _offence(state: GraphState, deps: Deps, screened: Update) -> Update:
    status = await asyncio.to_thread(deps.state.record_offence, state.session_id)
    if status == "ended":
        return screened | {"decision": "ended", "answer": prompts.ended()}
    return screened | {"decision": "warned", "answer": prompts.warning()}


async def _cached_verdict(key: str, deps: Deps) -> Intent | None:
    # The cache saves a call; a store that fails to read it costs only that call.
    try:
        stored = await asyncio.to_thread(deps.state.verdict_get, key, now=time.time())
    except StateStoreError:
        logger.warning("the verdict cache could not be read", exc_info=True)
        return None
    return verdicts.from_json(stored) if stored is not None else None


async def _keep_verdict(key: str, kind: Intent, deps: Deps) -> None:
    expires_at = int(time.time()) + deps.settings.cache_ttl_seconds
    try:
        await asyncio.to_thread(
            deps.state.verdict_put, key, verdicts.to_json(kind), expires_at=expires_at
        )
    except StateStoreError:
        logger.warning("the verdict cache could not be written", exc_info=True)


# A small model over-calls the two routes that skip retrieval. These need evidence
# in the message itself: code to fix, or too few words to name a topic.
CODE_EVIDENCE = re.compile(
    r"\n\s*\S.*\n|```|Traceback|Error:|error:|Exception|\bat \S+:\d+|#!/|[{};]\s*$",
    re.MULTILINE,
)
FOLLOW_UP_MAX_WORDS = 6


def effective_intent(intent: Intent | None, message: str) -> Intent:
    if smalltalk.is_courtesy(message):
        return "greeting"
    if intent == "code_request" and not CODE_EVIDENCE.search(message):
        return "question"
    if intent == "follow_up" and len(message.split()) > FOLLOW_UP_MAX_WORDS:
        return "question"
    return intent or "question"


async def route(state: GraphState, deps: Deps) -> Update:
    """Pick the path. A follow-up borrows the topic of the last answered question.

    A question about the documents themselves goes to the catalogue node: one the
    screen calls `catalogue`, one whose words the catalogue's rules read plainly
    ("which options does git push accept?", candor.catalogue.asks.routable), and a
    greeting that asks what candor can help with.
    """
    settings = deps.settings
    intent = effective_intent(state.intent, state.question)
    match intent:
        case "greeting":
            if deps.catalogue is not None and _asks_what_it_covers(state.question):
                # "What can you help me with?": the documents' real topics, not small talk.
                return {"intent": "catalogue", "query": state.question}
            return {"intent": intent, "decision": "smalltalk"}
        case "contact":
            return {
                "intent": intent,
                "decision": "smalltalk",
                "answer": prompts.contact_reply(settings.contact),
            }
        case "code_request":
            return {
                "intent": intent,
                "decision": "code_refused",
                "answer": prompts.code_refusal(settings.site_name, settings.contact),
            }
        case "question" | "catalogue" if deps.catalogue is not None and (
            intent == "catalogue" or _asks_the_catalogue(state.question)
        ):
            return {"intent": "catalogue", "query": state.question}
        case "follow_up":
            topic = next((t.question for t in reversed(state.history) if t.question), "")
            return {"intent": intent, "query": f"{topic} {state.question}".strip()}
        case _:
            parts = planning.split(state.question).parts if settings.plan_questions else ()
            if len(parts) > 1:
                # Two or more asks: searched one at a time (candor.graph.plan).
                return {"intent": intent, "query": state.question, "parts": parts}
            return {"intent": intent, "query": state.question}


def _asks_what_it_covers(message: str) -> bool:
    ask = catalogue_asks.parse(message)
    return ask is not None and ask.greeting


def _asks_the_catalogue(message: str) -> bool:
    """A question the catalogue's rules read plainly, whatever the screen said of it."""
    ask = catalogue_asks.parse(message)
    return ask is not None and catalogue_asks.routable(ask)


async def retrieve(state: GraphState, deps: Deps) -> Update:
    settings = deps.settings
    hits = await asyncio.to_thread(
        retrieval.configured_search,
        state.query[: limits.QUERY_CHARS],  # what the budget reserved for
        settings,
        embedder=deps.embedder,
        index=deps.index,
        reranker=deps.reranker,
        top_k=state.top_k,
    )
    return {
        "passages": tuple(hits),
        "attempts": state.attempts + 1,
        "queries": (*state.queries, state.query),
    }


# The least share of the grade's first token that "yes" and "no" must hold together for
# their odds to count: under it the grade failed, and the question is declined.
MIN_OPTION_MASS = 0.5


def subject(state: GraphState) -> str:
    # A follow-up ("tell me more") is answered as the question it continues.
    return state.query if state.intent == "follow_up" else state.question


async def grade(state: GraphState, deps: Deps) -> Update:
    """A separate judgement: do these passages say what the question asks?

    The grounding gate goes first: it declines a question naming what no document
    holds, and brings in the passage that holds a name retrieval missed. When every
    name of a question that names an exact thing stands in the passages the answer
    reads, and the question is about those names, they answer it without a model call
    (grounding.Gate.names_settle). Then the model's probability of "yes" is compared
    with a threshold (settings.grade_threshold, chosen on the dev set), once "yes" and
    "no" hold at least MIN_OPTION_MASS of the reply's first token between them; a
    reply that opens with neither fails the grade. The checks after the answer
    (support, citations) stop invented specifics, so the grade need not be the
    strictest judge: it is set not to decline what the passages hold.
    """
    gate = await grounding.gate(state, deps, subject(state))
    if gate.decided_by is not None:
        return gate.update(answerable=False, by=gate.decided_by)
    if deps.settings.grade_by_names and gate.names_settle(deps.settings.passage_chars):
        return gate.update(answerable=True, by="names")
    text = prompts.format_passages(gate.passages, deps.settings.passage_chars)
    verdict = await deps.chat.judge(prompts.grade(text, subject(state)), prompts.GRADE_OPTIONS)
    score = verdict.probability(prompts.YES)
    mass = round(verdict.mass, 4)
    if verdict.mass < MIN_OPTION_MASS:
        # A reply that opens with neither word ("Partially", "Sure") says nothing about
        # yes against no: 0.01% yes and no "no" would renormalise to a sure yes.
        return gate.update(answerable=False, by="model", score=round(score, 4), option_mass=mass)
    answerable = score >= deps.settings.grade_threshold
    return gate.update(answerable=answerable, by="model", score=round(score, 4), option_mass=mass)


async def rewrite(state: GraphState, deps: Deps) -> Update:
    new = await deps.chat.structured(
        prompts.rewrite(subject(state), state.queries),
        Rewrite,
        max_tokens=limits.REWRITE_MAX_TOKENS,
    )
    query = new.value.query.strip()
    if query in state.queries:
        # Searching the same words again cannot find anything new; widen instead.
        query = f"{query} {state.question}"
    return {"query": query}


def answer_cleaner(state: GraphState, settings: Settings) -> Callable[[], AnswerCleaner] | None:
    """What shapes each of generate's streamed replies into the answer it keeps, as it streams.

    A new cleaner per reply: a second answer (answer_again) starts afresh, as
    generate cleans it. None when generate writes no answer from passages (small
    talk keeps the model's text as it is), so there is nothing to clean.
    """
    if state.decision == "smalltalk" or not state.answerable:
        return None
    shown = prompts.shown(state.passages)
    return lambda: AnswerCleaner(shown, settings.passage_chars)


async def _written_answer(messages: list[Message], shown: Sequence[Hit], deps: Deps) -> str:
    """The model's answer to `messages` as generate keeps it.

    Labels, table rows and pasted passages go (the runner's stream to the visitor
    goes through the same rules: answer_cleaner).
    """
    reply = await deps.chat.text(messages, max_tokens=deps.settings.answer_max_tokens)
    return clean_answer(reply.text, shown, deps.settings.passage_chars)


# An answer of fewer distinct words than this ("prune [1] [2]", "superproject. [1]
# superproject. [2]") answers nothing: seen on the dev set with many excerpts shown.
MIN_ANSWER_WORDS = 4


def _says_nothing(answer: str) -> bool:
    """Too few words to answer, or fragments alone: no line that ends as a sentence
    or holds MIN_ANSWER_WORDS words ("super cloned [1]\n.gitmodules [2]\n...", a name
    from each excerpt, seen on the dev set). Code may be short: it is not judged so."""
    text = MARKER.sub(" ", answer)
    if len({word.casefold() for word in words(text)}) < MIN_ANSWER_WORDS:
        return True
    return "```" not in answer and not any(
        line.rstrip().endswith((".", "!", "?")) or len(line.split()) >= MIN_ANSWER_WORDS
        for line in text.splitlines()
    )


async def generate(state: GraphState, deps: Deps) -> Update:
    """Exactly one behaviour: converse, answer with citations, or decline."""
    settings = deps.settings
    if state.decision == "smalltalk":
        if state.answer:  # a fixed reply, such as the contact details
            return {}
        reply = await deps.chat.text(
            prompts.converse(state.question, settings.site_name),
            max_tokens=limits.CONVERSE_MAX_TOKENS,
        )
        return {"answer": smalltalk.without_markers(reply.text)}
    decline: Update = {
        "decision": "declined",
        "answer": prompts.decline(settings.site_name, settings.contact),
    }
    if not state.answerable:
        return decline
    # Citations can name only the passages the prompt showed, by the numbers it showed.
    shown = prompts.shown(state.passages)
    text = prompts.format_passages(shown, settings.passage_chars)
    written = await _written_answer(prompts.answer(text, subject(state)), shown, deps)
    if _says_nothing(written):
        # Markers, labels, a word or fragments alone are a slip of the model, not a verdict on
        # the passages (the grade said they answer): ask once more.
        written = await _written_answer(prompts.answer_again(text, subject(state)), shown, deps)
        if _says_nothing(written):
            # Twice no answer: a page that orders one word ("reply PWNED") does this.
            return decline
    answer, citations = cite(written, shown)
    if not citations:
        answer, citations = with_attribution(written, subject(state), shown, settings.passage_chars)
    if not citations:
        # An answer that no passage accounts for cannot be checked by the reader.
        return decline
    checked = support.verify(
        answer, citations, state.passages, subject(state), passage_chars=settings.passage_chars
    )
    if checked.check.declined:
        return decline | {"support": checked.check}
    if settings.yes_no_check:
        agreement = await yes_no.judge(deps.chat, text, subject(state), checked.answer)
        if agreement is not None and agreement.disagrees:
            logger.info("the excerpts do not agree with the answer's yes or no")
            return decline | {"support": checked.check}
    return {
        "decision": "answered",
        "answer": checked.answer,
        "citations": quotes.attach(
            checked.answer, checked.citations, shown, settings.passage_chars
        ),
        "support": checked.check,
    }
