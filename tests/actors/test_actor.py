"""The actor loop against a real (TensorFlow-free) server whose handler records every row it sees.

Test envs (seed_rl/envs/testing.py): ``counting`` observes ``[env_id, episode, step, prev_action]`` and ends with
``terminated`` after ``length`` steps; ``truncating`` ends with ``truncated``; ``crashing`` raises in ``step``.
"""

from __future__ import annotations

import threading
import time

import gymnasium
import numpy as np
import pytest

from seed_rl.actors.actor import Actor
from seed_rl.config import Config, EnvConfig, RunConfig
from seed_rl.envs import EnvFamily, env_specs, register_family, registry
from seed_rl.envs.testing import create_test_environment
from seed_rl.transport.batcher import PartialAnswer
from seed_rl.transport.server import InferenceServer


class Recorder:
    """Handler that answers action 1 and records (env_id, run_id, reward, done, abandoned, obs) per row."""

    def __init__(self):
        self.rows = []
        self.lock = threading.Lock()

    def __call__(self, batch):
        with self.lock:
            for i in range(len(batch.env_ids)):
                eo = batch.env_outputs
                self.rows.append((int(batch.env_ids[i]), int(batch.run_ids[i]), float(eo.reward[i]),
                                  bool(eo.done[i]), bool(eo.abandoned[i]), eo.observation[i].tolist()))
        return np.ones(len(batch.env_ids), np.int32)

    def of(self, env_id):
        with self.lock:
            return [r for r in self.rows if r[0] == env_id]


def _server(env_name, handler, env_batch_size=2, num_actors=1, actor_env_groups=2, local_stream=True):
    config = Config(env=EnvConfig(family="test", name=env_name),
                    run=RunConfig(num_actors=num_actors, env_batch_size=env_batch_size,
                                  actor_env_groups=actor_env_groups))
    obs_spec, act_spec = env_specs(config.env)
    server = InferenceServer("127.0.0.1:0", handler, num_envs=num_actors * env_batch_size,
                             env_batch_size=env_batch_size, observation_spec=obs_spec, action_spec=act_spec,
                             config_json=config.to_json(), inference_batch_size=env_batch_size,
                             max_batch_wait_ms=1.0, local_stream=local_stream)
    port = server.start()
    return server, f"127.0.0.1:{port}"


def _run_actor(address, steps, task=0):
    actor = Actor(address, task, connect_timeout_s=30, seed=0)
    actor.run(max_steps=steps)
    return actor


def test_episode_semantics_first_message_and_done_carries_reset_observation():
    rec = Recorder()
    server, address = _server("counting:length=3,num_actions=2", rec)
    try:
        _run_actor(address, steps=7)
    finally:
        server.stop()
    rows = rec.of(0)
    # obs = [env_id, episode, step, prev_action]; the action is always 1 so reward = step + 1 + 1.
    assert [(r[2], r[3], r[5]) for r in rows[:5]] == [
        (0.0, False, [0, 0, 0, -1]),  # first message: reward 0, not done, reset observation
        (2.0, False, [0, 0, 1, 1]),
        (3.0, False, [0, 0, 2, 1]),
        (4.0, True, [0, 1, 0, -1]),   # done: last reward of the episode, observation after the reset
        (2.0, False, [0, 1, 1, 1]),
    ]
    assert len({r[1] for r in rows}) == 1  # one run id per connection
    assert {r[0] for r in rec.rows} == {0, 1}


def test_truncation_uses_the_two_message_protocol():
    rec = Recorder()
    server, address = _server("truncating:length=2,num_actions=2", rec)
    try:
        _run_actor(address, steps=4)
    finally:
        server.stop()
    rows = rec.of(1)
    assert [(r[2], r[3], r[4], r[5][2]) for r in rows[:5]] == [
        (0.0, False, False, 0),
        (2.0, False, False, 1),
        (3.0, False, False, 2),   # extra message: terminal observation and last reward, not done
        (0.0, True, True, 0),     # then the reset observation, done and abandoned, reward 0
        (2.0, False, False, 1),
    ]


