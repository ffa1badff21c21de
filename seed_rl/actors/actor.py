"""The actor process loop: step ``env_batch_size`` environments and stream every step to the learner.

An actor holds no model and no recurrent state; it imports numpy, grpcio and the environment only. It splits
its envs into ``actor_env_groups`` groups (default 2): per step of a group it sends one message with that group's
envs (``StepBatch``) and receives one action per env, and it steps one group while the messages of the others
wait for inference (double buffering; one group is the original's lockstep loop). Semantics kept from the
original (common/actor.py):

* the first message of a connection carries reward 0, done False and the reset observation;
* when an episode ends, the message carries the last reward, ``done`` and the observation *after the reset*;
* every (re)connection draws a fresh random int64 run id per env, so the learner resets that env's state;
* a step whose ``info`` holds ``life_lost`` (Atari's ``--terminal_on_life_loss``) is sent with ``done`` and
  ``life_lost`` set and the next observation of the same game (no reset): terminal for learning, while the
  learner's episode statistics go on counting the game (`seed_rl.types.StepBatch.life_lost`);
* a truncated episode (gymnasium ``truncated``, e.g. a time limit) is sent with the original's two-message
  protocol, generalised to any number of envs: an extra message with only the truncated envs' rows carries the
  terminal observation and last reward with ``done = False`` (the returned actions are ignored), then the regular
  message carries reward 0, ``done = abandoned = True`` and the reset observation;
* an environment that raises is closed, re-created with a new run id, and the actor carries on;
* an answer whose rows the learner refused (``RowsRefusedError``: it could not act on them, e.g. their network
  output was not finite) steps the other envs as usual and starts a new run of each refused env (reset, new run
  id), since the learner kept nothing of that step; the learner closes the stream after too many such answers in
  a row.

The raw reward of a step (``raw_rewards``, what episode statistics add up) is the env family's rule
(`seed_rl.envs.EnvFamily.raw_reward`; by default the env's reward), so the loop knows no family. Each group's envs
are one `seed_rl.envs.EnvBatch` (`seed_rl.envs.create_env_batch`): gymnasium envs stepped one after the other, or
the family's batched engine when the config asks for one (Atari's ``--atari_engine=ale_vector``).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Any, List, Mapping, Optional

import numpy as np

from seed_rl.config import ActorConfig, replace
from seed_rl.envs import (
    EnvBatch,
    action_space_spec,
    create_env_batch,
    get_family,
    observation_space_spec,
    resolve_env_config,
)
from seed_rl.transport import tls
from seed_rl.transport.client import LearnerClient
from seed_rl.transport.errors import (
    FINISHED_REASON,
    LearnerUnavailableError,
    ProtocolMismatchError,
    RowsRefusedError,
)
from seed_rl.types import EnvOutput, StepBatch

log = logging.getLogger("seed_rl.actor")

_INT64_MAX = np.iinfo(np.int64).max


class SpecMismatchError(ProtocolMismatchError):
    """The actor's environment does not produce what the learner expects."""


class EnvConfigError(ProtocolMismatchError):
    """The learner's env config cannot be created in this actor's process (unknown family, id or options)."""


def _stack(observations: List[Any]):
    if isinstance(observations[0], dict):
        return {k: np.stack([np.asarray(o[k]) for o in observations]) for k in observations[0]}
    return np.stack([np.asarray(o) for o in observations])


def _specs_equal(a, b) -> bool:
    def key(s):
        return (tuple(s.shape), np.dtype(s.dtype).name)
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and all(
            key(a[k]) == key(b[k]) for k in a)
    return key(a) == key(b)


class _EnvSlot:
    """One environment of the actor (env ``index`` of its group's batch) with the per-env fields of the next
    message."""

    def __init__(self, batch: EnvBatch, index: int, rng: np.random.Generator, raw_reward_of: Any):
        self.batch = batch
        self.index = index
        self.env_id = batch.env_ids[index]
        self.rng = rng
        self.raw_reward_of = raw_reward_of  # the env family's raw-reward rule
        self.new_run_pending = False  # a refused truncation message: start a new run at the next answer
        self.next_observation: Any = None  # the reset observation of a truncated episode, sent after its last one

    def start_run(self, observation: Any) -> None:
        """Starts a new run of this env (a new run id, so the learner forgets it) from ``observation``, the first
        of an episode: the next message carries reward 0, done False and that observation."""
        self.run_id = int(self.rng.integers(0, _INT64_MAX))
        self.new_run_pending = False
        self.observation = observation
        self.next_observation = None
        self.reward = 0.0
        self.raw_reward = 0.0
        self.done = False
        self.abandoned = False
        self.life_lost = False
        self.episode_step = 0


