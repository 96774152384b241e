"""The ``agentctx://`` scheme for ``adk web`` and ``adk api_server``.

``--session_service_uri "agentctx://HOST:PORT?ca=...&cert=...&key=...&server_name=...&model=...&app_prefix=..."``
names a context service; ``register()``, called from a ``services.py``
in the agents folder (ADK loads it before it builds its services), adds
the scheme to ADK's service registry for sessions, and for
``--artifact_service_uri`` and ``--memory_service_uri`` too (the
context service's artifacts and memory, ``AgentCtxArtifactService`` and
``AgentCtxMemoryService``). One URI gives one session service per process
(``service_for_uri``), so an agent module can hand the same service to
``AgentCtxLlm`` and ``AgentCtxPlugin``; the artifact and memory services
of a URI use its session service's client and app prefix (the same URI
for all three: one connection). The service connects at first use, on
the event loop ADK serves from: a gRPC channel made at import would belong
to another loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlparse

import agentctx_client
from agentctx_adk._artifact_service import AgentCtxArtifactService
from agentctx_adk._memory_service import AgentCtxMemoryService
from agentctx_adk._session_service import AgentCtxSessionService

SCHEME = "agentctx"
_PARAMETERS = frozenset({"ca", "cert", "key", "server_name", "model", "app_prefix", "insecure_loopback"})
_made: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()
T = TypeVar("T")


def _once(kind: str, uri: str, make: Callable[[], T]) -> T:
    """The process's ``kind`` of service for ``uri``, made at the first call."""
    with _lock:
        service: T | None = _made.get((kind, uri))
        if service is None:
            service = _made[(kind, uri)] = make()
        return service


def service_for_uri(uri: str) -> AgentCtxSessionService:
    """The process's session service for ``uri``, made (unconnected) at
    the first call."""
    return _once("sessions", uri, lambda: _from_uri(uri))


def artifact_service_for_uri(uri: str) -> AgentCtxArtifactService:
    """The process's artifact service for ``uri``, over
    ``service_for_uri(uri)``."""
    sessions = service_for_uri(uri)
    return _once("artifacts", uri, lambda: AgentCtxArtifactService(sessions))


def memory_service_for_uri(uri: str) -> AgentCtxMemoryService:
    """The process's memory service for ``uri``, over
    ``service_for_uri(uri)``."""
    sessions = service_for_uri(uri)
    return _once("memory", uri, lambda: AgentCtxMemoryService(sessions))


def register(registry: Any = None) -> None:
    """Adds the ``agentctx`` scheme to ADK's registry (by default ADK's own,
    ``get_service_registry()``) for session, artifact and memory services."""
    if registry is None:
        from google.adk.cli.service_registry import get_service_registry

        registry = get_service_registry()

    def sessions(uri: str, **_: Any) -> AgentCtxSessionService:
        return service_for_uri(uri)

    def artifacts(uri: str, **_: Any) -> AgentCtxArtifactService:
        return artifact_service_for_uri(uri)

    def memory(uri: str, **_: Any) -> AgentCtxMemoryService:
        return memory_service_for_uri(uri)

    registry.register_session_service(SCHEME, sessions)
    registry.register_artifact_service(SCHEME, artifacts)
    registry.register_memory_service(SCHEME, memory)


def _from_uri(uri: str) -> AgentCtxSessionService:
    parsed = urlparse(uri)
    if parsed.scheme != SCHEME or not parsed.hostname or not parsed.port:
        raise ValueError(f"an agentctx URI is agentctx://HOST:PORT?..., not {parsed.scheme}://{parsed.netloc}")
    query = {k: unquote(v[-1]) for k, v in parse_qs(parsed.query, keep_blank_values=True).items()}
    unknown = sorted(set(query) - _PARAMETERS)
    if unknown:
        raise ValueError(f"unknown agentctx URI parameters {unknown}; known: {sorted(_PARAMETERS)}")
    insecure = query.get("insecure_loopback", "") in ("1", "true")
    tls = None if insecure else agentctx_client.TlsConfig(
        ca=query.get("ca") or None, cert=query.get("cert") or None, key=query.get("key") or None,
        server_name=query.get("server_name") or None)
    host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    return AgentCtxSessionService.connect(f"{host}:{parsed.port}", tls=tls, insecure_loopback=insecure, lazy=True,
                                          model=query.get("model", ""), app_prefix=query.get("app_prefix", ""))
