"""The OpenAI Agents SDK on agentctx: ``AgentCtxSession`` keeps an agent's
conversation in the agentctx context service (``Session`` protocol), and
``AgentCtxCompactionSession`` compacts it with agentctx's compaction;
``AgentCtxModel`` sends each model call through agentctx's cache tier."""

from agentctx_openai_agents._model import AgentCtxModel, AgentCtxModelProvider
from agentctx_openai_agents._session import AgentCtxCompactionSession, AgentCtxSession

__all__ = ["AgentCtxCompactionSession", "AgentCtxModel", "AgentCtxModelProvider", "AgentCtxSession"]
