"""`candor`: ingest documents, ask questions, evaluate, serve the HTTP API."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pydantic import ValidationError

from candor.errors import (
    BudgetExhaustedError,
    CandorError,
    RateLimitedError,
    SessionEndedError,
)
from candor.progress import progress as show_progress
from candor.settings import Settings

if TYPE_CHECKING:
    from candor import review
    from candor.deps import Deps
    from candor.results import AskResult

EXIT_USAGE = 2
EXIT_FAILED = 1
# `candor eval --generate`: each question is a model call, and twice as many at most.
MAX_GENERATED = 1000


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        raise SystemExit(f"candor: invalid settings: {error}") from None


def cmd_ingest(args: argparse.Namespace) -> int:
    from candor.factory import build_embedder, build_index, build_state
    from candor.ingest.files import iter_paths
    from candor.ingest.pipeline import ingest
    from candor.ingest.records import CompletionRecords

    missing = [p for p in args.paths if not p.exists()]
    if missing:
        print(f"candor: no such file or folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return EXIT_USAGE
    settings = _settings()
    embedder = build_embedder(settings)
    index = build_index(settings, embedder)
    documents = list(iter_paths(args.paths))
    if not documents:
        print("candor: no supported documents (.md, .txt, .html, .pdf) found", file=sys.stderr)
        return EXIT_USAGE
    state = build_state(settings)
    progress = show_progress(len(documents), "ingest", "doc", enabled=not args.json)
    try:
        report = ingest(
            documents,
            embedder=embedder,
            index=index,
            progress=progress.update,
            max_chars=settings.chunk_chars,
            overlap=settings.chunk_overlap,
            max_bytes=settings.ingest_max_bytes,
            source_base_url=settings.source_base_url,
            # A cached answer belongs to one corpus version: a run that changed the
            # index bumps it (once), which retires them all; then each changed
            # document's completion record is written (candor.ingest.records).
            records=CompletionRecords(state, settings.index_name),
        )
    finally:
        progress.close()
    summary = report.to_json()
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"ingested {summary['documents']} documents into {summary['chunks']} chunks "
            f"in {report.seconds:.1f} s ({settings.index_path}): "
            f"{report.documents_changed} changed, {report.documents_unchanged} unchanged; "
            f"{report.chunks_embedded} chunks embedded, {report.chunks_deleted} deleted; "
            f"{len(report.failures)} failed"
        )
        for source, reason in report.failures:
            print(f"  failed: {source}: {reason}", file=sys.stderr)
    return EXIT_FAILED if report.failures and not report.chunks else 0


def cmd_ask(args: argparse.Namespace) -> int:
    from candor.api.schemas import AskRequest, AskResponse
    from candor.factory import build_deps

    try:
        request = AskRequest(question=args.question, session_id=args.session, top_k=args.top_k)
    except ValidationError as error:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        print(f"candor: {reasons}", file=sys.stderr)
        return EXIT_USAGE
    deps = build_deps(_settings())
    if deps.index.count() == 0:
        print("candor: the index is empty; run `candor ingest PATH` first", file=sys.stderr)
        return EXIT_USAGE
    # On a terminal the answer appears as it is generated; piped or as JSON, whole.
    live = not args.json and sys.stdout.isatty()
    try:
        result = asyncio.run(
            ask_and_show(
                deps,
                request.question,
                session_id=request.session_id,
                top_k=request.top_k,
                live=live,
            )
        )
    except (SessionEndedError, RateLimitedError, BudgetExhaustedError) as error:
        print(f"candor: {error}", file=sys.stderr)
        return EXIT_FAILED
    response = AskResponse.model_validate(result.to_json())
    if args.json:
        print(response.model_dump_json())
        return 0
    if not live:
        print(response.answer)
    for number, citation in enumerate(response.citations, start=1):
        print(
            f"  [{number}] {citation.title or citation.source} ({citation.url or citation.source})"
        )
    seconds = sum(step.ms for step in response.trace) / 1000
    print(f"  -- {response.decision}, {seconds:.1f} s, session {response.session_id}")
    return 0


async def ask_and_show(
    deps: Deps,
    question: str,
    *,
    session_id: str | None = None,
    top_k: int | None = None,
    live: bool = True,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> AskResult:
    """Ask; with `live`, write the answer to `out` as it streams and each step to `err`.

    The streamed text is the model's, cleaned as it streams: when the final answer
    differs (its citations renumbered, or declined because no passage supports it),
    the final answer follows it.
    """
    from candor.graph import runner
    from candor.results import Done
    from candor.service import prepare

    prepared = await prepare(deps, question, session_id=session_id, top_k=top_k)
    if not live:
        return await prepared.result()
    out = out or sys.stdout
    err = err or sys.stderr
    streamed = ""
    async for event in prepared.events():
        match event:
            case runner.StepEvent(step=step):
                if streamed and not streamed.endswith("\n"):
                    streamed += "\n"
                    out.write("\n")
                    out.flush()
                print(f"  {step.node}: {step.ms / 1000:.1f} s", file=err, flush=True)
            case runner.TokenEvent(text=text):
                if not streamed:
                    text = text.lstrip()
                streamed += text
                out.write(text)
                out.flush()
            case Done(result=result):
                if streamed and not streamed.endswith("\n"):
                    out.write("\n")
                if result.answer != streamed.strip():
                    if streamed:
                        print(f"  -- {_replaced(result.decision)}:", file=err, flush=True)
                    print(result.answer, file=out, flush=True)
                return result
    raise AssertionError("unreachable: events() ends with Done or raises")


def _replaced(decision: str) -> str:
    if decision == "declined":
        return "no passage supports that reply, so candor declines"
    return "the answer, with its citations checked"


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from candor.api.local import create_local_app

    settings = _settings()
    app = create_local_app(settings, host=args.host, port=args.port, warm=True)
    print(
        f"candor is serving on http://{args.host}:{args.port}  (API docs: /docs)\n"
        f"  chat: open http://{args.host}:{args.port}/ in a browser (the widget's demo page)\n"
        f"  ask:  curl -s http://{args.host}:{args.port}/ask -H 'content-type: application/json' "
        '-d \'{"question": "How do I deploy candor to AWS?"}\'\n'
        f"  streamed: curl -N http://{args.host}:{args.port}/ask/stream (the same body)",
        file=sys.stderr,
    )
    if settings.warm_start:
        print(
            "  warming up: loading the models before the first question "
            "(GET /health says `warming` until it is done)",
            file=sys.stderr,
        )
    if not settings.allowed_origins:
        print(
            "  loopback clients may call without an Origin until CANDOR_ALLOWED_ORIGINS is set",
            file=sys.stderr,
        )
    # proxy_headers=False: the client address is the connection's peer unless
    # CANDOR_TRUSTED_PROXY_HOPS says otherwise (README, "Guards"); uvicorn would
    # otherwise believe X-Forwarded-For from any loopback peer.
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", proxy_headers=False)
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    """Each dependency with its details (the public GET /health says only ok or degraded)."""
    from candor.api.health import diagnose

    checks = diagnose(_settings())
    healthy = all(check.ok for check in checks.values())
    if args.json:
        print(
            json.dumps(
                {
                    "status": "ok" if healthy else "degraded",
                    "dependencies": {
                        name: {"ok": c.ok, "backend": c.backend, "detail": c.detail}
                        for name, c in checks.items()
                    },
                }
            )
        )
    else:
        for name, check in checks.items():
            state = "ok" if check.ok else "DEGRADED"
            detail = f": {check.detail}" if check.detail else ""
            print(f"{name:9} {state:8} ({check.backend}){detail}")
    return 0 if healthy else EXIT_FAILED


def cmd_stats(args: argparse.Namespace) -> int:
    """What the index holds: documents, chunks, and the corpus version."""
    from candor.factory import build_embedder, build_index, build_state
    from candor.ingest.pipeline import count_documents

    settings = _settings()
    index = build_index(settings, build_embedder(settings))
    stats = {
        "index": settings.index_name,
        "backend": settings.index_backend,
        "documents": count_documents(index),
        "chunks": index.count(),
        "corpus_version": build_state(settings).corpus_version(settings.index_name),
    }
    if args.json:
        print(json.dumps(stats))
    else:
        print(
            f"{stats['documents']} documents, {stats['chunks']} chunks in index "
            f"{settings.index_name!r} ({settings.index_backend}); "
            f"corpus version {stats['corpus_version']}"
        )
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """Prepare the local models once, so the first question is not slow.

    Joins and verifies the chat model's weights, and converts the embedding
    model for int8 MatMuls (kept only if it agrees with the shipped file).
    """
    from candor.backends.model_files import default_model_path, prepare_embedding_model
    from candor.backends.onnx_embedder import embedder_of

    settings = _settings()
    path = settings.local_model_path or default_model_path(settings.model_cache_dir)
    print(f"local chat model: {path}")
    embedding = prepare_embedding_model(settings.model_cache_dir, embedder_of)
    print(f"local embedding model: {embedding.path} ({embedding.name})")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Retrieval (and, unless --retrieval-only, agent) metrics on a question set."""
    from candor.evaluation.questions import QuestionFileError
    from candor.evaluation.report import write_report
    from candor.evaluation.runner import EvalError, EvalOptions, run_eval
    from candor.retrieval import STRATEGIES

    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        print(
            f"candor: unknown strategies {', '.join(unknown) or '(none)'}; "
            f"choose from {','.join(STRATEGIES)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.timeout <= 0:
        print("candor: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    if args.limit is not None and args.limit < 1:
        print("candor: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    from candor.evaluation.questions import KINDS

    kinds = tuple(k.strip() for k in (args.only or "").split(",") if k.strip())
    if any(k not in KINDS for k in kinds):
        print(f"candor: --only takes kinds from {','.join(sorted(KINDS))}", file=sys.stderr)
        return EXIT_USAGE
    if args.generate is not None and not 1 <= args.generate <= MAX_GENERATED:
        print(f"candor: --generate takes 1 to {MAX_GENERATED} questions", file=sys.stderr)
        return EXIT_USAGE
    for path, what in ((args.corpus, "corpus folder"), (args.questions, "question file")):
        if path is not None and not path.exists():
            print(f"candor: no such {what}: {path}", file=sys.stderr)
            return EXIT_USAGE
    settings = _settings()
    if args.generate is not None:
        from candor.evaluation.generate import write_generated

        try:
            args.questions, about = write_generated(
                settings, args.corpus, args.out, args.generate, seed=args.seed
            )
        except EvalError as error:
            print(f"candor: {error}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"generated {about['kept']} of {about['requested']} questions in "
            f"{about['attempts']} calls (rejected: {about['rejected'] or 'none'}); "
            f"wrote {args.questions}",
            file=sys.stderr,
        )
    options = EvalOptions(
        corpus=args.corpus,
        questions=args.questions,
        out=args.out,
        limit=args.limit,
        kinds=kinds,
        retrieval_only=args.retrieval_only,
        timeout=args.timeout,
        strategies=strategies,
    )
    try:
        report = run_eval(settings, options)
    except (QuestionFileError, EvalError) as error:
        print(f"candor: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("candor: interrupted; a rerun reuses the index built so far", file=sys.stderr)
        return 130
    paths = write_report(report, args.out)
    for name, row in report["retrieval"].items():
        print(
            f"{name:14} n={row['n']} R@1={row['recall@1']} R@5={row['recall@5']} "
            f"R@10={row['recall@10']} MRR={row['mrr']} p50={row['p50_ms']} ms"
        )
    agent = report.get("agent")
    if agent is not None:
        print(
            f"agent n={agent['n']} failures={agent['failures']} "
            f"routing={agent['routing_accuracy']} decline P/R={agent['decline_precision']}/"
            f"{agent['decline_recall']} correct={agent['answer_correct']} "
            f"calls/q={agent['model_calls_per_question']} p50={agent['p50_s']} s"
        )
    print(f"wrote {', '.join(map(str, paths))}")
    return 0


def cmd_insights(args: argparse.Namespace) -> int:
    """For the owner: what visitors asked, and what the documents are missing."""
    from candor import insights
    from candor.factory import build_embedder, build_state
    from candor.traces import traces_since

    if not 1 <= args.days <= 3650:
        print("candor: --days must be between 1 and 3650", file=sys.stderr)
        return EXIT_USAGE
    settings = _settings()
    now = time.time()
    traces = traces_since(build_state(settings), args.days, now=now)
    # Grouping declined questions by meaning needs the embedder; nothing else does.
    declined = any(t.decision == "declined" and t.question for t in traces)
    embedder = build_embedder(settings) if declined else None
    data = insights.report(traces, days=args.days, now=now, embedder=embedder)
    print(json.dumps(data, ensure_ascii=False) if args.json else insights.to_markdown(data))
    if args.png is not None:
        insights.write_chart(data, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def cmd_export_dpo(args: argparse.Namespace) -> int:
    """Preference pairs (prompt, chosen, rejected) from rated answers, as JSON lines."""
    from candor.dpo import preference_pairs
    from candor.factory import build_state
    from candor.traces import traces_since

    if not 1 <= args.since <= 3650:
        print("candor: --since must be between 1 and 3650", file=sys.stderr)
        return EXIT_USAGE
    settings = _settings()
    export = preference_pairs(
        traces_since(build_state(settings), args.since),
        include_unreviewed=args.include_unreviewed,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for pair in export.pairs:
            out.write(json.dumps(pair, ensure_ascii=False) + "\n")
    print(
        f"wrote {len(export.pairs)} preference pairs to {args.out} from "
        f"{export.rated_down} answers rated down ({export.without_prompt} without a stored "
        f"prompt, {export.without_chosen} without a better answer to pair with)",
        file=sys.stderr,
    )
    if export.awaiting_review:
        print(
            f"{export.awaiting_review} better answers written by visitors are awaiting review "
            "and were left out: `candor feedback review` lists them",
            file=sys.stderr,
        )
    return 0


def cmd_feedback_review(args: argparse.Namespace) -> int:
    """List what visitors wrote in their ratings, or approve or reject it by key."""
    from candor import review
    from candor.factory import build_state

    if not 1 <= args.since <= 3650:
        print("candor: --since must be between 1 and 3650", file=sys.stderr)
        return EXIT_USAGE
    state = build_state(_settings())
    decisions: list[tuple[str, review.Decision]] = [
        *((key, "approved") for key in args.approve or ()),
        *((key, "rejected") for key in args.reject or ()),
    ]
    if decisions:
        failed = 0
        for key, decision in decisions:
            outcome = review.decide(state, key, decision)
            if outcome not in ("approved", "rejected"):
                failed += 1
            print(f"{key}: {_REVIEW_OUTCOMES[outcome]}")
        return EXIT_FAILED if failed else 0
    found = list(review.pending(state, args.since))
    if args.json:
        for item in found:
            print(json.dumps(_pending_json(item)))  # ASCII: control characters escaped
        return 0
    for item in found:
        print(_pending_text(item))
    print(
        f"ratings with visitor text awaiting review: {len(found)}; "
        "decide with --approve KEY or --reject KEY",
        file=sys.stderr,
    )
    return 0


_REVIEW_OUTCOMES = {
    "approved": "approved",
    "rejected": "rejected",
    "unknown": "no such rating (unknown, unrated or expired)",
    "changed": "not recorded: the visitor has rated this answer again since; list again",
}


def _pending_json(item: review.Pending) -> dict[str, object]:
    trace, feedback = item.trace, item.trace.feedback
    assert feedback is not None
    return {
        "key": item.key,
        "rated_at": feedback.rated_at,
        "score": feedback.score,
        "reason": feedback.reason,
        "question": trace.question,
        "answer": trace.answer,
        "comment": feedback.comment,
        "better_answer": feedback.better_answer,
    }


def _pending_text(item: review.Pending) -> str:
    from datetime import UTC, datetime

    from candor.review import printable

    lines = [f"key: {item.key}"]
    for name, value in _pending_json(item).items():
        if name == "rated_at" and isinstance(value, float):
            value = datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M UTC")
        if name != "key" and value is not None:
            shown = printable(str(value)).replace("\n", "\n    ")
            lines.append(f"  {name}: {shown}")
    return "\n".join(lines) + "\n"


def cmd_compare(args: argparse.Namespace) -> int:
    """Runs side by side (dev and validation), or two runs of each set paired per question."""
    from candor.evaluation.compare import write_paired, write_side_by_side

    before, after = args.before or [], args.after or []
    if bool(args.folders) == bool(before or after):
        print(
            "candor: give either folders to put side by side, or --before and --after to pair",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if len(before) != len(after):
        print(
            f"candor: --before has {len(before)} folders and --after {len(after)}; "
            "give one of each per question set, in the same order",
            file=sys.stderr,
        )
        return EXIT_USAGE
    missing = [f for f in [*args.folders, *before, *after] if not (f / "report.json").is_file()]
    if missing:
        print(f"candor: no report.json in {', '.join(map(str, missing))}", file=sys.stderr)
        return EXIT_USAGE
    if args.folders:
        write_side_by_side(args.folders, args.out)
    else:
        print(write_paired(before, after, args.out), end="")
    print(f"wrote {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="candor",
        description="Answers from your documents with citations, or declines honestly.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    ingest = commands.add_parser(
        "ingest", help="add documents (.md, .txt, .html, .pdf) to the index"
    )
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    ingest.add_argument("--json", action="store_true", help="print counts as JSON")
    ingest.set_defaults(run=cmd_ingest)

    ask = commands.add_parser("ask", help="ask one question")
    ask.add_argument("question")
    ask.add_argument("--session", help="continue a conversation")
    ask.add_argument("--top-k", type=int, default=None, help="passages to retrieve (1-10)")
    ask.add_argument("--json", action="store_true", help="print the POST /ask response")
    ask.set_defaults(run=cmd_ask)

    stats = commands.add_parser("stats", help="documents and chunks in the index")
    stats.add_argument("--json", action="store_true", help="print the counts as JSON")
    stats.set_defaults(run=cmd_stats)

    models = commands.add_parser("models", help="prepare and verify the local model weights")
    models.set_defaults(run=cmd_models)

    evaluate = commands.add_parser(
        "eval", help="measure retrieval and answers on a question set (JSONL)"
    )
    evaluate.add_argument("--corpus", type=Path, required=True, metavar="DIR")
    asked = evaluate.add_mutually_exclusive_group(required=True)
    asked.add_argument("--questions", type=Path, metavar="FILE")
    asked.add_argument(
        "--generate",
        type=int,
        metavar="N",
        help="write N questions from the corpus with the chat model, then measure on them",
    )
    evaluate.add_argument(
        "--seed", type=int, default=0, help="which passages --generate samples (default 0)"
    )
    evaluate.add_argument("--out", type=Path, default=Path("eval-out"), metavar="DIR")
    evaluate.add_argument("--limit", type=int, default=None, help="questions, spread over kinds")
    evaluate.add_argument(
        "--only", metavar="KIND[,KIND]", help="only questions of these kinds (e.g. unanswerable)"
    )
    evaluate.add_argument(
        "--retrieval-only", action="store_true", help="skip the full-graph (model) part"
    )
    evaluate.add_argument(
        "--strategies",
        default="dense,keyword,hybrid,hybrid_rerank",
        help="comma-separated retrieval strategies",
    )
    evaluate.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="record a question as failed when it takes longer (default 600)",
    )
    evaluate.set_defaults(run=cmd_eval)

    health = commands.add_parser(
        "health", help="check each dependency and print the details (exit 1 if any is degraded)"
    )
    health.add_argument("--json", action="store_true", help="print the checks as JSON")
    health.set_defaults(run=cmd_health)

    insights = commands.add_parser(
        "insights", help="what visitors asked and what the documents are missing"
    )
    insights.add_argument("--days", type=int, default=7, help="UTC days back, today included")
    insights.add_argument("--json", action="store_true", help="print the report as JSON")
    insights.add_argument(
        "--png", type=Path, default=None, metavar="FILE", help="chart questions and declines"
    )
    insights.set_defaults(run=cmd_insights)

    export_dpo = commands.add_parser(
        "export-dpo", help="preference pairs from rated answers (JSON lines, for DPO)"
    )
    export_dpo.add_argument("--out", type=Path, required=True, metavar="FILE.jsonl")
    export_dpo.add_argument(
        "--since", type=int, default=30, metavar="DAYS", help="UTC days back (default 30)"
    )
    export_dpo.add_argument(
        "--include-unreviewed",
        action="store_true",
        help="also use better answers the owner has not reviewed (marked in each pair)",
    )
    export_dpo.set_defaults(run=cmd_export_dpo)

    feedback = commands.add_parser("feedback", help="what visitors wrote in their ratings")
    feedback_commands = feedback.add_subparsers(dest="feedback_command", required=True)
    review = feedback_commands.add_parser(
        "review",
        help="list ratings with visitor text awaiting review, or approve or reject them",
    )
    review.add_argument(
        "--since", type=int, default=30, metavar="DAYS", help="UTC days back (default 30)"
    )
    review.add_argument("--json", action="store_true", help="one JSON object a line")
    review.add_argument("--approve", nargs="+", metavar="KEY", help="keys as listed")
    review.add_argument("--reject", nargs="+", metavar="KEY", help="keys as listed")
    review.set_defaults(run=cmd_feedback_review)

    compare = commands.add_parser(
        "compare",
        help="figures of `candor eval` runs side by side, or two runs paired per question",
    )
    compare.add_argument(
        "folders", nargs="*", type=Path, metavar="DIR", help="eval --out folders, side by side"
    )
    compare.add_argument(
        "--before",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="the runs before a change, one per question set (e.g. dev validation)",
    )
    compare.add_argument(
        "--after",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="the runs after it, on the same question sets in the same order",
    )
    compare.add_argument("--out", type=Path, required=True, metavar="FILE")
    compare.set_defaults(run=cmd_compare)

    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.set_defaults(run=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except CandorError as error:
        print(f"candor: {error}", file=sys.stderr)
        return EXIT_FAILED
    return code


if __name__ == "__main__":
    raise SystemExit(main())
