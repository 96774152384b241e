"""The built-in extractive compactor: deterministic, no model.

It keeps what a summary must not lose (pi's structured sections): the
user's goals and constraints, decisions, tool names and outcomes, files
read and modified, and identifiers (ticket ids, UUIDs, hex ids, code
identifiers, URLs). Text is quoted from the conversation, so its language
is kept. A previous summary in this format is folded in section by
section; one in any other format keeps its facts and its lines.

Feeding is incremental (``add``) so the caller can yield between events;
``render`` trims the least important items first to fit the byte target,
and never exceeds the hard limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from context_service.domain.compaction_rules.history import is_user_turn_start
from context_service.domain.compaction_rules.summary_text import escape_controls
from context_service.domain.model import Event, FunctionResponse

HEADER = "# Conversation summary (extractive)"

_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")
_PATH = re.compile(r"(?<![\w/.:-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]")
_FILE = re.compile(
    r"(?<![\w/.-])[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|m|sh|bash|zsh|"
    r"sql|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|lock|proto|html|css|scss|xml|csv|ipynb|tf|dockerfile)\b",
    re.IGNORECASE,
)
_TICKET = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,7}\b")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b")
_NUMBER_ID = re.compile(r"(?<![\d.,])\d{6,}(?![\d.,]?\d)")  # order numbers, all-digit hashes
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_CAMEL = re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b|\b(?:[A-Z][a-z0-9]+){2,}\b")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_DECISION = re.compile(
    r"\b(?:decid\w*|decision|agreed|we(?:'ll| will| should)|let's|going with|go with|chose|choose|opt(?:ed)? for|"
    r"switch(?:ed)? to|instead of|settled on|plan is)\b",
    re.IGNORECASE,
)
_CONSTRAINT = re.compile(
    r"\b(?:must|never|always|don't|do not|should not|shouldn't|only|required?|without|avoid|keep)\b", re.IGNORECASE
)
_NEXT = re.compile(r"\b(?:next|then|todo|remaining|still need|need to|will|afterwards|after that)\b", re.IGNORECASE)
_READ_TOOL = re.compile(r"read|get|view|cat|open|list|ls|search|grep|find|fetch|show|load|inspect|query", re.IGNORECASE)
_WRITE_TOOL = re.compile(
    r"write|edit|create|update|patch|delete|remove|move|rename|apply|save|replace|insert|append|mkdir|commit",
    re.IGNORECASE,
)
_PATH_KEYS = frozenset({"path", "file", "filename", "file_path", "filepath", "paths", "files", "target", "source"})
_FAILURE_KEYS = ("error", "errors", "exception", "stderr")

ITEM_CHARS = 240  # one quoted item
OUTCOME_CHARS = 120


@dataclass
class _Section:
    title: str
    priority: int  # higher survives trimming longer
    inline: bool = False  # facts: rendered comma-separated
    keep_newest: bool = False  # trimming drops the oldest items
    items: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def add(self, item: str) -> None:
        item = item.strip()
        if item and item not in self._seen:
            self._seen.add(item)
            self.items.append(item)


_TITLES = (
    # title, priority, inline, keep_newest
    ("Goal", 5, False, False),
    ("Constraints and preferences", 4, False, False),
    ("Key decisions", 6, False, False),
    ("Progress", 1, False, True),
    ("Next steps", 2, False, True),
    ("Critical context", 7, True, False),
    ("Files read", 7, True, False),
    ("Files modified", 8, True, False),
    ("Tools used", 7, True, False),
    ("Earlier summary", 3, False, True),
)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _strings(value: Any) -> Iterator[tuple[str, str]]:
    """(key, string) leaves of a JSON value."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, str):
            yield key, v
        elif isinstance(v, dict):
            stack.extend((str(k), item) for k, item in reversed(list(v.items())))
        elif isinstance(v, (list, tuple)):
            stack.extend((key, item) for item in reversed(list(v)))


