"""The package's layering (docs/architecture.md): every import of every module, at module level or inside a
function, follows the allowed arrows between layers; the import graph has no circle; and no module takes a
``_private`` name from another module."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "seed_rl"

# layer -> the layers it may import (besides itself). The layer of seed_rl.X.Y is X ("types" for types.py).
# types and config may be imported by every layer (added below); they import no other layer.
ALLOWED = {
    "types": set(),
    "config": set(),
    "protos": set(),
    "transport": {"protos", "types", "config"},
    "envs": {"types", "config"},
    "actors": {"transport", "envs", "types", "config"},
    "ops": {"types"},
    "networks": {"ops", "types"},
    "agents": {"ops", "networks", "types", "config"},
    "learner": {"agents", "transport", "envs", "ops", "networks", "types", "config"},
    "configs": {"agents", "envs", "config", "types"},
    # Entry points: they may import anything, and nothing imports them (checked below).
    "evaluate": {"*"},
    "launch": {"*"},
    "cli": {"*"},
    "__main__": {"*"},
    "": set(),  # seed_rl/__init__.py: the version only
}
for _layer_name, _allowed in ALLOWED.items():
    if _layer_name not in ("types", "config", ""):
        _allowed.update({"types", "config"})
# Who may import an entry point (checked for every module, entry points included: their "*" covers the lower
# layers only). The command line runs the launchers; no launcher reaches back up into the command line.
ENTRY_POINT_IMPORTERS = {"__main__": set(), "cli": {"__main__"}, "launch": {"cli", "__main__"},
                         "evaluate": {"cli", "launch", "__main__"}}
# Finer rules inside an allowed layer edge: (importing layer, imported layer) -> the modules it may import there.
ONLY = {
    # Presets name agents' config classes, never the TensorFlow agent modules.
    ("configs", "agents"): lambda target: target == "seed_rl.agents" or target.endswith(".config"),
}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _resolve(base: str, node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return base
    package = module.split(".") if is_package else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([base] if base else []))


def _imports(module: str) -> list[tuple[str, int, list[str]]]:
    """(imported seed_rl module, line, names taken from it) for every import statement of ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno, []) for alias in node.names if alias.name.split(".")[0] == "seed_rl")
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", node, module, path.name == "__init__.py")
            if target.split(".")[0] != "seed_rl":
                continue
            names = []
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:  # `from pkg import submodule`
                    out.append((f"{target}.{alias.name}", node.lineno, []))
                else:
                    names.append(alias.name)
            if names:
                out.append((target, node.lineno, names))
    return out


GRAPH = {m: _imports(m) for m in MODULES}