@pytest.mark.parametrize("local_stream", [True, False], ids=["local", "grpc"])
@pytest.mark.parametrize("groups", [1, 2, 3])
def test_env_groups_keep_every_envs_sequence_and_send_one_message_per_group_step(groups, local_stream):
    """Double buffering (actor_env_groups): each group of envs has its own message in flight; every env sees
    exactly the same sequence as in the lockstep loop, and the truncation protocol still holds; over the
    same-host stream and over gRPC (an actor on another host)."""
    rec = Recorder()
    server, address = _server("truncating:length=2,num_actions=2", rec, env_batch_size=4,
                              actor_env_groups=groups, local_stream=local_stream)
    try:
        actor = _run_actor(address, steps=6)
        messages = server.stats()["messages_total"]
    finally:
        server.stop()
    assert actor.steps == 6
    for env_id in range(4):
        rows = rec.of(env_id)
        # Per episode of 2 steps: reset obs, step 1, the extra truncation message (step 2), then abandoned.
        assert [(r[2], r[3], r[4], r[5][2]) for r in rows[:7]] == [
            (0.0, False, False, 0), (2.0, False, False, 1), (3.0, False, False, 2), (0.0, True, True, 0),
            (2.0, False, False, 1), (3.0, False, False, 2), (0.0, True, True, 0)], env_id
        assert rows[0][5][0] == env_id
    # Per group: 6 regular messages plus the truncation messages after its steps 2, 4 and 6.
    assert messages == 9 * groups


def test_crashing_env_is_recreated_with_a_new_run_id_and_the_actor_carries_on():
    rec = Recorder()
    server, address = _server("crashing:crash_after=3,crash_env_id=0,num_actions=2", rec)
    try:
        actor = _run_actor(address, steps=10)
    finally:
        server.stop()
    assert actor.env_restarts >= 1
    run_ids_env0 = [r[1] for r in rec.of(0)]
    run_ids_env1 = [r[1] for r in rec.of(1)]
    assert len(set(run_ids_env0)) >= 2  # re-created env got a new run id
    assert len(set(run_ids_env1)) == 1  # the healthy env kept its own
    first_after_crash = next(r for r in rec.of(0) if r[1] != run_ids_env0[0])
    assert first_after_crash[2:5] == (0.0, False, False)  # a fresh first message


class RefusingRecorder(Recorder):
    """A Recorder that refuses the rows of ``env_id`` in messages number ``refuse`` (counted per env)."""

    def __init__(self, env_id, refuse):
        super().__init__()
        self.env_id, self.refuse, self.seen = env_id, set(refuse), 0

    def __call__(self, batch):
        actions = super().__call__(batch)
        causes = [""] * len(batch.env_ids)
        for i, env_id in enumerate(batch.env_ids.tolist()):
            if env_id == self.env_id:
                if self.seen in self.refuse:
                    causes[i] = "the network's output for it is not finite"
                self.seen += 1
        return PartialAnswer(actions, causes) if any(causes) else actions


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("env_name", ["counting:length=3,num_actions=2", "truncating:length=2,num_actions=2"])
def test_refused_rows_start_their_env_again_and_the_other_envs_step_on(groups, env_name):
    """An answer that refuses env 0's row (issue 31): env 0 starts a new run (new run id, reset observation,
    reward 0, not done) in its next message, env 1 is stepped with its action as if nothing happened, and the
    actor carries on (refusals 1 and 2, then 5: never max_refused_in_a_row in a row)."""
    rec = RefusingRecorder(env_id=0, refuse={1, 2, 5})
    server, address = _server(env_name, rec, actor_env_groups=groups)
    try:
        actor = _run_actor(address, steps=10)
    finally:
        server.stop()
    assert actor.refused_rows == 3 and actor.steps == 10
    rows0, rows1 = rec.of(0), rec.of(1)
    run_ids = [r[1] for r in rows0]
    assert len(set(run_ids)) == 4  # the first run, and one new run per refusal
    for k in (1, 2, 5):
        # After each refused message, env 0's next run starts with a fresh first message: the very next message,
        # unless the refused one was a truncation message, whose regular message was sent before its answer came.
        later = next(j for j in range(k + 1, len(rows0)) if run_ids[j] != run_ids[k])
        assert later - k <= 2, (k, later)
        assert rows0[later][2:5] == (0.0, False, False) and rows0[later][5][2] == 0, rows0[later]
    assert len({r[1] for r in rows1}) == 1  # env 1 kept its run: every step of it was served
    steps1 = [r[5][2] for r in rows1 if not r[4]]
    assert steps1[:3] == [0, 1, 2]


