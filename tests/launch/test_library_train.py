"""``seed_rl.train(config)`` (docs/library.md): without a logdir the run gets a new dated directory under
``runs/`` (never an earlier run's, which the command line's default would resume); it returns the run, whose
``summary()`` says what it reached; a finished run's last line holds the closing greedy evaluation."""

from __future__ import annotations

import math
import os
import re

import seed_rl
from seed_rl.config import replace, replace_flat
from seed_rl.configs import get_preset


def _tiny_config():
    config = get_preset("test_vtrace")
    return replace(config, run=replace_flat(config.run, total_environment_frames=300, final_eval_episodes=1))


def test_train_without_a_logdir_makes_a_dated_run_directory_and_returns_its_summary(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    config = _tiny_config()
    assert not config.run.tracking.logdir
    run = seed_rl.train(config, actor_mode="thread")
    (name,) = os.listdir(tmp_path / "runs")
    assert re.fullmatch(r"test-correct_action-vtrace-\d{8}-\d{6}", name), name
    logdir = os.path.join("runs", name)
    assert os.path.isfile(os.path.join(logdir, "config.json")) and os.path.isfile(os.path.join(logdir, "finished.json"))
    summary = run.summary()
    assert summary["logdir"] == logdir and summary["finished"] and not summary["interrupted"]
    assert summary["env_frames"] >= 300 and summary["episodes"] > 0 and summary["elapsed_s"] > 0
    assert math.isfinite(summary["mean_return_last_20"]) and 0 < summary["window_episodes"] <= 20
    assert len(summary["final_eval"]["latest"]["returns"]) == 1
    # The closing greedy evaluation comes before the run's last line, which says it too.
    lines = [line for line in capfd.readouterr().out.splitlines() if line.strip()]
    greedy = max(i for i, line in enumerate(lines) if line.startswith("seed_rl: greedy evaluation, latest"))
    assert greedy < len(lines) - 1, lines[-3:]
    assert re.fullmatch(r"seed_rl: finished after [\d,]+ env frames in [\d.]+ min \([\d,]+ episodes\); mean return "
                        r"of the last \d+ episodes: [-\d.]+(; best window [-\d.]+ at [\d,]+ frames)?; greedy "
                        r"evaluation: (best checkpoint [-\d.]+ over 1 episode, )?latest checkpoint [-\d.]+ over 1 "
                        r"episode", lines[-1]), lines[-1]


def test_every_call_without_a_logdir_gets_a_directory_of_its_own(tmp_path, monkeypatch):
    """Two calls in the same second do not share a directory (the second would resume, or be refused as finished,
    the first)."""
    from seed_rl.launch.local import default_logdir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("time.strftime", lambda fmt, *a: "20990101-000000")
    config = _tiny_config()
    first = default_logdir(config)
    assert first == os.path.join("runs", "test-correct_action-vtrace-20990101-000000")
    assert default_logdir(config) == first  # nothing there yet
    os.makedirs(first)
    assert default_logdir(config) == first + "-2"
    os.makedirs(first + "-2")
    assert default_logdir(config) == first + "-3"
