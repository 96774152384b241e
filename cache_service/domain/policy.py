"""The create policy: when a prefix is worth a provider cache, and for how
long (see docs/ARCHITECTURE.md, "Cache service").

A cache pays only through later reads. What it costs depends on the
provider's cache kind (``CachePrices``, from domain.pricing): a NAMED cache
(Gemini) is written at the input price and kept at a storage price per
token-hour; a MARKED prefix (Anthropic) costs a write premium (1.25x input
for 5 minutes, 2x for an hour) and no storage; an AUTOMATIC one (OpenAI)
costs nothing to write, so a lease there only steers. A read costs the
cached price (a tenth of input) instead of the input price.

The default policy (``agentctx``):

1. **Empty prefix** (no history, tools or system instruction): BYPASS
   EMPTY_PREFIX.
2. **Small prefix**: below ``floor`` estimated tokens (the largest of
   ``min_prefix_tokens``, the provider's minimum for the model and what its
   refusals taught), BYPASS BELOW_MIN_TOKENS without a provider call. The
   floor is compared with what the create would write (``written_size``):
   the *prefix's* tokens on a NAMED cache (adk-python #5847), the whole
   request's on a MARKED one, whose create writes through to the
   request's end (a head just under the minimum with the first call's
   input over it is written, not sent plain; the caller passes
   ``request_tokens`` on GenerateContent with ``acquire``).
3. **Reuse**: the live cache over the longest leading part of the prefix
   is a HIT, unless growing it repays (rule 5).
4. **Evidence**: every request records its prefix and its head (model,
   system instruction, tools) with the time (``Evidence``). A request
   *agrees* with a recorded prefix that is a leading part of it or equal
   to it and younger than the longest TTL option (the store's horizon).
   With no agreeing record the request is a first sighting (rule 7).
   The scope's recent arrivals say how often a cache of TTL ``L`` would be
   read again before it expires (``reads_of``): a cache of the head alone
   by any request of the scope, one of a conversation's prefix by that
   conversation's next call, which comes as often as the scope's requests
   have a history, after one of the scope's conversation gaps (the
   agreement's age is one of them: an old record alone brings no read
   within a short TTL). With ``x`` the chance that a read follows within
   the default option (``ttls[0]``; a shorter one, within itself),
   ``x / (1 - x)`` reads are expected (each read
   refreshes the cache), at most ``max_expected_reads``; a longer ``L``
   adds the crossings of rule 6.
5. **Create and grow** only when the expected reads repay what the cache
   costs (``net_gain``): for a create, the write (and, NAMED, the storage
   from now to the expected last read plus one TTL) against the input
   price saved on each read; for a grow, the same over the tokens the live
   cache does not hold (at least ``grow_share`` of them; any, over a
   MARKED cache of the head alone: that grow writes only the conversation,
   which its calls then write through), the new cache's
   full write and storage counted (NAMED: the part the live cache holds
   is written again at the input price where a hit reads it at the cached
   one). Otherwise BYPASS FIRST_SIGHTING (no create) or HIT (no grow).
6. **TTL**: when the caller sets none, the TTL is the one of ``ttls`` (the
   provider's options) with the largest expected gain: sessions that
   return after 10 minutes get a cache that lives that long, where storage
   allows. A cache kept through a long gap (one the default option does
   not outlive) pays storage for it; letting it expire pays a write at
   the next arrival: each such crossing is credited one read (the
   cheaper of the two savings) less its storage, as often as the scope's
   pauses were such gaps, the conversation's unseen end counted as
   ``END_WEIGHT`` of a pause it does not outlive; the longer TTL's tail
   after the last read is storage too. Bursts 15 minutes apart on Gemini:
   a crossing gains 0.07x input (a read saved, 0.9x, less 900 s of
   storage, 0.83x), less over five bursts than the 1,200 s TTL's longer
   tail costs, so the cache expires between bursts. A NAMED provider
   also offers a TTL below the default (admission: the default over
   five, 60 s), weighed only as a trim of the default's tail: when the
   default is the best of the other options and its gain is positive
   (so it never makes a cache, nor a first-sighting write, the default
   would not, nor cuts one kept through longer gaps), and, but for a
   first sighting, once the cache's reads have ``SHORT_TTL_MIN_GAPS``
   (3) observed gaps of at least ``CONCURRENT_S`` (1 s: one or two are
   as often a fork or a wave of starts as a pace, and concurrent calls
   none; a burst of one prefix's misses so keeps one TTL, one create).
   Calls 20 s apart then get a 60 s cache, refreshed on hits past half
   of it, stored about 60 s after the last call instead of 300.
7. **First sighting**: written only when the chance ``p`` that an
   agreeing request follows within the TTL (``follow_chance``: the
   scope's observed first sightings, how many were followed within the
   TTL, a still pending one counted as not followed once the TTL has
   passed since it was seen (before that it is no evidence either way: a
   wave of new conversations is not a sign that conversations end),
   shrunk towards
   the app's rate, or the server's where the app has none, and that
   towards the prior) makes ``p`` expected
   reads repay the write (``net_gain``). MARKED (Anthropic): the prior is
   ``first_sighting_prior`` (0.5: agents loop), so a fresh scope's first
   request writes a 5-minute mark (costs 0.25x input unread, saves 0.9x
   read); so does a second one while the first is pending within its
   5 minutes (a wave of starts: no evidence yet), but none once one went
   5 minutes unfollowed (0.5 x 0.5 / 1.5 = 0.17 < 0.28, the
   break-even). NAMED (Gemini): the prior is ``first_sighting_prior_named``
   (0: ADK, the naive policy there, never writes at first sight; with 0.5
   the same sum gives +0.06x input per prefix token, less than the
   create round trip and journaled resource it adds to the first call is
   worth), worth ``first_sighting_weight_named`` (4) outcomes: only
   observed followers (two of two, e.g. sessions that each open with a
   new system prompt) make a create at first sight (break-even p = 0.42
   at 5 minutes), none without one. AUTOMATIC: never (the
   provider writes anyway; the lease would only steer). Otherwise BYPASS
   FIRST_SIGHTING.
8. **Loss account**: every scope has one (``Ledger``, kept by admission
   from each leased call's usage): it opens at ``loss_allowance_tokens``,
   gains ``loss_tolerance`` of every call's input and the input its reads
   saved, and loses what its writes and storage cost over input. While
   it is in deficit (``budget`` < 0) nothing is created or grown (BYPASS
   FIRST_SIGHTING, or HIT): however wrong the evidence, a scope's calls
   never cost more than uncached by more than the tolerance of their
   input, the allowance and the one bet (``premium``) that took the
   account below zero, plus what hits add (booked, not gated).

The ``adk`` variant (``create_policy = "adk"``) reproduces adk-python's
ContextCacheConfig (2.13) for comparisons such as bench/economics, in a
scope that holds one agent of one session (ADK keeps its cache record per
agent on the session): a request agrees only with the *previous* request
of the scope (``Evidence.previous_agrees``, ADK's fingerprint over the
previous request's cacheable contents), however old, and then creates over
its own prefix (the previous count or the current one, the larger);
``min_tokens`` is 0, the only floors are the provider's and ADK's per
model (``adk_floor``: 2,048 tokens for gemini-2.5, 4,096 for gemini-3); a
valid cache is never grown, and once it has served ``refresh_after_uses``
invocations it is re-created on the next (``CachedPrefix.invocations``,
counted as ADK counts them: domain.keys.invocation_count).
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cache_service.domain.model import BypassReason

AGENTCTX = "agentctx"
ADK = "adk"
# adk-python's explicit-cache floors by model name (gemini_context_cache_manager).
_ADK_FLOORS = (("gemini-2.5-", 2048), ("gemini-3", 4096))


@dataclass(frozen=True)
class PolicySettings:
    min_prefix_tokens: int = 1024
    # 0: create at once, without evidence (the cost test still applies).
    sightings_before_create: int = 1
    grow_share: float = 0.25
    variant: str = AGENTCTX
    # adk only: invocations a cache serves before it is re-created.
    refresh_after_uses: int = 10
    # The cap on expected reads: no more than the gaps a scope keeps.
    max_expected_reads: float = 16.0
    # Rule 7: the prior chance that a first sighting is followed by an
    # agreeing request within the TTL (MARKED; NAMED its own), and how many
    # observed outcomes it is worth.
    first_sighting_prior: float = 0.5
    first_sighting_weight: float = 0.5
    first_sighting_prior_named: float = 0.0
    first_sighting_weight_named: float = 4.0
    # Rule 8: a scope's loss allowance and the share of its calls' input it
    # may lose besides, in input-token equivalents (``Ledger``).
    loss_allowance_tokens: float = 4096.0
    loss_tolerance: float = 0.02
    # How long an account is kept after its last booking (at least the
    # longest TTL): then the scope opens afresh.
    loss_account_keep_s: float = 86400.0


class Action(enum.Enum):
    BYPASS = "BYPASS"
    HIT = "HIT"
    CREATE = "CREATE"
    GROW = "GROW"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: BypassReason = BypassReason.UNSPECIFIED
    ttl_s: float = 0.0  # CREATE and GROW: the TTL chosen


@dataclass(frozen=True)
class CachedPrefix:
    """What the policy needs to know of the best matching live cache."""

    tokens: int
    history_len: int
    uses: int = 0
    ttl_s: float = 300.0
    # adk: invocations served, the current one included.
    invocations: int = 0


@dataclass(frozen=True)
class CachePrices:
    """A cache kind's prices per token, in any one unit (domain.pricing)."""

    kind: str  # a domain.ports.CacheKind value: "named", "marked" or "automatic"
    input: float
    cached: float
    write: float
    write_long: float  # a write for a TTL above ``long_after_s``
    long_after_s: float
    storage_hour: float


