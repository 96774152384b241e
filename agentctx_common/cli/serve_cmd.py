"""``agentctx serve context|cache``: run one service in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import pathlib


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run one service until SIGTERM/SIGINT")
    serve.add_argument("service", choices=["context", "cache"])
    serve.add_argument("--config", type=pathlib.Path, help="TOML config file ([context] / [cache] tables)")
    serve.add_argument("--host", help="listen address (overrides config)")
    serve.add_argument("--port", type=int, help="listen port (overrides config)")
    serve.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if args.service == "context":
        from context_service.server import serve
        from context_service.settings import ContextSettings

        settings = ContextSettings.load(args.config, **overrides)
    else:
        from cache_service.server import serve  # type: ignore[assignment]
        from cache_service.settings import CacheSettings

        settings = CacheSettings.load(args.config, **overrides)  # type: ignore[assignment]
    asyncio.run(serve(settings))  # type: ignore[arg-type]
    return 0
