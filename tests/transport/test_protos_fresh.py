"""The committed generated code matches seed_rl.proto (scripts/gen_protos.sh was rerun after the last edit).

The proto is regenerated with whatever grpcio-tools is installed and the *descriptors* are compared, not the
generated text: the committed files come from the oldest supported grpcio-tools (see gen_protos.sh), whose output
differs in form from a newer generator's but must describe the same messages and service.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest
from google.protobuf import descriptor_pb2

from seed_rl.protos import seed_rl_pb2

pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools is not installed")

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = "seed_rl/protos/seed_rl.proto"
GENERATED = ROOT / "seed_rl" / "protos"


def _serialized_file_descriptor(pb2_source: str) -> bytes:
    """The bytes passed to ``AddSerializedFile(...)`` in a generated *_pb2.py."""
    for node in ast.walk(ast.parse(pb2_source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
        ):
            return ast.literal_eval(node.args[0])
    raise AssertionError("no AddSerializedFile(...) call in the generated module")


def _grpc_method_paths(pb2_grpc_source: str) -> set[str]:
    return set(re.findall(r"'(/seed_rl\.v1\.[A-Za-z]+/[A-Za-z]+)'", pb2_grpc_source))


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("protos")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            str(ROOT / PROTO),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out / "seed_rl" / "protos"


def test_committed_descriptor_matches_the_proto(fresh):
    committed = descriptor_pb2.FileDescriptorProto.FromString(seed_rl_pb2.DESCRIPTOR.serialized_pb)
    regenerated = descriptor_pb2.FileDescriptorProto.FromString(
        _serialized_file_descriptor((fresh / "seed_rl_pb2.py").read_text())
    )
    assert committed == regenerated, (
        f"{PROTO} changed but the generated code was not regenerated: run scripts/gen_protos.sh"
    )


def test_committed_grpc_module_matches_the_proto(fresh):
    committed = (GENERATED / "seed_rl_pb2_grpc.py").read_text()
    regenerated = (fresh / "seed_rl_pb2_grpc.py").read_text()
    assert (
        _grpc_method_paths(committed)
        == _grpc_method_paths(regenerated)
        == {
            "/seed_rl.v1.Learner/Handshake",
            "/seed_rl.v1.Learner/Stream",
        }
    )


def test_generated_grpc_module_imports_messages_package_absolutely():
    source = (GENERATED / "seed_rl_pb2_grpc.py").read_text()
    assert re.search(r"^from seed_rl\.protos import seed_rl_pb2 as ", source, re.MULTILINE)
    assert not re.search(r"^import seed_rl_pb2", source, re.MULTILINE)


def test_stub_file_is_committed_and_covers_every_message():
    stub = (GENERATED / "seed_rl_pb2.pyi").read_text()
    for name in seed_rl_pb2.DESCRIPTOR.message_types_by_name:
        assert f"class {name}(" in stub