@dataclass(frozen=True)
class Evidence:
    """What the scope's recorded requests say about this one, this one's
    own arrival included.

    ``agreeing_age``: seconds since the longest recorded prefix that is a
    leading part of (or equal to) this one was last seen; None if none is.
    ``gaps``: the recent ``agreeing_age`` of requests with a history (a
    conversation's gaps between its calls). ``previous_agrees``: the
    scope's previous request's prefix is a leading part of this one (adk).
    ``head_gaps``: the recent gaps between any two requests of the scope
    with this head (what a cache of the head alone is read by).
    ``continued``: the share of the scope's recent requests with a history
    (how often a call is followed by another of its conversation).
    ``firsts``: the scope's recent first sightings that are resolved, each
    the seconds until a request agreed with it, ``MISS`` (none within
    the horizon) or, below 0, ``-a``: dropped unresolved ``a`` seconds
    after it was seen (``censored``; stores no longer drop pending ones,
    but Redis may hold such outcomes from earlier versions); ``first_pending``: the ages of those
    not resolved yet (seconds since each was seen);
    ``app_firsts``, ``server_firsts``: the same outcomes over the app's
    scopes and over every scope (rule 7)."""

    agreeing_age: float | None = None
    gaps: tuple[float, ...] = ()
    previous_agrees: bool = False
    head_gaps: tuple[float, ...] = ()
    continued: float = 0.0
    firsts: tuple[float, ...] = ()
    first_pending: tuple[float, ...] = ()
    server_firsts: tuple[float, ...] = ()
    app_firsts: tuple[float, ...] = ()


