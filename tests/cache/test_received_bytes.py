"""The cache service cuts its content memo's keys from the bytes a request
arrived in (cache_service/api/servicer.py ``register``), not from a second
serialization of the parsed request; and a conversion from received bytes
equals the conversion of the parsed message, whatever the bytes' layout
(fields in any order, a message field split over several occurrences,
which a parser merges)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.type.v1 import content_pb2, generation_pb2
from cache_service.api import convert
from cache_service.api.content_memo import ContentMemo
from cache_service.api.servicer import CacheServicer, register
from cache_service.app import CacheApp
from cache_service.providers.factory import build_router
from context_service.mapping.wire import wire_field
from tests.cache import protos
from tests.support.servers import cache_settings

MODEL = "local-sim-1"


def _number(message: Any, field: str) -> int:
    return int(message.DESCRIPTOR.fields_by_name[field].number)


# A content whose bytes are not its deterministic serialization: its parts
# before its role (a parser takes fields in any order).
ODD = (content_pb2.Content(parts=[content_pb2.Part(text="an odd layout")]).SerializeToString()
       + content_pb2.Content(role="user").SerializeToString())


def _contents_bytes(field: int) -> bytes:
    """Two ordinary contents and ``ODD``, as entries of field ``field``."""
    return b"".join(wire_field(field, c.SerializeToString()) for c in protos.history(1)) + wire_field(field, ODD)


def _generate_bytes() -> bytes:
    request = generation_pb2.ModelRequest(model=MODEL, system_instruction=protos.text("", "Be brief."))
    body = request.SerializeToString() + _contents_bytes(_number(request, "contents"))
    return (pb.GenerateContentRequest(scope=protos.scope()).SerializeToString()
            + wire_field(_number(pb.GenerateContentRequest, "request"), body))


def _acquire_bytes() -> bytes:
    body = pb.CachePrefix(system_instruction=protos.text("", protos.SYSTEM_TEXT)).SerializeToString()
    body += _contents_bytes(_number(pb.CachePrefix, "history"))
    return (pb.AcquireLeaseRequest(scope=protos.scope()).SerializeToString()
            + wire_field(_number(pb.AcquireLeaseRequest, "prefix"), body))


def _stream_bytes() -> bytes:
    return wire_field(_number(pb.StreamGenerateContentRequest, "call"), _generate_bytes())


class _Server:
    """Takes the handlers ``register`` adds."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.handlers = handlers


class _Context:
    def time_remaining(self) -> float | None:
        return None


@pytest.mark.parametrize(("method", "raw"), [("GenerateContent", _generate_bytes), ("AcquireLease", _acquire_bytes),
                                             ("StreamGenerateContent", _stream_bytes)])
async def test_the_servicer_keys_its_memo_by_the_bytes_it_received(
    certs_dir: pathlib.Path, tmp_path: pathlib.Path, method: str, raw: Callable[[], bytes]
) -> None:
    settings = cache_settings(certs_dir, tmp_path, sightings_before_create=0, min_prefix_tokens=64,
                              local_min_cache_tokens=64)
    app = await CacheApp.create(settings)
    try:
        servicer = CacheServicer(app, build_router(app.settings, app.providers))
        server = _Server()
        register(servicer, server)
        handler = server.handlers[method]
        for _ in range(2):  # the second call takes its keys from the first one's run
            request = handler.request_deserializer(raw())
            if handler.unary_stream is not None:
                chunks = [c async for c in handler.unary_stream(request, _Context())]
                assert chunks
            else:
                assert await handler.unary_unary(request, _Context())
        own = content_pb2.Content.FromString(ODD).SerializeToString(deterministic=True)
        assert own != ODD
        memo = servicer.contents
        assert memo.get(ODD) is not None  # the bytes as received
        assert memo.get(own) is None  # no serialization of the request made a key
        assert memo.misses == 3 + 1 and memo.hits == 3 + 1  # three contents once, then from the run
    finally:
        await app.close()


def _split(body: bytes, field: int, cut: int) -> bytes:
    """``body`` sent as two occurrences of message field ``field`` (cut at
    an entry boundary ``cut``): a parser merges them into one message."""
    return wire_field(field, body[:cut]) + wire_field(field, body[cut:])


_text = st.text(alphabet="abc xyz", max_size=20)
_content = st.builds(lambda role, words: protos.text(role, " ".join(words)),
                     st.sampled_from(["user", "model"]), st.lists(_text, min_size=1, max_size=3))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents=st.lists(_content, min_size=1, max_size=6), scope_last=st.booleans(), split=st.none() | st.integers(0, 7),
       turns=st.integers(1, 3))
def test_a_call_converted_from_its_received_bytes_equals_the_parsed_one(
    contents: list[content_pb2.Content], scope_last: bool, split: int | None, turns: int,
) -> None:
    field = _number(pb.GenerateContentRequest, "request")
    memo, plain = ContentMemo(64 << 20), ContentMemo(64 << 20)
    for turn in range(1, turns + 1):  # a conversation that grows: runs of the memo are found
        request = generation_pb2.ModelRequest(model=MODEL, contents=contents[:turn * 2])
        entries = [wire_field(3, c.SerializeToString()) for c in request.contents]
        body = wire_field(1, MODEL.encode()) + b"".join(entries)
        scope = pb.GenerateContentRequest(scope=protos.scope()).SerializeToString()
        if split is not None:
            cut = len(wire_field(1, MODEL.encode())) + sum(len(e) for e in entries[:split])
            outer = _split(body, field, min(cut, len(body)))
        else:
            outer = wire_field(field, body)
        data = outer + scope if scope_last else scope + outer
        parsed = pb.GenerateContentRequest.FromString(data)
        assert parsed.request == request
        received = convert.received_field(data, field)
        assert (received is None) == (split is not None)
        if received is not None:
            assert data[received[1]:received[2]] == body
        call = convert.call_from_proto(parsed.request, memo, received)
        assert call == convert.call_from_proto(parsed.request, plain) == convert.call_from_proto(parsed.request)
        assert convert.received_field(None, field) is None
