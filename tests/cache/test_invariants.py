"""Properties: chain digests identify leading parts exactly, and any
sequence of registry operations keeps the provider in step with the
registry (no leaked and no phantom caches, one live cache per key)."""

from __future__ import annotations

import asyncio
import pathlib
import tempfile
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cache_service.domain.cleanup import Janitor
from cache_service.domain.clock import ManualClock
from cache_service.domain.keys import chain_digests
from cache_service.domain.policy import PolicySettings
from cache_service.domain.ports import LeaseRejected, ProviderUnavailable
from cache_service.domain.registry import Registry
from cache_service.domain.registry_settings import RegistrySettings
from cache_service.journal import FileJournal
from cache_service.providers.local import LocalProvider
from tests.cache.support import Harness, prefix, scope

_contents = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "model"]),
                           "parts": st.lists(st.fixed_dictionaries({"text": st.text(max_size=8)}), min_size=1, max_size=2)}),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(a=_contents, b=_contents)
def test_chain_digest_at_n_agrees_exactly_when_the_first_n_contents_agree(a: list[Any], b: list[Any]) -> None:
    head = {"model": "m", "systemInstruction": None, "tools": [], "toolConfig": None}
    chain_a, chain_b = chain_digests(head, a), chain_digests(head, b)
    n = len(a)
    if len(b) >= n:
        assert (chain_a[n] == chain_b[n]) == (b[:n] == a)
    other_head = {**head, "model": "m2"}
    assert chain_digests(other_head, a)[0] != chain_a[0]


_op = st.one_of(
    st.tuples(st.just("acquire"), st.integers(0, 6), st.sampled_from(["a", "b"]), st.sampled_from([None, 120.0])),
    st.tuples(st.just("release"), st.integers(0, 50)),
    st.tuples(st.just("invalidate"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("advance"), st.sampled_from([1.0, 60.0, 130.0, 301.0])),
    st.tuples(st.just("fail_create"),),
)


async def _run(ops: list[tuple[Any, ...]], directory: str) -> None:
    clock = ManualClock()
    provider = LocalProvider(clock=clock, min_cache_tokens=64)
    journal = await FileJournal.open(pathlib.Path(directory))
    janitor = Janitor({"local": provider}, journal, workers=2, attempts=1)
    janitor.start()
    registry = Registry({"local": provider}, journal, janitor, clock,
                        RegistrySettings(max_entries=4, lease_ttl_s=100,
                                         policy=PolicySettings(min_prefix_tokens=64, grow_share=0.25)))
    h = Harness(registry, provider, journal, janitor, clock)
    leases: list[str] = []
    acquires = 0
    try:
        for op in ops:
            kind = op[0]
            if kind == "acquire":
                acquires += 1
                r = await h.acquire(prefix(op[1]), scope(user=op[2]), ttl=op[3])
                if r.lease:
                    leases.append(r.lease)
            elif kind == "release" and leases:
                await registry.release(leases[op[1] % len(leases)])
            elif kind == "invalidate":
                await registry.invalidate(scope(user=op[1]))
            elif kind == "advance":
                clock.advance(op[1])
                await registry.sweep()
            elif kind == "fail_create":
                provider.fail_next("create", ProviderUnavailable())
            await h.assert_in_step()
            keys = Counter((e.scope_fp, e.digest, e.ttl_s) for e in (await registry.entries()) if not e.retiring)
            assert all(n == 1 for n in keys.values())
            assert (await registry.entry_count()) <= 4
            for lease in leases:
                try:
                    await registry.resolve(lease)
                except LeaseRejected:
                    pass
        assert provider.counts["create"] <= acquires
    finally:
        await h.close()


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(_op, max_size=25))
def test_any_operation_sequence_keeps_the_provider_in_step(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_run(ops, directory))
