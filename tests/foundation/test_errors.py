"""Domain errors reach clients as rich google.rpc.Status details, and
unexpected exceptions become a generic INTERNAL without their text."""

from __future__ import annotations

import logging

import grpc
import pytest

from agentctx_common.errors import (
    Aborted,
    FieldViolation,
    InvalidArgument,
    PreconditionViolation,
    ResourceExhausted,
    Unavailable,
)
from agentctx_common.server import new_server
from agentctx_common.settings import ServerSettings
from agentctx_common.status import error_from_rpc

RAISED: dict[str, Exception] = {
    "invalid": InvalidArgument.fields(
        [FieldViolation("policy.max_bytes", "must be greater than 0"), FieldViolation("session", "is required")]
    ),
    "conflict": Aborted("etag mismatch", reason="ETAG_MISMATCH", metadata={"current_etag": "e2"}),
    "budget": ResourceExhausted(
        "too big", reason="REQUEST_CONTEXT_BUDGET_EXCEEDED", metadata={"request_bytes": 10, "max_request_bytes": 5}
    ),
    "busy": Unavailable("try later", retry_after=1.5),
    "precondition": Aborted(
        "x", precondition_violations=[PreconditionViolation("ETAG", "sessions/s", "stale")]
    ),
    "bug": RuntimeError("secret prompt text that must not leak"),
}


def _echo_errors(server: grpc.aio.Server) -> None:
    async def raise_it(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise RAISED[request.decode()]

    async def stream_it(request: bytes, context: grpc.aio.ServicerContext):
        yield b"first"
        raise RAISED[request.decode()]

    handlers = {
        "Raise": grpc.unary_unary_rpc_method_handler(raise_it),
        "Stream": grpc.unary_stream_rpc_method_handler(stream_it),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Errors", handlers),))


@pytest.fixture
async def channel():
    settings = ServerSettings(dev_plaintext=True, host="127.0.0.1", port=0)
    server = new_server(settings, service_names=["test.Errors"], register=_echo_errors, telemetry_name="test")
    await server.start()
    async with grpc.aio.insecure_channel(server.address) as ch:
        yield ch
    await server.stop(0)


async def _fail(channel: grpc.aio.Channel, key: str, method: str = "Raise") -> grpc.aio.AioRpcError:
    if method == "Raise":
        call = channel.unary_unary(f"/test.Errors/{method}")(key.encode(), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
    else:
        call = channel.unary_stream(f"/test.Errors/{method}")(key.encode(), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in call:
                pass
    return caught.value


async def test_invalid_argument_carries_field_violations(channel) -> None:
    err = await _fail(channel, "invalid")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    rebuilt = error_from_rpc(err)
    assert isinstance(rebuilt, InvalidArgument)
    assert [v.field for v in rebuilt.field_violations] == ["policy.max_bytes", "session"]


async def test_conflict_carries_reason_and_figures(channel) -> None:
    rebuilt = error_from_rpc(await _fail(channel, "conflict"))
    assert isinstance(rebuilt, Aborted)
    assert rebuilt.reason == "ETAG_MISMATCH"
    assert rebuilt.metadata == {"current_etag": "e2"}


async def test_budget_error_carries_measured_and_allowed(channel) -> None:
    rebuilt = error_from_rpc(await _fail(channel, "budget"))
    assert rebuilt.code.value == "RESOURCE_EXHAUSTED"
    assert rebuilt.metadata == {"request_bytes": "10", "max_request_bytes": "5"}


async def test_unavailable_carries_retry_info(channel) -> None:
    rebuilt = error_from_rpc(await _fail(channel, "busy"))
    assert rebuilt.retry_after == pytest.approx(1.5)


async def test_precondition_failure_detail(channel) -> None:
    rebuilt = error_from_rpc(await _fail(channel, "precondition"))
    assert rebuilt.precondition_violations == (PreconditionViolation("ETAG", "sessions/s", "stale"),)


async def test_unexpected_error_is_internal_without_its_text(channel, caplog) -> None:
    with caplog.at_level(logging.ERROR):
        err = await _fail(channel, "bug")
    assert err.code() == grpc.StatusCode.INTERNAL
    assert "secret" not in (err.details() or "")
    assert "secret" not in caplog.text
    assert "RuntimeError" in caplog.text or any(
        getattr(r, "error_type", "") == "RuntimeError" for r in caplog.records
    )


async def test_error_after_streamed_output_keeps_its_status(channel) -> None:
    err = await _fail(channel, "conflict", method="Stream")
    assert error_from_rpc(err).reason == "ETAG_MISMATCH"
