"""W&B tracking, in W&B's offline mode (no network): one W&B run per run directory, continued on resume, with the
config, the scalars and the episodes against env_frames."""

from __future__ import annotations

import glob
import os

import pytest

from seed_rl.learner.summaries import Episode

wandb = pytest.importorskip("wandb", reason="W&B tracking is optional: pip install 'seed_rl[wandb]' (in dev)")

from seed_rl.learner.tracking import RUN_ID_FILE, WandbTracker  # noqa: E402


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


def test_the_tracker_logs_config_scalars_and_episodes_offline(tmp_path):
    logdir = str(tmp_path)
    tracker = WandbTracker(logdir, "seed-rl-test", {"agent_name": "vtrace", "agent": {"learning_rate": 0.001}})
    tracker.scalars({"losses/total": 0.5, "learner/steps_per_sec": 3.0, "nan": float("nan")}, env_frames=100)
    tracker.episodes([Episode(150, 2.0, 4.0, 40, 10, 0, 0.0, False), Episode(160, -1.0, -1.0, 40, 10, 1, 0.0, True)])
    tracker.scalars({"losses/total": 0.25}, env_frames=200)
    run = tracker.run
    assert run.config["agent_name"] == "vtrace" and run.config["agent"]["learning_rate"] == 0.001
    summary = dict(run.summary)
    assert summary["losses/total"] == 0.25 and summary["learner/steps_per_sec"] == 3.0
    assert summary["episode/return"] == 2.0 and summary["episode/raw_return"] == 4.0
    assert summary["eval/return"] == -1.0 and summary["env_frames"] == 200
    assert "nan" not in summary
    run_id = run.id
    tracker.finish()
    files = glob.glob(os.path.join(logdir, "wandb", f"offline-run-*-{run_id}", f"run-{run_id}.wandb"))
    assert len(files) == 1 and os.path.getsize(files[0]) > 0  # what `wandb sync` uploads later
    # A resumed run directory continues the same W&B run.
    with open(os.path.join(logdir, RUN_ID_FILE)) as f:
        assert f.read().strip() == run_id
    again = WandbTracker(logdir, "seed-rl-test", {})
    assert again.run.id == run_id
    again.finish()


def test_a_missing_wandb_package_says_how_to_install_it(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(ImportError, match=r"pip install 'seed_rl\[wandb\]'"):
        WandbTracker(str(tmp_path), "p", {})
