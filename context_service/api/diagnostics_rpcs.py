"""DiagnosticsRpcs: not implemented yet; arrives with issue #7 (diagnostics)."""

from __future__ import annotations

from typing import Any

from agentctx_common.errors import Unimplemented


class DiagnosticsRpcs:
    app: Any

    async def GetContextLifecycle(self, request: Any, context: Any) -> Any:
        raise Unimplemented("GetContextLifecycle is not implemented yet (issue #7 (diagnostics))")

    async def InvalidateContextCache(self, request: Any, context: Any) -> Any:
        raise Unimplemented("InvalidateContextCache is not implemented yet (issue #7 (diagnostics))")
