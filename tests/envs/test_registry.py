"""The env family registry: lookup and its errors, a user's own family, options through JSON (the handshake and
config.json, old layout included), and a user's own gymnasium env through ``module:EnvId``."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import gymnasium
import numpy as np
import pytest

from seed_rl.config import Config, EnvConfig, field
from seed_rl.envs import (
    AtariOptions,
    EnvFamily,
    create_environment,
    env_specs,
    family_names,
    get_family,
    register_family,
    registry,
    resolve_env_config,
)
from seed_rl.envs.dmlab import DmLabOptions
from seed_rl.envs.football import FootballOptions
from seed_rl.envs.testing import create_test_environment
from seed_rl.types import ArraySpec
from tests.envs import custom_env_module


@pytest.fixture
def scratch_registry(monkeypatch):
    """Families registered by the test are gone afterwards."""
    monkeypatch.setattr(registry, "_FAMILIES", dict(registry._FAMILIES))


def test_the_built_in_families_are_registered():
    assert family_names() == ("classic", "atari", "mujoco", "football", "dmlab", "test")
    for name in family_names():
        family = get_family(name)
        assert family.name == name and family.description
    assert get_family("atari").options is AtariOptions
    assert get_family("classic").options is None and get_family("test").options is None
    assert get_family("mujoco").options is None
    assert get_family("football").options is FootballOptions and get_family("dmlab").options is DmLabOptions
    for name in family_names():  # the default raw reward is the env's reward, whatever the info holds
        if name != "football":
            assert get_family(name).raw_reward(2.5, {"score_reward": 7.0}) == 2.5
    # Football counts goals (gfootball's score_reward), as the original's actor did, whatever the training reward.
    assert get_family("football").raw_reward(0.1, {"score_reward": 1.0}) == 1.0
    assert get_family("football").raw_reward(0.1, {}) == pytest.approx(0.1)


def test_unknown_family():
    with pytest.raises(ValueError, match="unknown env family 'bogus'; known families: classic, atari, mujoco, "
                                         "football, dmlab, test"):
        get_family("bogus")


@dataclasses.dataclass(frozen=True)
class CountingOptions:
    length: int = field(3, "Steps per episode.")
    score_scale: float = field(10.0, "The score is the reward times this.")


class _Scored(gymnasium.Wrapper):
    """Adds ``info["score"] = reward * scale`` to every step."""

    def __init__(self, env: gymnasium.Env, scale: float):
        super().__init__(env)
        self.scale = scale

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "score": float(reward) * self.scale}


def _scored_counting(config: EnvConfig, env_id: int) -> gymnasium.Env:
    options = config.options
    assert isinstance(options, CountingOptions)  # the registry resolved it
    env = create_test_environment(f"{config.name}:length={options.length}", env_id, config.num_action_repeats)
    return _Scored(env, options.score_scale)


SCORED = EnvFamily(name="scored", factory=_scored_counting, description="counting, with a score in its info",
                   options=CountingOptions, raw_reward=lambda reward, info: info["score"])


def test_a_users_family_is_created_through_the_registry(scratch_registry):
    assert register_family(SCORED) is SCORED
    assert family_names()[-1] == "scored" and get_family("scored") is SCORED
    env = create_environment(EnvConfig(family="scored", name="counting", seed=3), env_id=1)
    obs, _ = env.reset()
    assert obs.tolist() == [1, 0, 0, -1]  # env id 1, the default length 3
    for step in range(3):
        obs, reward, terminated, _, info = env.step(1)
        assert reward == step + 2 and terminated == (step == 2)
        assert SCORED.raw_reward(reward, info) == 10.0 * (step + 2)
    # Options as a dataclass, or as the dict that JSON brings back.
    for options in (CountingOptions(length=5), {"length": 5}):
        env = create_environment(EnvConfig(family="scored", name="counting", options=options), env_id=0)
        env.reset()
        assert [env.step(0)[2] for _ in range(5)] == [False] * 4 + [True]


class _TupleObservations(gymnasium.Env):
    """A user's env whose observation is a Tuple (a position and a flag), in a family that does not cast."""

    observation_space = gymnasium.spaces.Tuple([gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
                                                gymnasium.spaces.Discrete(2)])
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return (np.zeros(2, np.float32), 1), {}

    def step(self, action):
        return (np.ones(2, np.float32), 0), 1.0, True, False, {}


