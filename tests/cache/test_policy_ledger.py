"""Rule 8 of the create policy (domain.policy): each scope's loss account
and the gate it puts on writes, and rule 2's floor judged on what a create
writes. The account is kept from usage as the provider reports it; no
write is made while it is in deficit, so a scope's calls never cost more
than sent plain by more than the tolerance of their input plus the
allowance and one write's premium (and one call's overshoot)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cache_service.domain.model import BypassReason
from cache_service.domain.policy import (
    Action,
    CachedPrefix,
    Evidence,
    Ledger,
    PolicySettings,
    decide,
    premium,
    written_size,
)
from cache_service.domain.pricing import cache_prices

SETTINGS = PolicySettings(min_prefix_tokens=0)
MARKED, NAMED, AUTOMATIC = cache_prices("marked"), cache_prices("named"), cache_prices("automatic")
# A scope whose conversations go on, calls 20 s apart: every create and grow pays.
BUSY = Evidence(agreeing_age=20.0, gaps=(20.0,) * 8, head_gaps=(20.0,) * 8, continued=1.0)


def test_premiums_are_what_a_write_costs_over_plain_in_input_tokens() -> None:
    # Anthropic: 1.25x input for 5 minutes, 2x for the hour.
    assert premium(MARKED, tokens=9000, new_tokens=1000, ttl_s=300.0) == pytest.approx(250.0)
    assert premium(MARKED, tokens=9000, new_tokens=1000, ttl_s=3600.0) == pytest.approx(1000.0)
    # Gemini: the whole cache written at input, read by its creating call at
    # a tenth, stored at 1.00 per Mtok-hour against 0.30 input.
    assert premium(NAMED, tokens=3000, new_tokens=10, ttl_s=3600.0) == pytest.approx(3000 * (0.1 + 1 / 0.3))
    # OpenAI bills no write (gpt-5.6 on bills a quarter more).
    assert premium(AUTOMATIC, tokens=3000, new_tokens=3000, ttl_s=300.0) == 0.0
    assert premium(cache_prices("automatic", model="gpt-5.6"), tokens=3000, new_tokens=3000,
                   ttl_s=300.0) == pytest.approx(750.0)


def test_a_marked_account_books_reads_against_write_premiums() -> None:
    ledger = Ledger(allowance=1000.0, tolerance=0.02)
    assert ledger.balance("s") == 1000.0
    assert ledger.credit("s", 5000) == pytest.approx(1100.0)
    # Wrote 4000 tokens for 5 minutes: a quarter of input over plain.
    assert ledger.settle("s", MARKED, cached=0, written=4000, ttl_s=300.0) == pytest.approx(100.0)
    # The next call read them: 0.9 of input saved each.
    assert ledger.settle("s", MARKED, cached=4000, written=0, ttl_s=300.0) == pytest.approx(3700.0)
    # An hour's write costs as much again as input.
    assert ledger.settle("s", MARKED, cached=0, written=1000, ttl_s=3600.0) == pytest.approx(2700.0)
    assert ledger.balance("other") == 1000.0


def test_a_named_account_pays_storage_once_per_stretch_of_time() -> None:
    ledger = Ledger(allowance=0.0, tolerance=0.0)
    hour = 3600.0
    # Created at 0 for an hour: written (1.0), read by its call (0.1), an hour stored (1/0.3).
    after_create = ledger.settle("s", NAMED, cached=3000, written=3000, ttl_s=hour, entry_id="e", entry_tokens=3000,
                                 created=True, now=0.0)
    assert after_create == pytest.approx(-3000 * (0.1 + 1 / 0.3))
    # A hit 600 s later may push the expiry 600 s further: only that is new storage.
    after_hit = ledger.settle("s", NAMED, cached=3000, written=0, ttl_s=hour, entry_id="e", entry_tokens=3000,
                              now=600.0)
    assert after_hit - after_create == pytest.approx(3000 * 0.9 - 3000 * (600 / hour) / 0.3)


def test_accounts_are_bounded_and_a_dropped_scope_opens_afresh() -> None:
    ledger = Ledger(allowance=10.0, tolerance=0.0, max_scopes=2)
    for name in ("a", "b", "c"):
        ledger.settle(name, MARKED, cached=0, written=400, ttl_s=300.0)
    assert (ledger.balance("a"), ledger.balance("b"), ledger.balance("c")) == (10.0, -90.0, -90.0)


def test_an_account_in_deficit_writes_nothing_and_grows_nothing() -> None:
    args = dict(empty=False, tokens=8000, history_len=6, floor=1024, evidence=BUSY, prices=MARKED,
                ttls=(300.0, 3600.0), settings=SETTINGS)
    assert decide(match=None, budget=0.0, **args).action is Action.CREATE  # type: ignore[arg-type]
    stopped = decide(match=None, budget=-1.0, **args)  # type: ignore[arg-type]
    assert (stopped.action, stopped.reason) == (Action.BYPASS, BypassReason.FIRST_SIGHTING)
    small = CachedPrefix(tokens=2000, history_len=2)
    assert decide(match=small, budget=0.0, **args).action is Action.GROW  # type: ignore[arg-type]
    assert decide(match=small, budget=-1.0, **args).action is Action.HIT  # type: ignore[arg-type]
    # A hit costs no write: it is made in deficit too.
    assert decide(match=CachedPrefix(tokens=7900, history_len=6), budget=-1.0, **args).action is Action.HIT  # type: ignore[arg-type]


def test_the_floor_is_judged_on_what_a_create_writes() -> None:
    """A MARKED create writes through to the request's end: a head just
    under the minimum whose first request clears it is written; a NAMED
    cache holds the prefix only."""
    assert written_size(MARKED, 1000, 1100) == 1100
    assert written_size(NAMED, 1000, 1100) == 1000
    args = dict(empty=False, tokens=1000, history_len=0, floor=1024, match=None, evidence=Evidence(),
                ttls=(300.0,), settings=SETTINGS)
    assert decide(prices=MARKED, request_tokens=1100, **args).action is Action.CREATE  # type: ignore[arg-type]
    assert decide(prices=MARKED, **args).reason is BypassReason.BELOW_MIN_TOKENS  # type: ignore[arg-type]
    assert decide(prices=NAMED, request_tokens=1100, **args).reason is BypassReason.BELOW_MIN_TOKENS  # type: ignore[arg-type]


gaps = st.lists(st.floats(min_value=0.0, max_value=7200.0), max_size=12).map(tuple)
evidence = st.builds(Evidence, st.none() | st.floats(min_value=0.0, max_value=7200.0), gaps, st.booleans(), gaps,
                     st.floats(min_value=0.0, max_value=1.0))
prices = st.sampled_from(["named", "marked", "automatic"]).map(cache_prices)
ttls = st.lists(st.sampled_from([300.0, 600.0, 1200.0, 3600.0]), min_size=1, max_size=3, unique=True).map(tuple)


@given(tokens=st.integers(1, 60_000), extra=st.integers(0, 20_000), history=st.integers(0, 30), evidence=evidence,
       prices=prices, ttls=ttls, budget=st.floats(min_value=-1e5, max_value=1e5),
       match=st.none() | st.builds(CachedPrefix, st.integers(1, 60_000), st.integers(0, 30)))
def test_no_write_is_made_while_the_account_is_in_deficit(tokens: int, extra: int, history: int, evidence, prices,
                                                          ttls, budget: float, match) -> None:
    d = decide(empty=False, tokens=tokens, history_len=history, floor=0, match=match, evidence=evidence,
               prices=prices, ttls=ttls, settings=SETTINGS, request_tokens=tokens + extra, budget=budget)
    if d.action in (Action.CREATE, Action.GROW):
        assert budget >= 0 and d.ttl_s in ttls
    # The same request with a covering account decides the same when it does not write.
    rich = decide(empty=False, tokens=tokens, history_len=history, floor=0, match=match, evidence=evidence,
                  prices=prices, ttls=ttls, settings=SETTINGS, request_tokens=tokens + extra, budget=1e18)
    if rich.action not in (Action.CREATE, Action.GROW):
        assert d == rich


@given(calls=st.lists(st.tuples(st.integers(100, 50_000), st.integers(0, 50_000), st.integers(0, 50_000),
                                st.sampled_from([300.0, 3600.0])), max_size=40),
       allowance=st.floats(min_value=0.0, max_value=50_000.0), tolerance=st.floats(min_value=0.0, max_value=0.1))
def test_a_scope_that_writes_only_out_of_deficit_never_loses_more_than_its_bound(calls, allowance: float,
                                                                                 tolerance: float) -> None:
    """A MARKED scope that writes only while its account is not in deficit
    (as the policy gates writes) costs at most the plain bill times (1 +
    tolerance) plus the allowance plus its largest write's premium,
    whatever its calls read."""
    ledger = Ledger(allowance, tolerance)
    plain = spent = largest = 0.0
    p = MARKED
    for prompt, written, cached, ttl in calls:
        written, cached = min(written, prompt), min(cached, prompt - min(written, prompt))
        if ledger.credit("s", prompt) < 0:
            written = 0  # the policy does not write
        largest = max(largest, premium(p, tokens=prompt, new_tokens=written, ttl_s=ttl))
        write = p.write_long if ttl > p.long_after_s else p.write
        plain += prompt * p.input
        spent += (prompt - written - cached) * p.input + written * write + cached * p.cached
        ledger.settle("s", p, cached=cached, written=written, ttl_s=ttl)
        assert ledger.balance("s") >= -largest - 1e-6 * max(1.0, plain)
    assert spent <= plain * (1 + tolerance) + (allowance + largest) * p.input + 1e-6 * max(1.0, plain)

