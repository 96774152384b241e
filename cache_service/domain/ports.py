"""Every seam of the cache service, as Protocols (see docs/ARCHITECTURE.md,
"Ports"). Domain code depends on these and on values (domain.model,
domain.entry, domain.flight), never on an implementation; implementations
are chosen in one place, cache_service.ports_factory.

- ``Provider`` and its typed errors: a model provider, typed by how it
  caches prefixes (``CacheKind``): named resource caches (``NamedCaches``:
  Gemini), marked prefix caches (breakpoints on the request: Anthropic) or
  automatic prefix caches (steered by a key: OpenAI-compatible servers).
  Adapters in cache_service.providers.
- ``Journal``: the durable record of created caches (cache_service.journal).
- ``Clock``: monotonic and wall time (domain.clock).
- ``Cleanup``: bounded, queued provider deletes and TTL refreshes
  (domain.cleanup).
- ``RegistryStore``: the registry's shared state — entry index and LRU
  order, generations, tombstones, sightings, learned floors
  (domain.memory_store).
- ``SingleFlight``: who runs the one create of a key (domain.single_flight).
- ``RegistryUnavailable``: what a store or coordinator shared by replicas
  raises when it cannot answer in time (cluster.guard); the registry turns
  it into BYPASS REGISTRY_UNAVAILABLE, or the error under
  ``failure_mode = "error"``.
- ``KeySource`` and ``LeaseCodec``: lease signing keys and the lease token
  format (domain.leases).

Store and single-flight methods are coroutines so that a store shared by
replicas (Redis) can implement them; the in-memory ones never suspend, which
keeps each registry step atomic on the event loop. A store that does suspend
must make each method atomic on its own (a transaction or script).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentctx_common.errors import Unavailable
from agentctx_common.reasons import Reason
from cache_service.domain.entry import Entry, EntryKey
from cache_service.domain.flight import Claim, Flight
from cache_service.domain.model import (
    CacheHandle,
    CacheSpec,
    LeaseClaims,
    ListedCache,
    ModelCall,
    ModelReply,
    ResourceName,
)
from cache_service.domain.policy import Booking, Evidence, serves_as_is

# --- time ----------------------------------------------------------------------------


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...


# --- providers -----------------------------------------------------------------------


class CacheKind(enum.Enum):
    """How a provider caches a prefix. The registry keeps one create policy,
    one lease model and one set of bounds over all three; what differs is
    what an entry stands for and how a leased call names it:

    - NAMED: a resource the service creates, extends, deletes and lists
      (``NamedCaches``); a leased call names it and carries only the suffix.
    - MARKED: the provider caches up to breakpoints marked on the request
      (at most 4) for its own TTL; an entry records that the prefix was
      marked, and a leased call carries the whole request with the marks.
    - AUTOMATIC: the provider caches long prefixes by itself; an entry
      records the prefix, and a call carries the whole request and a stable
      routing key.
    """

    NAMED = "named"
    MARKED = "marked"
    AUTOMATIC = "automatic"


@dataclass(frozen=True)
class PrefixMark:
    """What a MARKED or AUTOMATIC call is told of its cached prefix: the
    leased prefix ends after ``history_len`` contents (0: after the system
    instruction and tools), the TTL asked for, and ``key``, a stable,
    content-free routing key (prompt_cache_key). ``history_len`` is None on
    a call without a lease: only the key applies. ``write_through``: a
    MARKED adapter also marks the end of the request, so that the next call
    of the conversation reads all of this one (the registry's choice)."""

    history_len: int | None
    ttl_s: float
    key: str
    write_through: bool = False


CacheRef = ResourceName | PrefixMark  # what a model call is told of its cache


class NamedCaches(Protocol):
    """The resource operations of a NAMED provider."""

    async def create_cache(self, spec: CacheSpec) -> CacheHandle: ...

    async def update_ttl(self, name: ResourceName, ttl_s: float) -> CacheHandle: ...

    async def delete_cache(self, name: ResourceName) -> None:
        """Raises CacheNotFound when the provider no longer holds it."""
        ...

    async def list_caches(self) -> list[ListedCache]: ...


class Provider(Protocol):
    """A model provider that runs model calls and caches prefixes the way
    ``cache_kind`` says. Adapters turn their SDK's failures into the errors
    below, whose messages are fixed, content-free strings: a provider's own
    error text can echo prompts or resource names, so it is never carried."""

    name: str

    @property
    def cache_kind(self) -> CacheKind: ...

    @property
    def named_caches(self) -> NamedCaches | None:
        """The resource operations of a NAMED provider; None for the others."""
        ...

    def min_cache_tokens(self, model: str) -> int:
        """The smallest prefix (estimated tokens) worth asking to cache."""
        ...

    def prefix_ttl_s(self, ttl_s: float) -> float:
        """How long the provider keeps a prefix written for a TTL of
        ``ttl_s`` (MARKED and AUTOMATIC: its own choices, e.g. 5 minutes or
        an hour; NAMED: ``ttl_s``)."""
        ...

    async def generate(self, call: ModelCall, cache: CacheRef | None) -> ModelReply:
        """With a ResourceName, ``call`` is already rewritten: only the
        uncached suffix, no system instruction, tools or tool config. With a
        PrefixMark it is the whole request."""
        ...

    def stream_generate(self, call: ModelCall, cache: CacheRef | None) -> AsyncIterator[ModelReply]: ...

    async def count_tokens(self, call: ModelCall) -> int: ...

    async def close(self) -> None: ...


class EmbedTask(enum.Enum):
    """What texts are embedded for (Gemini's task types; others ignore it)."""

    UNSPECIFIED = "UNSPECIFIED"
    RETRIEVAL_DOCUMENT = "RETRIEVAL_DOCUMENT"
    RETRIEVAL_QUERY = "RETRIEVAL_QUERY"


@dataclass(frozen=True)
class EmbedCall:
    """Texts to embed with ``model``; ``dimensions`` None: the model's own."""

    model: str
    texts: tuple[str, ...]
    task: EmbedTask = EmbedTask.UNSPECIFIED
    dimensions: int | None = None


@dataclass(frozen=True)
class Embeddings:
    """One vector per text of the call, in order; the input tokens the
    provider reported (0: none reported)."""

    vectors: tuple[tuple[float, ...], ...]
    input_tokens: int = 0


@dataclass(frozen=True)
class LossCredit:
    """A call's credit on its scope's loss account (``book_loss``'s arguments)."""

    booking: Booking
    opening: float
    keep_s: float


@dataclass(frozen=True)
class HitLease:
    """The lease a hit takes (``add_lease``'s: expiring at ``until``, or at
    its cache's expiry if that is earlier; a use at monotonic ``now``),
    drawn at wall ``wall``, and the named holder whose use it records with
    it (``swap_holder``'s; "" none)."""

    lease_id: str
    wall: float
    until: float
    now: float
    holder: str = ""
    holder_wall: float = 0.0
    keep_s: float = 0.0

    def expires(self, entry: Entry) -> float:
        return min(entry.handle.expire_time, self.until)


@dataclass(frozen=True)
class HitTerms:
    """When an acquire's first step takes its hit's lease itself: the first
    usable match (not retiring, live at ``wall`` past the expiry margin,
    ``min(expiry_margin_s, its TTL / 10)``) is one the policy serves as it
    is (``policy.serves_as_is`` for a request of ``tokens`` over
    ``history_len`` contents, ``head_share`` the grow share of a head
    alone, ``grow_share`` of a longer one, the scope's balance after the
    credit its budget), unless it is a head below ``head_floor`` while that
    balance is in deficit (``capabilities.head_below_floor``: such a call
    goes uncached)."""

    tokens: int
    history_len: int
    grow_share: float
    head_share: float
    head_floor: int
    wall: float
    expiry_margin_s: float
    lease: HitLease

    def takes(self, entry: Entry, balance: float) -> bool:
        """Whether the policy takes ``entry``, the first usable match, as a HIT."""
        head = entry.history_len == 0
        share = self.head_share if head else self.grow_share
        if not serves_as_is(entry.tokens, entry.history_len, tokens=self.tokens, history_len=self.history_len,
                            share=share, budget=balance):
            return False
        return not (head and entry.tokens < self.head_floor and balance < 0)


@dataclass(frozen=True)
class TakenHit:
    """A hit's lease as the first step took it: the entry with the lease
    (``add_lease``'s), and the entry the holder used before (``swap_holder``'s;
    None when the lease named no holder)."""

    entry: Entry
    previous: str | None


@runtime_checkable
class Embedder(Protocol):
    """A provider with an embedding API (optional: Anthropic has none).
    ``max_embed_texts``: the most texts one call takes, as the provider's
    own API bounds it (checked before anything is sent)."""

    @property
    def max_embed_texts(self) -> int: ...

    async def embed(self, call: EmbedCall) -> Embeddings: ...


class ProviderError(Exception):
    """Base of provider failures. ``status`` is the provider's HTTP status
    when there was one; ``retry_after`` its retry hint in seconds."""

    default_message = "provider call failed"

    def __init__(self, message: str | None = None, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message or self.default_message)
        self.status = status
        self.retry_after = retry_after


class RateLimited(ProviderError):
    default_message = "the provider rate-limited the call"


class CacheNotFound(ProviderError):
    """The provider no longer holds the named cache (404, or 403 naming it)."""

    default_message = "the provider no longer holds the cache"


class CacheTooSmall(ProviderError):
    default_message = "the provider refused a cache below its minimum size"

    def __init__(self, message: str | None = None, *, min_tokens: int | None = None, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message, status=status, retry_after=retry_after)
        self.min_tokens = min_tokens


class ContextWindowExceeded(ProviderError):
    default_message = "the request exceeds the model's context window"

    def __init__(self, message: str | None = None, *, prompt_tokens: int | None = None,
                 context_window: int | None = None, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message, status=status, retry_after=retry_after)
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window


class ProviderUnavailable(ProviderError):
    default_message = "the provider is unavailable"


class ProviderTimeout(ProviderError):
    default_message = "the provider did not answer in time"


class InvalidRequest(ProviderError):
    default_message = "the provider rejected the request as invalid"


class UnsupportedField(ProviderError):
    """A field the model refuses, found before anything is sent (Claude 4.5
    takes temperature or top_p, not both): INVALID_ARGUMENT naming the
    field, never the provider's 400."""

    def __init__(self, field: str, description: str) -> None:
        super().__init__(f"{field}: {description}")
        self.field = field
        self.description = description


class ProviderPermissionDenied(ProviderError):
    default_message = "the provider denied permission"


# --- journal and cleanup ---------------------------------------------------------------


@dataclass(frozen=True)
class JournalRecord:
    """A cache this service created (or began to create) and has not seen
    deleted. ``name`` is None when only the intent was recorded."""

    entry_id: str
    provider: str
    display_name: str
    expire_time: float
    name: ResourceName | None = None


class Journal(Protocol):
    """The durable record of created caches (see cache_service.journal)."""

    async def intent(self, entry_id: str, provider: str, display_name: str, expire_time: float) -> None: ...

    async def created(self, entry_id: str, name: ResourceName, expire_time: float) -> None: ...

    async def deleted(self, entry_id: str) -> None: ...

    def pending(self) -> list[JournalRecord]: ...

    async def close(self) -> None: ...


RefreshDone = Callable[[CacheHandle | None, bool], Awaitable[None]]  # (new handle, gone)


class Cleanup(Protocol):
    """Provider work the registry never waits for."""

    def delete(self, provider: str, entry_id: str, name: ResourceName, why: str) -> None:
        """Queues a delete; a confirmed one is recorded in the journal."""
        ...

    def refresh(self, provider: str, name: ResourceName, ttl_s: float, done: RefreshDone) -> None:
        """Queues a TTL extension; ``done`` gets the outcome."""
        ...


# --- registry state --------------------------------------------------------------------


class RegistryUnavailable(Unavailable):
    """The shared registry did not answer in time. ``cause``: "timeout",
    "connection" (refused, reset, loading, read-only) or "tripped" (it failed
    within the last ``retry_after`` seconds and is not tried again yet).
    Content-free, retryable."""

    def __init__(self, cause: str, retry_after: float) -> None:
        super().__init__("the cache registry is unreachable; retry", reason=Reason.REGISTRY_UNAVAILABLE,
                         metadata={"cause": cause}, retry_after=retry_after)
        self.cause = cause


@dataclass(frozen=True)
class EntryHolders:
    """The named holders that used an entry lately (wall time of each one's
    last use), and how many of its leases named a holder: the entry's
    other uses were by callers that named none."""

    last_use: dict[str, float]
    named_uses: int


class RegistryStore(Protocol):
    """The registry's state that replicas must share. Entries it returns may
    be snapshots: callers change them only through these methods, and use
    the entry a method returns rather than one they held before."""

    async def get(self, entry_id: str) -> Entry | None: ...

    async def first_match(self, scope_fp: str, keys: Sequence[EntryKey],
                          usable: Callable[[Entry], bool]) -> Entry | None:
        """The entry indexed under the earliest of ``keys`` in the scope that
        ``usable`` accepts (a retiring entry is no longer indexed)."""
        ...

    async def match_and_record_sighting(self, scope_fp: str, keys: Sequence[EntryKey],
                                        usable: Callable[[Entry], bool], chain: Sequence[bytes], now: float,
                                        horizon_s: float, group: str = "",
                                        credit: LossCredit | None = None) -> tuple[Entry | None, Evidence, float | None]:
        """``first_match``, ``record_sighting`` and, given ``credit``,
        ``book_loss`` as one step (an acquire's first: one round trip on
        Redis); the balance after the credit, None without one."""
        ...

    async def match_and_take_hit(self, scope_fp: str, keys: Sequence[EntryKey], usable: Callable[[Entry], bool],
                                 chain: Sequence[bytes], now: float, horizon_s: float, group: str, credit: LossCredit,
                                 hit: HitTerms) -> tuple[Entry | None, Evidence, float, TakenHit | None]:
        """``match_and_record_sighting`` with ``credit`` and, when ``hit``
        takes the match, its lease on it (``add_lease``, with the holder's
        ``swap_holder`` when ``hit.lease`` names one), as one step (a warm
        hit's only round trip on Redis). The match (the leased entry when
        taken), the evidence, the balance after the credit, and the lease
        taken or None: the caller then goes on as after
        ``match_and_record_sighting``."""
        ...

    async def scope_entries(self, scope_fp: str) -> list[Entry]: ...

    async def all_entries(self) -> list[Entry]:
        """Every entry, oldest first."""
        ...

    async def count(self) -> int: ...

    async def next_generation(self) -> int: ...

    async def put(self, entry: Entry) -> None:
        """Adds a new entry and indexes it under its key."""
        ...

    async def retire(self, entry_id: str) -> Entry | None:
        """Marks it retiring and takes it out of the key index."""
        ...

    async def remove(self, entry_id: str, invalid_reason: str) -> Entry | None:
        """Forgets it and leaves a tombstone (the reason later resolves of its
        leases give); returns it, or None when it was already gone."""
        ...

    async def tombstone(self, entry_id: str) -> str | None: ...

    async def add_lease(self, entry_id: str, lease_id: str, expires: float, now: float) -> Entry | None:
        """Records a lease (wall expiry) and a use at monotonic ``now``."""
        ...

    async def lease_and_swap_holder(self, entry_id: str, lease_id: str, expires: float, now: float, scope_fp: str,
                                    holder: str, wall: float, keep_s: float) -> tuple[Entry | None, str]:
        """``add_lease`` then ``swap_holder``, as one step (a hit's lease for
        a named holder: one round trip on Redis); both results."""
        ...

    async def drop_lease(self, entry_id: str, lease_id: str) -> Entry | None: ...

    async def swap_holder(self, scope_fp: str, holder: str, entry_id: str, wall: float, keep_s: float) -> str:
        """The entry ``holder`` (named) used last in the scope ("" : none
        known). With an ``entry_id`` that exists, records that ``holder``
        now uses it: the entry's use by ``holder`` at ``wall``, counted
        among its named uses. Both are kept at least ``keep_s`` seconds."""
        ...

    async def holders(self, entry_id: str) -> EntryHolders: ...

    async def drop_expired_leases(self, entry_id: str, wall: float) -> Entry | None: ...

    async def set_expiry(self, entry_id: str, expire_time: float) -> Entry | None: ...

    async def least_recently_used_idle(self, wall: float) -> Entry | None:
        """The eviction victim: no live lease, retiring ones first, then the
        least recently used."""
        ...

    async def record_sighting(self, scope_fp: str, chain: Sequence[bytes], now: float,
                              horizon_s: float, group: str = "") -> Evidence:
        """What the scope's records younger than ``horizon_s`` say of
        ``chain`` (domain.policy.Evidence), then records it and its head as
        seen at ``now`` (wall seconds), as one step: of concurrent first
        sightings on several replicas, exactly one is first. ``group``
        (the scope's app) pools first-sighting outcomes across its scopes."""
        ...

    async def forget_sightings(self, scope_fp: str) -> None: ...

    async def learned_floor(self, provider: str, model: str, now: float) -> int:
        """The floor learned for the model (estimated tokens): 0 when none
        was, or when it was last taught (``learn_floor``) so long ago that
        it expired by ``now`` (wall seconds)."""
        ...

    async def learn_floor(self, provider: str, model: str, tokens: int, now: float, keep_s: float) -> None:
        """A prefix below ``tokens`` was not cached: the floor is at least
        ``tokens``. At or above the live floor it becomes the floor, kept
        ``keep_s`` seconds from ``now`` (so taught again, it is kept anew);
        below it nothing changes. One step."""
        ...

    async def lower_floor(self, provider: str, model: str, tokens: int, now: float) -> None:
        """A prefix of ``tokens`` was cached: the floor is at most
        ``tokens``, so a live learned floor above it comes down to it
        (keeping its expiry). One step; a store may skip it when the floor
        it read within its read window is not above ``tokens``."""
        ...

    async def report_create(self, entry_id: str) -> bool:
        """True for the first call that asks of the entry (and for an entry
        gone), False for every later one, as one step: a NAMED create is
        reported on one call's usage, however many calls its lease serves
        (domain.observed)."""
        ...

    async def book_loss(self, scope_fp: str, booking: Booking, opening: float, keep_s: float) -> float:
        """Applies ``booking`` to the scope's loss account (domain.policy,
        rule 8; opened at ``opening`` when there is none), as one step, and
        keeps the account ``keep_s`` seconds after it; returns the new
        balance. Every replica books on the same account."""
        ...

    async def loss_balance(self, scope_fp: str, opening: float, keep_s: float, now: float) -> float:
        """The scope's balance (``opening`` when it has no account, or none
        booked within ``keep_s`` of ``now``)."""
        ...


class SingleFlight(Protocol):
    """One create per (scope, key) at a time; the flights of this process
    (and, for a coordinator shared by replicas, a lock per key)."""

    def find(self, scope_fp: str, key: EntryKey) -> Flight | None: ...

    async def begin(self, flight: Flight) -> Claim:
        """Claims the create of ``flight``'s key. A coordinator shared by
        replicas answers TAKEN when another replica runs it, and FULL when
        entries plus every replica's creates fill ``max_entries``."""
        ...

    async def end(self, flight: Flight) -> None:
        """Lets the key go; ``flight.outcome`` tells remote waiters how it
        ended. The flight leaves this process's table before the first
        suspension, so no caller joins it after ``end`` is called."""
        ...

    async def wait_remote(self, scope_fp: str, key: EntryKey, timeout_s: float) -> str | None:
        """Waits for the create another replica runs for the key: its
        outcome (see Flight.outcome), or None when ``timeout_s`` passed
        first. A lock whose holder died ends at its lease ("")."""
        ...

    async def invalidated(self, scope_fp: str) -> None:
        """Tells the other replicas to cancel their creates in the scope."""
        ...

    def on_invalidated(self, cancel: Callable[[str], Awaitable[None]]) -> None:
        """``cancel(scope_fp)`` runs when another replica invalidated a scope."""
        ...

    def in_scope(self, scope_fp: str) -> list[Flight]: ...

    def count(self) -> int: ...


# --- leases ----------------------------------------------------------------------------


class LeaseRejected(Exception):
    """A lease that cannot be used. ``invalid_reason`` is MALFORMED, UNKNOWN,
    EXPIRED or INVALIDATED (the values of ResolveLeaseResponse)."""

    def __init__(self, invalid_reason: str) -> None:
        super().__init__(f"lease is not valid: {invalid_reason}")
        self.invalid_reason = invalid_reason


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    secret: bytes


class KeySource(Protocol):
    """Lease signing keys: the one new leases are signed with, and every key
    a lease may still carry (rotation keeps retired keys verifiable)."""

    def current(self) -> SigningKey: ...

    def get(self, key_id: str) -> SigningKey | None: ...


class LeaseCodec(Protocol):
    """Opaque, unforgeable lease tokens."""

    @property
    def boot(self) -> str:
        """The key id new leases carry."""
        ...

    def new_lease_id(self) -> str: ...

    def sign(self, claims: LeaseClaims) -> str: ...

    def verify(self, token: str) -> LeaseClaims:
        """The claims of a genuine lease; raises LeaseRejected."""
        ...
