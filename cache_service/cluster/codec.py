"""An Entry as a Redis hash (static fields in one JSON ``meta``, the ones
that change in their own fields) and its leases as a second hash. The
provider resource name is sealed (cluster.cipher); everything else is the
registry's own identifiers and counts."""

from __future__ import annotations

import json
from collections.abc import Mapping

from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.names import key_field
from cache_service.domain.entry import Entry
from cache_service.domain.keys import Scope
from cache_service.domain.model import CacheHandle

Fields = Mapping[bytes, bytes]


def entry_fields(entry: Entry, cipher: NameCipher) -> dict[str, str]:
    s = entry.scope
    meta = {
        "scope": [s.provider, s.app, s.user, s.model, s.policy], "sfp": entry.scope_fp, "ttl": entry.ttl_s,
        "pfp": entry.prefix_fp, "hl": entry.history_len, "dg": entry.digest.hex(), "tok": entry.tokens,
        "sz": entry.size_bytes, "name": cipher.seal(entry.handle.name, entry.id), "htok": entry.handle.tokens,
    }
    return {
        "meta": json.dumps(meta, separators=(",", ":")), "gen": str(entry.generation),
        "exp": repr(entry.handle.expire_time), "uses": str(entry.uses), "lu": repr(entry.last_used),
        "ret": "1" if entry.retiring else "0", "kf": key_field(entry.key),
    }


def decode_entry(entry_id: str, fields: Fields, leases: Fields, cipher: NameCipher) -> Entry | None:
    if not fields:
        return None
    meta = json.loads(fields[b"meta"])
    provider, app, user, model, policy = meta["scope"]
    handle = CacheHandle(cipher.open(meta["name"], entry_id), float(fields[b"exp"]), meta["htok"])
    return Entry(
        id=entry_id, generation=int(fields[b"gen"]), scope=Scope(provider, app, user, model, policy),
        scope_fp=meta["sfp"], ttl_s=float(meta["ttl"]), prefix_fp=meta["pfp"], history_len=int(meta["hl"]),
        digest=bytes.fromhex(meta["dg"]), tokens=int(meta["tok"]), size_bytes=int(meta["sz"]), handle=handle,
        last_used=float(fields[b"lu"]), uses=int(fields[b"uses"]),
        leases={k.decode(): float(v) for k, v in leases.items()}, retiring=fields[b"ret"] == b"1",
    )


def pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    """A Lua HGETALL reply (flat list) as a mapping."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def text(value: object) -> str:
    """A Redis reply value as text (replies are bytes; typing says bytes | str)."""
    return value.decode() if isinstance(value, bytes) else str(value)
