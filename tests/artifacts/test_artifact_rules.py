"""domain.artifacts without a server: ids, scopes, versions, the size and
quota bounds, the streaming digest and the chunker."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctx_common.errors import InvalidArgument, ResourceExhausted
from context_service.domain.artifacts import (
    MAX_ARTIFACT_ID_CHARS,
    ArtifactScope,
    Chunker,
    ContentDigest,
    artifact_id_violations,
    check_quota,
    next_version,
    scope_of,
)


@pytest.mark.parametrize("artifact", ["a.txt", "user:profile.png", "dir/file.pdf", "ünï cødé", "x" * MAX_ARTIFACT_ID_CHARS])
def test_valid_ids(artifact: str) -> None:
    assert artifact_id_violations(artifact) == []


@pytest.mark.parametrize("artifact", [
    "", "..", "a/../b", "./a", "a/.", "user:", "user:..", "/abs", "dir/", "a//b", "a\\b", "tab\there", "nl\n",
    "nul\x00", "del\x7f", "x" * (MAX_ARTIFACT_ID_CHARS + 1),
])
def test_invalid_ids(artifact: str) -> None:
    violations = artifact_id_violations(artifact, "header.artifact")
    assert violations and all(v.field == "header.artifact" for v in violations)


def test_scope_of_user_and_session_ids() -> None:
    assert scope_of("a", "u", "s", "user:x") == ArtifactScope("a", "u", None)
    assert scope_of("a", "u", None, "user:x").parent == "apps/a/users/u"
    assert scope_of("a", "u", "s", "x").parent == "apps/a/users/u/sessions/s"
    with pytest.raises(InvalidArgument) as bad:
        scope_of("a", "u", None, "x")
    assert bad.value.reason == "INVALID_NAME" and bad.value.field_violations[0].field == "parent"
    with pytest.raises(InvalidArgument) as dots:
        scope_of("a", "u", "s", "../x")
    assert dots.value.field_violations[0].field == "artifact"


def test_versions_count_from_zero() -> None:
    assert next_version(None) == 0
    assert next_version(4) == 5


def test_quota() -> None:
    check_quota(90, 10, 100)
    check_quota(10**12, 10, 0)  # unlimited
    check_quota(100, 0, 100)  # nothing new
    with pytest.raises(ResourceExhausted) as over:
        check_quota(90, 11, 100)
    assert over.value.reason == "ARTIFACT_QUOTA_EXCEEDED"


def test_digest_bounds_size_and_checks_utf8() -> None:
    digest = ContentDigest(5, text=False)
    digest.update(b"abc")
    with pytest.raises(ResourceExhausted) as large:
        digest.update(b"def")
    assert large.value.reason == "ARTIFACT_TOO_LARGE"
    assert large.value.metadata == {"max_artifact_bytes": "5", "received_bytes": "6"}
    text = ContentDigest(100, text=True)
    encoded = "é€".encode()
    for byte in encoded:  # split inside characters
        text.update(bytes([byte]))
    assert text.finish() == hashlib.sha256(encoded).hexdigest()
    truncated = ContentDigest(100, text=True)
    truncated.update(encoded[:1])
    with pytest.raises(InvalidArgument):
        truncated.finish()
    with pytest.raises(InvalidArgument):
        ContentDigest(100, text=True).update(b"\xff")


@given(st.lists(st.binary(max_size=50), max_size=20), st.integers(1, 16))
def test_chunker_regroups_exactly(pieces: list[bytes], size: int) -> None:
    chunker = Chunker(size)
    out = [chunk for piece in pieces for chunk in chunker.feed(piece)] + chunker.flush()
    assert b"".join(out) == b"".join(pieces)
    assert all(len(c) == size for c in out[:-1])
    assert all(0 < len(c) <= size for c in out)


@given(st.text(max_size=40))
def test_valid_ids_have_no_dot_segments_or_controls(artifact: str) -> None:
    if not artifact_id_violations(artifact):
        name = artifact.removeprefix("user:")
        assert ".." not in name.split("/") and "." not in name.split("/")
        assert not any(ord(c) < 0x20 for c in artifact)


def test_whole_chunks_pass_through_uncopied() -> None:
    chunker = Chunker(4)
    piece = b"abcd"
    assert chunker.feed(piece)[0] is piece
    assert chunker.feed(b"ef") == []
    assert chunker.feed(b"ghijklmn") == [b"efgh", b"ijkl"]
    assert chunker.flush() == [b"mn"]
