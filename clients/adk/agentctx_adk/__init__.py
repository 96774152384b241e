"""agentctx for Google's Agent Development Kit (ADK).

- ``AgentCtxSessionService``: ADK sessions, events and app/user/session
  state stored by the agentctx context service.
- ``AgentCtxLlm`` with ``AgentCtxPlugin``: model calls made by the context
  service (through the cache tier, with the provider key on the service
  side), from the session's stored events.
- ``AgentCtxArtifactService`` and ``AgentCtxMemoryService``: ADK's
  artifact and memory services on the same context service.
- ``AgentCtxToolPlugin``: each tool call's ToolContext (state, artifacts,
  memory) goes through agentctx on the call's tool token, limited to what
  the session's config declares for the tool.
- ``register`` and ``service_for_uri`` (``artifact_service_for_uri``,
  ``memory_service_for_uri``): the ``agentctx://`` scheme for ``adk web``
  and ``adk api_server``'s ``--session_service_uri``,
  ``--artifact_service_uri`` and ``--memory_service_uri``.
"""

from agentctx_adk._artifact_service import AgentCtxArtifactService
from agentctx_adk._llm import CACHE_METADATA_KEY, AgentCtxLlm, AgentCtxPlugin
from agentctx_adk._memory_service import AgentCtxMemoryService
from agentctx_adk._services import artifact_service_for_uri, memory_service_for_uri, register, service_for_uri
from agentctx_adk._session_service import AgentCtxSessionService
from agentctx_adk._tool_context import AgentCtxToolPlugin

__all__ = ["CACHE_METADATA_KEY", "AgentCtxArtifactService", "AgentCtxLlm", "AgentCtxMemoryService",
           "AgentCtxPlugin", "AgentCtxSessionService", "AgentCtxToolPlugin", "artifact_service_for_uri",
           "memory_service_for_uri", "register", "service_for_uri"]