# A first sighting no request agreed with within the horizon.
MISS = 1e18


def censored(age_s: float) -> float:
    """The outcome of a first sighting dropped unresolved ``age_s`` seconds
    after it was seen (a store's bound): not followed within ``age_s``,
    unknown after. Negative, and never -0.0, so that ``outcome < 0`` tells it."""
    return -max(age_s, 1e-6)
# The conversation's end among the breaks in its pace (reads_of): half a
# gap (Jeffreys' prior), as it is never observed.
END_WEIGHT = 0.5
# Rule 6: a TTL below the default is weighed only once the cache's reads
# have this many observed gaps (one or two are as often a fork or a wave of
# starts as a conversation's pace).
SHORT_TTL_MIN_GAPS = 3
# Gaps shorter than this are concurrent calls (a fan-out, a retry), not a
# pace: they count as reads, not towards SHORT_TTL_MIN_GAPS, so a burst of
# one prefix's concurrent misses does not change its TTL midway (each TTL
# is its own create).
CONCURRENT_S = 1.0


def follow_chance(evidence: Evidence, ttl_s: float, prior: float, weight: float) -> float:
    """The chance that a first sighting is followed by an agreeing request
    within ``ttl_s``: the scope's outcomes followed that soon, over those
    known to have been followed or not within ``ttl_s`` (a pending or
    censored one only once ``ttl_s`` has passed without a follower: before
    that it says nothing, so a wave of new conversations does not read as
    conversations ending), shrunk by ``weight`` outcomes towards the rate
    of the app's scopes (falling back to the server-wide one where the app
    has none yet), itself shrunk towards ``prior``."""
    def shrink(outcomes: tuple[float, ...], pending: tuple[float, ...], towards: float) -> float:
        followed = sum(1 for g in outcomes if 0 <= g < ttl_s)
        unfollowed = sum(1 for g in outcomes if g >= ttl_s or -g >= ttl_s) + sum(1 for a in pending if a >= ttl_s)
        return (followed + weight * towards) / (followed + unfollowed + weight)
    wider = evidence.app_firsts or evidence.server_firsts
    return shrink(evidence.firsts, evidence.first_pending, shrink(wider, (), prior))


