"""The ``agentctx://`` scheme for ``adk web`` and ``adk api_server``.

``--session_service_uri "agentctx://HOST:PORT?ca=...&cert=...&key=...&server_name=...&model=...&app_prefix=..."``
names a context service; ``register()``, called from a ``services.py``
in the agents folder (ADK loads it before it builds its services), adds
the scheme to ADK's service registry. One URI gives one service per
process (``service_for_uri``), so an agent module can hand the same
service to ``AgentCtxLlm`` and ``AgentCtxPlugin``. The service connects at
first use, on the event loop ADK serves from: a gRPC channel made at
import would belong to another loop.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import agentctx_client
from agentctx_adk._session_service import AgentCtxSessionService

SCHEME = "agentctx"
_PARAMETERS = frozenset({"ca", "cert", "key", "server_name", "model", "app_prefix", "insecure_loopback"})
_services: dict[str, AgentCtxSessionService] = {}
_lock = threading.Lock()


def service_for_uri(uri: str) -> AgentCtxSessionService:
    """The process's session service for ``uri``, made (unconnected) at
    the first call."""
    with _lock:
        service = _services.get(uri)
        if service is None:
            service = _services[uri] = _from_uri(uri)
        return service


def register(registry: Any = None) -> None:
    """Adds the ``agentctx`` session-service scheme to ADK's registry (by
    default ADK's own, ``get_service_registry()``)."""
    if registry is None:
        from google.adk.cli.service_registry import get_service_registry

        registry = get_service_registry()

    def factory(uri: str, **_: Any) -> AgentCtxSessionService:
        return service_for_uri(uri)

    registry.register_session_service(SCHEME, factory)


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
