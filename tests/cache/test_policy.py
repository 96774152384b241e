"""The create policy: the pure decision, then a scripted conversation
through the registry and the local simulator (first sighting, agreement,
reuse, growth, expiry) with the exact provider calls each step makes."""

from __future__ import annotations

import asyncio

import pytest

from cache_service.domain.generation import Generator
from cache_service.domain.model import BypassReason, CacheState
from cache_service.domain.policy import MISS, Action, CachedPrefix, Evidence, PolicySettings, censored, decide
from cache_service.domain.ports import CacheTooSmall
from cache_service.domain.pricing import cache_prices
from tests.cache.support import call_over, prefix, scope, view

SETTINGS = PolicySettings(min_prefix_tokens=100, sightings_before_create=1, grow_share=0.25)
GEMINI = cache_prices("named")
ANTHROPIC = cache_prices("marked")
OPENAI = cache_prices("automatic")
# A conversation whose calls come 20 s apart.
BUSY = Evidence(agreeing_age=20.0, gaps=(20.0,) * 8, head_gaps=(20.0,) * 8, continued=1.0)


def _decide(**kw: object) -> Action | BypassReason:
    args = dict(empty=False, tokens=1000, history_len=4, floor=0, match=None, evidence=BUSY, prices=GEMINI,
                ttls=(300.0,), settings=SETTINGS)
    args.update(kw)
    d = decide(**args)  # type: ignore[arg-type]
    return d.reason if d.action is Action.BYPASS else d.action


def test_decision_table() -> None:
    assert _decide(empty=True) is BypassReason.EMPTY_PREFIX
    assert _decide(tokens=99) is BypassReason.BELOW_MIN_TOKENS
    assert _decide(tokens=500, floor=501) is BypassReason.BELOW_MIN_TOKENS
    assert _decide(evidence=Evidence()) is BypassReason.FIRST_SIGHTING
    assert _decide() is Action.CREATE
    assert _decide(match=CachedPrefix(tokens=900, history_len=3)) is Action.HIT
    # 1000 - 700 = 300 uncached > 0.25 * 700 = 175, and the reads repay it: grow.
    assert _decide(match=CachedPrefix(tokens=700, history_len=2)) is Action.GROW
    # The same prefix exactly: never grows, whatever the numbers.
    assert _decide(match=CachedPrefix(tokens=10, history_len=4)) is Action.HIT


def test_an_old_sighting_is_no_agreement() -> None:
    """A record older than the TTL the cache would get says nothing about
    reads before expiry (issue 16: 50 one-call sessions 600 s apart)."""
    sparse = Evidence(agreeing_age=600.0, head_gaps=(600.0,) * 8, continued=0.0)
    assert _decide(evidence=sparse, history_len=0) is BypassReason.FIRST_SIGHTING
    # Given a TTL that outlives the gap, a Gemini cache pays (storage for
    # 600 s costs less than the input a read saves) ...
    d = decide(empty=False, tokens=13_200, history_len=0, floor=0, match=None, evidence=sparse, prices=GEMINI,
               ttls=(300.0, 900.0, 3600.0), settings=SETTINGS)
    assert (d.action, d.ttl_s) == (Action.CREATE, 900.0)
    # ... and an Anthropic one takes the hour (a 2x write, then reads at 0.1x).
    d = decide(empty=False, tokens=13_200, history_len=0, floor=0, match=None, evidence=sparse, prices=ANTHROPIC,
               ttls=(300.0, 3600.0), settings=SETTINGS)
    assert (d.action, d.ttl_s) == (Action.CREATE, 3600.0)


def test_a_cache_nobody_reads_again_is_not_created() -> None:
    # Calls come 20 s apart, but half the scope's requests open a new
    # conversation: one read expected. On Gemini that repays a create; the
    # cost test refuses a grow that adds too little.
    half = Evidence(agreeing_age=20.0, gaps=(20.0,) * 8, head_gaps=(20.0,) * 8, continued=0.5)
    assert _decide(evidence=half) is Action.CREATE
    assert _decide(evidence=half, match=CachedPrefix(tokens=780, history_len=2)) is Action.HIT
    lonely = Evidence(agreeing_age=20.0, gaps=(20.0,) * 8, head_gaps=(20.0,) * 8, continued=0.125)
    assert _decide(evidence=lonely) is BypassReason.FIRST_SIGHTING
    # The head alone is read by every request of the scope.
    assert _decide(evidence=lonely, history_len=0) is Action.CREATE


