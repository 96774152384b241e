"""Semantic memory's pure parts without a server: reciprocal rank fusion,
the stored form of vectors, the retrieval query and contents, and the
retrieval policy's checks (unknown keys refused like every policy's)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctx.context.v1 import policy_pb2
from context_service.domain.config import ContextConfig, RetrievalPolicy
from context_service.domain.config_defaults import config_from_defaults
from context_service.domain.memory import (
    RRF_K,
    MemoryKey,
    MemoryMatch,
    MemoryRecord,
    fuse,
    fusion_candidates,
    normalized,
    pack_vector,
    ranked_lexically,
    retrieval_query,
    retrieved_contents,
    unpack_vector,
)
from context_service.domain.model import Content, Part
from context_service.domain.validation import config_violations
from context_service.mapping.convert import config_from_proto, config_to_proto

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _match(memory_id: str, score: float = 1.0) -> MemoryMatch:
    return MemoryMatch(MemoryRecord(MemoryKey("a", "u", memory_id), memory_id, {}, "", "", "", T0), score)


def test_fusion_sums_reciprocal_ranks_and_keeps_both_ranks() -> None:
    lexical = [_match("a", 9.0), _match("b", 5.0), _match("c", 1.0)]
    vector = [_match("c", 0.9), _match("d", 0.8), _match("a", 0.1)]
    fused = fuse(lexical, vector, 10)
    by_id = {m.record.key.memory_id: m for m in fused}
    assert by_id["a"].score == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 3))
    assert by_id["c"].score == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))
    assert (by_id["a"].lexical_rank, by_id["a"].vector_rank, by_id["a"].vector_score) == (1, 3, 0.1)
    assert (by_id["d"].lexical_rank, by_id["d"].vector_rank) == (0, 2)
    assert (by_id["b"].lexical_rank, by_id["b"].vector_rank, by_id["b"].vector_score) == (2, 0, 0.0)
    # Ties (a and c) by lexical rank; both rankings beat one.
    assert [m.record.key.memory_id for m in fused] == ["a", "c", "b", "d"]
    assert [m.record.key.memory_id for m in fuse(lexical, vector, 2)] == ["a", "c"]


def test_fusion_of_one_ranking_keeps_its_order() -> None:
    lexical = [_match("x"), _match("y"), _match("z")]
    assert [m.record.key.memory_id for m in fuse(lexical, [], 10)] == ["x", "y", "z"]
    assert [m.record.key.memory_id for m in fuse([], lexical, 10)] == ["x", "y", "z"]
    assert [m.lexical_rank for m in ranked_lexically(lexical)] == [1, 2, 3]
    assert fusion_candidates(5) == 50 and fusion_candidates(100) == 200


@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=64))
def test_vectors_round_trip_as_float32(values: list[float]) -> None:
    packed = pack_vector(values)
    assert len(packed) == 4 * len(values) and list(unpack_vector(packed)) == values


def test_normalized_is_unit_length_and_zero_stays_zero() -> None:
    assert normalized([3.0, 4.0]) == [0.6, 0.8]
    assert normalized([0.0, 0.0]) == [0.0, 0.0]


def test_the_retrieval_query_is_the_newest_user_text() -> None:
    contents = [
        Content("user", (Part(text="first question"),)),
        Content("model", (Part(text="an answer"),)),
        Content("user", (Part(text="thinking", thought=True), Part(text="second"), Part(text="question"))),
        Content("user", (Part(text="   "),)),
    ]
    assert retrieval_query(contents) == "second\nquestion"
    assert retrieval_query(contents[1:2]) == ""
    assert len(retrieval_query([Content("user", (Part(text="é" * 5000),))]).encode()) <= 4096


def test_retrieved_contents_respect_the_minimum_score() -> None:
    matches = [_match("kept", 2.0), _match("also", 1.0), _match("dropped", 0.5)]
    assert [c.parts[0].text for c in retrieved_contents(matches, 1.0)] == ["kept", "also"]
    assert [c.role for c in retrieved_contents(matches, None)] == ["user"] * 3


def test_the_retrieval_policy_is_checked_and_strict_in_defaults() -> None:
    assert config_from_defaults({"retrieval": {"enabled": True, "limit": 3}}).retrieval == RetrievalPolicy(True, 3)
    for bad in ({"retrieval": {"limitt": 3}}, {"retrieval": {"limit": 0}}, {"retrieval": {"limit": 101}},
                {"retrieval": {"min_score": float("nan")}}):
        with pytest.raises(ValueError):
            config_from_defaults(bad)
    fields = [v.field for v in config_violations(ContextConfig(retrieval=RetrievalPolicy(True, -1)))]
    assert fields == ["config.retrieval.limit"]


def test_the_retrieval_policy_round_trips_through_the_proto() -> None:
    config = ContextConfig(model="m", retrieval=RetrievalPolicy(True, 4, 0.25))
    out = policy_pb2.ContextConfig()
    config_to_proto(config, out)
    assert (out.retrieval.enabled, out.retrieval.limit, out.retrieval.min_score) == (True, 4, 0.25)
    assert config_from_proto(out).retrieval == config.retrieval
    # An absent policy stays unset (the server's default applies).
    assert config_from_proto(policy_pb2.ContextConfig()).retrieval == RetrievalPolicy()
