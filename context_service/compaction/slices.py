"""Per-event work done in slices, yielding to the event loop between them:
measuring or preparing a long history must not hold up the RPCs that share
the loop (BuildContext p99 stays flat while compaction runs)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from context_service.domain.compaction_rules.sizing import Measure, measure
from context_service.domain.compaction_rules.summary import Prepared, prepare_for_compactor
from context_service.domain.model import Event
from context_service.domain.selection.secrets import SecretKeys

SLICE = 32


async def measured(events: Sequence[Event]) -> tuple[Measure, ...]:
    out: list[Measure] = []
    for i, e in enumerate(events):
        out.append(measure(e))
        if i % SLICE == SLICE - 1:
            await asyncio.sleep(0)
    return tuple(out)


async def prepared(events: Sequence[Event], keys: SecretKeys) -> list[Prepared]:
    out: list[Prepared] = []
    for i, e in enumerate(events):
        out.append(prepare_for_compactor(e, keys))
        if i % SLICE == SLICE - 1:
            await asyncio.sleep(0)
    return out
