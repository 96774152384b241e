"""The content memo stays within its byte budget, counted by what Python
actually allocates (tracemalloc), over contents whose in-memory size is far
from their canonical size: ASCII text, text that one emoji makes 4 bytes a
character, many small numbers and empty objects in function arguments,
inline data."""

from __future__ import annotations

import gc
import tracemalloc

from google.protobuf import struct_pb2

from agentctx.type.v1 import content_pb2, generation_pb2
from cache_service.api import convert
from cache_service.api.content_memo import ContentMemo
from cache_service.domain.keys import Prefix, PrefixView, call_chain
from tests.cache import protos

BUDGET = 512 * 1024


def _content(i: int) -> content_pb2.Content:
    kind = i % 4
    if kind == 0:
        return protos.text("user", f"question {i}: " + "word " * (i % 300))
    if kind == 1:
        return protos.text("model", f"answer {i} \N{GRINNING FACE} " + "reply " * (i % 300))
    part = content_pb2.Part()
    if kind == 2:
        args = struct_pb2.Struct()
        args.update({"n": i, "xs": [j + 0.5 for j in range(i % 40)], "empty": [{} for _ in range(i % 20)]})
        part.function_call.name = "lookup"
        part.function_call.args.CopyFrom(args)
    else:
        part.inline_data.mime_type = "image/png"
        part.inline_data.data = bytes([i % 256]) * (i % 2000)
    return content_pb2.Content(role="user", parts=[part])


def _turn(memo: ContentMemo, start: int) -> None:
    request = generation_pb2.ModelRequest(model="local-sim-1", contents=[_content(i) for i in range(start, start + 8)])
    call = convert.call_from_proto(request, memo)
    # Fill every memoized slot (chain link, body hash state) as a turn does.
    PrefixView.of(Prefix.of_call(call, 7))
    call_chain(call, 8)


def test_the_memo_holds_no_more_than_its_budget() -> None:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        memo = ContentMemo(BUDGET)
        for turn in range(600):
            _turn(memo, turn * 8)
            assert memo.bytes <= BUDGET
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert memo.misses == 600 * 8
    assert 0 < len(memo) < 600 * 8  # it evicted
    assert held <= BUDGET, f"the memo holds {held} bytes over a budget of {BUDGET}"
    # And it uses its budget: the accounting is not so loose that it keeps
    # little (a cost estimate far above the real size would pass the bound).
    assert held >= BUDGET // 3


def test_the_least_recently_used_go_first() -> None:
    memo = ContentMemo(BUDGET)
    keep = protos.model_request(2)
    convert.call_from_proto(keep, memo)
    kept = len(memo)
    for turn in range(200):
        convert.call_from_proto(keep, memo)  # used every turn: never the oldest
        _turn(memo, turn * 8)
    hits = memo.hits
    convert.call_from_proto(keep, memo)
    assert memo.hits == hits + kept


def test_a_zero_budget_memoizes_nothing() -> None:
    memo = ContentMemo(0)
    convert.call_from_proto(protos.model_request(3), memo)
    convert.call_from_proto(protos.model_request(3), memo)
    assert len(memo) == 0 and memo.bytes == 0 and memo.hits == 0
