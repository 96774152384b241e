"""The pure diagnostics rules: the whitelisted lifecycle view and the exact
confirmation."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctx_common.errors import FailedPrecondition, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain import diagnostics as diag
from context_service.domain.compaction_rules.history import History
from context_service.domain.config import ContextConfig
from context_service.domain.model import (
    CacheInfo,
    CacheState,
    Checkpoint,
    Compaction,
    CompactionTrigger,
    Content,
    Event,
    EventKind,
    FunctionCall,
    Part,
    SessionKey,
    Usage,
)

KEY = SessionKey("app", "user", "s1")
FP = "ab" * 32
FIELDS = list(diag.CONFIRMATION_FIELDS)


def _checkpoint(checkpoint_id: str = "c" * 32, fingerprint: str = FP) -> Checkpoint:
    return Checkpoint(
        schema_version=1, checkpoint_id=checkpoint_id, trigger=CompactionTrigger.THRESHOLD, source_event_count=5,
        source_first_event_id="e1", source_last_event_id="e5", source_first_time=None, source_last_time=None,
        source_fingerprint=fingerprint, retained_event_count=2, summary_bytes=40, retained_user_turns=1,
        compactor="extractive",
    )


def _history(texts: list[str], *, checkpoint: Checkpoint | None = None, cache: CacheInfo | None = None,
             compaction_id: str = "compaction-1") -> History:
    visible = [
        Event(id=f"e{i}", author="user", sequence=10 + i, content=Content("user", (Part(text=t),)))
        for i, t in enumerate(texts)
    ]
    visible.append(Event(
        id="reply", author="model", sequence=10 + len(texts),
        content=Content("model", (Part(function_call=FunctionCall("c1", "deploy", {"token": " ".join(texts)})),)),
        usage=Usage(prompt_tokens=100, output_tokens=5), cache=cache,
    ))
    compaction = None
    if checkpoint is not None:
        compaction = Event(
            id=compaction_id, author="agentctx", sequence=9, kind=EventKind.COMPACTION,
            compaction=Compaction(1, 8, "e0", 10, "SUMMARY " + " ".join(texts), checkpoint),
        )
    return History(tuple(visible), compaction, visible[-1].sequence)


def _facts(history: History) -> diag.LifecycleFacts:
    return diag.LifecycleFacts(event_count=20, compaction_count=1, pending_compaction_jobs=0, history=history)


def test_the_view_copies_counts_ids_and_fingerprints() -> None:
    cache = CacheInfo(CacheState.HIT, prefix_fingerprint=FP, prefix_tokens=900, scope_fingerprint=FP, uses=3,
                      expire_time=dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    view = diag.build_lifecycle(KEY, "m", _facts(_history(["hello"], checkpoint=_checkpoint(), cache=cache)),
                                diag.ScopeCounts(FP, 2, 1, 4), bytes_per_token=4)
    assert (view.session, view.model, view.event_count, view.compaction_count) == (KEY.name, "m", 20, 1)
    assert view.visible_event_count == 2 and view.visible_tokens >= 105
    assert (view.latest_checkpoint_id, view.latest_compaction_event_id) == ("c" * 32, "compaction-1")
    assert (view.latest_trigger, view.latest_source_fingerprint) == (CompactionTrigger.THRESHOLD, FP)
    assert view.scope == diag.ScopeCounts(FP, 2, 1, 4)
    assert view.latest_cache == cache


def test_identifiers_of_an_unexpected_shape_are_left_out() -> None:
    odd = CacheInfo(CacheState.HIT, prefix_fingerprint="cachedContents/abc", scope_fingerprint="not-hex")
    history = _history(["x"], checkpoint=_checkpoint("cachedContents/abc 123", "secret"), cache=odd,
                       compaction_id="has space")
    view = diag.build_lifecycle(KEY, "m", _facts(history), diag.ScopeCounts("zz", -1, 0, 0), bytes_per_token=4)
    assert (view.latest_checkpoint_id, view.latest_compaction_event_id, view.latest_source_fingerprint) == ("", "", "")
    assert view.scope.scope_fingerprint == "" and view.scope.entry_count == 0
    assert view.latest_cache is not None
    assert (view.latest_cache.prefix_fingerprint, view.latest_cache.scope_fingerprint) == ("", "")


@given(st.lists(st.text(min_size=8, max_size=40).filter(lambda t: t.strip() and t.isprintable()), min_size=1, max_size=6))
def test_no_content_reaches_the_view(texts: list[str]) -> None:
    marked = [f"«{t}»" for t in texts]
    view = diag.build_lifecycle(KEY, "m", _facts(_history(marked, checkpoint=_checkpoint())),
                                diag.ScopeCounts.unreachable(), bytes_per_token=4)
    rendered = repr(dataclasses.asdict(view))
    for text in marked:
        assert text not in rendered
    assert "SUMMARY" not in rendered and "deploy" not in rendered


def test_the_newest_complete_reply_supplies_the_cache_record() -> None:
    older = CacheInfo(CacheState.CREATED, prefix_tokens=1)
    newer = CacheInfo(CacheState.HIT, prefix_tokens=2)
    events = (
        Event(id="a", author="model", sequence=1, cache=older),
        Event(id="b", author="model", sequence=2, cache=newer),
        Event(id="c", author="model", sequence=3, partial=True, cache=CacheInfo(CacheState.BYPASS)),
        Event(id="d", author="user", sequence=4),
    )
    assert diag.latest_cache(History(events, None, 4)) == newer
    assert diag.latest_cache(History((), None, 0)) is None


def test_model_resolution() -> None:
    config = ContextConfig(model="session-model")
    assert diag.resolve_model("", config, "server-default") == "session-model"
    assert diag.resolve_model("", ContextConfig(), "server-default") == "server-default"
    assert diag.resolve_model("gemini-2.5-flash", config, "d") == "gemini-2.5-flash"
    for bad in ("has space", "x" * 129, "-leading", "new\nline"):
        with pytest.raises(InvalidArgument) as info:
            diag.resolve_model(bad, config, "d")
        assert [v.field for v in info.value.field_violations] == ["model"]


_ids = st.text(alphabet="abcxyz019._-", min_size=1, max_size=12)


@given(
    st.fixed_dictionaries({f: _ids for f in FIELDS}),
    st.lists(st.sampled_from(FIELDS), min_size=1, unique=True),
)
def test_every_changed_field_is_named_and_nothing_else(values: dict[str, str], changed: list[str]) -> None:
    expected = diag.Confirmation(**values)
    given_values = {f: (values[f] + "!" if f in changed else values[f]) for f in FIELDS}
    wrong = diag.Confirmation(**given_values)
    assert diag.confirmation_mismatches(expected, expected, check_fingerprint=True) == []
    assert diag.confirmation_mismatches(expected, wrong, check_fingerprint=True) == [f for f in FIELDS if f in changed]
    with pytest.raises(FailedPrecondition) as info:
        diag.check_confirmation(expected, wrong)
    err = info.value
    assert err.reason == Reason.INVALIDATION_CONFIRMATION_MISMATCH
    assert err.metadata["fields"] == ",".join(f for f in FIELDS if f in changed)
    # The error depends on which fields differ, never on their values.
    other = diag.Confirmation(**{f: "other" + values[f] for f in FIELDS})
    other_wrong = diag.Confirmation(**{f: getattr(other, f) + ("?" if f in changed else "") for f in FIELDS})
    with pytest.raises(FailedPrecondition) as again:
        diag.check_confirmation(other, other_wrong)
    assert (again.value.message, again.value.metadata) == (err.message, err.metadata)


def test_the_fingerprint_is_checked_only_when_asked() -> None:
    expected = diag.Confirmation.expected(KEY, "m")
    given_ = diag.Confirmation("app", "user", "s1", "m", FP)
    diag.check_confirmation(expected, given_, check_fingerprint=False)
    with pytest.raises(FailedPrecondition):
        diag.check_confirmation(diag.Confirmation.expected(KEY, "m", "cd" * 32), given_)
    diag.check_confirmation(diag.Confirmation.expected(KEY, "m", FP), given_)


def test_a_missing_confirmation_is_invalid_argument() -> None:
    diag.require_confirmation(True)
    with pytest.raises(InvalidArgument) as info:
        diag.require_confirmation(False)
    assert info.value.reason == Reason.INVALIDATION_CONFIRMATION_REQUIRED
