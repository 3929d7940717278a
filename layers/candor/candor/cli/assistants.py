"""`candor mcp`: the MCP server over stdio, for a desktop assistant on this machine.

The assistant (Claude Desktop, Cursor, VS Code, ...) starts `candor mcp` as a
subprocess and speaks MCP on its stdin and stdout; docs/assistants.md has the
configuration snippets. It answers from the index in CANDOR_DATA_DIR with the
configured backends (the local model by default), through the same tools and the
same guards as POST /mcp, as the machine's own user: no server key. Nothing but
the protocol goes to stdout; the rest (what it serves, warnings) to stderr.
"""

from __future__ import annotations

import argparse
import sys
from functools import cache

from candor.cli.common import EXIT_USAGE, Commands, settings_or_exit


def cmd_mcp(args: argparse.Namespace) -> int:
    import anyio

    from candor.api.mcp_server import Caller, calling_as, server
    from candor.api.sessions import signer_for
    from candor.deps import built_once
    from candor.factory import build_deps

    settings = settings_or_exit()
    deps = built_once(lambda: build_deps(settings))
    chunks = deps().index.count()
    if chunks == 0:
        print("candor: the index is empty; run `candor ingest PATH` first", file=sys.stderr)
        return EXIT_USAGE
    print(
        f"candor mcp: {chunks} passages of index {settings.index_name!r} "
        f"({settings.data_dir}), over stdio",
        file=sys.stderr,
    )
    caller = Caller(deps=deps, signer=cache(lambda: signer_for(settings)))

    async def serve() -> None:
        from mcp.server.stdio import stdio_server

        mcp = server()
        # Set before the transport starts its tasks: they copy the context they start in.
        with calling_as(caller):
            async with stdio_server() as (read, write):
                await mcp.run(read, write, mcp.create_initialization_options())

    anyio.run(serve)
    return 0


def register(commands: Commands) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve the tools ask_docs and search_docs over stdio (MCP), for a desktop assistant",
    )
    mcp.set_defaults(run=cmd_mcp)
