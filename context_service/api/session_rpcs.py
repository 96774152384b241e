"""SessionRpcs: not implemented yet; arrives with issue #3 (sessions and events)."""

from __future__ import annotations

from typing import Any

from agentctx_common.errors import Unimplemented


class SessionRpcs:
    app: Any

    async def CreateSession(self, request: Any, context: Any) -> Any:
        raise Unimplemented("CreateSession is not implemented yet (issue #3 (sessions and events))")

    async def GetSession(self, request: Any, context: Any) -> Any:
        raise Unimplemented("GetSession is not implemented yet (issue #3 (sessions and events))")

    async def ListSessions(self, request: Any, context: Any) -> Any:
        raise Unimplemented("ListSessions is not implemented yet (issue #3 (sessions and events))")

    async def UpdateSession(self, request: Any, context: Any) -> Any:
        raise Unimplemented("UpdateSession is not implemented yet (issue #3 (sessions and events))")

    async def DeleteSession(self, request: Any, context: Any) -> Any:
        raise Unimplemented("DeleteSession is not implemented yet (issue #3 (sessions and events))")

    async def AppendEvent(self, request: Any, context: Any) -> Any:
        raise Unimplemented("AppendEvent is not implemented yet (issue #3 (sessions and events))")

    async def ListEvents(self, request: Any, context: Any) -> Any:
        raise Unimplemented("ListEvents is not implemented yet (issue #3 (sessions and events))")
