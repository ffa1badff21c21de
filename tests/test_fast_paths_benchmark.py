"""``benchmarks/fast_paths.py``: its medians and ratios from made-up runs, its table, its flags. Nothing is timed."""

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import their sibling _common by name

import fast_paths  # noqa: E402


def _runs(*cpu, wall=True):
    return [{"cpu_us": c, "wall_us": 2 * c if wall else None, "calls": 100} for c in cpu]


def test_medians_and_slow_over_fast_ratios():
    samples = {("call", "tiny", "fast"): _runs(100, 120, 110), ("call", "tiny", "slow"): _runs(200, 260, 220),
               ("env", "Pong", "fast"): _runs(130, 140, wall=False), ("env", "Pong", "slow"): _runs(170, 160, wall=False)}
    data = fast_paths.summarize(samples)
    ratios = {(r["path"], r["case"]): r for r in data["ratios"]}
    assert ratios[("call", "tiny")]["cpu_slow_over_fast"] == pytest.approx(2.0)
    assert ratios[("call", "tiny")]["wall_slow_over_fast"] == pytest.approx(2.0)
    assert ratios[("env", "Pong")]["cpu_slow_over_fast"] == pytest.approx(165 / 135)
    assert ratios[("env", "Pong")]["wall_slow_over_fast"] is None
    body = fast_paths.build_body({"rounds": 3, "seconds": 6, "env_seconds": 6, "inference_batch": 8, **data}, "HEAD")
    assert "| fast_inference_call off -> fast_inference_call on | inference call, 8 rows, tiny MLP 8 | " \
           "CPU 220 -> 110 µs | 2.00x; wall 440 -> 220 µs (2.00x) |" in body
    assert "| raw env renders grayscale -> raw env renders RAM | one Pong env, per agent step | CPU 165 -> 135 µs | " \
           "1.22x |" in body
    assert "b6109cb" in body and "7d67d11" in body  # the records of the paths without a switch stay


def test_every_pair_runs_both_variants_of_the_same_measurement():
    args = fast_paths.parse_args(["--seconds=2", "--env_seconds=3"])
    measured = fast_paths.pairs(args)
    assert [(p, c) for p, c, _ in measured] == [("call", "tiny"), ("call", "preset"), ("env", "Pong")]
    for _, _, variants in measured:
        fast, slow = variants["fast"], variants["slow"]
        assert len(fast) == len(slow) and sum(a != b for a, b in zip(fast, slow)) == 1  # one flag differs


def test_flags_are_checked():
    with pytest.raises(SystemExit):
        fast_paths.parse_args(["--rounds=0"])
    with pytest.raises(SystemExit):
        fast_paths.parse_args(["--seconds=0"])
