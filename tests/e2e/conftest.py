"""End-to-end fixtures: both services as real processes."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.processes import ServiceProcesses

# Small enough that a short conversation is worth caching.
CACHE_DEFAULTS = {"local_min_cache_tokens": 64, "min_prefix_tokens": 64}


@pytest.fixture
def services(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[Callable[..., ServiceProcesses]]:
    """``services(context={...}, cache={...})``: the pair, started."""
    started: list[ServiceProcesses] = []

    def start(*, context: dict[str, Any] | None = None, cache: dict[str, Any] | None = None) -> ServiceProcesses:
        tmp = tmp_path / f"pair-{len(started)}"
        tmp.mkdir()
        pair = ServiceProcesses(certs_dir, tmp, context=context, cache={**CACHE_DEFAULTS, **(cache or {})})
        started.append(pair)
        return pair.start()

    yield start
    for pair in started:
        pair.stop()