def test_a_named_grow_pays_for_rewriting_what_its_cache_already_holds() -> None:
    """A Gemini grow writes the whole prefix again: the part its live
    cache holds, which a hit reads at the cached price, is written at the
    input price (issue 21, head-at-min: chats of four calls under a head of
    the minimum grew at their third call, 1,310 tokens written to save
    286 on two reads)."""
    chats = Evidence(agreeing_age=20.0, gaps=(20.0,) * 8, head_gaps=(20.0,) * 8, continued=0.75)
    head = CachedPrefix(tokens=1024, history_len=0)
    assert _decide(evidence=chats, tokens=1310, match=head) is Action.HIT
    # Where the reads repay the rewrite (a long chat), it still grows ...
    assert _decide(tokens=1310, match=head) is Action.GROW
    # ... and a create (nothing held) is costed as before.
    assert _decide(evidence=chats, tokens=1310) is Action.CREATE


# Admission's TTL options on Gemini: the default first, the longer steps,
# then the short step (default / 5).
NAMED_TTLS = (300.0, 600.0, 1200.0, 3600.0, 60.0)


def _ttl(evidence: Evidence, *, tokens: int = 3000, history_len: int = 4) -> tuple[Action, float]:
    d = decide(empty=False, tokens=tokens, history_len=history_len, floor=0, match=None, evidence=evidence,
               prices=GEMINI, ttls=NAMED_TTLS, settings=SETTINGS)
    return d.action, d.ttl_s


def test_a_short_ttl_trims_the_tail_of_a_steady_pace_of_three_gaps() -> None:
    """Rule 6 (issue 21, hourly-bursts): calls 20 s apart in bursts an hour
    apart. A 60 s cache serves a burst as well as a 300 s one, and is
    stored 240 s less after the burst's last call. But one or two gaps
    are as often a fork started a second after its parent, or two
    conversations opening together, as a conversation's pace (issue 21,
    generated workloads: a 60 s cache expired before the next call, 200 s
    later, and a create over the conversation lost)."""
    bursts = (20.0, 20.0, 20.0, 3700.0, 20.0, 20.0, 20.0)
    assert _ttl(Evidence(agreeing_age=20.0, gaps=bursts, head_gaps=bursts, continued=0.8)) == (Action.CREATE, 60.0)
    # Gaps the default outlives (380 s, 400 s) keep a longer TTL.
    slow = (20.0, 380.0, 400.0)
    assert _ttl(Evidence(agreeing_age=400.0, gaps=slow, head_gaps=slow, continued=0.75)) == (Action.CREATE, 600.0)
    fork = Evidence(agreeing_age=1.0, gaps=(1.0, 1.0), head_gaps=(1.0, 1.0), continued=0.8)
    assert _ttl(fork) == (Action.CREATE, 300.0)
    assert _ttl(Evidence(agreeing_age=20.0, gaps=(20.0,), head_gaps=(20.0,), continued=0.5)) == (Action.CREATE, 300.0)
    three = Evidence(agreeing_age=1.0, gaps=(1.0, 1.0, 1.0), head_gaps=(1.0, 1.0, 1.0), continued=0.8)
    assert _ttl(three) == (Action.CREATE, 60.0)
    # Concurrent calls (under a second apart) are reads, not a pace: a
    # burst of one prefix's misses keeps one TTL, so they join one create.
    burst = Evidence(agreeing_age=0.0, gaps=(0.0,) * 8, head_gaps=(0.0,) * 8, continued=1.0)
    assert _ttl(burst) == (Action.CREATE, 300.0)


