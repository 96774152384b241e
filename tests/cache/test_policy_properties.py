"""Invariants of the pure create policy (domain.policy), over any prefix,
cache, evidence, price shape and TTL options: a first sighting is written
only when its expected gain under the observed follow rate (and the
prior) is positive, never on an automatic cache nor, without observed
followers, on a named one; nothing is created or grown that costs more
than it saves in expectation under the policy's own model (a create
rests on observed gaps that bring reads within its TTL); a TTL that only
outlives long gaps is credited one read per expected crossing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cache_service.domain.model import BypassReason
from cache_service.domain.policy import (
    MISS,
    Action,
    CachedPrefix,
    Evidence,
    PolicySettings,
    censored,
    decide,
    expected_reads,
    follow_chance,
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


outcomes = st.lists(st.sampled_from([0.0, 20.0, 250.0, 600.0, 3000.0, MISS, censored(10.0), censored(400.0)]),
                    max_size=16).map(tuple)
ages = st.lists(st.sampled_from([0.0, 10.0, 120.0, 300.0, 900.0, 4000.0]), max_size=16).map(tuple)
firsts = st.builds(Evidence, st.none(), gaps, st.booleans(), gaps, st.floats(min_value=0.0, max_value=1.0), outcomes,
                   ages, outcomes, outcomes)


@given(tokens=st.integers(1, 100_000), history=st.integers(0, 40), evidence=firsts, prices=prices, ttls=ttls)
def test_a_first_sighting_writes_only_when_its_expected_gain_is_positive(tokens: int, history: int, evidence,
                                                                         prices, ttls) -> None:
    """Rule 7: a first sighting is written only when the chance that it is
    followed within the TTL makes the expected read repay the write;
    never on an automatic cache, and on a named one never unless an
    observed first sighting was followed within that TTL."""
    d = decide(empty=False, tokens=tokens, history_len=history, floor=0, match=None, evidence=evidence,
               prices=prices, ttls=ttls, settings=SETTINGS)
    if d.action is not Action.CREATE:
        assert (d.action, d.reason) == (Action.BYPASS, BypassReason.FIRST_SIGHTING)
        return
    assert prices.kind != "automatic" and d.ttl_s in ttls
    named = prices.kind == "named"
    p = follow_chance(evidence, d.ttl_s, SETTINGS.first_sighting_prior_named if named else SETTINGS.first_sighting_prior,
                      SETTINGS.first_sighting_weight_named if named else SETTINGS.first_sighting_weight)
    assert 0.0 < p <= 1.0
    inside = [g for g in evidence.firsts + evidence.app_firsts + evidence.server_firsts if 0 <= g < d.ttl_s]
    gap = sum(inside) / len(inside) if inside else 0.0
    assert net_gain(prices, tokens=tokens, new_tokens=tokens, reads=p, mean_gap_s=gap, ttl_s=d.ttl_s) > 0
    if named:
        assert inside, "a named cache is created at first sight only after observed followers"


@given(outcomes=outcomes, pending=ages, server=outcomes, ttl=st.sampled_from([60.0, 300.0, 3600.0]),
       age=st.sampled_from([0.0, 30.0, 299.0, 300.0, 3600.0]))
def test_the_observed_rate_overrides_the_prior(outcomes, pending, server, ttl: float, age: float) -> None:
    """More observed misses (or sightings pending, or dropped, past the
    TTL) never raise the chance; one pending or dropped within it changes
    nothing; more observed followers never lower it."""
    ev = Evidence(firsts=outcomes, first_pending=pending, server_firsts=server)
    p = follow_chance(ev, ttl, 0.5, 0.5)
    assert 0.0 <= p <= 1.0
    assert follow_chance(Evidence(firsts=(*outcomes, MISS), first_pending=pending, server_firsts=server),
                         ttl, 0.5, 0.5) <= p
    for more in (Evidence(firsts=outcomes, first_pending=(*pending, age), server_firsts=server),
                 Evidence(firsts=(*outcomes, censored(age)), first_pending=pending, server_firsts=server)):
        if age >= ttl:
            assert follow_chance(more, ttl, 0.5, 0.5) <= p
        else:
            assert follow_chance(more, ttl, 0.5, 0.5) == p
    assert follow_chance(Evidence(firsts=(*outcomes, 0.0), first_pending=pending, server_firsts=server),
                         ttl, 0.5, 0.5) >= p


@given(tokens=st.integers(1, 100_000), history=st.integers(0, 40), match=matches, evidence=evidence, prices=prices,
       ttls=ttls)
def test_never_costs_more_than_uncached_under_its_own_model(tokens: int, history: int, match, evidence, prices,
                                                             ttls) -> None:
    d = decide(empty=False, tokens=tokens, history_len=history, floor=0, match=match, evidence=evidence,
               prices=prices, ttls=ttls, settings=SETTINGS)
    if d.action in (Action.CREATE, Action.GROW):
        assert d.ttl_s in ttls
        if evidence.agreeing_age is None:
            return  # a first sighting: test_a_first_sighting_writes_only_when_its_expected_gain_is_positive
        new = tokens - match.tokens if d.action is Action.GROW and match is not None else tokens
        # The pace is the default's (ttls[0]); an option below it, its own.
        reads, gap = reads_of(evidence, history, d.ttl_s, SETTINGS.max_expected_reads, ttls[0])
        # It rests on observed gaps that bring reads within the TTL chosen
        # (an agreement older than the TTL is one such gap, no more).
        assert reads > 0
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


@given(gaps=gaps, ttls=ttls, go_on=st.floats(min_value=0.0, max_value=1.0))
def test_a_longer_ttl_is_credited_crossings_not_a_pace(gaps: tuple[float, ...], ttls, go_on: float) -> None:
    """Rule 6: reads at the pace of the shortest option are the same for
    every TTL; a longer one adds at most one read per gap it outlives that
    the shortest does not, and a TTL outliving no gap adds none."""
    short = min(ttls)
    ev = Evidence(0.0, gaps, False, gaps, go_on)
    base, _ = reads_of(ev, 3, short, 16.0, short)
    for ttl in ttls:
        reads, _ = reads_of(ev, 3, ttl, 16.0, short)
        assert base <= reads <= base + 16.0
        if not any(short <= g < ttl for g in gaps):
            assert reads == base
