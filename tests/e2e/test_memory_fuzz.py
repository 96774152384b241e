"""MemoryService under fuzzed requests (test_fuzzed_requests.py's
mutations of valid messages and random ones) and fuzzed bytes
(test_wire_fuzz.py's): always a deliberate status, never UNKNOWN or
INTERNAL, and the service answers afterwards."""

from __future__ import annotations

import copy
import pathlib
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from google.protobuf import json_format

from agentctx.memory.v1 import memory_service_pb2 as mpb
from agentctx.memory.v1 import memory_service_pb2_grpc
from tests.e2e.test_fuzzed_requests import CACHE_DEFAULTS, SESSION, _fuzz, _methods
from tests.e2e.test_wire_fuzz import BAD, MUTATIONS, _send
from tests.support.pair import ServicePair, pair_maker

SERVICE = "agentctx.memory.v1.MemoryService"
VALID: dict[str, dict[str, Any]] = {
    "AddSessionToMemory": {"session": SESSION},
    "AddMemory": {"parent": "apps/fuzz/users/u1", "memory_id": "m1",
                  "memory": {"text": "the fuzz entry", "metadata": {"k": "v"}, "session": SESSION, "event_id": "e9",
                             "author": "user"}},
    "SearchMemory": {"parent": "apps/fuzz/users/u1", "query": "fuzz entry", "metadata_filter": {"k": "v"}, "limit": 3},
    "DeleteMemory": {"name": "apps/fuzz/users/u1/memories/m1"},
}


@pytest.fixture
async def pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    async with pair_maker(certs_dir, tmp_path, cache_defaults=CACHE_DEFAULTS) as make:
        yield await make()


async def test_fuzzed_memory_requests_never_get_internal(pair: ServicePair) -> None:
    seen = await _fuzz(pair, pair.channel, mpb, SERVICE, copy.deepcopy(VALID), random.Random(20261203))
    assert set(seen) == set(VALID)
    # The mutations reach past the first check (DeleteMemory's one field is
    # its name, so a mutation of it never names the entry).
    never_ok = {m: sorted(c) for m, c in seen.items() if "OK" not in c}
    assert set(never_ok) <= {"DeleteMemory"}, never_ok


async def test_fuzzed_memory_bytes_never_get_internal(pair: ServicePair) -> None:
    rng = random.Random(20261203)
    failures = []
    for method, request_type, _ in _methods(mpb, "MemoryService"):
        valid = json_format.ParseDict(VALID[method], request_type()).SerializeToString()
        for i in range(14):
            code = await _send(pair.channel, f"/{SERVICE}/{method}", MUTATIONS[i % len(MUTATIONS)](rng, valid), "unary")
            if code in BAD:
                failures.append(f"{method} #{i}: {code.name}")
    assert not failures, failures
    stub = memory_service_pb2_grpc.MemoryServiceStub(pair.channel)
    found = await stub.SearchMemory(mpb.SearchMemoryRequest(parent="apps/fuzz/users/u1", query="anything"))
    assert isinstance(found, mpb.SearchMemoryResponse)