def test_a_short_ttl_never_makes_a_cache_the_default_would_not() -> None:
    """A TTL below the default only trims a write the default makes: its
    cheaper storage does not turn a losing bet into a create (issue 21:
    one read in four expected, 10,826 tokens written at 60 s, never read)."""
    sparse = (900.0, 2300.0, 5.0)
    ev = Evidence(agreeing_age=5.0, gaps=sparse, head_gaps=sparse, continued=0.6)
    assert _ttl(ev, tokens=10_826, history_len=6) == (Action.BYPASS, 0.0)
    # Nor a first sighting: three of eight of the app's followed within
    # 20 s do not repay a 300 s write, so none at 60 s either ...
    for followed, expected in ((3, (Action.BYPASS, 0.0)), (6, (Action.CREATE, 60.0))):
        firsts = Evidence(app_firsts=(20.0,) * followed + (MISS,) * (8 - followed))
        assert _ttl(firsts, tokens=14_000, history_len=0) == expected, followed
    # ... and six of eight, which do, get the trim.


async def test_named_caches_are_offered_a_short_ttl(harness) -> None:
    """Admission's options: the default first, then the longer steps and,
    on a provider with named caches, the default over five (60 s); a
    caller's TTL alone when it sets one."""
    admission = harness.registry.admission
    assert admission.ttl_options(harness.provider, None) == NAMED_TTLS
    assert admission.ttl_options(harness.provider, 120.0) == (120.0,)


def test_an_automatic_cache_costs_nothing_to_steer() -> None:
    assert _decide(prices=OPENAI, evidence=Evidence(agreeing_age=20.0, gaps=(20.0,), continued=0.5)) is Action.CREATE
    assert _decide(prices=OPENAI, evidence=Evidence()) is BypassReason.FIRST_SIGHTING


def test_sightings_before_create_zero_creates_at_once() -> None:
    eager = PolicySettings(min_prefix_tokens=100, sightings_before_create=0)
    assert _decide(settings=eager, evidence=Evidence()) is Action.CREATE


async def test_scripted_conversation_first_sighting_agreement_reuse_growth_expiry(harness) -> None:
    h = harness
    p = h.provider
    # Turn 1: first sighting, nothing written.
    r = await h.acquire(prefix(2))
    assert (r.info.state, r.info.bypass_reason, r.lease) == (CacheState.BYPASS, BypassReason.FIRST_SIGHTING, "")
    assert p.counts["create"] == 0
    # Turn 2: the prefix grew from the recorded one: it agrees, so create.
    r = await h.acquire(prefix(3))
    assert r.info.state is CacheState.CREATED and r.lease
    assert p.counts["create"] == 1
    created_fp, created_lease = r.info.prefix_fingerprint, r.lease
    assert created_fp == view(3).fingerprint
    # Turn 3: one more exchange (below the growth share): reuse the cache of turn 2.
    r = await h.acquire(prefix(4))
    assert r.info.state is CacheState.HIT
    assert r.info.prefix_fingerprint == created_fp and r.info.uses == 2
    assert p.counts["create"] == 1
    first_lease = r.lease
    # Turn 4: two exchanges past the cache: over 25% uncached, grow.
    r = await h.acquire(prefix(5))
    assert r.info.state is CacheState.GROWN
    assert p.counts["create"] == 2
    grown_fp = r.info.prefix_fingerprint
    # The old cache is still named by two live leases, so it is kept ...
    await h.settle()
    assert p.counts["delete"] == 0 and len(p.live_names()) == 2
    assert await h.registry.release(first_lease)
    await h.settle()
    assert p.counts["delete"] == 0
    # ... until the last of them is released.
    assert await h.registry.release(created_lease)
    await h.settle()
    assert p.counts["delete"] == 1 and len(p.live_names()) == 1
    # Turn 5 reuses the grown cache.
    r = await h.acquire(prefix(5))
    assert r.info.state is CacheState.HIT and r.info.prefix_fingerprint == grown_fp
    # After expiry the cache is deleted, and the next agreeing turn creates
    # again at once: its prefix was seen before.
    h.clock.advance(301)
    await h.registry.sweep()
    await h.assert_in_step()
    assert not p.live_names()
    r = await h.acquire(prefix(6))
    assert r.info.state is CacheState.CREATED
    assert p.counts["create"] == 3
    await h.assert_in_step()


