"""SelectionRpcs: BuildContext, the bounded, secret-pruned request for one
model call. Read-only.

The servicer authorizes, reads the session head, maps the request
(``mapping.build_context.RequestMapper``) and hands it to the context
builder (``building.builder``); the built context goes back as
pre-serialized bytes assembled from cached wire encodings
(``mapping.build_context.response_wire``; ``register_raw_build_context``
installs the pass-through serializer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.errors import ResourceExhausted
from agentctx_common.reasons import Reason
from context_service.domain.names import parse_session_name
from context_service.mapping.build_context import response_wire

if TYPE_CHECKING:
    from context_service.app import ContextApp

SERVICE = pb.DESCRIPTOR.services_by_name["ContextService"].full_name


class SelectionRpcs:
    app: ContextApp

    async def BuildContext(self, request: pb.BuildContextRequest, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        app = self.app
        key = parse_session_name(request.session, app.limits, "session")
        await app.authorize(context, key.app)
        builder = app.builder
        session = await builder.head(key)
        built = await builder.build(session, app.mapper.build_request(request), remaining=context.time_remaining())
        wire = response_wire(built)
        if len(wire) > app.settings.max_message_bytes:
            # Said with figures here rather than as a bare transport error.
            raise ResourceExhausted(
                "the built context is larger than the largest response this server sends; "
                "set max_bytes or max_request_bytes",
                reason=Reason.RESPONSE_TOO_LARGE,
                metadata={"response_bytes": len(wire), "max_message_bytes": app.settings.max_message_bytes},
            )
        return wire


def register_raw_build_context(server: grpc.aio.Server, servicer: SelectionRpcs) -> None:
    """Serves BuildContext with a serializer that passes the handler's
    pre-serialized bytes through. Call after the generated registration:
    registered method handlers replace it by method name."""
    handler = grpc.unary_unary_rpc_method_handler(
        servicer.BuildContext,
        request_deserializer=pb.BuildContextRequest.FromString,
        response_serializer=_pass_through,
    )
    server.add_registered_method_handlers(SERVICE, {"BuildContext": handler})


def _pass_through(response: bytes | pb.BuildContextResponse) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()
