"""``adk api_server --session_service_uri agentctx://...``: ADK's own HTTP
server, started in the ADK venv with the scheme registered from the agents
folder's services.py, drives a session and a turn on a pair this test
starts. The service is made before uvicorn's loop runs and connects on it."""

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

    service = service_for_uri(os.environ["AGENTCTX_ADK_URI"])


    def get_weather(city: str = "") -> dict:
        """Current weather for a city."""
        return {"city": city, "forecast": "sunny"}


    root_agent = LlmAgent(name="planner", model=AgentCtxLlm.for_sessions(service),
                          instruction="You are a careful travel assistant.", tools=[get_weather])
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
        "--session_service_uri", uri, str(agents),
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
    finally:
        server.terminate()
        _, err = await server.communicate()
    # What ADK's server wrote is in the context service, under the prefix.
    async with agentctx_client.connect(f"127.0.0.1:{adk_pair.context_port}", tls=agentctx_client.TlsConfig(
            ca=adk_pair.certs / "ca.pem", server_name="localhost")) as client:
        session = await client.get_session(f"apps/{prefix}trips/users/u1/sessions/{sid}")
        stored = await client.list_events(session.name)
    assert len(stored.items) == len(events) + 1, err.decode()[-3000:]
