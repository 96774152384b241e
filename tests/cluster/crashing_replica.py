"""A replica that dies mid-create (run as a script by test_recovery): its
create lands at the shared provider, then the process hangs before the
journal learns the resource name, and the test kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import json
import sys

from cache_service.app import CacheApp
from cache_service.providers.local import SharedLocalProvider
from cache_service.settings import CacheSettings
from tests.cache.support import scope, view


async def main(settings_json: str) -> None:
    app = await CacheApp.create(CacheSettings(**json.loads(settings_json)))
    app.start()
    provider = app.providers["local"]
    assert isinstance(provider, SharedLocalProvider)
    landed = asyncio.Event()
    create = provider.create_cache

    async def land_then_hang(spec):  # type: ignore[no-untyped-def]
        handle = await create(spec)
        landed.set()
        await asyncio.Event().wait()
        return handle

    provider.create_cache = land_then_hang  # type: ignore[method-assign]
    caller = asyncio.ensure_future(app.registry.acquire(scope(), view(3), None, None))
    await landed.wait()
    print("landed", flush=True)
    await caller  # never returns: the test kills the process


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
