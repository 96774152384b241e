"""Who is calling, and which apps they may use.

A caller is identified by the URI/DNS SANs of a verified client certificate
or, for deployments without client certificates, by a configured bearer
token (``authorization: Bearer ...``; when sent, the token decides). Each
identity is granted a list of apps; "*" grants every app. Deny by default:

- no identity (and no anonymous dev access): UNAUTHENTICATED;
- an identity with no grant, or an app outside its grants: PERMISSION_DENIED.

Every ContextService RPC authorizes through ``ContextApp.authorize``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from agentctx_common.errors import PermissionDenied, Unauthenticated
from agentctx_common.reasons import Reason
from agentctx_common.tls import peer_identities

ANY_APP = "*"
ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Caller:
    """An authenticated caller. ``identity`` is safe to log (a SAN, a token's
    configured name, or "anonymous"), never the token itself."""

    identity: str
    apps: frozenset[str]

    @property
    def all_apps(self) -> bool:
        return ANY_APP in self.apps

    def may_use(self, app: str) -> bool:
        return self.all_apps or app in self.apps

    def require(self, app: str) -> None:
        """PERMISSION_DENIED unless the caller may use ``app``."""
        if not self.may_use(app):
            raise PermissionDenied(
                f"caller is not allowed to use app {app!r}", reason=Reason.APP_NOT_ALLOWED, metadata={"app": app}
            )

    def visible_apps(self, requested: str | None) -> frozenset[str] | None:
        """Apps a listing may show: ``requested`` (checked), or every app
        the caller may use when None (None again meaning all apps)."""
        if requested is not None:
            self.require(requested)
            return frozenset({requested})
        return None if self.all_apps else self.apps


@dataclass(frozen=True)
class TokenGrant:
    name: str
    sha256: str
    apps: frozenset[str]


class Authorizer:
    def __init__(
        self,
        grants: Mapping[str, Collection[str]],
        tokens: Iterable[TokenGrant] = (),
        anonymous_apps: Collection[str] = (),
    ) -> None:
        self._grants = {identity: frozenset(apps) for identity, apps in grants.items()}
        self._tokens = {t.sha256.lower(): t for t in tokens}
        self._anonymous = frozenset(anonymous_apps)

    def authenticate(self, identities: frozenset[str], authorization: str | None) -> Caller:
        """The caller behind a certificate's SANs and an authorization header."""
        if authorization is not None:
            return self._token_caller(authorization)
        if identities:
            granted = [self._grants[i] for i in sorted(identities) if i in self._grants]
            if not granted:
                raise PermissionDenied("caller identity is not allowed", reason=Reason.IDENTITY_NOT_ALLOWED)
            return Caller(",".join(sorted(i for i in identities if i in self._grants)), frozenset().union(*granted))
        if self._anonymous:
            return Caller(ANONYMOUS, self._anonymous)
        raise Unauthenticated(
            "a client certificate or a bearer token is required", reason=Reason.NO_CALLER_IDENTITY
        )

    def _token_caller(self, authorization: str) -> Caller:
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("authorization must be 'Bearer <token>'", reason=Reason.INVALID_AUTHORIZATION)
        # Looked up by hash: the configuration never holds the token itself.
        grant = self._tokens.get(hashlib.sha256(token.strip().encode()).hexdigest())
        if grant is None:
            raise Unauthenticated("unknown bearer token", reason=Reason.INVALID_BEARER_TOKEN)
        return Caller(f"token:{grant.name}", grant.apps)

    def caller(self, context: grpc.aio.ServicerContext[Any, Any]) -> Caller:
        """The caller of the RPC behind ``context``."""
        authorization = None
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                authorization = value if isinstance(value, str) else value.decode("latin-1")
                break
        return self.authenticate(peer_identities(context), authorization)
