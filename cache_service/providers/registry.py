"""The providers the cache service knows, registered in ``PROVIDERS`` (one
entry each, see docs/ARCHITECTURE.md, "Add a provider"). Everything that
enumerates providers reads it: the route table's union, the built-in routes
(providers.routes), ``CacheSettings.vendor_configured`` and the factory.

``ProviderFields`` gathers the flat settings of the providers that have
them (``gemini_api_key``, ``anthropic_base_url``, ...) for CacheSettings to
inherit; a new provider is configured by its routes and needs none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from cache_service.providers import anthropic, gemini, local, openai
from cache_service.providers.anthropic.settings import AnthropicFields
from cache_service.providers.gemini.settings import GeminiFields
from cache_service.providers.local.settings import LocalFields
from cache_service.providers.openai.settings import OpenAIFields
from cache_service.providers.plugin import ProviderPlugin, ProviderRoute

PROVIDERS: tuple[ProviderPlugin, ...] = (local.PLUGIN, gemini.PLUGIN, anthropic.PLUGIN, openai.PLUGIN)

BY_KIND: Mapping[str, ProviderPlugin] = {kind: p for p in PROVIDERS for kind in p.kinds}
KINDS: tuple[str, ...] = tuple(BY_KIND)
DEFAULTS: tuple[str, ...] = tuple(d for p in PROVIDERS for d in p.defaults)


class ProviderFields(LocalFields, GeminiFields, AnthropicFields, OpenAIFields):
    """The flat settings of the built-in providers, accepted as always."""


if TYPE_CHECKING:
    RouteEntry = ProviderRoute
else:
    # One route model per provider, chosen by the row's ``provider``.
    RouteEntry = Annotated[Union[tuple(p.route for p in PROVIDERS)], Field(discriminator="provider")]  # noqa: UP007
