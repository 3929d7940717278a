"""`candor gaps`: what the documents miss, checked again until the documents answer it."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from candor.cli.common import EXIT_FAILED, EXIT_USAGE, Commands, settings_or_exit

if TYPE_CHECKING:
    from candor.deps import Deps
    from candor.gaps.records import Gap, GapStore
    from candor.settings import Settings


def refreshed(settings: Settings, store: GapStore, days: int, now: float) -> list[Gap]:
    """The index's gaps, with the missing questions of the last `days` days counted in."""
    from candor.factory import build_embedder, build_state
    from candor.gaps import opening
    from candor.traces import traces_since

    traces = traces_since(build_state(settings), days, now=now)
    embedder = build_embedder(settings) if opening.missing_questions(traces) else None
    return opening.refresh(store, traces, embedder, settings.index_name, now=now).gaps


def _days(args: argparse.Namespace) -> int | None:
    if not 1 <= args.days <= 3650:
        print("candor: --days must be between 1 and 3650", file=sys.stderr)
        return None
    return int(args.days)


def cmd_list(args: argparse.Namespace) -> int:
    from candor.factory import build_gaps
    from candor.owner_report import gap_json
    from candor.review import printable

    days = _days(args)
    if days is None:
        return EXIT_USAGE
    settings = settings_or_exit()
    gaps = refreshed(settings, build_gaps(settings), days, time.time())
    shown = [g for g in gaps if args.all or g.status == "open"]
    if args.json:
        for gap in shown:
            print(json.dumps(gap_json(gap), ensure_ascii=False))
        return 0
    for gap in shown:
        since = gap_json(gap)
        print(f"{gap.id}  {gap.status}  asked {gap.asked}  since {since['opened']}")
        for question in gap.questions[-5:]:
            print(f"  - {printable(question.question)} ({question.why})")
        if gap.status == "closed":
            print(f"  closed {since['closed']} by {', '.join(gap.closed_by)}")
        elif gap.checks:
            answered = sum(c.answered for c in gap.checks)
            print(f"  last check {since['checked']}: {answered}/{len(gap.checks)} answered")
    open_now = sum(1 for g in gaps if g.status == "open")
    print(f"{open_now} open gaps, {len(gaps) - open_now} closed", file=sys.stderr)
    return 0


def run_check(deps: Deps, store: GapStore, *, only: set[str] | None, out: TextIO) -> int:
    """Check the open gaps with `deps`; print what closed and what is still open."""
    from candor.gaps import checking

    report = asyncio.run(checking.check(deps, store, only=only))
    for gap in report.gaps:
        if gap.status == "closed":
            print(f"{gap.id}: closed by {', '.join(gap.closed_by)}", file=out)
            continue
        print(f"{gap.id}: still open", file=out)
        for c in gap.checks:
            print(f"  - {c.question}: {c.outcome}", file=out)
    for gap_id in report.conflicts:
        print(f"{gap_id}: changed while it was checked (new questions); check again", file=out)
    print(
        f"checked {len(report.checked)} gaps, closed {len(report.closed)}; "
        f"spent ${report.spent_usd} of the owner's budget "
        f"(CANDOR_OWNER_BUDGET_USD={deps.settings.owner_budget_usd} a day)",
        file=out,
    )
    if report.budget_exhausted:
        print(
            f"the owner's budget for today is spent: {len(report.unchecked)} gaps not "
            "checked (raise CANDOR_OWNER_BUDGET_USD, or check again tomorrow)",
            file=out,
        )
        return EXIT_FAILED
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from candor.factory import build_deps, build_gaps

    days = _days(args)
    if days is None:
        return EXIT_USAGE
    settings = settings_or_exit()
    store = build_gaps(settings)
    refreshed(settings, store, days, time.time())
    deps = build_deps(settings)
    if deps.index.count() == 0:
        print("candor: the index is empty; run `candor ingest PATH` first", file=sys.stderr)
        return EXIT_USAGE
    return run_check(deps, store, only=set(args.gap) if args.gap else None, out=sys.stdout)


def cmd_export(args: argparse.Namespace) -> int:
    from candor.factory import build_gaps
    from candor.gaps.export import question_lines

    days = _days(args)
    if days is None:
        return EXIT_USAGE
    settings = settings_or_exit()
    gaps = refreshed(settings, build_gaps(settings), days, time.time())
    lines = question_lines(gaps, per_gap=args.per_gap, closed=args.closed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    print(
        f"wrote {len(lines)} questions to {args.out}; measure them with "
        f"`candor eval --questions {args.out} --corpus YOUR-DOCS`",
        file=sys.stderr,
    )
    return 0


def register(commands: Commands) -> None:
    gaps = commands.add_parser("gaps", help="what the documents miss, until they answer it")
    sub = gaps.add_subparsers(dest="gaps_command", required=True)

    listing = sub.add_parser("list", help="the open gaps (questions declined or rated down)")
    listing.add_argument("--days", type=int, default=30, help="count the traces of these days")
    listing.add_argument("--all", action="store_true", help="the closed gaps too")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    listing.set_defaults(run=cmd_list)

    check = sub.add_parser(
        "check", help="ask the open gaps again; close those now answered (owner's budget)"
    )
    check.add_argument("--days", type=int, default=30, help="count the traces of these days")
    check.add_argument("--gap", nargs="+", metavar="ID", help="only these gaps")
    check.set_defaults(run=cmd_check)

    export = sub.add_parser("export", help="the open gaps as a question set for `candor eval`")
    export.add_argument("--out", type=Path, required=True, metavar="FILE.jsonl")
    export.add_argument("--days", type=int, default=30, help="count the traces of these days")
    export.add_argument("--per-gap", type=int, default=3, help="questions of each gap")
    export.add_argument("--closed", action="store_true", help="closed gaps too")
    export.set_defaults(run=cmd_export)
