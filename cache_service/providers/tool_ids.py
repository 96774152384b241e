"""Tool-call ids for wire formats that require them (Anthropic, OpenAI):
the canonical shape allows a functionCall and its functionResponse without
ids, so each call without one gets a made-up id and each response without
one takes the earliest unanswered call of its function."""

from __future__ import annotations


class ToolIds:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._n = 0
        self._open: dict[str, list[str]] = {}

    def call(self, name: str, given: str) -> str:
        if given:
            return given
        self._n += 1
        made = f"{self._prefix}{self._n}"
        self._open.setdefault(name, []).append(made)
        return made

    def response(self, name: str, given: str) -> str:
        if given:
            return given
        waiting = self._open.get(name)
        return waiting.pop(0) if waiting else f"{self._prefix}unpaired_{name}"
