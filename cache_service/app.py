"""What the cache service's RPCs share: settings and start-up resources."""

from __future__ import annotations

from dataclasses import dataclass

from cache_service.settings import CacheSettings


@dataclass
class CacheApp:
    settings: CacheSettings
