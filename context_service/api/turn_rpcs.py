"""TurnRpcs: not implemented yet; arrives with issue #7 (agent turns)."""

from __future__ import annotations

from typing import Any

from agentctx_common.errors import Unimplemented


class TurnRpcs:
    app: Any

    async def Generate(self, request: Any, context: Any) -> Any:
        raise Unimplemented("Generate is not implemented yet (issue #7 (agent turns))")

    async def StreamGenerate(self, request: Any, context: Any) -> Any:
        raise Unimplemented("StreamGenerate is not implemented yet (issue #7 (agent turns))")
        yield  # an async generator, like every streaming handler
