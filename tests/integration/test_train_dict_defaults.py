"""End to end: a run that names no network, on the package's own dict-observation env (Catch with the ball in a
``uint8 [10, 10, 1]`` frame and the paddle's column in a ``float32 [5]`` one-hot, ``--env=test
--env_name=catch:size=10,dict_obs=1``), gets the ``multi_input`` network from the observation spec, says so at
start and in its config.json, and trains through the real learner and actors.

In the default suite, a few training steps in process (the learner here, an actor thread over loopback gRPC): dict
observations through the actor's env batch, the wire format, the inference step and unroll store, the V-trace
loss, the checkpoint, the SavedModel (one input per key) and ``load_policy``.

Slow (``./run_tests.sh --slow``; the two runs take about a minute on two shared cores together): V-trace learns
Catch through it as a real ``seed-rl train`` run, and with the policy gradient's sign flipped it does not. Catch
ends after 9 steps with +1 (the ball caught) or -1; random play averages about -0.5. The threshold, a mean of 0.8
over 20 episodes, needs the ball's column from the frame; the flipped control learns to miss. Measured with seeds
1-3 on two shared cores: the threshold reached within 8K frames each; the learning run's budget is 30K, the
control's 12K (at least 1.5x the slowest seed). Both are background learning runs (``learning_runs.OTHER_RUNS``).
"""

import io
import json
import os

import numpy as np
import pytest

from seed_rl.config import EnvConfig, replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.configs.defaults import fit_network
from seed_rl.envs import env_specs
from tests.integration import learning_runs
from tests.integration.helpers import best_rolling_mean, episodes

DICT_CATCH = EnvConfig(family="test", name="catch:size=10,dict_obs=1")


def test_a_dict_env_trains_end_to_end_through_the_default_network(tmp_path):
    import tensorflow as tf

    import seed_rl
    from seed_rl.launch.local import LocalRun, on_free_loopback_port

    observation_spec, action_spec = env_specs(DICT_CATCH)
    preset = get_preset("test_vtrace")
    config = replace(preset, env=DICT_CATCH, run=replace_flat(preset.run, logdir=str(tmp_path / "run"),
                                                              env_batch_size=4, total_environment_frames=200))
    choice = fit_network(config, observation_spec)
    assert choice.network == "multi_input"
    run = LocalRun(on_free_loopback_port(choice.config), actor_mode="thread", status_stream=io.StringIO(),
                   observation_spec=observation_spec, action_spec=action_spec)
    run.run()
    logdir = run.config.run.tracking.logdir
    assert run.learner.finished and int(run.learner.policy_version.numpy()) >= 5  # trained, not only acted
    with open(os.path.join(logdir, "config.json")) as f:
        assert json.load(f)["agent"]["network"] == "multi_input"
    inputs = tf.saved_model.load(os.path.join(logdir, "saved_model")).signatures["serving_default"] \
        .structured_input_signature[1]
    assert {"observation_ball", "observation_paddle"} <= set(inputs) and "observation" not in inputs
    env = seed_rl.create_environment(DICT_CATCH, 0)
    for source in ("checkpoint", "saved_model"):
        policy = seed_rl.load_policy(logdir, source=source)
        observation, _ = env.reset(seed=0)
        policy.reset()
        action = policy.act(observation)
        assert 0 <= int(np.asarray(action)) < 3, (source, action)

BUDGET = 30_000  # env frames
CONTROL_BUDGET = 12_000
THRESHOLD = 0.8
CONTROL_BELOW = 0.2  # random play's windows of 20 stay near -0.5
TIMEOUT = 1800  # seconds: the runs share two cores with the rest of the suite


@pytest.mark.slow
@pytest.mark.learning_run("dict_defaults")
@pytest.mark.timeout(2400)  # it may wait for its background run
def test_the_default_network_of_a_dict_env_learns_catch():
    logdir, proc = learning_runs.check_default_network_run(
        "dict_defaults", "network: multi_input (observation {ball: [10, 10, 1] uint8 (small image), paddle: [5] "
        "float32 (vector)}: a dict of arrays; --network overrides)", "multi_input", BUDGET, THRESHOLD, TIMEOUT)
    # The run ends by exporting its SavedModel, whose serving signature takes one input per key.
    assert os.path.isdir(os.path.join(logdir, "saved_model")), proc.output()


@pytest.mark.slow
@pytest.mark.learning_run("dict_defaults_control")
@pytest.mark.timeout(2400)
def test_a_flipped_policy_gradient_does_not_learn_through_it():
    flags = learning_runs.OTHER_RUNS["dict_defaults_control"][0]
    assert f"--total_environment_frames={CONTROL_BUDGET}" in flags and "--flip_policy_gradient=true" in flags
    logdir, proc = learning_runs.current().wait("dict_defaults_control", TIMEOUT)
    assert proc.proc.returncode == 0, proc.output()
    assert any(line.startswith("network: multi_input (") for line in proc.lines), proc.output()
    eps = episodes(logdir)
    assert eps and eps[-1].env_frames >= CONTROL_BUDGET * 0.95  # it used its whole budget
    best, _ = best_rolling_mean(eps)
    assert best < CONTROL_BELOW, f"the flipped control reached a mean return of {best:.2f}"
