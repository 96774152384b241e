"""How client commands (inspect, context-cache, demo) reach the context
service: flags whose defaults match ``agentctx up`` (127.0.0.1:50051, the
dev certificates under .agentctx/certs, the sample agent's client
certificate), an agentctx_client ContextClient over mutual TLS, and its
errors as one-line command errors."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from google.protobuf import json_format

import agentctx_client
from agentctx_common.errors import AgentCtxError, Code, ConfigError, Unavailable, error_class
from agentctx_common.reasons import Reason
from agentctx_common.tls import channel_credentials, read_certificates, read_key_pair

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_CERTS = pathlib.Path(".agentctx/certs")
T = TypeVar("T")


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


def client_tls(args: argparse.Namespace) -> agentctx_client.TlsConfig:
    """The client's TLS settings, every file checked first (a ConfigError
    naming a missing or wrong file, which gRPC would only report as a failed
    handshake)."""
    certs: pathlib.Path = args.certs
    ca, cert, key = certs / "ca.pem", certs / f"{args.client}.pem", certs / f"{args.client}.key"
    read_certificates(ca, "CA")
    read_key_pair(cert, key, "TLS certificate", "TLS key")
    return agentctx_client.TlsConfig(ca=ca, cert=cert, key=key, server_name=args.server_name)


def open_client(args: argparse.Namespace, *, timeout: float | None = None) -> agentctx_client.ContextClient:
    """A ContextClient for ``args.target`` with the client certificate; each
    call's deadline (retries included) is ``timeout``, else ``args.timeout``."""
    return agentctx_client.connect(args.target, tls=client_tls(args),
                                   timeout=timeout if timeout is not None else args.timeout)


async def with_client(args: argparse.Namespace, use: Callable[[agentctx_client.ContextClient], Awaitable[T]]) -> T:
    """``use(client)`` over a fresh client; failures become one-line
    AgentCtxErrors."""
    async with open_client(args) as client:
        try:
            return await use(client)
        except agentctx_client.UnimplementedError as err:
            # "Method not found!" from a server that is not a context service:
            # say whose port it is when its health service tells.
            other = await asyncio.to_thread(_serves_other_service, args)
            if other is not None:
                raise ConfigError(f"{args.target} is the {other}'s port, not the context service's: give --target "
                                  f"the context service's host:port (`agentctx up` starts it on {DEFAULT_TARGET})"
                                  ) from None
            raise rpc_failure(err, args.target) from None
        except agentctx_client.AgentCtxError as err:
            raise rpc_failure(err, args.target) from None


# Services a --target could name by mistake, by their health service names.
OTHER_SERVICES = {"agentctx.cache.v1.CacheService": "cache service",
                  "agentctx.compactor.v1.CompactorService": "compactor service"}


def _serves_other_service(args: argparse.Namespace) -> str | None:
    """The name of the agentctx service other than the context service that
    ``args.target`` serves (its health check answers for it; health answers
    any certificate of the CA), or None."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    certs: pathlib.Path = args.certs
    creds = channel_credentials(certs / "ca.pem", certs / f"{args.client}.pem", certs / f"{args.client}.key")
    options = [("grpc.ssl_target_name_override", args.server_name)]
    with grpc.secure_channel(args.target, creds, options=options) as channel:
        for service, name in OTHER_SERVICES.items():
            try:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
                return name
            except grpc.RpcError:
                continue
    return None


def rpc_failure(err: agentctx_client.AgentCtxError, target: str) -> AgentCtxError:
    """The server's error with its reason in the message, or a plain
    "cannot reach" for a transport failure (UNAVAILABLE without a status)."""
    if isinstance(err, agentctx_client.UnavailableError) and err.status is None:
        return Unavailable(f"cannot reach the context service at {target} (is `agentctx up` running?)")
    name = err.reason_name
    reason = Reason.__members__.get(name)  # None for a reason this build does not know: the code's generic one
    return error_class(Code(err.code.name))(f"{err.message} [{name}]", reason=reason, metadata=err.metadata,
                                            retry_after=err.retry_delay)


def message_json(message: Any) -> str:
    """A response as JSON with proto field names and every field shown."""
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return json.dumps(data, indent=2, sort_keys=True)
