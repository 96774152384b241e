"""ToolContexts: mints a token per function call and checks a presented
token (signature, deadline, capability, revocation) before each tool
context operation. The RPC edge (api.tool_context_rpcs) converts; the
rules are domain.tool_tokens'; the revocation and staging live in the
ToolCalls store."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from opentelemetry import metrics

from agentctx_common.errors import Unauthenticated
from agentctx_common.reasons import Reason
from context_service.domain.config import ToolDeclaration
from context_service.domain.model import Event, SessionKey
from context_service.domain.tool_tokens import OpenCall, Staged, ToolClaims, ToolTokenCodec, declared_mask
from context_service.ports import ToolCalls

_meter = metrics.get_meter("agentctx.context.tools")
T = TypeVar("T")
_minted = _meter.create_counter("agentctx.tool_token.minted", description="Tool tokens minted.")
_refused = _meter.create_counter("agentctx.tool_token.refused", description="Tool token uses refused, by reason.")


@dataclass(frozen=True)
class MintedToken:
    call_id: str
    tool: str
    token: str = field(repr=False)
    capabilities: tuple[str, ...]
    expire_time: dt.datetime


@dataclass(frozen=True)
class ToolGrant:
    """A verified, live, unrevoked token: its claims and its call's staged
    effects as of the check."""

    claims: ToolClaims
    staged: Staged



class ToolContexts:
    def __init__(self, codec: ToolTokenCodec, calls: ToolCalls, *, ttl_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self._codec = codec
        self.calls = calls
        self._ttl_s = ttl_s
        self._clock = clock

    def prepare(self, key: SessionKey, event: Event, tools: Sequence[ToolDeclaration],
                answered: frozenset[str] = frozenset()) -> list[tuple[MintedToken, OpenCall]]:
        """A token and its row for each function call of ``event`` (none for
        the ids in ``answered``): signed here, valid once the rows are stored
        (with the event: SessionStore.append_event's ``open_calls``)."""
        if event.content is None:
            return []
        calls = [p.function_call for p in event.content.parts
                 if p.function_call is not None and p.function_call.id and p.function_call.id not in answered]
        if not calls:
            return []
        # At the token's own precision: the deadline reported is the one enforced.
        expires = round(self._clock() + self._ttl_s, 3)
        expire_time = dt.datetime.fromtimestamp(expires, dt.UTC)
        out: list[tuple[MintedToken, OpenCall]] = []
        for call in calls:
            claims = ToolClaims(
                key_id="", token_id=self._codec.new_token_id(), app=key.app, user=key.user, session=key.session,
                event_id=event.id, call_id=call.id, tool=call.name, capabilities=declared_mask(tools, call.name),
                expires_at=expires,
            )
            token = MintedToken(call.id, call.name, self._codec.sign(claims), claims.capability_names, expire_time)
            out.append((token, OpenCall(claims, expire_time)))
        _minted.add(len(out))
        return out

    async def mint(self, key: SessionKey, event: Event, tools: Sequence[ToolDeclaration],
                   answered: frozenset[str] = frozenset()) -> list[MintedToken]:
        """Tokens for the calls of an event already stored (its rows stored now)."""
        prepared = self.prepare(key, event, tools, answered)
        await self.calls.open([row for _, row in prepared])
        return [token for token, _ in prepared]

    async def grant(self, token: str | None, capability: str) -> ToolGrant:
        """The grant behind ``token`` for an operation needing ``capability``:
        UNAUTHENTICATED for a missing or invalid token, PERMISSION_DENIED
        when expired, revoked or not declared for the capability."""
        claims = self.claims(token, capability)
        with _counting_refusals():
            staged = await self.calls.check(claims)
        return ToolGrant(claims, staged)

    def claims(self, token: str | None, capability: str) -> ToolClaims:
        """What ``grant`` checks without the store: signature, deadline,
        capability (the revocation check is ``calls.check``)."""
        with _counting_refusals():
            if not token:
                raise Unauthenticated("a tool token is required in the agentctx-tool-token metadata",
                                      reason=Reason.TOOL_TOKEN_MISSING)
            claims = self._codec.verify(token)
            claims.check_live(self._clock())
            claims.require(capability)
        return claims

    async def read(self, token: str | None, capability: str,
                   work: Callable[[ToolClaims], Awaitable[T]]) -> tuple[ToolGrant, T]:
        """A read under ``token``: ``work`` runs alongside the revocation
        check (a read's latency is the longer of the two, not their sum),
        and its result is returned only when the check passes (a revoked
        token's error wins over the read's own)."""
        claims = self.claims(token, capability)

        async def run() -> T:
            return await work(claims)

        checked, result = await asyncio.gather(self.calls.check(claims), run(), return_exceptions=True)
        if isinstance(checked, BaseException):
            with _counting_refusals():
                raise checked
        if isinstance(result, BaseException):
            raise result
        return ToolGrant(claims, checked), result

    async def stage(self, grant: ToolGrant, change: Callable[[Staged], None]) -> Staged:
        return await self.calls.stage(grant.claims, change)



@contextlib.contextmanager
def _counting_refusals() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        reason = getattr(exc, "reason", None)
        if reason is not None:
            _refused.add(1, {"reason": str(reason.value)})
        raise
