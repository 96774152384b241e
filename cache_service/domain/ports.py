"""Interfaces the registry needs from outside the domain (the provider
interface lives in cache_service.providers.base)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cache_service.domain.model import ResourceName


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
