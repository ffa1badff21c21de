"""Classic family, the factory (dispatch, seeding, errors), specs, and the package's import hygiene."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from seed_rl.config import EnvConfig
from seed_rl.envs import action_spec, create_environment, env_specs, observation_spec
from seed_rl.envs.classic import ActionRepeat, CastObservation, UnitBoxActions, create_classic_environment
from seed_rl.envs.specs import observation_space_spec, space_to_spec, tuple_keys
from seed_rl.types import ArraySpec


def test_cartpole_specs():
    obs_spec, act_spec = env_specs(EnvConfig())
    assert (obs_spec.shape, obs_spec.dtype, obs_spec.num_values) == ((4,), "float32", 0)
    np.testing.assert_allclose(obs_spec.maximum, [4.8, np.inf, 0.41887903, np.inf], rtol=1e-6)
    np.testing.assert_allclose(obs_spec.minimum, [-4.8, -np.inf, -0.41887903, -np.inf], rtol=1e-6)
    assert act_spec == ArraySpec(shape=(), dtype="int32", num_values=2)


def test_specs_are_plain_values_that_compare_and_round_trip_through_json():
    obs_a, act_a = env_specs(EnvConfig())
    obs_b, act_b = env_specs(EnvConfig(seed=7))
    assert obs_a == obs_b and act_a == act_b
    for spec in (obs_a, act_a):
        assert ArraySpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_pendulum_box_action_spec():
    env = create_environment(EnvConfig(name="Pendulum-v1"), env_id=0)
    # The classic family rescales a bounded float Box to [-1, 1] (UnitBoxActions; the torque is [-2, 2]).
    assert action_spec(env) == ArraySpec(shape=(1,), dtype="float32", minimum=-1.0, maximum=1.0)
    assert observation_spec(env) == ArraySpec(
        shape=(3,), dtype="float32", minimum=[-1.0, -1.0, -8.0], maximum=[1.0, 1.0, 8.0]
    )
    env.close()


@pytest.mark.parametrize(
    "space, expected",
    [
        (spaces.Box(0, 255, (2, 3), np.uint8), ArraySpec((2, 3), "uint8", minimum=0, maximum=255)),
        (
            spaces.Box(-1.0, 1.0, (2,), np.float64),
            ArraySpec((2,), "float64", minimum=-1.0, maximum=1.0),
        ),
        (spaces.Discrete(7), ArraySpec((), "int32", num_values=7)),
        (spaces.MultiDiscrete([3, 3]), ArraySpec((2,), "int32", num_values=3)),
        (spaces.MultiBinary(5), ArraySpec((5,), "int8", num_values=2)),
    ],
)
def test_space_to_spec(space, expected):
    assert space_to_spec(space) == expected


@pytest.mark.parametrize(
    "space",
    [spaces.Discrete(3, start=1), spaces.MultiDiscrete([2, 3]), spaces.Tuple([spaces.Discrete(2)])],
)
def test_unsupported_spaces_raise(space):
    with pytest.raises(ValueError, match="space"):
        space_to_spec(space)


def test_observation_tuples_become_dicts_and_multidiscrete_may_differ_per_element():
    """An observation's Tuple is a dict under its indices (zero-padded, so sorted keys keep the tuple's order) and an
    observation's MultiDiscrete may have a different count per element (the largest is num_values, which the
    one-hot needs); an action's must still be uniform (one categorical per element)."""
    blackjack = spaces.Tuple([spaces.Discrete(32), spaces.Discrete(11), spaces.Discrete(2)])
    assert observation_space_spec(blackjack) == {"0": ArraySpec((), "int32", num_values=32),
                                                 "1": ArraySpec((), "int32", num_values=11),
                                                 "2": ArraySpec((), "int32", num_values=2)}
    assert tuple_keys(11) == ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10"]
    assert sorted(tuple_keys(11)) == tuple_keys(11) and tuple_keys(1) == ["0"]
    assert observation_space_spec(spaces.MultiDiscrete([2, 5])) == ArraySpec((2,), "int32", num_values=5)
    with pytest.raises(ValueError, match="same number of values"):
        space_to_spec(spaces.MultiDiscrete([2, 5]))
    with pytest.raises(ValueError, match="nested Tuple"):
        observation_space_spec(spaces.Tuple([spaces.Discrete(2), spaces.Tuple([spaces.Discrete(2)])]))


def test_a_tuple_observation_env_steps_as_a_dict_of_its_spec():
    env = create_environment(EnvConfig(name="Blackjack-v1"), env_id=0)
    spec = observation_spec(env)
    assert sorted(spec) == ["0", "1", "2"] and spec["0"] == ArraySpec((), "int32", num_values=32)
    for obs in (env.reset()[0], env.step(np.int32(0))[0]):
        assert sorted(obs) == ["0", "1", "2"]
        for key, leaf_spec in spec.items():
            leaf_spec.check(obs[key], key, batched=False)
    env.close()


