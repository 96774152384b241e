"""The diagnostics CLI against the real pair in this process: readable and
--json output, the printed invalidate command, and one-line errors."""

from __future__ import annotations

import asyncio
import json
import pathlib
import shlex
import subprocess

import pytest

from agentctx_cli.main import main
from tests.diagnostics import helpers as h


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(_exit_code, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _conn(pair, certs: pathlib.Path) -> list[str]:  # type: ignore[no-untyped-def]
    return ["--target", f"127.0.0.1:{pair.context_port}", "--certs", str(certs), "--timeout", "10"]


async def test_readable_lifecycle_prints_counts_and_a_working_invalidate_command(pair, certs_dir, capsys) -> None:
    name = await h.create_session(pair.agent, "cli", turns=8)
    await h.compact(pair.agent, name)
    await h.plant_cache(pair.cache_stub)
    code, out, err = await _cli(capsys, "inspect", "context-lifecycle", h.APP, h.USER, "cli", "--model", h.MODEL,
                                *_conn(pair, certs_dir))
    assert (code, err) == (0, "")
    assert f"Context lifecycle of {name}" in out
    assert "1 live, 0 being created, 0 caller(s) waiting" in out
    assert "(manual)" in out and "24 stored" not in out  # 24 events + 1 compaction entry
    assert "25 stored" in out
    command = next(line.strip() for line in out.splitlines() if " context-cache invalidate " in line)
    program, *argv = shlex.split(command)
    ran = await asyncio.to_thread(subprocess.run, [program, "--help"], capture_output=True)
    assert ran.returncode == 0  # the agentctx that runs it
    assert argv[-4:] == ["--target", f"127.0.0.1:{pair.context_port}", "--certs", str(certs_dir)]
    code, out, err = await _cli(capsys, *argv, "--timeout", "10")
    assert (code, err) == (0, "")
    assert out.startswith("Invalidated cache scope ") and "1 cache(s) deleted" in out
    for text in (h.SECRET, h.CONTENT):
        assert text not in out


async def test_json_forms_are_the_messages(pair, certs_dir, capsys) -> None:
    await h.create_session(pair.agent, "cli-json", turns=2)
    code, out, _ = await _cli(capsys, "inspect", "context-lifecycle", h.APP, h.USER, "cli-json", "--json",
                              *_conn(pair, certs_dir))
    assert code == 0
    view = json.loads(out)
    assert view["session"] == h.session_name("cli-json") and view["event_count"] == "6"
    assert view["cache_entry_count"] == "0" and view["cache_service_reachable"] is True
    confirm = {"app": h.APP, "user": h.USER, "session": "cli-json", "model": view["model"],
               "scope_fingerprint": view["scope_fingerprint"]}
    code, out, _ = await _cli(capsys, "context-cache", "invalidate", h.APP, h.USER, "cli-json", "--model", h.MODEL,
                              "--confirm-json", json.dumps(confirm), "--json", *_conn(pair, certs_dir))
    assert code == 0
    assert json.loads(out) == {"entries_removed": "0", "inflight_cancelled": "0",
                               "scope_fingerprint": view["scope_fingerprint"]}


async def test_a_wrong_confirmation_is_one_line_naming_the_field(pair, certs_dir, capsys) -> None:
    await h.create_session(pair.agent, "cli-wrong", turns=1)
    await h.plant_cache(pair.cache_stub)
    confirm = json.dumps({"app": h.APP, "user": h.USER, "session": "cli-wrong", "model": h.MODEL,
                          "scope_fingerprint": "0" * 64})
    code, out, err = await _cli(capsys, "context-cache", "invalidate", h.APP, h.USER, "cli-wrong", "--model", h.MODEL,
                                "--confirm-json", confirm, *_conn(pair, certs_dir))
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith("agentctx: FAILED_PRECONDITION: ")
    assert "scope_fingerprint" in err and "[INVALIDATION_CONFIRMATION_MISMATCH]" in err
    code, out, _ = await _cli(capsys, "inspect", "context-lifecycle", h.APP, h.USER, "cli-wrong", "--json",
                              *_conn(pair, certs_dir))
    assert json.loads(out)["cache_entry_count"] == "1"


@pytest.mark.parametrize("confirm, message", [
    ("{not json", "not a valid confirmation"),
    ('{"app": "a", "colour": "red"}', "colour"),
    ('{"app": 5}', "not a valid confirmation"),
])
async def test_a_malformed_confirmation_is_refused_before_any_call(capsys, confirm: str, message: str) -> None:
    code, out, err = await _cli(capsys, "context-cache", "invalidate", "a", "u", "s", "--confirm-json", confirm,
                                "--target", "127.0.0.1:1")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err


async def test_errors_are_one_line(pair, certs_dir, capsys, tmp_path) -> None:
    code, _, err = await _cli(capsys, "inspect", "context-lifecycle", h.APP, h.USER, "missing", *_conn(pair, certs_dir))
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("agentctx: NOT_FOUND: ") and "[SESSION_NOT_FOUND]" in err
    code, _, err = await _cli(capsys, "inspect", "context-lifecycle", h.APP, h.USER, "s", "--certs", str(certs_dir),
                              "--target", "127.0.0.1:1", "--timeout", "3")
    assert code == 1 and err.count("\n") == 1 and "cannot reach the context service at 127.0.0.1:1" in err
    code, _, err = await _cli(capsys, "inspect", "context-lifecycle", h.APP, h.USER, "s", "--certs", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "not found" in err
    code, _, err = await _cli(capsys, "inspect", "context-lifecycle", h.APP, h.USER)
    assert code == 2 and err.count("\n") == 1
