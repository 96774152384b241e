"""The create policy: when a prefix is worth a provider cache.

A cache costs money to write (its tokens at the input price) and to keep
(token-hours), and pays back only when later calls read it. So:

1. **Empty prefix** (no history, tools or system instruction): BYPASS
   EMPTY_PREFIX. Nothing stable to cache.
2. **Small prefix**: below ``floor`` estimated tokens, BYPASS
   BELOW_MIN_TOKENS without any provider call. The floor is the largest of
   ``min_prefix_tokens``, the provider's minimum for the model, and what
   the provider taught us by refusing a smaller cache. It is compared with
   the *prefix's* tokens, never the whole prompt's (adk-python #5847).
3. **Reuse**: a live cache whose prefix is a leading part of this prefix
   (same scope and TTL, not expiring within ``expiry_margin_s``) is a HIT;
   the call then sends only what follows it. The longest such cache wins.
4. **Grow**: if the part of this prefix that the cache does not hold exceeds
   ``grow_share`` of the cache's tokens, a new cache over this whole prefix
   is created (GROWN) and the old one is deleted once no lease needs it.
5. **First sighting**: otherwise a prefix is cached only after
   ``sightings_before_create`` earlier requests agreed with it: each request
   records its prefix, and a later prefix *agrees* when a recorded one is a
   leading part of it (the conversation grew) or equal to it. ADK keeps one
   fingerprint per agent on the session, over the previous request's first
   N contents; here the registry keeps a bounded, most-recently-used set of
   recorded prefixes per scope, so interleaved conversations of one scope
   do not overwrite each other's record, and a missing or expired cache
   does not send its prefix back to a first sighting. A first sighting is
   BYPASS FIRST_SIGHTING and costs nothing.
6. **Create**: a new cache over this whole prefix (CREATED).

Expired and missing caches leave their sighting behind, so a conversation
that resumes after a pause re-creates its cache at once.

The ``adk`` variant (setting ``create_policy = "adk"``) reproduces
adk-python's ContextCacheConfig for comparisons such as bench/economics:
the same first-sighting rule, but a valid cache is never grown; after
``refresh_after_uses`` uses (ADK's ``cache_intervals``) it is re-created
over the current prefix. Read generously: ADK re-creates over the prefix it
fingerprinted, which is never longer than the current one. ADK counts
agent invocations, the registry counts leases; callers scale the interval.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cache_service.domain.model import BypassReason

AGENTCTX = "agentctx"
ADK = "adk"


@dataclass(frozen=True)
class PolicySettings:
    min_prefix_tokens: int = 1024
    sightings_before_create: int = 1
    grow_share: float = 0.25
    variant: str = AGENTCTX
    # adk only: uses of a cache before it is re-created.
    refresh_after_uses: int = 10


class Action(enum.Enum):
    BYPASS = "BYPASS"
    HIT = "HIT"
    CREATE = "CREATE"
    GROW = "GROW"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: BypassReason = BypassReason.UNSPECIFIED


@dataclass(frozen=True)
class CachedPrefix:
    """What the policy needs to know of the best matching live cache."""

    tokens: int
    history_len: int
    uses: int = 0


def decide(
    *,
    empty: bool,
    tokens: int,
    history_len: int,
    floor: int,
    match: CachedPrefix | None,
    agreeing_sightings: int,
    settings: PolicySettings,
) -> Decision:
    if empty:
        return Decision(Action.BYPASS, BypassReason.EMPTY_PREFIX)
    if match is not None and settings.variant == ADK:
        return Decision(Action.GROW if match.uses >= settings.refresh_after_uses else Action.HIT)
    if match is not None:
        uncached = tokens - match.tokens
        if match.history_len < history_len and uncached > settings.grow_share * match.tokens:
            return Decision(Action.GROW)
        return Decision(Action.HIT)
    if tokens < max(floor, settings.min_prefix_tokens):
        return Decision(Action.BYPASS, BypassReason.BELOW_MIN_TOKENS)
    if agreeing_sightings >= settings.sightings_before_create:
        return Decision(Action.CREATE)
    return Decision(Action.BYPASS, BypassReason.FIRST_SIGHTING)
