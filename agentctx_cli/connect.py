"""How client commands (inspect, context-cache, demo) reach the context
service: flags whose defaults match ``agentctx up`` (127.0.0.1:50051, the
dev certificates under .agentctx/certs, the sample agent's client
certificate), a TLS channel, and RPC failures as one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
from typing import Any

import grpc
from google.protobuf import json_format

from agentctx_common.errors import AgentCtxError, Unavailable
from agentctx_common.status import error_from_rpc, status_from_rpc
from agentctx_common.tls import channel_credentials

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_CERTS = pathlib.Path(".agentctx/certs")


def add_session_args(parser: argparse.ArgumentParser, *, model_help: str) -> None:
    """APP USER SESSION, --model and --json: how diagnostics name their target."""
    parser.add_argument("app")
    parser.add_argument("user")
    parser.add_argument("session")
    parser.add_argument("--model", default="", help=f"{model_help} (default: the session's model)")
    parser.add_argument("--json", action="store_true", help="print the response message as JSON")
    add_connection_flags(parser)


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default=os.environ.get("AGENTCTX_TARGET", DEFAULT_TARGET),
                        help=f"context service host:port (default {DEFAULT_TARGET}, or $AGENTCTX_TARGET)")
    parser.add_argument("--certs", type=pathlib.Path, default=DEFAULT_CERTS,
                        help="directory with ca.pem and the client certificate (default .agentctx/certs)")
    parser.add_argument("--client", default="agent-client",
                        help="client certificate stem in --certs: STEM.pem and STEM.key (default agent-client)")
    parser.add_argument("--server-name", default="localhost", help="name to verify on the server certificate")
    parser.add_argument("--timeout", type=float, default=15.0, help="deadline of each call in seconds (default 15)")


def open_channel(args: argparse.Namespace) -> grpc.aio.Channel:
    """A TLS channel with the client certificate (ConfigError naming a
    missing file)."""
    certs: pathlib.Path = args.certs
    creds = channel_credentials(certs / "ca.pem", certs / f"{args.client}.pem", certs / f"{args.client}.key")
    return grpc.aio.secure_channel(args.target, creds, options=[("grpc.ssl_target_name_override", args.server_name)])


async def call_context_service(args: argparse.Namespace, method: str, request: Any) -> Any:
    """One unary ContextService call over a fresh channel; failures become
    one-line AgentCtxErrors."""
    from agentctx.context.v1 import context_service_pb2_grpc

    async with open_channel(args) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        try:
            return await getattr(stub, method)(request, timeout=args.timeout)
        except grpc.aio.AioRpcError as err:
            raise rpc_failure(err, args.target) from None


def rpc_failure(err: grpc.aio.AioRpcError, target: str) -> AgentCtxError:
    """The server's error with its reason in the message, or a plain
    "cannot reach" for a transport failure."""
    if err.code() is grpc.StatusCode.UNAVAILABLE and status_from_rpc(err) is None:
        return Unavailable(f"cannot reach the context service at {target} (is `agentctx up` running?)")
    failure = error_from_rpc(err)
    failure.message = f"{failure.message} [{failure.reason}]"
    failure.args = (failure.message,)
    return failure


def message_json(message: Any) -> str:
    """A response as JSON with proto field names and every field shown."""
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return json.dumps(data, indent=2, sort_keys=True)


def session_name(app: str, user: str, session: str) -> str:
    return f"apps/{app}/users/{user}/sessions/{session}"
