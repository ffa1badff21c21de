"""What a run directory keeps to resume: the TensorFlow checkpoint (weights, optimizer, counters) and, when the
agent's replay feed says it is checkpointed, the replay buffer's file beside it."""

from __future__ import annotations

import collections
import json
import logging
import math
import os
import threading
import time
from typing import List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

log = logging.getLogger("seed_rl.learner")

_SHOWN_VARIABLES = 3
"""Non-finite variables a refused save names."""

CHECKPOINT_DIR = "checkpoints"
REPLAY_FILE = os.path.join("replay", "replay.npz")


class RunCheckpoint:
    """``tf.train.CheckpointManager`` over ``<logdir>/checkpoints`` plus the optional replay file.

    ``items`` are the trackables to save (optimizer, counters, the agent's ``checkpoint_items()``). Construction
    restores the latest checkpoint, if any, and asserts that every existing object matched.
    """

    def __init__(self, logdir: str, items: dict, replay=None, max_to_keep: int = 2,
                 keep_checkpoint_every_n_hours: float = 6):
        self.checkpoint = tf.train.Checkpoint(**items)
        self.items = items
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, os.path.join(logdir, CHECKPOINT_DIR), max_to_keep=max_to_keep,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours)
        self.replay = replay
        self.replay_path = os.path.join(logdir, REPLAY_FILE)
        self.restored_from: Optional[str] = None
        if self.manager.latest_checkpoint:
            self.restored_from = self.manager.latest_checkpoint
            configured = _constant_learning_rates(items)
            status = self.checkpoint.restore(self.restored_from)
            status.assert_existing_objects_matched()
            status.expect_partial()  # values nothing here holds any more (a fixed entropy cost) are not an error
            for optimizer, rate in configured.items():
                # Keras keeps a constant learning rate as an optimizer variable, which the checkpoint has just set
                # to the rate it was saved with; a run resumed with another rate (config_changes.txt) takes its own.
                optimizer.learning_rate = rate

    def restore_replay(self) -> int:
        """Loads the replay file into the buffer when both exist; returns the sequences restored."""
        if self.replay is None or not os.path.exists(self.replay_path):
            return 0
        self.replay.load(self.replay_path)
        print(f"seed_rl learner: restored {len(self.replay):,d} replay sequences from {self.replay_path}",
              flush=True)
        return len(self.replay)

    def save(self, checkpoint_number: int) -> Optional[str]:
        """Writes a checkpoint (and the replay file) and returns its path; writes nothing and returns None when a
        variable is not finite (the latest checkpoint stays the one before)."""
        if not check_finite(self.items, "checkpoint"):
            return None
        path = self.manager.save(checkpoint_number=checkpoint_number)
        if self.replay is not None:
            size = self.replay.estimate_checkpoint_bytes()
            print(f"seed_rl learner: writing the replay buffer ({len(self.replay):,d} sequences, "
                  f"{size / 2**20:,.1f} MiB) to {self.replay_path}", flush=True)
            os.makedirs(os.path.dirname(self.replay_path), exist_ok=True)
            self.replay.save(self.replay_path)
        return path


def _constant_learning_rates(items: dict) -> dict:
    """The learning rate of each Keras optimizer among ``items`` that holds a constant one (a variable); an
    optimizer with a schedule has none (the schedule is rebuilt from the config)."""
    rates = {}
    for item in items.values():
        if isinstance(item, keras.optimizers.Optimizer) and isinstance(item.learning_rate, keras.Variable):
            rates[item] = float(item.learning_rate.numpy())
    return rates


BEST_DIR = os.path.join(CHECKPOINT_DIR, "best")
BEST_RECORD = "best.json"


