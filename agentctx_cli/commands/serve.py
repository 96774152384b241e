"""``agentctx serve context|cache``: run one service in the foreground,
as one process or as ``--workers N`` processes on one port
(``agentctx_cli.supervisor``)."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys
from typing import Any

from agentctx_common.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="run one service until SIGTERM/SIGINT")
    serve.add_argument("service", choices=["context", "cache"])
    serve.add_argument("--config", type=pathlib.Path, help="TOML config file ([context] / [cache] tables)")
    serve.add_argument("--host", help="listen address (overrides config)")
    serve.add_argument("--port", type=int, help="listen port (overrides config)")
    serve.add_argument(
        "--workers", type=int, default=1,
        help="server processes sharing the port (SO_REUSEPORT), one core each (default 1); "
        "the cache service needs redis_url for more than one",
    )
    # Set by the supervisor on its workers: bind the port it reserved.
    serve.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    serve.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.service == "context" and args.config is not None and not args.reuse_port:
        from agentctx_cli.pair import cache_secrets_in

        if secrets := cache_secrets_in(args.config):
            print(f"agentctx: warning: {args.config} also sets [cache] {', '.join(secrets)}: the context service "
                  "only reads [context], but should not be given a file holding the cache tier's secrets; give each "
                  "service a file of its own", file=sys.stderr)
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    if args.workers > 1:
        return _supervise(args, overrides)
    if args.reuse_port:
        from agentctx_common.server import share_port

        share_port()
    serve = _serve_context if args.service == "context" else _serve_cache
    asyncio.run(serve(args.config, overrides))
    return 0


def _supervise(args: argparse.Namespace, overrides: dict[str, object]) -> int:
    from agentctx_cli.supervisor import supervise
    from agentctx_common.logs import configure_logging

    settings = _settings(args.service, args.config, overrides)  # refuses a bad config before any worker starts
    configure_logging(settings.log_level, settings.log_format)
    if args.service == "cache" and not getattr(settings, "redis_url", None):
        raise ConfigError(
            "--workers > 1 for the cache service needs redis_url: without Redis each process has its own registry"
        )
    worker = ["serve", args.service, "--host", settings.host]
    if args.config is not None:
        worker += ["--config", str(args.config)]
    return supervise(worker, args.workers, settings.host, settings.port)


def _settings(service: str, config: pathlib.Path | None, overrides: dict[str, object]) -> Any:
    if service == "context":
        from context_service.settings import ContextSettings

        return ContextSettings.load(config, **overrides)
    from cache_service.settings import CacheSettings

    return CacheSettings.load(config, **overrides)


async def _serve_context(config: pathlib.Path | None, overrides: dict[str, object]) -> None:
    from context_service.server import serve
    from context_service.settings import ContextSettings

    await serve(ContextSettings.load(config, **overrides))


async def _serve_cache(config: pathlib.Path | None, overrides: dict[str, object]) -> None:
    from cache_service.server import serve
    from cache_service.settings import CacheSettings

    await serve(CacheSettings.load(config, **overrides))
