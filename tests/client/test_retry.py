"""The retry policy against a real server that fails N times, then
succeeds: the same event ids, invocation id and reply id on every attempt,
RetryInfo delays honoured, bounded by attempts and the overall deadline."""

from __future__ import annotations

import random

import grpc
import pytest

from agentctx_client import (
    Content,
    Event,
    InvalidArgumentError,
    ResourceExhaustedError,
    RetryPolicy,
    UnavailableError,
    connect,
)
from agentctx_client._errors import AgentCtxError
from agentctx_client._retry import Deadline, Retrier, backoff
from tests.client.servers import Failure

SESSION = "apps/a/users/u/sessions/s"
FAST = RetryPolicy(max_attempts=5, initial_backoff=0.01, max_backoff=0.02)


def unavailable(delay: float | None = 0.01) -> Failure:
    return Failure(grpc.StatusCode.UNAVAILABLE, reason="CACHE_SERVICE_UNAVAILABLE", retry_delay=delay)


def _ids(request) -> tuple:  # type: ignore[no-untyped-def]
    return (tuple(e.id for e in request.input), tuple(e.invocation_id for e in request.input),
            request.invocation_id, request.reply_event_id)


async def test_generate_is_retried_with_the_same_ids_until_it_succeeds(scripted) -> None:
    service, target = scripted
    service.fail("Generate", unavailable(), unavailable(), unavailable())
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        result = await client.generate(SESSION, ["What now?", Content.user("And then?")])
    sent = service.requests["Generate"]
    assert len(sent) == 4
    assert len({_ids(r) for r in sent}) == 1, "every attempt sends the same ids"
    event_ids, invocations, invocation, reply_id = _ids(sent[0])
    assert len(set(event_ids)) == 2 and all(event_ids)
    assert set(invocations) == {invocation} and invocation and reply_id
    assert result.reply.id == reply_id and result.text == "done"


async def test_ids_the_caller_gave_are_kept(scripted) -> None:
    service, target = scripted
    service.fail("Generate", unavailable())
    event = Event(content=Content.user("hi"), id="my-event-1", invocation_id="my-inv")
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        await client.generate(SESSION, event, invocation_id="my-inv", reply_event_id="my-reply")
    assert {_ids(r) for r in service.requests["Generate"]} == {(("my-event-1",), ("my-inv",), "my-inv", "my-reply")}


async def test_each_turn_gets_new_ids(scripted) -> None:
    service, target = scripted
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        await client.generate(SESSION, "one")
        await client.generate(SESSION, "one")
    first, second = (_ids(r) for r in service.requests["Generate"])
    assert first[0] != second[0] and first[2] != second[2] and first[3] != second[3]


async def test_a_prepared_turn_request_is_sent_unchanged(scripted) -> None:
    service, target = scripted
    service.fail("Generate", Failure(grpc.StatusCode.UNAVAILABLE, reason="SHUTTING_DOWN"))
    async with connect(target, insecure_loopback=True, retry=RetryPolicy(max_attempts=1)) as client:
        request = client.turn_request(SESSION, "hello")
        with pytest.raises(UnavailableError):
            await client.generate(request)
        await client.generate(request)  # what an agent does after the error reached it
    assert [_ids(r) for r in service.requests["Generate"]] == [_ids(request)] * 2


async def test_attempts_are_bounded_by_max_attempts(scripted) -> None:
    service, target = scripted
    service.fail("Generate", *[unavailable() for _ in range(10)])
    async with connect(target, insecure_loopback=True, retry=RetryPolicy(max_attempts=3, initial_backoff=0.01)) as client:
        with pytest.raises(UnavailableError) as caught:
            await client.generate(SESSION, "hi")
    assert len(service.requests["Generate"]) == 3
    assert caught.value.reason_name == "CACHE_SERVICE_UNAVAILABLE"


async def test_no_wait_longer_than_the_deadline_allows(scripted) -> None:
    service, target = scripted
    service.fail("Generate", unavailable(delay=60.0), unavailable())
    async with connect(target, insecure_loopback=True, retry=FAST, timeout=5.0) as client:
        with pytest.raises(UnavailableError) as caught:
            await client.generate(SESSION, "hi")
    assert len(service.requests["Generate"]) == 1, "a 60 s RetryInfo delay does not fit a 5 s deadline"
    assert caught.value.retry_delay == 60.0


