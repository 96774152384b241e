"""The ``adk`` create-policy variant that bench/economics compares with:
adk-python 2.13's ContextCacheConfig. A request agrees only with the
previous one of its scope, however old; a valid cache is never grown and is
re-created once it has served ``refresh_after_uses`` invocations, counted
from the history as ADK counts them; the only floors are the provider's and
ADK's per model. The default policy is untouched."""

from __future__ import annotations

import pathlib

from cache_service.app import registry_settings
from cache_service.domain.keys import invocation_count
from cache_service.domain.model import BypassReason, CacheState
from cache_service.domain.policy import ADK, AGENTCTX, Action, CachedPrefix, Evidence, PolicySettings, adk_floor, decide
from cache_service.domain.pricing import cache_prices
from cache_service.settings import CacheSettings
from tests.cache.support import prefix

ADK_SETTINGS = PolicySettings(min_prefix_tokens=100, variant=ADK, refresh_after_uses=3)


def _decide(settings: PolicySettings, **kw: object) -> Action | BypassReason:
    args = dict(empty=False, tokens=1000, history_len=8, floor=0, match=None, evidence=Evidence(),
                prices=cache_prices("named"), ttls=(1800.0,), settings=settings, model="local-sim-1")
    args.update(kw)
    d = decide(**args)  # type: ignore[arg-type]
    return d.reason if d.action is Action.BYPASS else d.action


def test_adk_never_grows_a_valid_cache_and_recreates_after_its_interval() -> None:
    small = CachedPrefix(tokens=200, history_len=2, uses=1, invocations=1)
    busy = Evidence(agreeing_age=20.0, gaps=(20.0,) * 8, previous_agrees=True, continued=1.0)
    assert _decide(PolicySettings(min_prefix_tokens=100), match=small, evidence=busy) is Action.GROW
    assert _decide(ADK_SETTINGS, match=small) is Action.HIT
    assert _decide(ADK_SETTINGS, match=CachedPrefix(tokens=200, history_len=2, invocations=3)) is Action.HIT
    assert _decide(ADK_SETTINGS, match=CachedPrefix(tokens=200, history_len=2, invocations=4)) is Action.GROW


def test_adk_agrees_with_the_previous_request_only_and_has_no_floor_of_its_own() -> None:
    assert _decide(ADK_SETTINGS) is BypassReason.FIRST_SIGHTING
    # However old the previous request (ADK's fingerprint carries no time).
    old = Evidence(agreeing_age=None, gaps=(), previous_agrees=True)
    assert _decide(ADK_SETTINGS, evidence=old) is Action.CREATE
    assert _decide(ADK_SETTINGS, evidence=old, tokens=99) is Action.CREATE  # min_tokens 0
    assert _decide(ADK_SETTINGS, evidence=old, tokens=99, floor=100) is BypassReason.BELOW_MIN_TOKENS
    assert (adk_floor("gemini-2.5-flash"), adk_floor("models/gemini-3-pro"), adk_floor("local-sim-1")) == (2048, 4096, 0)
    assert _decide(ADK_SETTINGS, evidence=old, tokens=2047, model="gemini-2.5-flash") is BypassReason.BELOW_MIN_TOKENS
    assert _decide(ADK_SETTINGS, empty=True) is BypassReason.EMPTY_PREFIX


def test_invocations_are_counted_from_the_history() -> None:
    user = {"role": "user", "parts": [{"text": "do it"}]}
    call = {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}
    text = {"role": "model", "parts": [{"text": "done"}]}
    assert invocation_count([]) == 1
    assert invocation_count([user, call]) == 1  # the function's answer continues the invocation
    assert invocation_count([user, call, answer, text]) == 2  # the next user message starts one
    assert invocation_count([user, text, user, text]) == 3


async def test_a_scripted_conversation_under_the_adk_policy(harness_factory) -> None:
    """tests.cache.support's prefixes are whole turns (user text, model
    text), so each call is an invocation of its own."""
    h = await harness_factory(policy=PolicySettings(min_prefix_tokens=64, variant=ADK, refresh_after_uses=3))
    states = [(await h.acquire(prefix(n))).info.state for n in range(2, 9)]
    assert states == [
        CacheState.BYPASS,  # first sighting
        CacheState.CREATED,  # the cache's first invocation
        CacheState.HIT, CacheState.HIT,  # its 2nd and 3rd: the suffix grows uncached
        CacheState.GROWN,  # the 4th: re-created over the current prefix
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
