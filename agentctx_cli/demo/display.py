"""The demo's screen: an introduction, one row per model call with a
progress bar beneath it (plain ANSI, only on a terminal), and a summary
table. Without a terminal (a pipe, a test) the same rows print plainly."""

from __future__ import annotations

import shutil
import textwrap
from typing import TextIO

from agentctx_cli.demo.pricing import GEMINI, Shape
from agentctx_cli.demo.runner import DemoResult, TurnRecord

_RESET = "\033[0m"
_STYLES = {
    "bold": "\033[1m", "dim": "\033[2m", "green": "\033[32m", "yellow": "\033[33m", "cyan": "\033[36m",
    "magenta": "\033[35m", "red": "\033[31m",
}
_STATE_STYLE = {"created": "yellow", "hit": "green", "grown": "cyan", "bypass": "red", "off": "dim"}
# Every line the demo prints fits 80 columns (79, so that no terminal wraps).
WIDTH = 79
_COLUMNS = f"{'call':>4} {'agent input':<22} {'prompt':>6} {'cached':>6} {'cache':<18} {'compact':<9} {'cost':>8}"
# Bypass reasons as a newcomer reads them (at most 10 characters, to fit).
_REASONS = {"first sighting": "first seen", "below min tokens": "too small", "create failed": "failed",
            "rate limited": "throttled", "deadline exceeded": "too slow", "capacity": "full",
            "cache missing": "cache gone", "invalidated": "dropped", "unavailable": "no service"}
# The same, in a sentence.
_REASON_TEXT = {"first sighting": "a first sighting of the prefix", "below min tokens": "a prefix too small to cache",
                "create failed": "a failed cache create", "rate limited": "a rate-limited create",
                "deadline exceeded": "a create too slow for the call", "capacity": "a full cache registry",
                "cache missing": "a cache gone at the provider", "invalidated": "an invalidated cache",
                "unavailable": "the cache service unreachable"}


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _calls(numbers: list[int]) -> str:
    """``call 3`` or ``calls 3, 9 and 14``."""
    if len(numbers) == 1:
        return f"call {numbers[0]}"
    return "calls " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


def _money(value: float) -> str:
    return f"${value:,.4f}" if value >= 0.01 else f"${value:.6f}"


def _cell_money(value: float) -> str:
    """A call's cost in 8 columns."""
    return f"${value:.5f}" if value < 10 else f"${value:,.0f}"


