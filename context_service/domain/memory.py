"""Memory: what an agent may recall across sessions (MemoryService).

Entries belong to an app and a user and hold text, string metadata and the
session and event they came from. This module holds their types, the
checks of what a client sends, the query's terms (free text is never handed
to a query language: stores match the terms, each quoted), and which of a
session's events become entries (ADK's ``add_session_to_memory``: the user's
and the model's text, one entry per event), and semantic ranking's pure
parts: vectors packed for storage, cosine, and the reciprocal rank fusion
of the lexical and the vector rankings (``fuse``, k = ``RRF_K``).

Memory outlives its sessions, as ADK's does: deleting a session leaves its
entries (delete them by name).

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import array
import datetime as dt
import enum
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain.limits import NOT_RESERVED, Limits, raise_if
from context_service.domain.model import Content, Event, Part, SessionKey

MAX_TEXT_BYTES = 256 * 1024
MAX_METADATA_ENTRIES = 32
MAX_METADATA_KEY_CHARS = 128
MAX_METADATA_VALUE_CHARS = 1024
MAX_AUTHOR_CHARS = 128
MAX_QUERY_BYTES = 4096
# Terms of one query a store matches (the first ones, after stop words).
MAX_QUERY_TERMS = 32
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
# The roles whose text add_session_to_memory keeps (ADK: user and model).
MEMORY_ROLES = frozenset({"user", "model"})
NUL = "\x00"
NO_NUL = "must not contain NUL characters"

# Words: letters, digits and underscores in any script.
_WORD = re.compile(r"\w+", re.UNICODE)
# Words too common to rank by (matched only when a query has nothing else).
STOP_WORDS = frozenset(
    "a an and are as at be but by did do does for from had has have how i in is it its me my of on or our "
    "she so that the their them then there these they this to was we were what when where which who whom "
    "why will with you your".split()
)


@dataclass(frozen=True, slots=True)
class MemoryKey:
    """apps/{app}/users/{user}/memories/{memory_id}."""

    app: str
    user: str
    memory_id: str

    @property
    def name(self) -> str:
        return f"apps/{self.app}/users/{self.user}/memories/{self.memory_id}"


@dataclass(frozen=True, slots=True)
class NewMemory:
    """An entry to store. ``session_id`` and ``event_id`` name its source
    (the session is the entry's own app and user), empty when it has none."""

    key: MemoryKey
    text: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    session_id: str = ""
    event_id: str = ""
    author: str = ""
    create_time: dt.datetime | None = None

    def same_entry(self, other: MemoryRecord) -> bool:
        """Whether a retry of this add would store ``other`` again."""
        return (self.text, dict(self.metadata), self.session_id, self.event_id, self.author) == (
            other.text, dict(other.metadata), other.session_id, other.event_id, other.author)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A stored entry."""

    key: MemoryKey
    text: str
    metadata: Mapping[str, str]
    session_id: str
    event_id: str
    author: str
    create_time: dt.datetime

    @property
    def session_name(self) -> str:
        return SessionKey(self.key.app, self.key.user, self.session_id).name if self.session_id else ""


@dataclass(frozen=True, slots=True)
class MemoryMatch:
    """``score``: higher is better, comparable within one search only.
    ``lexical_rank``/``vector_rank``: 1-based ranks in each ranking that
    found the entry (0: not found by it); ``vector_score`` the cosine."""

    record: MemoryRecord
    score: float
    lexical_rank: int = 0
    vector_rank: int = 0
    vector_score: float = 0.0


class Ranking(enum.Enum):
    LEXICAL = "LEXICAL"
    FUSED = "FUSED"


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A search's matches, how they were ranked, and whether semantic
    ranking was configured but could not run (the query not embedded)."""

    matches: list[MemoryMatch]
    ranking: Ranking = Ranking.LEXICAL
    semantic_unavailable: bool = False


@dataclass(frozen=True, slots=True)
class SemanticMemory:
    """Semantic mode: the embedding model (and provider instance, empty:
    the cache tier routes by model) that vectors are made with; only
    vectors of this model are compared."""

    model: str
    provider: str = ""
    dimensions: int | None = None


@dataclass(frozen=True, slots=True)
class MemoryQuery:
    """A search: the owner, the query's terms (see ``query_terms``),
    metadata equality filters and a limit."""

    app: str
    user: str
    terms: tuple[str, ...]
    metadata_filter: Mapping[str, str] = field(default_factory=dict)
    limit: int = DEFAULT_LIMIT
    text: str = ""  # the query as sent (what semantic ranking embeds)


@dataclass(frozen=True, slots=True)
class AddedFromSession:
    """Counts, and the entries this call added (to embed)."""

    added: int
    existing: int
    entries: tuple[NewMemory, ...] = ()


def query_terms(query: str) -> tuple[str, ...]:
    """The words a store matches (any of them): lower-cased, each once, in
    order, stop words left out unless nothing else is left, at most
    ``MAX_QUERY_TERMS``. Only word characters: no quote, operator or column
    filter of FTS5 or tsquery syntax survives."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    kept = [w for w in words if w not in STOP_WORDS] or words
    return tuple(kept[:MAX_QUERY_TERMS])


def fts5_match(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression for any of ``terms``, each a quoted string
    (a quote inside is doubled), so no term is read as syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def memory_text(event: Event) -> str:
    """The text an event leaves in memory: its non-thought text parts
    joined by newlines, for user and model contents; "" for anything else
    (tool calls and results, compactions, partial chunks)."""
    if event.is_compaction or event.partial or event.content is None or event.content.role not in MEMORY_ROLES:
        return ""
    texts = [p.text for p in event.content.parts if p.text and not p.thought]
    # NUL is no character of text to search (and PostgreSQL's text refuses it).
    return "\n".join(texts).replace(NUL, "").strip()


def entries_from_session(key: SessionKey, events: Iterable[Event], new_id: Iterable[str]) -> list[NewMemory]:
    """One entry per event with memory text (``memory_text``); ids drawn
    from ``new_id``. Text past MAX_TEXT_BYTES is cut at a character."""
    ids = iter(new_id)
    out = []
    for event in events:
        text = memory_text(event)
        if not text:
            continue
        out.append(NewMemory(
            key=MemoryKey(key.app, key.user, next(ids)),
            text=_cut(text, MAX_TEXT_BYTES),
            session_id=key.session,
            event_id=event.id,
            author=event.author.replace(NUL, "")[:MAX_AUTHOR_CHARS],
            create_time=event.create_time,
        ))
    return out


def _cut(text: str, max_bytes: int) -> str:
    data = text.encode()
    return text if len(data) <= max_bytes else data[:max_bytes].decode(errors="ignore")


def metadata_violations(metadata: Mapping[str, str], path: str) -> list[FieldViolation]:
    v = []
    if len(metadata) > MAX_METADATA_ENTRIES:
        v.append(FieldViolation(path, f"at most {MAX_METADATA_ENTRIES} entries"))
    for k, value in sorted(metadata.items()):
        if not k or len(k) > MAX_METADATA_KEY_CHARS:
            v.append(FieldViolation(f"{path}[{k!r}]", f"keys must have 1 to {MAX_METADATA_KEY_CHARS} characters"))
        if len(value) > MAX_METADATA_VALUE_CHARS:
            v.append(FieldViolation(f"{path}[{k!r}]", f"values must have at most {MAX_METADATA_VALUE_CHARS} characters"))
        if NUL in k or NUL in value:
            v.append(FieldViolation(f"{path}[{k!r}]", NO_NUL))
    return v


def check_new_memory(entry: NewMemory, limits: Limits, path: str = "memory") -> None:
    """INVALID_ARGUMENT INVALID_MEMORY_REQUEST naming every bad field."""
    v = []
    if not entry.text.strip():
        v.append(FieldViolation(f"{path}.text", "is required"))
    elif len(entry.text.encode()) > MAX_TEXT_BYTES:
        v.append(FieldViolation(f"{path}.text", f"must be at most {MAX_TEXT_BYTES} bytes"))
    elif NUL in entry.text:
        v.append(FieldViolation(f"{path}.text", NO_NUL))
    v += metadata_violations(entry.metadata, f"{path}.metadata")
    if entry.event_id and not limits.valid_id(entry.event_id):
        v.append(FieldViolation(f"{path}.event_id", f"must match {limits.id_pattern} {NOT_RESERVED}"))
    if entry.event_id and not entry.session_id:
        v.append(FieldViolation(f"{path}.event_id", "needs memory.session"))
    if len(entry.author) > MAX_AUTHOR_CHARS:
        v.append(FieldViolation(f"{path}.author", f"must have at most {MAX_AUTHOR_CHARS} characters"))
    elif NUL in entry.author:
        v.append(FieldViolation(f"{path}.author", NO_NUL))
    raise_if(v, Reason.INVALID_MEMORY_REQUEST)


def check_memory_id(memory_id: str, limits: Limits, path: str = "memory_id") -> None:
    if not limits.valid_id(memory_id):
        raise InvalidArgument.fields([FieldViolation(path, f"must match {limits.id_pattern} {NOT_RESERVED}")],
                                     reason=Reason.INVALID_MEMORY_REQUEST)


def search_query(app: str, user: str, query: str, metadata_filter: Mapping[str, str], limit: int) -> MemoryQuery:
    """The checked search (INVALID_ARGUMENT INVALID_MEMORY_REQUEST): a query
    with at least one word, within MAX_QUERY_BYTES; limit 0 means the
    default."""
    v = []
    terms: tuple[str, ...] = ()
    if len(query.encode()) > MAX_QUERY_BYTES:
        v.append(FieldViolation("query", f"must be at most {MAX_QUERY_BYTES} bytes"))
    else:
        terms = query_terms(query)
        if not terms:
            v.append(FieldViolation("query", "must contain at least one word"))
    v += metadata_violations(metadata_filter, "metadata_filter")
    if limit < 0 or limit > MAX_LIMIT:
        v.append(FieldViolation("limit", f"must be between 0 (default {DEFAULT_LIMIT}) and {MAX_LIMIT}"))
    raise_if(v, Reason.INVALID_MEMORY_REQUEST)
    return MemoryQuery(app, user, terms, dict(metadata_filter), limit or DEFAULT_LIMIT, query)


# --- semantic ranking ---------------------------------------------------------------

# Reciprocal rank fusion's k (Cormack et al. 2009): an entry's fused score is
# the sum, over the rankings that found it, of 1 / (RRF_K + rank).
RRF_K = 60
# Each ranking contributes this many candidates at least (more when the
# limit is larger), so an entry ranked low by one and high by the other can
# still surface.
MIN_FUSION_CANDIDATES = 50


def fusion_candidates(limit: int) -> int:
    return max(MIN_FUSION_CANDIDATES, 2 * limit)


def pack_vector(vector: Sequence[float]) -> bytes:
    """float32, little-endian: the stored form of a vector."""
    packed = array.array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def unpack_vector(data: bytes) -> array.array[float]:
    packed = array.array("f")
    packed.frombytes(data)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed


def normalized(vector: Sequence[float]) -> list[float]:
    """``vector`` at unit length (a zero vector stays zero), so a dot
    product is the cosine."""
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else list(vector)


def fuse(lexical: Sequence[MemoryMatch], vector: Sequence[MemoryMatch], limit: int) -> list[MemoryMatch]:
    """Reciprocal rank fusion of two rankings (each best first): each entry
    once, scored by the sum of 1 / (RRF_K + rank) over the rankings that
    found it, carrying both ranks and its cosine; best first, ties by
    lexical rank then vector rank; at most ``limit``."""
    fused: dict[MemoryKey, MemoryMatch] = {}
    for rank, m in enumerate(lexical, 1):
        fused[m.record.key] = MemoryMatch(m.record, 1 / (RRF_K + rank), lexical_rank=rank)
    for rank, m in enumerate(vector, 1):
        seen = fused.get(m.record.key)
        if seen is None:
            fused[m.record.key] = MemoryMatch(m.record, 1 / (RRF_K + rank), vector_rank=rank, vector_score=m.score)
        else:
            fused[m.record.key] = replace(seen, score=seen.score + 1 / (RRF_K + rank), vector_rank=rank,
                                          vector_score=m.score)

    def order(m: MemoryMatch) -> tuple[float, int, int]:
        return (-m.score, m.lexical_rank or sys.maxsize, m.vector_rank or sys.maxsize)

    return sorted(fused.values(), key=order)[:limit]


def ranked_lexically(matches: Sequence[MemoryMatch]) -> list[MemoryMatch]:
    """A lexical search's matches with their lexical ranks."""
    return [replace(m, lexical_rank=rank) for rank, m in enumerate(matches, 1)]


# --- retrieval for a turn -----------------------------------------------------------

DEFAULT_RETRIEVAL_LIMIT = 5


def retrieval_query(contents: Sequence[Content]) -> str:
    """The text of the newest user content with any (its non-thought text
    parts), cut to MAX_QUERY_BYTES; "" when none has text."""
    for content in reversed(contents):
        if content.role != "user":
            continue
        text = "\n".join(p.text for p in content.parts if p.text and not p.thought).strip()
        if text:
            return _cut(text, MAX_QUERY_BYTES)
    return ""


def retrieved_contents(matches: Sequence[MemoryMatch], min_score: float | None) -> list[Content]:
    """One user content per match at or above ``min_score``, holding the
    entry's text, best first."""
    return [Content("user", (Part(text=m.record.text),)) for m in matches
            if min_score is None or m.score >= min_score]
