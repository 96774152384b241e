"""Bounds under load, on the real pair: with the context service at its
bound of RPCs in flight, concurrent large appends get RESOURCE_EXHAUSTED
(SERVER_OVERLOADED) with RetryInfo at once and nothing is stored; health
still answers; and once load falls, retrying after the given delay stores
every append exactly once."""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.type.v1 import event_pb2
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc
from tests.support.pair import pair_maker
from tests.turns.builders import create_session, user_text

T = TypeVar("T")
EVENT_BYTES = 256 * 1024  # eight of them still fit one ListEvents reply (4 MiB)
APPENDS = 8


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` again after each SERVER_OVERLOADED, waiting the delay given."""
    for _ in range(1000):
        try:
            return await call()
        except grpc.aio.AioRpcError as exc:
            err = error_from_rpc(exc)
            assert err.reason is Reason.SERVER_OVERLOADED and err.retry_after is not None
            await asyncio.sleep(err.retry_after)
    pytest.fail("the server never admitted the call again")


def _large_event() -> event_pb2.Event:
    event = event_pb2.Event(id=uuid.uuid4().hex, author="user")
    event.content.role = "user"
    event.content.parts.add().text = "x" * EVENT_BYTES
    return event


async def test_large_appends_over_the_rpc_bound_get_retry_info_and_are_stored_on_retry(
    certs_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    async with pair_maker(certs_dir, tmp_path) as make:
        pair = await make(context={"max_inflight_rpcs": 2, "overload_retry_after_s": 0.05})
        stub = pair.stub
        target = await create_session(stub, user="appender", cache=False)
        # Two turns held in a model call that does not return fill the bound.
        pair.provider.latency_s = 3600
        turns = []
        for i in range(2):
            session = await create_session(stub, user=f"agent-{i}", cache=False)
            request = pb.GenerateRequest(session=session.name, input=[user_text(f"in-{i}", "Hello?")])
            turns.append(asyncio.ensure_future(stub.Generate(request, timeout=600)))
        for _ in range(3000):
            if pair.provider.counts["generate"] >= 2:
                break
            await asyncio.sleep(0.01)
        assert pair.provider.counts["generate"] == 2

        requests = [pb.AppendEventRequest(parent=target.name, event=_large_event()) for _ in range(APPENDS)]
        results = await asyncio.gather(
            *(stub.AppendEvent(r, timeout=60) for r in requests), return_exceptions=True
        )
        for result in results:
            assert isinstance(result, grpc.aio.AioRpcError), "an append was served beyond the bound"
            err = error_from_rpc(result)
            assert result.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert err.reason is Reason.SERVER_OVERLOADED and err.metadata["bound"] == "rpcs"
            assert 0.025 <= err.retry_after <= 0.075  # 0.05 jittered by +-50%
        health = health_pb2_grpc.HealthStub(pair.channel)
        assert (await health.Check(health_pb2.HealthCheckRequest(), timeout=30)).status == \
            health_pb2.HealthCheckResponse.SERVING
        for turn in turns:
            turn.cancel()
        pair.provider.latency_s = 0.0
        listed = await _retrying(lambda: stub.ListEvents(pb.ListEventsRequest(parent=target.name), timeout=30))
        assert list(listed.events) == []  # refused means nothing was done
        for request in requests:
            await _retrying(lambda request=request: stub.AppendEvent(request, timeout=60))
        listed = await stub.ListEvents(pb.ListEventsRequest(parent=target.name), timeout=30)
        assert [e.id for e in listed.events] == [r.event.id for r in requests]