class Screen:
    def __init__(self, out: TextIO, *, color: bool, progress: bool, total: int, shape: Shape = GEMINI) -> None:
        self.out = out
        self.shape = shape
        self.color = color
        self.progress = progress
        self.total = total
        self._bar_shown = False

    def _c(self, text: str, style: str) -> str:
        return f"{_STYLES[style]}{text}{_RESET}" if self.color else text

    def _write(self, text: str) -> None:
        if self._bar_shown:
            self.out.write("\r\033[K")  # clear the progress bar line
            self._bar_shown = False
        self.out.write(text)
        self.out.flush()

    def intro(self, target: str) -> None:
        self._write("\n".join([
            self._c("agentctx demo", "bold") + f" · a coding agent fixes a bug in {self.total} model calls",
            *textwrap.wrap(
                f"Each call: the agent sends its new input (a user message or a tool result) to the context "
                f"service at {target}, which stores it, builds a bounded, secret-pruned request, leases a "
                "provider prefix cache from the cache service, calls the model (the local simulator, with "
                f"{self.shape.label} cache semantics and prices) and stores the reply.", WIDTH),
            "",
            self._c(_COLUMNS, "bold"),
            "",
        ]))

    def row(self, t: TurnRecord) -> None:
        label = _fit(("user: " if t.input_kind == "user" else "tool ") + t.input_label, 22)
        cache = t.cache_state + (f": {_REASONS.get(t.bypass_reason, t.bypass_reason)}" if t.bypass_reason else "")
        cache_cell = self._c(f"{_fit(cache, 18):<18}", _STATE_STYLE.get(t.cache_state, "dim"))
        compaction = _fit(", ".join(t.compactions) or ("scheduled" if t.background_compaction else ""), 9)
        compaction_cell = self._c(f"{compaction:<9}", "magenta") if compaction else " " * 9
        self._write(
            f"{t.number:>4} {label:<22} {t.prompt_tokens:>6,} {t.cached_tokens:>6,} {cache_cell} "
            f"{compaction_cell} {_cell_money(t.cost.with_cache):>8}\n"
        )
        self._bar(t.number)

    def _bar(self, done: int) -> None:
        if not self.progress:
            return
        width = max(10, min(40, shutil.get_terminal_size((80, 20)).columns - 30))
        filled = round(width * done / self.total)
        bar = "█" * filled + "░" * (width - filled)
        self.out.write(f"  {self._c(bar, 'cyan')} {done}/{self.total} calls")
        self.out.flush()
        self._bar_shown = True

    def summary(self, r: DemoResult, inspect_hint: list[str]) -> None:
        saved = 1 - r.cost / r.uncached_cost if r.uncached_cost else 0.0
        bypass = [t.bypass_reason for t in r.turns if t.cache_state == "bypass"]
        reasons = ", ".join(f"{bypass.count(x)} {_REASONS.get(x, x)}" for x in dict.fromkeys(bypass))
        triggers = r.compactions
        compacted = ", ".join(f"{triggers.count(x)} {x}" if triggers.count(x) > 1 else x for x in dict.fromkeys(triggers))
        lines = [
            "",
            "─" * WIDTH,
            self._c("Summary", "bold") + f": {_plural(len(r.turns), 'model call')} in {r.elapsed_s:.1f} s, "
            f"{_plural(len(triggers), 'compaction')}{f' ({compacted})' if compacted else ''}",
            f"{'':<18}{'prompt tokens':>14}{'from cache':>12}{'share':>8}{'model bill':>13}",
            f"{'with agentctx':<18}{r.prompt_tokens:>14,}{r.cached_tokens:>12,}{r.cached_share:>8.1%}"
            f"{_money(r.cost):>13}",
            f"{'without a cache':<18}{r.prompt_tokens:>14,}{0:>12,}{0:>8.1%}{_money(r.uncached_cost):>13}",
            "cache: " + self._c(f"{r.count('created')} created", "yellow") + " · "
            + self._c(f"{r.count('hit')} hits", "green") + " · " + self._c(f"{r.count('grown')} grown", "cyan")
            + " · " + self._c(f"{r.count('bypass')} bypassed", "red") + (f" ({reasons})" if reasons else ""),
            self._c(f"The cache cut the model bill by {saved:.0%}." if saved >= 0 else
                    f"The cache cost {-saved:.0%} more in this short run: its writes pay back later.", "bold"),
            *textwrap.wrap("Cache writes and storage are included; output tokens cost the same either way. "
                           "Credentials pruned from each request before the model saw it: up to "
                           f"{max((t.secrets_pruned for t in r.turns), default=0)}.", WIDTH),
            "",
            *textwrap.wrap("What happened: " + " ".join(story(r)), WIDTH, break_on_hyphens=False),
            "",
            *textwrap.wrap("See the session's content-free lifecycle (counts, fingerprints, checkpoint, "
                           "cache scope):", WIDTH),
            *(f"  {line}" for line in inspect_hint),
        ]
        self._write("\n".join(lines) + "\n")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def story(r: DemoResult) -> list[str]:
    """What the cache and compaction did in this run, in sentences, told
    from its calls (a replay against the same pair starts warm)."""
    turns = r.turns
    if not turns:
        return ["No model call was made."]
    first, out = turns[0], []
    if first.cache_state == "hit":
        out.append("call 1 hit a cache at once: an earlier run had cached this prefix (a cache scope is an app, "
                   "a user and a model, shared by their sessions).")
    elif first.cache_state == "bypass" and first.bypass_reason == "first sighting":
        out.append("call 1 only recorded its prefix (a first sighting).")
    created = [t.number for t in turns if t.cache_state == "created"]
    if created:
        out.append(f"A cache was created at {_calls(created)}.")
    hits, grown = r.count("hit"), [t.number for t in turns if t.cache_state == "grown"]
    if hits or grown:
        tail = (f"; it grew at {_calls(grown)}, when the uncached part of the prompt had become large" if grown else "")
        out.append(f"{_plural(hits, 'call')} then read their prefix from a cache{tail}.")
    for i, t in enumerate(turns):
        if not t.compactions:
            continue
        after = turns[i + 1] if i + 1 < len(turns) else None
        text = (f"At call {t.number} the history ({t.prompt_tokens:,} prompt tokens) passed the session's context "
                "budget, and compaction summarized the oldest turns (their events stay stored)")
        if after is not None:
            text += f"; call {after.number}'s prompt was {after.prompt_tokens:,} tokens"
            if after.cache_state in ("created", "bypass"):
                text += ", and caching started over on that new, shorter prefix"
        out.append(text + ".")
    uncached = [t for t in turns if (t.cache_state == "bypass" and t.bypass_reason != "first sighting") or
                t.cache_state == "off"]
    if uncached:
        why = [_REASON_TEXT.get(t.bypass_reason, t.bypass_reason) if t.cache_state == "bypass" else "caching off"
               for t in uncached]
        out.append(f"{_plural(len(uncached), 'call')} went without a cache: "
                   + ", ".join(f"{why.count(x)} for {x}" for x in dict.fromkeys(why)) + ".")
    out.append(f"Nothing left the machine: the model, {r.shape.model}, is the local simulator "
               f"({r.shape.label}).")
    out[0] = out[0][0].upper() + out[0][1:]
    return out