def facts(text: str) -> tuple[list[str], list[str]]:
    """(identifiers, paths) mentioned in ``text``, in order of appearance."""
    idents: list[str] = []
    paths: list[str] = []
    urls = _URL.findall(text)
    idents.extend(u.rstrip(".,;:") for u in urls)
    rest = _URL.sub(" ", text)
    for m in _BACKTICK.finditer(rest):
        inner = m.group(1).strip()
        (paths if ("/" in inner or _FILE.fullmatch(inner)) and " " not in inner else idents).append(inner)
    for m in _PATH.finditer(rest):
        p = m.group(0)
        if _looks_like_path(p):
            paths.append(p)
    paths.extend(_FILE.findall(rest))
    uuids = _UUID.findall(rest)
    idents.extend(uuids)
    if uuids:
        rest = _UUID.sub(" ", rest)  # or their first group reads as a hex id
    for pattern in (_TICKET, _HEX, _NUMBER_ID, _SNAKE, _CAMEL):
        idents.extend(pattern.findall(rest))
    return idents, paths


def _looks_like_path(p: str) -> bool:
    # "and/or", "client/server" are prose; "src/app", "/etc/x", "a/b/c", "x.py" are paths.
    if p.startswith("//") or not any(c.isalpha() for c in p):
        return False
    last = p.rsplit("/", 1)[-1]
    return p.startswith(("/", "~", "./", "../")) or p.count("/") >= 2 or "." in last.strip(".")


def _sentences(text: str) -> Iterable[str]:
    for s in _SENTENCE.split(text):
        s = s.strip()
        if s:
            yield s


def _failed(fr: FunctionResponse) -> bool:
    r = fr.response
    if any(r.get(k) for k in _FAILURE_KEYS):
        return True
    status = str(r.get("status", "")).lower()
    return status in ("error", "failed", "failure") or r.get("ok") is False or r.get("success") is False


def _outcome(fr: FunctionResponse) -> str:
    r = fr.response
    for key in ("error", "message", "status", "result", "output", "summary"):
        v = r.get(key)
        if isinstance(v, (str, int, float, bool)) and str(v).strip():
            return _clip(f"{key}: {v}", OUTCOME_CHARS)
    return ""


