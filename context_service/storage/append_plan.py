"""The append rules, stated once, and the one loop that runs them.

``plan`` is a generator: it yields the store operations it needs, in
order (the ``Op`` classes below: a backend's primitives), receives each
one's result, and returns one result or error per append. It holds every
rule of an append: dedup by event id and content fingerprint, the
expected-etag check, a retraction's target (a MESSAGE event of the session,
stored or earlier in the batch, not a retraction, not retracted yet), sequence numbers that go up by one per stored event
(under the sessions' locks, taken in pk order), and a ``StateDelta``
merged by key into the session's and the shared states (not on a retry).
``plan_all`` is the all-or-nothing variant (the first error is raised, so
the caller's transaction rolls back); ``merge_shared`` is the shared-state
merge on its own (a new session's initial app and user state).

``execute`` runs a plan on a backend's primitives, awaiting them or not:
group commit's raw drivers (``append_sql``: SQLite in its writer thread,
PostgreSQL on asyncpg) and SQLAlchemy Core (``append_core``: append_events,
an append with a state delta, create_session) all go through it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from inspect import isawaitable
from typing import Any, TypeVar

from agentctx_common.errors import Aborted, AlreadyExists, FailedPrecondition, FieldViolation, NotFound
from agentctx_common.reasons import Reason
from context_service.domain.model import Event, EventKind, JsonObject, SessionKey
from context_service.domain.session_records import AppendResult, StateDelta, session_update_time
from context_service.storage import codec


@dataclass(frozen=True, slots=True)
class Append:
    key: SessionKey
    event: Event  # id set; create_time None means "the commit time"
    expected_etag: str | None
    body: str
    fingerprint: str
    delta: StateDelta | None = None  # merged when the event is stored (not on a retry)
    # tool_calls rows (tool_call_rows.open_row) inserted when the event is
    # stored (not on a retry): the tokens minted for a reply's calls.
    calls: tuple[dict[str, Any], ...] = ()
    # Nonzero: one of the contiguous appends of an all-or-nothing unit
    # (``MixedUnit``), as group commit runs ``append_events``.
    unit: int = 0
    # The event as submitted, when ``event`` gained collected attachments
    # (``fingerprint`` is this one's): a retry of a version-1 row is
    # compared by its legacy fingerprint.
    submitted: Event | None = None

    def matches(self, stored: str, version: int) -> bool:
        """Whether a stored fingerprint of ``version`` is this event's."""
        if version == codec.FINGERPRINT_VERSION:
            return stored == self.fingerprint
        return stored == codec.legacy_fingerprint(self.submitted or self.event)


class MixedUnit(Exception):
    """Some appends of an all-or-nothing unit failed while others would be
    stored: the plan stops before writing, so its transaction rolls back.
    ``errors``: each such unit's first error."""

    def __init__(self, errors: Mapping[int, Exception]) -> None:
        super().__init__(f"{len(errors)} all-or-nothing unit(s) partly failed")
        self.errors = dict(errors)


@dataclass(slots=True)
class Live:
    """A locked session row while a transaction changes it."""

    pk: int
    incarnation: str
    version: int
    last_sequence: int
    event_count: int
    touched: bool = False
    update_time: dt.datetime | None = None

    @property
    def etag(self) -> str:
        return codec.etag(self.incarnation, self.version)


# --- the operations a plan asks for ------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockSessions:
    """-> [(pk, app, user_id, session_id, incarnation, version, last_sequence,
    event_count)] of those that exist, locked, in pk order."""

    keys: Sequence[SessionKey]


@dataclass(frozen=True, slots=True)
class StoredFingerprints:
    """-> [(session_pk, event_id, fingerprint, fingerprint_version)] for the
    stored events among the (pks[i], ids[i]) pairs (a superset is fine: the
    plan looks each up)."""

    pks: Sequence[int]
    ids: Sequence[str]


# Bodies that may hold a retraction (``Retractions``).
RETRACTION_LIKE = f'%"{codec.RETRACTS}"%'


