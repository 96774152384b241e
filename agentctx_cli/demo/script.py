"""The demo's scripted agent: a coding assistant with a long, stable system
instruction and four tools, a user who asks for one thing after another,
and deterministic tool results.

The local simulator calls a declared tool when the user's text names it,
and answers in text once it sees the tool's result, so each task below that
names a tool takes two model calls (the call, then the answer) and a task
that names none takes one. Tool results are sizeable, as real ones are, and
one of them carries a credential that the context service prunes before
the model sees it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from agentctx_client import Content, Event, FunctionCall, FunctionDeclaration

MODEL = "local-sim-1"

_RULES = [
    "Read the code before you change it; never guess an API you have not seen in this repository.",
    "Prefer the smallest change that fixes the problem, and keep the public interface stable.",
    "Run the tests that cover what you changed, and say which ones you ran and what they showed.",
    "When a test fails, read its output in full before you try a fix, and fix the cause, not the symptom.",
    "Never print, log or commit credentials, tokens or customer data, even when a tool shows them to you.",
    "Explain each change in one or two sentences a reviewer can check against the diff.",
    "Keep functions short and names honest; a comment says why, not what.",
    "If the task is ambiguous, state the assumption you made and carry on.",
]
SYSTEM_TEXT = (
    "You are Patch, a careful coding agent working in the payments service repository. "
    "You have four tools: search_code, read_file, run_tests and apply_patch. "
    + " ".join(f"Rule {i + 1}: {rule}" for i, rule in enumerate(_RULES * 3))
    + " The repository layout: services/payments (the API), services/ledger (double-entry bookkeeping), "
    "libs/retry (backoff and jitter), libs/http (the client every service uses), and tests/ beside each. "
    "House style: type hints everywhere, no mutable default arguments, structured logs with counts only. "
    "Review checklist: every changed function has a test; error paths return typed errors, never bare "
    "exceptions; retries are bounded in attempts and in time, with jitter; timeouts come from the caller's "
    "deadline; money is integer minor units, never floats; a migration ships with its rollback; feature "
    "flags default to off; and nothing in a log line, a span or an error message names a customer, a card "
    "number, an account balance or a credential. When you are done, reply with what changed, why, and how "
    "it was verified, in that order, in plain sentences."
)

TOOL_SPECS = {
    "search_code": "Searches the repository for a symbol or phrase; returns matching files and lines.",
    "read_file": "Returns the contents of one file of the repository.",
    "run_tests": "Runs a test selection and returns the summary and any failures.",
    "apply_patch": "Applies a unified diff to the working tree and returns the files changed.",
}

# (what the user asks, which tool the simulator will call or None)
TASKS: list[str] = [
    "Checkout requests time out under load. Use search_code to find where the payment client sets its timeout.",
    "Now use read_file on libs/http/client.py so we can see the retry loop.",
    "What do you think is wrong with that retry loop?",
    "Use run_tests on libs/http to see the current state before we touch anything.",
    "Write the fix: use apply_patch to cap the backoff and add jitter.",
    "Use run_tests on libs/http again to check the fix.",
    "Good. Does the ledger service call the same client? Use search_code for HttpClient in services/ledger.",
    "Use read_file on services/ledger/settlement.py, where it calls the client.",
    "Is the settlement call idempotent if we retry it?",
    "Use apply_patch to add an idempotency key to the settlement request.",
    "Use run_tests on services/ledger to make sure nothing broke.",
    "Use search_code for other callers that pass timeout=None.",
    "Use read_file on services/payments/refunds.py, the last caller left.",
    "Use apply_patch to give refunds the same default timeout.",
    "Run the whole suite now: use run_tests on everything.",
    "Summarize what we changed and why, for the pull request description.",
    "Use search_code to find the changelog so we can add an entry.",
    "Thanks, that is all for today.",
]


def system_instruction() -> Content:
    return Content.user(SYSTEM_TEXT)


def tools() -> list[FunctionDeclaration]:
    params = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    return [FunctionDeclaration(name, text, params) for name, text in TOOL_SPECS.items()]


def _lines(seed: str, count: int, width: int) -> list[str]:
    """Deterministic, code-like filler: the same run gives the same bytes."""
    out = []
    digest = hashlib.sha256(seed.encode()).hexdigest()
    for i in range(count):
        h = hashlib.sha256(f"{digest}{i}".encode()).hexdigest()
        out.append(f"{i + 1:4d}  def step_{h[:6]}(ctx, attempt: int) -> Result:  # {h[6:6 + width]}")
    return out


def tool_output(name: str, query: str, step: int) -> dict[str, Any]:
    """What the tool returns: a JSON object of a few kilobytes."""
    seed = f"{name}:{query}:{step}"
    if name == "search_code":
        return {"matches": [{"file": f"libs/http/client_{i}.py", "line": 40 + i, "text": line}
                            for i, line in enumerate(_lines(seed, 18, 24))]}
    if name == "read_file":
        return {"path": query[:60], "content": "\n".join(_lines(seed, 40, 28)),
                # A credential in a config snippet: pruned before any model call.
                "config": {"endpoint": "https://payments.internal", "api_key": f"sk-demo-{seed_hash(seed)}"}}
    if name == "run_tests":
        failures = [] if step % 3 else [{"test": "test_retry_backoff", "output": "\n".join(_lines(seed, 10, 20))}]
        return {"passed": 212 + step, "failed": len(failures), "failures": failures,
                "log": "\n".join(_lines(seed, 12, 16))}
    return {"applied": True, "files": ["libs/http/client.py"], "diff": "\n".join(_lines(seed, 16, 20))}


def seed_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def user_event(event_id: str, text: str) -> Event:
    """The user's message, with a stable id (the demo's own idempotency key)."""
    return Event(Content.user(text), id=event_id)


def tool_results_event(event_id: str, calls: Sequence[FunctionCall], step: int) -> Event:
    """Every call's result, in one user event."""
    results = [c.result(tool_output(c.name, str(c.args["query"]) if "query" in c.args else "", step)) for c in calls]
    return Event(Content.user(*results), id=event_id)
