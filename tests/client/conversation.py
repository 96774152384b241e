"""A short agent conversation written against agentctx-client alone, run
by the end-to-end test with the python of a fresh venv that holds only that
distribution (and its three dependencies). Prints one JSON report line.

Environment: AGENTCTX_TARGET (host:port), AGENTCTX_CA, AGENTCTX_CERT,
AGENTCTX_KEY (PEM files).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from typing import Any

import agentctx
import agentctx_client
from agentctx.context.v1 import policy_pb2
from agentctx_client import (
    BudgetExceededError,
    ConflictError,
    Content,
    ErrorReason,
    Event,
    FunctionDeclaration,
    InvalidArgumentError,
    NotFoundError,
    TlsConfig,
    connect,
)

SYSTEM = "You are a concise travel assistant. " * 8
WEATHER = FunctionDeclaration(
    "get_weather", "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


async def converse() -> dict[str, Any]:
    tls = TlsConfig(ca=os.environ["AGENTCTX_CA"], cert=os.environ["AGENTCTX_CERT"], key=os.environ["AGENTCTX_KEY"],
                    server_name="localhost")
    report: dict[str, Any] = {}
    async with connect(os.environ["AGENTCTX_TARGET"], tls=tls, timeout=30) as client:
        config = policy_pb2.ContextConfig(cache=policy_pb2.CachePolicy(enabled=True))
        session = await client.create_session("pyclient", "agent-1", model="local-sim-1", state={"trip": "Paris"},
                                              config=config)
        report["session_model"] = session.model
        report["session_state"] = dict(session.state)

        note = await client.append_event(session.name, "I am planning a trip to Paris in May.")
        again = await client.append_event(session.name, Event(content=Content.user("I am planning a trip to Paris in May."),
                                                              id=note.event.id))
        report["append"] = {"sequence": note.event.sequence, "deduplicated_again": again.deduplicated}

        built = await client.build_context(session.name, ["What should I pack?"], system_instruction=SYSTEM)
        report["built"] = {"contents": len(built.contents), "last": built.contents[-1].text,
                           "request_tokens": built.accounting.request_tokens, "events_seen": built.accounting.events_seen}

        turn = await client.generate(session.name, "Please call get_weather for Paris.", system_instruction=SYSTEM,
                                     tools=[WEATHER])
        calls = turn.function_calls
        report["tool_call"] = {"name": calls[0].name if calls else None, "has_id": bool(calls and calls[0].id)}
        answer = await client.generate(session.name, Content.user(*(c.result({"city": "Paris", "forecast": "sunny"})
                                                                    for c in calls)),
                                       system_instruction=SYSTEM, tools=[WEATHER])
        report["tool_answer"] = answer.text
        report["prompt_tokens"] = answer.usage.prompt_tokens if answer.usage else 0

        stream = client.stream_generate(session.name, "Summarize the plan in one line.", system_instruction=SYSTEM,
                                        tools=[WEATHER])
        chunks = [chunk.text async for chunk in stream]
        result = await stream.final_result()
        report["stream"] = {"chunks": len(chunks), "joined_is_reply": "".join(chunks) == result.text,
                            "partial": all(c for c in chunks), "reply_id_kept": result.reply.id == stream.request.reply_event_id}

        # An agent's own retry: the same prepared request, completed once.
        request = client.turn_request(session.name, "Thanks, that is all.", system_instruction=SYSTEM)
        first = await client.generate(request)
        second = await client.generate(request)
        report["repeat"] = {"deduplicated": second.deduplicated, "same_reply": first.reply.id == second.reply.id}

        events = [e async for e in client.iter_events(session.name, page_size=3)]
        report["events"] = sum(not e.partial for e in events)
        report["partial_events"] = sum(e.partial for e in events)
        report["sequences_in_order"] = [e.sequence for e in events] == list(range(1, len(events) + 1))
        report["sessions"] = [s.name async for s in client.iter_sessions("pyclient", "agent-1")] == [session.name]

        report["errors"] = {}
        try:
            await client.get_session(f"{session.name}-missing")
        except NotFoundError as err:
            report["errors"]["not_found"] = err.reason == ErrorReason.SESSION_NOT_FOUND and err.reason_name
        current = await client.get_session(session.name)
        try:
            await client.update_session(session.name, state={"trip": "Rome"}, etag="stale-etag")
        except ConflictError as err:
            report["errors"]["conflict"] = err.reason == ErrorReason.ETAG_MISMATCH and err.current_etag == current.etag
        try:
            await client.create_session("pyclient", "agent-1", session_id="not a valid id!")
        except InvalidArgumentError as err:
            report["errors"]["invalid"] = [err.reason_name, [v.field for v in err.field_violations]]
        try:
            await client.build_context(session.name, ["x" * 4000], policy=policy_pb2.SelectionPolicy(
                max_tokens=10, overflow=policy_pb2.OVERFLOW_MODE_ERROR))
        except BudgetExceededError as err:
            report["errors"]["budget"] = [err.reason_name, err.limit]
        updated = await client.update_session(session.name, state={"trip": "Rome"}, etag=current.etag)
        report["updated_state"] = dict(updated.state)
        await client.delete_session(session.name, etag=updated.etag)
        try:
            await client.get_session(session.name)
        except NotFoundError:
            report["deleted"] = True

    report["importable"] = {name: importable(name) for name in
                            ("google.genai", "sqlalchemy", "pydantic", "agentctx_common", "context_service")}
    report["packages_under"] = sorted({os.path.dirname(os.path.dirname(m.__file__ or "")) for m in (agentctx, agentctx_client)})
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(converse())))
