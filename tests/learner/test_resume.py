"""Resuming a run directory with another config: refused before anything is written when it cannot resume (agent,
env, a network the checkpoint does not fit), listed and recorded when it can (learning rate, budget)."""

from __future__ import annotations

import os

import pytest

from seed_rl.config import replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.learner.learner import Learner
from seed_rl.learner.resume import CHANGES_FILE, ConfigChange, ResumeError, checkpoint_mismatch, config_changes


def _config(logdir: str, **agent):
    config = get_preset("classic_vtrace")
    config = replace(config, run=replace_flat(config.run, logdir=logdir, num_actors=1, env_batch_size=2,
                                              server_address="127.0.0.1:0"),
                     agent=replace_flat(config.agent, **{"mlp_sizes": (8,), "lstm_size": 0, **agent}))
    return config


def _snapshot(logdir: str) -> dict:
    """Every file of the run directory with its bytes and mtime."""
    out = {}
    for root, _, files in os.walk(logdir):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, logdir)] = (f.read(), os.stat(path).st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("resume") / "run")
    learner = Learner(_config(logdir))
    learner.checkpoints.save(3)
    return logdir


def test_a_network_the_checkpoint_does_not_fit_is_refused_without_touching_the_run(run_dir):
    before = _snapshot(run_dir)
    with pytest.raises(ResumeError) as error:
        Learner(_config(run_dir, mlp_sizes=(32, 32)))
    message = str(error.value)
    assert "cannot resume" in message and "agent.mlp_sizes: [8] -> [32, 32]" in message
    assert "new --logdir" in message and "\n" not in message
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize("change, field", [
    (dict(agent_name="r2d2"), "agent_name"),
    (dict(env_name="Acrobot-v1"), "env.name"),
])
def test_another_agent_or_env_is_refused_naming_the_field(run_dir, change, field):
    before = _snapshot(run_dir)
    config = _config(run_dir)
    if "agent_name" in change:
        r2d2 = get_preset("classic_r2d2")
        config = replace(r2d2, run=config.run)
    else:
        config = replace(config, env=replace(config.env, name=change["env_name"]))
    with pytest.raises(ResumeError, match=f"cannot resume .*{field}: "):
        Learner(config)
    assert _snapshot(run_dir) == before


def test_a_change_that_can_resume_is_listed_and_recorded(tmp_path, caplog):
    logdir = str(tmp_path / "run")
    Learner(_config(logdir)).checkpoints.save(1)
    config = _config(logdir, learning_rate=5e-4)
    config = replace(config, run=replace_flat(config.run, total_environment_frames=123_456))
    with caplog.at_level("WARNING"):
        learner = Learner(config)
    assert learner.restored_from and learner.restored_from.endswith("ckpt-1")
    assert "agent.learning_rate" in caplog.text and "run.total_environment_frames" in caplog.text
    with open(os.path.join(logdir, CHANGES_FILE)) as f:
        lines = f.read().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("agent.learning_rate: 0.001 -> 0.0005")  # classic_vtrace's rate, then the new one
    assert lines[1].endswith("run.total_environment_frames: 1000000 -> 123456")
    with open(os.path.join(logdir, "config.json")) as f:
        assert '"total_environment_frames": 123456' in f.read()  # config.json holds what this session runs


def test_config_changes_ignores_where_the_learner_serves():
    old = '{"run": {"logdir": "/a", "server_address": "127.0.0.1:1", "batch_size": 2}, "agent": {"lr": 1}}'
    new = '{"run": {"logdir": "/b", "server_address": "127.0.0.1:2", "batch_size": 4}, "agent": {"lr": 1}}'
    assert config_changes(old, new) == [ConfigChange("run.batch_size", 2, 4)]


