"""Admission control: over the bound of RPCs or request bytes in flight a
call gets RESOURCE_EXHAUSTED (SERVER_OVERLOADED) with RetryInfo at once and
is never read; a call whose deadline leaves no time is not started; health
is never shed; and the server serves again once load falls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import given
from hypothesis import strategies as st

from agentctx_common import memory
from agentctx_common.errors import AgentCtxError
from agentctx_common.load_shedding import Admission, AdmissionLimits, jittered
from agentctx_common.memory import Trimmer
from agentctx_common.reasons import Reason
from agentctx_common.server import GrpcServer, new_server
from agentctx_common.settings import ServerSettings
from agentctx_common.status import error_from_rpc


class Held:
    """A service whose calls wait until released, and count what they read."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.running = 0
        self.started = 0
        self.decoded = 0
        self.changed = asyncio.Condition()

    async def _hold(self) -> None:
        async with self.changed:
            self.running += 1
            self.started += 1
            self.changed.notify_all()
        try:
            await self.release.wait()
        finally:
            async with self.changed:
                self.running -= 1
                self.changed.notify_all()

    async def hold(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await self._hold()
        return b"done:%d" % len(request)

    async def hold_stream(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        await self._hold()
        yield b"done"

    def decode(self, raw: bytes) -> bytes:
        self.decoded += 1
        return raw

    async def until_running(self, n: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.running >= n)

    def register(self, server: grpc.aio.Server) -> None:
        handlers = {
            "Hold": grpc.unary_unary_rpc_method_handler(self.hold, request_deserializer=self.decode),
            "HoldStream": grpc.unary_stream_rpc_method_handler(self.hold_stream),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Held", handlers),))


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[tuple[Held, grpc.aio.Channel]]]]:
    servers: list[GrpcServer] = []
    channels: list[grpc.aio.Channel] = []

    async def start(**limits: Any) -> tuple[Held, grpc.aio.Channel]:
        held = Held()
        settings = ServerSettings(dev_plaintext=True, host="127.0.0.1", port=0, **limits)
        server = new_server(settings, service_names=["test.Held"], register=held.register, telemetry_name="test")
        await server.start()
        servers.append(server)
        channels.append(grpc.aio.insecure_channel(server.address))
        return held, channels[-1]

    yield start
    for held_channel in channels:
        await held_channel.close()
    for server in servers:
        await server.stop(0)


def _hold(channel: grpc.aio.Channel, payload: bytes = b"") -> Any:
    return channel.unary_unary("/test.Held/Hold")(payload, timeout=30)


async def _refused(call: Any) -> AgentCtxError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if hasattr(call, "__aiter__"):
            async for _ in call:
                pass
        else:
            await call
    return error_from_rpc(caught.value)


def _overloaded(err: AgentCtxError, bound: str) -> None:
    assert err.code.value == "RESOURCE_EXHAUSTED"
    assert err.reason is Reason.SERVER_OVERLOADED
    assert err.metadata["bound"] == bound
    assert err.retry_after is not None and err.retry_after > 0


async def test_calls_over_the_rpc_bound_are_refused_unread_with_retry_info(serve) -> None:
    held, channel = await serve(max_inflight_rpcs=2, overload_retry_after_s=0.25)
    first, second = _hold(channel, b"a"), _hold(channel, b"b")
    await held.until_running(2)
    assert held.decoded == 2

    _overloaded(await _refused(_hold(channel, b"c" * 100_000)), "rpcs")
    _overloaded(await _refused(channel.unary_stream("/test.Held/HoldStream")(b"", timeout=30)), "rpcs")
    # A refused call was never read, and its handler never ran.
    assert held.decoded == 2 and held.started == 2
    err = await _refused(_hold(channel))
    assert 0.125 <= err.retry_after <= 0.375  # 0.25 jittered by +-50%
    assert err.metadata["limit"] == "2"

    # Probes are never shed, even at the bound.
    health = health_pb2_grpc.HealthStub(channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=30)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING

    held.release.set()
    assert await first == b"done:1" and await second == b"done:1"
    assert await _hold(channel, b"xyz") == b"done:3"


async def test_request_bytes_over_the_bound_are_refused_and_a_lone_large_request_is_served(serve) -> None:
    held, channel = await serve(max_inflight_request_bytes=1024 * 1024)
    big = _hold(channel, b"x" * 600_000)
    await held.until_running(1)
    _overloaded(await _refused(_hold(channel, b"y" * 600_000)), "request_bytes")
    small = _hold(channel, b"z" * 100_000)  # fits beside the big one
    await held.until_running(2)
    held.release.set()
    assert await big == b"done:600000" and await small == b"done:100000"
    # Alone, a request larger than the whole bound is still served.
    assert await _hold(channel, b"w" * 1_500_000) == b"done:1500000"


async def test_requests_far_larger_than_the_stream_window_arrive_whole(serve) -> None:
    held, channel = await serve(http2_stream_window_bytes=16 * 1024, max_inflight_rpcs=8)
    calls = [_hold(channel, bytes([65 + i]) * 300_000) for i in range(5)]
    await held.until_running(5)
    held.release.set()
    assert [await c for c in calls] == [b"done:300000"] * 5


async def test_a_stream_bound_per_connection_is_an_option(serve) -> None:
    held, channel = await serve(max_streams_per_connection=4)
    call = _hold(channel, b"a")
    await held.until_running(1)
    held.release.set()
    assert await call == b"done:1"


async def test_a_call_whose_deadline_leaves_no_time_is_not_started(serve) -> None:
    held, channel = await serve(min_deadline_remaining_s=3600)
    err = await _refused(_hold(channel, b"a"))
    assert err.code.value == "DEADLINE_EXCEEDED"
    assert err.reason is Reason.DEADLINE_TOO_SHORT
    assert held.started == 0
    # Without a deadline there is nothing to miss.
    held.release.set()
    assert await channel.unary_unary("/test.Held/Hold")(b"ab") == b"done:2"


async def test_the_in_flight_counts_return_to_zero_when_callers_cancel(serve) -> None:
    held, channel = await serve(max_inflight_rpcs=1)
    call = _hold(channel, b"a")
    await held.until_running(1)
    call.cancel()
    async with held.changed:
        await held.changed.wait_for(lambda: held.running == 0)
    held.release.set()
    # The slot the cancelled call held is free again (no leak).
    for _ in range(200):
        try:
            assert await _hold(channel, b"bc") == b"done:2"
            break
        except grpc.aio.AioRpcError as exc:
            assert error_from_rpc(exc).reason is Reason.SERVER_OVERLOADED
            await asyncio.sleep(0.05)
    else:
        pytest.fail("the cancelled call's slot was never released")


def test_admission_counts() -> None:
    admission = Admission(AdmissionLimits(max_rpcs=2, max_request_bytes=100, retry_after_s=1.0, min_deadline_s=0.5))
    assert admission.enter() and admission.enter() and not admission.enter()
    admission.leave()
    assert admission.enter()
    assert admission.take_bytes(150)  # alone: admitted even over the bound
    assert not admission.take_bytes(1)
    admission.give_bytes(150)
    assert admission.take_bytes(60) and admission.take_bytes(40) and not admission.take_bytes(1)
    assert admission.shed == {"rpcs": 1, "request_bytes": 2, "deadline": 0}
    assert admission.too_late(None) is None and admission.too_late(0.5) is None
    late = admission.too_late(0.1)
    assert late is not None and late.reason is Reason.DEADLINE_TOO_SHORT and late.metadata == {"remaining_ms": "100"}


@given(st.floats(min_value=0.001, max_value=3600), st.floats(min_value=0, max_value=1))
def test_a_jittered_retry_delay_stays_within_its_spread(delay: float, spread: float) -> None:
    # Callers shed together must not all come back together: the delay varies, within its bounds.
    assert delay * (1 - spread) * (1 - 1e-9) <= jittered(delay, spread) <= delay * (1 + spread) * (1 + 1e-9)


class _FakeLibc:
    """Counts malloc_trim calls (the trim rule, apart from glibc)."""

    def __init__(self) -> None:
        self.trims = 0

    def malloc_trim(self, pad: int) -> int:
        self.trims += 1
        return 1


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> _FakeLibc:
    fake = _FakeLibc()
    monkeypatch.setattr(memory, "_LIBC", fake)
    return fake


async def _settled(trimmer: Trimmer) -> None:
    if trimmer._running is not None:
        await trimmer._running


def _trimming_admission() -> Admission:
    """Admission with the default trim setting (64 MiB)."""
    return Admission(
        AdmissionLimits(
            max_rpcs=2, max_request_bytes=1 << 30, retry_after_s=1.0, min_deadline_s=0.5, trim_after_bytes=64 << 20
        )
    )


async def test_small_requests_do_not_trim_when_the_server_falls_idle(libc: _FakeLibc) -> None:
    # One call at a time falls idle after every call: a trim each time cost
    # a sixth of a lease hit's CPU (bench.cpu).
    admission = _trimming_admission()
    for _ in range(100):
        assert admission.enter() and admission.take_bytes(4096)
        admission.give_bytes(4096)
        admission.leave()
        await _settled(admission.trimmer)
    assert libc.trims == 0 and admission.trimmer._running is None


async def test_a_large_release_is_trimmed_when_the_server_falls_idle(libc: _FakeLibc) -> None:
    admission = _trimming_admission()
    assert admission.enter() and admission.enter()
    assert admission.take_bytes(8 << 20)
    admission.give_bytes(8 << 20)
    admission.leave()  # another call still runs: not idle yet
    await _settled(admission.trimmer)
    assert libc.trims == 0
    admission.leave()
    await _settled(admission.trimmer)
    assert libc.trims == 1 and admission.trimmer.released == 0


async def test_small_releases_add_up_to_a_trim_at_idle(libc: _FakeLibc) -> None:
    trimmer = Trimmer(64 << 20, idle_bytes=1 << 20, idle_delay_s=3600)
    for _ in range(255):
        trimmer.released_bytes(4096)
        trimmer.idle()
    await _settled(trimmer)
    assert libc.trims == 0
    trimmer.released_bytes(4096)  # 1 MiB in all
    trimmer.idle()
    await _settled(trimmer)
    assert libc.trims == 1


async def test_small_releases_are_trimmed_once_after_the_idle_delay(libc: _FakeLibc) -> None:
    trimmer = Trimmer(64 << 20, idle_delay_s=0.2)
    for _ in range(20):
        trimmer.released_bytes(4096)
        trimmer.idle()
        await asyncio.sleep(0)
    assert libc.trims == 0 and trimmer._running is None
    for _ in range(100):
        await asyncio.sleep(0.05)
        await _settled(trimmer)
        if libc.trims:
            break
    assert libc.trims == 1 and trimmer.released == 0
    trimmer.idle()  # nothing released since
    await asyncio.sleep(0.4)
    assert libc.trims == 1 and trimmer._later is None


async def test_the_request_bytes_bound_trims_while_calls_run(libc: _FakeLibc) -> None:
    trimmer = Trimmer(16 << 20)
    trimmer.released_bytes(8 << 20)
    await _settled(trimmer)
    assert libc.trims == 0
    trimmer.released_bytes(8 << 20)
    await _settled(trimmer)
    assert libc.trims == 1


async def test_no_trim_at_all_when_the_setting_is_zero(libc: _FakeLibc) -> None:
    trimmer = Trimmer(0, idle_delay_s=0.01)
    trimmer.released_bytes(64 << 20)
    trimmer.idle()
    assert trimmer._running is None and trimmer._later is None
    await asyncio.sleep(0.05)
    assert libc.trims == 0
