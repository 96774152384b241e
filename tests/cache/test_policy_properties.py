"""Invariants of the pure create policy (domain.policy), over any prefix,
cache, evidence, price shape and TTL options: a first sighting never
creates; nothing is created or grown that costs more than it saves in
expectation under the policy's own model; an older record than the TTL
chosen is never the agreement a create rests on."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cache_service.domain.model import BypassReason
from cache_service.domain.policy import (
    Action,
    CachedPrefix,
    Evidence,
    PolicySettings,
    decide,
    expected_reads,
    net_gain,
    reads_of,
)
from cache_service.domain.pricing import cache_prices

SETTINGS = PolicySettings(min_prefix_tokens=0)
gaps = st.lists(st.floats(min_value=0.0, max_value=7200.0), max_size=16).map(tuple)
ttls = st.lists(st.sampled_from([60.0, 300.0, 900.0, 1800.0, 3600.0]), min_size=1, max_size=3, unique=True).map(tuple)
prices = st.sampled_from(["named", "marked", "automatic"]).map(cache_prices)
evidence = st.builds(Evidence, st.none() | st.floats(min_value=0.0, max_value=7200.0), gaps, st.booleans(), gaps,
                     st.floats(min_value=0.0, max_value=1.0))
matches = st.none() | st.builds(CachedPrefix, st.integers(1, 50_000), st.integers(0, 40))


@given(tokens=st.integers(1, 100_000), history=st.integers(0, 40), gaps=gaps, prices=prices, ttls=ttls)
def test_a_first_sighting_never_creates(tokens: int, history: int, gaps: tuple[float, ...], prices, ttls) -> None:
    d = decide(empty=False, tokens=tokens, history_len=history, floor=0, match=None,
               evidence=Evidence(None, gaps, True, gaps, 1.0), prices=prices, ttls=ttls, settings=SETTINGS)
    assert (d.action, d.reason) == (Action.BYPASS, BypassReason.FIRST_SIGHTING)


@given(tokens=st.integers(1, 100_000), history=st.integers(0, 40), match=matches, evidence=evidence, prices=prices,
       ttls=ttls)
def test_never_costs_more_than_uncached_under_its_own_model(tokens: int, history: int, match, evidence, prices,
                                                             ttls) -> None:
    d = decide(empty=False, tokens=tokens, history_len=history, floor=0, match=match, evidence=evidence,
               prices=prices, ttls=ttls, settings=SETTINGS)
    if d.action in (Action.CREATE, Action.GROW):
        assert d.ttl_s in ttls
        # The agreement it rests on is younger than the TTL it chose.
        assert evidence.agreeing_age is not None and evidence.agreeing_age < d.ttl_s
        new = tokens - match.tokens if d.action is Action.GROW and match is not None else tokens
        reads, gap = reads_of(evidence, history, d.ttl_s, SETTINGS.max_expected_reads)
        gain = net_gain(prices, tokens=tokens, new_tokens=new, reads=reads, mean_gap_s=gap, ttl_s=d.ttl_s)
        assert gain > 0
    if match is not None:
        assert d.action in (Action.HIT, Action.GROW)


@given(gaps=gaps, ttl=st.sampled_from([60.0, 300.0, 3600.0]), prices=prices, tokens=st.integers(1, 100_000))
def test_no_reads_no_gain(gaps: tuple[float, ...], ttl: float, prices, tokens: int) -> None:
    assert net_gain(prices, tokens=tokens, new_tokens=tokens, reads=0.0, mean_gap_s=0.0, ttl_s=ttl) <= 0
    reads = expected_reads(gaps, ttl, 16.0)
    assert 0.0 <= reads <= 16.0
    if all(g >= ttl for g in gaps):
        assert reads == 0.0
