"""``agentctx serve context|cache``: run one service in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import pathlib


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="run one service until SIGTERM/SIGINT")
    serve.add_argument("service", choices=["context", "cache"])
    serve.add_argument("--config", type=pathlib.Path, help="TOML config file ([context] / [cache] tables)")
    serve.add_argument("--host", help="listen address (overrides config)")
    serve.add_argument("--port", type=int, help="listen port (overrides config)")
    serve.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    serve = _serve_context if args.service == "context" else _serve_cache
    asyncio.run(serve(args.config, overrides))
    return 0


async def _serve_context(config: pathlib.Path | None, overrides: dict[str, object]) -> None:
    from context_service.server import serve
    from context_service.settings import ContextSettings

    await serve(ContextSettings.load(config, **overrides))


async def _serve_cache(config: pathlib.Path | None, overrides: dict[str, object]) -> None:
    from cache_service.server import serve
    from cache_service.settings import CacheSettings

    await serve(CacheSettings.load(config, **overrides))