class _OffsetEnv(gymnasium.Env):
    """Discrete spaces that do not start at 0: actions -1, 0, 1 (reward = the action), cells 5..8."""

    observation_space = spaces.Dict({"cell": spaces.Discrete(4, start=5), "pair": spaces.MultiDiscrete([2, 3], start=[1, 1])})
    action_space = spaces.Discrete(3, start=-1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"cell": 5, "pair": np.array([1, 3])}, {}

    def step(self, action):
        assert action in (-1, 0, 1), action
        return {"cell": 8, "pair": np.array([2, 1])}, float(action), False, False, {}


def test_discrete_spaces_that_start_elsewhere_are_counted_from_zero_and_actions_shifted_back():
    env = CastObservation(UnitBoxActions(_OffsetEnv()))
    assert action_spec(env) == ArraySpec((), "int32", num_values=3)
    assert observation_spec(env) == {"cell": ArraySpec((), "int32", num_values=4),
                                     "pair": ArraySpec((2,), "int32", num_values=3)}
    obs, _ = env.reset()
    assert int(obs["cell"]) == 0 and obs["pair"].tolist() == [0, 2]
    rewards = [env.step(np.int32(a))[1] for a in (0, 1, 2)]
    assert rewards == [-1.0, 0.0, 1.0]  # index 0 is the env's -1
    obs = env.step(np.int32(2))[0]
    assert int(obs["cell"]) == 3 and obs["pair"].tolist() == [1, 0] and obs["cell"].dtype == np.int32


class _Float64DictEnv(gymnasium.Env):
    """Observations of the dtypes gymnasium envs sometimes produce (float64, python ints)."""

    observation_space = spaces.Dict(
        {"position": spaces.Box(-1.0, 1.0, (2,), np.float64), "cell": spaces.Discrete(4)}
    )
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"position": np.array([0.5, -0.5]), "cell": 3}, {}

    def step(self, action):
        return {"position": np.array([0.25, 0.0]), "cell": 1}, 1.0, False, False, {}


def test_cast_observation_dict_of_float64_and_discrete():
    env = CastObservation(_Float64DictEnv())
    spec = observation_spec(env)
    assert spec == {
        "position": ArraySpec((2,), "float32", minimum=-1.0, maximum=1.0),
        "cell": ArraySpec((), "int32", num_values=4),
    }
    for obs in (env.reset()[0], env.step(0)[0]):
        for key, leaf_spec in spec.items():
            assert isinstance(obs[key], np.ndarray)
            leaf_spec.check(obs[key], key, batched=False)


def test_cartpole_observations_are_float32_arrays():
    env = create_environment(EnvConfig(), env_id=0)
    obs, _ = env.reset()
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and obs.shape == (4,)
    obs, reward, terminated, truncated, _ = env.step(np.int32(1))
    assert obs.dtype == np.float32 and isinstance(terminated, bool) and isinstance(truncated, bool)
    assert float(reward) == 1.0
    env.close()


def test_discrete_observations_are_int32_scalars():
    env = create_environment(EnvConfig(name="FrozenLake-v1"), env_id=0)
    obs, _ = env.reset()
    assert observation_spec(env) == ArraySpec((), "int32", num_values=16)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.int32 and obs.shape == ()
    env.close()


def first_observations(config: EnvConfig, env_id: int, resets: int = 1):
    env = create_environment(config, env_id)
    observations = [env.reset()[0] for _ in range(resets)]
    env.close()
    return observations


def test_seeding_is_config_seed_plus_env_id():
    a = first_observations(EnvConfig(seed=3), env_id=2)[0]
    b = first_observations(EnvConfig(seed=3), env_id=2)[0]
    c = first_observations(EnvConfig(seed=5), env_id=0)[0]
    d = first_observations(EnvConfig(seed=3), env_id=3)[0]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, d)
    raw = gymnasium.make("CartPole-v1")
    np.testing.assert_array_equal(a, raw.reset(seed=5)[0])


def test_only_the_first_reset_is_seeded_and_an_explicit_seed_wins():
    first, second = first_observations(EnvConfig(), env_id=0, resets=2)
    assert not np.array_equal(first, second)
    env = create_environment(EnvConfig(), env_id=0)
    obs, _ = env.reset(seed=42)
    np.testing.assert_array_equal(obs, gymnasium.make("CartPole-v1").reset(seed=42)[0])