async def test_a_changed_prefix_is_a_first_sighting_again(harness) -> None:
    await harness.acquire(prefix(2))
    assert (await harness.acquire(prefix(3))).info.state is CacheState.CREATED
    other = prefix(3, system={"role": "", "parts": [{"text": "A different instruction. " * 10}]})
    r = await harness.acquire(other)
    assert r.info.bypass_reason is BypassReason.FIRST_SIGHTING
    assert harness.provider.counts["create"] == 1


async def test_gate_uses_prefix_tokens_not_prompt_tokens(harness_factory) -> None:
    """adk-python #5847: the gate compared the whole prompt with the minimum,
    so creates of a small prefix failed forever. Here a small prefix is
    bypassed without any provider call, however large the request."""
    h = await harness_factory(policy=PolicySettings(min_prefix_tokens=10_000))
    small = prefix(1)
    for _ in range(3):
        r = await h.acquire(small)
        assert r.info.bypass_reason is BypassReason.BELOW_MIN_TOKENS
        assert r.info.prefix_tokens == view(1).tokens
    assert h.provider.counts["create"] == 0


async def test_empty_prefix_bypasses_and_the_call_still_works(harness) -> None:
    """adk-python #6363: an empty prefix made every turn fail."""
    empty = prefix(0, system=None, tools=())
    r = await harness.acquire(empty)
    assert r.info.bypass_reason is BypassReason.EMPTY_PREFIX
    reply, info = await Generator(harness.registry).generate(scope(), call_over(empty), r.lease)
    assert reply.content and info.state is CacheState.UNSPECIFIED
    assert harness.provider.counts["create"] == 0


async def test_provider_minimum_is_learned_from_a_too_small_refusal(harness) -> None:
    harness.provider.fail_next("create", CacheTooSmall(min_tokens=50_000))
    await harness.acquire(prefix(2))
    r = await harness.acquire(prefix(3))
    assert r.info.bypass_reason is BypassReason.BELOW_MIN_TOKENS
    assert harness.provider.counts["create"] == 1
    # The refusal taught the floor: no second doomed create.
    r = await harness.acquire(prefix(4))
    assert r.info.bypass_reason is BypassReason.BELOW_MIN_TOKENS
    assert harness.provider.counts["create"] == 1
    assert harness.journal.pending() == []


@pytest.mark.parametrize("turns", [60])
async def test_sixty_turn_conversation_reads_most_prompt_tokens_from_cache(harness_factory, turns: int) -> None:
    """The economics the context service will measure (issue 7): over a long
    conversation most prompt tokens come from the cache."""
    h = await harness_factory(min_cache_tokens=1024, policy=PolicySettings(min_prefix_tokens=1024))
    gen = Generator(h.registry)
    prompt = cached = 0
    for t in range(1, turns + 1):
        p = prefix(t - 1, words=40)
        r = await h.acquire(p)
        reply, _ = await gen.generate(scope(), call_over(p, f"turn {t}"), r.lease)
        if r.lease:
            await h.registry.release(r.lease)
        assert reply.usage is not None
        prompt += reply.usage.prompt_tokens
        cached += reply.usage.cached_prompt_tokens
    assert cached / prompt >= 0.75
    creates = h.provider.counts["create"]
    assert creates < turns / 3
    await h.assert_in_step()


