"""The best checkpoint holds the weights that played its window (issue 33): every episode records the policy
versions it began and ended with, the training thread keeps snapshots of recent versions (`WeightHistory`), and a
new best window saves the snapshot nearest to the median of its episodes' middle versions, not the live weights
of the moment the window was read."""

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
from seed_rl.learner import summaries
from seed_rl.learner.checkpoints import WeightHistory
from seed_rl.learner.learner import Learner


def _config(tmp_path, **run):
    config = get_preset("test_vtrace")
    return on_free_loopback_port(replace(
        config, env=EnvConfig(family="test", name="correct_action:length=10"),
        run=replace_flat(config.run, logdir=str(tmp_path / "run"), **run)))


def test_the_history_keeps_a_bounded_spaced_set_of_versions_and_finds_the_nearest():
    v = tf.Variable(np.zeros(3, np.float32))
    history = WeightHistory([v], max_snapshots=8)
    assert history.capacity == 8 and history.nearest(3) is None
    for version in range(20):
        v.assign(np.full(3, version, np.float32))
        history.record(version)
    assert history.versions() == list(range(12, 20))  # the newest 8
    version, weights = history.nearest(2.0)  # older than any kept: the oldest kept
    assert version == 12 and np.all(weights[0] == 12)
    version, weights = history.nearest(15.5)  # equally near 15 and 16: the older
    assert version == 15 and np.all(weights[0] == 15)
    v.assign(np.full(3, -1.0, np.float32))
    assert np.all(history.nearest(15)[1][0] == 15)  # a copy, not a view of the variable
    history.set_span(40)  # a window spans 40 versions: a copy every 40 / (8 / 2) = 10 versions
    assert history.spacing == 10
    for version in range(20, 45):
        history.record(version)
    assert history.versions()[-3:] == [19, 29, 39]  # 10 apart from the last kept (19)


def test_the_history_keeps_fewer_copies_of_large_weights():
    v = tf.Variable(np.zeros(1024, np.float32))  # 4 KiB a copy
    assert WeightHistory([v], max_snapshots=32, max_bytes=5 * 4096).capacity == 5
    assert WeightHistory([v], max_snapshots=32, max_bytes=100).capacity == 2  # never fewer than 2


def test_a_new_best_window_saves_the_weights_of_the_version_that_played_it(tmp_path):
    """Versions 0..9 each get distinct weights; a window whose episodes' middle versions have median 3 saves
    version 3's weights, although the live weights are version 9's."""
    learner = Learner(_config(tmp_path, total_environment_frames=10_000), status_stream=io.StringIO())
    logdir = learner.config.run.tracking.logdir
    network = learner.agent.checkpoint_items()["network"]
    originals = {id(v): v.numpy() for v in learner.history.variables}
    for version in range(1, 10):
        for v in learner.history.variables:
            v.assign(originals[id(v)] + version)
        learner.policy_version.assign(version)
        learner.history.record(version)
    learner.episode_log = summaries.EpisodeLog(logdir)
    # 20 episodes: middle versions 2.5, 3, 3, ... (median 3)
    episodes = [summaries.Episode(100 * i, 5.0, 5.0, 10, 10, i % 4, 0.0, False, first_policy_version=2 + (i > 0),
                                  last_policy_version=3) for i in range(20)]
    learner.episode_log.write(episodes)
    learner._maybe_save_best()
    with open(os.path.join(logdir, "checkpoints", "best", "best.json")) as f:
        best = json.load(f)
    assert best["policy_version"] == 3 and best["window_policy_versions"] == [2, 3], best
    reader = tf.train.load_checkpoint(checkpoint_path(logdir, "best"))
    assert int(reader.get_tensor("train_steps/.ATTRIBUTES/VARIABLE_VALUE")) == 3
    for i, v in enumerate(network):  # version 3's weights (the original plus 3), not the live ones (plus 9)
        saved = reader.get_tensor(f"network/{i}/.ATTRIBUTES/VARIABLE_VALUE")
        np.testing.assert_allclose(saved, originals[id(v)] + 3, rtol=1e-6)
        np.testing.assert_allclose(v.numpy(), originals[id(v)] + 9, rtol=1e-6)
    learner.episode_log.close()


def test_a_run_records_each_episodes_versions_and_names_them_in_best_json(tmp_path):
    run = LocalRun(_config(tmp_path, total_environment_frames=6_000), actor_mode="thread",
                   status_stream=io.StringIO())
    run.run()
    logdir = run.config.run.tracking.logdir
    episodes = summaries.read_episodes(os.path.join(logdir, "episodes.csv"))
    assert episodes and all(0 <= e.first_policy_version <= e.last_policy_version for e in episodes)
    last = [e.last_policy_version for e in episodes]
    assert last == sorted(last) and last[-1] > 0  # versions only grow, and training moved them
    with open(os.path.join(logdir, "checkpoints", "best", "best.json")) as f:
        best = json.load(f)
    low, high = best["window_policy_versions"]
    assert low <= high
    # the kept snapshot nearest to the window's median version: within the window's versions, or (when the
    # window began before the oldest snapshot) at most a few spacings above its lowest
    assert low - 1 <= best["policy_version"] <= high + 1, best
    assert best["saved_at_frames"] >= best["env_frames"], best


def test_an_episodes_file_of_the_old_layout_goes_on_in_its_own_columns(tmp_path):
    path = tmp_path / "episodes.csv"
    old_fields = summaries.CSV_FIELDS[:8]
    path.write_text(",".join(old_fields) + "\n100,1,1,4,4,0,0.000,0\n")
    log_ = summaries.EpisodeLog(str(tmp_path), window=2)
    log_.write([summaries.Episode(200, 2.0, 2.0, 4, 4, 1, 0.0, False, 5, 7)])
    log_.close()
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(old_fields) and all(len(line.split(",")) == 8 for line in lines)
    episodes = summaries.read_episodes(str(path))
    assert [(e.first_policy_version, e.last_policy_version) for e in episodes] == [(-1, -1), (-1, -1)]
    # a window with an unknown version names none: the best falls back to the latest kept weights
    log_ = summaries.EpisodeLog(str(tmp_path), window=2)
    assert log_.window_policy_version() is None and log_.window_policy_versions() is None
    log_.close()
