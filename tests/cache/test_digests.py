"""The content memo changes what a turn costs, never a digest.

Fingerprints are public metadata (stored on events) and chain digests
decide what a lease covers, so the memoized path must give byte-identical
values to the definitions in cache_service/domain/keys.py, computed here
from scratch over plain dicts, and to the context service's prefix
fingerprint (agentctx_common.canonical.prefix_json), over random prefixes,
growing turn by turn, with heads that change, contents that are edited
mid-conversation, and memos small enough to evict.
"""

from __future__ import annotations

import copy
import hashlib
import pickle
from typing import Any

import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common.canonical import canonical_json, prefix_json
from agentctx_common.errors import InvalidArgument
from cache_service.api import convert
from cache_service.api.content_memo import ContentMemo
from cache_service.domain.keys import (
    CanonicalContent,
    Prefix,
    PrefixView,
    call_chain,
    canonical_list,
    canonical_size,
    estimate_tokens,
)
from tests.cache import protos

MODEL = "local-sim-1"

# --- strategies: protos as a client may send them -------------------------------------

_leaf = st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
_json = st.recursive(
    _leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_struct_dict = st.dictionaries(st.text(max_size=4), _json, max_size=3)


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


@st.composite
def _part(draw: st.DrawFn) -> content_pb2.Part:
    kind = draw(st.sampled_from(["text", "inline", "file", "call", "response"]))
    p = content_pb2.Part()
    if kind == "text":
        p.text = draw(st.text(max_size=40))
    elif kind == "inline":
        p.inline_data.mime_type = draw(st.sampled_from(["image/png", "application/pdf"]))
        p.inline_data.data = draw(st.binary(max_size=24))
    elif kind == "file":
        p.file_data.mime_type = "text/plain"
        p.file_data.file_uri = draw(st.text(max_size=12))
    elif kind == "call":
        p.function_call.id = draw(st.text(max_size=4))
        p.function_call.name = draw(st.sampled_from(["lookup", "get_weather"]))
        p.function_call.args.CopyFrom(_struct(draw(_struct_dict)))
    else:
        p.function_response.name = "lookup"
        p.function_response.response.CopyFrom(_struct(draw(_struct_dict)))
    if draw(st.booleans()):
        p.thought = True
    if draw(st.booleans()):
        p.thought_signature = draw(st.binary(min_size=1, max_size=8))
    return p


_content = st.builds(
    lambda role, parts: content_pb2.Content(role=role, parts=parts),
    st.sampled_from(["user", "model"]), st.lists(_part(), min_size=1, max_size=3),
)


@st.composite
def _head(draw: st.DrawFn) -> dict[str, Any]:
    tools = [generation_pb2.Tool(function_declarations=[generation_pb2.FunctionDeclaration(
        name=draw(st.sampled_from(["lookup", "get_weather"])), description=draw(st.text(max_size=10)),
        parameters=_struct(draw(_struct_dict)),
    )]) for _ in range(draw(st.integers(0, 2)))]
    system = draw(st.none() | st.text(min_size=1, max_size=30).map(lambda t: protos.text("", t)))
    tool_config = draw(st.none() | st.builds(
        generation_pb2.ToolConfig, mode=st.sampled_from([0, 1, 2, 3]),
        allowed_function_names=st.lists(st.sampled_from(["lookup", "get_weather"]), max_size=2),
    ))
    return {"system": system, "tools": tools, "tool_config": tool_config}


def _prefix_proto(head: dict[str, Any], history: list[content_pb2.Content]) -> pb.CachePrefix:
    p = pb.CachePrefix(tools=head["tools"], history=history)
    if head["system"] is not None:
        p.system_instruction.CopyFrom(head["system"])
    if head["tool_config"] is not None:
        p.tool_config.CopyFrom(head["tool_config"])
    return p


def _request_proto(head: dict[str, Any], contents: list[content_pb2.Content]) -> generation_pb2.ModelRequest:
    r = generation_pb2.ModelRequest(model=MODEL, tools=head["tools"], contents=contents)
    if head["system"] is not None:
        r.system_instruction.CopyFrom(head["system"])
    if head["tool_config"] is not None:
        r.tool_config.CopyFrom(head["tool_config"])
    return r


# --- the definitions, from scratch ------------------------------------------------------


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _reference(prefix: Prefix) -> tuple[str, int, tuple[bytes, ...]]:
    """Fingerprint, size and chain exactly as keys.py's docstring defines them."""
    plain = [copy.deepcopy(c) for c in prefix.history]
    assert all(type(c) is dict for c in plain)
    head = {"model": prefix.model, "systemInstruction": prefix.system_instruction, "tools": list(prefix.tools),
            "toolConfig": prefix.tool_config}
    body = canonical_json({**head, "history": plain})
    chain = [_sha(b"head" + canonical_json(head))]
    for c in plain:
        chain.append(_sha(chain[-1] + _sha(canonical_json(c))))
    return hashlib.sha256(body).hexdigest(), len(body), tuple(chain)


def _context_service_fingerprint(head: dict[str, Any], history: list[content_pb2.Content]) -> str:
    return hashlib.sha256(canonical_json(
        prefix_json(MODEL, head["system"], head["tools"], head["tool_config"], history)
    )).hexdigest()


# --- properties ---------------------------------------------------------------------------

_step = st.tuples(
    st.integers(0, 1),  # which head
    st.integers(0, 10),  # prefix length
    st.integers(0, 2),  # contents the request adds after the prefix
    st.none() | st.tuples(st.integers(0, 9), _content),  # an edit of the conversation before this step
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    conversation=st.lists(_content, min_size=1, max_size=12),
    heads=st.lists(_head(), min_size=2, max_size=2),
    steps=st.lists(_step, min_size=1, max_size=8),
    budget=st.sampled_from([0, 6_000, 64 << 20]),
)
def test_memoized_digests_and_fingerprints_equal_the_definitions(
    conversation: list[content_pb2.Content], heads: list[dict[str, Any]], steps: list[Any], budget: int,
) -> None:
    memo = ContentMemo(budget)
    conversation = list(conversation)
    for which, n, extra, edit in steps:
        if edit is not None:
            at, content = edit
            conversation[at % len(conversation)] = content
        head, n = heads[which], min(n, len(conversation))
        history = conversation[:n]
        prefix_pb = _prefix_proto(head, history)

        plain = convert.prefix_from_proto(prefix_pb, MODEL)
        memoized = convert.prefix_from_proto(prefix_pb, MODEL, memo)
        assert all(type(c) is CanonicalContent for c in memoized.history)
        assert memoized == plain
        fp, size, chain = _reference(plain)
        for view in (PrefixView.of(memoized), PrefixView.of(plain), PrefixView.of(memoized, 3.0)):
            assert view.fingerprint == fp == _context_service_fingerprint(head, history)
            assert view.size_bytes == size
            assert view.chain == chain
        assert PrefixView.of(memoized, 3.0).tokens == estimate_tokens(size, 3.0)
        # What the local simulator measures a prompt and a reply's digest by.
        for p in (memoized, plain):
            assert canonical_size(p) == size == len(canonical_json(p.json()))
            assert canonical_list(p.history) == canonical_json(list(plain.history))

        # GenerateContent: the lease check compares call_chain with the
        # leased entry's digest.
        request_pb = _request_proto(head, conversation[:n + extra] or conversation[:1])
        call_plain = convert.call_from_proto(request_pb)
        call_memo = convert.call_from_proto(request_pb, memo)
        assert call_memo == call_plain
        upto = min(n, len(call_memo.contents))
        assert call_chain(call_memo, upto) == call_chain(call_plain, upto) == _reference(
            Prefix.of_call(call_plain, upto))[2][-1]
    assert memo.bytes <= budget


def test_a_resent_conversation_converts_and_hashes_only_its_new_contents() -> None:
    memo = ContentMemo(64 << 20)
    first = convert.call_from_proto(protos.model_request(50), memo)
    assert memo.misses == 101 and memo.hits == 0
    view = PrefixView.of(Prefix.of_call(first, 100))

    # The next turn: the old contents, the model's answer, a new question.
    request = protos.model_request(51, question="and then?")
    prefix = convert.prefix_from_proto(pb.CachePrefix(
        system_instruction=request.system_instruction, tools=request.tools, history=request.contents[:-1],
    ), MODEL, memo)
    second = convert.call_from_proto(request, memo)
    assert memo.misses == 101 + 3  # question 50, answer 50, the new question
    assert all(a is b for a, b in zip(first.contents[:100], second.contents, strict=False))
    grown = PrefixView.of(prefix)
    assert grown.chain[:101] == view.chain
    assert grown.fingerprint == _reference(Prefix.of_call(convert.call_from_proto(request), 102))[0]


def test_an_invalid_content_is_never_memoized() -> None:
    memo = ContentMemo(64 << 20)
    request = protos.model_request(1)
    request.contents[1].ClearField("parts")
    for _ in range(2):
        with pytest.raises(InvalidArgument) as err:
            convert.call_from_proto(request, memo)
        assert [v.field for v in err.value.field_violations] == ["request.contents[1].parts"]
    assert len(memo) == 2  # the two valid contents


def test_a_memoized_content_cannot_change_and_its_copies_are_plain() -> None:
    content = CanonicalContent({"role": "user", "parts": [{"text": "hi"}]})
    for edit in (lambda c: c.__setitem__("role", "model"), lambda c: c.update(role="model"),
                 lambda c: c.pop("role"), lambda c: c.clear(), lambda c: c.setdefault("x", 1),
                 lambda c: c.popitem(), lambda c: c.__delitem__("role")):
        with pytest.raises(TypeError):
            edit(content)
    assert content == {"role": "user", "parts": [{"text": "hi"}]}
    for clone in (copy.copy(content), copy.deepcopy(content), pickle.loads(pickle.dumps(content))):
        assert type(clone) is dict and clone == content
        clone["role"] = "model"
    deep = copy.deepcopy(content)
    deep["parts"][0]["text"] = "changed"
    assert content["parts"][0]["text"] == "hi"
    assert content.canonical == canonical_json(dict(content))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(contents=st.lists(_content, max_size=8), head=_head(), big=st.integers(0, 300),
       generation=st.booleans())
def test_memo_keys_cut_from_the_parent_are_each_contents_own_bytes(
    contents: list[content_pb2.Content], head: dict[str, Any], big: int, generation: bool
) -> None:
    """The memo's keys, cut out of the parent's one serialization, are the
    bytes each content serializes to on its own (maps in key order), so a
    content is found in the memo whichever message carried it."""
    if big:  # a content over 127 bytes and one over 16 KiB: multi-byte lengths
        contents = [*contents, protos.text("user", "x" * big), protos.text("model", "y" * (big << 7))]
    request = _request_proto(head, contents)
    if generation:
        request.generation_config.temperature = 0.5
        request.generation_config.max_output_tokens = big + 1
    prefix = _prefix_proto(head, contents)
    own = [c.SerializeToString(deterministic=True) for c in contents]
    assert convert._content_keys(request, "contents", request.contents)[0] == own
    assert convert._content_keys(prefix, "history", prefix.history)[0] == own
    assert convert.repeated_field_bytes(request.SerializeToString(deterministic=True), 3) == own


def test_memo_keys_of_a_message_the_scan_cannot_read_are_made_one_by_one() -> None:
    assert convert.repeated_field_bytes(b"\x1b\x1c", 3) is None  # a group
    assert convert.repeated_field_bytes(b"\x1a\x05ab", 3) is None  # cut short
    assert convert.repeated_field_bytes(b"\x1a\x02ab\x08\x96\x01\x15abcd\x19abcdefgh", 3) == [b"ab"]


def test_a_resent_conversation_is_taken_from_its_run_and_equals_a_fresh_conversion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next call of a conversation starts with the bytes of the last
    one: its keys and contents come from the memo's run (only the first
    old payload is looked at), and the call converts to what a memo that
    never saw the conversation gives."""
    memo = ContentMemo(64 << 20)
    contents = list(protos.model_request(30).contents)
    convert.call_from_proto(generation_pb2.ModelRequest(model=MODEL, contents=contents), memo)
    looked: list[bytes] = []
    get_many = memo.get_many
    fetched: list[int] = []
    monkeypatch.setattr(memo, "get_many", lambda keys: fetched.append(len(keys)) or get_many(keys))
    run = memo.run
    monkeypatch.setattr(memo, "run", lambda first: looked.append(first) or run(first))
    for extra in range(1, 4):
        contents.append(protos.text("user", f"and then {extra}?"))
        request = generation_pb2.ModelRequest(model=MODEL, contents=contents)
        hits, misses = memo.hits, memo.misses
        looked.clear()
        fetched.clear()
        memoized = convert.call_from_proto(request, memo)
        assert looked == [contents[0].SerializeToString(deterministic=True)] and fetched == [1]
        assert (memo.hits, memo.misses) == (hits + len(contents) - 1, misses + 1)  # only the new content missed
        assert memoized == convert.call_from_proto(request, ContentMemo(64 << 20))
        assert memoized == convert.call_from_proto(request, None)


def test_runs_go_before_any_content_and_with_the_first_content_evicted() -> None:
    memo = ContentMemo(64 << 20)
    request = protos.model_request(20)
    convert.call_from_proto(request, memo)
    keys = convert._content_keys(request, "contents", request.contents)[0]
    assert memo.run(keys[0]) is not None
    held = len(memo)
    memo.budget_bytes = memo.bytes - 1  # the run's bytes over: the run goes, no content
    memo.put(b"x", convert.CanonicalContent({"role": "user", "parts": []}))
    assert memo.run(keys[0]) is None and len(memo) == held + 1  # room made from the run alone
    memo.budget_bytes = 64 << 20
    convert.call_from_proto(request, memo)
    assert memo.run(keys[0]) is not None
    memo.budget_bytes = 2048  # room for one content: the run first, then the others
    memo.put(b"y", convert.CanonicalContent({"role": "user", "parts": []}))
    assert memo.run(keys[0]) is None and len(memo) == 1 and memo.bytes <= 2048


def test_a_call_over_the_memo_budget_keeps_no_run() -> None:
    """A call whose contents do not all fit lets some of its own go: no run
    keeps them, and the call after it converts as the first did."""
    # Small contents: their run would fit, their entries (about 1.3 KB each) do not.
    request = generation_pb2.ModelRequest(model=MODEL, contents=[protos.text("user", f"q{i}") for i in range(6)])
    memo = ContentMemo(2400)  # room for one entry and the run
    first = convert.call_from_proto(request, memo)
    assert memo.evicted and len(memo) < len(request.contents)
    keys = convert._content_keys(request, "contents", request.contents)[0]
    assert memo.run(keys[0]) is None
    assert convert.call_from_proto(request, memo) == first == convert.call_from_proto(request, None)
