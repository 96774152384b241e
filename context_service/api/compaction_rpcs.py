"""CompactionRpcs: not implemented yet; arrives with issue #5 (compaction)."""

from __future__ import annotations

from typing import Any

from agentctx_common.errors import Unimplemented


class CompactionRpcs:
    app: Any

    async def CompactSession(self, request: Any, context: Any) -> Any:
        raise Unimplemented("CompactSession is not implemented yet (issue #5 (compaction))")