async def test_grow_in_background_leases_the_current_cache_at_once(harness_factory) -> None:
    """With grow_in_background a growing call never waits for the provider's
    create: it leases the cache it has; the next call gets the grown one,
    and the replaced cache goes once no lease names it."""
    h = await harness_factory(policy=SETTINGS, grow_in_background=True)
    p = h.provider
    await h.acquire(prefix(2))
    created = await h.acquire(prefix(3))
    assert created.info.state is CacheState.CREATED  # a first create still waits: nothing to lease yet
    p.create_gate = asyncio.Event()  # the provider holds every create from now on
    growing = await asyncio.wait_for(h.acquire(prefix(5)), 1)
    assert growing.info.state is CacheState.HIT and growing.info.prefix_fingerprint == created.info.prefix_fingerprint
    again = await asyncio.wait_for(h.acquire(prefix(5)), 1)  # joins the grow in flight, still without waiting
    assert again.info.prefix_fingerprint == created.info.prefix_fingerprint
    for _ in range(200):  # the grow's create reaches the provider (journal first)
        if p.counts["create"] == 2:
            break
        await asyncio.sleep(0.005)
    p.create_gate.set()
    await h.settle()
    grown = await h.acquire(prefix(5))
    assert grown.info.state is CacheState.HIT and grown.info.prefix_fingerprint == view(5).fingerprint
    for lease in (created.lease, growing.lease, again.lease):
        await h.registry.release(lease)
    await h.assert_in_step()
    assert len(p.live_names()) == 1 and p.counts["delete"] == 1 and p.counts["create"] == 2  # one grow, shared


def test_a_first_sighting_is_written_only_where_a_read_is_likely() -> None:
    """Rule 7 (issue 16): on Anthropic a fresh scope's first request writes
    a 5-minute mark (0.25x input if unread, 0.9x saved if read); so does a
    second one while the first is pending within its 5 minutes, none once
    first sightings went unread. Gemini and OpenAI never write on the prior alone."""
    fresh = Evidence()
    d = decide(empty=False, tokens=13_200, history_len=0, floor=0, match=None, evidence=fresh, prices=ANTHROPIC,
               ttls=(300.0, 3600.0), settings=SETTINGS)
    assert (d.action, d.ttl_s) == (Action.CREATE, 300.0)
    # A pending one counts as unread once its 5 minutes passed, not before:
    # a wave of starts is not evidence that conversations end.
    assert _decide(evidence=Evidence(first_pending=(300.0,)), prices=ANTHROPIC) is BypassReason.FIRST_SIGHTING
    assert _decide(evidence=Evidence(first_pending=(5.0,) * 16), prices=ANTHROPIC) is Action.CREATE
    assert _decide(evidence=Evidence(firsts=(censored(5.0),) * 16), prices=ANTHROPIC) is Action.CREATE
    assert _decide(evidence=Evidence(firsts=(censored(300.0),)), prices=ANTHROPIC) is BypassReason.FIRST_SIGHTING
    unread = Evidence(firsts=(MISS, MISS), server_firsts=(MISS, MISS))
    assert _decide(evidence=unread, prices=ANTHROPIC) is BypassReason.FIRST_SIGHTING
    assert _decide(evidence=fresh, prices=GEMINI) is BypassReason.FIRST_SIGHTING
    assert _decide(evidence=fresh, prices=OPENAI) is BypassReason.FIRST_SIGHTING
    # Observed followers (sessions that each open with a new head, read 20 s
    # later) make a Gemini create at first sight pay: two of two suffice.
    followed = Evidence(firsts=(20.0, 20.0), server_firsts=(20.0, 20.0))
    assert _decide(evidence=followed, prices=GEMINI) is Action.CREATE
    assert _decide(evidence=Evidence(firsts=(20.0,), server_firsts=(20.0,)), prices=GEMINI) \
        is BypassReason.FIRST_SIGHTING
    # A fresh scope takes its app's rate before the server's.
    app_unread = Evidence(app_firsts=(MISS,) * 4, server_firsts=(20.0,) * 8)
    assert _decide(evidence=app_unread, prices=ANTHROPIC) is BypassReason.FIRST_SIGHTING
    assert _decide(evidence=Evidence(app_firsts=(20.0,) * 4), prices=ANTHROPIC) is Action.CREATE
    # Followed, but only after the TTL: no read, no write.
    late = Evidence(firsts=(600.0,) * 4, server_firsts=(600.0,) * 4)
    assert _decide(evidence=late, prices=ANTHROPIC) is BypassReason.FIRST_SIGHTING
