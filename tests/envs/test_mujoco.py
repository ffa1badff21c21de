"""The mujoco family: gymnasium's v5 tasks with float32 observations, actions in [-1, 1] and the time limit as a
truncation; and the classic family's rescaling of bounded Box actions (Pendulum-v1's [-2, 2] torque)."""

import numpy as np
import pytest

from seed_rl.config import EnvConfig
from seed_rl.envs import action_spec, create_environment, env_specs, observation_spec
from seed_rl.types import ArraySpec

pytest.importorskip("mujoco", reason="the mujoco family needs pip install -e .[mujoco]")


def test_halfcheetah_specs_and_steps():
    config = EnvConfig(family="mujoco", name="HalfCheetah-v5")
    obs_spec, act_spec = env_specs(config)
    assert obs_spec == ArraySpec((17,), "float32", minimum=-np.inf, maximum=np.inf)
    assert act_spec == ArraySpec((6,), "float32", minimum=-1.0, maximum=1.0)
    env = create_environment(config, env_id=3)
    obs, _ = env.reset()
    assert obs.dtype == np.float32 and obs.shape == (17,)
    obs, reward, terminated, truncated, _ = env.step(np.ones(6, np.float32))
    assert obs.dtype == np.float32 and np.isfinite(reward) and not terminated and not truncated


def test_a_bare_task_name_means_its_v5_id_and_old_ids_are_refused():
    env = create_environment(EnvConfig(family="mujoco", name="Hopper"), env_id=0)
    assert env.unwrapped.spec.id == "Hopper-v5"
    with pytest.raises(ValueError, match=r"v5 tasks .*use HalfCheetah-v5"):
        create_environment(EnvConfig(family="mujoco", name="HalfCheetah-v2"), env_id=0)
    with pytest.raises(ValueError, match="unknown MuJoCo task 'HalfCheeta-v5'.*HalfCheetah"):
        create_environment(EnvConfig(family="mujoco", name="HalfCheeta-v5"), env_id=0)
    with pytest.raises(ValueError, match="num_action_repeats=1"):
        create_environment(EnvConfig(family="mujoco", name="Hopper-v5", num_action_repeats=2), env_id=0)


def test_the_time_limit_is_a_truncation():
    env = create_environment(EnvConfig(family="mujoco", name="Swimmer-v5"), env_id=0)  # never terminates
    env.reset()
    steps, truncated, terminated = 0, False, False
    while not (truncated or terminated):
        _, _, terminated, truncated, _ = env.step(np.zeros(2, np.float32))
        steps += 1
    assert truncated and not terminated and steps == 1000  # gymnasium's TimeLimit of the v5 tasks


def test_pendulum_actions_are_rescaled_from_unit_bounds():
    env = create_environment(EnvConfig(family="classic", name="Pendulum-v1"), env_id=0)
    assert action_spec(env) == ArraySpec((1,), "float32", minimum=-1.0, maximum=1.0)
    assert observation_spec(env).shape == (3,)
    env.reset()
    for unit, torque in ((1.0, 2.0), (-1.0, -2.0), (0.25, 0.5)):
        env.step(np.array([unit], np.float32))
        assert env.unwrapped.last_u == pytest.approx(torque)
