"""``--target_eval_episodes``: a training window at the target stops the run only when a greedy evaluation of the
weights of that moment (training paused) reaches the target too; the run's final and best checkpoints then hold
those weights, and best.json says so (issue 33: the main job's best checkpoint played far below the window that
stopped it). In-process runs on the ``correct_action`` test env (returns 0-10; random play averages about 2.5)."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import tensorflow as tf

from seed_rl.config import EnvConfig, replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.evaluate import checkpoint_path
from seed_rl.launch.local import LocalRun, on_free_loopback_port
from seed_rl.learner import learner as learner_lib

TARGET = 0.5  # every window of random play reaches it


def _config(tmp_path, **run):
    config = get_preset("test_vtrace")
    return on_free_loopback_port(replace(
        config, env=EnvConfig(family="test", name="correct_action:length=10"),
        run=replace_flat(config.run, logdir=str(tmp_path / "run"), total_environment_frames=40_000,
                         target_return=TARGET, **run)))


def _weights(path: str) -> list:
    reader = tf.train.load_checkpoint(path)
    names = sorted(n for n in reader.get_variable_to_shape_map() if n.startswith("network/"))
    assert names, "no network variables in the checkpoint"
    return [reader.get_tensor(n) for n in names]


def test_a_greedy_check_that_passes_stops_the_run_with_those_weights_as_final_and_best(tmp_path, capsys):
    run = LocalRun(_config(tmp_path, target_eval_episodes=3), actor_mode="thread", status_stream=io.StringIO())
    run.run()
    out = capsys.readouterr().out
    assert run.learner.finished, out
    assert "greedy evaluation of policy version" in out and "over 3 episodes" in out, out
    logdir = run.config.run.tracking.logdir
    # The closing lines say how to evaluate both checkpoints of this run directory.
    assert f"(the latest; seed-rl eval --logdir={logdir})" in out, out
    assert f"(seed-rl eval --logdir={logdir} --checkpoint=best)" in out, out
    with open(os.path.join(logdir, "checkpoints", "best", "best.json")) as f:
        best = json.load(f)
    assert best["greedy_episodes"] == 3 and best["greedy_mean_return"] >= TARGET, best
    assert "greedy evaluation" in best["statistic"], best
    with open(os.path.join(logdir, "finished.json")) as f:
        finished = json.load(f)
    # Stopped by the check, long before the budget (a check that never paused training would end at the budget).
    assert finished["reason"] == "target" and finished["env_frames"] < 10_000, finished
    # Training stayed paused from the check to the end: the latest checkpoint holds the weights that passed.
    latest, best_path = checkpoint_path(logdir, "latest"), checkpoint_path(logdir, "best")
    assert latest.endswith(f"ckpt-{best['checkpoint']}"), (latest, best)
    for a, b in zip(_weights(latest), _weights(best_path)):
        np.testing.assert_array_equal(a, b)


def test_a_greedy_check_that_fails_trains_on_and_checks_again_after_a_new_window(tmp_path, capsys, monkeypatch):
    run = LocalRun(_config(tmp_path, target_eval_episodes=2), actor_mode="thread", status_stream=io.StringIO())
    checks = []  # (policy version, episodes logged) at each check
    real_play = learner_lib.play_lib.play_episodes

    def scripted(agent, step, env, num_episodes, **kwargs):
        assert len(env) == num_episodes == 2  # side by side, one env per episode
        real_play(agent, step, env, num_episodes, **kwargs)  # the real path runs; the verdict is scripted
        checks.append((int(run.learner.policy_version.numpy()), run.learner.episode_log.total))
        return [0.0] * num_episodes if len(checks) == 1 else [9.0] * num_episodes

    monkeypatch.setattr(learner_lib.play_lib, "play_episodes", scripted)
    run.run()
    out = capsys.readouterr().out
    assert run.learner.finished and len(checks) == 2, (checks, out)
    assert "played 0.0 greedily over 2 episodes, under the target; training on" in out, out
    assert checks[1][0] > checks[0][0], checks  # training went on between the checks
    assert checks[1][1] >= checks[0][1] + run.learner.episode_log.window, checks  # after a new window
    with open(os.path.join(run.config.run.tracking.logdir, "checkpoints", "best", "best.json")) as f:
        best = json.load(f)
    assert best["greedy_mean_return"] == 9.0 and best["checkpoint"] == checks[1][0], best


def test_without_the_flag_the_window_alone_stops_the_run(tmp_path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("no greedy check without --target_eval_episodes")

    monkeypatch.setattr(learner_lib.play_lib, "play_episodes", never)
    run = LocalRun(_config(tmp_path, target_eval_episodes=0), actor_mode="thread", status_stream=io.StringIO())
    run.run()
    out = capsys.readouterr().out
    assert run.learner.finished and f"target return {TARGET} reached (mean of the last 20 episodes:" in out, out
    with open(os.path.join(run.config.run.tracking.logdir, "checkpoints", "best", "best.json")) as f:
        assert "greedy_mean_return" not in json.load(f)
