"""What a leased call's cache did, read from the provider's usage rather
than from what the registry intended (see domain.generation).

- NAMED (Gemini): the create is a write the call's own usage does not
  show, so the call whose lease created (or grew) the cache reports the
  cache's tokens in ``cache_write_tokens``. A lease may serve several
  calls: only the first of them (``creator``, as the registry store's
  ``report_create`` answers once per entry) paid the create; the later
  ones read the cache, and their record is a HIT.
- MARKED (Anthropic): breakpoints below the model's minimum prefix are
  ignored without an error, and the call reports neither a write nor a
  read. Such a call did not create, grow or hit anything: its record is a
  BYPASS BELOW_MIN_TOKENS, and the size it marked (the leased prefix, or
  the whole request when it wrote through) is below the provider's floor
  for the model, which the registry learns as refusals teach it on Gemini.
  A call that wrote or read proves the opposite: the floor is at most the
  size it marked (``above_floor``), so a learned floor above that is
  lowered (as a Gemini create that succeeds lowers it).
- AUTOMATIC (OpenAI) caches by itself: a call that reads nothing is a
  routing miss or a cold prefix, not a floor, so its record stands.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cache_service.domain.model import BypassReason, CacheInfo, CacheState, Usage
from cache_service.domain.ports import CacheKind

_CACHED = (CacheState.CREATED, CacheState.GROWN, CacheState.HIT)


@dataclass(frozen=True)
class Observed:
    usage: Usage | None
    info: CacheInfo
    below_floor: bool = False  # a MARKED call the provider cached nothing of
    above_floor: bool = False  # a MARKED call the provider wrote or read some of


def observe(kind: CacheKind, usage: Usage | None, info: CacheInfo, entry_tokens: int, *,
            creator: bool = True) -> Observed:
    """The usage and record of a leased call as the provider reported it
    (``info``: the record the lease gave; ``entry_tokens``: the leased
    cache's size; ``creator``: a NAMED call of a CREATED or GROWN lease is
    the one that reports the create). Without usage (a stream cut short)
    nothing is known, and the record stands."""
    if usage is None or info.state not in _CACHED:
        return Observed(usage, info)
    if kind is CacheKind.NAMED:
        if info.state is CacheState.HIT:
            return Observed(usage, info)
        if not creator:
            return Observed(usage, replace(info, state=CacheState.HIT))
        return Observed(replace(usage, cache_write_tokens=usage.cache_write_tokens + entry_tokens), info)
    if kind is CacheKind.MARKED:
        if usage.cache_write_tokens == 0 and usage.cached_prompt_tokens == 0:
            below = replace(info, state=CacheState.BYPASS, bypass_reason=BypassReason.BELOW_MIN_TOKENS,
                            expire_time=None, uses=0)
            return Observed(usage, below, below_floor=True)
        return Observed(usage, info, above_floor=True)
    return Observed(usage, info)


def marked_tokens(entry_tokens: int, request_tokens: int, write_through: bool) -> int:
    """The largest prefix a MARKED call marked, in the registry's token
    estimate: the leased prefix, or the whole request (``request_tokens``)
    when it wrote through. A call that cached nothing proves the floor above
    it; one that wrote or read something, at most it."""
    return max(entry_tokens, request_tokens if write_through else 0)


def learned_floor(entry_tokens: int, request_tokens: int, write_through: bool) -> int:
    """The floor a MARKED call that cached nothing teaches: above the
    largest prefix it marked."""
    return marked_tokens(entry_tokens, request_tokens, write_through) + 1
