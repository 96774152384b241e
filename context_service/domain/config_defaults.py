"""The server-wide session defaults from settings (the JSON form of
ContextConfig): unknown keys and invalid values are refused at start.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from context_service.domain.config import ContextConfig, config_from_json
from context_service.domain.validation import config_violations


def _unknown_keys(data: dict[str, Any], cls: type, path: str) -> list[str]:
    hints = typing.get_type_hints(cls)
    unknown = []
    for name, value in data.items():
        if name not in hints:
            unknown.append(f"{path}{name}")
            continue
        hint = hints[name]
        nested = [a for a in (hint, *typing.get_args(hint)) if isinstance(a, type) and dataclasses.is_dataclass(a)]
        if nested and isinstance(value, dict):
            unknown += _unknown_keys(value, nested[0], f"{path}{name}.")
    return unknown


def config_from_defaults(data: dict[str, Any]) -> ContextConfig:
    """The server-wide defaults from settings (the JSON form of
    ContextConfig). Unknown keys and invalid values raise ValueError."""
    unknown = _unknown_keys(data, ContextConfig, "")
    if unknown:
        raise ValueError(f"unknown keys: {', '.join(unknown)}")
    try:
        config = config_from_json(data)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"invalid value: {exc}") from None
    violations = config_violations(config, "session_defaults")
    if violations:
        raise ValueError("; ".join(f"{v.field}: {v.description}" for v in violations))
    return config

