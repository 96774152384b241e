"""``agentctx context-cache invalidate APP USER SESSION --model MODEL
--confirm-json JSON``: drops every provider cache of the session's cache
scope. The JSON repeats app, user, session, model and the current scope
fingerprint (``agentctx inspect context-lifecycle`` prints the command);
anything else is refused by the server and nothing changes."""

from __future__ import annotations

import argparse
import asyncio
import sys

from google.protobuf import json_format

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_cli.connect import add_session_args, message_json, with_client
from agentctx_client import InvalidationConfirmation, session_name
from agentctx_common.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = sub.add_parser("context-cache", help="provider prefix caches of a session's scope")
    actions = cache.add_subparsers(dest="action", required=True, parser_class=sub._parser_class)
    invalidate = actions.add_parser("invalidate", help="drop every cache of a session's scope (confirmed)")
    invalidate.add_argument("--confirm-json", required=True, metavar="JSON",
                            help='{"app","user","session","model","scope_fingerprint"} as JSON, or - to read stdin')
    add_session_args(invalidate, model_help="model of the scope")
    invalidate.set_defaults(func=run_invalidate)


def parse_confirmation(text: str) -> InvalidationConfirmation:
    """Strict (by the message's own JSON mapping): unknown fields and wrong
    types are refused here, before any call."""
    if text == "-":
        text = sys.stdin.read()
    try:
        return InvalidationConfirmation.from_proto(json_format.Parse(text, pb.InvalidationConfirmation()))
    except json_format.ParseError as exc:
        raise ConfigError(f"--confirm-json is not a valid confirmation: {str(exc).splitlines()[0]}") from None


def run_invalidate(args: argparse.Namespace) -> int:
    name, confirmation = session_name(args.app, args.user, args.session), parse_confirmation(args.confirm_json)
    done = asyncio.run(with_client(args, lambda client: client.invalidate_context_cache(
        name, model=args.model, confirmation=confirmation)))
    if args.json:
        print(message_json(done.proto))
    else:
        print(f"Invalidated cache scope {done.scope_fingerprint}: {done.entries_removed} cache(s) deleted, "
              f"{done.inflight_cancelled} creation(s) cancelled.")
    return 0
