"""No function in ``seed_rl/learner/`` runs past 60 lines (issue 32, item 1: a longer one is a sign that two jobs
share it). A function's lines count from its first decorator or ``def`` to its last line, docstring included."""

from __future__ import annotations

import ast
import pathlib

LIMIT = 60
LEARNER = pathlib.Path(__file__).resolve().parents[2] / "seed_rl" / "learner"


def _long_functions(path: pathlib.Path) -> list:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - start + 1
            if length > LIMIT:
                found.append(f"{path.name}:{start} {node.name}: {length} lines")
    return found


def test_no_learner_function_is_longer_than_the_limit():
    files = sorted(LEARNER.glob("*.py"))
    assert len(files) > 10 and any(p.name == "training.py" for p in files)
    long = [entry for path in files for entry in _long_functions(path)]
    assert not long, f"functions over {LIMIT} lines:\n  " + "\n  ".join(long)


def test_the_count_includes_decorators_and_docstrings(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT - 3))
    exact = f"@staticmethod\ndef f():\n    '''doc'''\n{body}\n"  # LIMIT lines: allowed
    (tmp_path / "ok.py").write_text(exact)
    assert _long_functions(tmp_path / "ok.py") == []
    (tmp_path / "long.py").write_text(exact + "    return x0\n")
    assert _long_functions(tmp_path / "long.py") == [f"long.py:1 f: {LIMIT + 1} lines"]
