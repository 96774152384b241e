"""What a provider's cache kind (domain.ports.CacheKind) changes in the
registry and in model calls (see docs/ARCHITECTURE.md, "Ports"); the rest
of the registry is the same for every kind.

- An entry of a NAMED provider holds the resource its create returned. An
  entry of a MARKED or AUTOMATIC provider is the registry's record that the
  prefix is (or, from its first leased call on, will be) written at the
  provider: its handle names no resource and expires at the provider's TTL
  for the prefix, extended by every leased call (the provider refreshes a
  prefix it reads). Nothing is created, journaled or deleted for it.
- A leased call to a NAMED provider names the resource and carries only the
  suffix (``rewrite_for_cache``); one to a MARKED or AUTOMATIC provider
  carries the whole request and a ``PrefixMark``: where the leased prefix
  ends (the adapter marks a breakpoint there) and the routing key. When the
  leased prefix holds more than the head, the conversation was seen to
  repeat and goes on: a MARKED call then also writes through to the end of
  the request (``write_through``), so that the next call reads all of it
  and writes only what came since. On Anthropic's prices that is what pays
  (a write costs 1.25x input once, a read 0.1x each later call). The call
  that creates a head-only entry writes through too: the create policy
  made it on the bet that a call following this one reads it (a first
  sighting written on the scope's follow rate, or a head seen to repeat),
  and the same bet pays for the request's end. Any other head-only call (a
  later session's first call) writes nothing but the head it shares,
  unless that head is below the provider's minimum (``head_below_floor``):
  then it writes through too, as the create did, or nothing is cached at
  all (and while its scope's loss account is in deficit the registry sends
  it uncached instead).
- An AUTOMATIC provider caches every call by itself, so even a call without
  a lease carries the scope's routing key: the call after it then lands
  where that one was cached.
- The routing key (``RoutingKeys``) is an HMAC-SHA256 of the scope
  fingerprint under a secret only the cache tier holds: nobody who knows
  or guesses a provider, app, user and model (or holds the
  ``scope_fingerprint`` agents are given) can compute it. A per-process
  secret changes every key on restart and differs between replicas, so
  calls lose their routing then; a cluster derives it from configured key
  material (see cache_service.app.routing_keys).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from agentctx_common.canonical import canonical_json
from cache_service.domain.entry import Entry
from cache_service.domain.keys import Prefix
from cache_service.domain.model import CacheHandle, ModelCall, ResourceName
from cache_service.domain.ports import CacheKind, CacheRef, PrefixMark, Provider


class RoutingKeys:
    """The routing key of a call (OpenAI's ``prompt_cache_key``): what its
    conversation shares with others, the app and the request's head (model,
    system instruction, tools, tool config), so every user of one agent
    routes to the machines that hold that head (issue 21: per-user keys
    spread a shared head over as many machines as users). No user id is on
    the wire, and neither the app nor any content can be read back from the
    key or confirmed by recomputing it without the tier's secret. ``secret``
    None: a random one for this process (``per_process``)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self.per_process = secret is None
        self._secret = secrets.token_bytes(32) if secret is None else secret

    def __repr__(self) -> str:
        return f"RoutingKeys(per_process={self.per_process})"

    def of(self, app: str, call: ModelCall) -> str:
        head = hashlib.sha256(canonical_json(Prefix.of_call(call, 0).head_json())).digest()
        message = b"agentctx-prompt-cache-key\0" + app.encode() + b"\0" + head
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()[:32]


def rewrite_for_cache(call: ModelCall, cached_len: int) -> ModelCall:
    """A new request that names a cache of the first ``cached_len`` contents."""
    return ModelCall(
        model=call.model,
        contents=tuple(call.contents[cached_len:]),
        system_instruction=None,
        tools=(),
        tool_config=None,
        generation_config=dict(call.generation_config),
    )


def leased_request(provider: Provider, call: ModelCall, entry: Entry, keys: RoutingKeys,
                   created: bool = False) -> tuple[ModelCall, CacheRef]:
    """The request a leased call sends, and what it is told of its cache
    (``created``: this call's acquire created the entry)."""
    if provider.cache_kind is CacheKind.NAMED:
        return rewrite_for_cache(call, entry.history_len), entry.handle.name
    # A conversation seen to repeat (more than its head) goes on: writing its
    # whole request now lets the next call read all of it. So does one whose
    # head alone is below the provider's minimum: its mark there caches nothing.
    through = provider.cache_kind is CacheKind.MARKED and (entry.history_len > 0 or created
                                                           or head_below_floor(provider, entry))
    return call, PrefixMark(entry.history_len, entry.ttl_s, keys.of(entry.scope.app, call), write_through=through)


def head_below_floor(provider: Provider, entry: Entry) -> bool:
    """A MARKED entry of a head alone that is below the provider's minimum
    for the model: a breakpoint there writes and reads nothing, so a call
    leasing it caches only what it writes through to its own end."""
    return (provider.cache_kind is CacheKind.MARKED and entry.history_len == 0
            and entry.tokens < provider.min_cache_tokens(entry.scope.model))


def unleased_ref(provider: Provider, app: str, call: ModelCall, ttl_s: float, keys: RoutingKeys) -> CacheRef | None:
    """What a call without a lease is told: only an AUTOMATIC provider's key."""
    if provider.cache_kind is CacheKind.AUTOMATIC:
        return PrefixMark(None, ttl_s, keys.of(app, call))
    return None


def prefix_handle(entry_id: str, provider: Provider, ttl_s: float, wall: float, tokens: int) -> CacheHandle:
    """The handle of a MARKED or AUTOMATIC entry: no provider resource."""
    return CacheHandle(ResourceName(f"prefix/{entry_id}"), wall + provider.prefix_ttl_s(ttl_s), tokens)


def holds_resources(provider: Provider) -> bool:
    return provider.cache_kind is CacheKind.NAMED