def test_a_users_family_with_tuple_observations_gets_the_dict_its_spec_announces(scratch_registry):
    """The spec of a Tuple is the dict of its elements; every family's envs produce that dict, not only the classic
    family's (which casts its observations): otherwise the actor would send tuples the learner's spec refuses."""
    register_family(EnvFamily(name="tupled", factory=lambda config, env_id: _TupleObservations(),
                              description="tuple observations"))
    config = EnvConfig(family="tupled", name="any")
    spec, _ = env_specs(config)
    assert spec == {"0": ArraySpec((2,), "float32", minimum=-1.0, maximum=1.0),
                    "1": ArraySpec((), "int32", num_values=2)}
    env = create_environment(config, env_id=0)
    for obs in (env.reset()[0], env.step(0)[0]):
        assert sorted(obs) == ["0", "1"]
        for key, leaf_spec in spec.items():
            leaf_spec.check(obs[key], key, batched=False)


def test_register_family_refuses_a_taken_name_unless_replacing(scratch_registry):
    with pytest.raises(ValueError, match="'classic' is already registered"):
        register_family(dataclasses.replace(get_family("classic")))
    register_family(get_family("classic"))  # the same family again is fine
    replacement = dataclasses.replace(SCORED, name="classic")
    register_family(replacement, replace=True)
    assert get_family("classic") is replacement


def test_family_records_are_checked():
    with pytest.raises(ValueError, match="without ':'"):
        EnvFamily(name="a:b", factory=_scored_counting, description="x")
    with pytest.raises(TypeError, match="dataclass type"):
        EnvFamily(name="a", factory=_scored_counting, description="x", options=dict)

    @dataclasses.dataclass(frozen=True)
    class NoDefault:
        size: int

    with pytest.raises(ValueError, match=r"\['size'\] have none"):
        EnvFamily(name="a", factory=_scored_counting, description="x", options=NoDefault)


def test_options_are_resolved_against_the_family():
    atari = EnvConfig(family="atari", name="Pong")
    assert resolve_env_config(atari).options == AtariOptions()
    assert resolve_env_config(dataclasses.replace(atari, options={"max_random_noops": 5})).options == \
        AtariOptions(max_random_noops=5)
    resolved = resolve_env_config(dataclasses.replace(atari, options=AtariOptions(sticky_actions=True)))
    assert resolve_env_config(resolved) is resolved
    with pytest.raises(ValueError, match=r"env family 'atari': unknown AtariOptions field\(s\): \['noops'\]"):
        resolve_env_config(dataclasses.replace(atari, options={"noops": 5}))
    with pytest.raises(ValueError, match="max_random_noops must be >= 0"):
        resolve_env_config(dataclasses.replace(atari, options={"max_random_noops": -1}))
    with pytest.raises(ValueError, match="'classic' takes no options, got \\['length'\\]"):
        resolve_env_config(EnvConfig(options={"length": 3}))
    with pytest.raises(ValueError, match="'classic' takes no options \\(None\\), got options of type AtariOptions"):
        create_environment(EnvConfig(options=AtariOptions()), env_id=0)
    with pytest.raises(ValueError, match="'atari' takes AtariOptions, got options of type CountingOptions"):
        resolve_env_config(dataclasses.replace(atari, options=CountingOptions()))


def test_env_config_checks_what_it_can_without_the_registry():
    assert EnvConfig(family="not_registered_here").family == "not_registered_here"  # the registry decides
    with pytest.raises(ValueError, match="non-empty"):
        EnvConfig(family="")
    with pytest.raises(ValueError, match="env options must be None, a dict or the family's options dataclass"):
        EnvConfig(options=5)
    with pytest.raises(ValueError, match="num_action_repeats"):
        EnvConfig(num_action_repeats=0)


def test_options_survive_the_json_round_trip_of_the_handshake():
    config = Config(env=EnvConfig(family="atari", name="Breakout", num_action_repeats=4, seed=7,
                                  options=AtariOptions(max_random_noops=5, sticky_actions=True,
                                                       max_episode_frames=400)))
    back = Config.from_json(config.to_json())
    assert back.env.options == {"max_random_noops": 5, "sticky_actions": True, "max_episode_frames": 400,
                                "full_action_space": True, "frame_stack": 1, "atari_engine": "gymnasium",
                                "atari_engine_threads": 1, "terminal_on_life_loss": False}
    assert resolve_env_config(back.env) == config.env
    for env in (EnvConfig(), EnvConfig(family="test", name="counting")):  # no options: null in JSON
        assert Config.from_json(Config(env=env).to_json()).env == env


