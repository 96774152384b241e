"""The tool token rules without a server: signing and verification (forged,
truncated, tampered, rotated-out keys), capability masks, deadlines and
declaration validation; Hypothesis for "nothing but a genuine token
verifies"."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentctx_common.errors import PermissionDenied, Unauthenticated
from context_service.domain.config import ContextConfig, ToolDeclaration
from context_service.domain.tool_tokens import (
    CAPABILITIES,
    KeySet,
    SigningKey,
    ToolClaims,
    ToolTokenCodec,
    declaration_violations,
    declared_mask,
    mask_of,
    names_of,
)
from context_service.domain.validation import config_violations

K1 = SigningKey("k1", b"1" * 32)
K2 = SigningKey("k2", b"2" * 32)


def claims(**changes: object) -> ToolClaims:
    values: dict[str, object] = dict(key_id="", token_id="t" * 24, app="shop", user="alice", session="s1",
                                     event_id="m1", call_id="c1", tool="writer",
                                     capabilities=mask_of(["state_read"]), expires_at=2e9)
    values.update(changes)
    return ToolClaims(**values)  # type: ignore[arg-type]


def test_round_trip_and_rotation() -> None:
    token = ToolTokenCodec(KeySet([K1], "k1")).sign(claims())
    got = ToolTokenCodec(KeySet([K1, K2], "k2")).verify(token)
    assert (got.key_id, got.app, got.session, got.call_id, got.capability_names) == (
        "k1", "shop", "s1", "c1", ("identity", "state_read"))
    # Rotated past its key's life: the key left the set, its tokens with it.
    with pytest.raises(Unauthenticated) as err:
        ToolTokenCodec(KeySet([K2], "k2")).verify(token)
    assert err.value.reason.value == "TOOL_TOKEN_INVALID"


def test_tampered_truncated_and_forged_tokens_are_invalid() -> None:
    codec = ToolTokenCodec(KeySet([K1], "k1"))
    token = codec.sign(claims())
    version, payload, mac = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data["s"] = "s2"  # another session
    forged_payload = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    forger = ToolTokenCodec(KeySet([SigningKey("k1", b"x" * 32)], "k1"))
    for bad in (token[:-1], token[: len(token) // 2], f"{version}.{payload}", f"{version}.{forged_payload}.{mac}",
                forger.sign(claims(session="s2")), f"tt2.{payload}.{mac}", "", "." * 2, token + ".x"):
        with pytest.raises(Unauthenticated):
            codec.verify(bad)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_no_random_string_verifies(text: str) -> None:
    codec = ToolTokenCodec(KeySet([K1], "k1"))
    with pytest.raises(Unauthenticated):
        codec.verify(text)


def test_every_one_character_change_is_refused() -> None:
    """Exhaustive over the token alphabet: no second spelling of a token
    (base64's unused trailing bits included) and no near miss verifies."""
    codec = ToolTokenCodec(KeySet([K1], "k1"))
    token = codec.sign(claims())
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.="
    for i in range(len(token)):
        for ch in alphabet:
            changed = token[:i] + ch + token[i + 1:]
            if changed != token:
                with pytest.raises(Unauthenticated):
                    codec.verify(changed)


def test_capabilities_and_deadline() -> None:
    c = claims(capabilities=mask_of(["artifact_get", "nonsense"]))
    assert c.capability_names == ("identity", "artifact_get")
    c.require("identity")
    c.require("artifact_get")
    with pytest.raises(PermissionDenied) as err:
        c.require("artifact_put")
    assert (err.value.reason.value, err.value.metadata) == (
        "TOOL_CAPABILITY_MISSING", {"capability": "artifact_put", "tool": "writer"})
    c.check_live(1.9e9)
    with pytest.raises(PermissionDenied) as expired:
        c.check_live(2e9)
    assert expired.value.reason.value == "TOOL_TOKEN_EXPIRED"
    assert names_of(mask_of(CAPABILITIES)) == CAPABILITIES
    tools = (ToolDeclaration("search", ("memory_search",)),)
    assert names_of(declared_mask(tools, "search")) == ("identity", "memory_search")
    assert names_of(declared_mask(tools, "other")) == ("identity",)


def test_declarations_are_validated_like_policy_keys() -> None:
    tools = (ToolDeclaration("a", ("state_read", "state_raed")), ToolDeclaration("a"), ToolDeclaration(""))
    fields = [v.field for v in declaration_violations(tools)]
    assert fields == ["config.tools[0].capabilities[1]", "config.tools[1].name", "config.tools[2].name"]
    assert [v.field for v in config_violations(ContextConfig(tools=tools))] == fields
    assert declaration_violations((ToolDeclaration("ok", CAPABILITIES),)) == []