def test_the_parser_sees_the_imports_it_must_judge():
    # A parser that found nothing would pass every rule below.
    learner_imports = {target for target, _, _ in GRAPH["seed_rl.learner.learner"]}
    assert "seed_rl.learner.inference" in learner_imports and "seed_rl.agents" in learner_imports
    function_level = {target for target, _, _ in GRAPH["seed_rl.cli"]}
    assert "seed_rl.learner.learner" in function_level  # imported inside a function
    assert set(ALLOWED) >= {_layer(m) for m in MODULES}, "a new top-level module needs a row in ALLOWED"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    layer = _layer(module)
    allowed = ALLOWED[layer]
    bad = []
    for target, line, _ in GRAPH[module]:
        if target not in MODULES:
            bad.append(f"line {line}: {target} is not a module of the package")
            continue
        other = _layer(target)
        if other == layer:
            continue
        if other in ENTRY_POINT_IMPORTERS:
            if layer not in ENTRY_POINT_IMPORTERS[other]:
                bad.append(f"line {line}: imports the entry point {target}")
        elif "*" in allowed:
            continue
        elif other not in allowed:
            bad.append(f"line {line}: the {layer or 'seed_rl'} layer may not import {target} ({other})")
        elif (layer, other) in ONLY and not ONLY[layer, other](target):
            bad.append(f"line {line}: the {layer} layer may import only some of {other}, not {target}")
    assert not bad, f"{module}:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_modules(module):
    bad = [f"line {line}: takes {name} from {target}" for target, line, names in GRAPH[module]
           for name in names if name.startswith("_") and not name.startswith("__") and target != module]
    # Attribute access through an imported module: `server._Core`.
    tree = ast.parse(MODULES[module].read_text())
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("seed_rl.") and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("seed_rl"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            bad.append(f"line {node.lineno}: reads {aliases[node.value.id]}.{node.attr}")
    assert not bad, f"{module}:\n  " + "\n  ".join(bad)


def test_no_import_circles():
    edges = {m: sorted({t for t, _, _ in GRAPH[m] if t in MODULES and t != m}) for m in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in edges[m]:
            if state.get(t) == 1:
                cycles.append(path[path.index(t):] + [t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)
    assert not cycles, "import circles:\n  " + "\n  ".join(" -> ".join(c) for c in cycles)


def test_the_checks_catch_a_forbidden_edge_and_a_circle(tmp_path, monkeypatch):
    """The rules above fail on the faults they exist for (an agent importing the learner; a circle)."""
    edges = dict(GRAPH)
    edges["seed_rl.agents.vtrace.agent"] = GRAPH["seed_rl.agents.vtrace.agent"] + [("seed_rl.learner.training", 1, [])]
    edges["seed_rl.learner.training"] = GRAPH["seed_rl.learner.training"] + [("seed_rl.agents.vtrace.agent", 1, [])]
    monkeypatch.setattr(__import__(__name__, fromlist=["GRAPH"]), "GRAPH", edges)
    with pytest.raises(AssertionError, match="may not import seed_rl.learner.training"):
        test_imports_follow_the_layers("seed_rl.agents.vtrace.agent")
    with pytest.raises(AssertionError, match="import circles"):
        test_no_import_circles()
    edges["seed_rl.configs.presets"] = GRAPH["seed_rl.configs.presets"] + [("seed_rl.agents.r2d2.agent", 1, [])]
    with pytest.raises(AssertionError, match="may import only some of agents"):
        test_imports_follow_the_layers("seed_rl.configs.presets")
    # An entry point importing another upward (a launcher reaching into the command line) is caught too.
    edges["seed_rl.launch.vertex"] = GRAPH["seed_rl.launch.vertex"] + [("seed_rl.cli", 1, [])]
    with pytest.raises(AssertionError, match="imports the entry point seed_rl.cli"):
        test_imports_follow_the_layers("seed_rl.launch.vertex")


def _code_without_docstrings(tree: ast.AST):
    """The nodes of ``tree`` minus the docstrings (a docstring may name an agent as an example)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [n for n in ast.walk(tree) if id(n) not in docstrings]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) == "learner"))
def test_the_learner_knows_no_agent(module):
    """The learner reads agents only through the protocol: no agent's name in its code, no getattr/hasattr on an
    agent, no field of an agent's config (``config.agent.<field>``)."""
    import seed_rl.agents as agents_lib

    names = {n.lower() for n in agents_lib.agent_names()}
    # As a word of a string or of an identifier (split at underscores): "ppo" names an agent, "unsupported" not.
    named = re.compile(r"(?<![a-z0-9])(" + "|".join(map(re.escape, sorted(names))) + r")(?![a-z0-9])")
    bad = []
    for node in _code_without_docstrings(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and named.search(node.value.lower()):
            bad.append(f"line {node.lineno}: names an agent: {node.value!r}")
        elif isinstance(node, ast.Name) and named.search(node.id.lower().replace("_", " ")):
            bad.append(f"line {node.lineno}: names an agent: {node.id}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and node.args and "agent" in ast.unparse(node.args[0])):
            bad.append(f"line {node.lineno}: probes an agent: {ast.unparse(node)}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
              and node.value.attr == "agent" and "config" in ast.unparse(node.value.value)):
            bad.append(f"line {node.lineno}: reads an agent's config field: {ast.unparse(node)}")
    assert not bad, f"{module}:\n  " + "\n  ".join(bad)


def test_the_agent_check_catches_a_probe(tmp_path, monkeypatch):
    probe = tmp_path / "probe.py"
    probe.write_text("def f(config, agent):\n    x = getattr(agent, 'uses_replay', None)\n"
                     "    return config.agent.replay_buffer_size, 'r2d2'\n")
    monkeypatch.setitem(MODULES, "seed_rl.learner.probe", probe)
    with pytest.raises(AssertionError) as info:
        test_the_learner_knows_no_agent("seed_rl.learner.probe")
    assert "probes an agent" in str(info.value) and "config field" in str(info.value)
    assert "names an agent" in str(info.value)


# --- benchmarks/: scripts beside the package, importing each other by file name (`import _common`) -----------------
BENCHMARKS = PACKAGE.parent / "benchmarks"
BENCH_MODULES = {p.stem: p for p in sorted(BENCHMARKS.glob("*.py"))}


def _bench_imports(name: str) -> list[tuple[str, int, list[str]]]:
    """(imported module, line, names taken) for every import of a benchmark script that names a sibling script
    (by its bare name) or the package; attribute reads through an imported sibling or package module count as
    names taken (``_common._helper``)."""
    tree = ast.parse(BENCH_MODULES[name].read_text(), str(BENCH_MODULES[name]))
    out, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in BENCH_MODULES or alias.name.split(".")[0] == "seed_rl":
                    out.append((alias.name, node.lineno, []))
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module in BENCH_MODULES or node.module.split(".")[0] == "seed_rl"):
            names = []
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES:
                    out.append((f"{node.module}.{alias.name}", node.lineno, []))
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                else:
                    names.append(alias.name)
            if names:
                out.append((node.module, node.lineno, names))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            out.append((aliases[node.value.id], node.lineno, [node.attr]))
    return out


BENCH_GRAPH = {name: _bench_imports(name) for name in BENCH_MODULES}


def test_the_benchmark_parser_sees_the_imports_it_must_judge():
    assert {"_common", "many_actors", "flow_control", "learner_capacity"} <= set(BENCH_MODULES)
    assert any(target == "_common" for target, _, _ in BENCH_GRAPH["flow_control"])
    assert any(target.startswith("seed_rl.") for target, _, _ in BENCH_GRAPH["learner_capacity"])


@pytest.mark.parametrize("name", sorted(BENCH_MODULES))
def test_a_benchmark_imports_real_modules_and_no_private_names(name):
    bad = []
    for target, line, names in BENCH_GRAPH[name]:
        if target.startswith("seed_rl") and target not in MODULES:
            bad.append(f"line {line}: {target} is not a module of the package")
        bad += [f"line {line}: takes {n} from {target}" for n in names
                if n.startswith("_") and not n.startswith("__") and target != name]
    assert not bad, f"benchmarks/{name}.py:\n  " + "\n  ".join(bad)


def test_no_import_circles_among_the_benchmarks():
    edges = {n: sorted({t for t, _, _ in BENCH_GRAPH[n] if t in BENCH_MODULES and t != n}) for n in BENCH_MODULES}
    cycles = []
    for start in edges:  # a circle through `start`: a path from start back to it
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in edges[node]:
                if nxt == start:
                    cycles.append(path + [start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    assert not cycles, "import circles among benchmarks/:\n  " + "\n  ".join(" -> ".join(c) for c in cycles)


def test_the_package_never_imports_a_benchmark():
    bad = [f"{module} line {line}: imports {target}" for module in MODULES for target, line, _ in GRAPH[module]
           if target.split(".")[0] in BENCH_MODULES or target.startswith("benchmarks")]
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                bad += [f"{module} line {node.lineno}: imports {a.name}" for a in node.names
                        if a.name.split(".")[0] in BENCH_MODULES or a.name.split(".")[0] == "benchmarks"]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in (
                    *BENCH_MODULES, "benchmarks"):
                bad.append(f"{module} line {node.lineno}: imports {node.module}")
    assert not bad, "\n".join(bad)


def test_the_benchmark_checks_catch_a_circle_and_a_private_name(monkeypatch):
    graph = dict(BENCH_GRAPH)
    graph["flow_control"] = BENCH_GRAPH["flow_control"] + [("many_actors", 1, ["_serve"])]
    graph["many_actors"] = BENCH_GRAPH["many_actors"] + [("flow_control", 1, [])]
    monkeypatch.setattr(__import__(__name__, fromlist=["BENCH_GRAPH"]), "BENCH_GRAPH", graph)
    with pytest.raises(AssertionError, match="takes _serve from many_actors"):
        test_a_benchmark_imports_real_modules_and_no_private_names("flow_control")
    with pytest.raises(AssertionError, match="import circles among benchmarks"):
        test_no_import_circles_among_the_benchmarks()



def _tf_functions_with_autograph(source: str) -> list[int]:
    """Lines where ``source`` names ``tf.function`` (a call or a decorator) without ``autograph=False``."""
    tree = ast.parse(source)
    named = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "function"
             and isinstance(n.value, ast.Name) and n.value.id == "tf"]
    off = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and any(
        k.arg == "autograph" and isinstance(k.value, ast.Constant) and k.value.value is False for k in n.keywords)}
    return sorted(n.lineno for n in named if id(n) not in off)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_compiled_function_is_traced_without_autograph(module):
    """AutoGraph's conversion of the Python source was about 3 s of every run's start on the CI machine (a PPO
    CartPole run of 2,000 frames: 14.3 s of CPU with it, 11.1 s without). The package writes its graph control
    flow as ``tf.cond`` / ``tf.where``, so it needs none; a Python ``if`` on a tensor then fails when traced, with
    TensorFlow's own error (docs/architecture.md, "How to add an agent")."""
    lines = _tf_functions_with_autograph(MODULES[module].read_text())
    assert not lines, f"{module}: tf.function without autograph=False at lines {lines}"


def test_the_autograph_check_sees_calls_and_decorators():
    source = ("import tensorflow as tf\n"
              "f = tf.function(g, autograph=False)\n"
              "h = tf.function(g, reduce_retracing=True)\n"
              "@tf.function\n"
              "def k(x):\n"
              "    return x\n")
    assert _tf_functions_with_autograph(source) == [3, 4]
