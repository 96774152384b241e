"""Which provider instance serves a model: the routing table the composition
root builds from settings (cache_service.providers.routes.make_router) and
the servicers consult (see docs/ARCHITECTURE.md, "Ports"). Pure: patterns
are shell style, as fnmatch."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderRouter:
    """Model -> provider instance name. ``known`` is every instance name a
    scope may give (configured or not: a known but unconfigured one gets
    FAILED_PRECONDITION, an unknown one INVALID_ARGUMENT)."""

    routes: tuple[tuple[str, str], ...]
    default: str
    known: frozenset[str]

    def provider_for(self, model: str) -> str:
        for pattern, name in self.routes:
            if fnmatch.fnmatchcase(model, pattern):
                return name
        return self.default
