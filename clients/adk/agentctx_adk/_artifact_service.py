"""``AgentCtxArtifactService``: ADK's ``BaseArtifactService`` over the
context service's ArtifactService, so an ADK agent keeps its artifacts
beside its sessions (no file or GCS artifact service, no second set of
credentials). ADK's ``user:`` names belong to the user across sessions, as
in ADK; versions count from 0, as ADK's do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from google.adk.artifacts.base_artifact_service import ArtifactVersion, BaseArtifactService
from google.genai import types
from typing_extensions import override

from agentctx_adk._session_service import AgentCtxSessionService
from agentctx_client import Artifact, NotFoundError, session_name, user_parent
from agentctx_client import ArtifactVersion as CtxVersion

USER_PREFIX = "user:"


class ArtifactCalls(Protocol):
    """The artifact calls this service makes: ContextClient's, or a tool
    token's (agentctx_adk._tool_context), which ignore ``parent``."""

    async def save_artifact(self, parent: str, artifact: str, content: str | bytes, *, mime_type: str = ...,
                            custom_metadata: Mapping[str, Any] | None = ...) -> CtxVersion: ...

    async def load_artifact(self, parent: str, artifact: str, *, version: int | None = ...) -> Artifact: ...

    async def list_artifacts(self, parent: str) -> list[str]: ...

    async def list_artifact_versions(self, parent: str, artifact: str) -> list[CtxVersion]: ...

    async def delete_artifact(self, parent: str, artifact: str) -> int: ...


class AgentCtxArtifactService(BaseArtifactService):
    """Artifacts of the sessions ``sessions`` serves (the same client and
    app prefix). ``calls`` makes the calls instead of that client
    (AgentCtxToolPlugin gives a tool call's token's)."""

    def __init__(self, sessions: AgentCtxSessionService, *, calls: ArtifactCalls | None = None) -> None:
        self.sessions = sessions
        self._calls = calls

    @property
    def _client(self) -> ArtifactCalls:
        return self._calls or self.sessions.client

    def _parent(self, app_name: str, user_id: str, filename: str, session_id: str | None) -> str:
        app = self.sessions.app_prefix + app_name
        if filename.startswith(USER_PREFIX) or session_id is None:
            if not filename.startswith(USER_PREFIX):
                raise ValueError(f"artifact {filename!r} needs a session_id (only 'user:' names have none)")
            return user_parent(app, user_id)
        return session_name(app, user_id, session_id)

    @override
    async def save_artifact(self, *, app_name: str, user_id: str, filename: str, artifact: types.Part | dict[str, Any],
                            session_id: str | None = None, custom_metadata: dict[str, Any] | None = None) -> int:
        part = artifact if isinstance(artifact, types.Part) else types.Part.model_validate(artifact)
        parent = self._parent(app_name, user_id, filename, session_id)
        if part.text is not None:
            saved = await self._client.save_artifact(parent, filename, part.text, custom_metadata=custom_metadata)
        elif part.inline_data is not None and part.inline_data.data is not None:
            saved = await self._client.save_artifact(
                parent, filename, part.inline_data.data, mime_type=part.inline_data.mime_type or "application/octet-stream",
                custom_metadata=custom_metadata)
        else:
            raise ValueError("AgentCtxArtifactService saves text or inline-data parts only")
        return saved.version

    @override
    async def load_artifact(self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None,
                            version: int | None = None) -> types.Part | None:
        parent = self._parent(app_name, user_id, filename, session_id)
        try:
            loaded = await self._client.load_artifact(parent, filename, version=version)
        except NotFoundError:
            return None
        if loaded.version.text:
            return types.Part(text=loaded.data.decode())
        return types.Part(inline_data=types.Blob(mime_type=loaded.version.mime_type, data=loaded.data))

    @override
    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str | None = None) -> list[str]:
        app = self.sessions.app_prefix + app_name
        parent = session_name(app, user_id, session_id) if session_id is not None else user_parent(app, user_id)
        try:
            return sorted(await self._client.list_artifacts(parent))
        except NotFoundError:
            return []

    @override
    async def delete_artifact(self, *, app_name: str, user_id: str, filename: str,
                              session_id: str | None = None) -> None:
        try:
            await self._client.delete_artifact(self._parent(app_name, user_id, filename, session_id), filename)
        except NotFoundError:
            pass

    @override
    async def list_versions(self, *, app_name: str, user_id: str, filename: str,
                            session_id: str | None = None) -> list[int]:
        return [v.version for v in await self._versions(app_name, user_id, filename, session_id)]

    @override
    async def list_artifact_versions(self, *, app_name: str, user_id: str, filename: str,
                                     session_id: str | None = None) -> list[ArtifactVersion]:
        return [_version(v) for v in await self._versions(app_name, user_id, filename, session_id)]

    @override
    async def get_artifact_version(self, *, app_name: str, user_id: str, filename: str,
                                   session_id: str | None = None, version: int | None = None) -> ArtifactVersion | None:
        versions = await self._versions(app_name, user_id, filename, session_id)
        if not versions:
            return None
        if version is None:
            return _version(max(versions, key=lambda v: v.version))
        return next((_version(v) for v in versions if v.version == version), None)

    async def _versions(self, app_name: str, user_id: str, filename: str, session_id: str | None) -> list[CtxVersion]:
        try:
            return await self._client.list_artifact_versions(self._parent(app_name, user_id, filename, session_id),
                                                             filename)
        except NotFoundError:
            return []


def _version(v: CtxVersion) -> ArtifactVersion:
    return ArtifactVersion(version=v.version, canonical_uri=f"agentctx://{v.parent}/artifacts/{v.artifact}/{v.version}",
                           custom_metadata=dict(v.custom_metadata), mime_type=None if v.text else v.mime_type,
                           create_time=v.create_time.timestamp() if v.create_time is not None else 0.0)