class BestCheckpoint:
    """The run's best checkpoint so far, in ``<logdir>/checkpoints/best`` (one checkpoint) with ``best.json``
    saying what made it the best: the mean return of the window of consecutive episodes (evaluation episodes when
    the run has eval envs), the env frames and the policy version whose weights it holds.

    The record survives a restart (a resumed run only replaces it with a better window). A window mixes the
    policies that played its episodes; the learner saves the weights of the version that stands for them (the
    median of its episodes' middle versions, from a `WeightHistory`), which ``best.json`` names with the
    versions the window spans.

    ``checkpoint`` is what is written; when ``variables`` are given (a copy of the agent's variables, in
    `all_variables` order), a save may first set them from a snapshot of the weights (``save(weights=...)``).
    """

    def __init__(self, logdir: str, checkpoint: tf.train.Checkpoint, items: Optional[dict] = None,
                 variables: Optional[Sequence[tf.Variable]] = None,
                 counters: Optional[Tuple[tf.Variable, tf.Variable]] = None):
        self.items = items
        """The checkpoint's items, checked to be finite before a save (None: not checked)."""
        self.variables = list(variables) if variables is not None else None
        """The checkpoint's agent variables that ``save(weights=...)`` sets (None: it saves what they hold)."""
        self.counters = counters
        """(train steps, env frames) variables of the checkpoint that a save sets to its version and frames."""
        self.directory = os.path.join(logdir, BEST_DIR)
        self.manager = tf.train.CheckpointManager(checkpoint, self.directory, max_to_keep=1)
        self.record: Optional[dict] = read_best_record(logdir)

    @property
    def value(self) -> float:
        return float(self.record["mean_return"]) if self.record else float("-inf")

    def maybe_save(self, mean_return: float, checkpoint_number: int, env_frames: int, episodes: int,
                   eval_episodes: bool, saved_at_frames: Optional[int] = None,
                   weights: Optional[Sequence[np.ndarray]] = None,
                   window_versions: Optional[Tuple[int, int]] = None) -> Optional[str]:
        """Saves a new best checkpoint when ``mean_return`` beats the record; returns its path (else None).

        ``checkpoint_number`` is the policy version (train steps) whose weights are saved (``weights``, a snapshot
        of that version in `all_variables` order; None: what the checkpoint's variables hold now),
        ``env_frames`` the frames when the window's last episode ended, ``saved_at_frames`` the frames when the
        save happened (right after the window's episodes arrived), ``window_versions`` the lowest and highest
        policy version of the window's episodes (None: unknown)."""
        if not math.isfinite(mean_return) or mean_return <= self.value:
            return None
        return self.save(mean_return, checkpoint_number, env_frames, episodes, eval_episodes, saved_at_frames,
                         weights=weights, window_versions=window_versions)

    def save(self, mean_return: float, checkpoint_number: int, env_frames: int, episodes: int,
             eval_episodes: bool, saved_at_frames: Optional[int] = None,
             greedy: Optional[tuple[float, int]] = None, weights: Optional[Sequence[np.ndarray]] = None,
             window_versions: Optional[Tuple[int, int]] = None) -> Optional[str]:
        """Saves the best checkpoint whatever the record (``maybe_save``'s arguments); ``greedy``: (mean return,
        episodes) of the greedy evaluation that confirmed these weights reach the target, recorded as what
        made them the best. Returns the path, or None when a variable is not finite (nothing written)."""
        if weights is not None:
            if self.variables is None:
                raise ValueError("this best checkpoint was built without variables to set from a snapshot")
            for variable, value in zip(self.variables, weights, strict=True):
                variable.assign(value)
        if self.counters is not None:
            self.counters[0].assign(int(checkpoint_number))
            self.counters[1].assign(int(env_frames if saved_at_frames is None else saved_at_frames))
        if self.items is not None and not check_finite(self.items, "best checkpoint"):
            return None
        path = self.manager.save(checkpoint_number=checkpoint_number)
        statistic = f"mean return of the last {int(episodes)} episodes when they arrived"
        if greedy is not None:
            statistic = (f"greedy evaluation of these weights at the target ({greedy[0]:.1f} over {greedy[1]} "
                         f"episodes), the training window then: {mean_return:.1f}")
        self.record = {"checkpoint": int(checkpoint_number), "policy_version": int(checkpoint_number),
                       "path": os.path.basename(path), "mean_return": float(mean_return), "episodes": int(episodes),
                       "statistic": statistic, "env_frames": int(env_frames),
                       "saved_at_frames": int(env_frames if saved_at_frames is None else saved_at_frames),
                       "eval_episodes": bool(eval_episodes), "saved_at": time.time()}
        if window_versions is not None:
            self.record["window_policy_versions"] = [int(window_versions[0]), int(window_versions[1])]
        if greedy is not None:
            self.record.update(greedy_mean_return=float(greedy[0]), greedy_episodes=int(greedy[1]))
        tmp = os.path.join(self.directory, BEST_RECORD + ".tmp")
        with open(tmp, "w") as f:
            json.dump(self.record, f, indent=1)
        os.replace(tmp, os.path.join(self.directory, BEST_RECORD))
        return path


