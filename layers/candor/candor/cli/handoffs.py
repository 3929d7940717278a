"""`candor handoffs list|show|retry` and `candor suggestions refresh`: hand-offs and starters.

The owner reads the hand-offs with their delivery state (pending, delivered,
failed), the whole of one with its conversation, and sends again one that has not
been delivered (a webhook that was down longer than the retries lasted). On AWS
these read the state table with the owner's credentials (CANDOR_STATE_BACKEND=dynamodb,
CANDOR_STATE_TABLE), as `candor insights` does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from candor.cli.common import EXIT_FAILED, EXIT_USAGE, Commands, settings_or_exit

if TYPE_CHECKING:
    from candor.handoffs.store import Handoff, HandoffStore


def listed(store: HandoffStore, days: int, *, now: float) -> list[Handoff]:
    """Every live hand-off of the last `days` UTC days, today included, oldest first."""
    today = datetime.fromtimestamp(now, UTC).date()
    found: list[Handoff] = []
    for back in range(days - 1, -1, -1):
        found.extend(store.handoffs_on((today - timedelta(days=back)).isoformat(), now=now))
    return found


def _row(handoff: Handoff) -> dict[str, object]:
    from candor.handoffs.transcript import Content

    content = Content.from_json(handoff.body)
    return {
        "id": handoff.id,
        "created_at": handoff.created_at,
        "state": handoff.state,
        "attempts": handoff.attempts,
        "delivered_to": list(handoff.delivered_to),
        "last_error": handoff.last_error,
        "email": content.email,
        "after_decline": content.after_decline,
        "turns": len(content.transcript),
        "message": content.message,
    }


def cmd_list(args: argparse.Namespace) -> int:
    """For the owner: the hand-offs of the last days, with how their delivery went."""
    from candor.factory import build_handoff_store
    from candor.review import printable

    if not 1 <= args.days <= 3650:
        print("candor: --days must be between 1 and 3650", file=sys.stderr)
        return EXIT_USAGE
    rows = [
        _row(h) for h in listed(build_handoff_store(settings_or_exit()), args.days, now=time.time())
    ]
    if args.state:
        rows = [row for row in rows if row["state"] == args.state]
    if args.json:
        for row in rows:
            print(json.dumps(row))  # ASCII: a visitor's control characters come out escaped
        return 0
    for row in rows:
        when = datetime.fromtimestamp(float(str(row["created_at"])), UTC)
        error = f"  last error: {row['last_error']}" if row["last_error"] else ""
        print(
            f"{row['id']}  {when:%Y-%m-%d %H:%M} UTC  {row['state']:<9} attempts {row['attempts']}"
            f"  {printable(str(row['email']))}  {row['turns']} turns"
            f"{'  after a decline' if row['after_decline'] else ''}{error}"
        )
    print(f"hand-offs: {len(rows)}", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """The whole hand-off as its recipients read it."""
    from candor.factory import build_handoff_store
    from candor.handoffs.forward import plain_text
    from candor.handoffs.transcript import Content
    from candor.review import printable

    handoff = build_handoff_store(settings_or_exit()).get_handoff(args.id, now=time.time())
    if handoff is None:
        print(f"candor: no hand-off {args.id} (unknown or expired)", file=sys.stderr)
        return EXIT_FAILED
    print(f"state: {handoff.state}, attempts: {handoff.attempts}")
    print(printable(plain_text(handoff, Content.from_json(handoff.body))))
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    """Forward now, once, each hand-off named (or every undelivered one of --days)."""
    from candor.factory import build_handoff_store
    from candor.handoffs.dispatch import deliver, senders_for

    settings = settings_or_exit()
    store = build_handoff_store(settings)
    senders = senders_for(settings)
    if not senders:
        print("candor: no hand-off destination is configured", file=sys.stderr)
        return EXIT_FAILED
    ids = args.ids or [
        h.id for h in listed(store, args.days, now=time.time()) if h.state != "delivered"
    ]
    failed = 0
    for handoff_id in ids:
        # One more attempt than any count so far allows: the owner asked for it.
        after = deliver(store, senders, handoff_id, max_attempts=sys.maxsize)
        if after is None:
            print(f"{handoff_id}: not sent (delivered already, unknown, or being sent now)")
        else:
            failed += after.state != "delivered"
            print(
                f"{handoff_id}: {after.state}"
                + (f" ({after.last_error})" if after.last_error else "")
            )
    return EXIT_FAILED if failed else 0


def cmd_suggestions_refresh(args: argparse.Namespace) -> int:
    """Write and check the widget's starter questions for the corpus as it is now."""
    import asyncio

    from candor.factory import build_deps
    from candor.suggestions import refresh

    done = asyncio.run(refresh(build_deps(settings_or_exit())))
    for question in done.kept:
        print(f"kept: {question}")
    for question, reason in done.rejected.items():
        print(f"not kept: {question} ({reason})")
    print(f"cost: ${done.cost_usd:.6f}", file=sys.stderr)
    return 0


def register(commands: Commands) -> None:
    handoffs = commands.add_parser("handoffs", help="visitors who asked for a person")
    sub = handoffs.add_subparsers(dest="handoffs_command", required=True)
    list_ = sub.add_parser("list", help="the hand-offs of the last days and their state")
    list_.add_argument("--days", type=int, default=7, help="UTC days back, today included")
    list_.add_argument("--state", choices=("pending", "delivered", "failed"))
    list_.add_argument("--json", action="store_true", help="one JSON object a line")
    list_.set_defaults(run=cmd_list)
    show = sub.add_parser("show", help="one hand-off with its conversation")
    show.add_argument("id")
    show.set_defaults(run=cmd_show)
    retry = sub.add_parser("retry", help="forward undelivered hand-offs again, now")
    retry.add_argument("ids", nargs="*", metavar="ID", help="unset: every undelivered one")
    retry.add_argument("--days", type=int, default=7, help="with no ID: UTC days back")
    retry.set_defaults(run=cmd_retry)

    suggestions = commands.add_parser("suggestions", help="the widget's starter questions")
    suggestions_sub = suggestions.add_subparsers(dest="suggestions_command", required=True)
    refresh = suggestions_sub.add_parser(
        "refresh", help="write starter questions and keep those candor answers (model calls)"
    )
    refresh.set_defaults(run=cmd_suggestions_refresh)
