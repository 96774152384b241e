"""The REMOTE compactor: a user's agentctx.compactor.v1.CompactorService.

Bounds on both sides of the wire: the request must fit max_input_bytes; the
channel refuses a response above max_summary_bytes (plus a small allowance
for usage), and the response is parsed here so that bytes that are not a
CompactResponse are SUMMARY_MALFORMED rather than a transport error. Only
targets on the operator's allowlist are called (a session's policy must
not be able to point the service at arbitrary hosts).
"""

from __future__ import annotations

import asyncio
import logging

import grpc
from google.protobuf.message import DecodeError

from agentctx.compactor.v1 import compactor_service_pb2
from agentctx_common.errors import FailedPrecondition
from agentctx_common.reasons import Reason
from agentctx_common.telemetry import outgoing_metadata
from agentctx_common.tls import channel_credentials
from context_service.compaction.compactors import CompactionCall
from context_service.domain.compaction_rules import errors
from context_service.domain.compaction_rules.policy import ResolvedPolicy
from context_service.domain.compaction_rules.summary import SummaryRequest, SummaryResult
from context_service.mapping.convert import event_to_proto, usage_from_proto
from context_service.settings import ContextSettings

log = logging.getLogger("agentctx.compaction.remote")

_METHOD = "/agentctx.compactor.v1.CompactorService/Compact"
# Room for the usage message and framing around the summary bytes.
_RESPONSE_OVERHEAD = 4096


def to_proto(request: SummaryRequest, call: CompactionCall) -> compactor_service_pb2.CompactRequest:
    out = compactor_service_pb2.CompactRequest(
        session=call.key.name,
        previous_summary=request.previous_summary,
        instructions=request.instructions,
        max_summary_bytes=request.max_summary_bytes,
    )
    for e in request.events:
        event_to_proto(e, call.key, out.events.add())
    return out


class RemoteCompactor:
    name = "remote"

    def __init__(self, settings: ContextSettings) -> None:
        self._settings = settings
        self._channels: dict[tuple[str, int], grpc.aio.Channel] = {}
        self._lock = asyncio.Lock()

    def allowed(self, target: str) -> bool:
        allow = self._settings.remote_compactor_targets
        return "*" in allow or target in allow

    async def _channel(self, target: str, receive_limit: int) -> grpc.aio.Channel:
        key = (target, receive_limit)
        async with self._lock:
            channel = self._channels.get(key)
            if channel is None:
                s = self._settings
                options = [
                    ("grpc.max_receive_message_length", receive_limit),
                    ("grpc.max_send_message_length", s.max_message_bytes),
                ]
                if s.remote_compactor_ca is not None:
                    creds = channel_credentials(s.remote_compactor_ca, s.remote_compactor_cert, s.remote_compactor_key)
                    channel = grpc.aio.secure_channel(target, creds, options=options)
                else:
                    channel = grpc.aio.insecure_channel(target, options=options)
                self._channels[key] = channel
        return channel

    async def summarize(self, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy) -> SummaryResult:
        target = policy.remote_target
        if not self.allowed(target):
            raise FailedPrecondition(
                "the remote compactor target is not on this server's allowlist (remote_compactor_targets)",
                reason=Reason.COMPACTOR_NOT_ALLOWED,
            )
        message = to_proto(request, call)
        size = message.ByteSize()
        if size > policy.max_input_bytes:
            raise errors.input_too_large(size, policy.max_input_bytes)
        channel = await self._channel(target, request.max_summary_bytes + _RESPONSE_OVERHEAD)
        # No deserializer: raw bytes come back, and parsing them is ours.
        rpc: grpc.aio.UnaryUnaryMultiCallable[compactor_service_pb2.CompactRequest, bytes] = channel.unary_unary(
            _METHOD, request_serializer=compactor_service_pb2.CompactRequest.SerializeToString
        )
        timeout = max(0.001, min(policy.timeout_s, call.remaining()))
        try:
            raw = await rpc(message, timeout=timeout, metadata=outgoing_metadata())
        except grpc.aio.AioRpcError as err:
            raise _error(err, request.max_summary_bytes, timeout) from None
        response = compactor_service_pb2.CompactResponse()
        try:
            response.ParseFromString(raw)
        except DecodeError:
            raise errors.summary_malformed(self.name, "not a CompactResponse") from None
        usage = usage_from_proto(response.usage) if response.HasField("usage") else None
        return SummaryResult(response.summary, usage)

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()


def _error(err: grpc.aio.AioRpcError, max_summary_bytes: int, timeout: float) -> Exception:
    code = err.code()
    log.warning("remote compactor failed", extra={"code": code.name if code else "UNKNOWN"})
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return errors.timeout("remote", timeout)
    if code is grpc.StatusCode.UNAVAILABLE:
        return errors.unavailable("remote")
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (err.details() or ""):
        return errors.summary_too_large("remote", None, max_summary_bytes)
    return errors.failed("remote", code.name if code else "UNKNOWN")
