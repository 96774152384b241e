"""Artifacts: named, versioned contents of a session or of a user across
sessions (ADK's ``user:`` prefix). The rules, pure: where an artifact id
lives (its scope), which ids are valid, the next version, the size and quota
bounds, and the running digest and chunking of a streamed content.

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import codecs
import datetime as dt
import hashlib
from dataclasses import dataclass, field

from agentctx_common.errors import FieldViolation, InvalidArgument, NotFound, ResourceExhausted
from agentctx_common.reasons import Reason
from context_service.domain.limits import Limits
from context_service.domain.model import JsonObject
from context_service.domain.names import parse_session_name, parse_user_parent

# ADK's prefix: an artifact of the user, shared by every session of theirs.
USER_PREFIX = "user:"
MAX_ARTIFACT_ID_CHARS = 512
# Stored (and streamed back) in chunks of this size: a blob is never whole in memory.
CHUNK_BYTES = 1024 * 1024
DEFAULT_MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
TEXT_MIME_TYPE = "text/plain"


@dataclass(frozen=True)
class ArtifactScope:
    """Who owns an artifact: a session (``session`` set) or the user
    (``session`` None: ids starting with ``user:``)."""

    app: str
    user: str
    session: str | None

    @property
    def user_scoped(self) -> bool:
        return self.session is None

    @property
    def parent(self) -> str:
        base = f"apps/{self.app}/users/{self.user}"
        return base if self.session is None else f"{base}/sessions/{self.session}"


@dataclass(frozen=True)
class ArtifactVersionRecord:
    """One stored version's metadata (never its content)."""

    scope: ArtifactScope
    artifact: str
    version: int
    mime_type: str
    size_bytes: int
    sha256: str
    create_time: dt.datetime
    custom_metadata: JsonObject = field(default_factory=dict)
    text: bool = False


def is_user_scoped(artifact: str) -> bool:
    return artifact.startswith(USER_PREFIX)


def artifact_id_violations(artifact: str, path: str = "artifact") -> list[FieldViolation]:
    """Why ``artifact`` is not a valid id (empty list: valid). Ids are
    opaque names, but they read as paths in tools and file services, so no
    segment may be "." or "..", and no control character, backslash or
    leading or trailing "/" is allowed."""
    v: list[FieldViolation] = []
    if not artifact:
        return [FieldViolation(path, "is required")]
    if len(artifact) > MAX_ARTIFACT_ID_CHARS:
        v.append(FieldViolation(path, f"must be at most {MAX_ARTIFACT_ID_CHARS} characters"))
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in artifact):
        v.append(FieldViolation(path, "must not contain control characters"))
    if "\\" in artifact:
        v.append(FieldViolation(path, "must not contain a backslash"))
    name = artifact[len(USER_PREFIX):] if is_user_scoped(artifact) else artifact
    if not name:
        v.append(FieldViolation(path, f"must name something after {USER_PREFIX!r}"))
    elif name.startswith("/") or name.endswith("/"):
        v.append(FieldViolation(path, "must not start or end with '/'"))
    elif any(seg in ("", ".", "..") for seg in name.split("/")):
        v.append(FieldViolation(path, "must not have an empty, '.' or '..' path segment"))
    return v


def check_artifact_id(artifact: str, path: str = "artifact") -> None:
    """INVALID_ARGUMENT INVALID_NAME with field violations for a bad id."""
    violations = artifact_id_violations(artifact, path)
    if violations:
        raise InvalidArgument.fields(violations, reason=Reason.INVALID_NAME)


def scope_of(app: str, user: str, session: str | None, artifact: str, path: str = "parent",
             artifact_path: str = "artifact") -> ArtifactScope:
    """The scope ``artifact`` lives in when addressed through the parent
    (``session`` None: a user parent). A ``user:`` id is the user's whatever
    the session; any other id needs a session parent."""
    check_artifact_id(artifact, artifact_path)
    if is_user_scoped(artifact):
        return ArtifactScope(app, user, None)
    if session is None:
        raise InvalidArgument.fields(
            [FieldViolation(path, f"must be a session for an artifact id without the {USER_PREFIX!r} prefix")],
            reason=Reason.INVALID_NAME,
        )
    return ArtifactScope(app, user, session)


def parse_parent(parent: str, limits: Limits, path: str = "parent") -> tuple[str, str, str | None]:
    """(app, user, session) of a session parent, or (app, user, None) of a
    user parent; INVALID_ARGUMENT INVALID_NAME otherwise."""
    if parent.count("/") > 3:
        key = parse_session_name(parent, limits, path)
        return key.app, key.user, key.session
    try:
        app, user = parse_user_parent(parent, limits, path)
    except InvalidArgument:
        raise InvalidArgument.fields(
            [FieldViolation(path, "must be apps/{app}/users/{user}/sessions/{session} or apps/{app}/users/{user}")],
            reason=Reason.INVALID_NAME,
        ) from None
    return app, user, None


def next_version(latest: int | None) -> int:
    """Versions count from 0, as ADK's do."""
    return 0 if latest is None else latest + 1


