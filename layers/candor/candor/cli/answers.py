"""`candor answers`: the owner's own answers, served before retrieval with no model call."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from candor.cli.common import EXIT_FAILED, EXIT_USAGE, Commands, settings_or_exit

DEFAULT_SETS = (Path("data/eval/curated/git-curated-answers.jsonl"),)


def _warn_unserved(embedder: str) -> None:
    from candor.curated import lookup

    if lookup.rule(settings_or_exit(), embedder) is None:
        print(
            f"candor: no match threshold is measured for the embedder {embedder}: curated "
            "answers are kept but not served until CANDOR_CURATED_THRESHOLD is set "
            "(`candor answers measure` gives the figures to choose it)",
            file=sys.stderr,
        )


def cmd_add(args: argparse.Namespace) -> int:
    from candor.curated import library
    from candor.factory import build_curation, build_embedder

    settings = settings_or_exit()
    embedder = build_embedder(settings)
    added = library.add(
        build_curation(settings, embedder), embedder, args.question, args.answer, url=args.url
    )
    print(added.id)
    _warn_unserved(embedder.name)
    return 0


def served_counts(days: int) -> Counter[str]:
    """How often each curated answer answered in the last `days` days (from the traces)."""
    from candor.factory import build_state
    from candor.traces import traces_since

    state = build_state(settings_or_exit())
    return Counter(t.curated_id for t in traces_since(state, days) if t.curated_id)


def cmd_list(args: argparse.Namespace) -> int:
    from candor.factory import build_curated_answers
    from candor.review import printable

    settings = settings_or_exit()
    answers = build_curated_answers(settings).list_curated(settings.index_name)
    served = served_counts(args.days)
    if args.json:
        for answer in answers:
            row = json.loads(answer.to_json()) | {"served": served[answer.id]}
            print(json.dumps(row))
        return 0
    for answer in answers:
        print(f"{answer.id}  served {served[answer.id]} in {args.days} days  ({answer.origin})")
        print(f"  question: {printable(answer.question)}")
        print(f"  answer: {printable(answer.answer)}".replace("\n", "\n    "))
        if answer.url:
            print(f"  url: {answer.url}")
    print(f"{len(answers)} curated answers", file=sys.stderr)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from candor.curated import library
    from candor.factory import build_curation, build_embedder

    settings = settings_or_exit()
    curation = build_curation(settings, build_embedder(settings))
    failed = 0
    for answer_id in args.ids:
        if library.remove(curation, answer_id):
            print(f"{answer_id}: removed")
        else:
            print(f"{answer_id}: no such curated answer")
            failed += 1
    return EXIT_FAILED if failed else 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from candor.curated import library
    from candor.factory import build_curation, build_embedder

    settings = settings_or_exit()
    embedder = build_embedder(settings)
    done = library.reindex(build_curation(settings, embedder), embedder)
    print(f"indexed {done.written} curated questions; deleted {done.deleted} stale entries")
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    from candor.curated import lookup
    from candor.curated.matching import MatchRule
    from candor.curated.measure import measure, read_set, to_markdown
    from candor.factory import build_embedder

    settings = settings_or_exit()
    embedder = build_embedder(settings)
    configured = lookup.rule(settings, embedder.name)
    if configured is None and not args.thresholds:
        print(
            f"candor: no threshold is measured for {embedder.name}: give --thresholds",
            file=sys.stderr,
        )
        return EXIT_USAGE
    synonym = args.synonym or (configured.synonym if configured else 0.55)
    thresholds = args.thresholds or [configured.threshold if configured else 0.0]
    rules = [MatchRule(threshold, synonym) for threshold in thresholds]
    started = time.perf_counter()
    for path in args.sets or DEFAULT_SETS:
        rows = measure(read_set(path), embedder, rules)
        if args.json:
            for row in rows:
                print(json.dumps({"set": str(path), "embedder": embedder.name} | row.to_json()))
        else:
            print(to_markdown(path, embedder.name, rows, synonym))
            if args.verbose:
                for row in rows:
                    print(f"threshold {row.threshold:.2f} missed: {row.missed}")
                    print(f"threshold {row.threshold:.2f} near misses served: {row.served_near}")
    print(f"measured in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


def register(commands: Commands) -> None:
    answers = commands.add_parser(
        "answers", help="your own answers, served before retrieval with no model call"
    )
    sub = answers.add_subparsers(dest="answers_command", required=True)

    add = sub.add_parser("add", help="answer a question yourself")
    add.add_argument("question", help="the question, as a visitor would ask it")
    add.add_argument("--answer", required=True, help="your answer, shown as written")
    add.add_argument("--url", default=None, help="a page the answer's chip links to")
    add.set_defaults(run=cmd_add)

    listing = sub.add_parser("list", help="your curated answers, and how often each served")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    listing.add_argument("--days", type=int, default=30, help="count what served in these days")
    listing.set_defaults(run=cmd_list)

    remove = sub.add_parser("remove", help="forget curated answers by id")
    remove.add_argument("ids", nargs="+", metavar="ID")
    remove.set_defaults(run=cmd_remove)

    reindex = sub.add_parser(
        "reindex", help="rebuild the curated questions' index (after changing the embedder)"
    )
    reindex.set_defaults(run=cmd_reindex)

    measured = sub.add_parser(
        "measure", help="paraphrases and near misses served, on a set (data/eval/curated)"
    )
    measured.add_argument("sets", nargs="*", type=Path, metavar="SET.jsonl")
    measured.add_argument(
        "--thresholds", nargs="+", type=float, metavar="T", help="measure these thresholds"
    )
    measured.add_argument("--synonym", type=float, default=None, help="word synonym similarity")
    measured.add_argument("--json", action="store_true", help="one JSON object per threshold")
    measured.add_argument("--verbose", action="store_true", help="list the misses")
    measured.set_defaults(run=cmd_measure)
