"""``seed-rl eval`` (and ``seed_rl.evaluate``) for every registered agent, sampling and greedy, from a run
directory laid out as the learner writes it (config.json + a checkpoint of the agent's items)."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest

from seed_rl import agents as agents_lib
from seed_rl import cli
from seed_rl.config import replace
from seed_rl.configs import get_preset
from seed_rl.envs import env_specs
from seed_rl.evaluate import evaluate, load_agent
from seed_rl.learner.checkpoints import RunCheckpoint


def _run_dir(tmp_path, agent_name: str, seed: int = 3) -> str:
    config = get_preset(f"classic_{agent_name}")
    logdir = str(tmp_path / agent_name)
    config = replace(config, run=replace(config.run, logdir=logdir))
    os.makedirs(logdir)
    with open(os.path.join(logdir, "config.json"), "w") as f:
        f.write(config.to_json())
    obs_spec, act_spec = env_specs(config.env)
    keras.utils.set_random_seed(seed)
    agent = agents_lib.make_agent(agent_name, config.agent, obs_spec, act_spec, num_envs=4)
    RunCheckpoint(logdir, agent.checkpoint_items()).save(1)
    return logdir


@pytest.mark.parametrize("agent_name", agents_lib.agent_names())
def test_eval_restores_the_checkpoint_and_plays_greedily(agent_name, tmp_path):
    logdir = _run_dir(tmp_path, agent_name)
    config, agent = load_agent(logdir)
    assert config.agent_name == agent_name
    # The restored weights are the checkpoint's, not a fresh initialisation.
    keras.utils.set_random_seed(3)
    obs_spec, act_spec = env_specs(config.env)
    reference = agents_lib.make_agent(agent_name, config.agent, obs_spec, act_spec, num_envs=4)
    for a, b in zip(agent.policy_variables, reference.policy_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    agent_cls = type(agent)
    calls = []
    original = agent_cls.greedy_action

    def counting(self, outputs):
        calls.append(1)
        return original(self, outputs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(agent_cls, "greedy_action", counting)
        greedy = evaluate(logdir, num_episodes=2, greedy=True)
        steps = len(calls)
        assert steps >= 2  # --greedy acts through the protocol's greedy action, once per step
        assert len(greedy) == 2 and all(r >= 1 for r in greedy)  # CartPole: at least one step per episode
        # Greedy play from the same start is deterministic: the same returns twice.
        assert evaluate(logdir, num_episodes=2, greedy=True) == greedy
        calls.clear()
        evaluate(logdir, num_episodes=1, greedy=False)
        assert not calls  # sampling (or the agent's eval policy) does not take the greedy action


@pytest.mark.parametrize("agent_name", agents_lib.agent_names())
def test_seed_rl_eval_greedy_command(agent_name, tmp_path, capsys):
    logdir = _run_dir(tmp_path, agent_name)
    assert cli.main(["seed-rl", "eval", f"--logdir={logdir}", "--num_episodes=1", "--greedy"]) == 0
    out = capsys.readouterr().out
    assert "seed-rl eval: 1 episodes, mean return" in out