async def test_resource_exhausted_is_retried_only_with_retry_info(scripted) -> None:
    service, target = scripted
    limited = Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, reason="RATE_LIMITED", retry_delay=0.01)
    budget = Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, reason="CONTEXT_BUDGET_EXCEEDED")
    service.fail("Generate", limited, limited, budget)
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        with pytest.raises(ResourceExhaustedError) as caught:
            await client.generate(SESSION, "hi")
    assert caught.value.reason_name == "CONTEXT_BUDGET_EXCEEDED"
    assert len(service.requests["Generate"]) == 3


async def test_other_failures_are_not_retried(scripted) -> None:
    service, target = scripted
    service.fail("Generate", Failure(grpc.StatusCode.INVALID_ARGUMENT, reason="INVALID_GENERATE_REQUEST"))
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        with pytest.raises(InvalidArgumentError):
            await client.generate(SESSION, "hi")
    assert len(service.requests["Generate"]) == 1


async def test_create_session_is_not_retried(scripted) -> None:
    service, target = scripted
    service.fail("CreateSession", unavailable())
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        with pytest.raises(UnavailableError):
            await client.create_session("a", "u")
    assert len(service.requests["CreateSession"]) == 1


async def test_append_is_retried_with_the_same_event_id(scripted) -> None:
    service, target = scripted
    service.fail("AppendEvent", unavailable(), unavailable())
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        result = await client.append_event(SESSION, "remember this")
    ids = [r.event.id for r in service.requests["AppendEvent"]]
    assert len(ids) == 3 and len(set(ids)) == 1 and result.event.id == ids[0]


async def test_stream_is_retried_before_its_first_chunk_with_the_same_ids(scripted) -> None:
    service, target = scripted
    service.fail("StreamGenerate", unavailable(), unavailable())
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        stream = client.stream_generate(SESSION, "stream it")
        chunks = [chunk.text async for chunk in stream]
    assert chunks == ["do"]
    assert stream.result is not None and stream.result.reply.id == stream.request.reply_event_id
    sent = [r.turn for r in service.requests["StreamGenerate"]]
    assert len(sent) == 3 and {_ids(r) for r in sent} == {_ids(stream.request)}


async def test_stream_failing_after_a_chunk_is_raised_not_retried(scripted) -> None:
    service, target = scripted
    service.stream_fail_after_chunk = unavailable()
    async with connect(target, insecure_loopback=True, retry=FAST) as client:
        stream = client.stream_generate(SESSION, "stream it")
        seen = []
        with pytest.raises(UnavailableError):
            async for chunk in stream:
                seen.append(chunk.text)
    assert seen == ["do"] and stream.result is None
    assert len(service.requests["StreamGenerate"]) == 1


async def test_waits_are_the_retry_info_delays(scripted) -> None:
    service, target = scripted
    service.fail("Generate", unavailable(delay=0.03), unavailable(delay=0.01), unavailable(delay=None))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(max_attempts=5, initial_backoff=0.2, max_backoff=1.0, multiplier=2.0, jitter=0.5)
    async with connect(target, insecure_loopback=True) as client:
        retrier = Retrier(policy, rng=random.Random(7), sleep=sleep)
        request = client.turn_request(SESSION, "hi")

        async def attempt(left: float | None):  # type: ignore[no-untyped-def]
            try:
                return await client.stub.Generate(request, timeout=left)
            except grpc.aio.AioRpcError as err:
                from agentctx_client import error_from_rpc

                raise error_from_rpc(err) from None

        await retrier.run(attempt, Deadline(30.0))
    assert waits[:2] == [0.03, 0.01]
    # The third failure had no RetryInfo: backoff 0.2 * 2**2 = 0.8, jittered down by at most half.
    assert len(waits) == 3 and 0.4 <= waits[2] <= 0.8


@pytest.mark.parametrize("failures", [1, 2, 3, 4, 5, 6])
def test_backoff_grows_is_capped_and_jittered(failures: int) -> None:
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=1.0, multiplier=2.0, jitter=0.25)
    err = AgentCtxError("x")
    base = min(1.0, 0.1 * 2 ** (failures - 1))
    for seed in range(20):
        wait = backoff(policy, failures, err, random.Random(seed))
        assert base * 0.75 <= wait <= base


def test_retry_info_delay_overrides_backoff() -> None:
    err = UnavailableError("x", retry_delay=3.5)
    assert backoff(RetryPolicy(max_backoff=1.0), 4, err, random.Random(0)) == 3.5


def test_policy_rejects_nonsense() -> None:
    for bad in ({"max_attempts": 0}, {"jitter": 2.0}, {"multiplier": 0.5}, {"initial_backoff": -1.0}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)  # type: ignore[arg-type]
