"""``agentctx init [--home DIR]``: the home ``agentctx up`` runs from (dev
certificates, ``agentctx.toml`` for both services, data/ and logs/),
written without starting anything, for ``agentctx serve --config``. An
existing ``agentctx.toml`` is kept as it is."""

from __future__ import annotations

import argparse
import pathlib

from agentctx_cli.pair import prepare_home, resolve_ports


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser("init", help="write dev certificates and a config for both services, start nothing")
    init.add_argument("--home", type=pathlib.Path, default=pathlib.Path(".agentctx"),
                      help="where to write them (default .agentctx, git-ignored; `make clean` removes it)")
    init.add_argument("--context-port", type=int, default=None, help="default 50051 (a new file only)")
    init.add_argument("--cache-port", type=int, default=None, help="default 50052 (a new file only)")
    init.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    home = args.home.resolve()
    config = prepare_home(home, *resolve_ports(home, args.context_port, args.cache_port))
    if config.written:
        print(f"wrote {config.path} (both services) and the dev certificates in {home / 'certs'}")
    else:
        # An existing file is the user's: kept as it is, edits included.
        print(f"kept {config.path} as it is (delete it for a fresh one); dev certificates in {home / 'certs'}")
    return 0
