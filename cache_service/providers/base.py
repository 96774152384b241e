"""The provider port, re-exported for importers outside the cache service.

The Provider protocol and its errors live in cache_service.domain.ports and
the values it exchanges in cache_service.domain.model (see
docs/ARCHITECTURE.md, "Ports"); the adapters in this package import them
from there.
"""

from cache_service.domain.model import CacheHandle, CacheSpec, ListedCache
from cache_service.domain.ports import (
    CacheNotFound,
    CacheTooSmall,
    ContextWindowExceeded,
    InvalidRequest,
    Provider,
    ProviderError,
    ProviderPermissionDenied,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)

__all__ = [
    "CacheHandle",
    "CacheNotFound",
    "CacheSpec",
    "CacheTooSmall",
    "ContextWindowExceeded",
    "InvalidRequest",
    "ListedCache",
    "Provider",
    "ProviderError",
    "ProviderPermissionDenied",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
]
