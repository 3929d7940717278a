"""`candor insights`, `candor export-dpo` and `candor feedback review`: the owner's reading."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from candor.cli.common import EXIT_FAILED, EXIT_USAGE, Commands, settings_or_exit

if TYPE_CHECKING:
    from candor import review
    from candor.ports import Embedder, StateStore
    from candor.settings import Settings
    from candor.stale_citations import StaleCitation
    from candor.traces import Trace


def cmd_insights(args: argparse.Namespace) -> int:
    """For the owner: what visitors asked, and what the documents are missing."""
    from candor import insights
    from candor.factory import build_embedder, build_state
    from candor.traces import traces_since

    if not 1 <= args.days <= 3650:
        print("candor: --days must be between 1 and 3650", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_or_exit()
    now = time.time()
    traces = traces_since(build_state(settings), args.days, now=now)
    # Grouping declined questions by meaning needs the embedder; nothing else does.
    declined = any(t.decision == "declined" and t.question for t in traces)
    embedder = build_embedder(settings) if declined else None
    data = insights.report(traces, days=args.days, now=now, embedder=embedder)
    from candor.cli.handoffs import listed
    from candor.factory import build_handoff_store

    handoffs = listed(build_handoff_store(settings), args.days, now=now)
    data["handoffs"] = insights.handoff_counts(handoffs)
    data = _with_the_loop(data, traces, settings, embedder, now)
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        from candor import owner_report

        print(insights.to_markdown(data) + "\n" + owner_report.to_markdown(data), end="")
    if args.png is not None:
        insights.write_chart(data, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def _with_the_loop(
    data: dict[str, Any],
    traces: list[Trace],
    settings: Settings,
    embedder: Embedder | None,
    now: float,
) -> dict[str, Any]:
    """The owner's loop in the report: the period's missing questions counted into
    gaps (opening new ones), curated answers served, and answers that cited what has
    since changed or gone (candor.owner_report)."""
    from candor import owner_report
    from candor.errors import ConfigurationError
    from candor.factory import (
        build_curated_answers,
        build_embedder,
        build_gaps,
        build_index,
        build_state,
    )
    from candor.gaps import opening
    from candor.ingest.records import CompletionRecords
    from candor.stale_citations import StaleCitations, stale_citations

    missing = opening.missing_questions(traces)
    if missing and embedder is None:
        embedder = build_embedder(settings)
    gaps = opening.refresh(
        build_gaps(settings), traces, embedder, settings.index_name, now=now
    ).gaps
    curated = build_curated_answers(settings).list_curated(settings.index_name)
    cited = [t for t in traces if t.decision == "answered" and t.citations]
    stale: list[StaleCitation] | None = []
    if cited:
        # The cited documents' chunks are read from the index: without its settings
        # (a Pinecone host and key), that one list is left out, and the report says so.
        try:
            index = build_index(settings, embedder or build_embedder(settings))
        except ConfigurationError as error:
            print(f"candor: answers citing changed documents not listed: {error}", file=sys.stderr)
            stale = None
        else:
            records = CompletionRecords(build_state(settings), settings.index_name)
            stale = stale_citations(cited, StaleCitations(index, records))
    return owner_report.loop_report(data, traces, gaps, curated, stale)


def cmd_export_dpo(args: argparse.Namespace) -> int:
    """Preference pairs (prompt, chosen, rejected) from rated answers, as JSON lines."""
    from candor.dpo import preference_pairs
    from candor.factory import build_state
    from candor.traces import traces_since

    if not 1 <= args.since <= 3650:
        print("candor: --since must be between 1 and 3650", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_or_exit()
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
    settings = settings_or_exit()
    state = build_state(settings)
    if args.as_answer:
        return _approve_as_answer(args, settings, state)
    if args.answer is not None or args.question is not None or args.url or args.edit:
        print(
            "candor: --answer, --question, --url and --edit go with --approve KEY --as-answer",
            file=sys.stderr,
        )
        return EXIT_USAGE
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


def _approve_as_answer(args: argparse.Namespace, settings: Settings, state: StateStore) -> int:
    """Approve one rating and keep its better answer, as edited, as a curated answer."""
    from candor.curated import approval
    from candor.factory import build_curation, build_embedder

    if args.reject or not args.approve or len(args.approve) != 1:
        print("candor: --as-answer takes exactly one --approve KEY", file=sys.stderr)
        return EXIT_USAGE
    (key,) = args.approve
    now = time.time()
    answer = args.answer
    if args.edit:
        found = approval.proposal(state, key, now=now)
        if found is None:
            print(f"{key}: {_REVIEW_OUTCOMES['unknown']}")
            return EXIT_FAILED
        answer = _edited(answer if answer is not None else found.answer or "")
    embedder = build_embedder(settings)
    outcome, added = approval.approve_as_answer(
        state,
        build_curation(settings, embedder),
        embedder,
        key,
        question=args.question,
        answer=answer,
        url=args.url,
        now=now,
    )
    print(f"{key}: {_REVIEW_OUTCOMES[outcome]}")
    if added is None:
        return EXIT_FAILED
    print(f"kept as curated answer {added.id}")
    return 0


def _edited(text: str) -> str:
    """`text` as the owner leaves it in their editor ($VISUAL, $EDITOR, else vi)."""
    import os
    import shlex
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
        path = Path(f.name)
    try:
        subprocess.run([*shlex.split(editor), str(path)], check=True)
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)


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


def register(commands: Commands) -> None:
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
    review.add_argument(
        "--as-answer",
        action="store_true",
        help="with one --approve KEY: also keep its better answer as a curated answer",
    )
    review.add_argument("--answer", default=None, help="with --as-answer: your text instead")
    review.add_argument("--question", default=None, help="with --as-answer: the question to match")
    review.add_argument("--url", default=None, help="with --as-answer: a page the chip links to")
    review.add_argument(
        "--edit", action="store_true", help="with --as-answer: edit the text in $EDITOR first"
    )
    review.set_defaults(run=cmd_feedback_review)
