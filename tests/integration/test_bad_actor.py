"""One bad actor among four never hurts the other three (issue 31), for V-trace, R2D2, PPO and SAC.

A real learner (in this process) serves four clients of two envs each, all of whose messages share inference
batches; client 0 turns bad for a while, as a buggy custom env would make it:

* **extreme rewards** (3e38, finite, so the non-finite check passes) with the door open (``max_abs_reward=0``):
  the unrolls reach the trainer, whose guard skips every update whose loss or gradients are not finite; the
  weights stay finite, ``skipped_updates`` moves, and training goes on once the rewards are sane again;
* **extreme observations** (3e38) with the door open (``max_abs_observation=0``): where the network's output for
  those rows is not finite, the inference step refuses those rows only (client 0 gets ``RowsRefusedError``; its
  stream is closed after ``max_refused_in_a_row``) and the other rows of the batch are served; where it stays
  finite, the update guard absorbs them (tests/learner/test_action_guard.py and tests/transport/ test the
  refusal itself, with a network that does go non-finite);
* with the door at its defaults, both are refused at once with INVALID_ARGUMENT naming the flag.

In every case each of the three good clients gets an answer to every message, and training goes on after.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Optional

import numpy as np
import pytest

from seed_rl.config import EnvConfig, replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.learner.learner import Learner
from seed_rl.transport import InvalidRequestError, LearnerClient, RowsRefusedError
from seed_rl.types import EnvOutput, StepBatch
from tests.envs import custom_env_module
from tests.integration.helpers import TrainProcess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NUM_CLIENTS = 4
ENVS = 2
STEPS = 60
POISON = range(8, 28)  # client 0's bad steps
EXTREME = 3e38

# agent -> (preset, env, agent overrides): small replays, so that the sequences of the bad steps leave them soon.
AGENTS: dict[str, tuple[str, EnvConfig, dict]] = {
    "vtrace": ("classic_vtrace", EnvConfig(family="test", name="correct_action:num_actions=2"), {}),
    "ppo": ("classic_ppo", EnvConfig(family="test", name="correct_action:num_actions=2"), {}),
    "r2d2": ("classic_r2d2", EnvConfig(family="test", name="correct_action:num_actions=2"),
             dict(replay_buffer_size=24, replay_buffer_min_size=4, burn_in=0)),
    "sac": ("classic_sac", EnvConfig(family="classic", name="Pendulum-v1"),
            dict(replay_buffer_size=64, replay_buffer_min_size=8)),
}


def _config(tmp_path, agent: str, **run: Any):
    preset, env, agent_fields = AGENTS[agent]
    config = get_preset(preset)
    unroll_length = 1 if agent == "sac" else 4
    return replace(
        config, env=env, agent=replace(config.agent, **agent_fields),
        run=replace_flat(config.run, logdir=str(tmp_path / "run"), num_actors=NUM_CLIENTS, env_batch_size=ENVS,
                         num_eval_envs=0, server_address="127.0.0.1:0", inference_batch_size=NUM_CLIENTS * ENVS,
                         max_batch_wait_ms=20.0, unroll_length=unroll_length, batch_size=8 if agent != "sac" else 16,
                         unroll_queue_size=0, total_environment_frames=10**9, save_checkpoint_secs=10**6,
                         summary_period_secs=0.5, max_skipped_updates=10**6, target_return=0.0, **run))


class _Recording:
    """The learner's inference step, recording the env ids of each call and which rows it refused."""

    def __init__(self, inference):
        self._inference = inference
        self.calls: list[tuple[list[int], list[int]]] = []

    def __call__(self, env_ids, *args):
        out = self._inference(env_ids, *args)
        self.calls.append((np.asarray(env_ids).tolist(), out.refused.numpy().tolist()))
        return out

    def __getattr__(self, name):
        return getattr(self._inference, name)


def _message(task: int, step: int, spec, rng, reward: float, observation: Optional[float]) -> StepBatch:
    shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
    obs = rng.uniform(-0.5, 0.5, (ENVS, *shape)).astype(dtype)
    if observation is not None:
        obs[:] = observation
    return StepBatch(
        env_ids=np.arange(task * ENVS, (task + 1) * ENVS, dtype=np.int32),
        run_ids=np.full(ENVS, task + 1, np.int64),
        env_outputs=EnvOutput(reward=np.full(ENVS, reward, np.float32), done=np.full(ENVS, step % 10 == 9),
                              observation=obs, abandoned=np.zeros(ENVS, bool),
                              episode_step=np.full(ENVS, step % 10, np.int32)),
        raw_rewards=np.full(ENVS, reward, np.float32))


