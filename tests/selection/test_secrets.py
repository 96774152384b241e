"""Key-based credential pruning at any depth."""

from __future__ import annotations

import copy

import pytest

from context_service.domain.selection import DEFAULT_SECRET_KEYS, SecretKeys, prune, prune_content
from context_service.domain.selection.secrets import BUILTIN_SECRET_KEYS
from tests.selection.builders import call, response


@pytest.mark.parametrize("key", [*BUILTIN_SECRET_KEYS, "API_KEY", "Api-Key", "X-Api-Key", "SET_COOKIE", "Authorization"])
def test_every_builtin_key_is_dropped_in_any_spelling(key: str) -> None:
    value, count = prune({key: "s3cr3t", "keep": 1}, DEFAULT_SECRET_KEYS)
    assert value == {"keep": 1}
    assert count == 1


def test_keys_are_dropped_at_any_depth_and_inside_lists() -> None:
    data = {
        "a": {"b": [{"password": "p", "x": 1}, [{"refresh_token": {"nested": "v"}}]]},
        "headers": {"Authorization": "Bearer z", "Accept": "json"},
        "client_secret": ["list", "value"],
    }
    original = copy.deepcopy(data)
    value, count = prune(data, DEFAULT_SECRET_KEYS)
    assert value == {"a": {"b": [{"x": 1}, [{}]]}, "headers": {"Accept": "json"}}
    assert count == 4
    assert data == original  # the input is left alone


def test_values_are_not_inspected_only_keys() -> None:
    value, count = prune({"note": "my password is hunter2", "tokens_used": 5}, DEFAULT_SECRET_KEYS)
    assert value == {"note": "my password is hunter2", "tokens_used": 5}
    assert count == 0


def test_subtrees_without_secrets_are_shared_not_copied() -> None:
    inner = {"x": [1, 2]}
    data = {"clean": inner, "token": "t"}
    value, _ = prune(data, DEFAULT_SECRET_KEYS)
    assert value["clean"] is inner
    untouched, count = prune(inner, DEFAULT_SECRET_KEYS)
    assert untouched is inner and count == 0


def test_extra_keys_extend_the_builtin_list_and_change_the_fingerprint() -> None:
    keys = SecretKeys.with_extra(["Session-Id"])
    value, count = prune({"session_id": 1, "SESSION-ID": 2, "token": 3, "ok": 4}, keys)
    assert value == {"ok": 4} and count == 3
    assert keys.fingerprint != DEFAULT_SECRET_KEYS.fingerprint
    assert SecretKeys.with_extra(["session_id"]).fingerprint == keys.fingerprint


def test_state_like_values_are_pruned_the_same_way() -> None:
    state = {"user": {"name": "n", "credentials": {"id_token": "t"}}, "prefs": [{"cookie": "c"}]}
    value, count = prune(state, DEFAULT_SECRET_KEYS)
    assert value == {"user": {"name": "n"}, "prefs": [{}]}
    assert count == 2


def test_contents_are_pruned_in_call_args_and_tool_results_only() -> None:
    content = call(("c1", "login", {"user": "u", "password": "p"}))
    pruned, count = prune_content(content, DEFAULT_SECRET_KEYS)
    assert pruned.parts[0].function_call.args == {"user": "u"} and count == 1
    result = response(("c1", "login", {"session": {"access_token": "a", "ttl": 3}}))
    pruned, count = prune_content(result, DEFAULT_SECRET_KEYS)
    assert pruned.parts[0].function_response.response == {"session": {"ttl": 3}} and count == 1
    clean = call(("c2", "f", {"q": 1}))
    same, count = prune_content(clean, DEFAULT_SECRET_KEYS)
    assert same is clean and count == 0
