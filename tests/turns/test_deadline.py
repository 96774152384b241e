"""Load shedding in a turn: once the agent's deadline has passed, no model
call is started (DEADLINE_EXCEEDED, DEADLINE_TOO_SHORT), neither unary nor
streamed; the input stays stored and a retry completes the turn once.

The turn runner is driven directly (on the real store, builder and cache
client, against the real cache service), with a clock the test moves: a
gRPC deadline cannot be made to pass at an exact step of a turn."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx_common.errors import DeadlineExceeded
from agentctx_common.reasons import Reason
from context_service.cache_client import CacheClient
from context_service.domain import turn_rules
from context_service.domain.config import CachePolicy, ContextConfig
from context_service.domain.event_validation import prepare_event
from context_service.domain.model import SessionKey
from context_service.mapping.build_context import RequestMapper
from context_service.mapping.convert import event_from_proto
from context_service.server import compose
from context_service.storage.factory import open_backend
from context_service.turns.runner import TurnRunner
from context_service.turns.types import Turn
from tests.support.servers import context_settings
from tests.turns.builders import MODEL, SYSTEM, user_text

KEY = SessionKey("app", "user-1", "s1")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingCache:
    """The real cache client, recording which of its calls were made."""

    def __init__(self, client: CacheClient) -> None:
        self._client = client
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self._client, name)


class SlowInputs:
    """The session store, taking ``cost`` seconds of the clock for each
    append (a turn's inputs, one or several, and its reply)."""

    def __init__(self, store: Any, clock: Clock, cost: float) -> None:
        self._store, self._clock, self.cost = store, clock, cost

    async def append_events(self, key: SessionKey, events: Any) -> Any:
        done = await self._store.append_events(key, events)
        self._clock.now += self.cost
        return done

    async def append_event(self, key: SessionKey, event: Any, **kw: Any) -> Any:
        done = await self._store.append_event(key, event, **kw)
        self._clock.now += self.cost
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@dataclasses.dataclass
class Runner:
    runner: TurnRunner
    cache: RecordingCache
    store: SlowInputs
    clock: Clock

    def turn(self, text: str, event_id: str) -> Turn:
        request = pb.GenerateRequest(session=KEY.name, system_instruction=SYSTEM, input=[user_text(event_id, text)])
        inputs = tuple(prepare_event(event_from_proto(e)) for e in request.input)
        return Turn(inputs, turn_rules.turn_ids([e.id for e in inputs]), "", "", RequestMapper().generate_request(request, inputs))


@pytest.fixture
async def runner(pair, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[Runner]:
    settings = context_settings(
        certs_dir, tmp_path / "runner", cache_target=f"127.0.0.1:{pair.cache_port}", compaction_worker=False
    )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    backend = await open_backend(settings)
    client = CacheClient(settings)
    cache = RecordingCache(client)
    clock = Clock()
    slow = SlowInputs(backend.sessions, clock, cost=0.0)
    backend = dataclasses.replace(backend, sessions=slow)
    app, compaction = compose(settings, backend, cache)
    await slow.create_session(KEY, state={}, config=ContextConfig(model=MODEL, cache=CachePolicy(enabled=True)))
    yield Runner(app.turns, cache, slow, clock)
    await compaction.close()
    await client.close()
    await backend.close()


async def test_no_model_call_starts_once_the_deadline_has_passed(runner: Runner) -> None:
    clock = runner.clock
    # Storing the input takes the whole of a 5 s deadline.
    runner.store.cost = 5.0
    turn = runner.turn("A question asked with too little time.", "late-0")
    with pytest.raises(DeadlineExceeded) as info:
        await runner.runner.generate(KEY, turn, turn_rules.Deadline(5.0, clock))
    assert info.value.reason is Reason.DEADLINE_TOO_SHORT
    with pytest.raises(DeadlineExceeded) as info:
        async for _ in runner.runner.stream(KEY, turn, turn_rules.Deadline(5.0, clock)):
            pass
    assert info.value.reason is Reason.DEADLINE_TOO_SHORT
    assert runner.cache.calls == [], "neither a lease nor a model call was asked for"
    assert [e.id for e in await runner.store.list_events(KEY)] == ["late-0"], "the input is stored"

    # In time, the same turn completes once: the stored input, one reply.
    runner.store.cost = 1.0
    done = await runner.runner.generate(KEY, turn, turn_rules.Deadline(5.0, clock))
    assert not done.deduplicated
    assert "generate" in runner.cache.calls
    assert [e.id for e in await runner.store.list_events(KEY)] == ["late-0", turn.ids.reply_id]