def _client(port: int, task: int, spec, poison: str, outcome: dict, seconds: Optional[tuple] = None) -> None:
    """Steps STEPS times; client 0 is bad during POISON. Records every answer and the first refusal. With
    ``seconds`` = (bad from, bad until, end): steps until ``end`` seconds, client 0 bad in the window."""
    rng = np.random.default_rng(task)
    answered = 0
    refused = []
    start = time.monotonic()
    with LearnerClient(f"127.0.0.1:{port}", task, connect_timeout_s=60, local_stream=task % 2 == 0) as client:
        client.handshake()
        step = -1
        while True:
            step += 1
            elapsed = time.monotonic() - start
            if (seconds is None and step >= STEPS) or (seconds is not None and elapsed >= seconds[2]):
                break
            window = step in POISON if seconds is None else seconds[0] <= elapsed < seconds[1]
            bad = task == 0 and window
            reward = EXTREME if bad and poison == "reward" else 1.0
            observation = EXTREME if bad and poison == "observation" else None
            try:
                client.step(_message(task, step, spec, rng, reward, observation))
                answered += 1
            except RowsRefusedError as e:
                refused.append(e)
            except InvalidRequestError as e:
                outcome["closed"] = e  # the stream ended: this client stops, as an actor would
                break
    outcome["answered"] = answered
    outcome["steps"] = step
    outcome["refused"] = refused


def _train_with_a_bad_client(learner: Learner, poison: str, seconds: Optional[tuple] = None) -> list[dict]:
    port = learner.start()
    runner = threading.Thread(target=learner.run, daemon=True)
    runner.start()
    outcomes: list[dict] = [{} for _ in range(NUM_CLIENTS)]
    clients = [threading.Thread(target=_client, args=(port, task, learner.observation_spec, poison, outcomes[task],
                                                      seconds))
               for task in range(NUM_CLIENTS)]
    try:
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(timeout=240)
        assert not any(thread.is_alive() for thread in clients)
        assert runner.is_alive() and not learner.done, "the learner stopped"
    finally:
        learner.stop()
        runner.join(timeout=120)
    return outcomes


def _assert_weights_finite(learner: Learner) -> None:
    for variable in learner.agent.trainable_variables:
        assert np.isfinite(variable.numpy()).all(), variable.name


def _assert_good_clients_served(outcomes: list[dict]) -> None:
    for task in range(1, NUM_CLIENTS):
        outcome = outcomes[task]
        assert outcome["answered"] == outcome["steps"] and not outcome["refused"], (task, outcome)
        assert "closed" not in outcome


@pytest.mark.parametrize("agent", [a if a in ("vtrace", "sac") else pytest.param(a, marks=pytest.mark.slow)
                                   for a in sorted(AGENTS)])  # the guard is the trainer's, not an agent's: CI time
def test_extreme_rewards_of_one_client_are_absorbed_by_the_update_guard(tmp_path, agent):
    learner = Learner(_config(tmp_path, agent, max_abs_reward=0.0))
    iterations = learner.trainer.optimizer.iterations
    at_skips = []  # the optimizer's iteration count at each train step that skipped updates
    record = learner.skips.record

    def recording(skipped, *args):
        if skipped:
            at_skips.append(int(iterations.numpy()))
        return record(skipped, *args)

    learner.skips.record = recording
    outcomes = _train_with_a_bad_client(learner, "reward")
    _assert_good_clients_served(outcomes)
    assert outcomes[0]["answered"] == STEPS  # the door is open: the bad rewards were taken
    _assert_weights_finite(learner)
    assert learner.skips.total > 0 and at_skips, "no update saw the extreme rewards"
    assert int(iterations.numpy()) > at_skips[-1], "no update was applied after the last skipped one"


@pytest.mark.parametrize("agent", [a if a == "vtrace" else pytest.param(a, marks=pytest.mark.slow)
                                   for a in sorted(AGENTS)])
