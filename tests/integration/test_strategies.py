"""End to end over the real transport: ``seed-rl train --strategy=mirrored --virtual_cpu_devices=2`` learns
CartPole with V-trace as the single-device run does (tests/integration/test_agents_learn.py, same flags,
threshold and budget), and its run directory resumes under the default strategy (slow). A batch that does not split and a
TPU that is not there are refused (default suite)."""

import re
import subprocess
import sys

import pytest

from tests.integration import learning_runs
from tests.integration.helpers import TrainProcess, best_rolling_mean, episodes, first_frames_reaching

_VTRACE = learning_runs.CASES["vtrace"]  # the default suite's V-trace learning test (test_agents_learn.py)
COMMON = (*_VTRACE["flags"], "--summary_period_secs=5", "--seed=1")
LEARN_BUDGET = _VTRACE["test_budget"]
THRESHOLD = _VTRACE["test_level"]

MIRRORED = ("--strategy=mirrored", "--virtual_cpu_devices=2")


def _train_steps(proc: TrainProcess) -> int:
    return int(re.search(r"([\d,]+) frames, (\d+) train steps", proc.output()).group(2))


@pytest.mark.slow  # 2 minutes: the default suite has no room left in CI's 30; the equal-update checks stay in it
def test_mirrored_on_two_cpu_devices_learns_cartpole_and_resumes_on_one(tmp_path):
    logdir = str(tmp_path / "run")
    first = TrainProcess(logdir, *COMMON, *MIRRORED, f"--total_environment_frames={LEARN_BUDGET}",
                         f"--target_return={THRESHOLD}")
    assert first.wait(timeout=900) == 0, first.output()
    assert "devices: training on 2 replicas (mirrored: CPU:0, CPU:1), inference on CPU:0" in first.output()
    eps = episodes(logdir)
    reached = first_frames_reaching(eps, THRESHOLD)
    best, _ = best_rolling_mean(eps)
    assert reached is not None and reached <= LEARN_BUDGET, f"best mean return over 20 episodes: {best:.1f}"
    steps = _train_steps(first)

    # The checkpoint written by two replicas resumes on one device, and trains on.
    # A budget of 20 more train steps of 16 unrolls of 20 frames (the checkpoint counts frames the actors ran
    # ahead of training too, so the last episode's frames are no base).
    budget = (steps + 20) * 16 * 20
    second = TrainProcess(logdir, *COMMON, "--strategy=auto", f"--total_environment_frames={budget}")
    assert second.wait(timeout=300) == 0, second.output()
    out = second.output()
    assert "resumed from" in out and "devices: training on 1 replica (auto: CPU:0)" in out, out
    assert _train_steps(second) > steps
    changes = open(f"{logdir}/config_changes.txt").read()
    assert 'run.strategy: "mirrored" -> "auto"' in changes and "run.virtual_cpu_devices: 2 -> 0" in changes
    # The policy trained under mirrored plays well after the resume.
    res = subprocess.run([sys.executable, "-m", "seed_rl", "eval", f"--logdir={logdir}", "--num_episodes=3"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert float(re.search(r"mean return ([\d.]+)", res.stdout).group(1)) > 100, res.stdout  # random: about 22


def test_a_batch_that_does_not_split_over_the_replicas_is_refused(tmp_path):
    proc = TrainProcess(str(tmp_path / "run"), *COMMON, *MIRRORED, "--batch_size=5")
    assert proc.wait(timeout=120) != 0
    out = proc.output()
    assert "--batch_size=5 does not split over 2 replicas" in out and "choose a multiple of 2" in out, out
    assert "Traceback" not in out, out


def test_a_tpu_that_is_not_there_is_refused(tmp_path):
    proc = TrainProcess(str(tmp_path / "run"), *COMMON, "--strategy=tpu", "--tpu=grpc://127.0.0.1:9")
    assert proc.wait(timeout=120) != 0
    out = proc.output()
    assert "--strategy=tpu --tpu=grpc://127.0.0.1:9: no usable TPU" in out, out
    assert "Traceback" not in out, out
