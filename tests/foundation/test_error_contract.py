"""The error contract: every reason is one documented ErrorReason value in
the protos, raised with the gRPC code its comment names, documented in the
README, and code raises and branches on the enum, never on strings."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

from agentctx.error.v1 import error_reason_pb2
from agentctx_common import errors
from agentctx_common.reasons import ERROR_DOMAIN, METADATA_KEYS, Reason

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "protos" / "agentctx" / "error" / "v1" / "error_reason.proto"
PACKAGES = ("agentctx_common", "agentctx_cli", "context_service", "cache_service")
_CLASSES = {cls.__name__: cls for cls in vars(errors).values()
            if isinstance(cls, type) and issubclass(cls, errors.AgentCtxError)}


def _documented_codes() -> dict[str, set[str]]:
    """Reason -> the gRPC codes its proto comment names (the comment starts
    with the code; a second code is named in parentheses)."""
    source = PROTO.read_text()
    codes: dict[str, set[str]] = {}
    for comment, name in re.findall(r"((?:  //[^\n]*\n)+)  ([A-Z_]+) = \d+", source):
        text = " ".join(line.strip()[2:].strip() for line in comment.strip().splitlines())
        pattern = r"\b(?:" + "|".join(c.value for c in errors.Code) + r")\b"
        codes[name] = set(re.findall(pattern, text.split(":")[0]))
    return codes


def _sources() -> list[tuple[pathlib.Path, ast.AST]]:
    return [
        (path, ast.parse(path.read_text(), str(path)))
        for package in PACKAGES if (ROOT / package).is_dir()
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "reasons.py"
    ]


def test_the_python_mirror_is_the_proto_enum() -> None:
    assert {r.value for r in Reason} == {n for n in error_reason_pb2.ErrorReason.keys() if n != "ERROR_REASON_UNSPECIFIED"}
    assert ERROR_DOMAIN == "agentctx.dev"
    assert all(isinstance(keys, tuple) for keys in METADATA_KEYS.values())


def test_every_reason_names_its_code() -> None:
    codes = _documented_codes()
    missing = [r.value for r in Reason if not codes.get(r.value)]
    assert not missing, f"reasons whose comment does not start with their gRPC code: {missing}"


def test_raises_use_the_code_the_proto_documents() -> None:
    """``SomeError(..., reason=Reason.X)``: SomeError's code is X's code."""
    documented = _documented_codes()
    wrong = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.value.id if isinstance(func, ast.Attribute) and func.attr == "fields" and isinstance(
                func.value, ast.Name) else getattr(func, "id", None)
            cls = _CLASSES.get(name or "")
            if cls is None:
                continue
            for kw in node.keywords:
                value = kw.value
                if kw.arg == "reason" and isinstance(value, ast.Attribute) and getattr(value.value, "id", "") == "Reason":
                    if cls.code.value not in documented.get(value.attr, set()):
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name} with Reason.{value.attr}")
    assert not wrong, "\n".join(wrong)


def test_no_reason_is_a_string_literal() -> None:
    """Reasons are raised and compared as the enum: a literal "ETAG_MISMATCH"
    next to a reason would drift from the contract unseen."""
    names = set(Reason.__members__)
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            literals: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg in ("reason", "default_reason"):
                literals.append(node.value)
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Attribute) and s.attr in ("reason", "wire_reason") for s in sides):
                    literals += sides
                    for s in sides:
                        if isinstance(s, (ast.Tuple, ast.Set, ast.List)):
                            literals += s.elts
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr in ("reason", "default_reason") for t in node.targets
            ):
                literals.append(node.value)
            for lit in literals:
                if isinstance(lit, ast.Constant) and lit.value in names:
                    found.append(f"{path.relative_to(ROOT)}:{lit.lineno}: {lit.value!r}")
    assert not found, "\n".join(found)


def test_the_error_reference_documents_every_reason() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_error_table.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    reference = (ROOT / "docs" / "ERRORS.md").read_text()
    assert not [r.value for r in Reason if f"`{r.value}`" not in reference]
    # The README keeps the rule and links the table.
    assert "(docs/ERRORS.md)" in (ROOT / "README.md").read_text()
