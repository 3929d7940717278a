"""`candor eval`: build (or reuse) the corpus index, measure retrieval, then the agent."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from candor import planning, retrieval, text
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.evaluation import (
    agent_metrics,
    budgets,
    catalogue_metrics,
    gate_metrics,
    grading,
    plain,
    plain_rag,
    retrieval_metrics,
    streaming,
)
from candor.evaluation.agent_metrics import AgentRecord
from candor.evaluation.corpus import index_name, read_corpus
from candor.evaluation.instruments import CountingChatModel, RecordingIndex
from candor.evaluation.questions import (
    CATALOGUE_KINDS,
    Question,
    load_question_files,
    stratified,
)
from candor.graph import prompts, support
from candor.ingest.outcomes import IngestReport
from candor.ingest.pipeline import ingest
from candor.ports import ChatModel, Embedder, Reranker, VectorIndex
from candor.progress import progress as show_progress
from candor.settings import Settings
from candor.traces import Trace
from candor.types import Chunk, Hit

RETRIEVAL_TOP_K = max(retrieval_metrics.KS)
# The reference every report shows beside candor's own strategies (candor.evaluation.plain).
REFERENCE_STRATEGIES: tuple[str, ...] = ("plain", "plain_dense")
# Guards that would refuse or throttle the run are lifted; the cache and the
# conversation history are off, so every question is measured on its own.
EVAL_OVERRIDES: dict[str, Any] = {
    "index_backend": "sqlite",
    "cache_enabled": False,
    "history_turns": 0,
    "rate_address_limit": 1_000_000_000,
    "rate_session_limit": 1_000_000_000,
    "budget_daily_usd": Decimal("1000000"),
    "budget_session_usd": None,
}


# Per strategy, each question's rank (None: not in the top 10), and whether the
# passages shown for it hold every expected keyword (its answer context).
Ranks = dict[str, dict[str, int | None]]
Contexts = dict[str, dict[str, bool]]


class EvalError(Exception):
    """The run cannot start (no documents); the CLI exits with a usage error."""


@dataclass(frozen=True, slots=True)
class EvalOptions:
    corpus: Path
    questions: Path
    out: Path
    # More question files asked in the same run (the catalogue sets beside the others).
    more_questions: tuple[Path, ...] = ()
    limit: int | None = None
    kinds: tuple[str, ...] = ()  # only questions of these kinds; all when empty
    retrieval_only: bool = False
    strategies: tuple[str, ...] = retrieval.STRATEGIES
    progress: bool = True
    # Seconds one question may take before it is recorded as a failure. A local
    # model's call cannot be interrupted (its thread finishes in the background, the
    # next question waits for it), but every call is bounded by its max_tokens.
    timeout: float = 600.0
    # Budgets (characters) measured besides each chat backend's default (--context-chars).
    context_chars: tuple[int, ...] = ()


def prepare_settings(settings: Settings, name: str) -> Settings:
    return settings.model_copy(update={**EVAL_OVERRIDES, "index_name": name})


def build_index(
    settings: Settings, embedder: Embedder, documents: Sequence[tuple[str, bytes]], *, bar: bool
) -> tuple[VectorIndex, IngestReport]:
    """Ingest into the index named by the corpus hash: unchanged documents cost nothing.

    The documents' catalogue is kept as `candor ingest` keeps it, in the state file of
    the data folder under the index's name (an index built before it gets it from the
    documents' bytes, with no embedding).
    """
    from candor.factory import build_index as factory_index
    from candor.factory import document_catalogue

    index = factory_index(settings, embedder)
    ticker = show_progress(len(documents), "index", "doc", enabled=bar)
    try:
        report = ingest(
            documents,
            embedder=embedder,
            index=index,
            progress=ticker.update,
            max_chars=settings.chunk_chars,
            overlap=settings.chunk_overlap,
            max_bytes=settings.ingest_max_bytes,
            max_pdf_pages=settings.ingest_max_pdf_pages,
            max_chunks=settings.ingest_max_chunks,
            catalogue=document_catalogue(settings),
        )
    finally:
        ticker.close()
    return index, report


def build_plain_index(
    settings: Settings, embedder: Embedder, documents: Sequence[tuple[str, bytes]], *, bar: bool
) -> SqliteVectorIndex:
    """The `plain` reference's index, beside candor's, named by the same documents."""
    index = plain.open_index(plain.index_path(settings.data_dir, documents, embedder), embedder)
    todo = plain.missing(index, plain.chunks_of(documents))
    ticker = show_progress(len(todo), "plain index", "chunk", enabled=bar and bool(todo))
    try:
        plain.fill(index, todo, embedder, progress=ticker.update)
    finally:
        ticker.close()
    return index


def context_budget(settings: Settings) -> int:
    """The characters of passage text the model reads per question under `settings`."""
    return (
        settings.context_chars if settings.pack_context else settings.top_k * settings.passage_chars
    )


def evaluate_retrieval(
    questions: Sequence[Question],
    strategies: Sequence[str],
    *,
    embedder: Embedder,
    index: VectorIndex,
    reranker: Reranker | None,
    settings: Settings,
    bar: bool,
    plain_index: SqliteVectorIndex | None = None,
) -> tuple[dict[str, dict[str, Any]], Ranks, Contexts]:
    """Per strategy: the summary, each question's rank (None: not in the top 10), and
    whether each question's shown passages hold every keyword (its answer context).

    The search uses the settings' candidates, fusion and per-page cap; the answer
    context, its top_k passages as the agent shows them (widened when the settings
    say so, cut at passage_chars). With `plain_index`, the REFERENCE_STRATEGIES
    follow candor's own, measured the same way on the plain reference's index.
    """
    targets = [q for q in questions if q.expected_sources]
    # The first query loads the vectors into memory; keep that out of the latencies.
    if targets:
        for warm in (index, plain_index):
            if warm is not None:
                warm.query(vector=embedder.embed(["warm up"])[0], keywords=None, top_k=1)
    named = [*strategies, *(REFERENCE_STRATEGIES if plain_index is not None else ())]
    summaries: dict[str, dict[str, Any]] = {}
    ranks: Ranks = {}
    contexts: Contexts = {}
    ticker = show_progress(len(targets) * len(named), "retrieval", "query", enabled=bar)
    try:
        for strategy in named:
            found: dict[str, int | None] = {}
            latencies: list[float] = []
            context_hits: dict[str, bool] = {}
            shown_chars: list[int] = []
            for question in targets:
                started = time.perf_counter()
                if strategy in REFERENCE_STRATEGIES:
                    assert plain_index is not None
                    hits = plain.search(
                        question.question,
                        embedder=embedder,
                        index=plain_index,
                        top_k=RETRIEVAL_TOP_K,
                        candidates=max(settings.candidates, RETRIEVAL_TOP_K),
                        strategy=strategy,
                    )
                    shown = retrieval.within(
                        hits, budget=context_budget(settings), passage_chars=settings.passage_chars
                    )
                else:
                    hits = retrieval.search(
                        question.question,
                        embedder=embedder,
                        index=index,
                        reranker=reranker,
                        top_k=RETRIEVAL_TOP_K,
                        candidates=max(settings.candidates, RETRIEVAL_TOP_K),
                        rrf_k=settings.rrf_k,
                        per_source=settings.max_per_source,
                        strategy=strategy,
                        fusion=settings.fusion,
                        keyword_weight=settings.keyword_weight,
                    )
                latencies.append((time.perf_counter() - started) * 1000)
                if strategy not in REFERENCE_STRATEGIES:
                    # What the graph shows: a question of two asks part by part.
                    shown = planning.shown(
                        planned(question.question, settings),
                        settings,
                        embedder=embedder,
                        index=index,
                        reranker=reranker,
                        top_k=settings.top_k,
                        strategy=strategy,
                    )
                shown_chars.append(
                    sum(
                        len(prompts.shown_text(h.chunk.text, settings.passage_chars)) for h in shown
                    )
                )
                found[question.id] = retrieval_metrics.chunk_rank(
                    [hit.chunk for hit in hits],
                    question.expected_sources,
                    all_needed=question.all_sources_needed,
                )
                if question.answer_keywords:
                    context_hits[question.id] = retrieval_metrics.has_all_keywords(
                        prompts.format_passages(shown, settings.passage_chars),
                        question.answer_keywords,
                    )
                ticker.update(1)
            ranks[strategy] = found
            contexts[strategy] = context_hits
            summaries[strategy] = retrieval_metrics.summarise(list(found.values()), latencies)
            summaries[strategy] |= {
                "answer_context": (
                    round(sum(context_hits.values()) / len(context_hits), 4)
                    if context_hits
                    else None
                ),
                "answer_context_n": len(context_hits),
                "answer_context_k": settings.top_k,
                "answer_context_chars": (
                    round(sum(shown_chars) / len(shown_chars)) if shown_chars else None
                ),
            }
    finally:
        ticker.close()
    return summaries, ranks, contexts


def planned(question: str, settings: Settings) -> planning.Plan:
    """The question as the graph searches it (candor.planning), with the settings' plan."""
    if settings.plan_questions:
        return planning.split(question)
    return planning.Plan((question,), (question,))


