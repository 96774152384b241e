"""The demo's screen: an introduction, one row per model call with a
progress bar beneath it (plain ANSI, only on a terminal), and a summary
table. Without a terminal (a pipe, a test) the same rows print plainly."""

from __future__ import annotations

import shutil
from typing import TextIO

from agentctx_common.demo.runner import DemoResult, TurnRecord

_RESET = "\033[0m"
_STYLES = {
    "bold": "\033[1m", "dim": "\033[2m", "green": "\033[32m", "yellow": "\033[33m", "cyan": "\033[36m",
    "magenta": "\033[35m", "red": "\033[31m",
}
_STATE_STYLE = {"created": "yellow", "hit": "green", "grown": "cyan", "bypass": "red", "off": "dim"}
_COLUMNS = f"{'call':>4}  {'agent input':<34} {'prompt':>7} {'cached':>7}  {'cache':<22} {'compaction':<11} {'cost':>9}"
# Bypass reasons as a newcomer reads them.
_REASONS = {"first sighting": "first sighting", "below min tokens": "prefix too small", "create failed": "create failed",
            "rate limited": "rate limited", "deadline exceeded": "too slow", "capacity": "registry full",
            "cache missing": "cache gone", "invalidated": "invalidated", "unavailable": "cache service down"}


def _money(value: float) -> str:
    return f"${value:,.4f}" if value >= 0.01 else f"${value:.6f}"


class Screen:
    def __init__(self, out: TextIO, *, color: bool, progress: bool, total: int) -> None:
        self.out = out
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
            self._c("agentctx demo", "bold") + f" · a coding agent fixes a bug in {self.total} model calls "
            f"(context service at {target})",
            "Each call: the agent sends its new input (a user message or a tool result) to the context service,",
            "which stores it, builds a bounded, secret-pruned request, leases a provider prefix cache from the",
            "cache service, calls the model (the local simulator, Gemini-like prices) and stores the reply.",
            "",
            self._c(_COLUMNS, "bold"),
            "",
        ]))

    def row(self, t: TurnRecord) -> None:
        label = ("user: " if t.input_kind == "user" else "tool ") + t.input_label
        width = 34
        label = label if len(label) <= width else label[: width - 1] + "…"
        cache = t.cache_state + (f": {_REASONS.get(t.bypass_reason, t.bypass_reason)}" if t.bypass_reason else "")
        cache_cell = self._c(f"{cache:<22}"[:22], _STATE_STYLE.get(t.cache_state, "dim"))
        compaction = ", ".join(t.compactions) or ("scheduled" if t.background_compaction else "")
        compaction_cell = self._c(f"{compaction:<11}", "magenta") if compaction else " " * 11
        self._write(
            f"{t.number:>4}  {label:<34} {t.prompt_tokens:>7,} {t.cached_tokens:>7,}  {cache_cell} "
            f"{compaction_cell} {_money(t.cost.with_cache):>9}\n"
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

    def summary(self, r: DemoResult, inspect_hint: str) -> None:
        saved = 1 - r.cost / r.uncached_cost if r.uncached_cost else 0.0
        bypass = [t.bypass_reason for t in r.turns if t.cache_state == "bypass"]
        reasons = ", ".join(f"{bypass.count(x)} {_REASONS.get(x, x)}" for x in dict.fromkeys(bypass))
        compactions = r.compactions
        rule = "─" * 78
        lines = [
            "",
            rule,
            self._c("Summary", "bold") + f": {len(r.turns)} model calls in {r.elapsed_s:.1f} s, "
            f"{len(compactions)} compaction(s){' (' + ', '.join(compactions) + ')' if compactions else ''}",
            f"{'':<18}{'prompt tokens':>14}{'from cache':>12}{'share':>8}{'model bill':>13}",
            f"{'with agentctx':<18}{r.prompt_tokens:>14,}{r.cached_tokens:>12,}{r.cached_share:>8.1%}"
            f"{_money(r.cost):>13}",
            f"{'without a cache':<18}{r.prompt_tokens:>14,}{0:>12,}{0:>8.1%}{_money(r.uncached_cost):>13}",
            "cache: " + self._c(f"{r.count('created')} created", "yellow") + " · "
            + self._c(f"{r.count('hit')} hits", "green") + " · " + self._c(f"{r.count('grown')} grown", "cyan")
            + " · " + self._c(f"{r.count('bypass')} bypassed", "red") + (f" ({reasons})" if reasons else ""),
            (self._c(f"The cache cut the model bill by {saved:.0%}", "bold") if saved >= 0 else
             self._c(f"The cache cost {-saved:.0%} more in this short run", "bold") + " (its writes pay back later)")
            + " (cache writes and storage included; output tokens cost the same either way).",
            f"Credentials pruned from each request before the model saw it: up to "
            f"{max((t.secrets_pruned for t in r.turns), default=0)}.",
            "",
            *_story(bool(compactions)),
            "",
            "See the session's content-free lifecycle (counts, fingerprints, checkpoint, cache scope):",
            f"  {inspect_hint}",
        ]
        self._write("\n".join(lines) + "\n")


def _story(compacted: bool) -> list[str]:
    lines = [
        "What happened: the first call only records its prefix (bypass, first sighting); the next one agrees",
        "with it, so a cache is created; later calls hit it, and it grows when the uncached part gets large.",
    ]
    if compacted:
        lines += [
            "When the history passed the session's context budget, compaction summarized the oldest turns",
            "(the events stay stored) and caching started over on the new, shorter prefix.",
        ]
    return [*lines, "Nothing here left the machine: the model is the local simulator."]
