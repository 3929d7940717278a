"""Concurrency proofs for the guards, on DynamoDB Local and on SQLite (`make stress`).

For each backend: many reservations racing on one budget ledger, and many
requests racing on one rate-limit window, each thread with a store (a boto3
client, a SQLite connection) of its own, all released at once. Then a restart
check: a separate process sets a warning, fills a rate-limit window and spends a
budget, and exits; a fresh store in this process must still see all three.

Prints one line per check and ends with `STRESS {json}`; exits 1 if a check fails.
Run from the repository root: `.venv/bin/python -m bench.stress`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from candor.backends.dynamodb_state import DynamoDBStateStore
from candor.backends.sqlite_state import SqliteStateStore
from candor.ports import StateStore
from tests.support.concurrency import together
from tests.support.dynamodb_local import ROOT, DynamoDBLocal, client, create_state_table

HOUR = 3600
RESTART_SESSION = "restart-check-session"
RESTART_RATE_KEY = "restart-check-address"
RESTART_LEDGER = "restart-check-ledger"
RESTART_LIMIT = 3
RESTART_CAP = Decimal("0.05")


def opener(backend: str, target: str, table: str) -> Callable[[], StateStore]:
    """Stores on one backing: `target` is DynamoDB's endpoint or SQLite's file."""
    if backend == "dynamodb":
        return lambda: DynamoDBStateStore(table, client=client(target))
    return lambda: SqliteStateStore(Path(target))


def close(stores: Sequence[StateStore]) -> None:
    for store in stores:
        if isinstance(store, SqliteStateStore):
            store.close()  # 200 connections in WAL mode hold 600 file descriptors


def check(label: str, ok: bool, detail: str) -> bool:
    print(f"{label}: {detail} -> {'ok' if ok else 'FAILED'}", flush=True)
    return ok


def stress(
    backend: str, open_store: Callable[[], StateStore], args: argparse.Namespace, now: float
) -> dict[str, Any]:
    amount, cap = Decimal(args.amount), Decimal(args.cap)
    ledger, rate_key = f"stress-{uuid.uuid4().hex}", f"stress-{uuid.uuid4().hex}"

    stores = [open_store() for _ in range(args.budget_attempts)]
    started = time.perf_counter()
    reserved = together(
        stores, lambda s: s.reserve_budget(ledger, amount, cap=cap, expires_at=int(now) + HOUR)
    )
    budget_seconds = time.perf_counter() - started
    spent = stores[0].budget_spent(ledger)
    close(stores)
    expected = int(cap // amount)
    budget_ok = check(
        f"{backend} budget",
        reserved.count(True) == expected and spent == cap,
        f"{reserved.count(True)}/{len(reserved)} reservations of {amount} passed a {cap} cap "
        f"(expected {expected}); ledger {spent} in {budget_seconds:.2f} s",
    )

    stores = [open_store() for _ in range(args.rate_attempts)]
    started = time.perf_counter()
    decisions = together(
        stores,
        lambda s: s.hit_rate_limit(rate_key, window_seconds=HOUR, limit=args.rate_limit, now=now),
    )
    rate_seconds = time.perf_counter() - started
    close(stores)
    passed = sum(d.allowed for d in decisions)
    rate_ok = check(
        f"{backend} rate limit",
        passed == args.rate_limit,
        f"{passed}/{len(decisions)} requests passed a limit of {args.rate_limit} "
        f"in one window, in {rate_seconds:.2f} s",
    )
    return {
        "budget_attempts": len(reserved),
        "budget_successes": reserved.count(True),
        "budget_expected": expected,
        "ledger": float(spent),
        "cap": float(cap),
        "rate_attempts": len(decisions),
        "rate_successes": passed,
        "rate_limit": args.rate_limit,
        "ok": budget_ok and rate_ok,
    }


def set_state_and_exit(backend: str, target: str, table: str, now: float) -> None:
    """The restart check's other process: leave a warning, a full window and a spent budget."""
    store = opener(backend, target, table)()
    store.record_offence(RESTART_SESSION)
    for _ in range(RESTART_LIMIT):
        store.hit_rate_limit(RESTART_RATE_KEY, window_seconds=HOUR, limit=RESTART_LIMIT, now=now)
    store.reserve_budget(RESTART_LEDGER, RESTART_CAP, cap=RESTART_CAP, expires_at=int(now) + HOUR)


def restart(backend: str, target: str, table: str, now: float) -> bool:
    subprocess.run(
        [sys.executable, "-m", "bench.stress", "--set-state", backend, target, table, str(now)],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    store = opener(backend, target, table)()
    status = store.get_session(RESTART_SESSION).status
    window = store.hit_rate_limit(
        RESTART_RATE_KEY, window_seconds=HOUR, limit=RESTART_LIMIT, now=now
    )
    more = store.reserve_budget(
        RESTART_LEDGER, Decimal("0.01"), cap=RESTART_CAP, expires_at=int(now) + HOUR
    )
    return check(
        f"{backend} restart",
        status == "warned" and not window.allowed and not more,
        f"after the setting process exited: session {status}, rate limit "
        f"{'refuses' if not window.allowed else 'allows'}, budget "
        f"{'refuses' if not more else 'allows'} another reservation",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--budget-attempts", type=int, default=200)
    parser.add_argument("--rate-attempts", type=int, default=200)
    parser.add_argument("--amount", default="0.01", help="US dollars per reservation")
    parser.add_argument("--cap", default="0.50", help="US dollars on the ledger")
    parser.add_argument("--rate-limit", type=int, default=50)
    parser.add_argument("--set-state", nargs=4, metavar=("BACKEND", "TARGET", "TABLE", "NOW"))
    args = parser.parse_args(argv)
    if args.set_state:
        backend, target, table, now = args.set_state
        set_state_and_exit(backend, target, table, float(now))
        return 0

    # The start of the next hour: nothing written expires (by TTL) during the run.
    now = float((int(time.time()) // HOUR + 1) * HOUR)
    with DynamoDBLocal() as endpoint:
        table = create_state_table(client(endpoint))
        summary = stress("dynamodb", opener("dynamodb", endpoint, table), args, now)
        summary["restart"] = restart("dynamodb", endpoint, table, now)
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "state.sqlite3")
        sqlite = stress("sqlite", opener("sqlite", path, ""), args, now)
        sqlite["restart"] = restart("sqlite", path, "", now)
    ok = summary.pop("ok") and sqlite.pop("ok") and summary["restart"] and sqlite["restart"]
    result = {"backend": "dynamodb-local", **summary, "sqlite": sqlite, "ok": ok}
    print(f"STRESS {json.dumps(result)}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