@dataclass(frozen=True, slots=True)
class Retractions:
    """-> [(event_id, kind, body_json)] of the events of session ``pk`` that
    ``targets`` names, and of the retractions stored after the oldest of them
    (a superset is fine: the plan reads each body's ``retracts_event_id``).
    ``sql`` is the query, '?' placeholders bound to ``params`` in order."""

    pk: int
    targets: Sequence[str]

    @property
    def sql(self) -> str:
        marks = ", ".join("?" * len(self.targets))
        return (
            f"SELECT event_id, kind, body_json FROM events WHERE session_pk = ? AND (event_id IN ({marks}) OR "
            f"(body_json LIKE ? AND sequence > (SELECT MIN(sequence) FROM events "
            f"WHERE session_pk = ? AND event_id IN ({marks}))))"
        )

    @property
    def params(self) -> list[Any]:
        return [self.pk, *self.targets, RETRACTION_LIKE, self.pk, *self.targets]


@dataclass(frozen=True, slots=True)
class InsertEvents:
    rows: Sequence[dict[str, Any]]  # codec.event_row


@dataclass(frozen=True, slots=True)
class InsertToolCalls:
    rows: Sequence[dict[str, Any]]  # tool_call_rows.open_row


@dataclass(frozen=True, slots=True)
class UpdateSessions:
    rows: Sequence[tuple[int, int, int, dt.datetime, int]]  # version, last_sequence, event_count, update_time, pk


@dataclass(frozen=True, slots=True)
class LoadEvent:
    """-> a row of the events table (attribute access), for codec.event_from_row."""

    pk: int
    event_id: str


@dataclass(frozen=True, slots=True)
class SessionStates:
    """-> {pk: state} of sessions this transaction has locked."""

    pks: Sequence[int]


@dataclass(frozen=True, slots=True)
class WriteSessionStates:
    """The locked sessions' new states (the rest of their rows is UpdateSessions')."""

    states: Mapping[int, JsonObject]


@dataclass(frozen=True, slots=True)
class LockSharedStates:
    """-> ({app: state}, {(app, user): state}) of the named app and user
    states, each row created empty when missing, locked until commit."""

    apps: Sequence[str]
    users: Sequence[tuple[str, str]]
    now: dt.datetime


@dataclass(frozen=True, slots=True)
class WriteSharedStates:
    """The locked shared states' new values."""

    apps: Mapping[str, JsonObject]
    users: Mapping[tuple[str, str], JsonObject]
    now: dt.datetime


Op = (LockSessions | StoredFingerprints | Retractions | InsertEvents | InsertToolCalls | UpdateSessions | LoadEvent
      | SessionStates | WriteSessionStates | LockSharedStates | WriteSharedStates)
Results = list[AppendResult | Exception]
Plan = Generator[Op, Any, Results]
T = TypeVar("T")
K = TypeVar("K")


# --- the driver loop -------------------------------------------------------------------


async def execute(steps: Generator[Op, Any, T], run: Callable[[Op], Any]) -> T:
    """Runs a plan: each operation through ``run`` (awaited when it returns
    an awaitable), its result sent back, until the plan returns."""
    try:
        op = next(steps)
        while True:
            result = run(op)
            if isawaitable(result):
                result = await result
            op = steps.send(result)
    except StopIteration as done:
        value: T = done.value
        return value


def execute_now(steps: Generator[Op, Any, T], run: Callable[[Op], Any]) -> T:
    """``execute`` with a synchronous ``run``, on this thread (SQLite's
    writer thread): the coroutine never suspends, so one send finishes it."""
    coroutine: Coroutine[Any, Any, T] = execute(steps, run)
    try:
        coroutine.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    coroutine.close()
    raise RuntimeError("a synchronous plan step suspended")


# --- the rules -----------------------------------------------------------------------------


def not_found(key: SessionKey) -> NotFound:
    return NotFound(f"session {key.name} not found", reason=Reason.SESSION_NOT_FOUND)


def etag_mismatch(current: str) -> Aborted:
    return Aborted(
        "the session changed since the etag was read", reason=Reason.ETAG_MISMATCH, metadata={"current_etag": current}
    )


def _merged(states: dict[K, JsonObject], deltas: Iterable[tuple[K, JsonObject | None]]) -> dict[K, JsonObject]:
    """Each delta merged by key into its state, in order."""
    for owner, delta in deltas:
        if delta:
            states.setdefault(owner, {}).update(delta)
    return states


