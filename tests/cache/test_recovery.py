"""The journal of created caches and start-up recovery: in process, and for
real with a cache service killed with SIGKILL and started again, against
the fake Gemini server running in the test process (which outlives it)."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import stat
import threading
import time

import pytest

from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.type.v1 import cache_pb2
from cache_service.domain.cleanup import Janitor
from cache_service.domain.model import CacheSpec, ResourceName
from cache_service.journal import FILE_NAME, FileJournal
from cache_service.providers.gemini.adapter import GeminiProvider
from cache_service.recovery import recover
from tests.cache import protos
from tests.fakes.gemini_server import FakeGemini
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.servers import secure_channel

MODEL = "gemini-2.5-flash"


async def test_journal_survives_reopen_skips_a_torn_line_and_compacts(tmp_path: pathlib.Path) -> None:
    journal = await FileJournal.open(tmp_path)
    await journal.intent("a", "local", "agentctx-a", 100.0)
    await journal.created("a", ResourceName("cachedContents/a"), 100.0)
    await journal.intent("b", "local", "agentctx-b", 100.0)
    await journal.intent("c", "local", "agentctx-c", 100.0)
    await journal.deleted("c")
    await journal.close()
    path = tmp_path / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with path.open("ab") as f:
        f.write(b'{"op":"created","id":"d","na')  # a crash mid-write
    reopened = await FileJournal.open(tmp_path)
    pending = {r.entry_id: r for r in reopened.pending()}
    assert set(pending) == {"a", "b"}
    assert pending["a"].name == ResourceName("cachedContents/a") and pending["b"].name is None
    assert pending["b"].display_name == "agentctx-b"
    # Compacted on open: only what is still pending remains in the file.
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["a", "b"]
    await reopened.close()


async def test_recovery_deletes_named_caches_and_finds_intents_by_display_name(tmp_path: pathlib.Path,
                                                                              fake_gemini: FakeGemini) -> None:
    provider = GeminiProvider(api_key=fake_gemini.api_key, base_url=fake_gemini.base_url)
    history = tuple(c for i in range(3) for c in (
        {"role": "user", "parts": [{"text": f"q{i} " * 60}]}, {"role": "model", "parts": [{"text": f"a{i} " * 60}]}))
    named = await provider.create_cache(CacheSpec(MODEL, None, (), None, history, 600, "agentctx-named"))
    unnamed = await provider.create_cache(CacheSpec(MODEL, None, (), None, history, 600, "agentctx-unnamed"))
    journal = await FileJournal.open(tmp_path)
    await journal.intent("named", "gemini", "agentctx-named", time.time() + 600)
    await journal.created("named", named.name, named.expire_time)
    await journal.intent("unnamed", "gemini", "agentctx-unnamed", time.time() + 600)
    await journal.intent("never", "gemini", "agentctx-never", time.time() + 600)
    await journal.intent("elsewhere", "vertex-somewhere", "agentctx-x", time.time() + 600)
    janitor = Janitor({"gemini": provider}, journal)
    janitor.start()
    report = await recover(journal, {"gemini": provider}, janitor)
    await janitor.drain()
    assert (report.queued_deletes, report.intents_cleared, report.kept) == (2, 1, 1)
    assert fake_gemini.live_names() == set()
    assert sorted(fake_gemini.deleted) == sorted([named.name.reveal(), unnamed.name.reveal()])
    assert [r.entry_id for r in journal.pending()] == ["elsewhere"]
    await janitor.close()
    await journal.close()
    await provider.close()


async def _acquire(port: int, certs: pathlib.Path) -> cache_pb2.CacheMetadata:
    async with secure_channel(port, certs, client="context-client") as channel:
        stub = cache_service_pb2_grpc.CacheServiceStub(channel)
        reply = await stub.AcquireLease(protos.acquire(3, model=MODEL), timeout=20)
        return reply.metadata


def _service(tmp: pathlib.Path, certs: pathlib.Path, fake: FakeGemini, port: int) -> tuple[pathlib.Path, dict[str, str]]:
    config = write_config(
        tmp / "agentctx.toml", certs, context_port=free_port(), cache_port=port, data_dir=tmp / "data",
        cache={"default_provider": "gemini", "gemini_base_url": fake.base_url, "gemini_min_cache_tokens": 64,
               "min_prefix_tokens": 64, "sightings_before_create": 0, "create_timeout_s": 20},
    )
    return config, {"AGENTCTX_CACHE_GEMINI_API_KEY": fake.api_key}


def _wait_for(predicate, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
async def test_restart_after_kill_9_deletes_what_the_killed_process_created(tmp_path: pathlib.Path, certs_dir,
                                                                           fake_gemini: FakeGemini) -> None:
    port = free_port()
    config, env = _service(tmp_path, certs_dir, fake_gemini, port)
    first = spawn("cache", config, tmp_path / "first.log", env=env)
    try:
        await asyncio.to_thread(wait_healthy, port, certs_dir, "context-client", first)
        meta = await _acquire(port, certs_dir)
        assert meta.state == cache_pb2.CACHE_STATE_CREATED
        [name] = fake_gemini.live_names()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert first.returncode == -signal.SIGKILL
    assert fake_gemini.calls_of("delete") == [] and fake_gemini.live_names() == {name}
    second = spawn("cache", config, tmp_path / "second.log", env=env)
    try:
        await asyncio.to_thread(wait_healthy, port, certs_dir, "context-client", second)
        assert await asyncio.to_thread(_wait_for, lambda: name in fake_gemini.deleted)
        assert fake_gemini.live_names() == set()
    finally:
        stop(second)
    journal = (tmp_path / "data" / FILE_NAME).read_text()
    assert name not in journal  # recorded as deleted, compacted away at the next start
    for log in ("first.log", "second.log"):
        text = (tmp_path / log).read_text()
        assert fake_gemini.api_key not in text and "cachedContents/" not in text


@pytest.mark.slow
async def test_restart_after_kill_9_during_a_create_finds_the_cache_by_display_name(tmp_path: pathlib.Path, certs_dir,
                                                                                    fake_gemini: FakeGemini) -> None:
    port = free_port()
    config, env = _service(tmp_path, certs_dir, fake_gemini, port)
    fake_gemini.create_gate = threading.Event()
    first = spawn("cache", config, tmp_path / "first.log", env=env)
    try:
        await asyncio.to_thread(wait_healthy, port, certs_dir, "context-client", first)
        pending = asyncio.create_task(_acquire(port, certs_dir))
        # The journal has the intent before the create request is sent.
        journal_path = tmp_path / "data" / FILE_NAME
        assert await asyncio.to_thread(_wait_for, lambda: journal_path.exists() and "intent" in journal_path.read_text())
        # Killed only once the provider holds the request (a fixed pause lost this race under load).
        assert await asyncio.to_thread(fake_gemini.create_arrived.wait, 30)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    pending.cancel()
    # The provider finishes the create the dead process asked for.
    fake_gemini.create_gate.set()
    assert await asyncio.to_thread(_wait_for, lambda: len(fake_gemini.caches) == 1)
    [name] = fake_gemini.live_names()
    fake_gemini.create_gate = None
    second = spawn("cache", config, tmp_path / "second.log", env=env)
    try:
        await asyncio.to_thread(wait_healthy, port, certs_dir, "context-client", second)
        assert await asyncio.to_thread(_wait_for, lambda: name in fake_gemini.deleted)
        assert fake_gemini.calls_of("list")
    finally:
        stop(second)
    reopened = await FileJournal.open(tmp_path / "data")
    assert reopened.pending() == []
    await reopened.close()
