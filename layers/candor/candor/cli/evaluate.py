"""`candor eval` and `candor compare`: measure candor on a question set, and pair runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from candor.cli.common import EXIT_USAGE, Commands, settings_or_exit

if TYPE_CHECKING:
    pass

# `candor eval --generate`: each question is a model call, and twice as many at most.
MAX_GENERATED = 1000


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
    named = [(args.corpus, "corpus folder"), *((q, "question file") for q in args.questions or ())]
    for path, what in named:
        if path is not None and not path.exists():
            print(f"candor: no such {what}: {path}", file=sys.stderr)
            return EXIT_USAGE
    try:
        context_chars = parse_budgets(args.context_chars)
    except ValueError as error:
        print(f"candor: --context-chars {error}", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_or_exit()
    if args.generate is not None:
        from candor.evaluation.generate import write_generated

        try:
            generated, about = write_generated(
                settings, args.corpus, args.out, args.generate, seed=args.seed
            )
        except EvalError as error:
            print(f"candor: {error}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"generated {about['kept']} of {about['requested']} questions in "
            f"{about['attempts']} calls (rejected: {about['rejected'] or 'none'}); "
            f"wrote {generated}",
            file=sys.stderr,
        )
        args.questions = [generated]
    options = EvalOptions(
        corpus=args.corpus,
        questions=args.questions[0],
        more_questions=tuple(args.questions[1:]),
        out=args.out,
        limit=args.limit,
        kinds=kinds,
        retrieval_only=args.retrieval_only,
        timeout=args.timeout,
        strategies=strategies,
        context_chars=context_chars,
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


def parse_budgets(text: str | None) -> tuple[int, ...]:
    """`1800,3600,6000` -> (1800, 3600, 6000); each within what the settings take."""
    from candor.settings import MAX_CONTEXT_CHARS

    if not text:
        return ()
    found: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit() or not 100 <= int(part) <= MAX_CONTEXT_CHARS:
            raise ValueError(f"takes characters from 100 to {MAX_CONTEXT_CHARS}, not {part!r}")
        found.append(int(part))
    return tuple(dict.fromkeys(found))


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


def register(commands: Commands) -> None:
    evaluate = commands.add_parser(
        "eval", help="measure retrieval and answers on a question set (JSONL)"
    )
    evaluate.add_argument("--corpus", type=Path, required=True, metavar="DIR")
    asked = evaluate.add_mutually_exclusive_group(required=True)
    asked.add_argument(
        "--questions",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="question files (JSONL), asked in one run (ids unique across them)",
    )
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
    evaluate.add_argument(
        "--context-chars",
        metavar="N[,N]",
        help="also measure answer context, prompt tokens and price at these budgets "
        "(characters, e.g. 1800,3600,6000,9000); each backend's default is always measured",
    )
    evaluate.set_defaults(run=cmd_eval)

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
