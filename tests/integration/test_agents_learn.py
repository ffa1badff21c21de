"""Every agent learns its small task end to end (real processes over loopback gRPC), and its broken-learner
control does not: V-trace, R2D2, PPO, AWR and V-MPO on CartPole-v1, SAC on Pendulum-v1.

Flags, thresholds and budgets are the agent suite's (``benchmarks/agent_suite.py``, ``CASES``): a learning run
must reach its threshold (a mean of 20 consecutive episodes; R2D2's evaluation episodes) within its budget, which
is at least 1.5x the frames the slowest of the suite's 5 seeds needed (``benchmarks/results/agent_suite.json``,
checked below, so that the test is not flaky); the control (the policy gradient's sign flipped, or the reward's
sign in the targets) gets as many frames as that slowest seed needed and must stay far below the threshold.
Random play averages about 22 on CartPole and about -1,200 on Pendulum. The runs start in the background when the
session starts and these tests run last (``learning_runs.py``).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.integration import learning_runs
from tests.integration.helpers import best_rolling_mean, episodes, first_frames_reaching, learning_diagnosis

CASES = learning_runs.CASES
pytestmark = pytest.mark.timeout(2400)  # a test may wait for its background run (pytest-timeout's default: 600 s)
SUITE = os.path.join(learning_runs.BENCHMARKS, "results", "agent_suite.json")
TIMEOUT = 1800  # seconds: the runs share two cores with the rest of the suite


def _finished_run(agent: str, kind: str):
    """The episodes of the background run ``<agent>_<kind>`` (``learn`` or ``control``) once it has exited cleanly
    (its training episodes, or R2D2's evaluation episodes, which its target reads), and its output."""
    logdir, proc = learning_runs.current().wait(f"{agent}_{kind}", TIMEOUT)
    assert proc.proc.returncode == 0, proc.output()
    return [e for e in episodes(logdir) if e.eval == CASES[agent]["eval_episodes"]], proc.output()


@pytest.mark.parametrize("agent", [pytest.param(a, marks=pytest.mark.learning_run(f"{a}_learn")) for a in CASES])
def test_agent_learns_its_small_task(agent):
    case = CASES[agent]
    eps, output = _finished_run(agent, "learn")
    reached = first_frames_reaching(eps, case["test_level"])
    best, _ = best_rolling_mean(eps)
    assert reached is not None and reached <= case["test_budget"], (
        f"{agent}: best mean return over 20 episodes {best:.1f} in {eps[-1].env_frames if eps else 0} frames, "
        f"threshold {case['test_level']}; {learning_diagnosis(eps, output)}")


@pytest.mark.parametrize("agent", [pytest.param(a, marks=pytest.mark.learning_run(f"{a}_control")) for a in CASES])
def test_broken_learner_control_does_not_learn(agent):
    case = CASES[agent]
    eps, _ = _finished_run(agent, "control")
    assert eps and eps[-1].env_frames >= case["control_budget"] * 0.95  # it used its whole budget
    best, _ = best_rolling_mean(eps)
    assert best < case["control_below"], f"{agent} with {case['control']} reached a mean return of {best:.1f}"


def test_budgets_cover_the_measured_spread_and_controls_fail_in_the_suite():
    """The committed suite results back the budgets: 5 seeds of each agent all reached the threshold, the test's
    budget is at least 1.5x the slowest, the control's is at least the slowest, and the suite's own controls
    stayed under ``control_below``."""
    with open(SUITE) as f:
        suite = json.load(f)
    for agent, case in CASES.items():
        level = f"{case['test_level']:g}"
        learn = [r for r in suite["runs"] if r["agent"] == agent and not r["control"]]
        assert len(learn) >= 5, f"{agent}: {len(learn)} seeds in {SUITE}"
        frames = [r["frames_to"].get(level) for r in learn]
        assert None not in frames, f"{agent}: a seed never reached {level}: {frames}"
        assert case["test_budget"] >= 1.5 * max(frames), (agent, case["test_budget"], frames)
        assert case["control_budget"] >= max(frames), (agent, case["control_budget"], frames)
        controls = [r for r in suite["runs"] if r["agent"] == agent and r["control"]]
        assert controls and all(r["best_window"] < case["control_below"] for r in controls), (agent, controls)
        assert suite["cases"][agent]["flags"] == case["flags"], f"{agent}: the suite ran other flags"
