"""Which provider serves a model: the cache service's routing table (see
docs/ARCHITECTURE.md, "Ports"). The context side never names a provider: a
scope without one is served by the first route whose ``pattern`` (shell
style, as fnmatch) matches its model, else by ``default_provider``.

A route names a provider kind (``provider``) and, optionally, its own
instance (``name``: e.g. a vLLM server beside OpenAI itself), with the
instance's endpoint and the environment variable that holds its key
(``api_key_env``). Keys never appear in the table: they live only in the
cache service's environment and are read into SecretStr values by
CacheSettings. After the configured routes come the built-in ones of each
registered provider (providers.registry): the local simulator's three
shapes always, and ``gemini-*``, ``claude-*`` and ``gpt-*`` / ``o1*`` /
``o3*`` / ``o4*`` for each vendor whose key is configured.
"""

from __future__ import annotations

from collections.abc import Sequence

from cache_service.domain.routing import ProviderRouter
from cache_service.providers.plugin import ProviderRoute
from cache_service.providers.registry import BY_KIND, KINDS, PROVIDERS

__all__ = ["ProviderRoute", "ProviderRouter", "make_router"]


def make_router(routes: Sequence[ProviderRoute], default: str, vendors: Sequence[str],
                hints: Sequence[tuple[str, str]] = ()) -> ProviderRouter:
    """Configured routes first, then the simulator's and each configured
    vendor's built-in patterns. ``hints``: (pattern, what to configure) of
    the vendors that are not."""
    table = [(r.pattern, r.instance) for r in routes]
    for plugin in PROVIDERS:
        table.extend(plugin.always_routes)
    for vendor in vendors:
        for plugin in PROVIDERS:
            table.extend((p, vendor) for p in plugin.patterns.get(vendor, ()))
    known = frozenset({*KINDS, *(r.instance for r in routes)})
    return ProviderRouter(tuple(table), default, known, BY_KIND[default].serves_any_model, tuple(hints))
