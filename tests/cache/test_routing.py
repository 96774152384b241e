"""The provider chosen per model: the routing table (configured routes
first, then the simulator's shapes and each configured vendor), route keys
read from the cache service's environment into secrets, and one cache
service serving Gemini, Claude and an OpenAI-compatible server at once,
each through its real SDK against its fake server."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from agentctx.type.v1 import cache_pb2
from agentctx_common.errors import ConfigError, FailedPrecondition
from agentctx_common.reasons import Reason
from agentctx_common.status import error_from_rpc
from cache_service.domain.ports import CacheKind
from cache_service.providers.routes import ProviderRoute, make_router
from cache_service.settings import CacheSettings
from tests.cache import protos
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI
from tests.support.servers import cache_settings


def test_configured_routes_come_first_then_the_built_in_ones() -> None:
    router = make_router([ProviderRoute(pattern="claude-haiku-*", provider="openai", name="proxy"),
                          ProviderRoute(pattern="qwen*", provider="openai", name="vllm")], "local", ["anthropic"])
    assert router.provider_for("claude-haiku-4-5") == "proxy"
    assert router.provider_for("claude-sonnet-4-5") == "anthropic"
    assert router.provider_for("qwen3-8b") == "vllm"
    assert router.provider_for("local-sim-anthropic-1") == "local-anthropic"
    assert router.provider_for("local-sim-openai-1") == "local-openai"
    assert router.provider_for("local-sim-1") == "local"
    # OpenAI is not configured: its patterns are not routed, and the default
    # (the simulator) serves its own models only: no call is made.
    with pytest.raises(FailedPrecondition) as err:
        router.provider_for("gpt-5")
    assert err.value.reason is Reason.MODEL_NOT_ROUTED and err.value.metadata == {"model": "gpt-5"}
    assert {"proxy", "vllm", "openai", "gemini"} <= router.known
    # A default that takes any model name (Gemini's API) serves what no route matches.
    assert make_router([], "gemini", ["gemini"]).provider_for("mistral-7b") == "gemini"


def test_route_keys_come_from_the_environment_as_secrets(certs_dir: pathlib.Path, tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_TOKEN", "vllm-secret-123")
    config = tmp_path / "cache.toml"
    config.write_text(
        "[cache]\n"
        f'tls_cert = "{certs_dir / "cache-server.pem"}"\ntls_key = "{certs_dir / "cache-server.key"}"\n'
        f'tls_client_ca = "{certs_dir / "ca.pem"}"\ndata_dir = "{tmp_path / "data"}"\n'
        'routes = [{pattern = "qwen*", provider = "openai", name = "vllm", base_url = "http://127.0.0.1:9/v1", '
        'api_key_env = "VLLM_TOKEN"}]\n'
    )
    s = CacheSettings.load(config)
    [route] = s.routes
    assert route.api_key is not None and route.api_key.get_secret_value() == "vllm-secret-123"
    assert "vllm-secret-123" not in repr(s) and "vllm-secret-123" not in str(s.model_dump())
    monkeypatch.delenv("VLLM_TOKEN")
    with pytest.raises(ConfigError, match="VLLM_TOKEN is unset"):
        CacheSettings.load(config)


def test_bad_routes_are_refused_without_echoing_keys(certs_dir: pathlib.Path, tmp_path: pathlib.Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("AGENTCTX_CACHE_ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(Exception, match="no credentials configured"):
        cache_settings(certs_dir, tmp_path, routes=[{"pattern": "claude-*", "provider": "anthropic"}])
    config = tmp_path / "cache.toml"
    config.write_text(
        "[cache]\n"
        f'tls_cert = "{certs_dir / "cache-server.pem"}"\ntls_key = "{certs_dir / "cache-server.key"}"\n'
        f'tls_client_ca = "{certs_dir / "ca.pem"}"\n'
        'routes = [{pattern = "x*", provider = "openai", name = "x", api_key = "table-secret-9"}]\n'
    )
    with pytest.raises(ConfigError, match="never go in the table") as err:
        CacheSettings.load(config)
    assert "table-secret-9" not in str(err.value)
    with pytest.raises(Exception, match="different providers"):
        cache_settings(certs_dir, tmp_path, routes=[
            {"pattern": "a*", "provider": "openai", "name": "same", "base_url": "http://127.0.0.1:1/v1"},
            {"pattern": "b*", "provider": "openai", "name": "same", "base_url": "http://127.0.0.1:2/v1"}])


def test_the_sdk_variables_are_fallbacks(certs_dir: pathlib.Path, tmp_path: pathlib.Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ant-from-sdk-var")
    monkeypatch.setenv("OPENAI_API_KEY", "oai-from-sdk-var")
    s = cache_settings(certs_dir, tmp_path)
    assert s.anthropic_api_key is not None and s.anthropic_api_key.get_secret_value() == "ant-from-sdk-var"
    assert s.openai_api_key is not None and s.openai_api_key.get_secret_value() == "oai-from-sdk-var"
    monkeypatch.setenv("AGENTCTX_CACHE_OPENAI_API_KEY", "oai-ours")
    s = cache_settings(certs_dir, tmp_path)
    assert s.openai_api_key is not None and s.openai_api_key.get_secret_value() == "oai-ours"
    assert "oai-ours" not in repr(s) and "ant-from-sdk-var" not in repr(s)


async def test_one_service_serves_gemini_claude_and_a_compatible_server_at_once(
        cache_rpc: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_KEY", "vllm-key-42")
    with FakeGemini(min_cache_tokens=64) as gemini, FakeAnthropic(min_cache_tokens=64) as claude, \
            FakeOpenAI(min_cache_tokens=64, flavor="vllm", api_key="vllm-key-42") as vllm:
        stub, app, _ = await cache_rpc(
            gemini_api_key=gemini.api_key, gemini_base_url=gemini.base_url, gemini_min_cache_tokens=64,
            anthropic_api_key=claude.api_key, anthropic_base_url=claude.base_url, anthropic_min_cache_tokens=64,
            routes=[{"pattern": "qwen*", "provider": "openai", "name": "vllm", "base_url": f"{vllm.base_url}/v1",
                     "api_key_env": "VLLM_KEY", "min_cache_tokens": 64}],
        )
        assert app.providers["vllm"].cache_kind is CacheKind.AUTOMATIC
        assert app.providers["anthropic"].cache_kind is CacheKind.MARKED
        assert app.providers["gemini"].cache_kind is CacheKind.NAMED
        for model, fake in (("gemini-2.5-flash", gemini), ("claude-sonnet-4-5", claude), ("qwen3-8b", vllm)):
            # The context side names no provider: the model's route picks it.
            lease = (await stub.AcquireLease(protos.acquire(3, model=model))).lease
            assert lease
            response = await stub.GenerateContent(protos.generate(3, lease, model=model))
            assert response.cache.state == cache_pb2.CACHE_STATE_CREATED, model
            assert response.response.usage.prompt_tokens > 0
            assert fake.calls_of("generate"), model
        assert len(gemini.calls_of("create")) == 1
        assert [c for c in claude.calls_of("generate") if "cache_control" in str(c.body)]
        assert all(c.body.get("prompt_cache_key") for c in vllm.calls_of("generate"))
        # A provider nobody configured is refused as such.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GenerateContent(protos.generate(1, model="gpt-5", provider="openai"))
        assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION


@pytest.fixture
def no_vendor_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AGENTCTX_CACHE_GEMINI_API_KEY",
                 "AGENTCTX_CACHE_ANTHROPIC_API_KEY", "AGENTCTX_CACHE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


async def test_a_model_no_provider_serves_says_what_to_configure(cache_rpc: Callable[..., Any],
                                                                no_vendor_keys: None) -> None:
    stub, _, _ = await cache_rpc()
    for model, hint in (("gpt-4o", "set OPENAI_API_KEY (or AGENTCTX_CACHE_OPENAI_API_KEY)"),
                        ("claude-sonnet-4-5", "set ANTHROPIC_API_KEY (or AGENTCTX_CACHE_ANTHROPIC_API_KEY)"),
                        ("gemini-2.5-flash", "set GEMINI_API_KEY (or AGENTCTX_CACHE_GEMINI_API_KEY)"),
                        ("mistral-7b", "add a route for it")):
        for call in (stub.GenerateContent(protos.generate(1, model=model)),
                     stub.AcquireLease(protos.acquire(3, model=model))):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            err = error_from_rpc(caught.value)
            assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION, model
            assert err.reason is Reason.MODEL_NOT_ROUTED and err.metadata == {"model": model}
            assert model in err.message and hint in err.message, err.message


async def test_a_placeholder_key_is_named_not_sent(cache_rpc: Callable[..., Any], no_vendor_keys: None,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    # The README's placeholder, copied as it is: no HTTP header can carry it.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "\u2026")
    with FakeAnthropic() as claude, caplog.at_level("WARNING", logger="agentctx.cache.providers"):
        stub, app, _ = await cache_rpc(anthropic_base_url=claude.base_url)
        assert "anthropic" not in app.providers
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GenerateContent(protos.generate(1, model="claude-sonnet-4-5"))
        err = error_from_rpc(caught.value)
        assert err.reason is Reason.MODEL_NOT_ROUTED
        assert "placeholder" in err.message and "ANTHROPIC_API_KEY" in err.message
        assert not claude.calls_of("generate")
    assert any(getattr(r, "variable", None) == "ANTHROPIC_API_KEY" for r in caplog.records)


async def test_generate_on_an_unrouted_model_reaches_the_agent_as_model_not_routed(
        certs_dir: pathlib.Path, tmp_path: pathlib.Path, no_vendor_keys: None) -> None:
    from agentctx.context.v1 import context_service_pb2 as cpb
    from agentctx.type.v1 import event_pb2
    from tests.support.pair import start_pair

    pair = await start_pair(certs_dir, tmp_path)
    try:
        session = await pair.agent.CreateSession(cpb.CreateSessionRequest(parent="apps/a/users/u"))
        event = event_pb2.Event(id="q1", author="user")
        event.content.role = "user"
        event.content.parts.add().text = "hello"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await pair.agent.Generate(cpb.GenerateRequest(session=session.name, input=[event], model="gpt-4o"))
        err = error_from_rpc(caught.value)
        assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert err.reason is Reason.MODEL_NOT_ROUTED and "OPENAI_API_KEY" in err.message
    finally:
        await pair.close()
