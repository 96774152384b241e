"""``agentctx inspect context-lifecycle APP USER SESSION --model MODEL``:
the content-free lifecycle view of one session (counts, fingerprints, the
latest checkpoint, the cache scope's counts), readable or ``--json``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shlex

from agentctx_cli.connect import DEFAULT_CERTS, DEFAULT_TARGET, add_session_args, message_json, with_client
from agentctx_cli.invocation import agentctx
from agentctx_client import CacheBypassReason, CacheState, CompactionTrigger, ContextLifecycle, session_name


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspect = sub.add_parser("inspect", help="content-free diagnostic views")
    views = inspect.add_subparsers(dest="view", required=True, parser_class=sub._parser_class)
    lifecycle = views.add_parser("context-lifecycle", help="a session's counts, checkpoint and cache scope")
    add_session_args(lifecycle, model_help="model whose cache scope to show")
    lifecycle.set_defaults(func=run_lifecycle)


def run_lifecycle(args: argparse.Namespace) -> int:
    name = session_name(args.app, args.user, args.session)
    view = asyncio.run(with_client(args, lambda client: client.get_context_lifecycle(name, model=args.model)))
    print(message_json(view.proto) if args.json else render(view, args))
    return 0


def _short(fingerprint: str) -> str:
    return fingerprint[:16] + "…" if fingerprint else "-"


def invalidate_command(view: ContextLifecycle, args: argparse.Namespace) -> str:
    confirm = dataclasses.asdict(view.confirmation())
    words = [
        f"{agentctx()} context-cache invalidate", shlex.quote(args.app), shlex.quote(args.user), shlex.quote(args.session),
        "--model", shlex.quote(view.model), "--confirm-json", shlex.quote(json.dumps(confirm, separators=(",", ":"))),
    ]
    if args.target != DEFAULT_TARGET:
        words += ["--target", shlex.quote(args.target)]
    if args.certs != DEFAULT_CERTS:
        words += ["--certs", shlex.quote(str(args.certs))]
    return " ".join(words)


def render(view: ContextLifecycle, args: argparse.Namespace) -> str:
    trigger = CompactionTrigger.Name(view.latest_trigger).removeprefix("COMPACTION_TRIGGER_")
    lines = [
        f"Context lifecycle of {view.session}",
        f"  model                {view.model}",
        f"  events               {view.event_count} stored, {view.visible_event_count} visible "
        f"(~{view.visible_tokens:,} tokens)",
        f"  compactions          {view.compaction_count}, {view.pending_compaction_jobs} background job(s) pending",
    ]
    if view.latest_compaction_event_id:
        lines += [
            f"  latest compaction    {view.latest_compaction_event_id} ({trigger.lower()})",
            f"    checkpoint         {view.latest_checkpoint_id}",
            f"    source             {view.latest_source_fingerprint}",
        ]
    if view.cache_service_reachable:
        lines += [
            f"  cache scope          {view.scope_fingerprint}",
            f"    caches             {view.cache_entry_count} live, {view.cache_inflight_count} being created, "
            f"{view.cache_waiter_count} caller(s) waiting",
        ]
    else:
        lines.append("  cache scope          cache service unreachable: counts unknown")
    if view.latest_cache is not None:
        c = view.latest_cache
        state = CacheState.Name(c.state).removeprefix("CACHE_STATE_").lower()
        if c.state == CacheState.CACHE_STATE_BYPASS:
            state += " (" + CacheBypassReason.Name(c.bypass_reason).removeprefix(
                "CACHE_BYPASS_REASON_").lower().replace("_", " ") + ")"
        lines.append(f"  latest reply cache   {state}, prefix {c.prefix_tokens:,} tokens {_short(c.prefix_fingerprint)}, "
                     f"{c.uses} use(s)")
    if view.cache_service_reachable and view.scope_fingerprint:
        lines += ["", "Drop every cache of this scope (all sessions of this app, user and model share it):",
                  "  " + invalidate_command(view, args)]
    return "\n".join(lines)
