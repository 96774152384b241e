"""Admission control: a bound on RPCs and on request bytes in flight, and
no work started for a caller whose deadline has passed.

Over a bound, a call ends at once with RESOURCE_EXHAUSTED, reason
SERVER_OVERLOADED and RetryInfo; nothing of it was done, so a retry is
safe. The RetryInfo delay is the configured one jittered by +-50%: callers
shed in the same burst that all waited the same delay came back together,
as a new burst that was shed again, which made the tail of a bounded server
worse than an unbounded one's (bench.overload). A call with less than ``min_deadline_s`` left ends with
DEADLINE_EXCEEDED, reason DEADLINE_TOO_SHORT. Health checks and reflection
are never counted or refused.

gRPC reads a unary request whole before a unary handler runs, so a bound
checked in such a handler would come after the memory was spent. This
interceptor therefore serves every unary-request method as a
request-streaming one: the RPC is counted before its message is read, a
refused call never reads it, and the message's encoded size, taken as it is
decoded, is held against the byte bound while the handler runs. A call is
also refused unread when the requests held and being read, at the typical
size of recent ones, leave no room for it.

What this cannot bound: gRPC buffers, per stream, up to its HTTP/2 window
(4 MiB or more while it sees no memory pressure) of a request the server has
not taken up yet, and a busy event loop takes calls up one at a time.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry import metrics

from agentctx_common.errors import DeadlineExceeded, InvalidArgument, ResourceExhausted
from agentctx_common.memory import Trimmer
from agentctx_common.reasons import Reason
from agentctx_common.status import WrappingInterceptor, abort, stream_items

log = logging.getLogger("agentctx.admission")

# Probes and schema discovery are never shed: an overloaded server must still
# say whether it is alive.
EXEMPT_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
_LOG_EVERY_S = 10.0


@dataclass(frozen=True)
class AdmissionLimits:
    max_rpcs: int
    max_request_bytes: int
    retry_after_s: float
    min_deadline_s: float
    trim_after_bytes: int = 0


class Admission:
    """The counters behind the bounds (no grpc: tested on its own).

    A request larger than the whole byte bound is admitted when no other
    request bytes are held, so a legal message is never refused forever;
    the bound is then exceeded by that one message.
    """

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self.rpcs = 0
        self.request_bytes = 0
        self.reading = 0
        # Encoded size of recent requests (a moving average).
        self.typical_bytes = 0
        self.shed: dict[str, int] = {"rpcs": 0, "request_bytes": 0, "deadline": 0}
        self.trimmer = Trimmer(limits.trim_after_bytes)

    def enter(self) -> bool:
        if self.rpcs >= self.limits.max_rpcs:
            self.shed["rpcs"] += 1
            return False
        self.rpcs += 1
        return True

    def leave(self) -> None:
        self.rpcs -= 1
        if not self.rpcs:
            self.trimmer.idle()

    def start_read(self) -> bool:
        """Whether a counted call may read its request: refused unread when
        the requests already held, those being read and this one, at the
        typical size of recent requests, would not fit (reading a request
        only to refuse it costs the memory the bound is there to save)."""
        expected = self.request_bytes + (self.reading + 1) * self.typical_bytes
        if (self.request_bytes or self.reading) and expected > self.limits.max_request_bytes:
            self.shed["request_bytes"] += 1
            return False
        self.reading += 1
        return True

    def end_read(self, n: int | None) -> None:
        """``n``: the size read (None when the read failed)."""
        self.reading -= 1
        if n is not None:
            self.typical_bytes = (self.typical_bytes * 3 + n) // 4

    def take_bytes(self, n: int) -> bool:
        if self.request_bytes and self.request_bytes + n > self.limits.max_request_bytes:
            self.shed["request_bytes"] += 1
            return False
        self.request_bytes += n
        return True

    def give_bytes(self, n: int) -> None:
        self.request_bytes -= n
        self.trimmer.released_bytes(n)

    def overloaded(self, bound: str) -> ResourceExhausted:
        limit = self.limits.max_rpcs if bound == "rpcs" else self.limits.max_request_bytes
        return ResourceExhausted(
            f"the server is at its bound of {bound.replace('_', ' ')} in flight; retry after the delay",
            reason=Reason.SERVER_OVERLOADED, metadata={"bound": bound, "limit": limit},
            retry_after=jittered(self.limits.retry_after_s),
        )

    def too_late(self, remaining: float | None) -> DeadlineExceeded | None:
        """The error for a call with ``remaining`` seconds left, if it is
        too late to start it."""
        if remaining is None or (remaining >= self.limits.min_deadline_s and remaining > 0):
            return None
        self.shed["deadline"] += 1
        return DeadlineExceeded(
            "the call's deadline leaves no time to serve it; nothing was done",
            reason=Reason.DEADLINE_TOO_SHORT, metadata={"remaining_ms": int(max(remaining, 0) * 1000)},
        )


def jittered(delay_s: float, spread: float = 0.5) -> float:
    """``delay_s`` times a uniform factor in [1 - spread, 1 + spread]."""
    return delay_s * random.uniform(1.0 - spread, 1.0 + spread)


class _Undecodable:
    """Stands for a request that did not decode (gRPC would have ended the
    call with a bare status; this lets the handler say INVALID_ARGUMENT)."""


_UNDECODABLE = _Undecodable()


def _sized(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], tuple[int, Any]]:
    def decode(raw: bytes) -> tuple[int, Any]:
        try:
            return len(raw), deserializer(raw) if deserializer else raw
        except Exception:  # noqa: BLE001 - any decode failure is the caller's bad input
            return len(raw), _UNDECODABLE

    return decode


class AdmissionInterceptor(WrappingInterceptor):
    """Applies an ``Admission`` to every method but health and reflection."""

    def __init__(self, limits: AdmissionLimits) -> None:
        super().__init__()
        self.admission = Admission(limits)
        meter = metrics.get_meter("agentctx.admission")
        self._shed_counter = meter.create_counter("rpc.server.shed", description="Calls refused at admission.")
        self._logged_at = 0.0
        self._logged: dict[str, int] = dict(self.admission.shed)

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        if method.startswith(EXEMPT_SERVICES) or handler.request_streaming:
            # No method of ours streams requests; such a handler is left as it is.
            return handler
        behavior = handler.unary_stream if handler.response_streaming else handler.unary_unary
        deserializer = _sized(handler.request_deserializer)
        if handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(
                self._streaming(method, behavior), deserializer, handler.response_serializer
            )
        return grpc.stream_unary_rpc_method_handler(
            self._unary(method, behavior), deserializer, handler.response_serializer
        )

    async def _refuse(self, context: grpc.aio.ServicerContext[Any, Any], method: str, err: Any) -> None:
        bound = err.metadata.get("bound", "deadline")
        self._shed_counter.add(1, {"rpc.method": method.rpartition("/")[2], "bound": bound})
        now = time.monotonic()
        if now - self._logged_at >= _LOG_EVERY_S:
            shed = self.admission.shed
            log.warning("shedding load", extra={
                "since_last": {k: v - self._logged.get(k, 0) for k, v in shed.items()},
                "rpcs_in_flight": self.admission.rpcs, "request_bytes_in_flight": self.admission.request_bytes,
            })
            self._logged_at, self._logged = now, dict(shed)
        await abort(context, err)

    async def _admit(self, method: str, context: grpc.aio.ServicerContext[Any, Any]) -> tuple[int, Any]:
        """Reads the request of a counted call and takes its bytes; aborts
        the call when it must not run."""
        admission = self.admission
        late = admission.too_late(context.time_remaining())
        if late is not None:
            await self._refuse(context, method, late)
        if not admission.start_read():
            await self._refuse(context, method, admission.overloaded("request_bytes"))
        message: Any = None
        try:
            message = await context.read()
        finally:
            admission.end_read(message[0] if isinstance(message, tuple) else None)
        if message is grpc.aio.EOF:
            await abort(context, InvalidArgument("the call carries no request message"))
        size, request = message
        if request is _UNDECODABLE:
            await abort(context, InvalidArgument("the request is not a valid message for this method"))
        if not admission.take_bytes(size):
            await self._refuse(context, method, admission.overloaded("request_bytes"))
        late = admission.too_late(context.time_remaining())
        if late is not None:
            admission.give_bytes(size)
            await self._refuse(context, method, late)
        return size, request

    def _unary(self, method: str, behavior: Any) -> Any:
        admission = self.admission

        async def unary(_requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if not admission.enter():
                await self._refuse(context, method, admission.overloaded("rpcs"))
            try:
                size, request = await self._admit(method, context)
                try:
                    return await behavior(request, context)
                finally:
                    admission.give_bytes(size)
            finally:
                admission.leave()

        return unary

    def _streaming(self, method: str, behavior: Any) -> Any:
        admission = self.admission

        async def streaming(_requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            if not admission.enter():
                await self._refuse(context, method, admission.overloaded("rpcs"))
            try:
                size, request = await self._admit(method, context)
                try:
                    async for item in stream_items(behavior, request, context):
                        yield item
                finally:
                    admission.give_bytes(size)
            finally:
                admission.leave()

        return streaming


def limits_from(settings: Any) -> AdmissionLimits:
    """The limits a ServerSettings configures."""
    return AdmissionLimits(
        max_rpcs=settings.max_inflight_rpcs,
        max_request_bytes=settings.max_inflight_request_bytes,
        retry_after_s=settings.overload_retry_after_s,
        min_deadline_s=settings.min_deadline_remaining_s,
        trim_after_bytes=settings.malloc_trim_after_bytes,
    )