def first_sighting(prices: CachePrices, ttls: Sequence[float], evidence: Evidence, settings: PolicySettings, *,
                   tokens: int) -> tuple[float, float]:
    """(gain, ttl) of writing a first sighting (rule 7): ``p`` reads (only
    the first follower's, a lower bound), at the followers' mean gap."""
    best = (float("-inf"), ttls[0])
    named = prices.kind == "named"
    prior = settings.first_sighting_prior_named if named else settings.first_sighting_prior
    weight = settings.first_sighting_weight_named if named else settings.first_sighting_weight
    if prices.kind == "automatic" or weight <= 0:
        return best

    def gain(ttl: float) -> float:
        p = follow_chance(evidence, ttl, prior, weight)
        inside = [g for g in evidence.firsts + evidence.app_firsts + evidence.server_firsts if 0 <= g < ttl]
        gap = sum(inside) / len(inside) if inside else 0.0
        return net_gain(prices, tokens=tokens, new_tokens=tokens, reads=p, mean_gap_s=gap, ttl_s=ttl)

    # Options below the default only trim a write the default makes (rule 6).
    return _with_trims(best, ttls, gain, True)


def written_size(prices: CachePrices, tokens: int, request_tokens: int) -> int:
    """What a create would write, which the floor is judged on (rule 2): a
    MARKED create writes through to the request's end (``request_tokens``,
    when known), any other the prefix."""
    return max(tokens, request_tokens) if prices.kind == "marked" else tokens


def premium(prices: CachePrices, *, tokens: int, new_tokens: int, ttl_s: float) -> float:
    """What a write risks (rule 8: the most one bet can lose), in input-token equivalents: what it
    costs over sending the same tokens plain, before any later read. MARKED
    (and an AUTOMATIC one that bills writes): the premium on the
    ``new_tokens`` written; NAMED: the whole ``tokens`` of the new cache
    written and stored for ``ttl_s``, less what its creating call saves by
    reading it."""
    if prices.kind == "named":
        stored = ttl_s / 3600.0 * prices.storage_hour
        return tokens * (prices.write + prices.cached + stored - prices.input) / prices.input
    write = prices.write_long if ttl_s > prices.long_after_s else prices.write
    return max(0.0, new_tokens * (write - prices.input) / prices.input)


