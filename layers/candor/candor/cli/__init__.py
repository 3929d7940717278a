"""`candor`: ingest documents, ask questions, evaluate, serve the HTTP API.

One module per command group: each has `register(commands)`, which adds its
subcommands, each with `run` set to the function that carries it out. A new group
is a new module named in GROUPS.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from candor.cli import (
    answers,
    asking,
    assistants,
    documents,
    evaluate,
    gaps,
    handoffs,
    owner,
    sync,
)
from candor.cli.asking import ask_and_show
from candor.cli.common import EXIT_FAILED, EXIT_USAGE
from candor.errors import CandorError

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "ask_and_show", "build_parser", "main"]

# In the order `candor --help` lists them.
GROUPS = (documents, sync, asking, assistants, evaluate, owner, handoffs, answers, gaps)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="candor",
        description="Answers from your documents with citations, or declines honestly.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except CandorError as error:
        print(f"candor: {error}", file=sys.stderr)
        return EXIT_FAILED
    return code