def test_actor_reconnects_with_new_run_ids_after_the_learner_restarts():
    rec = Recorder()
    server, address = _server("counting:length=5,num_actions=2", rec)
    port = int(address.rsplit(":", 1)[1])
    actor = Actor(address, 0, connect_timeout_s=60, seed=0)
    thread = threading.Thread(target=actor.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(rec.of(0)) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.stop()
        # A new learner on the same port, as after a restart.
        config = Config(env=EnvConfig(family="test", name="counting:length=5,num_actions=2"),
                        run=RunConfig(num_actors=1, env_batch_size=2))
        obs_spec, act_spec = env_specs(config.env)
        rec2 = Recorder()
        server = InferenceServer(f"127.0.0.1:{port}", rec2, num_envs=2, env_batch_size=2,
                                 observation_spec=obs_spec, action_spec=act_spec, config_json=config.to_json(),
                                 inference_batch_size=2, max_batch_wait_ms=1.0)
        server.start()
        deadline = time.monotonic() + 30
        while len(rec2.of(0)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(rec2.of(0)) >= 3, "the actor did not come back"
        assert rec2.of(0)[0][1] not in {r[1] for r in rec.of(0)}  # fresh run id
        assert rec2.of(0)[0][2:4] == (0.0, False)
        assert actor.reconnects >= 1
    finally:
        actor.stop()
        server.stop()
        thread.join(timeout=10)


def test_actor_with_mismatched_env_spec_exits_with_a_clear_error():
    from seed_rl.transport.errors import ProtocolMismatchError

    rec = Recorder()
    config = Config(env=EnvConfig(family="test", name="counting:length=3,num_actions=2"),
                    run=RunConfig(num_actors=1, env_batch_size=2))
    _, act_spec = env_specs(config.env)
    from seed_rl.types import ArraySpec

    server = InferenceServer("127.0.0.1:0", rec, num_envs=2, env_batch_size=2,
                             observation_spec=ArraySpec((7,), "int32"), action_spec=act_spec,
                             config_json=config.to_json(), inference_batch_size=2, max_batch_wait_ms=1.0)
    port = server.start()
    try:
        with pytest.raises(ProtocolMismatchError, match="observation spec"):
            _run_actor(f"127.0.0.1:{port}", steps=3)
    finally:
        server.stop()
    assert rec.rows == []


class _ScoreInInfo(gymnasium.Wrapper):
    """Puts ``score = 100 * reward`` and a ``score_reward`` (which no built-in family reads) in every step's info."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "score": 100.0 * float(reward), "score_reward": -1.0}


def _scored_family() -> EnvFamily:
    def factory(config, env_id):
        return _ScoreInInfo(create_test_environment(config.name, env_id, config.num_action_repeats))

    return EnvFamily(name="scored_in_info", factory=factory, description="counting with a score in the info",
                     raw_reward=lambda reward, info: info["score"])


@pytest.mark.parametrize("family", ["test", "scored_in_info"])
def test_the_raw_reward_is_the_env_familys_rule(monkeypatch, family):
    """The actor sends the family's raw reward (here: the info's score) next to the reward; by default, the
    reward itself, whatever the info holds."""
    monkeypatch.setattr(registry, "_FAMILIES", dict(registry._FAMILIES))
    register_family(_scored_family())
    wrapped = family != "test"
    raw = []

    def handler(batch):
        raw.extend(zip(batch.env_ids.tolist(), batch.env_outputs.reward.tolist(), batch.raw_rewards.tolist()))
        return np.ones(len(batch.env_ids), np.int32)

    config = Config(env=EnvConfig(family=family, name="counting:length=3,num_actions=2"),
                    run=RunConfig(num_actors=1, env_batch_size=2))
    obs_spec, act_spec = env_specs(config.env)
    server = InferenceServer("127.0.0.1:0", handler, num_envs=2, env_batch_size=2, observation_spec=obs_spec,
                             action_spec=act_spec, config_json=config.to_json(), inference_batch_size=2,
                             max_batch_wait_ms=1.0)
    port = server.start()
    try:
        _run_actor(f"127.0.0.1:{port}", steps=5)
    finally:
        server.stop()
    rewards = [(r, raw_r) for env_id, r, raw_r in raw if env_id == 0]
    assert [r for r, _ in rewards[:5]] == [0.0, 2.0, 3.0, 4.0, 2.0]  # as in the episode-semantics test
    assert [raw_r for _, raw_r in rewards] == [r * 100.0 if wrapped else r for r, _ in rewards]


class _LosesALife(gymnasium.Wrapper):
    """The counting env whose first step of each episode loses a life (``info["life_lost"]``), the game going on."""

    def reset(self, **kwargs):
        self._steps = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        return obs, reward, terminated, truncated, {**info, "life_lost": self._steps == 1}


@pytest.mark.parametrize("local_stream", [True, False], ids=["local", "grpc"])
def test_a_lost_life_is_sent_as_done_with_life_lost_and_the_game_goes_on(monkeypatch, local_stream):
    """A step whose info says life_lost: done and life_lost set, the observation of the same episode (no reset);
    life_lost is false on every other row and the episode ends as usual."""
    monkeypatch.setattr(registry, "_FAMILIES", dict(registry._FAMILIES))
    register_family(EnvFamily(
        name="loses_a_life", description="counting, a life lost on each episode's first step",
        factory=lambda config, env_id: _LosesALife(create_test_environment(config.name, env_id,
                                                                           config.num_action_repeats))))
    rows = []

    def handler(batch):
        eo = batch.env_outputs
        for i in range(len(batch.env_ids)):
            if batch.env_ids[i] == 0:
                rows.append((float(eo.reward[i]), bool(eo.done[i]), bool(batch.life_lost[i]),
                             eo.observation[i].tolist()))
        return np.ones(len(batch.env_ids), np.int32)

    config = Config(env=EnvConfig(family="loses_a_life", name="counting:length=3,num_actions=2"),
                    run=RunConfig(num_actors=1, env_batch_size=2))
    obs_spec, act_spec = env_specs(config.env)
    server = InferenceServer("127.0.0.1:0", handler, num_envs=2, env_batch_size=2, observation_spec=obs_spec,
                             action_spec=act_spec, config_json=config.to_json(), inference_batch_size=2,
                             max_batch_wait_ms=1.0, local_stream=local_stream)
    port = server.start()
    try:
        _run_actor(f"127.0.0.1:{port}", steps=7)
    finally:
        server.stop()
    assert rows[:6] == [
        (0.0, False, False, [0, 0, 0, -1]),
        (2.0, True, True, [0, 0, 1, 1]),   # the life lost: done, and the same episode's next observation
        (3.0, False, False, [0, 0, 2, 1]),
        (4.0, True, False, [0, 1, 0, -1]),  # the game over: done, the reset observation
        (2.0, True, True, [0, 1, 1, 1]),
        (3.0, False, False, [0, 1, 2, 1]),
    ]


def test_an_env_family_unknown_to_the_actor_is_a_clear_error():
    """A family registered in the learner's process only (from Python) does not exist in actor subprocesses."""
    from seed_rl.actors.actor import EnvConfigError

    config = Config(env=EnvConfig(family="registered_in_the_learner_only", name="x"),
                    run=RunConfig(num_actors=1, env_batch_size=2))
    _, act_spec = env_specs(EnvConfig(family="test", name="counting:length=3,num_actions=2"))
    from seed_rl.types import ArraySpec

    rec = Recorder()
    server = InferenceServer("127.0.0.1:0", rec, num_envs=2, env_batch_size=2,
                             observation_spec=ArraySpec((4,), "int32"), action_spec=act_spec,
                             config_json=config.to_json(), inference_batch_size=2, max_batch_wait_ms=1.0)
    port = server.start()
    try:
        with pytest.raises(EnvConfigError, match="unknown env family 'registered_in_the_learner_only'.*"
                                                 "actor threads see it, actor subprocesses do not"):
            _run_actor(f"127.0.0.1:{port}", steps=3)
    finally:
        server.stop()
    assert rec.rows == []


class VaryingActions(Recorder):
    """A Recorder that answers each env a fixed sequence of actions of a 6-action game (env_id and step decide)."""

    def __call__(self, batch):
        super().__call__(batch)
        return np.array([(7 * env_id + len(self.of(env_id))) % 6 for env_id in batch.env_ids.tolist()], np.int32)


class RefusingVaryingActions(RefusingRecorder, VaryingActions):
    """VaryingActions whose rows of one env are refused in some messages (RefusingRecorder)."""


@pytest.mark.atari
@pytest.mark.parametrize("groups,refuse", [(1, False), (2, True)], ids=["lockstep", "groups-refused"])
def test_an_atari_engine_sends_the_same_messages_as_gymnasium_envs(groups, refuse):
    """--atari_engine=ale_vector behind the actor: every message (rewards, episode ends with the truncation
    protocol, observations, run ids, refused rows starting new runs) is the one the gymnasium envs give, on Pong
    without no-ops (the engine draws its own no-op count) and a 40-frame cap (a truncation every 10 steps)."""
    pytest.importorskip("ale_py")
    from seed_rl.envs.atari import AtariOptions

    rows = {}
    for engine in ("gymnasium", "ale_vector"):
        options = AtariOptions(max_random_noops=0, max_episode_frames=40, full_action_space=False,
                               atari_engine=engine)
        config = Config(env=EnvConfig(family="atari", name="Pong", num_action_repeats=4, options=options),
                        run=RunConfig(num_actors=1, env_batch_size=3, actor_env_groups=groups))
        obs_spec, act_spec = env_specs(config.env)
        rec = RefusingVaryingActions(env_id=1, refuse={3, 4, 12}) if refuse else VaryingActions()
        server = InferenceServer("127.0.0.1:0", rec, num_envs=3, env_batch_size=3, observation_spec=obs_spec,
                                 action_spec=act_spec, config_json=config.to_json(), inference_batch_size=3,
                                 max_batch_wait_ms=1.0)
        port = server.start()
        try:
            actor = _run_actor(f"127.0.0.1:{port}", steps=25)
        finally:
            server.stop()
        assert actor.steps == 25 and actor.refused_rows == (3 if refuse else 0)
        rows[engine] = [rec.of(env_id) for env_id in range(3)]
    for env_id in range(3):
        gym, vec = rows["gymnasium"][env_id], rows["ale_vector"][env_id]
        assert len(gym) == len(vec) >= 25
        for k, (a, b) in enumerate(zip(gym, vec)):
            assert a == b, (env_id, k, a[:5], b[:5])
    assert sum(r[4] for r in rows["ale_vector"][0]) == 2  # env 0's truncations (steps 10 and 20), sent as abandoned
    if refuse:
        assert len({r[1] for r in rows["ale_vector"][1]}) == 4  # env 1: its first run and one per refusal