@dataclass(frozen=True)
class Booking:
    """One change of a scope's loss account (rule 8), in input-token
    equivalents: ``amount`` added; for a NAMED cache's use (``entry_id``)
    also the storage not paid yet, ``storage_rate`` per second from where
    its storage was paid until (``start`` for a create, which pays from
    ``now``; else the account's record for the entry, or ``now``) to
    ``until``, which then becomes that record. Pure data: the memory store
    applies it with ``Account.apply``, the Redis store with a script doing
    the same."""

    amount: float
    now: float = 0.0
    entry_id: str = ""
    storage_rate: float = 0.0
    until: float = 0.0
    start: float | None = None


# NAMED entries whose paid storage an account remembers.
PAID_KEPT = 64


@dataclass
class Account:
    balance: float
    touched: float = 0.0  # wall time of the last booking
    paid_until: OrderedDict[str, float] = field(default_factory=OrderedDict)  # NAMED entry -> storage paid until

    def apply(self, booking: Booking) -> float:
        self.balance += booking.amount
        self.touched = booking.now
        if booking.entry_id:
            start = booking.start if booking.start is not None else self.paid_until.get(booking.entry_id, booking.now)
            self.balance -= booking.storage_rate * max(0.0, booking.until - start)
            self.paid_until.pop(booking.entry_id, None)
            self.paid_until[booking.entry_id] = booking.until
            while len(self.paid_until) > PAID_KEPT:
                self.paid_until.popitem(last=False)
        return self.balance


def credit_booking(tolerance: float, prompt: int, now: float = 0.0) -> Booking:
    """A call of the scope (leased or not) of ``prompt`` tokens: ``tolerance`` of its input."""
    return Booking(tolerance * prompt, now)


def settle_booking(prices: CachePrices, *, cached: int, written: int, ttl_s: float, entry_id: str = "",
                   entry_tokens: int = 0, created: bool = False, now: float = 0.0) -> Booking:
    """One leased call's usage: what its reads saved against what its
    writes cost beyond input and, NAMED, the storage from now to the expiry
    a use may push out, not paid yet. ``written``: the tokens the call
    wrote (a NAMED create's included); ``created``: the call's lease
    created or grew its NAMED cache."""
    saved = cached * (prices.input - prices.cached)
    if prices.kind == "named":
        return Booking((saved - written * prices.write) / prices.input, now, entry_id,
                       entry_tokens * prices.storage_hour / 3600.0 / prices.input, now + ttl_s,
                       now if created else None)
    write = prices.write_long if ttl_s > prices.long_after_s else prices.write
    return Booking((saved - written * max(0.0, write - prices.input)) / prices.input, now)


