"""What the context service's RPCs share: settings and the resources built
at start-up. Areas add their resources here as they land."""

from __future__ import annotations

from dataclasses import dataclass

from context_service.settings import ContextSettings


@dataclass
class ContextApp:
    settings: ContextSettings
