"""Tool tokens to the wire."""

from __future__ import annotations

from agentctx.context.v1 import tool_context_pb2 as pb
from context_service.tools.service import MintedToken


def token_to_proto(token: MintedToken, out: pb.ToolToken) -> pb.ToolToken:
    out.function_call_id = token.call_id
    out.tool = token.tool
    out.token = token.token
    out.capabilities.extend(token.capabilities)
    out.expire_time.FromDatetime(token.expire_time)
    return out