class Ledger:
    """Rule 8: what each scope's leased calls cost over sending them plain,
    from the provider's usage, in input-token equivalents. An account
    opens at ``allowance``, gains ``tolerance`` of every call's prompt
    (``credit``, as the call is decided) and what its reads saved, and
    loses what its writes and storage cost beyond input; the policy makes
    no write while the account is in deficit (and the registry leases no
    MARKED head below the floor then). So a scope's calls never
    cost more than sent plain by more than ``tolerance`` of their input
    plus ``allowance`` and one write's ``premium`` (the bet that took the
    account below zero), and what hits add after (a write-through's tail,
    the storage a NAMED hit's refresh extends: counted, not gated).

    This is the accounts' table in one process (the memory store's; the
    Redis store keeps the same per scope in Redis, so replicas share
    them): bounded, ``max_scopes`` accounts, least recently used dropped,
    and an account not booked for ``keep_s`` seconds (wall) forgotten; a
    dropped or forgotten scope opens afresh."""

    def __init__(self, allowance: float, tolerance: float, max_scopes: int = 65536,
                 keep_s: float = float("inf")) -> None:
        self.allowance = allowance
        self.tolerance = tolerance
        self.keep_s = keep_s
        self._max_scopes = max_scopes
        self._accounts: OrderedDict[str, Account] = OrderedDict()

    def _live(self, scope_fp: str, now: float, keep_s: float) -> Account | None:
        account = self._accounts.get(scope_fp)
        if account is not None and now - account.touched >= keep_s:
            del self._accounts[scope_fp]
            return None
        return account

    def balance(self, scope_fp: str, now: float = 0.0, *, opening: float | None = None,
                keep_s: float | None = None) -> float:
        account = self._live(scope_fp, now, self.keep_s if keep_s is None else keep_s)
        if account is None:
            return self.allowance if opening is None else opening
        return account.balance

    def book(self, scope_fp: str, booking: Booking, *, opening: float | None = None,
             keep_s: float | None = None) -> float:
        """Applies ``booking`` to the scope's account; returns the new balance."""
        account = self._live(scope_fp, booking.now, self.keep_s if keep_s is None else keep_s)
        self._accounts.pop(scope_fp, None)
        if account is None:
            account = Account(self.allowance if opening is None else opening)
        self._accounts[scope_fp] = account
        while len(self._accounts) > self._max_scopes:
            self._accounts.popitem(last=False)
        return account.apply(booking)

    def credit(self, scope_fp: str, prompt: int, now: float = 0.0) -> float:
        """Books a call of the scope (leased or not) of ``prompt`` tokens:
        ``tolerance`` of its input. Returns the new balance."""
        return self.book(scope_fp, credit_booking(self.tolerance, prompt, now))

    def settle(self, scope_fp: str, prices: CachePrices, *, cached: int, written: int, ttl_s: float,
               entry_id: str = "", entry_tokens: int = 0, created: bool = False, now: float = 0.0) -> float:
        """Books one leased call's usage (``settle_booking``); returns the scope's new balance."""
        return self.book(scope_fp, settle_booking(prices, cached=cached, written=written, ttl_s=ttl_s,
                                                  entry_id=entry_id, entry_tokens=entry_tokens, created=created,
                                                  now=now))


def adk_floor(model: str) -> int:
    name = model.rsplit("/", 1)[-1]
    return next((floor for start, floor in _ADK_FLOORS if name.startswith(start)), 0)


def expected_reads(gaps: Sequence[float], ttl_s: float, cap: float, go_on: float = 1.0) -> float:
    """Reads before expiry of a cache of ``ttl_s`` refreshed by each read,
    if each next request comes with probability ``go_on``, after one of
    the observed gaps: a read follows a read with probability
    ``x = go_on * q`` (``q`` the share of gaps below ``ttl_s``), so
    ``x / (1 - x)`` of them, at most ``cap``."""
    if not gaps:
        return 0.0
    x = go_on * sum(1 for g in gaps if g < ttl_s) / len(gaps)
    return cap if x >= 1.0 else min(cap, x / (1.0 - x))


def pace_gaps(evidence: Evidence, history_len: int) -> tuple[float, ...]:
    """The observed gaps between the reads of a cache over a prefix of
    ``history_len`` contents: any two requests of the scope with its head
    (the head alone), a conversation's calls (anything longer)."""
    return evidence.head_gaps if history_len == 0 else evidence.gaps


