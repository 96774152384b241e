"""Credential keys match in every common case style (hardening: camelCase
keys such as ``accessToken`` used to reach the provider)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from context_service.domain.selection import DEFAULT_SECRET_KEYS, SecretKeys, prune, prune_content
from context_service.domain.selection.secrets import BUILTIN_SECRET_KEYS, normalize_key
from tests.selection.builders import call


def _words(key: str) -> list[str]:
    return [w for w in key.replace("-", "_").split("_") if w]


STYLES = {
    "snake": lambda ws: "_".join(ws),
    "kebab": lambda ws: "-".join(ws),
    "camel": lambda ws: ws[0] + "".join(w.capitalize() for w in ws[1:]),
    "pascal": lambda ws: "".join(w.capitalize() for w in ws),
    "screaming": lambda ws: "_".join(w.upper() for w in ws),
    "screaming_kebab": lambda ws: "-".join(w.upper() for w in ws),
    "dotted": lambda ws: ".".join(ws),
    "train": lambda ws: "-".join(w.capitalize() for w in ws),
}


def test_the_reported_camel_case_keys_are_dropped() -> None:
    args = {"accessToken": "a", "clientSecret": "b", "privateKey": "c", "refreshToken": "d", "query": "q"}
    pruned, count = prune_content(call(("c1", "login", args)), DEFAULT_SECRET_KEYS)
    assert pruned.parts[0].function_call.args == {"query": "q"}
    assert count == 4


@given(st.sampled_from(BUILTIN_SECRET_KEYS), st.sampled_from(sorted(STYLES)))
def test_every_builtin_key_matches_in_every_case_style(key: str, style: str) -> None:
    spelled = STYLES[style](_words(key))
    value, count = prune({"outer": {spelled: "s3cr3t", "keep": 1}}, DEFAULT_SECRET_KEYS)
    assert value == {"outer": {"keep": 1}}, spelled
    assert count == 1


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@given(st.lists(_word, min_size=1, max_size=4), st.sampled_from(sorted(STYLES)), st.sampled_from(sorted(STYLES)))
def test_extra_keys_are_normalized_like_payload_keys(words: list[str], declared: str, sent: str) -> None:
    keys = SecretKeys.with_extra([STYLES[declared](words)])
    value, count = prune({STYLES[sent](words): 1, "0": 2}, keys)
    assert value == {"0": 2} and count == 1
    # The set is the same whichever style declared it.
    assert keys.fingerprint == SecretKeys.with_extra(["_".join(words)]).fingerprint


def test_unrelated_keys_that_only_contain_a_secret_word_are_kept() -> None:
    data = {"tokens_used": 1, "tokenCount": 2, "password_hint_shown": True, "secretary": "s"}
    assert prune(data, DEFAULT_SECRET_KEYS) == (data, 0)


def test_normalize_key_is_stable_and_memoized_per_key_string() -> None:
    assert normalize_key("X-Api-Key") == normalize_key("xApiKey") == normalize_key("X_API_KEY")
    assert normalize_key(" Access.Token ") == normalize_key("access_token")
    assert SecretKeys.with_extra(["_", "-."]).keys == DEFAULT_SECRET_KEYS.keys
