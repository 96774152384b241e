"""Group commit on its own: concurrent submissions share batches, a failing
batch is retried item by item, a cancelled caller does not disturb the
others, and closing finishes what is queued."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agentctx_common.errors import Unavailable
from context_service.storage.group_commit import GroupCommitter


class Recorder:
    def __init__(self, poison: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.poison = poison

    async def run(self, items: Sequence[str]) -> list[str | BaseException]:
        self.batches.append(list(items))
        await asyncio.sleep(0.001)  # a commit takes a while: others queue meanwhile
        if self.poison in items and len(items) > 1:
            raise RuntimeError("the whole batch failed")
        return [ValueError(i) if i == self.poison else i.upper() for i in items]


async def test_concurrent_submissions_share_batches() -> None:
    recorder = Recorder()
    committer: GroupCommitter[str, str] = GroupCommitter(recorder.run, max_batch=8)
    results = await asyncio.gather(*(committer.submit(f"e{i}") for i in range(40)))
    assert results == [f"E{i}" for i in range(40)]
    assert sorted(i for b in recorder.batches for i in b) == sorted(f"e{i}" for i in range(40))
    assert max(len(b) for b in recorder.batches) == 8
    assert len(recorder.batches) < 40
    await committer.close()


async def test_a_failing_batch_is_retried_item_by_item() -> None:
    recorder = Recorder(poison="bad")
    committer: GroupCommitter[str, str] = GroupCommitter(recorder.run)
    results = await asyncio.gather(
        committer.submit("a"), committer.submit("bad"), committer.submit("b"), return_exceptions=True
    )
    assert results[0] == "A" and results[2] == "B"
    assert isinstance(results[1], ValueError)
    assert ["bad"] in recorder.batches  # the poisoned item alone
    await committer.close()


async def test_a_cancelled_caller_leaves_the_batch_alone() -> None:
    recorder = Recorder()
    committer: GroupCommitter[str, str] = GroupCommitter(recorder.run)
    doomed = asyncio.create_task(committer.submit("x"))
    kept = asyncio.create_task(committer.submit("y"))
    await asyncio.sleep(0)
    doomed.cancel()
    assert await kept == "Y"
    with pytest.raises(asyncio.CancelledError):
        await doomed
    # The cancelled item was queued, so it still ran (a retry would dedup it).
    assert "x" in [i for b in recorder.batches for i in b]
    await committer.close()


async def test_close_finishes_queued_items_then_refuses() -> None:
    recorder = Recorder()
    committer: GroupCommitter[str, str] = GroupCommitter(recorder.run, max_batch=2)
    pending = [asyncio.create_task(committer.submit(f"q{i}")) for i in range(5)]
    await asyncio.sleep(0)
    await committer.close()
    assert [await p for p in pending] == [f"Q{i}" for i in range(5)]
    with pytest.raises(Unavailable) as info:
        await committer.submit("late")
    assert info.value.reason == "SHUTTING_DOWN"
