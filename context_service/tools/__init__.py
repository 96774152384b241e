"""Least-authority tool context: minting tool tokens and serving what a
token allows (see domain.tool_tokens, docs/ARCHITECTURE.md "Tool context")."""

from context_service.tools.service import MintedToken, ToolContexts

__all__ = ["MintedToken", "ToolContexts"]
