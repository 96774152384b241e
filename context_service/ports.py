"""Every seam of the context service, as a Protocol (see
docs/ARCHITECTURE.md, "Ports"). Storage backends (``storage.factory``) and
the cache-service client implement them; the application services
(building, turns, compaction, diagnostics) depend only on these.

Store implementations return domain types and raise
agentctx_common.errors: NotFound (SESSION_NOT_FOUND), AlreadyExists
(SESSION_ALREADY_EXISTS, EVENT_ID_CONFLICT), Aborted (ETAG_MISMATCH,
current etag in metadata; COMPACTION_CONFLICT), Unavailable
(DATABASE_UNAVAILABLE / DATABASE_BUSY, with retry_after); the memory
store NotFound (MEMORY_NOT_FOUND) and AlreadyExists (MEMORY_ALREADY_EXISTS).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterable, AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from context_service.building.types import BuiltContext
from context_service.domain.artifacts import ArtifactScope, ArtifactVersionRecord, ContentDigest, ScrubReport
from context_service.domain.cache_calls import CacheScope, LeaseRequest, ModelReply, ScopeInvalidation, ScopeStatus
from context_service.domain.compaction_rules.history import History
from context_service.domain.compaction_rules.jobs import Job
from context_service.domain.compaction_rules.plan import CompactionPlan
from context_service.domain.config import ContextConfig, RetrievalPolicy
from context_service.domain.diagnostics import LifecycleFacts
from context_service.domain.memory import AddedFromSession, MemoryKey, MemoryMatch, MemoryQuery, MemoryRecord, NewMemory
from context_service.domain.model import CompactionTrigger, Content, Event, JsonObject, SessionKey
from context_service.domain.paging import SessionPage, SessionQuery
from context_service.domain.selection import Compressor
from context_service.domain.session_records import AppendResult, SessionHead, SessionRecord, StateDelta
from context_service.domain.tool_tokens import OpenCall, Staged, ToolClaims

# --- storage ----------------------------------------------------------------


class EventSource(Protocol):
    """The part of the session store the history cache reads."""

    async def list_events(
        self, key: SessionKey, *, after_sequence: int = 0, limit: int | None = None, include_compactions: bool = True
    ) -> list[Event]: ...


class EventPages(Protocol):
    """Newest-first reads of a session's events (``building.tail``): a
    bounded build reads only the pages its budget can take."""

    async def list_events_before(self, key: SessionKey, *, before_sequence: int, limit: int) -> list[Event]:
        """The ``limit`` newest events below ``before_sequence`` (0: no
        bound), in sequence order."""
        ...

    async def latest_compaction(self, key: SessionKey) -> Event | None: ...

    async def list_events(
        self, key: SessionKey, *, after_sequence: int = 0, limit: int | None = None, include_compactions: bool = True
    ) -> list[Event]: ...


class SessionStore(Protocol):
    async def create_session(self, key: SessionKey, *, state: JsonObject, config: ContextConfig,
                             app_state: JsonObject | None = None, user_state: JsonObject | None = None) -> SessionRecord:
        """Stores a new, empty session (ALREADY_EXISTS when the key is taken),
        merging ``app_state``/``user_state`` by key into the shared states."""
        ...

    async def get_shared_state(self, app: str, user: str) -> tuple[JsonObject, JsonObject]:
        """(the app's shared state, the user's in the app); empty when unset."""
        ...

    async def get_session(self, key: SessionKey) -> SessionRecord: ...

    async def list_sessions(self, query: SessionQuery, *, page_size: int, page_token: str = "") -> SessionPage:
        """Oldest first, in a stable order; tokens are opaque and bound to
        ``query``. Sessions created while paging appear on later pages."""
        ...

    async def update_session(
        self,
        key: SessionKey,
        *,
        state: JsonObject | None = None,
        config: ContextConfig | None = None,
        config_fields: Collection[str] = ("model", "selection", "compaction", "cache"),
        expected_etag: str | None = None,
    ) -> SessionRecord:
        """Replaces the state (when given) and the named top-level fields of
        the config (when given), atomically, as one new etag."""
        ...

    async def delete_session(self, key: SessionKey, *, expected_etag: str | None = None) -> None:
        """Removes the session and all of its events."""
        ...

    async def append_event(self, key: SessionKey, event: Event, *, expected_etag: str | None = None,
                           state_delta: StateDelta | None = None, open_calls: Sequence[OpenCall] = ()) -> AppendResult:
        """Stores ``event`` with the next sequence; on disk when it returns.

        ``event.id`` must be set (domain.event_validation.prepare_event). An id that
        is already stored returns the stored event (deduplicated) when the
        content is the same, even if the etag moved on; different content
        is ALREADY_EXISTS, reason EVENT_ID_CONFLICT. ``create_time`` is
        set to the commit time when None. The store does not check who may
        append what: COMPACTION events are ordinary rows (kind COMPACTION,
        body as JSON). A ``state_delta`` is merged by key into the session's
        and the shared states in the event's transaction (not on a retry),
        and ``open_calls`` (the tokens minted for the event's function calls)
        are stored with it (not on a retry: a deduplicated event's tokens
        are not valid). A function response closes the open calls it
        answers in its transaction (storage.tool_call_rows.collect).
        """
        ...

    async def append_events(self, key: SessionKey, events: Sequence[Event]) -> list[AppendResult]:
        """Stores ``events`` all or nothing, in one transaction: the first
        error ``append_event`` would give one of them (EVENT_ID_CONFLICT,
        NOT_FOUND) is raised and nothing is stored. An id already stored
        with the same content is deduplicated as by ``append_event``, so a
        retry is idempotent; the others get consecutive sequences."""
        ...

    async def get_event(self, key: SessionKey, event_id: str) -> Event | None: ...

    async def list_events_before(self, key: SessionKey, *, before_sequence: int, limit: int) -> list[Event]:
        """The ``limit`` newest events below ``before_sequence`` (0: no
        bound), in sequence order."""
        ...

    async def latest_compaction(self, key: SessionKey) -> Event | None:
        """The newest COMPACTION event, if any."""
        ...

    async def list_events(
        self,
        key: SessionKey,
        *,
        after_sequence: int = 0,
        limit: int | None = None,
        include_compactions: bool = True,
        after_time: dt.datetime | None = None,
        most_recent: int = 0,
    ) -> list[Event]:
        """Events with a sequence above ``after_sequence`` (created at or
        after ``after_time``; only the ``most_recent`` newest when
        positive), in sequence order."""
        ...

    async def close(self) -> None: ...


class MemoryStore(Protocol):
    """Memory entries per app and user (domain.memory), searched by the
    backend's full-text index. Entries outlive their sessions."""

    async def add(self, entry: NewMemory) -> MemoryRecord:
        """Stores ``entry``; the same entry under its id again returns the
        stored one. Another entry under its id, or another entry from its
        source event: AlreadyExists MEMORY_ALREADY_EXISTS."""
        ...

    async def add_from_session(self, entries: Sequence[NewMemory]) -> AddedFromSession:
        """Stores the entries (all from one session) whose source event is
        not in memory yet; counts added and already there."""
        ...

    async def get(self, key: MemoryKey) -> MemoryRecord: ...

    async def delete(self, key: MemoryKey) -> None: ...

    async def search(self, query: MemoryQuery) -> list[MemoryMatch]:
        """The owner's entries matching any of the query's terms and every
        metadata filter, best first (ties by insertion), at most ``limit``."""
        ...

    async def set_vectors(self, model: str, vectors: Sequence[tuple[MemoryKey, Sequence[float]]]) -> int:
        """Stores the entries' vectors (made by ``model``); entries gone
        meanwhile are skipped. How many were stored."""
        ...

    async def vector_search(self, query: MemoryQuery, model: str, vector: Sequence[float], n: int,
                            also: Sequence[MemoryKey] = ()) -> list[MemoryMatch]:
        """The owner's entries with a vector of ``model`` passing every
        metadata filter, by cosine with ``vector`` (the match's score), best
        first, at most ``n``. Entries without a vector are not found. A
        store may rank a bounded set of the owner's vectors (its newest);
        the entries ``also`` names are ranked whatever the bound."""
        ...


class EmbeddingPort(Protocol):
    """Embeddings through the cache service (``cache_client.CacheClient``):
    one vector per text. A call it cannot make is UNAVAILABLE
    CACHE_SERVICE_UNAVAILABLE; its own errors come back as raised there."""

    async def embed(self, provider: str, model: str, texts: Sequence[str], *, query: bool,
                    dimensions: int | None = None, remaining: float | None = None) -> list[list[float]]: ...


class MemoryRetriever(Protocol):
    """Memory for a turn (``memory.service.MemoryService``): the contents a
    retrieval policy puts in the request's memory section."""

    async def retrieve(self, key: SessionKey, query: str, policy: RetrievalPolicy,
                       remaining: float | None = None) -> list[Content]: ...


class SessionHeads(Protocol):
    """What selection needs of a session row, read with one query."""

    async def get(self, key: SessionKey) -> SessionHead:
        """NOT_FOUND (SESSION_NOT_FOUND) when there is no such session."""
        ...

    async def close(self) -> None: ...


class LifecycleReader(Protocol):
    async def lifecycle_facts(self, key: SessionKey) -> LifecycleFacts:
        """Counts, the compaction view and pending jobs (NOT_FOUND when the
        session does not exist)."""
        ...


class CompactionStore(Protocol):
    async def load_history(self, key: SessionKey, known: History | None = None) -> History:
        """The latest compaction and the events it left visible (NOT_FOUND
        when the session does not exist); with ``known``, an earlier view
        of the session extended by what was appended since, when still
        valid."""
        ...

    async def commit(self, key: SessionKey, plan: CompactionPlan, event: Event) -> Event:
        """Appends ``event`` atomically iff ``check_commit`` accepts it
        against the session as it is now; ABORTED (COMPACTION_CONFLICT)
        otherwise, with nothing written."""
        ...


class CompactionJobs(Protocol):
    """The durable queue of background compaction jobs (at most one pending
    or running per session); a claimed job is leased to its owner."""

    async def enqueue(self, key: SessionKey, trigger: CompactionTrigger) -> bool:
        """False when the session already has a pending or running job."""
        ...

    async def claim(self, owner: str, lease_s: float) -> Job | None: ...

    async def heartbeat(self, job: Job, owner: str, lease_s: float) -> bool: ...

    async def finish(self, job: Job, owner: str, outcome: str) -> bool: ...

    async def fail(self, job: Job, owner: str, reason: str, *, retry_after_s: float | None) -> bool: ...

    async def release(self, job: Job, owner: str) -> bool: ...

    async def active_count(self, key: SessionKey) -> int: ...

    async def purge_finished(self, older_than_s: float) -> int: ...


# --- services the application layer calls -------------------------------------


class ArtifactStore(Protocol):
    """Versioned artifacts, their bytes content-addressed per app and kept
    in chunks of at most ``domain.artifacts.CHUNK_BYTES``. NotFound
    (ARTIFACT_NOT_FOUND), ResourceExhausted (ARTIFACT_QUOTA_EXCEEDED, and
    whatever ``digest`` raises), Unavailable as every store.

    ``call`` (a tool token's id) is the tool call a reader acts for: it also
    sees the versions that call staged (``save(staged_call=...)``), which
    everyone else sees only once the call's response is appended
    (``ToolCalls``)."""

    async def save(
        self, scope: ArtifactScope, artifact: str, *, mime_type: str, text: bool, custom_metadata: JsonObject,
        chunks: AsyncIterable[bytes], digest: ContentDigest, quota_bytes: int, staged_call: str | None = None,
    ) -> ArtifactVersionRecord:
        """Stores ``chunks`` (each at most CHUNK_BYTES; ``digest`` has seen
        them all when the iteration ends) as the next version. Nothing of a
        save that fails stays visible; a crash leaves an upload that is
        collected later."""
        ...

    async def get_version(self, scope: ArtifactScope, artifact: str, version: int | None,
                          call: str | None = None) -> ArtifactVersionRecord:
        """One version, or the latest (``version`` None)."""
        ...

    def read_chunks(self, record: ArtifactVersionRecord) -> AsyncIterator[bytes]:
        """The version's content, one chunk at a time (NOT_FOUND when it is
        deleted while being read)."""
        ...

    async def list_names(self, app: str, user: str, session: str | None, call: str | None = None) -> list[str]:
        """Sorted ids: the session's and the user's, or the user's alone."""
        ...

    async def list_versions(self, scope: ArtifactScope, artifact: str,
                            call: str | None = None) -> list[ArtifactVersionRecord]: ...

    async def delete(self, scope: ArtifactScope, artifact: str, version: int | None, call: str | None = None) -> int:
        """Deletes one version or all; returns how many. Blobs no version
        names any more are deleted with them."""
        ...

    async def stored_bytes(self, app: str) -> tuple[int, int]:
        """(blobs, bytes) the app stores: what its quota counts."""
        ...

    async def collect_uploads(self, older_than: dt.timedelta) -> int:
        """Deletes uploads started before ``older_than`` ago and never
        committed (a crashed process's); returns how many."""
        ...

    async def scrub(self, grace: dt.timedelta, *, dry_run: bool = False) -> list[ScrubReport]:
        """Checks every configured blob store against the database: deletes
        stored bytes nothing names that are older than ``grace`` (none with
        ``dry_run``) and counts named bytes the store lacks; one report per
        store."""
        ...


@dataclass(frozen=True)
class StoredBytes:
    """One thing a blob store holds, as its listing shows it: finished
    bytes, or an unfinished upload (``upload_id``: an S3 multipart upload).
    ``modified`` None: the store keeps no age (the database's chunk rows)."""

    app: str
    key: str
    size: int
    modified: dt.datetime | None
    upload_id: str | None = None


class BlobNotFound(Exception):
    """A blob store has no bytes under the key (deleted, or never finished)."""


class BlobWriter(Protocol):
    """One upload of a blob store: chunks in order, then ``finish`` (the
    bytes are durable under the key) or ``abort``."""

    async def write(self, chunk: bytes) -> None: ...

    async def finish(self) -> int:
        """Makes the bytes durable; returns the part count read() needs."""
        ...

    async def abort(self) -> None:
        """Drops whatever was written (idempotent)."""
        ...


class BlobStore(Protocol):
    """Where artifact bytes live, under keys the artifact store makes and
    keeps in the database (which blob names which key, uploads in
    progress): the database's own chunk rows, or an object store. Keys
    start with ``kind``, so a blob is read from the store that wrote it.
    Failures are Unavailable (transient, with retry_after); a missing key
    is BlobNotFound."""

    kind: str
    # True: the writer lists its upload as pending in the database itself,
    # in its first write; otherwise the artifact store does, before.
    lists_uploads: bool

    def writer(self, app: str, key: str) -> BlobWriter: ...

    def read(self, app: str, key: str, size: int, parts: int) -> AsyncIterator[bytes]:
        """The bytes in chunks of exactly CHUNK_BYTES (the last shorter)."""
        ...

    async def delete(self, app: str, key: str) -> None:
        """Deletes the bytes under ``key``, finished or not (idempotent)."""
        ...

    async def keys(self) -> list[tuple[str, str]]:
        """(app, key) of everything stored, finished or not: for sweeps and checks."""
        ...

    def listing(self) -> AsyncIterator[list[StoredBytes]]:
        """Everything stored, in pages: the finished bytes first, each
        app's together, then the unfinished uploads. Includes what is not
        shaped like the store's keys (a scrub leaves that alone)."""
        ...

    async def exists(self, item: StoredBytes) -> bool:
        """Whether one listed thing is still stored."""
        ...

    async def remove(self, item: StoredBytes) -> None:
        """Deletes one listed thing (idempotent)."""
        ...

    async def close(self) -> None: ...


class ToolCalls(Protocol):
    """One row per minted tool token: its state (open until the response
    that answers its call is appended, or its deadline) and the effects
    staged against it. The session store's appends collect them
    (storage.tool_calls.collect) in their own transaction."""

    async def open(self, calls: Sequence[OpenCall]) -> None: ...

    async def check(self, claims: ToolClaims) -> Staged:
        """The call's staged effects; PERMISSION_DENIED TOOL_TOKEN_REVOKED
        unless it is open."""
        ...

    async def stage(self, claims: ToolClaims, change: Callable[[Staged], None]) -> Staged:
        """``change`` applied to the open, live call's staged effects."""
        ...

    async def any_open(self, key: SessionKey, call_ids: Sequence[str]) -> bool: ...

    async def drop_expired(self, limit: int = 100) -> int:
        """Drops open calls past their deadline (their staged bytes too)."""
        ...

    async def purge(self, older_than: dt.timedelta, limit: int = 1000) -> int:
        """Deletes closed rows whose deadline is long past."""
        ...


class Compressors(Protocol):
    """Selection's overflow COMPRESS (the compaction service provides it)."""

    async def compressor(self, key: SessionKey, config: ContextConfig, *, remaining: float | None = None) -> Compressor:
        """The summarizer for one build on ``key`` whose effective config is ``config``."""
        ...


class CachePort(Protocol):
    """The cache service (``cache_client.CacheClient`` over gRPC). A call
    it cannot make is UNAVAILABLE CACHE_SERVICE_UNAVAILABLE; its own errors
    come back as the AgentCtxError it raised."""

    async def generate(
        self, scope: CacheScope, request: BuiltContext, *, acquire: LeaseRequest | None = None,
        remaining: float | None = None,
    ) -> ModelReply:
        """The model's answer; with ``acquire``, through a lease on the
        request's prefix that the call acquires and releases itself (its
        ``served`` record is then the call's whole cache record)."""
        ...

    def stream_generate(
        self, scope: CacheScope, request: BuiltContext, *, acquire: LeaseRequest | None = None,
        remaining: float | None = None,
    ) -> AsyncIterator[ModelReply]:
        """The reply's chunks as they arrive; errors as for ``generate``."""
        ...

    async def scope_status(self, scope: CacheScope, *, remaining: float | None = None) -> ScopeStatus: ...

    async def invalidate_scope(self, scope: CacheScope, *, remaining: float | None = None) -> ScopeInvalidation: ...
