"""`candor ask`, `candor serve` and `candor health`: questions, the API, its dependencies."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, TextIO

from pydantic import ValidationError

from candor.cli.common import EXIT_FAILED, EXIT_USAGE, Commands, settings_or_exit
from candor.errors import BudgetExhaustedError, RateLimitedError, SessionEndedError

if TYPE_CHECKING:
    from candor.deps import Deps
    from candor.results import AskResult


def cmd_ask(args: argparse.Namespace) -> int:
    from candor.api.schemas import AskRequest, AskResponse
    from candor.factory import build_deps

    try:
        request = AskRequest(question=args.question, session_id=args.session, top_k=args.top_k)
    except ValidationError as error:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        print(f"candor: {reasons}", file=sys.stderr)
        return EXIT_USAGE
    deps = build_deps(settings_or_exit())
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

    settings = settings_or_exit()
    app = create_local_app(settings, host=args.host, port=args.port, warm=True)
    print(
        f"candor is serving on http://{args.host}:{args.port}  (API docs: /docs)\n"
        f"  chat: open http://{args.host}:{args.port}/ in a browser (the widget's demo page)\n"
        f"  ask:  curl -s http://{args.host}:{args.port}/ask -H 'content-type: application/json' "
        '-d \'{"question": "How do I deploy candor to AWS?"}\'\n'
        f"  streamed: curl -N http://{args.host}:{args.port}/ask/stream (the same body)\n"
        f"  assistants: MCP at /mcp, OpenAI clients at /v1, with a key from CANDOR_API_KEYS "
        "(docs/assistants.md)",
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

    checks = diagnose(settings_or_exit())
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


def register(commands: Commands) -> None:
    ask = commands.add_parser("ask", help="ask one question")
    ask.add_argument("question")
    ask.add_argument("--session", help="continue a conversation")
    ask.add_argument("--top-k", type=int, default=None, help="passages to retrieve (1-10)")
    ask.add_argument("--json", action="store_true", help="print the POST /ask response")
    ask.set_defaults(run=cmd_ask)

    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.set_defaults(run=cmd_serve)

    health = commands.add_parser(
        "health", help="check each dependency and print the details (exit 1 if any is degraded)"
    )
    health.add_argument("--json", action="store_true", help="print the checks as JSON")
    health.set_defaults(run=cmd_health)