def test_an_env_option_added_since_a_run_began_is_no_change_at_its_default():
    """A config.json written before an option existed (Atari's terminal_on_life_loss) resumes without a change
    line for it; a value other than the default is still a change."""
    old = '{"env": {"family": "atari", "name": "Pong", "options": {"frame_stack": 4}}, "run": {}}'
    new = ('{"env": {"family": "atari", "name": "Pong", "options": {"frame_stack": 4, '
           '"terminal_on_life_loss": %s}}, "run": {}}')
    assert config_changes(old, new % "false") == []
    assert config_changes(old, new % "true") == [ConfigChange("env.options.terminal_on_life_loss", False, True)]


def test_a_config_the_agent_refuses_creates_no_run_directory(tmp_path):
    logdir = str(tmp_path / "pendulum")
    config = _config(logdir)
    # Continuous actions with a one-hot previous-action input: V-trace refuses.
    config = replace(config, env=replace(config.env, name="Pendulum-v1"),
                     agent=replace(config.agent, use_reward_and_action=True))
    with pytest.raises(ValueError, match="needs one discrete action"):
        Learner(config)
    assert not os.path.exists(logdir)


def test_a_checkpoint_that_does_not_fit_an_unchanged_config_blames_the_code_not_the_user():
    """A run on a discrete observation from before the one-hot: config.json is the same, the network is not. The
    message said only "no field of config.json changed", which left the user nowhere."""
    error = ValueError("Received incompatible tensor with shape (16, 64) when attempting to restore variable with "
                       "shape (1, 64)")
    message = str(checkpoint_mismatch("/runs/lake", [], error))
    assert "no field of config.json changed, so the code that builds the network did" in message
    assert "one-hot" in message and "(16, 64)" in message and "new --logdir" in message
    changed = str(checkpoint_mismatch("/runs/lake", [ConfigChange("agent.mlp_sizes", [64, 64], [32])], error))
    assert "agent.mlp_sizes" in changed and "code" not in changed


def test_a_resumed_run_trains_at_its_new_constant_learning_rate(tmp_path):
    """Keras keeps a constant learning rate as an optimizer variable, which the checkpoint restores: the flag of the
    resumed run must win over the rate the checkpoint was saved with."""
    logdir = str(tmp_path / "run")
    constant = dict(optimizer=replace(get_preset("classic_vtrace").agent.optimizer, lr_schedule="constant"))
    first = Learner(_config(logdir, **constant))
    assert float(first.trainer.optimizer.learning_rate) == pytest.approx(1e-3)
    first.checkpoints.save(1)
    resumed = Learner(_config(logdir, **constant, learning_rate=5e-4))
    assert resumed.restored_from
    assert float(resumed.trainer.optimizer.learning_rate) == pytest.approx(5e-4)
    unchanged = Learner(_config(logdir, **constant))
    assert float(unchanged.trainer.optimizer.learning_rate) == pytest.approx(1e-3)


def test_a_resumed_run_takes_its_new_fixed_entropy_cost_and_keeps_an_adapted_one(tmp_path):
    """Without a target entropy V-trace's entropy cost is a constant of the config, so a resumed run takes a new
    --entropy_cost; with one, the cost is learned state that the checkpoint keeps."""
    fixed = str(tmp_path / "fixed")
    Learner(_config(fixed, entropy_cost=0.01)).checkpoints.save(1)
    resumed = Learner(_config(fixed, entropy_cost=0.003))
    assert resumed.restored_from and float(resumed.agent.entropy_cost()) == pytest.approx(0.003)

    adapted = str(tmp_path / "adapted")
    first = Learner(_config(adapted, entropy_cost=0.01, target_entropy=0.5))
    first.agent.entropy_cost.param.assign(first.agent.entropy_cost.param * 0.5)  # as if it had adapted
    learned = float(first.agent.entropy_cost())
    first.checkpoints.save(1)
    again = Learner(_config(adapted, entropy_cost=0.003, target_entropy=0.5))
    assert float(again.agent.entropy_cost()) == pytest.approx(learned)