def _new_runs(slots: List[_EnvSlot]) -> None:
    """Resets the envs of ``slots`` (one group: one batch) and starts a new run of each."""
    if slots:
        for slot, observation in zip(slots, slots[0].batch.reset([s.index for s in slots])):
            slot.start_run(observation)


class Actor:
    """Runs the actor loop for one task until ``stop()`` (or ``max_steps``), reconnecting as needed."""

    def __init__(self, server_address: str, task: int, *, auth_token: str = "",
                 connect_timeout_s: Optional[float] = None, seed: Optional[int] = None,
                 log_period_s: float = 30.0, tls_ca_file: str = "", tls_server_name: str = ""):
        self.server_address = server_address
        self.task = task
        self.auth_token = auth_token
        # TLS (the learner's --tls_cert_file): read the roots now, so that a bad path fails before any env starts.
        if tls_server_name and not tls_ca_file:
            raise ValueError("tls_server_name applies to TLS connections only: give tls_ca_file too")
        self._credentials = tls.channel_credentials(tls_ca_file)
        self.tls_server_name = tls_server_name
        self.connect_timeout_s = connect_timeout_s
        self.rng = np.random.default_rng(seed)
        self.log_period_s = log_period_s
        self._stop = threading.Event()
        self._aborted = False
        self._client: Optional[LearnerClient] = None  # the current connection, for abort()
        self._client_lock = threading.Lock()
        self.steps = 0
        self.episodes = 0
        self.env_restarts = 0
        self.refused_rows = 0  # env rows the learner refused (RowsRefusedError)
        self.reconnects = 0
        self.finished = False  # the learner said its training is finished (run returned for that)

    def stop(self) -> None:
        """Asks ``run`` to return: it sends nothing more and takes the answers of the messages in flight. Safe in
        a signal handler. A call blocked on a learner that is gone (a handshake waiting for it) is not
        interrupted: ``abort`` is for that."""
        self._stop.set()

    def abort(self) -> None:
        """Stops at once: as ``stop``, and closes the connection, so that a handshake waiting for a learner that is
        gone, or a receive, returns now (the answers in flight are dropped) and ``run`` returns. Not for a
        signal handler (it closes gRPC objects that the interrupted call may hold); call it from a thread."""
        with self._client_lock:
            self._aborted = True
            self._stop.set()
            client = self._client
        if client is not None:
            client.close()

    def run(self, max_steps: Optional[int] = None) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            client = LearnerClient(self.server_address, self.task, auth_token=self.auth_token,
                                   connect_timeout_s=self.connect_timeout_s, channel_credentials=self._credentials,
                                   tls_server_name=self.tls_server_name)
            with self._client_lock:
                self._client = client
                aborted = self._aborted
            try:
                with client:
                    if not aborted:
                        self._run_connected(client, max_steps)
                return
            except LearnerUnavailableError as e:
                if self._stop.is_set():
                    return
                if e.reason == FINISHED_REASON:
                    log.info("actor %d: the learner's training is finished; exiting", self.task)
                    self.finished = True
                    return
                self.reconnects += 1
                log.info("actor %d: learner unavailable (%s); reconnecting. This is normal when the learner "
                         "restarts or training ends.", self.task, e)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:
                # abort() closed the connection under a call in flight, which may fail in any way (the client's
                # bookkeeping went with the connection): the actor was told to stop, so it stops quietly.
                if not self._aborted:
                    raise
                log.debug("actor %d: aborted", self.task, exc_info=True)
                return
            finally:
                with self._client_lock:
                    self._client = None

    def _run_connected(self, client: LearnerClient, max_steps: Optional[int]) -> None:
        info = client.handshake()
        config = ActorConfig.from_json(info.config_json)
        env_ids = list(range(info.env_id_begin, info.env_id_end))
        # The envs in actor_env_groups groups, one batch each (one message in flight per group).
        num_groups = max(1, min(config.actor_env_groups, len(env_ids)))
        bounds = [round(i * len(env_ids) / num_groups) for i in range(num_groups + 1)]
        batches: List[EnvBatch] = []
        try:
            config = replace(config, env=resolve_env_config(config.env))
            for g in range(num_groups):
                batches.append(create_env_batch(config.env, env_ids[bounds[g]:bounds[g + 1]]))
        except ValueError as e:  # the learner created this env: something is missing in this process
            for batch in batches:
                batch.close()
            raise EnvConfigError(
                f"actor {self.task}: cannot create the learner's env {config.env.family}:{config.env.name} here: "
                f"{e}. An env family registered from Python, or a gymnasium id registered in the learner's "
                "process, exists in that process only (actor threads see it, actor subprocesses do not); for "
                "subprocesses use the classic family with module:EnvId, the module on PYTHONPATH.") from e
        try:
            obs_spec = observation_space_spec(batches[0].observation_space)
            act_spec = action_space_spec(batches[0].action_space)
            if not _specs_equal(obs_spec, info.observation_spec):
                raise SpecMismatchError(
                    f"actor {self.task}: the environment's observation spec {obs_spec} differs from the "
                    f"learner's {info.observation_spec}; are actor and learner on the same env config/version?")
            if (act_spec.num_values, tuple(act_spec.shape)) != (
                    info.action_spec.num_values, tuple(info.action_spec.shape)):
                raise SpecMismatchError(
                    f"actor {self.task}: the environment's action spec {act_spec} differs from the learner's "
                    f"{info.action_spec}")
            raw_reward_of = get_family(config.env.family).raw_reward
            groups = [[_EnvSlot(batch, i, self.rng, raw_reward_of) for i in range(len(batch.env_ids))]
                      for batch in batches]
            for group in groups:
                _new_runs(group)
            log.info("actor %d connected: envs [%d, %d)", self.task, info.env_id_begin, info.env_id_end)
            self._loop(client, groups, max_steps)
        finally:
            for batch in batches:
                batch.close()

    def _message(self, slots: List[_EnvSlot]) -> StepBatch:
        return StepBatch(
            env_ids=np.array([s.env_id for s in slots], np.int32),
            run_ids=np.array([s.run_id for s in slots], np.int64),
            env_outputs=EnvOutput(
                reward=np.array([s.reward for s in slots], np.float32),
                done=np.array([s.done for s in slots], np.bool_),
                observation=_stack([s.observation for s in slots]),
                abandoned=np.array([s.abandoned for s in slots], np.bool_),
                episode_step=np.array([s.episode_step for s in slots], np.int32),
            ),
            raw_rewards=np.array([s.raw_reward for s in slots], np.float32),
            # sent only when a row lost a life: the field is absent from every other message
            life_lost=np.array([s.life_lost for s in slots], np.bool_) if any(s.life_lost for s in slots) else None,
        )

    def _loop(self, client: LearnerClient, groups: List[List[_EnvSlot]], max_steps: Optional[int]) -> None:
        """Steps the envs in their groups (each one batch), each with one message in flight (double buffering
        when 2).

        Answers come back in the order the messages were sent, so the actor takes the oldest answer, steps that
        group's envs and sends its next message while the other groups' messages wait for inference. With one
        group this is the original's loop: send all envs, wait, step all envs. ``max_steps`` counts steps of
        every env (each group stops after that many).
        """
        num_groups = len(groups)
        group_steps = [0] * num_groups
        # The group each sent message belongs to, oldest first; None marks a truncation message whose actions
        # are ignored.
        pending: collections.deque = collections.deque()
        truncation: collections.deque = collections.deque()  # the envs of each truncation message in flight
        last_log = time.monotonic()

        def wanted(g: int) -> bool:
            return not self._stop.is_set() and (max_steps is None or group_steps[g] < max_steps)

        for g in range(num_groups):
            if wanted(g):
                client.send(self._message(groups[g]))
                pending.append(g)
        while pending:
            g = pending.popleft()
            group = truncation.popleft() if g is None else groups[g]
            actions, refused = self._receive(client, group, truncation=g is None)
            if g is None:
                continue  # the actions for terminal observations are ignored
            # Refused rows, and envs whose truncation message was refused, start a new run instead of a step. They
            # are reset after the step: a batched engine steps every env of its batch.
            again = [slot for slot in group if slot in refused or slot.new_run_pending]
            if again:
                kept = [i for i, slot in enumerate(group) if slot not in again]
                stepped, actions = [group[i] for i in kept], actions[kept]
            else:
                stepped = group
            truncated = self._step_group(stepped, actions)
            _new_runs(again)
            if truncated:
                # The two-message protocol: the terminal observations first, then the regular message with the
                # reset observations. The learner handles each env's messages in the order they were sent.
                client.send(self._message(truncated))
                pending.append(None)
                truncation.append(truncated)
                for slot in truncated:
                    slot.observation, slot.next_observation = slot.next_observation, None
                    slot.reward = slot.raw_reward = 0.0
                    slot.done = slot.abandoned = True
                    slot.life_lost = False
                    slot.episode_step = 0
            group_steps[g] += 1
            self.steps = min(group_steps)
            if wanted(g):
                client.send(self._message(groups[g]))
                pending.append(g)
            if time.monotonic() - last_log > self.log_period_s:
                last_log = time.monotonic()
                log.info("actor %d: %d steps, %d episodes, %d env restarts, %d reconnects",
                         self.task, self.steps, self.episodes, self.env_restarts, self.reconnects)

    def _receive(self, client: LearnerClient, slots: List[_EnvSlot], truncation: bool = False) -> tuple[Any, set]:
        """The actions of the oldest message in flight (for ``slots``), and the slots whose rows the learner
        refused: those start a new run (the learner kept nothing of their step), which the caller does after
        stepping the others. The envs of a refused ``truncation`` message have their regular message in flight
        already: they start a new run when its answer comes (``new_run_pending``) instead of being stepped."""
        try:
            return client.receive(), set()
        except RowsRefusedError as e:
            refused_ids = set(e.env_ids)
            refused = {slot for slot in slots if slot.env_id in refused_ids}
            self.refused_rows += len(refused)
            log.warning("actor %d: %s; starting those envs again with new run ids", self.task, e)
            if truncation:
                for slot in refused:
                    slot.new_run_pending = True
            return e.actions, refused

    def _step_group(self, slots: List[_EnvSlot], actions) -> List[_EnvSlot]:
        """Steps each env with its action (``slots``: envs of one group, so of one batch); returns the envs whose
        episode was truncated (their reset observation waits in ``next_observation``)."""
        if not slots:
            return []
        truncated: List[_EnvSlot] = []
        results = slots[0].batch.step([slot.index for slot in slots], actions)
        for slot, result in zip(slots, results):
            if result.error is not None:
                log.error("actor %d: env %d raised; re-creating it with a new run id", self.task, slot.env_id,
                          exc_info=result.error)
                self.env_restarts += 1
                slot.start_run(result.reset_observation)
                continue
            slot.episode_step += 1
            slot.reward = result.reward
            slot.raw_reward = float(slot.raw_reward_of(result.reward, result.info))
            slot.abandoned = False
            slot.done = result.terminated or result.truncated
            slot.life_lost = False
            slot.observation = result.observation
            if not slot.done and isinstance(result.info, Mapping) and result.info.get("life_lost"):
                # terminal for learning; the game goes on (no reset), and so does its episode
                slot.done = slot.life_lost = True
            elif slot.done:
                self.episodes += 1
                if result.truncated and not result.terminated:
                    truncated.append(slot)
                    slot.done = False  # the terminal observation goes in the extra message first
                    slot.next_observation = result.reset_observation
                else:
                    slot.observation = result.reset_observation
                    slot.episode_step = 0
        return truncated