def check_version(version: int | None, path: str = "version") -> None:
    if version is not None and version < 0:
        raise InvalidArgument.fields([FieldViolation(path, "must be 0 or more")])


def too_large(received: int, max_bytes: int) -> ResourceExhausted:
    return ResourceExhausted(
        f"the artifact is larger than max_artifact_bytes ({max_bytes})",
        reason=Reason.ARTIFACT_TOO_LARGE,
        metadata={"max_artifact_bytes": max_bytes, "received_bytes": received},
    )


def check_quota(used: int, requested: int, quota: int) -> None:
    """RESOURCE_EXHAUSTED ARTIFACT_QUOTA_EXCEEDED when storing ``requested``
    more bytes takes the app past ``quota`` (0: unlimited). Only new bytes
    count: a content stored already (deduplicated) costs nothing."""
    if quota and requested and used + requested > quota:
        raise ResourceExhausted(
            "the app's artifact quota would be exceeded",
            reason=Reason.ARTIFACT_QUOTA_EXCEEDED,
            metadata={"quota_bytes": quota, "used_bytes": used, "requested_bytes": requested},
        )


def not_found(scope: ArtifactScope, artifact: str, version: int | None) -> NotFound:
    del scope, artifact  # never in the message: ids can be content-like
    return NotFound(
        "no such artifact version" if version is not None else "no such artifact",
        reason=Reason.ARTIFACT_NOT_FOUND,
        metadata={"version": "latest" if version is None else version},
    )


class ContentDigest:
    """A content as it streams in: its size (bounded by ``max_bytes``,
    RESOURCE_EXHAUSTED past it), its SHA-256, and for text, that the bytes
    are UTF-8 (a chunk may end inside a character)."""

    def __init__(self, max_bytes: int, *, text: bool) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._sha = hashlib.sha256()
        self._utf8 = codecs.getincrementaldecoder("utf-8")() if text else None

    def update(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.max_bytes:
            raise too_large(self.size, self.max_bytes)
        self._sha.update(data)
        if self._utf8 is not None:
            self._check_utf8(data, final=False)

    def finish(self) -> str:
        """The hex digest; INVALID_ARGUMENT for text ending inside a character."""
        if self._utf8 is not None:
            self._check_utf8(b"", final=True)
        return self._sha.hexdigest()

    def _check_utf8(self, data: bytes, *, final: bool) -> None:
        assert self._utf8 is not None
        try:
            self._utf8.decode(data, final=final)
        except UnicodeDecodeError:
            raise InvalidArgument.fields(
                [FieldViolation("data", "a text artifact's bytes must be UTF-8")], reason=Reason.INVALID_CONTENT
            ) from None


class Chunker:
    """Regroups arbitrary pieces into chunks of exactly ``size`` bytes (the
    last one shorter): what storage writes. Pieces that are whole chunks
    already pass through uncopied; other bytes are copied once."""

    def __init__(self, size: int = CHUNK_BYTES) -> None:
        self.size = size
        self._pending = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        start = 0
        if self._pending:
            start = min(self.size - len(self._pending), len(data))
            self._pending += data[:start]
            if len(self._pending) < self.size:
                return out
            out.append(bytes(self._pending))
            self._pending.clear()
        if start == 0 and len(data) == self.size:
            return [data]
        view = memoryview(data)
        while len(data) - start >= self.size:
            out.append(bytes(view[start:start + self.size]))
            start += self.size
        self._pending += view[start:]
        return out

    def flush(self) -> list[bytes]:
        out = [bytes(self._pending)] if self._pending else []
        self._pending.clear()
        return out


@dataclass
class ScrubReport:
    """What one scrub of a blob store against the database found and did
    (``storage.artifact_scrub``): counts and sizes only, never keys, apps,
    buckets or endpoints, so it can go to logs, spans and a terminal.

    ``orphaned``: stored bytes no blob and no upload names, older than the
    grace period; ``deleted`` of them (none in a dry run). ``young``:
    unnamed but within the grace period, kept. ``foreign``: things under
    the store's prefix not shaped like its keys, never touched. ``missing``:
    blobs the database names whose bytes the store lacks (reported, never
    repaired: only a backup has them). ``unversioned`` (the database's
    report alone): blob rows no version references, whose bytes nothing
    would ever delete (reported, never repaired: refcounts move with the
    versions in one transaction, so only a hand or a bug makes one)."""

    store: str
    dry_run: bool
    checked: int = 0
    checked_bytes: int = 0
    young: int = 0
    orphaned: int = 0
    orphaned_bytes: int = 0
    deleted: int = 0
    deleted_bytes: int = 0
    foreign: int = 0
    missing: int = 0
    missing_bytes: int = 0
    unversioned: int = 0
    unversioned_bytes: int = 0

    def counts(self) -> dict[str, int]:
        """The numbers alone, for logs and span attributes."""
        return {k: v for k, v in vars(self).items() if isinstance(v, int) and not isinstance(v, bool)}
