"""SelectionRpcs: not implemented yet; arrives with issue #4 (context selection)."""

from __future__ import annotations

from typing import Any

from agentctx_common.errors import Unimplemented


class SelectionRpcs:
    app: Any

    async def BuildContext(self, request: Any, context: Any) -> Any:
        raise Unimplemented("BuildContext is not implemented yet (issue #4 (context selection))")