def all_variables(items: dict) -> List[tf.Variable]:
    """Every ``tf.Variable`` of checkpoint ``items`` (the agent's ``checkpoint_items()``), in one deterministic
    order: two agents built from one config list matching variables at matching positions."""
    return [v for v in tf.nest.flatten(items) if isinstance(v, tf.Variable)]


class WeightHistory:
    """Copies of the agent's weights at recent policy versions, so that the best checkpoint can hold the weights
    that played its window rather than those of the moment the window was read (which may already be worse: a
    policy that collapses right after its best window).

    The training thread calls `record` after each update; a copy is kept when ``spacing`` versions have passed
    since the last one. The learner sets ``spacing`` from the versions a window of episodes spans, so that the
    kept copies reach back over about two windows. At most ``capacity`` copies are kept: 32, fewer when that
    many would take over ``max_bytes``."""

    def __init__(self, variables: Sequence[tf.Variable], max_snapshots: int = 32, max_bytes: int = 256 * 2**20):
        self.variables = list(variables)
        nbytes = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size for v in self.variables)
        self.capacity = max(2, min(max_snapshots, max_bytes // max(1, nbytes)))
        self.spacing = 1
        self._snapshots: collections.deque = collections.deque(maxlen=self.capacity)
        self._lock = threading.Lock()

    def record(self, version: int) -> None:
        """Keeps a copy of the weights as they are now, of policy ``version``, when one is due (training thread:
        the weights do not change meanwhile)."""
        with self._lock:
            if self._snapshots and version - self._snapshots[-1][0] < self.spacing:
                return
        copy = [np.array(v.numpy(), copy=True) for v in self.variables]
        with self._lock:
            self._snapshots.append((int(version), copy))

    def set_span(self, versions: float) -> None:
        """A window of episodes spans ``versions`` policy versions: keep a copy every span / (capacity / 2)."""
        self.spacing = max(1, int(versions // max(1, self.capacity // 2)))

    def nearest(self, version: float) -> Optional[Tuple[int, List[np.ndarray]]]:
        """The kept (version, weights) nearest to ``version`` (the older of two equally near), or None."""
        with self._lock:
            if not self._snapshots:
                return None
            return min(self._snapshots, key=lambda s: (abs(s[0] - version), s[0]))

    def versions(self) -> List[int]:
        with self._lock:
            return [s[0] for s in self._snapshots]


def read_best_record(logdir: str) -> Optional[dict]:
    """``best.json`` of the run's best checkpoint, or None when the run has none."""
    path = os.path.join(logdir, BEST_DIR, BEST_RECORD)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _variables(items: dict) -> list:
    """The floating-point variables that checkpoint ``items`` hold: a tf.Variable, or anything with ``variables``
    (Keras models and layers, optimizers, tf.Modules), each once."""
    found: dict = {}
    for value in items.values():
        variables = [value] if isinstance(value, tf.Variable) else list(getattr(value, "variables", ()))
        for variable in variables:
            if tf.as_dtype(variable.dtype).is_floating:
                found.setdefault(id(variable), variable)
    return list(found.values())


def check_finite(items: dict, what: str) -> bool:
    """Whether every floating-point variable of checkpoint ``items`` is finite; if not, logs one line naming the
    first few that are not, and the caller writes nothing: a checkpoint is never written with non-finite
    variables (the trainer skips non-finite updates, so this is the last line of defence)."""
    bad = [v.name for v in _variables(items) if not np.isfinite(np.asarray(v.numpy())).all()]
    if bad:
        more = f" and {len(bad) - _SHOWN_VARIABLES} more" if len(bad) > _SHOWN_VARIABLES else ""
        log.error("not writing the %s: variables not finite: %s%s; the previous one stays", what,
                  ", ".join(bad[:_SHOWN_VARIABLES]), more)
    return not bad
