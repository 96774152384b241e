"""AgentCtxArtifactService against ADK's InMemoryArtifactService, scenario
by scenario (what ADK's API shows must be equal), and AgentCtxMemoryService
under ADK's API: a session added to memory is found by search, explicit
entries too. Run in the ADK venv by test_adk_artifacts_memory.py against a
context service that test starts. Written for this repository."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agentctx_adk import AgentCtxArtifactService, AgentCtxMemoryService, AgentCtxSessionService
from google.adk.artifacts import InMemoryArtifactService
from google.adk.artifacts.base_artifact_service import BaseArtifactService
from google.adk.events import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from agentctx_client import TlsConfig

_runs = itertools.count()


@pytest.fixture
async def sessions() -> AsyncIterator[AgentCtxSessionService]:
    tls = TlsConfig(ca=os.environ["AGENTCTX_ADK_CA"], server_name="localhost")
    async with AgentCtxSessionService.connect(os.environ["AGENTCTX_ADK_TARGET"], tls=tls,
                                              app_prefix=f"{os.environ['AGENTCTX_ADK_RUN']}.{next(_runs)}.") as s:
        yield s


async def _scenario(service: BaseArtifactService, session_id: str) -> list[Any]:
    """Everything ADK's artifact API shows of one scripted use."""
    app, user = "trips", "ada"
    seen: list[Any] = []
    text = types.Part(text="# Day 1\nLouvre")
    image = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\r\n\x1a\n" + bytes(range(256))))
    seen.append(await service.save_artifact(app_name=app, user_id=user, filename="plan.md", artifact=text,
                                            session_id=session_id))
    seen.append(await service.save_artifact(app_name=app, user_id=user, filename="plan.md",
                                            artifact=types.Part(text="# Day 2"), session_id=session_id,
                                            custom_metadata={"by": "planner"}))
    seen.append(await service.save_artifact(app_name=app, user_id=user, filename="user:passport.png",
                                            artifact=image, session_id=session_id))
    seen.append(await service.save_artifact(app_name=app, user_id=user, filename="map.png", artifact=image,
                                            session_id=session_id))
    for version in (None, 0, 1, 7):
        seen.append(await service.load_artifact(app_name=app, user_id=user, filename="plan.md",
                                                session_id=session_id, version=version))
    seen.append(await service.load_artifact(app_name=app, user_id=user, filename="user:passport.png",
                                            session_id="another"))
    seen.append(await service.load_artifact(app_name=app, user_id=user, filename="missing", session_id=session_id))
    seen.append(await service.list_artifact_keys(app_name=app, user_id=user, session_id=session_id))
    seen.append(await service.list_versions(app_name=app, user_id=user, filename="plan.md", session_id=session_id))
    versions = await service.list_artifact_versions(app_name=app, user_id=user, filename="plan.md",
                                                    session_id=session_id)
    seen.append([(v.version, v.custom_metadata) for v in versions])
    latest = await service.get_artifact_version(app_name=app, user_id=user, filename="map.png",
                                                session_id=session_id)
    seen.append(latest is not None and (latest.version, latest.mime_type))
    await service.delete_artifact(app_name=app, user_id=user, filename="plan.md", session_id=session_id)
    seen.append(await service.list_artifact_keys(app_name=app, user_id=user, session_id=session_id))
    seen.append(await service.list_versions(app_name=app, user_id=user, filename="plan.md", session_id=session_id))
    return seen


async def test_artifacts_show_what_adks_in_memory_service_shows(sessions: AgentCtxSessionService) -> None:
    await sessions.create_session(app_name="trips", user_id="ada", session_id="s1")
    ours = await _scenario(AgentCtxArtifactService(sessions), "s1")
    theirs = await _scenario(InMemoryArtifactService(), "s1")
    assert ours == theirs


async def test_sessions_and_entries_are_found_in_memory(sessions: AgentCtxSessionService) -> None:
    memory = AgentCtxMemoryService(sessions)
    session = await sessions.create_session(app_name="trips", user_id="ada")
    for author, text in (("user", "I want to visit the Louvre in Paris"), ("planner", "Booked a museum pass"),
                         ("user", "Also find vegetarian restaurants")):
        role = "user" if author == "user" else "model"
        await sessions.append_event(session, Event(author=author, invocation_id="i1", content=types.Content(
            role=role, parts=[types.Part(text=text)])))
    await memory.add_session_to_memory(session)
    await memory.add_session_to_memory(session)  # again: nothing twice
    found = await memory.search_memory(app_name="trips", user_id="ada", query="Louvre museum")
    texts = [m.content.parts[0].text for m in found.memories if m.content.parts]
    assert texts and set(texts) <= {"I want to visit the Louvre in Paris", "Booked a museum pass"}
    assert len(texts) == 2
    await memory.add_memory(app_name="trips", user_id="ada", memories=[MemoryEntry(
        id="seat", content=types.Content(parts=[types.Part(text="Ada prefers aisle seats")]),
        custom_metadata={"kind": "preference"})])
    found = await memory.search_memory(app_name="trips", user_id="ada", query="which seats")
    assert [(m.id, m.custom_metadata) for m in found.memories] == [("seat", {"kind": "preference"})]
    assert (await memory.search_memory(app_name="trips", user_id="bob", query="seats")).memories == []
    await memory.delete_memory(app_name="trips", user_id="ada", memory_id="seat")
    assert (await memory.search_memory(app_name="trips", user_id="ada", query="seats")).memories == []
