"""Learned floors (the smallest prefix a provider accepted to cache, as its
refusals taught the registry), on both stores; across Redis replicas in
tests/cluster/test_learned_floor.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


async def test_a_floor_is_learned_at_once_and_never_lowered(harness_factory: Callable[..., Any]) -> None:
    store = (await harness_factory()).registry.store
    assert await store.learned_floor("local", "m") == 0
    await store.learn_floor("local", "m", 2048)
    assert await store.learned_floor("local", "m") == 2048
    await store.learn_floor("local", "m", 1000)
    assert await store.learned_floor("local", "m") == 2048
    assert await store.learned_floor("local", "other") == 0
