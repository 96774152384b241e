"""gen/ is exactly what scripts/gen_protos.py makes from protos/, and the
protos pass buf lint."""

from __future__ import annotations

import filecmp
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tree(root: pathlib.Path) -> dict[str, pathlib.Path]:
    return {
        str(p.relative_to(root)): p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_code_is_fresh(tmp_path: pathlib.Path) -> None:
    reasons = tmp_path / "reasons.py"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos.py"), str(tmp_path / "gen"), str(reasons)],
                   check=True)
    fresh, committed = _tree(tmp_path / "gen" / "agentctx"), _tree(ROOT / "gen" / "agentctx")
    assert sorted(fresh) == sorted(committed), "gen/ has missing or extra files: run `make gen`"
    stale = [name for name in fresh if not filecmp.cmp(fresh[name], committed[name], shallow=False)]
    assert not stale, f"gen/ is stale ({', '.join(stale)}): run `make gen`"
    assert reasons.read_text() == (ROOT / "agentctx_common" / "reasons.py").read_text(), (
        "agentctx_common/reasons.py is stale: run `make gen`"
    )


def test_buf_lint_is_clean() -> None:
    buf = ROOT / "tools" / "node_modules" / ".bin" / "buf"
    assert buf.exists(), "buf is not installed: `make test` installs it (cd tools && npm ci)"
    result = subprocess.run([str(buf), "lint"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_breaking_against_the_released_v1_api() -> None:
    buf = ROOT / "tools" / "node_modules" / ".bin" / "buf"
    image = ROOT / "api" / "agentctx-v1.binpb"
    result = subprocess.run([str(buf), "breaking", "--against", str(image)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_proto_field_and_message_is_documented() -> None:
    """Every message, field, enum value, service and RPC has a leading
    comment, so users of generated stubs in any language can act on it."""
    from google.protobuf import descriptor_pb2

    from agentctx.cache.v1 import cache_service_pb2
    from agentctx.compactor.v1 import compactor_service_pb2
    from agentctx.context.v1 import artifacts_pb2, context_service_pb2, policy_pb2, session_pb2
    from agentctx.error.v1 import error_reason_pb2
    from agentctx.memory.v1 import memory_service_pb2
    from agentctx.type.v1 import cache_pb2, content_pb2, event_pb2, generation_pb2

    undocumented: list[str] = []
    for module in (artifacts_pb2, cache_service_pb2, compactor_service_pb2, context_service_pb2, policy_pb2, session_pb2,
                   cache_pb2, content_pb2, event_pb2, generation_pb2, error_reason_pb2, memory_service_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        source = (ROOT / "protos" / proto.name).read_text()
        # Source info is not kept in the generated descriptor, so check the
        # text: each declaration line is preceded by a comment line.
        lines = source.splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip()
            is_decl = (
                stripped.startswith(("message ", "enum ", "service ", "rpc ", "oneof "))
                or (stripped.endswith(";") and "=" in stripped and not stripped.startswith(("option", "syntax", "package", "import")))
            )
            if not is_decl:
                continue
            previous = lines[i - 1].strip() if i else ""
            if not previous.startswith("//"):
                undocumented.append(f"{proto.name}:{i + 1}: {stripped}")
    assert not undocumented, "undocumented declarations:\n" + "\n".join(undocumented)


def test_every_proto_carries_each_languages_package_options() -> None:
    """One naming scheme, derived from the proto package, so stubs for any
    language generate without hand-written mappings and never collide."""
    import re

    wrong: list[str] = []
    for path in sorted((ROOT / "protos").rglob("*.proto")):
        text = path.read_text()
        area, version = re.search(r"^package agentctx\.(\w+)\.(v\d+);", text, re.M).groups()
        title, ver = area.capitalize(), version.capitalize()
        outer = "".join(w.capitalize() for w in path.stem.split("_")) + "Proto"
        expected = {
            "csharp_namespace": f'"AgentCtx.{title}.{ver}"',
            "go_package": f'"agentctx.dev/genproto/agentctx/{area}/{version};{area}{version}"',
            "java_multiple_files": "true",
            "java_outer_classname": f'"{outer}"',
            "java_package": f'"dev.agentctx.{area}.{version}"',
            "objc_class_prefix": '"ACX"',
            "php_namespace": f'"AgentCtx\\\\{title}\\\\{ver}"',
            "ruby_package": f'"AgentCtx::{title}::{ver}"',
        }
        found = dict(re.findall(r"^option (\w+) = (.+);$", text, re.M))
        for name, value in expected.items():
            if found.get(name) != value:
                wrong.append(f"{path.relative_to(ROOT)}: option {name} is {found.get(name)}, expected {value}")
    assert not wrong, "\n".join(wrong)
