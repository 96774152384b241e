"""Provider failures classified once (see docs/ARCHITECTURE.md, "Add a
provider"): each SDK adapter says how its exceptions read (``failure``: the
HTTP status, message and code of an API error) and how its provider words
the few answers a status alone does not tell (``overflow``, ``too_small``,
``lost_cache``); ``ErrorMap.classify`` turns that into the port's error by
one table, the same for every provider:

=========================  ==================================================
429                        RateLimited (the response's retry hint)
a named cache is gone      CacheNotFound (``lost_cache``; default: 404)
400, below the minimum     CacheTooSmall (``too_small``)
400 or no status, too big  ContextWindowExceeded (``overflow``)
no status                  ProviderUnavailable (an error inside a stream)
401, 403                   ProviderPermissionDenied
408, 409, 5xx              ProviderUnavailable (``retryable``; the hint, else 1 s)
any other status           InvalidRequest
a timeout                  ProviderTimeout (``timeouts``)
no connection              ProviderUnavailable (``disconnects``)
not an API error           InvalidRequest if the SDK refused the request
                           (``unexpressible``), else ProviderUnavailable
=========================  ==================================================

Rows are read top to bottom, by the failure's ``key``: its HTTP status, or
the row its error code names (``Failure.row``: OpenAI's quota, sent as a
429, is a permission error; its rate-limit code inside a stream, a 429).
The SDK's exception is dropped (``from None``): its text can echo prompts,
resource names or keys. Like httpx's ``map_exceptions``, ``mapped()`` is a
context manager around each SDK call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from cache_service.domain.ports import (
    CacheNotFound,
    CacheTooSmall,
    ContextWindowExceeded,
    InvalidRequest,
    ProviderError,
    ProviderPermissionDenied,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)


@dataclass(frozen=True)
class Failure:
    """An API error as the table reads it. ``status`` None: the error came
    inside a stream, without an HTTP status. ``row``: the status whose row
    applies when the provider's error code, not the HTTP status, decides
    (OpenAI's quota, sent as a 429); the error still reports ``status``."""

    status: int | None
    message: str = ""
    code: str = ""
    retry_after: float | None = None
    row: int | None = None

    @property
    def key(self) -> int | None:
        return self.row if self.row is not None else self.status


# (prompt tokens, context window) of an overflow; the minimum of a refused cache.
Overflow = tuple[int | None, int | None]


class ErrorMap:
    """The template: subclasses set ``api`` and the exception types and
    implement ``failure`` and ``overflow``."""

    api = "the provider's API"
    timeouts: tuple[type[BaseException], ...] = ()
    disconnects: tuple[type[BaseException], ...] = ()
    unexpressible: tuple[type[BaseException], ...] = (ValueError, TypeError, KeyError)
    retryable: frozenset[int] = frozenset({408, 409})

    # --- what each provider supplies ---------------------------------------------

    def failure(self, exc: BaseException) -> Failure | None:
        """The status, message and code of an API error; None for anything else."""
        raise NotImplementedError

    def overflow(self, failure: Failure) -> Overflow | None:
        """Whether the failure says the prompt exceeds the context window."""
        raise NotImplementedError

    def too_small(self, failure: Failure) -> tuple[int | None] | None:
        """Whether a create was refused below the provider's minimum size."""
        return None

    def lost_cache(self, failure: Failure) -> bool:
        """Whether the cache a call named is gone."""
        return failure.status == 404

    # --- the one classification ----------------------------------------------------

    @contextlib.contextmanager
    def mapped(self, *, cached: bool = False) -> Iterator[None]:
        """Raises the port's error for anything the block raises;
        ``cached``: the call named a cache."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - classified, never re-raised as is
            raise self.classify(exc, cached=cached) from None

    def classify(self, exc: BaseException, *, cached: bool = False) -> ProviderError:
        """A content-free ProviderError for an SDK or transport failure."""
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, self.timeouts):
            return ProviderTimeout()
        if isinstance(exc, self.disconnects):
            return ProviderUnavailable(retry_after=1.0)
        failure = self.failure(exc)
        if failure is None:
            if isinstance(exc, self.unexpressible):
                return InvalidRequest(f"the request could not be expressed for {self.api}")
            return ProviderUnavailable(retry_after=1.0)
        return self.by_status(failure, cached=cached)

    def by_status(self, f: Failure, *, cached: bool) -> ProviderError:
        key, status = f.key, f.status
        if key == 429:
            return RateLimited(status=status, retry_after=f.retry_after)
        if cached and self.lost_cache(f):
            return CacheNotFound(status=status)
        small = self.too_small(f) if key == 400 else None
        if small is not None:
            return CacheTooSmall(status=status, min_tokens=small[0])
        window = self.overflow(f) if key in (400, None) else None
        if window is not None:
            return ContextWindowExceeded(status=status or 400, prompt_tokens=window[0], context_window=window[1])
        if key is None:
            return ProviderUnavailable(retry_after=1.0)
        if key in (401, 403):
            return ProviderPermissionDenied(status=status)
        if key in self.retryable or key >= 500:
            return ProviderUnavailable(status=status, retry_after=f.retry_after or 1.0)
        return InvalidRequest(status=status)
