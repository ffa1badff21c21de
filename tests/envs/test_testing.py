"""The test envs behave exactly as seed_rl/envs/testing.py documents (table-driven)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from seed_rl.config import EnvConfig
from seed_rl.envs import TEST_ENVS, create_environment, env_specs, observation_spec
from seed_rl.envs.testing import CountingEnv, parse_test_env_name
from seed_rl.types import ArraySpec


def make(name: str, env_id: int = 0, **config):
    return create_environment(EnvConfig(family="test", name=name, **config), env_id)


# (name, env_id, actions, expected per step: (observation, reward, terminated, truncated)).
# Observation of `counting`: (env_id, episode, step, previous action); reward of action a at step t: t + 1 + a.
EPISODE_CASES = [
    (
        "counting:length=3",
        2,
        [0, 1, 2],
        [
            ([2, 0, 0, -1], 0.0, False, False),  # reset
            ([2, 0, 1, 0], 1.0, False, False),
            ([2, 0, 2, 1], 3.0, False, False),
            ([2, 0, 3, 2], 5.0, True, False),
        ],
    ),
    (
        "truncating:length=2,num_actions=2",
        0,
        [1, 1],
        [
            ([0, 0, 0, -1], 0.0, False, False),
            ([0, 0, 1, 1], 2.0, False, False),
            ([0, 0, 2, 1], 3.0, False, True),
        ],
    ),
    (
        "counting:length=1,truncate=true",
        7,
        [2],
        [([7, 0, 0, -1], 0.0, False, False), ([7, 0, 1, 2], 3.0, False, True)],
    ),
    (
        "crashing:crash_after=100,length=2",
        1,
        [0, 0],
        [
            ([1, 0, 0, -1], 0.0, False, False),
            ([1, 0, 1, 0], 1.0, False, False),
            ([1, 0, 2, 0], 2.0, True, False),
        ],
    ),
]


@pytest.mark.parametrize("name, env_id, actions, expected", EPISODE_CASES)
def test_counting_episodes(name, env_id, actions, expected):
    env = make(name, env_id)
    obs_spec = observation_spec(env)
    for episode in range(2):
        obs, _ = env.reset()
        steps = [(obs, 0.0, False, False)] + [env.step(np.int32(a))[:4] for a in actions]
        for (e_obs, e_reward, e_term, e_trunc), (obs, reward, term, trunc) in zip(expected, steps):
            e_obs = np.array(e_obs, np.int32)
            e_obs[1] = episode
            np.testing.assert_array_equal(obs, e_obs)
            assert obs.dtype == np.int32
            obs_spec.check(obs, "obs", batched=False)
            assert (reward, term, trunc) == (e_reward, e_term, e_trunc)
            assert isinstance(reward, float)
        with pytest.raises(RuntimeError, match="after the episode ended"):
            env.step(0)


@pytest.mark.parametrize(
    "name, expected_spec",
    [
        ("counting", ArraySpec((4,), "int32", minimum=-(2**31), maximum=2**31 - 1)),
        ("counting:image=8", ArraySpec((8, 8, 1), "uint8", minimum=0, maximum=255)),
        ("correct_action:num_actions=5", ArraySpec((5,), "float32", minimum=0.0, maximum=1.0)),
        ("bandit", ArraySpec((4,), "float32", minimum=0.0, maximum=1.0)),
        (
            "counting:dict_obs=1,length=7",
            {
                "counter": ArraySpec((4,), "int32", minimum=-(2**31), maximum=2**31 - 1),
                "step": ArraySpec((1,), "float32", minimum=0.0, maximum=7.0),
            },
        ),
    ],
)
def test_observation_specs(name, expected_spec):
    obs_spec, _ = env_specs(EnvConfig(family="test", name=name))
    assert obs_spec == expected_spec


@pytest.mark.parametrize(
    "name, num_actions",
    [
        ("counting", 3),
        ("counting:num_actions=6", 6),
        ("crashing", 3),
        ("correct_action", 4),
        ("bandit", 4),
    ],
)
def test_action_specs(name, num_actions):
    _, act_spec = env_specs(EnvConfig(family="test", name=name))
    assert act_spec == ArraySpec((), "int32", num_values=num_actions)


def test_image_and_dict_observations():
    env = make("counting:image=6,length=300", env_id=3)
    obs, _ = env.reset()
    expected = np.zeros((6, 6, 1), np.uint8)
    expected[0, :4, 0] = [3, 0, 0, 0]
    np.testing.assert_array_equal(obs, expected)
    for _ in range(257):
        obs, *_ = env.step(2)
    expected[0, :4, 0] = [3, 0, 257 % 256, 3]
    np.testing.assert_array_equal(obs, expected)

    env = make("counting:dict_obs=true", env_id=1)
    obs, _ = env.reset()
    obs, *_ = env.step(1)
    np.testing.assert_array_equal(obs["counter"], np.array([1, 0, 1, 1], np.int32))
    np.testing.assert_array_equal(obs["step"], np.array([1.0], np.float32))


def test_crashing_env_counts_steps_across_episodes():
    env = make("crashing:crash_after=4,length=3")
    env.reset()
    for _ in range(3):
        env.step(0)
    env.reset()
    env.step(0)  # step 4 of this env object
    with pytest.raises(RuntimeError, match="simulated crash after 4 steps"):
        env.step(0)


@pytest.mark.parametrize("env_id, crashes", [(0, False), (2, True)])
def test_crashing_env_only_the_chosen_env_id(env_id, crashes):
    env = make("crashing:crash_after=1,crash_env_id=2,length=10", env_id)
    env.reset()
    env.step(0)
    if crashes:
        with pytest.raises(RuntimeError, match="env_id=2"):
            env.step(0)
    else:
        for _ in range(9):
            env.step(0)


def test_crash_after_zero_crashes_on_the_first_step():
    env = make("crashing:crash_after=0")
    env.reset()
    with pytest.raises(RuntimeError, match="simulated crash"):
        env.step(0)


def test_correct_action_rewards_the_target_and_is_seeded():
    env = make("correct_action:num_actions=3,length=20", env_id=1, seed=4)
    obs, _ = env.reset()
    rewards, targets = [], []
    for step in range(1, 21):
        target = int(np.argmax(obs))
        assert obs.sum() == 1.0 and obs.dtype == np.float32
        action = target if step % 2 else (target + 1) % 3
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["target"] == target
        assert reward == (1.0 if action == target else 0.0)
        assert terminated == (step == 20) and not truncated
        rewards.append(reward)
        targets.append(target)
    assert sum(rewards) == 10.0
    assert len(set(targets)) == 3  # the target changes from step to step
    # Same seed (config.seed + env_id), same targets.
    again = make("correct_action:num_actions=3,length=20", env_id=0, seed=5)
    obs, _ = again.reset()
    replay = []
    for _ in range(20):
        replay.append(int(np.argmax(obs)))
        obs, *_ = again.step(0)
    assert replay == targets


def test_bandit_has_a_fixed_correct_action():
    env = make("bandit:length=4,correct=2")
    obs, _ = env.reset()
    np.testing.assert_array_equal(obs, np.zeros(4, np.float32))
    results = [env.step(a)[1:3] for a in (2, 0, 2, 3)]
    assert results == [(1.0, False), (0.0, False), (1.0, False), (0.0, True)]


def test_action_repeats_step_the_counter_several_times():
    env = make("counting:length=5", num_action_repeats=2)
    env.reset()
    obs, reward, terminated, _, _ = env.step(1)
    np.testing.assert_array_equal(obs, [0, 0, 2, 1])
    assert reward == (1 + 1) + (2 + 1) and not terminated
    env.step(0)
    obs, reward, terminated, _, _ = env.step(0)  # steps 5 only: the episode ends inside the repeat
    np.testing.assert_array_equal(obs, [0, 0, 5, 0])
    assert reward == 5.0 and terminated


@pytest.mark.parametrize(
    "name, message",
    [
        (
            "countin",
            "unknown test env 'countin'.*bandit, catch, correct_action, counting, crashing, truncating",
        ),
        ("counting:lenght=5", "bad argument 'lenght=5'.*length=<int>"),
        ("counting:length", "bad argument 'length'"),
        ("counting:env_id=3", "bad argument 'env_id=3'"),
        ("counting:length=abc", "cannot read 'abc' as int"),
        ("counting:truncate=maybe", "cannot read 'maybe' as bool"),
        ("counting:length=0", "length must be >= 1"),
        ("counting:image=2", "image must be 0 or >= 4"),
        ("bandit:correct=9", r"correct must be in \[0, 4\)"),
    ],
)
def test_bad_names(name, message):
    with pytest.raises(ValueError, match=message):
        make(name)


def test_parse_test_env_name():
    assert parse_test_env_name("counting") == ("counting", {})
    assert parse_test_env_name("crashing: crash_after = 3 , truncate=yes") == (
        "crashing",
        {"crash_after": 3, "truncate": True},
    )


@pytest.mark.parametrize("action", [3, -1, 1.0, np.array([1]), "1"])
def test_invalid_actions_raise(action):
    env = make("counting")
    env.reset()
    with pytest.raises(ValueError, match="action"):
        env.step(action)


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError, match="before the first reset"):
        CountingEnv().step(0)


def test_every_registered_name_creates_and_runs():
    for name in TEST_ENVS:
        env = make(name)
        obs_spec, act_spec = observation_spec(env), env.action_space.n
        obs, _ = env.reset()
        obs_spec.check(obs, name, batched=False)
        obs, reward, *_ = env.step(act_spec - 1)
        obs_spec.check(obs, name, batched=False)
        assert isinstance(reward, float)


@pytest.mark.parametrize(
    "name",
    [
        "counting",
        "truncating",
        "crashing:crash_after=100000",
        "correct_action",
        "bandit",
        "counting:image=8",
        "counting:dict_obs=1",
    ],
)
def test_passes_gymnasium_env_checker(name):
    env = make(name, env_id=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checker warning fails the test
        check_env(env.unwrapped, skip_render_check=True)


def test_a_seeded_reset_restarts_the_episode_count():
    env = make("counting")
    assert [int(env.reset()[0][1]) for _ in range(3)] == [0, 1, 2]
    assert int(env.reset(seed=9)[0][1]) == 0


def test_catch_frames_rewards_and_random_play():
    from seed_rl.envs.testing import CatchEnv, create_test_environment

    env = create_test_environment("catch", 3)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8 and env.observation_space.contains(obs)
    assert isinstance(env, CatchEnv)
    # The perfect policy (move towards the ball's column) always catches it.
    for _ in range(20):
        env.reset()
        done, reward, steps = False, 0.0, 0
        while not done:
            action = 1 + int(np.sign(env.ball_column - env.paddle))
            obs, reward, done, truncated, _ = env.step(action)
            steps += 1
            assert not truncated and (done or reward == 0.0)
        assert reward == 1.0 and steps == 9
    rng = np.random.default_rng(0)
    rewards = []
    for _ in range(500):
        env.reset()
        done = False
        while not done:
            _, reward, done, _, _ = env.step(int(rng.integers(3)))
        rewards.append(reward)
    assert -0.8 < np.mean(rewards) < -0.3  # random play mostly misses
    # The ball and the paddle are drawn: the frame changes as the ball falls.
    first, _ = env.reset()
    second, _, _, _, _ = env.step(1)
    assert first.max() == 255 and not np.array_equal(first, second)


def test_dict_catch_shows_the_ball_in_a_frame_and_the_paddle_in_a_vector():
    from seed_rl.envs.testing import create_test_environment

    env = create_test_environment("catch:size=10,dict_obs=1", 0)
    assert observation_spec(env) == {"ball": ArraySpec((10, 10, 1), "uint8", minimum=0, maximum=255),
                                     "paddle": ArraySpec((5,), "float32", minimum=0.0, maximum=1.0)}
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    # The ball only (a board column is 2 pixels wide at size 10), no paddle.
    assert obs["ball"][0, 2 * env.ball_column, 0] == 255 and obs["ball"].sum() == 2 * 255
    np.testing.assert_array_equal(obs["paddle"], np.eye(5, dtype=np.float32)[2])  # the paddle starts in the middle
    obs, *_ = env.step(0)  # left
    np.testing.assert_array_equal(obs["paddle"], np.eye(5, dtype=np.float32)[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(create_test_environment("catch:size=10,dict_obs=1", 1).unwrapped, skip_render_check=True)
