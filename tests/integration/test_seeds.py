"""``seed-rl train --seeds=1,2``: one run per seed in <logdir>/seed_<S>, then the combined curve in <logdir>."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from seed_rl.learner.summaries import CSV_FIELDS, seed_curves
from tests.integration.helpers import TrainProcess

SMALL = ("--env=test", "--env_name=counting:length=4,num_actions=2", "--num_actors=1", "--env_batch_size=2",
         "--unroll_length=4", "--batch_size=2", "--total_environment_frames=400", "--summary_period_secs=1")


@pytest.mark.slow  # CI time; the combined curve is tested below
def test_train_with_several_seeds_writes_each_run_and_the_combined_curve(tmp_path):
    logdir = str(tmp_path / "sweep")
    proc = TrainProcess(logdir, *SMALL, "--seeds=1,2")
    assert proc.wait(timeout=300) == 0, proc.output()
    for seed in (1, 2):
        run_dir = os.path.join(logdir, f"seed_{seed}")
        with open(os.path.join(run_dir, "config.json")) as f:
            config = json.load(f)
        assert config["run"]["seed"] == seed and config["env"]["seed"] == seed
        assert config["run"]["tracking"]["logdir"] == run_dir
        assert os.path.exists(os.path.join(run_dir, "episodes.csv"))
    assert "seed 2 (2 of 2)" in proc.output()
    assert os.path.exists(os.path.join(logdir, "seeds_curve.png"))
    with open(os.path.join(logdir, "seeds.csv")) as f:
        rows = list(csv.DictReader(f))
    assert rows and set(rows[0]) == {"env_frames", "seed 1", "seed 2", "mean", "min", "max"}
    for row in rows:
        a, b = float(row["seed 1"]), float(row["seed 2"])
        assert float(row["min"]) == min(a, b) and float(row["max"]) == max(a, b)
        assert abs(float(row["mean"]) - (a + b) / 2) < 1e-3


def _write_episodes(path: str, frames, returns) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_FIELDS)
        for frame, ret in zip(frames, returns):
            writer.writerow([frame, ret, ret, 10, 10, 0, 0.0, 0])


def test_seed_curves_put_the_runs_on_one_frame_grid(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    _write_episodes(a, range(10, 410, 10), [1.0] * 40)           # constant 1
    _write_episodes(b, range(10, 610, 10), np.arange(60) * 0.1)  # rising
    curves = seed_curves({"a": a, "b": b}, window=20, points=11)
    assert curves["frames"][0] == 200 and curves["frames"][-1] == 400  # both runs cover [200, 400]
    np.testing.assert_allclose(curves["runs"]["a"], 1.0)
    expected_b = np.interp(curves["frames"], np.arange(200, 610, 10), np.convolve(np.arange(60) * 0.1,
                                                                                   np.ones(20) / 20, "valid"))
    np.testing.assert_allclose(curves["runs"]["b"], expected_b)
    np.testing.assert_allclose(curves["mean"], (1.0 + expected_b) / 2)
    _write_episodes(str(tmp_path / "short"), range(10, 100, 10), [0.0] * 9)
    assert seed_curves({"a": a, "short": str(tmp_path / "short")}) is None
