"""``adk api_server --session_service_uri agentctx://...`` (and the same URI
for ``--artifact_service_uri`` and ``--memory_service_uri``): ADK's own
HTTP server, started in the ADK venv with the scheme registered from the
agents folder's services.py, drives a session and two turns on a pair this
test starts; a tool saves an artifact, puts the session into memory and
searches it, all through the services ADK made from the URIs. The service
is made before uvicorn's loop runs and connects on it."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import textwrap
import urllib.parse
import urllib.request
from typing import Any

import agentctx_client
from tests.adk.conftest import pair_env
from tests.support.pair import ServicePair, free_port

SERVICES = "import agentctx_adk\n\nagentctx_adk.register()\n"
AGENT = textwrap.dedent('''
    import os

    from agentctx_adk import AgentCtxLlm, AgentCtxPlugin, service_for_uri
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.tools import ToolContext
    from google.genai import types

    service = service_for_uri(os.environ["AGENTCTX_ADK_URI"])


    def get_weather(city: str = "") -> dict:
        """Current weather for a city."""
        return {"city": city, "forecast": "sunny"}


    async def keep_notes(tool_context: ToolContext, text: str = "Paris will be sunny") -> dict:
        """Saves notes as an artifact and the conversation to memory."""
        version = await tool_context.save_artifact("notes.txt", types.Part(text=text))
        await tool_context.add_session_to_memory()
        found = await tool_context.search_memory("sunny Paris")
        return {"version": version, "memories": len(found.memories)}


    root_agent = LlmAgent(name="planner", model=AgentCtxLlm.for_sessions(service),
                          instruction="You are a careful travel assistant.", tools=[get_weather, keep_notes])
    app = App(name="trips", root_agent=root_agent, plugins=[AgentCtxPlugin(service)])
''')


async def _http(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    def call() -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read() or b"null")
    return await asyncio.to_thread(call)


async def test_adk_api_server_runs_on_the_agentctx_scheme(adk_venv_python: pathlib.Path, adk_pair: ServicePair,
                                                          tmp_path: pathlib.Path) -> None:
    agents = tmp_path / "agents"
    (agents / "trips").mkdir(parents=True)
    (agents / "services.py").write_text(SERVICES)
    (agents / "trips" / "__init__.py").write_text("from . import agent\n")
    (agents / "trips" / "agent.py").write_text(AGENT)
    prefix = f"apisrv{os.getpid()}."
    query = urllib.parse.urlencode({"ca": str(adk_pair.certs / "ca.pem"), "server_name": "localhost",
                                    "model": "local-sim-1", "app_prefix": prefix})
    uri = f"agentctx://127.0.0.1:{adk_pair.context_port}?{query}"
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    server = await asyncio.create_subprocess_exec(
        str(adk_venv_python.parent / "adk"), "api_server", "--host", "127.0.0.1", "--port", str(port),
        "--session_service_uri", uri, "--artifact_service_uri", uri, "--memory_service_uri", uri, str(agents),
        env={**clean, **pair_env(adk_pair), "AGENTCTX_ADK_URI": uri}, cwd=str(tmp_path),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                apps = await _http("GET", f"{base}/list-apps")
                break
            except OSError:
                assert server.returncode is None, "adk api_server exited"
                await asyncio.sleep(0.2)
        assert "trips" in apps
        created = await _http("POST", f"{base}/apps/trips/users/u1/sessions", {"state": {"city": "Paris"}})
        sid = created["id"]
        events = await _http("POST", f"{base}/run", {
            "app_name": "trips", "user_id": "u1", "session_id": sid,
            "new_message": {"role": "user", "parts": [{"text": "Please call get_weather for Paris."}]}})
        assert [e["content"]["parts"][0].get("functionCall", {}).get("name") for e in events][:1] == ["get_weather"]
        assert events[-1]["content"]["parts"][0]["text"] == "local-sim used the result of get_weather"
        got = await _http("GET", f"{base}/apps/trips/users/u1/sessions/{sid}")
        assert got["state"] == {"city": "Paris"} and len(got["events"]) == len(events) + 1
        notes = await _http("POST", f"{base}/run", {
            "app_name": "trips", "user_id": "u1", "session_id": sid,
            "new_message": {"role": "user", "parts": [{"text": "Please call keep_notes for Paris."}]}})
        answer = [p["functionResponse"]["response"] for e in notes for p in e["content"]["parts"]
                  if "functionResponse" in p]
        assert answer == [{"version": 0, "memories": answer[0]["memories"]}] and answer[0]["memories"] >= 1, notes[-3:]
        listed = await _http("GET", f"{base}/apps/trips/users/u1/sessions/{sid}/artifacts")
        assert listed == ["notes.txt"]
    finally:
        server.terminate()
        _, err = await server.communicate()
    # What ADK's server wrote is in the context service, under the prefix.
    async with agentctx_client.connect(f"127.0.0.1:{adk_pair.context_port}", tls=agentctx_client.TlsConfig(
            ca=adk_pair.certs / "ca.pem", server_name="localhost")) as client:
        session = await client.get_session(f"apps/{prefix}trips/users/u1/sessions/{sid}")
        stored = await client.list_events(session.name)
        artifacts = await client.list_artifacts(session.name)
        memories = await client.search_memory(f"{prefix}trips", "u1", "sunny Paris")
    assert len(stored.items) == len(events) + len(notes) + 2, err.decode()[-3000:]  # two user messages
    assert artifacts == ["notes.txt"] and memories
