"""Errors decoded from real failed calls: one class per gRPC code, the
ErrorReason enum value (or the raw string of an unknown reason), metadata,
RetryInfo delay and field violations."""

from __future__ import annotations

import grpc
import pytest

from agentctx_client import (
    AgentCtxError,
    BudgetExceededError,
    ConflictError,
    ErrorReason,
    FieldViolation,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    RetryPolicy,
    UnavailableError,
    connect,
    error_class,
    error_from_rpc,
)
from tests.client.servers import Failure

CODES = [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK]
NO_RETRY = RetryPolicy(max_attempts=1)


async def _failure(target: str) -> AgentCtxError:
    async with connect(target, insecure_loopback=True, retry=NO_RETRY) as client:
        with pytest.raises(AgentCtxError) as caught:
            await client.get_session("apps/a/users/u/sessions/s")
    return caught.value


def test_every_code_has_its_own_class() -> None:
    classes = {error_class(code) for code in CODES}
    assert len(classes) == len(CODES)
    assert all(error_class(code).code is code for code in CODES)


@pytest.mark.parametrize("code", CODES, ids=lambda c: c.name)
async def test_each_code_decodes_to_its_class_with_its_reason(scripted, code: grpc.StatusCode) -> None:
    service, target = scripted
    reason = "CONFLICT" if code is grpc.StatusCode.ABORTED else code.name
    service.fail("GetSession", Failure(code, "it failed", reason=reason, metadata={"k": "v"}))
    err = await _failure(target)
    assert type(err) is error_class(code)
    assert err.code is code
    assert err.reason == ErrorReason.Value(reason)
    assert err.reason_name == reason
    assert err.metadata == {"k": "v"}
    assert err.message == "it failed"
    assert err.retry_delay is None and err.field_violations == ()


async def test_field_violations_of_an_invalid_argument(scripted) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(
        grpc.StatusCode.INVALID_ARGUMENT, reason="INVALID_NAME",
        field_violations=(("name", "must be apps/{app}/users/{user}/sessions/{session}"), ("x.y", "bad")),
    ))
    err = await _failure(target)
    assert isinstance(err, InvalidArgumentError)
    assert err.reason == ErrorReason.INVALID_NAME
    assert err.field_violations == (
        FieldViolation("name", "must be apps/{app}/users/{user}/sessions/{session}"), FieldViolation("x.y", "bad"),
    )


async def test_etag_conflict_carries_the_current_etag(scripted) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(grpc.StatusCode.ABORTED, reason="ETAG_MISMATCH", metadata={"current_etag": "e9"}))
    err = await _failure(target)
    assert isinstance(err, ConflictError)
    assert err.reason == ErrorReason.ETAG_MISMATCH and err.current_etag == "e9"
    # What `print(e.reason)` shows a user: the reason's name, not its number.
    assert str(err.reason) == f"{err.reason}" == "ETAG_MISMATCH" and repr(err.reason) == "ErrorReason.ETAG_MISMATCH"
    assert {ErrorReason.ETAG_MISMATCH: "re-read"}[err.reason] == "re-read" and int(err.reason) == 43


def test_a_reason_given_as_a_plain_value_prints_as_its_name_too() -> None:
    err = ConflictError("stale", reason=ErrorReason.ETAG_MISMATCH)
    assert str(err.reason) == "ETAG_MISMATCH" and err.reason == ErrorReason.ETAG_MISMATCH
    assert str(NotFoundError("gone").reason) == "NOT_FOUND"


async def test_retry_delay_from_retry_info(scripted) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(grpc.StatusCode.UNAVAILABLE, reason="DATABASE_BUSY", retry_delay=1.25))
    err = await _failure(target)
    assert isinstance(err, UnavailableError)
    assert err.reason == ErrorReason.DATABASE_BUSY and err.retry_delay == 1.25


@pytest.mark.parametrize("reason", ["CONTEXT_BUDGET_EXCEEDED", "REQUEST_CONTEXT_BUDGET_EXCEEDED", "CONTEXT_WINDOW_EXCEEDED"])
async def test_budget_reasons_are_budget_exceeded(scripted, reason: str) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, reason=reason, metadata={"limit": "max_tokens"}))
    err = await _failure(target)
    assert isinstance(err, BudgetExceededError) and isinstance(err, ResourceExhaustedError)
    assert err.limit == "max_tokens"


async def test_rate_limit_is_resource_exhausted_but_not_a_budget(scripted) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, reason="RATE_LIMITED", retry_delay=0.5))
    err = await _failure(target)
    assert type(err) is ResourceExhaustedError and err.reason == ErrorReason.RATE_LIMITED


async def test_unknown_reason_is_kept_as_the_raw_string_and_classed_by_code(scripted) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(grpc.StatusCode.NOT_FOUND, reason="BRANCH_NOT_FOUND_IN_A_LATER_VERSION"))
    err = await _failure(target)
    assert isinstance(err, NotFoundError)
    assert err.reason == "BRANCH_NOT_FOUND_IN_A_LATER_VERSION" == err.reason_name


async def test_reason_of_another_domain_is_not_mistaken_for_ours(scripted) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(grpc.StatusCode.NOT_FOUND, reason="NOT_FOUND", domain="example.com"))
    err = await _failure(target)
    assert err.reason == "NOT_FOUND" and not isinstance(err.reason, int)


async def test_failure_without_details_has_its_codes_generic_reason(scripted) -> None:
    service, target = scripted
    service.fail("GetSession", Failure(grpc.StatusCode.ABORTED, rich=False))
    err = await _failure(target)
    assert isinstance(err, ConflictError) and err.status is None
    assert err.reason == ErrorReason.CONFLICT and err.current_etag is None


async def test_unreachable_server_is_unavailable() -> None:
    # A port that was just free: nothing listens there.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{sock.getsockname()[1]}"
    async with connect(target, insecure_loopback=True, retry=NO_RETRY, timeout=5) as client:
        with pytest.raises(UnavailableError) as caught:
            await client.get_session("apps/a/users/u/sessions/s")
    assert caught.value.reason == ErrorReason.UNAVAILABLE


def test_a_request_stream_cut_by_the_transport_is_unavailable() -> None:
    # grpc.aio's status when a request message cannot be written because the
    # connection broke before the server's status arrived (a server killed
    # mid-upload): INTERNAL with its fixed text and no server status. The
    # server never got the whole request, so it is UNAVAILABLE to the caller.
    cut = grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(),
                               details="Internal error from Core", debug_error_string="write failed")
    err = error_from_rpc(cut)
    assert type(err) is UnavailableError and err.reason == ErrorReason.UNAVAILABLE
    # The same code and text from a server (with its status) stays INTERNAL,
    # and so does any other INTERNAL without one.
    assert type(error_from_rpc(grpc.aio.AioRpcError(
        grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(), details="boom"))) is InternalError


def test_plaintext_needs_loopback_and_consent() -> None:
    with pytest.raises(ValueError, match="tls"):
        connect("127.0.0.1:1")
    with pytest.raises(ValueError, match="loopback"):
        connect("10.1.2.3:50051", insecure_loopback=True)