LAUNCHER_PID_ENV = "SEED_RL_LAUNCHER_PID"
"""Set by the local launcher in each actor process's environment: the launcher's pid (see stop_with_parent)."""


def stop_with_parent(actor: Actor, parent_pid: int, poll_s: float = 0.1, grace_s: float = 0.9) -> threading.Thread:
    """Stops ``actor`` when this process's parent (``parent_pid``, the launcher) is gone, whatever killed it.

    An orphan is re-parented, so ``os.getppid()`` changes; a thread checks it every ``poll_s``. The local launcher
    runs the learner in its own process, so the learner is gone too: the actor's stream breaks and it would wait
    in a handshake for a learner that never comes back. The watcher therefore aborts the actor (``Actor.abort``
    closes the connection, which ends that wait), and ``run`` returns at once; if the process has not exited
    ``grace_s`` later (an env step that hangs), it exits with status 1. The process is gone at most about
    ``poll_s + grace_s`` (1 s) after the launcher, usually within ``poll_s`` and the interpreter's exit.

    A poll rather than Linux's ``PR_SET_PDEATHSIG``: that signal fires when the *thread* that started the child
    exits, and the launcher restarts dead actors from its monitor thread; the poll is also portable.
    """
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        log.warning("actor %d: the launcher (pid %d) is gone; stopping", actor.task, parent_pid)
        actor.abort()
        time.sleep(grace_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="launcher-watch", daemon=True)
    thread.start()
    return thread


def run_actor(server_address: str, task: int, auth_token: str = "", connect_timeout_s: Optional[float] = None,
              max_steps: Optional[int] = None, tls_ca_file: str = "", tls_server_name: str = "") -> Actor:
    actor = Actor(server_address, task, auth_token=auth_token, connect_timeout_s=connect_timeout_s,
                  tls_ca_file=tls_ca_file, tls_server_name=tls_server_name)
    actor.run(max_steps=max_steps)
    return actor
