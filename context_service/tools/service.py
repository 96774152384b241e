"""ToolContexts: mints a token per function call and checks a presented
token (signature, deadline, capability, revocation) before each tool
context operation. The RPC edge (api.tool_context_rpcs) converts; the
rules are domain.tool_tokens'; the revocation and staging live in the
ToolCalls store."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry import metrics

from agentctx_common.errors import Unauthenticated
from agentctx_common.reasons import Reason
from context_service.domain.config import ToolDeclaration
from context_service.domain.model import Event, SessionKey
from context_service.domain.tool_tokens import OpenCall, Staged, ToolClaims, ToolTokenCodec, declared_mask
from context_service.ports import ToolCalls

_meter = metrics.get_meter("agentctx.context.tools")
_minted = _meter.create_counter("agentctx.tool_token.minted", description="Tool tokens minted.")
_refused = _meter.create_counter("agentctx.tool_token.refused", description="Tool token uses refused, by reason.")


@dataclass(frozen=True)
class MintedToken:
    call_id: str
    tool: str
    token: str
    capabilities: tuple[str, ...]
    expire_time: dt.datetime


@dataclass(frozen=True)
class ToolGrant:
    """A verified, live, unrevoked token: its claims and its call's staged
    effects as of the check."""

    claims: ToolClaims
    staged: Staged

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.claims.app, self.claims.user, self.claims.session)


class ToolContexts:
    def __init__(self, codec: ToolTokenCodec, calls: ToolCalls, *, ttl_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self._codec = codec
        self.calls = calls
        self._ttl_s = ttl_s
        self._clock = clock

    async def mint(self, key: SessionKey, event: Event, tools: Sequence[ToolDeclaration],
                   answered: frozenset[str] = frozenset()) -> list[MintedToken]:
        """One token per function call of the stored ``event`` (calls in
        ``answered`` already have their response: none for them)."""
        if event.content is None:
            return []
        calls = [p.function_call for p in event.content.parts
                 if p.function_call is not None and p.function_call.id and p.function_call.id not in answered]
        if not calls:
            return []
        # At the token's own precision: the deadline reported is the one enforced.
        expires = round(self._clock() + self._ttl_s, 3)
        expire_time = dt.datetime.fromtimestamp(expires, dt.UTC)
        minted: list[MintedToken] = []
        rows: list[OpenCall] = []
        for call in calls:
            claims = ToolClaims(
                key_id="", token_id=self._codec.new_token_id(), app=key.app, user=key.user, session=key.session,
                event_id=event.id, call_id=call.id, tool=call.name, capabilities=declared_mask(tools, call.name),
                expires_at=expires,
            )
            rows.append(OpenCall(claims, expire_time))
            minted.append(MintedToken(call.id, call.name, self._codec.sign(claims), claims.capability_names,
                                      expire_time))
        await self.calls.open(rows)
        _minted.add(len(minted))
        return minted

    async def grant(self, token: str | None, capability: str) -> ToolGrant:
        """The grant behind ``token`` for an operation needing ``capability``:
        UNAUTHENTICATED for a missing or invalid token, PERMISSION_DENIED
        when expired, revoked or not declared for the capability."""
        try:
            if not token:
                raise Unauthenticated("a tool token is required in the agentctx-tool-token metadata",
                                      reason=Reason.TOOL_TOKEN_MISSING)
            claims = self._codec.verify(token)
            claims.check_live(self._clock())
            claims.require(capability)
            staged = await self.calls.check(claims)
        except Exception as exc:
            reason = getattr(exc, "reason", None)
            if reason is not None:
                _refused.add(1, {"reason": str(reason.value)})
            raise
        return ToolGrant(claims, staged)

    async def stage(self, grant: ToolGrant, change: Callable[[Staged], None]) -> Staged:
        return await self.calls.stage(grant.claims, change)

