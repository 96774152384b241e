"""The OpenAI Agents SDK on agentctx: ``AgentCtxSession`` keeps an agent's
conversation in the agentctx context service (``Session`` protocol), and
``AgentCtxCompactionSession`` compacts it with agentctx's compaction."""

from agentctx_openai_agents._session import AgentCtxCompactionSession, AgentCtxSession

__all__ = ["AgentCtxCompactionSession", "AgentCtxSession"]