async def _ask_one(
    deps: Deps, question: Question, *, allowed_s: float, corpus: str = ""
) -> AgentRecord:
    """One question through the graph, streamed as the widget reads it (see
    candor.evaluation.streaming): the same run and answer as `candor.service.ask`."""
    chat = deps.chat
    index = deps.index
    assert isinstance(chat, CountingChatModel) and isinstance(index, RecordingIndex)
    chat.calls = 0
    chat.judged.clear()
    index.seen.clear()
    started = time.perf_counter()
    failure: str | None = None
    try:
        async with asyncio.timeout(allowed_s):
            streamed = await streaming.ask_streamed(deps, question.question, started=started)
    except TimeoutError:
        failure = f"timed out after {allowed_s:g} s"
    except Exception as error:  # any failure of one question is recorded; the run goes on
        failure = f"{type(error).__name__}: {error}"
    if failure is not None:
        return AgentRecord(
            id=question.id,
            kind=question.kind,
            seconds=time.perf_counter() - started,
            error=failure,
        )
    result = streamed.result
    trace = stored_trace(deps, result.trace_id)
    screening = trace.screening if trace is not None else None
    valid = sum(
        1 for c in result.citations if c.id in index.seen and index.seen[c.id].source == c.source
    )
    passage_chars = deps.settings.passage_chars
    grades = grading.outcomes(
        result.grades,
        [grading.documents_of(messages) for messages, _ in chat.judged],
        index.seen,
        question.answer_keywords,
        answerable_kind=question.answerable,
        passage_chars=passage_chars,
    )
    left: tuple[str, ...] = ()
    if result.decision == "answered":
        # Checked again against what the model was shown (the excerpts its stored
        # prompt holds), not against whole passages, which hold more.
        shown = shown_excerpts(trace, index.seen)
        cited = [Hit(shown[c.id], 0.0) for c in result.citations if c.id in shown]
        recheck = support.verify(
            result.answer, result.citations, cited, question.question, passage_chars=passage_chars
        )
        # A pair the excerpts hold only apart counts as an unsupported specific (pairs).
        left = recheck.check.unsupported + recheck.check.unpaired
    return AgentRecord(
        id=question.id,
        kind=question.kind,
        seconds=streamed.done_s,
        decision=result.decision,
        answer=result.answer,
        cited_sources=tuple(c.source for c in result.citations),
        citations_valid=valid,
        expected_sources=question.expected_sources,
        answer_keywords=question.answer_keywords,
        model_calls=chat.calls,
        tokens_in=sum(step.tokens_in for step in result.trace),
        tokens_out=sum(step.tokens_out for step in result.trace),
        tokens_evaluated=sum(step.tokens_evaluated for step in result.trace),
        cost_usd=sum(step.cost_usd for step in result.trace),
        index_reads=sum(step.index_reads for step in result.trace),
        attempts=result.attempts,
        rewrites=sum(1 for step in result.trace if step.node == "rewrite"),
        grades=grades,
        absent_names=result.grades[-1].grounding.absent if result.grades else (),
        support=None if result.support is None else result.support.verdict,
        unsupported=()
        if result.support is None
        else result.support.unsupported + result.support.unpaired,
        unsupported_left=left,
        meta_talk=tuple(text.meta_talk(result.answer, prompts.ANSWER_INSTRUCTIONS))
        if result.decision == "answered"
        else (),
        screened_by=screening.by if screening is not None else None,
        screened_without_model=screening.without_model if screening is not None else None,
        first_token_s=streamed.first_token_s,
        entries=question.entries,
        present=catalogue_metrics.entries_present(result.answer, question.entries)
        if result.decision == "answered"
        else (),
        invented=catalogue_metrics.invented(result.answer, corpus)
        if corpus and result.decision == "answered"
        else (),
        reached_catalogue=any(step.node == "catalogue" for step in result.trace),
        catalogue_answered=result.decision == "answered"
        and bool(result.trace)
        and result.trace[-1].node == "catalogue",
    )