def test_time_limit_is_truncation():
    env = create_environment(EnvConfig(name="Pendulum-v1"), env_id=0)  # 200 steps, never terminates
    env.reset()
    for step in range(1, 201):
        _, _, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
        assert not terminated
        assert truncated == (step == 200)
    env.close()


def test_action_repeat_sums_rewards_and_stops_at_the_end():
    repeated = create_environment(EnvConfig(name="Pendulum-v1", num_action_repeats=3, seed=1), 0)
    single = create_environment(EnvConfig(name="Pendulum-v1", seed=1), env_id=0)
    np.testing.assert_array_equal(repeated.reset()[0], single.reset()[0])
    for torque in (2.0, -1.0, 0.5, 0.0):
        action = np.array([torque], np.float32)
        obs, reward, *_ = repeated.step(action)
        inner = [single.step(action) for _ in range(3)]
        np.testing.assert_array_equal(obs, inner[-1][0])
        assert reward == pytest.approx(sum(float(step[1]) for step in inner), rel=1e-12)
    # CartPole pushed one way ends in about 10 steps: the repeat stops there.
    env = ActionRepeat(gymnasium.make("CartPole-v1"), 100)
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step(1)
    assert terminated and not truncated and 5 <= reward < 100


def test_unknown_gymnasium_id():
    with pytest.raises(ValueError, match="unknown gymnasium id 'CartPol-v1'.*CartPole-v1"):
        create_environment(EnvConfig(name="CartPol-v1"), env_id=0)


def _needs_a_missing_package(**kwargs):
    raise gymnasium.error.DependencyNotInstalled('Box2D is not installed, run `pip install "gymnasium[box2d]"`')


def test_an_id_whose_package_is_missing_is_a_value_error_that_says_what_to_install():
    """LunarLander-v3 without Box2D: gymnasium's DependencyNotInstalled became a traceback at the command line; as a
    ValueError it is the CLI's one line (exit code 2), with gymnasium's advice."""
    gymnasium.register("SeedRlTestNeedsBox2D-v0", entry_point=_needs_a_missing_package)
    try:
        with pytest.raises(ValueError, match=r"'SeedRlTestNeedsBox2D-v0' needs a package that is not installed: "
                                             r"Box2D is not installed, run `pip install \"gymnasium\[box2d\]\"`"):
            create_environment(EnvConfig(name="SeedRlTestNeedsBox2D-v0"), env_id=0)
    finally:
        gymnasium.registry.pop("SeedRlTestNeedsBox2D-v0", None)


def test_an_ale_id_points_to_the_atari_family():
    with pytest.raises(ValueError, match=r"for Atari, --env=atari --env_name=NoSuchGame trains with the original's "
                                         r"preprocessing .* and ale_py:ALE/NoSuchGame-v5 is the raw env"):
        create_environment(EnvConfig(name="ALE/NoSuchGame-v5"), env_id=0)


def test_unknown_family():
    family = "bogus"
    with pytest.raises(ValueError, match=f"unknown env family '{family}'; known families: classic, atari, mujoco, "
                                         "football, dmlab, test"):
        create_environment(EnvConfig(family=family), env_id=0)
    duck_config = types.SimpleNamespace(family=family, name="x", seed=0, num_action_repeats=1)
    with pytest.raises(ValueError, match=f"unknown env family '{family}'.*classic, atari, mujoco, football, dmlab, test"):
        create_environment(duck_config, env_id=0)


def test_negative_env_id():
    with pytest.raises(ValueError, match="env_id"):
        create_environment(EnvConfig(), env_id=-1)


def test_importing_envs_loads_no_tensorflow_ale_or_cv2():
    code = (
        "import sys, seed_rl.envs\n"
        "from seed_rl.config import EnvConfig\n"
        "seed_rl.envs.env_specs(EnvConfig())\n"
        "seed_rl.envs.env_specs(EnvConfig(family='test', name='counting'))\n"
        "loaded = [m for m in ('tensorflow', 'keras', 'ale_py', 'cv2') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_module_that_registers_from_a_function_has_it_called_once():
    """``module:EnvId`` where importing the module registers nothing but it has ``register_envs()`` (MinAtar's
    ``minatar.gym``): the family calls it when the id is missing, and not again once it is there."""
    from tests.envs import lazy_env_module

    env = create_classic_environment(lazy_env_module.NAME)
    assert env.reset(seed=0)[0].shape == env.observation_space.shape
    create_classic_environment(lazy_env_module.NAME)
    assert len(lazy_env_module.CALLS) == 1


def test_minatar_is_reached_through_gymnasium_as_a_user_would():
    pytest.importorskip("minatar", reason="MinAtar is the optional extra [minatar]")
    env = create_classic_environment("minatar.gym:MinAtar/Breakout-v1")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (10, 10, 4) and env.action_space.n == 3