def merge_shared(changes: Sequence[tuple[str, str, JsonObject | None, JsonObject | None]],
                 now: dt.datetime) -> Generator[Op, Any, None]:
    """(app, user, app delta, user delta) merged by key into the app's and
    the user's states (created when missing)."""
    apps = [(app, delta) for app, _, delta, _ in changes if delta]
    users = [((app, user), delta) for app, user, _, delta in changes if delta]
    if not apps and not users:
        return
    app_states, user_states = yield LockSharedStates(sorted({a for a, _ in apps}), sorted({u for u, _ in users}), now)
    yield WriteSharedStates(_merged(dict(app_states), apps), _merged(dict(user_states), users), now)


def plan(items: Sequence[Append], now: dt.datetime) -> Plan:
    keys = sorted({item.key for item in items}, key=lambda k: (k.app, k.user, k.session))
    live = {
        SessionKey(app, user, session): Live(pk, incarnation, version, last, count)
        for pk, app, user, session, incarnation, version, last, count in (yield LockSessions(keys))
    }
    wanted = {(live[i.key].pk, i.event.id) for i in items if i.key in live}
    stored: dict[tuple[int, str], tuple[str, int]] = {}
    if wanted:
        pairs = sorted(wanted)
        found = yield StoredFingerprints([p for p, _ in pairs], [e for _, e in pairs])
        stored = {(pk, event_id): (fingerprint, version) for pk, event_id, fingerprint, version in found}

    targeted, retracted = yield from _retraction_targets(items, live)

    results: list[AppendResult | Exception | None] = []
    replays: list[tuple[int, SessionKey, str]] = []  # (result index, session, event id)
    pending: dict[tuple[int, str], tuple[str, Event]] = {}
    rows: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    deltas: list[tuple[Append, Live]] = []  # of the stored items that carry one
    for item in items:
        s = live.get(item.key)
        if s is None:
            results.append(not_found(item.key))
            continue
        ident = (s.pk, item.event.id)
        earlier = pending.get(ident)
        fingerprint = (earlier[0], codec.FINGERPRINT_VERSION) if earlier else stored.get(ident)
        if fingerprint is not None:
            # A retry: the stored event, even if the etag moved on since.
            if item.matches(*fingerprint):
                replays.append((len(results), item.key, item.event.id))
                results.append(None)
            else:
                results.append(AlreadyExists(
                    f"event id {item.event.id} is already stored with different content", reason=Reason.EVENT_ID_CONFLICT
                ))
            continue
        if item.expected_etag is not None and item.expected_etag != s.etag:
            results.append(etag_mismatch(s.etag))
            continue
        target = item.event.retracts_event_id
        if target:
            refused = _retraction_refused(s.pk, target, targeted, retracted, pending)
            if refused is not None:
                results.append(refused)
                continue
            retracted[(s.pk, target)] = item.event.id
        s.version += 1
        s.last_sequence += 1
        s.event_count += 1
        s.touched = True
        create_time = item.event.create_time or now
        event = dataclasses.replace(item.event, sequence=s.last_sequence, create_time=create_time)
        updated = session_update_time(now, create_time)
        s.update_time = updated if s.update_time is None else max(s.update_time, updated)
        rows.append(codec.event_row(
            event, session_pk=s.pk, sequence=s.last_sequence, create_time=create_time,
            body=item.body, fingerprint=item.fingerprint,
        ))
        pending[ident] = (item.fingerprint, event)
        calls.extend(item.calls)
        if item.delta:
            deltas.append((item, s))
        results.append(AppendResult(event, s.etag, session_update_time=s.update_time))

    _whole_units(items, results)
    if rows:
        yield InsertEvents(rows)
        if calls:
            yield InsertToolCalls(calls)
        yield UpdateSessions([
            (s.version, s.last_sequence, s.event_count, s.update_time or now, s.pk) for s in live.values() if s.touched
        ])
    if deltas:
        yield from _merge_deltas(deltas, now)
    for index, key, event_id in replays:
        ident = (live[key].pk, event_id)
        event = pending[ident][1] if ident in pending else codec.event_from_row((yield LoadEvent(*ident)))
        results[index] = AppendResult(event, live[key].etag, deduplicated=True)
    done: Results = []
    for r in results:
        assert r is not None  # every replay's slot was filled above
        done.append(r)
    return done


