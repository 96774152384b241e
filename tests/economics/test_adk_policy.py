"""The ``adk`` create-policy variant that bench/economics compares with:
adk-python's first-sighting rule, no growth while a cache is valid, and a
re-create after ``adk_cache_intervals`` uses. The default policy is
untouched."""

from __future__ import annotations

import pathlib

from cache_service.app import registry_settings
from cache_service.domain.model import BypassReason, CacheState
from cache_service.domain.policy import ADK, AGENTCTX, Action, CachedPrefix, PolicySettings, decide
from cache_service.settings import CacheSettings
from tests.cache.support import prefix

ADK_SETTINGS = PolicySettings(min_prefix_tokens=100, variant=ADK, refresh_after_uses=3)


def _decide(settings: PolicySettings, **kw: object) -> Action | BypassReason:
    args = dict(empty=False, tokens=1000, history_len=8, floor=0, match=None, agreeing_sightings=0, settings=settings)
    args.update(kw)
    d = decide(**args)  # type: ignore[arg-type]
    return d.reason if d.action is Action.BYPASS else d.action


def test_adk_never_grows_a_valid_cache_and_recreates_after_its_interval() -> None:
    small = CachedPrefix(tokens=200, history_len=2, uses=1)
    assert _decide(PolicySettings(min_prefix_tokens=100), match=small) is Action.GROW
    assert _decide(ADK_SETTINGS, match=small) is Action.HIT
    assert _decide(ADK_SETTINGS, match=CachedPrefix(tokens=200, history_len=2, uses=2)) is Action.HIT
    assert _decide(ADK_SETTINGS, match=CachedPrefix(tokens=200, history_len=2, uses=3)) is Action.GROW
    # Without a cache the two policies agree: record first, create on agreement.
    for settings in (ADK_SETTINGS, PolicySettings(min_prefix_tokens=100)):
        assert _decide(settings) is BypassReason.FIRST_SIGHTING
        assert _decide(settings, agreeing_sightings=1) is Action.CREATE
        assert _decide(settings, tokens=99) is BypassReason.BELOW_MIN_TOKENS
        assert _decide(settings, empty=True) is BypassReason.EMPTY_PREFIX


async def test_a_scripted_conversation_under_the_adk_policy(harness_factory) -> None:
    h = await harness_factory(policy=PolicySettings(min_prefix_tokens=64, variant=ADK, refresh_after_uses=3))
    states = [(await h.acquire(prefix(n))).info.state for n in range(2, 9)]
    assert states == [
        CacheState.BYPASS,  # first sighting
        CacheState.CREATED,  # use 1
        CacheState.HIT, CacheState.HIT,  # uses 2 and 3: the suffix grows uncached
        CacheState.GROWN,  # re-created over the current prefix
        CacheState.HIT, CacheState.HIT,
    ]
    assert h.provider.counts["create"] == 2


def test_the_policy_is_chosen_by_a_cache_setting(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    base = dict(tls_cert=certs_dir / "cache-server.pem", tls_key=certs_dir / "cache-server.key",
                tls_client_ca=certs_dir / "ca.pem", data_dir=tmp_path)
    default = registry_settings(CacheSettings(**base)).policy
    assert (default.variant, default) == (AGENTCTX, PolicySettings(min_prefix_tokens=default.min_prefix_tokens))
    adk = registry_settings(CacheSettings(**base, create_policy="adk", adk_cache_intervals=30)).policy
    assert (adk.variant, adk.refresh_after_uses) == (ADK, 30)
