"""Fixtures of the cache service tests: a manual clock, a registry over the
real local simulator and a real journal file, real servers with the dev
mTLS certificates, and span capture that cooperates with other modules."""

from __future__ import annotations

import pathlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentctx.cache.v1 import cache_service_pb2_grpc
from cache_service.app import CacheApp
from cache_service.domain.cleanup import Janitor
from cache_service.domain.clock import ManualClock
from cache_service.domain.policy import PolicySettings
from cache_service.domain.registry import Registry
from cache_service.domain.registry_settings import RegistrySettings
from cache_service.journal import FileJournal
from cache_service.providers.gemini.adapter import GeminiProvider
from cache_service.providers.local import LocalProvider
from cache_service.server import build_server
from tests.cache.support import Harness
from tests.fakes.gemini_server import FakeGemini
from tests.support.servers import cache_settings, secure_channel


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    """Every span this process ends from now on. The global tracer provider
    can be set once per process: install one if nobody has, else attach to
    the SDK provider already installed."""
    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        current = trace.get_tracer_provider()
    assert isinstance(current, TracerProvider), "a non-SDK tracer provider is installed"
    current.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every registry test runs on the memory store and on Redis; those of
    a module marked ``redis_cluster`` on the local Redis Cluster too."""
    if "registry_state" not in metafunc.fixturenames:
        return
    params = ["memory", pytest.param("redis", marks=pytest.mark.redis)]
    if metafunc.definition.get_closest_marker("redis_cluster"):
        params.append(pytest.param("cluster", marks=pytest.mark.redis))
    metafunc.parametrize("registry_state", params, indirect=True)


@pytest.fixture
def registry_state(request: pytest.FixtureRequest) -> Iterator[tuple[str, str] | None]:
    """Where the registry keeps its state: this process (None), or a
    private key prefix on the real Redis or the Redis Cluster, as
    (backend, prefix) (the store and single flight that replicas share)."""
    if request.param == "memory":
        yield None
        return
    from tests.cluster import support

    backend = support.CLUSTER if request.param == "cluster" else support.SINGLE
    support.require(backend)
    prefix = support.new_prefix()
    yield backend, prefix
    support.delete_prefix(prefix, backend)


@pytest.fixture
async def harness_factory(tmp_path: pathlib.Path, clock: ManualClock,
                          registry_state: tuple[str, str] | None) -> AsyncIterator[Callable[..., Any]]:
    """``await harness_factory(**registry settings)``: a registry over a
    local simulator (minimum cache size 64 tokens) and a journal in tmp_path;
    its state in memory or on Redis (``registry_state``)."""
    made: list[Harness] = []
    clients: list[Any] = []

    async def make(*, min_cache_tokens: int = 64, policy: PolicySettings | None = None, provider: Any = None,
                   live: Callable[[], set[str]] | None = None, harness_clock: ManualClock | None = None,
                   **overrides: Any) -> Harness:
        c = harness_clock or clock
        provider = provider or LocalProvider(clock=c, min_cache_tokens=min_cache_tokens)
        journal = await FileJournal.open(tmp_path / f"data-{len(made)}")
        providers = {provider.name: provider}
        janitor = Janitor(providers, journal, workers=2, delete_timeout_s=1.0, attempts=2, backoff_s=0.01)
        janitor.start()
        settings = RegistrySettings(policy=policy or PolicySettings(min_prefix_tokens=64), **overrides)
        state: dict[str, Any] = {}
        if registry_state is not None:
            state = _redis_state(registry_state, settings, clients)
        registry = Registry(providers, journal, janitor, c, settings, **state)
        h = Harness(registry, provider, journal, janitor, c, live)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.close()
    for flights, client in clients:
        await flights.close()
        await client.aclose()


def _redis_state(state: tuple[str, str], settings: RegistrySettings, clients: list[Any]) -> dict[str, Any]:
    from cache_service.cluster.cipher import NameCipher
    from cache_service.cluster.client import redis_client
    from cache_service.cluster.names import Names
    from cache_service.cluster.single_flight import RedisSingleFlight
    from cache_service.cluster.store import RedisRegistryStore
    from tests.cluster import support

    backend, prefix = state
    client = redis_client(support.url_of(backend))
    names = Names(prefix)
    flights = RedisSingleFlight(client, names, max_entries=settings.max_entries,
                                claim_s=2.0, slot_s=settings.create_timeout_s + 2.0)
    clients.append((flights, client))
    store = RedisRegistryStore(client, names, NameCipher.from_base64(support.ENCRYPTION_KEY),
                               max_sightings=settings.max_sightings)
    return {"store": store, "flights": flights}


@pytest.fixture
async def harness(harness_factory: Callable[..., Any]) -> Harness:
    return await harness_factory()


@pytest.fixture
def fake_gemini() -> Iterator[FakeGemini]:
    """The fake Gemini REST server (minimum cache size 64 tokens)."""
    with FakeGemini(min_cache_tokens=64) as fake:
        yield fake


@pytest.fixture
async def gemini_harness(harness_factory: Callable[..., Any], fake_gemini: FakeGemini) -> AsyncIterator[Harness]:
    """A registry whose only provider is the real google-genai SDK pointed at
    the fake server; its clock starts at real time (the fake's expiry clock)."""
    provider = GeminiProvider(api_key=fake_gemini.api_key, base_url=fake_gemini.base_url, request_timeout_s=10,
                              min_cache_tokens=64)
    h = await harness_factory(provider=provider, live=fake_gemini.live_names,
                              harness_clock=ManualClock(start_wall=time.time()),
                              policy=PolicySettings(min_prefix_tokens=64, sightings_before_create=0))
    yield h
    await provider.close()


@pytest.fixture
async def cache_rpc(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Callable[..., Any]]:
    """``await cache_rpc(clock=..., providers=..., **settings)``: a real cache
    server on 127.0.0.1:0 (mTLS, dev certificates) and a stub presenting the
    context service's client certificate. Returns (stub, app, server)."""
    started: list[tuple[Any, Any]] = []

    async def start(*, clock: Any = None, providers: Any = None, client: str = "context-client",
                    **overrides: Any) -> tuple[cache_service_pb2_grpc.CacheServiceStub, CacheApp, Any]:
        settings = cache_settings(certs_dir, tmp_path, **{"sightings_before_create": 0, "min_prefix_tokens": 64,
                                                          "local_min_cache_tokens": 64, **overrides})
        app = await CacheApp.create(settings, clock=clock, providers=providers)
        server = await build_server(settings, app=app)
        await server.start()
        channel = secure_channel(server.port, certs_dir, client=client)
        started.append((server, channel))
        return cache_service_pb2_grpc.CacheServiceStub(channel), app, server

    yield start
    for server, channel in started:
        await channel.close()
        await server.stop(grace=1)