def reads_of(evidence: Evidence, history_len: int, ttl_s: float, cap: float,
             short_s: float | None = None) -> tuple[float, float]:
    """(expected reads, their mean gap) of a cache of ``ttl_s`` over a
    prefix of ``history_len`` contents: the head alone is read by every
    request of the scope, a conversation's prefix by its own next calls
    only (rule 6). Gaps below ``short_s`` (the default TTL option) are
    the pace of reads, ``x / (1 - x)`` of them; a longer gap that ``ttl_s``
    still outlives is a crossing: the cache is kept through it (its
    storage) instead of expiring and being written again at the next
    arrival, which saves that arrival one read. Each time the pace breaks,
    the gap is one the cache outlives with the share of such gaps among
    the observed breaks, the conversation's end (unseen, but it always
    comes) counted as ``END_WEIGHT`` of one it does not: ``y / (1 - y)``
    crossings."""
    gaps, go_on = pace_gaps(evidence, history_len), 1.0 if history_len == 0 else evidence.continued
    short = ttl_s if short_s is None else min(short_s, ttl_s)
    inside = [g for g in gaps if g < short]
    across = [g for g in gaps if short <= g < ttl_s]
    reads = expected_reads(gaps, short, cap, go_on)
    y = go_on * len(across) / (len(gaps) - len(inside) + END_WEIGHT)
    crossings = min(cap, y / (1.0 - y))
    total = reads + crossings
    if not total:
        return 0.0, 0.0
    mean_in = sum(inside) / len(inside) if inside else 0.0
    mean_across = sum(across) / len(across) if across else 0.0
    return total, (reads * mean_in + crossings * mean_across) / total


def net_gain(prices: CachePrices, *, tokens: int, new_tokens: int, reads: float, mean_gap_s: float,
             ttl_s: float) -> float:
    """Expected saving of caching ``tokens`` (``new_tokens`` of them not
    cached yet) for ``ttl_s``, read ``reads`` times ``mean_gap_s`` apart,
    against sending them uncached: what the reads save minus the write and
    the storage. Never positive without reads."""
    if prices.kind == "automatic":
        # Nothing written or stored: a lease only steers the provider.
        return reads * new_tokens * (prices.input - prices.cached)
    write = prices.write_long if ttl_s > prices.long_after_s else prices.write
    saved = reads * new_tokens * (prices.input - prices.cached)
    if prices.kind == "marked":
        # The first call writes its new tokens instead of sending them plain.
        return saved - new_tokens * (write - prices.input)
    # NAMED: the whole prefix is written again (its creating call reads it,
    # and pays no input for its new tokens; the part a live cache holds it
    # would have read at the cached price, so that part's write is all
    # extra) and stored until a TTL past the last read.
    held = tokens - new_tokens
    hours = (reads * mean_gap_s + ttl_s) / 3600.0
    first = new_tokens * (write - prices.input + prices.cached) + held * write
    return saved - first - tokens * hours * prices.storage_hour


def best_ttl(prices: CachePrices, ttls: Sequence[float], evidence: Evidence, settings: PolicySettings, *,
             tokens: int, new_tokens: int, history_len: int) -> tuple[float, float]:
    """(gain, ttl) of the TTL option with the largest expected gain."""
    best = (float("-inf"), ttls[0])
    if evidence.agreeing_age is None:
        return best

    def gain(ttl: float) -> float:
        reads, gap = reads_of(evidence, history_len, ttl, settings.max_expected_reads, ttls[0])
        return net_gain(prices, tokens=tokens, new_tokens=new_tokens, reads=reads, mean_gap_s=gap, ttl_s=ttl)

    paced = sum(1 for g in pace_gaps(evidence, history_len) if g >= CONCURRENT_S) >= SHORT_TTL_MIN_GAPS
    return _with_trims(best, ttls, gain, paced)


def _with_trims(best: tuple[float, float], ttls: Sequence[float], gain: Callable[[float], float],
                may_trim: bool) -> tuple[float, float]:
    """The best (gain, ttl) of the default (``ttls[0]``) and the longer
    options and then, when ``may_trim`` and that is the default with a
    positive gain, of the options below it too (rule 6): a short TTL
    trims the tail of a cache the default would write, never makes one
    the default would not, nor cuts one kept through longer gaps."""
    base = ttls[0]
    for ttl in ttls:
        if ttl >= base:
            best = max(best, (gain(ttl), ttl))
    if may_trim and best[1] == base and best[0] > 0:
        for ttl in ttls:
            if ttl < base:
                best = max(best, (gain(ttl), ttl))
    return best


