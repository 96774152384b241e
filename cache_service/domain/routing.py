"""Which provider instance serves a model: the routing table the composition
root builds from settings (cache_service.providers.routes.make_router) and
the servicers consult (see docs/ARCHITECTURE.md, "Ports"). Pure: patterns
are shell style, as fnmatch."""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass, field

from agentctx_common.errors import FailedPrecondition
from agentctx_common.reasons import Reason

log = logging.getLogger("agentctx.cache.routing")
# Models whose refusal was logged (each once, up to this many).
_LOGGED_MAX = 256


@dataclass(frozen=True)
class ProviderRouter:
    """Model -> provider instance name. ``known`` is every instance name a
    scope may give (configured or not: a known but unconfigured one gets
    FAILED_PRECONDITION, an unknown one INVALID_ARGUMENT).

    ``default_serves_all``: whether the default provider takes any model
    name (Gemini) or only its own (the simulator: ``local-sim-*``). A model
    no route matches that the default does not serve is FAILED_PRECONDITION
    MODEL_NOT_ROUTED, never a call; ``hints`` says, per model pattern of an
    unconfigured vendor, what to configure for it."""

    routes: tuple[tuple[str, str], ...]
    default: str
    known: frozenset[str]
    default_serves_all: bool = True
    hints: tuple[tuple[str, str], ...] = ()
    _logged: set[str] = field(default_factory=set, compare=False, repr=False)

    def provider_for(self, model: str) -> str:
        for pattern, name in self.routes:
            if fnmatch.fnmatchcase(model, pattern):
                return name
        if self.default_serves_all:
            return self.default
        raise self.not_routed(model)

    def not_routed(self, model: str) -> FailedPrecondition:
        hint = next((h for pattern, h in self.hints if fnmatch.fnmatchcase(model, pattern)), None)
        if hint is None:
            hint = (f"add a route for it to the cache service's routes, or use a model the default provider "
                    f"({self.default}) serves")
        if model not in self._logged and len(self._logged) < _LOGGED_MAX:
            self._logged.add(model)
            log.warning("model not routed", extra={"model": model, "default_provider": self.default})
        return FailedPrecondition(f"no configured provider serves model {model!r}: {hint}",
                                  reason=Reason.MODEL_NOT_ROUTED, metadata={"model": model})
