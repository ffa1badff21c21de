"""A training run with --wandb_project in W&B's offline mode leaves its W&B run in the run directory."""

import glob
import os

import pytest

from tests.integration.helpers import TrainProcess

pytest.importorskip("wandb", reason="W&B tracking is optional: pip install 'seed_rl[wandb]' (in dev)")


@pytest.mark.slow  # CI time; the tracker is unit-tested in tests/learner/test_tracking.py
def test_train_logs_to_wandb_offline(tmp_path):
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, "--env=test", "--env_name=counting:length=4,num_actions=2", "--num_actors=1",
                        "--env_batch_size=2", "--unroll_length=4", "--batch_size=2",
                        "--total_environment_frames=300", "--summary_period_secs=1",
                        "--wandb_project=seed-rl-test", "--wandb_mode=offline", env={"WANDB_SILENT": "true"})
    assert proc.wait(timeout=300) == 0, proc.output()
    with open(os.path.join(logdir, "wandb_run_id")) as f:
        run_id = f.read().strip()
    runs = glob.glob(os.path.join(logdir, "wandb", f"offline-run-*-{run_id}", f"run-{run_id}.wandb"))
    assert len(runs) == 1 and os.path.getsize(runs[0]) > 1000, proc.output()
