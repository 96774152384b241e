"""UpdateSession's update mask: which paths it accepts and the config fields
each replaces.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from agentctx_common.errors import FieldViolation, InvalidArgument
from context_service.domain.config import ContextConfig
from context_service.domain.limits import raise_if

# Paths UpdateSession accepts, and the ContextConfig fields each replaces.
CONFIG_PATHS = {
    "config": ("model", "selection", "compaction", "cache", "retrieval", "tools"),
    "config.model": ("model",),
    "config.selection": ("selection",),
    "config.compaction": ("compaction",),
    "config.cache": ("cache",),
    "config.retrieval": ("retrieval",),
    "config.tools": ("tools",),
}


@dataclass(frozen=True)
class SessionChange:
    """What an UpdateSession changes: the whole state and/or some top-level
    fields of the config."""

    state: bool = False
    config_fields: tuple[str, ...] = ()


def parse_update_mask(paths: Iterable[str], path: str = "update_mask.paths") -> SessionChange:
    paths = list(paths)
    if not paths:
        raise InvalidArgument.fields([FieldViolation("update_mask", "is required: name state and/or config")])
    state = False
    fields: list[str] = []
    violations = []
    for i, p in enumerate(paths):
        if p == "*":
            state = True
            fields += CONFIG_PATHS["config"]
        elif p == "state":
            state = True
        elif p in CONFIG_PATHS:
            fields += CONFIG_PATHS[p]
        else:
            violations.append(FieldViolation(f"{path}[{i}]", f"unknown path {p!r}; use state, config or config.<policy>"))
    raise_if(violations)
    return SessionChange(state, tuple(dict.fromkeys(fields)))


def apply_config_fields(current: ContextConfig, new: ContextConfig, fields: Iterable[str]) -> ContextConfig:
    return dataclasses.replace(current, **{name: getattr(new, name) for name in fields})


def only_config_fields(config: ContextConfig, fields: Iterable[str]) -> ContextConfig:
    """``config`` with every field not named left at its default (for
    validating just what an update changes)."""
    return apply_config_fields(ContextConfig(), config, fields)

