"""The paper's other two benchmarks in the real system (learner + actor subprocesses over gRPC): DeepMind Lab
against the fake deepmind_lab (tests/fakes, on the actors' PYTHONPATH), Football with the real gfootball when it
is installed."""

from __future__ import annotations

import importlib.util
import os

import pytest

from tests.integration.helpers import TrainProcess, episodes

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKES = os.path.join(REPO_ROOT, "tests", "fakes")


@pytest.mark.slow  # CI time; the fake lab is unit-tested in tests/envs/test_dmlab.py
def test_train_dmlab_preset_against_the_fake_lab(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(
        logdir, "--preset=dmlab_vtrace", "--env_name=rooms_watermaze", "--width=32", "--height=24",
        "--num_actors=1", "--env_batch_size=2", "--unroll_length=10", "--batch_size=2", "--lstm_size=32",
        "--total_environment_frames=1600", "--summary_period_secs=1",
        env={"PYTHONPATH": os.pathsep.join([FAKES, REPO_ROOT])})
    assert proc.wait(timeout=240) == 0, proc.output()
    eps = episodes(logdir)
    assert eps, proc.output()
    for e in eps:  # the fake's episodes: 120 frames = 30 agent steps of 4 repeats; 1 per frame with fire pressed
        assert e.episode_steps == 30, e
        assert e.raw_return == e.episode_return and 0 <= e.raw_return <= 120 and e.raw_return % 4 == 0, e
    assert os.path.isdir(os.path.join(logdir, "checkpoints")), os.listdir(logdir)


@pytest.mark.skipif(importlib.util.find_spec("gfootball") is None,
                    reason="gfootball is not installed (bash scripts/install_football.sh, then pip install -e "
                    ".[football])")
def test_train_football_vtrace_on_academy_empty_goal_close(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(
        logdir, "--preset=football_vtrace", "--env_name=academy_empty_goal_close", "--num_actors=2",
        "--env_batch_size=1", "--unroll_length=16", "--batch_size=2", "--total_environment_frames=1500",
        "--summary_period_secs=1")
    assert proc.wait(timeout=600) == 0, proc.output()
    eps = episodes(logdir)
    assert eps, proc.output()
    for e in eps:  # score_reward: a goal (1), none (0); academy episodes end within 400 steps
        assert e.raw_return in (0.0, 1.0) and 1 <= e.episode_steps <= 401, e