def stored_trace(deps: Deps, trace_id: str) -> Trace | None:
    """The run's stored trace (None if storing it failed: it never fails the answer)."""
    stored = deps.state.get_trace(trace_id, now=time.time())
    return Trace.from_stored(stored) if stored is not None else None


def shown_excerpts(trace: Trace | None, seen: dict[str, Chunk]) -> dict[str, Chunk]:
    """Each passage of a run's final prompt, by id, as the model was shown it."""
    if trace is None:
        return {}
    texts = prompts.parse_passages(grading.documents_of(trace.prompt))
    return {
        cid: seen[cid].with_text(text)
        for cid, text in zip(trace.passage_ids, texts, strict=False)
        if cid in seen
    }


def context_section(
    questions: Sequence[Question],
    settings: Settings,
    options: EvalOptions,
    *,
    embedder: Embedder,
    index: VectorIndex,
    plain_index: SqliteVectorIndex,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Answer context at each backend's default budget and the sweep's, beside the
    pool ceiling and `plain` (candor.evaluation.budgets)."""
    from candor.evaluation.tokens import openai_counter

    chosen = budgets.budgets_for(settings, options.context_chars)
    measured = budgets.measure(
        questions,
        chosen,
        settings=settings,
        embedder=embedder,
        index=index,
        plain_index=plain_index,
        count_tokens=openai_counter(settings.chat_model),
        bar=options.progress,
    )
    return budgets.summarise(chosen, measured, settings), budgets.per_question(measured)


def evaluate_agent(
    questions: Sequence[Question], deps: Deps, *, bar: bool, timeout: float, corpus: str = ""
) -> list[AgentRecord]:
    records: list[AgentRecord] = []
    ticker = show_progress(len(questions), "agent", "question", enabled=bar)
    try:
        for question in questions:
            records.append(asyncio.run(_ask_one(deps, question, allowed_s=timeout, corpus=corpus)))
            ticker.update(1)
    finally:
        ticker.close()
    return records


def measured_strategies(strategies: Sequence[str], reranker: Reranker | None) -> list[str]:
    """The strategies to measure: hybrid_rerank only with a reranker configured
    (CANDOR_RERANKER_BACKEND), since without one it would repeat hybrid's figures."""
    if reranker is not None:
        return list(strategies)
    return [strategy for strategy in strategies if strategy != "hybrid_rerank"]


def run_eval(settings: Settings, options: EvalOptions) -> dict[str, Any]:
    """Run the evaluation and return the report (see candor.evaluation.report)."""
    from candor.factory import build_embedder, build_reranker

    started = time.perf_counter()
    documents = read_corpus(options.corpus)
    if not documents:
        raise EvalError(f"{options.corpus}: no supported documents (.md, .txt, .html, .pdf)")
    questions = load_question_files(
        [options.questions, *options.more_questions], sources={source for source, _ in documents}
    )
    if options.kinds:
        questions = [q for q in questions if q.kind in options.kinds]
    questions = stratified(questions, options.limit)

    embedder = build_embedder(settings)
    chunking = (settings.chunk_chars, settings.chunk_overlap)
    settings = prepare_settings(settings, index_name(documents, embedder, chunking))
    index, ingested = build_index(settings, embedder, documents, bar=options.progress)
    reranker = build_reranker(settings)
    plain_index = build_plain_index(settings, embedder, documents, bar=options.progress)
    # The catalogue questions are no retrieval questions: figures apart (catalogue_metrics).
    searched = [q for q in questions if q.kind not in CATALOGUE_KINDS]
    retrieval_report, ranks, contexts = evaluate_retrieval(
        searched,
        measured_strategies(options.strategies, reranker),
        embedder=embedder,
        index=index,
        reranker=reranker,
        settings=settings,
        bar=options.progress,
        plain_index=plain_index,
    )
    report: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "corpus": str(options.corpus),
            "questions_file": str(options.questions),
            "more_question_files": [str(path) for path in options.more_questions],
            "questions": len(questions),
            "limit": options.limit,
            "kinds": list(options.kinds),
            "documents": ingested.documents,
            "chunks": ingested.chunks,
            "ingest": {
                "changed": ingested.documents_changed,
                "unchanged": ingested.documents_unchanged,
                "failed": [{"source": s, "reason": r} for s, r in ingested.failures],
                "seconds": round(ingested.seconds, 2),
            },
            "index": settings.index_name,
            "index_path": str(settings.index_path),
            "embedder": embedder.name,
            "retrieval_top_k": RETRIEVAL_TOP_K,
            "candidates": max(settings.candidates, RETRIEVAL_TOP_K),
            "max_per_source": settings.max_per_source,
            "fusion": settings.fusion,
            "rrf_k": settings.rrf_k,
            "keyword_weight": settings.keyword_weight,
            "widen_passages": settings.widen_passages,
            "passage_chars": settings.passage_chars,
            "chunk_chars": settings.chunk_chars,
            "chunk_overlap": settings.chunk_overlap,
            "plain_index": str(plain_index.path),
            "plain_chunks": plain_index.count(),
            "reranker": f"{reranker.name} (hybrid_rerank only)" if reranker else None,
        },
        "retrieval": retrieval_report,
        "retrieval_ranks": ranks,
        # Per question, for the paired comparisons (candor.evaluation.question_figures).
        "retrieval_context": contexts,
    }
    report["context_budgets"], report["context_questions"] = context_section(
        questions, settings, options, embedder=embedder, index=index, plain_index=plain_index
    )
    # The grounding gate needs no model: measured on every run, --retrieval-only too.
    gate = gate_metrics.evaluate_gate(
        searched, embedder=embedder, index=index, reranker=reranker, settings=settings
    )
    report["gate"] = gate_metrics.summarise(gate)
    report["gate_questions"] = [record.to_json() for record in gate]
    if not options.retrieval_only:
        from candor.factory import build_chat

        chat = build_chat(settings)
        # What no document holds, for the names a catalogue answer shows as code.
        corpus = (
            catalogue_metrics.corpus_text(documents)
            if any(q.kind in CATALOGUE_KINDS for q in questions)
            else ""
        )
        report["agent"], report["agent_questions"] = _agent_section(
            settings, chat, embedder, index, questions, options, corpus
        )
        references = evaluate_plain_rag(
            questions,
            chat,
            embedder=embedder,
            plain_index=plain_index,
            settings=settings,
            bar=options.progress,
            timeout=options.timeout,
            corpus=corpus,
        )
        report["plain_rag"] = plain_rag_summary(references, report["agent_questions"])
        report["plain_rag_questions"] = [r.to_json() for r in references]
    report["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _agent_section(
    settings: Settings,
    chat: ChatModel,
    embedder: Embedder,
    index: VectorIndex,
    questions: Sequence[Question],
    options: EvalOptions,
    corpus: str = "",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from candor.factory import build_catalogue, build_reranker

    reranker = build_reranker(settings)
    # Load the model before the clock starts, so the first question's seconds are
    # its own. A failure here is not the run's: the first question records it.
    with contextlib.suppress(Exception):
        asyncio.run(chat.text([{"role": "user", "content": "Hello"}], max_tokens=1))
    # The run's own state store, beside its report: sessions, offences and budget
    # ledgers stay out of the real one, and the run's traces can be read back with
    # `CANDOR_DATA_DIR=<out> candor insights` (make eval writes insights.md from them).
    state = open_run_state(options.out)
    deps = Deps(
        settings=settings,
        chat=CountingChatModel(chat),
        embedder=embedder,
        index=RecordingIndex(index),
        reranker=reranker,
        state=state,
        catalogue=build_catalogue(settings),
    )
    try:
        records = evaluate_agent(
            questions, deps, bar=options.progress, timeout=options.timeout, corpus=corpus
        )
    finally:
        state.close()
    # The figures of the kinds before the catalogue, comparable with earlier runs;
    # the catalogue questions' own apart (candor.evaluation.catalogue_metrics).
    agent = agent_metrics.summarise([r for r in records if r.kind not in CATALOGUE_KINDS])
    catalogued = [r for r in records if r.kind in CATALOGUE_KINDS]
    if catalogued:
        agent["catalogue"] = catalogue_metrics.summarise(catalogued)
    others = [r for r in records if r.kind not in CATALOGUE_KINDS]
    agent["other_kinds_answered_from_catalogue"] = [r.id for r in others if r.catalogue_answered]
    agent["by_kind"] = agent_metrics.summarise_by_kind(records)
    agent["failure_reasons"] = [
        {"id": r.id, "kind": r.kind, "reason": r.error} for r in records if r.failed
    ]
    agent["cost_at_api_prices"] = cost_at_api_prices(settings, records)
    model_path = getattr(chat, "model_path", None)
    agent["config"] = {
        "chat_backend": settings.chat_backend,
        "chat_model": (
            settings.chat_model
            if settings.chat_backend == "openai"
            else (Path(model_path).name if model_path else chat.name)
        ),
        "strategy": "hybrid_rerank" if reranker is not None else "hybrid",
        "top_k": settings.top_k,
        "max_attempts": settings.max_attempts,
        "model_calls": "counted at the chat-model port, moderation's second call included",
        "seconds": "each question streamed as POST /ask/stream runs it, from before its "
        "guards to its first token event and to done",
    }
    return agent, [r.to_json() for r in records]


def evaluate_plain_rag(
    questions: Sequence[Question],
    chat: ChatModel,
    *,
    embedder: Embedder,
    plain_index: SqliteVectorIndex,
    settings: Settings,
    bar: bool,
    timeout: float,
    corpus: str = "",
) -> list[AgentRecord]:
    """The one-call reference (candor.evaluation.plain_rag) on the questions that retrieve."""
    counting = CountingChatModel(chat)
    asked = [q for q in questions if q.kind in plain_rag.KINDS]

    async def one(question: Question) -> AgentRecord:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                return await plain_rag.answer_one(
                    question,
                    chat=counting,
                    embedder=embedder,
                    index=plain_index,
                    budget=context_budget(settings),
                    candidates=settings.candidates,
                    passage_chars=settings.passage_chars,
                    max_tokens=settings.answer_max_tokens,
                    corpus=corpus,
                )
        except TimeoutError:
            reason = f"timed out after {timeout:g} s"
        except Exception as error:  # one question's failure is recorded; the run goes on
            reason = f"{type(error).__name__}: {error}"
        seconds = time.perf_counter() - started
        return AgentRecord(id=question.id, kind=question.kind, seconds=seconds, error=reason)

    records: list[AgentRecord] = []
    ticker = show_progress(len(asked), "plain_rag", "question", enabled=bar)
    try:
        for question in asked:
            records.append(asyncio.run(one(question)))
            ticker.update(1)
    finally:
        ticker.close()
    return records


def plain_rag_summary(
    records: Sequence[AgentRecord], agent_questions: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The reference's figures, and the graph's cost per answered question, and its
    seconds to the first token and to done, as a ratio to its own, on the kinds both ran."""
    summary = agent_metrics.summarise([r for r in records if r.kind not in CATALOGUE_KINDS])
    catalogued = [r for r in records if r.kind in CATALOGUE_KINDS]
    if catalogued:
        summary["catalogue"] = catalogue_metrics.summarise(catalogued)
    summary["failure_reasons"] = [
        {"id": r.id, "kind": r.kind, "reason": r.error} for r in records if r.failed
    ]
    graph = [
        row
        for row in agent_questions
        if row["kind"] in plain_rag.KINDS and row["kind"] not in CATALOGUE_KINDS
    ]
    rows = [r.to_json() for r in records if r.kind not in CATALOGUE_KINDS]
    summary["graph_ratio"] = agent_metrics.cost_ratios(graph, rows)
    summary["graph_stream_ratio"] = agent_metrics.stream_ratios(graph, rows)
    return summary


def open_run_state(out: Path) -> SqliteStateStore:
    """A new, empty state store at OUT/state.sqlite3: one run's traces, no earlier run's."""
    out.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        (out / f"state.sqlite3{suffix}").unlink(missing_ok=True)
    return SqliteStateStore(out / "state.sqlite3")


def cost_at_api_prices(settings: Settings, records: Sequence[AgentRecord]) -> dict[str, Any]:
    """What the run's tokens would cost per question at the OpenAI chat model's prices.

    The local model costs nothing, so its cost_per_question_usd says nothing about
    production; this estimate does, within the difference between the two models'
    tokenizers and answer lengths (an estimate, not a bill).
    """
    price = settings.prices.get(settings.chat_model)
    done = [r for r in records if not r.failed]
    if price is None or not done:
        return {"model": settings.chat_model, "usd_per_question": None, "n": len(done)}
    costs = [price.cost(r.tokens_in, r.tokens_out) for r in done]
    return {
        "model": settings.chat_model,
        "usd_per_question": round(sum(costs) / len(costs), 8),
        "usd_per_1000_questions": round(1000 * sum(costs) / len(costs), 4),
        "n": len(done),
    }
