"""agentctx: certificates, servers, database and diagnostics.

Expected failures (bad flags, missing files, a busy port, invalid config)
print one line naming the problem and exit non-zero, without a traceback.
"""

from __future__ import annotations

import os

# gRPC's C core logs handshake and bind failures to stderr; the CLI reports
# its own one-line errors instead. Must be set before grpc is imported.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import argparse
import importlib
import sys
from typing import NoReturn

from agentctx_common.errors import AgentCtxError, ConfigError

# Subcommand modules; each has register(subparsers). Imported lazily so a
# command only loads what it needs.
COMMANDS = (
    "agentctx_cli.commands.certs",
    "agentctx_cli.commands.init",
    "agentctx_cli.commands.db",
    "agentctx_cli.commands.artifacts",
    "agentctx_cli.commands.serve",
    "agentctx_cli.commands.up",
    "agentctx_cli.commands.demo",
    "agentctx_cli.commands.inspect",
    "agentctx_cli.commands.context_cache",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + error
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="agentctx", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"agentctx: {exc}", file=sys.stderr)
        return 2
    except AgentCtxError as exc:
        print(f"agentctx: {exc.code.value}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