class Extractor:
    def __init__(self, previous_summary: str = "") -> None:
        self._sections = {t: _Section(t, p, inline, newest) for t, p, inline, newest in _TITLES}
        self._tool_counts: dict[str, list[int]] = {}  # name -> [calls, failures]
        self._call_names: dict[str, tuple[str, str]] = {}  # call id -> (name, brief args)
        if previous_summary:
            self._fold(previous_summary)

    def _s(self, title: str) -> _Section:
        return self._sections[title]

    # --- folding ---------------------------------------------------------

    def _fold(self, previous: str) -> None:
        current: _Section | None = None
        ours = previous.lstrip().startswith(HEADER)
        for line in previous.splitlines():
            stripped = line.strip()
            if ours and stripped.startswith("## "):
                current = self._sections.get(stripped[3:].strip())
                continue
            if not stripped or stripped == HEADER:
                continue
            if ours and current is not None and stripped.startswith("- "):
                body = stripped[2:]
                if current.title == "Tools used":
                    self._fold_tools(body)
                elif current.inline:
                    for item in body.split(", "):
                        current.add(item)
                else:
                    current.add(body)
                continue
            # Another compactor's summary: keep its lines and its facts.
            self._s("Earlier summary").add(_clip(stripped.lstrip("-*# "), ITEM_CHARS))
            self._facts(stripped)

    def _fold_tools(self, body: str) -> None:
        for item in body.split(", "):
            m = re.fullmatch(r"(.+?) ×(\d+)(?: \((\d+) failed\))?", item.strip())
            if m:
                counts = self._tool_counts.setdefault(m.group(1), [0, 0])
                counts[0] += int(m.group(2))
                counts[1] += int(m.group(3) or 0)

    # --- feeding ---------------------------------------------------------

    def _facts(self, text: str) -> None:
        idents, paths = facts(text)
        for i in idents:
            self._s("Critical context").add(i)
        for p in paths:
            self._s("Files read").add(p)

    def add(self, event: Event) -> None:
        content = event.content
        if content is None or event.partial:
            return
        user_input = is_user_turn_start(event)
        texts = [p.text for p in content.parts if p.text and not p.thought]
        for text in texts:
            self._facts(text)
            for i, sentence in enumerate(_sentences(text)):
                if user_input and i == 0:
                    self._s("Goal").add(_clip(sentence, ITEM_CHARS))
                if _DECISION.search(sentence):
                    self._s("Key decisions").add(_clip(sentence, ITEM_CHARS))
                elif user_input and _CONSTRAINT.search(sentence):
                    self._s("Constraints and preferences").add(_clip(sentence, ITEM_CHARS))
                elif not user_input and content.role == "model" and _NEXT.search(sentence):
                    self._s("Next steps").add(_clip(sentence, ITEM_CHARS))
        for fc in content.function_calls:
            self._tool_counts.setdefault(fc.name, [0, 0])[0] += 1
            paths = self._tool_paths(fc.name, fc.args)
            brief = ", ".join(paths[:3])
            self._call_names[fc.id or fc.name] = (fc.name, brief)
            for _key, s in _strings(fc.args):
                self._facts(s)
        for fr in content.function_responses:
            name, brief = self._call_names.pop(fr.id or fr.name, (fr.name, ""))
            failed = _failed(fr)
            if failed:
                self._tool_counts.setdefault(name, [0, 0])[1] += 1
            outcome = _outcome(fr)
            label = f"{name}({brief})" if brief else name
            verdict = "failed" if failed else "ok"
            self._s("Progress").add(f"{label} → {verdict}" + (f" ({outcome})" if outcome else ""))
            for _key, s in _strings(fr.response):
                self._facts(s)

    def _tool_paths(self, name: str, args: dict[str, Any]) -> list[str]:
        writes = bool(_WRITE_TOOL.search(name))
        reads = not writes and bool(_READ_TOOL.search(name))
        found: list[str] = []
        for key, s in _strings(args):
            _, paths = facts(s)
            if key.lower() in _PATH_KEYS and s.strip() and " " not in s.strip():
                paths = [s.strip(), *paths]
            for p in paths:
                if p in found:
                    continue
                found.append(p)
                if writes:
                    self._s("Files modified").add(p)
                elif reads or p not in self._s("Files modified")._seen:
                    self._s("Files read").add(p)
        return found

    # --- rendering -------------------------------------------------------

    def _finish(self) -> None:
        tools = self._s("Tools used")
        tools.items.clear()
        tools._seen.clear()
        for name, (calls, failures) in self._tool_counts.items():
            tools.add(f"{name} ×{calls}" + (f" ({failures} failed)" if failures else ""))
        for name, brief in self._call_names.values():
            self._s("Progress").add(f"{name}({brief}) → no result recorded" if brief else f"{name} → no result recorded")
        self._call_names = {}
        # A path written anywhere is "modified", not also "read".
        modified = self._s("Files modified")._seen
        read = self._s("Files read")
        read.items = [p for p in read.items if p not in modified]

    def render(self, target_bytes: int, max_bytes: int) -> str:
        self._finish()
        sections = [s for s in self._sections.values() if s.items]
        limit = min(target_bytes, max_bytes)

        def text() -> str:
            return _render(sections)

        out = text()
        while len(out.encode()) > limit:
            victim = min(
                (s for s in sections if s.items),
                key=lambda s: (s.priority, -len(s.items)),
                default=None,
            )
            if victim is None:
                break
            # Drop a share at a time: linear passes over a long summary.
            drop = max(1, len(victim.items) // 8)
            if victim.keep_newest or victim.inline:
                del victim.items[:drop]
            else:
                del victim.items[len(victim.items) - drop :]
            if not victim.items:
                sections.remove(victim)
            out = text()
        encoded = out.encode()
        if len(encoded) > max_bytes:  # a single oversized item; cut on a char boundary
            out = encoded[:max_bytes].decode("utf-8", errors="ignore")
        return out


def _render(sections: list[_Section]) -> str:
    """Escaped here, so the byte bounds hold for the text as stored."""
    lines = [HEADER]
    for s in sections:
        lines.append(f"## {s.title}")
        if s.inline:
            for i in range(0, len(s.items), 12):
                lines.append("- " + ", ".join(s.items[i : i + 12]))
        else:
            lines.extend(f"- {item}" for item in s.items)
    return escape_controls("\n".join(lines))


def summarize(events: Iterable[Event], previous_summary: str, target_bytes: int, max_bytes: int) -> str:
    """One-shot form of ``Extractor`` (tests, benchmarks)."""
    extractor = Extractor(previous_summary)
    for e in events:
        extractor.add(e)
    return extractor.render(target_bytes, max_bytes)


def summarize_request(events: Iterable[Event], previous_summary: str, target_bytes: int, max_bytes: int) -> str:
    """``summarize`` as a picklable entry point for a worker process."""
    return summarize(events, previous_summary, target_bytes, max_bytes)