def test_extreme_observations_of_one_client_hurt_no_other(tmp_path, agent):
    """With the door open, an extreme observation either makes the network's output for its row non-finite (the
    row is refused to its own message) or passes it (ReLU MLPs keep 3e38 finite) and reaches the trainer, whose
    guard skips the non-finite updates: either way the others are served and the weights stay finite."""
    learner = Learner(_config(tmp_path, agent, max_abs_observation=0.0))
    learner.inference = recording = _Recording(learner.inference)
    outcomes = _train_with_a_bad_client(learner, "observation")
    _assert_good_clients_served(outcomes)
    for ids, codes in recording.calls:  # only client 0's rows were ever refused
        assert {i for i, c in zip(ids, codes) if c} <= {0, 1}
    assert outcomes[0]["answered"] == STEPS or "closed" in outcomes[0]  # the bad observations reached the learner
    _assert_weights_finite(learner)
    assert int(learner.trainer.optimizer.iterations.numpy()) > 0


@pytest.mark.parametrize("poison", ["reward", "observation"])
def test_the_door_refuses_extreme_values_with_the_flag_named(tmp_path, poison):
    learner = Learner(_config(tmp_path, "vtrace"))
    outcomes = _train_with_a_bad_client(learner, poison)
    _assert_good_clients_served(outcomes)
    closed = outcomes[0]["closed"]
    flag = "max_abs_reward" if poison == "reward" else "max_abs_observation"
    assert flag in str(closed) and "env ids [0, 1]" in str(closed), closed
    assert outcomes[0]["answered"] == POISON.start
    _assert_weights_finite(learner)
    assert learner.skips.total == 0


def test_a_run_whose_every_update_is_skipped_stops_with_one_line(tmp_path):
    """``seed-rl train`` on an env with a reward-scale bug (3e38 per step) and the door open: every update is
    skipped, and after --max_skipped_updates train steps in a row the learner stops with one line on stderr (no
    traceback) and exit code 1, its weights finite and its checkpoint written."""
    logdir = str(tmp_path / "run")
    proc = TrainProcess(logdir, "--env=classic", f"--env_name={custom_env_module.EXTREME_NAME}", "--num_actors=1",
                        "--env_batch_size=2", "--unroll_length=5", "--batch_size=2", "--mlp_sizes=8",
                        "--max_abs_reward=0", "--max_skipped_updates=3", "--summary_period_secs=1",
                        env={"PYTHONPATH": REPO_ROOT})
    assert proc.wait(timeout=240) == 1, proc.output()
    out = proc.output()
    assert "Traceback" not in out, out
    line = next(x for x in proc.lines if x.startswith("seed-rl train: the learner stopped"))
    assert "every update of the last 3 train steps was skipped" in line and "--max_skipped_updates" in line
    assert "losses/" in line  # the loss terms that went non-finite
    assert os.listdir(os.path.join(logdir, "checkpoints"))


@pytest.mark.slow
@pytest.mark.parametrize("poison", ["reward", "observation"])
@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_one_bad_client_for_a_minute_hurts_no_other(tmp_path, agent, poison):
    """Issue 31's run, by the clock: client 0 of 4 sends 3e38 rewards or observations for a minute (from 10 s to
    70 s; the door open, so that the inference step and the guard must absorb them), then behaves for 15 s. The
    other three are answered at every step throughout, the weights stay finite, and updates are applied after the
    bad minute."""
    learner = Learner(_config(tmp_path, agent, max_abs_reward=0.0, max_abs_observation=0.0,
                              max_refused_in_a_row=10**6))
    iterations = learner.trainer.optimizer.iterations
    after_bad_minute: list[int] = []
    timer = threading.Timer(72.0, lambda: after_bad_minute.append(int(iterations.numpy())))
    timer.start()
    outcomes = _train_with_a_bad_client(learner, poison, seconds=(10.0, 70.0, 85.0))
    timer.cancel()
    _assert_good_clients_served(outcomes)
    assert all(outcome["steps"] > 100 for outcome in outcomes[1:]), outcomes
    _assert_weights_finite(learner)
    assert after_bad_minute and int(iterations.numpy()) > after_bad_minute[0], "no update after the bad minute"
    if poison == "reward":
        assert learner.skips.total > 0
