"""The actor side of the transport loads no server code, and the transport's modules import each other in one
direction only (no circles, no private names taken across modules)."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

import seed_rl.transport

# Learner-side modules that an actor process must never load.
SERVER_MODULES = (
    "seed_rl.transport.server",
    "seed_rl.transport.batcher",
    "seed_rl.transport.session",
    "seed_rl.transport.window",
    "seed_rl.transport.grpc_serving",
    "seed_rl.transport.thread_server",
    "seed_rl.transport.aio_server",
    "seed_rl.transport.local_server",
)
FRAMEWORKS = ("tensorflow", "keras")

TRANSPORT_DIR = pathlib.Path(seed_rl.transport.__file__).parent
ACTORS_DIR = TRANSPORT_DIR.parent / "actors"


def _loaded_after(code: str) -> set[str]:
    """Runs ``code`` in a fresh interpreter and returns what it left in sys.modules (transport and frameworks)."""
    probe = (
        f"{code}\n"
        "import json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith('seed_rl.transport') or m.split('.')[0] in ('tensorflow', 'keras'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_actor_and_client_load_no_server_module_and_no_tensorflow() -> None:
    loaded = _loaded_after(
        "import numpy as np\n"
        "import seed_rl.actors.actor\n"
        "import seed_rl.transport.client\n"
        "from seed_rl.actors.actor import Actor\n"
        "from seed_rl.transport import LearnerClient, LearnerUnavailableError, TransportError, tls\n"
        "from seed_rl.transport.local import LocalStream\n"
        # What an actor builds before it talks to the learner; no channel is opened yet.
        "Actor('127.0.0.1:1', task=0, connect_timeout_s=0.1)\n"
        "LearnerClient('127.0.0.1:1', task=0, connect_timeout_s=0.1).close()\n"
    )
    assert "seed_rl.transport.client" in loaded  # the probe did import the client
    assert "seed_rl.transport.local" in loaded
    assert not loaded & set(SERVER_MODULES), sorted(loaded & set(SERVER_MODULES))
    assert not {m for m in loaded if m.split(".")[0] in FRAMEWORKS}


def test_package_names_load_their_module_on_first_access() -> None:
    loaded = _loaded_after("import seed_rl.transport")
    assert not loaded & set(SERVER_MODULES), sorted(loaded & set(SERVER_MODULES))
    loaded = _loaded_after(
        "import seed_rl.transport as t\n"
        "assert t.InferenceServer.__module__ == 'seed_rl.transport.server'\n"
        "assert t.DynamicBatcher.__module__ == 'seed_rl.transport.batcher'\n"
        "assert 'InferenceServer' in dir(t)\n"
        "from seed_rl.transport import server, session, window, local_server\n"
    )
    assert set(SERVER_MODULES) <= loaded
    assert not {m for m in loaded if m.split(".")[0] in FRAMEWORKS}  # the learner's transport is framework-free too


def test_package_rejects_unknown_names() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        seed_rl.transport.NoSuchName  # noqa: B018


def _imports_of(path: pathlib.Path) -> list[tuple[str, str]]:
    """(imported transport module, imported name or "") for every import in ``path``, at any depth."""
    found: list[tuple[str, str]] = []
    package = "seed_rl.transport"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.startswith(package + ".")]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            module = node.module
            if node.level:  # relative: from . import x / from .x import y
                module = package + ("." + module if module else "")
            if module == package:  # from seed_rl.transport import client, tls, LearnerClient, ...
                found += [(f"{package}.{alias.name}", "") for alias in node.names]
            elif module.startswith(package + "."):
                found += [(module, alias.name) for alias in node.names]
    return found


def test_transport_modules_import_no_private_names_and_form_no_circle() -> None:
    modules = {f"seed_rl.transport.{p.stem}": p for p in TRANSPORT_DIR.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    private = []
    for name, path in modules.items():
        graph[name] = set()
        for target, imported in _imports_of(path):
            if imported.startswith("_"):
                private.append(f"{name} imports {target}.{imported}")
            if target in modules and target != name:
                graph[name].add(target)
    for path in sorted(ACTORS_DIR.glob("*.py")):  # the actor uses the transport's public names only
        private += [f"{path} imports {t}.{i}" for t, i in _imports_of(path) if i.startswith("_")]
    assert not private, private
    for module in ("seed_rl.transport.client", "seed_rl.transport.local"):
        assert not graph[module] & set(SERVER_MODULES), (module, sorted(graph[module]))

    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        if node in path:
            raise AssertionError("import circle: " + " -> ".join((*path[path.index(node) :], node)))
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, (*path, node))
        done.add(node)

    for module in sorted(graph):
        visit(module, ())
