"""Admission: what a request may ask for, and what the create policy
decides for it (see docs/ARCHITECTURE.md, "Cache service").

- Checks: the provider is configured, the scope is within
  ``max_scope_bytes``, the TTL is normalized to [1 s, ``max_ttl_s``].
- Matching: the live cache over the longest leading part of the prefix
  (same scope, one of the TTLs a create may take, not retiring, not within
  the expiry margin).
- Decision: domain.policy, fed with the floor (the provider's minimum and
  what its refusals taught), the scope's evidence (the store records every
  non-empty prefix with its time, in the same step), the cache kind's
  prices, the TTL options and the scope's loss account (rule 8), which
  ``settle`` keeps from each leased call's usage. The accounts are the
  store's (``RegistryStore.book_loss``): on Redis every replica books on
  the one account of a scope, so N replicas do not give a scope N
  allowances. A store that cannot answer fails the acquire open
  (REGISTRY_UNAVAILABLE) like any other step; a settlement it cannot
  book is dropped (the call has been made).
- Slots: ``max_entries`` live caches, in-flight creates included; when
  full, the least recently used cache no lease names is evicted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import overload

from agentctx_common.errors import FailedPrecondition, FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from cache_service.domain import policy
from cache_service.domain.entry import Entry, EntryKey
from cache_service.domain.keys import PrefixView, Scope, invocation_count
from cache_service.domain.lifecycle import Lifecycle
from cache_service.domain.model import BypassReason, Usage
from cache_service.domain.ports import (
    CacheKind,
    Clock,
    HitLease,
    HitTerms,
    LossCredit,
    Provider,
    RegistryStore,
    RegistryUnavailable,
    SingleFlight,
    TakenHit,
)
from cache_service.domain.pricing import cache_prices
from cache_service.domain.registry_settings import RegistrySettings

# NAMED (storage per token-hour): a TTL of the default over SHORT_STEP is
# offered too, if at least MIN_SHORT_TTL_S (300 s: 60 s), for conversations
# whose calls come well within it (domain.policy, rule 6). One step only:
# each option is one more match key per prefix (``_Keys``), and a second
# (120 s) gained next to nothing on bench.economics_oracle.
SHORT_STEP = 5.0
MIN_SHORT_TTL_S = 60.0


class Admission:
    def __init__(self, providers: Mapping[str, Provider], store: RegistryStore, flights: SingleFlight,
                 lifecycle: Lifecycle, settings: RegistrySettings, clock: Clock) -> None:
        self.providers = providers
        self._clock = clock
        self._steps: dict[str, tuple[float, ...]] = {}  # provider -> its TTL steps
        self._store = store
        self._flights = flights
        self._lifecycle = lifecycle
        self._settings = settings
        # Rule 8 (domain.policy): each scope's account of what its leased calls cost over plain, in the
        # store, kept a day (at least the longest TTL, which a NAMED account's paid storage spans).
        self._opening = settings.policy.loss_allowance_tokens
        self._keep_s = max(settings.policy.loss_account_keep_s, settings.max_ttl_s)

    def normalize_ttl(self, ttl_s: float | None) -> float:
        if not ttl_s:
            return float(self._settings.default_ttl_s)
        # A float always: TTLs are part of entry keys, and 600 is not 600.0 to Redis.
        return float(max(1.0, min(float(ttl_s), self._settings.max_ttl_s)))

    def provider(self, name: str) -> Provider:
        provider = self.providers.get(name)
        if provider is None:
            raise FailedPrecondition(
                f"provider {name!r} is not configured on this cache service", reason=Reason.PROVIDER_NOT_CONFIGURED,
                metadata={"provider": name},
            )
        return provider

    def check_scope(self, scope: Scope) -> None:
        size = scope.size_bytes
        if size > self._settings.max_scope_bytes:
            raise InvalidArgument(
                f"the scope is {size} bytes, over the limit of {self._settings.max_scope_bytes}",
                reason=Reason.SCOPE_TOO_LARGE,
                metadata={"scope_bytes": size, "max_scope_bytes": self._settings.max_scope_bytes},
                field_violations=[FieldViolation("scope.policy", "the scope is too large")],
            )

    def too_large(self, view: PrefixView) -> bool:
        return view.size_bytes > self._settings.max_prefix_bytes

    def ttl_options(self, provider: Provider, ttl_s: float | None) -> tuple[float, ...]:
        """The TTLs a create may take: the caller's, or when it set none the
        default first, then the longer steps (2x, 4x, 12x) the provider keeps
        apart within ``max_ttl_s`` and, NAMED, the short step (the default
        over ``SHORT_STEP``, if at least ``MIN_SHORT_TTL_S``), which only
        trims a cache's storage tail (domain.policy, rule 6): a MARKED
        provider offers two, an AUTOMATIC one keeps prefixes for its own
        TTL. Every option is one more key per prefix a match looks up."""
        if ttl_s or provider.cache_kind is CacheKind.AUTOMATIC or self._settings.policy.variant == policy.ADK:
            return (self.normalize_ttl(ttl_s),)
        steps = self._steps.get(provider.name)
        if steps is None:
            steps = self._steps[provider.name] = self._ttl_steps(provider)
        return steps

    def _ttl_steps(self, provider: Provider) -> tuple[float, ...]:
        default = float(self._settings.default_ttl_s)
        steps = [t for t in (default, 2 * default, 4 * default, 12 * default) if t <= self._settings.max_ttl_s]
        if provider.cache_kind is CacheKind.MARKED:
            steps = [self.normalize_ttl(provider.prefix_ttl_s(t)) for t in steps]
        steps = sorted(set(steps or [default]))
        short = default / SHORT_STEP
        if provider.cache_kind is CacheKind.NAMED and short >= MIN_SHORT_TTL_S:
            # After the default: the policy weighs options below ttls[0] only as trims.
            steps.append(short)
        return tuple(steps)

    async def decide(self, scope: Scope, provider: Provider, view: PrefixView, ttls: tuple[float, ...],
                     request_tokens: int = 0, lease: HitLease | None = None, shared_fp: str = "",
                     ) -> tuple[policy.Decision, Entry | None, TakenHit | None]:
        """The policy's decision, the matching live cache, if any
        (``request_tokens``: the whole request's size, 0 when unknown),
        and, given ``lease``, that lease when the first store step took it:
        a HIT whose match the policy serves as it is (``HitTerms``), the
        match then the entry with the lease. ``shared_fp``: the app-wide
        scope whose head cache is the match when the scope has none
        (Registry.shared_scope)."""
        sfp = scope.fingerprint
        if view.prefix.is_empty:
            return (policy.Decision(policy.Action.BYPASS, BypassReason.EMPTY_PREFIX),
                    await self.match(sfp, view, ttls), None)
        # Every non-empty prefix is recorded, in the same step as the evidence
        # and as the match (one store step; the floor is mostly a replica's own).
        keys, wall, credit = _Keys(view.chain, ttls), self._clock.wall(), self._credit(max(view.tokens, request_tokens))
        balance: float | None
        if lease is not None and credit is not None:
            # A warm hit's lease is taken in that step too (the adk variant,
            # which keeps no account, weighs its hits in Python).
            match, evidence, balance, taken = await self._store.match_and_take_hit(
                sfp, keys, self._usable, view.chain, wall, max(ttls), scope.group, credit,
                self._hit_terms(provider, scope, view, wall, lease))
            if taken is not None:
                return policy.Decision(policy.Action.HIT), match, taken
        else:
            match, evidence, balance = await self._store.match_and_record_sighting(
                sfp, keys, self._usable, view.chain, wall, max(ttls), scope.group, credit)
        if match is None and shared_fp:
            match = await self._store.first_match(shared_fp, _Keys(view.chain[:1], ttls), self._usable)
        learned = await self._store.learned_floor(scope.provider, scope.model, wall)
        floor = max(provider.min_cache_tokens(scope.model), learned)
        settings = self._settings.policy
        decision = policy.decide(
            empty=False,
            tokens=view.tokens,
            request_tokens=request_tokens,
            budget=float("inf") if balance is None else balance,
            history_len=view.history_len,
            floor=floor if settings.variant == policy.ADK else max(floor, settings.min_prefix_tokens),
            match=self._cached(match, view) if match else None,
            evidence=evidence,
            prices=cache_prices(provider.cache_kind.value, model=scope.model),
            ttls=ttls,
            settings=settings,
            model=scope.model,
        )
        return decision, match, None

    def _hit_terms(self, provider: Provider, scope: Scope, view: PrefixView, wall: float,
                   lease: HitLease) -> HitTerms:
        """When the policy serves the first usable match as it is (a HIT
        without weighing a grow), for a store step to decide."""
        kind, settings = provider.cache_kind.value, self._settings.policy
        marked = provider.cache_kind is CacheKind.MARKED
        return HitTerms(
            tokens=view.tokens, history_len=view.history_len, grow_share=policy.grow_share(kind, 1, settings),
            head_share=policy.grow_share(kind, 0, settings),
            head_floor=provider.min_cache_tokens(scope.model) if marked else 0, wall=wall,
            expiry_margin_s=self._settings.expiry_margin_s, lease=lease)

    def _credit(self, prompt: int) -> LossCredit | None:
        """The call's credit on its scope's account, booked with the
        acquire's first store step (the ``adk`` variant keeps no account)."""
        if self._settings.policy.variant == policy.ADK:
            return None
        booking = policy.credit_booking(self._settings.policy.loss_tolerance, prompt, self._clock.wall())
        return LossCredit(booking, self._opening, self._keep_s)

    async def balance(self, scope_fp: str) -> float:
        """The scope's loss account's balance (rule 8)."""
        return await self._store.loss_balance(scope_fp, self._opening, self._keep_s, self._clock.wall())

    async def settle(self, provider: Provider, entry: Entry, usage: Usage | None, created: bool) -> None:
        """Books a leased call's usage as the provider reported it on its
        scope's account (domain.policy, rule 8); without usage nothing."""
        if usage is None or self._settings.policy.variant == policy.ADK:
            return
        booking = policy.settle_booking(
            cache_prices(provider.cache_kind.value, model=entry.scope.model), cached=usage.cached_prompt_tokens,
            written=usage.cache_write_tokens, ttl_s=provider.prefix_ttl_s(entry.ttl_s), entry_id=entry.id,
            entry_tokens=entry.tokens, created=created, now=self._clock.wall())
        with contextlib.suppress(RegistryUnavailable):  # the call is made; an outage loses its booking
            await self._store.book_loss(entry.scope_fp, booking, self._opening, self._keep_s)

    def _cached(self, entry: Entry, view: PrefixView) -> policy.CachedPrefix:
        invocations = 0
        if self._settings.policy.variant == policy.ADK:
            # The cache was created by the call whose history it holds.
            history = view.prefix.history
            invocations = invocation_count(history) - invocation_count(history[:entry.history_len]) + 1
        return policy.CachedPrefix(entry.tokens, entry.history_len, entry.uses, entry.ttl_s, invocations)

    async def match(self, scope_fp: str, view: PrefixView, ttls: tuple[float, ...]) -> Entry | None:
        """The live cache over the longest leading part of ``view``, of any of ``ttls``."""
        return await self._store.first_match(scope_fp, _Keys(view.chain, ttls), self._usable)

    def _usable(self, entry: Entry) -> bool:
        return not entry.retiring and self._lifecycle.usable(entry)

    async def reserve_slot(self) -> bool:
        """Room for one more cache, evicting the least recently used idle one."""
        if await self._store.count() + self._flights.count() < self._settings.max_entries:
            return True
        return await self._lifecycle.evict_one()


class _Keys(Sequence[EntryKey]):
    """The keys a match looks up, longest prefix first and every TTL option
    for each, made as the store reads them: a hit near the end of a long
    history reads only a few."""

    __slots__ = ("_chain", "_ttls")

    def __init__(self, chain: Sequence[bytes], ttls: tuple[float, ...]) -> None:
        self._chain = chain
        self._ttls = ttls

    def __len__(self) -> int:
        return len(self._chain) * len(self._ttls)

    @overload
    def __getitem__(self, i: int) -> EntryKey: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[EntryKey]: ...

    def __getitem__(self, i: int | slice) -> EntryKey | Sequence[EntryKey]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        n, t = divmod(i % len(self), len(self._ttls))
        return (self._chain[len(self._chain) - 1 - n], self._ttls[t])

    def __iter__(self) -> Iterator[EntryKey]:
        ttls = self._ttls
        for digest in reversed(self._chain):
            for ttl in ttls:
                yield (digest, ttl)