def grow_share(kind: str, history_len: int, settings: PolicySettings) -> float:
    """The least share of a match's tokens a grow over it must add (rule 5)
    for a cache ``kind`` and a match of ``history_len`` contents."""
    # A MARKED grow over the head alone writes only the conversation (the
    # head is read), and its calls then write through: no share.
    return 0.0 if kind == "marked" and history_len == 0 else settings.grow_share


def serves_as_is(cached_tokens: int, cached_history_len: int, *, tokens: int, history_len: int, share: float,
                 budget: float) -> bool:
    """Whether a match of ``cached_tokens`` over ``cached_history_len``
    contents is a HIT whatever the evidence says (rule 3): it holds the
    whole prefix, too little is left to grow (``share``: ``grow_share``),
    or the scope's account is in deficit (rule 8: no write). Otherwise a
    grow is weighed (``best_ttl``). The store's hit step (RegistryStore.
    match_and_take_hit, cluster.scripts.TAKE_HIT) applies the same test."""
    return cached_history_len >= history_len or tokens - cached_tokens <= share * cached_tokens or budget < 0


def decide(
    *,
    empty: bool,
    tokens: int,
    history_len: int,
    floor: int,
    request_tokens: int = 0,
    budget: float = float("inf"),
    match: CachedPrefix | None,
    evidence: Evidence,
    prices: CachePrices,
    ttls: Sequence[float],
    settings: PolicySettings,
    model: str = "",
) -> Decision:
    """``ttls``: the TTLs a create may take, the caller's first (one, when
    the caller chose it)."""
    if empty:
        return Decision(Action.BYPASS, BypassReason.EMPTY_PREFIX)
    if settings.variant == ADK:
        return _decide_adk(tokens, floor, match, evidence, ttls[0], settings, model)
    if match is not None:
        share = grow_share(prices.kind, match.history_len, settings)
        if serves_as_is(match.tokens, match.history_len, tokens=tokens, history_len=history_len, share=share,
                        budget=budget):
            return Decision(Action.HIT)
        gain, ttl = best_ttl(prices, ttls, evidence, settings, tokens=tokens, new_tokens=tokens - match.tokens,
                             history_len=history_len)
        return Decision(Action.GROW, ttl_s=ttl) if gain > 0 else Decision(Action.HIT)
    if written_size(prices, tokens, request_tokens) < max(floor, settings.min_prefix_tokens):
        return Decision(Action.BYPASS, BypassReason.BELOW_MIN_TOKENS)
    if settings.sightings_before_create == 0:
        evidence = Evidence(0.0, (0.0,), evidence.previous_agrees, (0.0,), 1.0)
    if budget < 0:
        return Decision(Action.BYPASS, BypassReason.FIRST_SIGHTING)
    if evidence.agreeing_age is None:
        gain, ttl = first_sighting(prices, ttls, evidence, settings, tokens=tokens)
    else:
        gain, ttl = best_ttl(prices, ttls, evidence, settings, tokens=tokens, new_tokens=tokens,
                             history_len=history_len)
    if gain > 0:
        return Decision(Action.CREATE, ttl_s=ttl)
    return Decision(Action.BYPASS, BypassReason.FIRST_SIGHTING)


def _decide_adk(tokens: int, floor: int, match: CachedPrefix | None, evidence: Evidence, ttl: float,
                settings: PolicySettings, model: str) -> Decision:
    if match is not None:
        if match.invocations > settings.refresh_after_uses:
            return Decision(Action.GROW, ttl_s=ttl)
        return Decision(Action.HIT)
    if not evidence.previous_agrees:
        return Decision(Action.BYPASS, BypassReason.FIRST_SIGHTING)
    if tokens < max(floor, adk_floor(model)):
        return Decision(Action.BYPASS, BypassReason.BELOW_MIN_TOKENS)
    return Decision(Action.CREATE, ttl_s=ttl)
