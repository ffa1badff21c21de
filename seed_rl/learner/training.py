"""The training side of the learner: the bounded unroll queue and the compiled train step.

The queue is the back-pressure point of SEED: when it is full, the inference step blocks on ``put``, the batcher
stops answering, and actors wait. The train step runs in its own thread, concurrently with inference; both use the
same network weights.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, List

import numpy as np
import tensorflow as tf

from seed_rl.types import Unroll


class QueueClosed(Exception):
    """The queue was closed while waiting (the learner is stopping)."""


class UnrollQueue:
    """A bounded FIFO of single unrolls (numpy nests, batch-major [T + 1, ...])."""

    def __init__(self, capacity: int):
        self._queue: queue.Queue = queue.Queue(maxsize=capacity)
        self._closed = threading.Event()
        self.capacity = capacity

    def put(self, item: Any) -> None:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise QueueClosed()

    def get_batch(self, n: int) -> List[Any]:
        items: List[Any] = []
        while len(items) < n:
            if self._closed.is_set():
                raise QueueClosed()
            try:
                items.append(self._queue.get(timeout=0.1))
            except queue.Empty:
                continue
        return items

    def qsize(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        self._closed.set()


def stack_unrolls(items: List[Any]):
    """Stacks single unrolls into one batch-major batch [B, T + 1, ...]."""
    return tf.nest.map_structure(lambda *xs: np.stack(xs), *items)


def split_unrolls(batch) -> List[Any]:
    """Splits a batch-major nest [C, ...] of numpy arrays into C single unrolls."""
    leaves = tf.nest.flatten(batch)
    if not leaves:
        return []
    count = leaves[0].shape[0]
    return [tf.nest.pack_sequence_as(batch, [leaf[i] for leaf in leaves]) for i in range(count)]


def time_major(unroll: Unroll) -> Unroll:
    """[B, T + 1, ...] -> [T + 1, B, ...] for every leaf but the agent state."""
    def swap(t):
        perm = tf.concat([[1, 0], tf.range(2, tf.rank(t))], 0)
        return tf.transpose(t, perm)
    return unroll._replace(
        prev_actions=tf.nest.map_structure(swap, unroll.prev_actions),
        env_outputs=tf.nest.map_structure(swap, unroll.env_outputs),
        agent_outputs=tf.nest.map_structure(swap, unroll.agent_outputs),
        policy_version=swap(unroll.policy_version),
    )


class QueueSource:
    """Training batches straight from the unroll queue (V-trace, on-policy family): each unroll is used once."""

    def __init__(self, queue: UnrollQueue, batch_size: int):
        self.queue = queue
        self.batch_size = batch_size

    def next_batch(self):
        """Returns (batch-major batch, importance weights or None, replay indices or None)."""
        return stack_unrolls(self.queue.get_batch(self.batch_size)), None, None

    def after_step(self, indices, outputs: dict) -> None:
        del indices, outputs

    def stats(self) -> dict:
        return {}


class ReplaySource:
    """Prioritized sequence replay fed from the unroll queue with the original's replay-ratio coupling: every
    training step first inserts ``insertions`` sequences (blocking on the queue, so the learner runs at the
    actors' pace), waits until ``min_size`` sequences are stored, then samples ``batch_size``."""

    def __init__(self, queue: UnrollQueue, replay, batch_size: int, insertions: int, min_size: int):
        self.queue = queue
        self.replay = replay
        self.batch_size = batch_size
        self.insertions = insertions
        self.min_size = min_size
        self._inserted = 0
        self._sampled = 0

    def next_batch(self):
        needed = self.insertions
        while True:
            items = self.queue.get_batch(needed)
            unrolls = stack_unrolls([u for u, _ in items])
            self.replay.insert(unrolls, np.array([p for _, p in items], np.float64))
            self._inserted += len(items)
            if len(self.replay) >= self.min_size:
                break
            needed = min(self.insertions, self.min_size - len(self.replay))
        indices, weights, batch = self.replay.sample(self.batch_size)
        self._sampled += self.batch_size
        return batch, weights, indices

    def after_step(self, indices, outputs: dict) -> None:
        self.replay.update_priorities(indices, np.asarray(outputs["priorities"], np.float64))

    def stats(self) -> dict:
        out = {"replay/size": len(self.replay), "replay/fill": len(self.replay) / self.replay.capacity,
               "replay/inserted_total": self.replay.num_inserted, "replay/inserted": self._inserted,
               "replay/sampled": self._sampled}
        self._inserted = self._sampled = 0
        return out


class Trainer:
    """Owns the optimizer and the compiled train step of an agent.

    ``step`` returns ``(scalars, outputs)``: the agent's scalar metrics, and its non-scalar metrics (per-sequence
    outputs such as R2D2's new priorities) for the data source.
    """

    def __init__(self, agent, optimizer, policy_version: tf.Variable):
        self.agent = agent
        self.optimizer = optimizer
        self.policy_version = policy_version
        self.optimizer.build(agent.trainable_variables)
        self._compiled = tf.function(self._train_step, reduce_retracing=True)

    def learning_rate(self) -> float:
        lr = self.optimizer.learning_rate
        return float(lr.numpy() if hasattr(lr, "numpy") else lr)

    def step(self, batch, weights=None):
        metrics = self._compiled(batch, weights)
        scalars = {k: v for k, v in metrics.items() if v.shape.rank == 0}
        outputs = {k: v for k, v in metrics.items() if v.shape.rank != 0}
        return scalars, outputs

    def _train_step(self, batch, weights):
        unroll = time_major(batch)
        variables = self.agent.trainable_variables
        with tf.GradientTape() as tape:
            loss, metrics = self.agent.loss(unroll, weights)
        grads = tape.gradient(loss, variables)
        metrics = dict(metrics)
        metrics["learner/grad_norm"] = tf.linalg.global_norm([g for g in grads if g is not None])
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, variables) if g is not None])
        version = tf.cast(self.policy_version, tf.float32)
        metrics["learner/policy_lag"] = version - tf.reduce_mean(tf.cast(unroll.policy_version, tf.float32))
        self.policy_version.assign_add(1)
        metrics["learner/target_updated"] = tf.cast(self.agent.after_train_step(self.policy_version), tf.float32)
        return metrics