def _whole_units(items: Sequence[Append], results: Sequence[AppendResult | Exception | None]) -> None:
    """Raises ``MixedUnit`` when a unit has an error beside appends that
    would be stored (or are stored already: retries), as ``plan_all`` does
    for its whole batch."""
    errors: dict[int, Exception] = {}
    succeeded: set[int] = set()
    for item, result in zip(items, results, strict=True):
        if not item.unit:
            continue
        if isinstance(result, Exception):
            errors.setdefault(item.unit, result)
        else:
            succeeded.add(item.unit)
    mixed = {unit: error for unit, error in errors.items() if unit in succeeded}
    if mixed:
        raise MixedUnit(mixed)


def _retraction_targets(
    items: Sequence[Append], live: Mapping[SessionKey, Live]
) -> Generator[Op, Any, tuple[dict[tuple[int, str], tuple[str, str]], dict[tuple[int, str], str]]]:
    """For the retractions among ``items``: (pk, event id) -> (kind, what it
    retracts) of their stored targets, and (pk, target) -> the stored
    retraction that already took it back."""
    targets: dict[int, set[str]] = {}
    for item in items:
        if item.event.retracts_event_id and item.key in live:
            targets.setdefault(live[item.key].pk, set()).add(item.event.retracts_event_id)
    targeted: dict[tuple[int, str], tuple[str, str]] = {}
    retracted: dict[tuple[int, str], str] = {}
    for pk in sorted(targets):
        for event_id, kind, body_json in (yield Retractions(pk, sorted(targets[pk]))):
            body = json.loads(body_json)
            takes_back = body.get(codec.RETRACTS, "") if isinstance(body, dict) else ""
            takes_back = takes_back if isinstance(takes_back, str) else ""
            if event_id in targets[pk]:
                targeted[(pk, event_id)] = (kind, takes_back)
            if takes_back and kind == EventKind.MESSAGE.value:
                retracted[(pk, takes_back)] = event_id
    return targeted, retracted


def _retraction_refused(
    pk: int, target: str, targeted: Mapping[tuple[int, str], tuple[str, str]],
    retracted: Mapping[tuple[int, str], str], pending: Mapping[tuple[int, str], tuple[str, Event]],
) -> FailedPrecondition | None:
    """Why a retraction of ``target`` in session ``pk`` cannot be stored
    (None: it can). The target is a stored event or one stored earlier in
    this batch."""
    earlier = pending.get((pk, target))
    if earlier is not None:
        kind, takes_back = earlier[1].kind.value, earlier[1].retracts_event_id
    elif (pk, target) in targeted:
        kind, takes_back = targeted[(pk, target)]
    else:
        return _refusal("names no event of the session")
    if kind != EventKind.MESSAGE.value:
        return _refusal("names a COMPACTION event, which cannot be retracted")
    if takes_back:
        return _refusal("names a retraction, which cannot be retracted")
    by = retracted.get((pk, target))
    if by is not None:
        return _refusal(f"names an event already retracted (by event {by})")
    return None


def _refusal(description: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"cannot retract: event.retracts_event_id {description}", reason=Reason.RETRACTION_TARGET_INVALID,
        field_violations=[FieldViolation("event.retracts_event_id", description)],
    )


def _merge_deltas(deltas: Sequence[tuple[Append, Live]], now: dt.datetime) -> Generator[Op, Any, None]:
    """The stored events' deltas: the sessions' own, then the shared ones."""
    sessions = [(s.pk, item.delta.session) for item, s in deltas if item.delta and item.delta.session]
    if sessions:
        states = yield SessionStates(sorted({pk for pk, _ in sessions}))
        yield WriteSessionStates(_merged(dict(states), sessions))
    yield from merge_shared([
        (item.key.app, item.key.user, item.delta.app, item.delta.user) for item, _ in deltas if item.delta
    ], now)


def plan_all(items: Sequence[Append], now: dt.datetime) -> Generator[Op, Any, list[AppendResult]]:
    """``plan``, raising the first error instead of returning it."""
    results = yield from plan(items, now)
    done: list[AppendResult] = []
    for result in results:
        if isinstance(result, Exception):
            raise result
        done.append(result)
    return done