# A config.json as the code before family options wrote it (the env section of `seed-rl train --env=atari
# --max_random_noops=5 --sticky_actions`): the Atari fields sat at the top of the env section, for every family.
OLD_ATARI_JSON = """{
  "agent": null,
  "agent_name": "vtrace",
  "env": {
    "family": "atari",
    "max_episode_frames": 108000,
    "max_random_noops": 5,
    "name": "Pong",
    "num_action_repeats": 4,
    "seed": 0,
    "sticky_actions": true
  },
  "run": {"num_actors": 1, "env_batch_size": 2}
}"""


def test_an_old_config_json_loads_into_the_new_layout():
    config = Config.from_json(OLD_ATARI_JSON)
    assert config.env == EnvConfig(family="atari", name="Pong", num_action_repeats=4, seed=0, options={
        "max_episode_frames": 108000, "max_random_noops": 5, "sticky_actions": True})
    assert resolve_env_config(config.env).options == AtariOptions(max_random_noops=5, sticky_actions=True)
    # The non-Atari families wrote the same three fields, which they ignored (and still do).
    old_classic = json.loads(OLD_ATARI_JSON)
    old_classic["env"].update(family="classic", name="CartPole-v1", num_action_repeats=1)
    config = Config.from_json(json.dumps(old_classic))
    assert resolve_env_config(config.env) == EnvConfig()
    assert env_specs(config.env)[1] == ArraySpec(shape=(), dtype="int32", num_values=2)
    # An unknown key is still refused: by the family, in the old layout; by EnvConfig, in the new one.
    old_classic["env"]["nmae"] = "CartPole-v1"
    with pytest.raises(ValueError, match=r"'classic' takes no options, got \['nmae'\]"):
        resolve_env_config(Config.from_json(json.dumps(old_classic)).env)
    with pytest.raises(ValueError, match=r"unknown EnvConfig field\(s\): \['nmae'\]"):
        Config.from_json(json.dumps({"env": {"options": None, "nmae": "x"}}))


def test_an_old_atari_config_json_creates_the_same_env():
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    new = EnvConfig(family="atari", name="Pong", num_action_repeats=4,
                    options=AtariOptions(max_random_noops=5, sticky_actions=True))
    old_env = create_environment(Config.from_json(OLD_ATARI_JSON).env, env_id=3)
    new_env = create_environment(new, env_id=3)
    try:
        assert old_env.spec.id == new_env.spec.id == "PongNoFrameskip-v0"
        old_obs, old_info = old_env.reset()
        new_obs, new_info = new_env.reset()
        assert old_info["noops"] == new_info["noops"] <= 5
        np.testing.assert_array_equal(old_obs, new_obs)
    finally:
        old_env.close()
        new_env.close()


def test_a_users_gymnasium_env_through_module_colon_id():
    env = create_environment(EnvConfig(name=custom_env_module.NAME, seed=1), env_id=0)
    obs, _ = env.reset()
    assert obs.dtype == np.float32 and obs.tolist() == [1, 0, 0, 0]
    rewards = [env.step(1)[1] for _ in range(3)]
    assert rewards == [0.0, 0.0, 1.0]
    assert env_specs(EnvConfig(name=custom_env_module.NAME))[1].num_values == 2


def test_module_colon_id_imports_the_module_in_a_fresh_process():
    code = (
        "import sys\n"
        "from seed_rl.config import EnvConfig\n"
        "from seed_rl.envs import create_environment\n"
        f"assert {custom_env_module.__name__!r} not in sys.modules\n"
        f"env = create_environment(EnvConfig(name={custom_env_module.NAME!r}), 0)\n"
        "print(env.reset()[0].tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[1.0, 0.0, 0.0, 0.0]"


def test_module_colon_id_errors_are_clear():
    with pytest.raises(ValueError, match=r"cannot import module 'no_such_module_xyz' .*PYTHONPATH"):
        create_environment(EnvConfig(name="no_such_module_xyz:Corridor-v0"), env_id=0)
    misspelled = custom_env_module.NAME.replace("Corridor", "Coridor")
    with pytest.raises(ValueError, match=rf"unknown gymnasium id '{misspelled}'.*close matches: "
                                         rf"{custom_env_module.NAME}"):
        create_environment(EnvConfig(name=misspelled), env_id=0)
    with pytest.raises(ValueError, match="malformed gymnasium id 'a:b:c'"):
        create_environment(EnvConfig(name="a:b:c"), env_id=0)


def test_a_gymnasium_id_registered_from_python_works_in_this_process():
    env_id = "SeedRlRegisteredInTest-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(id=env_id, entry_point=custom_env_module.Corridor, kwargs={"length": 3})
    env = create_environment(EnvConfig(name=env_id), env_id=0)
    assert env.reset()[0].tolist() == [1, 0, 0]
