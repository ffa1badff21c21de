"""End to end with the real gfootball (skipped without it), real processes over loopback gRPC: V-trace
(`football_vtrace_fast`) learns to score on academy_empty_goal_close; with the policy gradient flipped it does not.

Slow, and CI has no gfootball (its engine compile alone takes about 8 minutes). Measured here
(benchmarks/RESULTS.md, "Football learning"): 0.13 goals per episode over the first 100 episodes (near-random
play), 0.96 over the last 472; the first window of 20 episodes at 0.9 or more after 56K frames.
"""

import importlib.util

import pytest

from tests.integration.helpers import train_for_budget, train_to_target

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3000),
    pytest.mark.skipif(importlib.util.find_spec("gfootball") is None,
                       reason="gfootball is not installed (bash scripts/install_football.sh, then pip install -e "
                       ".[football])"),
]
THRESHOLD = 0.8  # goals per episode, mean of 20 consecutive episodes (near-random play: about 0.13)
COMMON = ("--preset=football_vtrace_fast", "--summary_period_secs=10", "--seed=1")


def test_vtrace_learns_to_score_on_academy_empty_goal_close(tmp_path):
    train_to_target(str(tmp_path / "run"), *COMMON, budget=250_000, target=THRESHOLD, timeout=3000)


def test_vtrace_with_the_policy_gradient_flipped_does_not_score(tmp_path):
    best = train_for_budget(str(tmp_path / "run"), *COMMON, "--flip_policy_gradient", budget=120_000,
                            timeout=3000)
    assert best < 0.5, f"a sign-flipped learner scored {best:.2f} goals per episode over 20 episodes"
