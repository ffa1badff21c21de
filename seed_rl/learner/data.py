"""The learner's data path: the bounded unroll queue, and the data source an agent's ``feed`` declares (each
unroll once, from the queue; or a prioritized replay fed from it), built by :func:`build_source` from a registry
of feed types, so the learner names no feed.

The queue is the back-pressure point of SEED: when it is full, the inference step blocks on ``put``, the batcher
stops answering, and actors wait. Every source answers ``next_batch() -> (batch, weights, indices, env_ids)``,
``after_step(indices, priorities)`` and ``stats()``, and says what else it
brings: a replay to checkpoint and the initial priorities of completed unrolls.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from seed_rl.types import ArraySpec, Feed, QueueFeed, ReplayFeed, Unroll


class QueueClosed(Exception):
    """The queue was closed while waiting (the learner is stopping)."""


class UnrollQueue:
    """A bounded FIFO of unrolls (numpy nests, batch-major [T + 1, ...]), put in chunks and taken in batches.

    The inference step completes the unrolls of several envs at once: ``put`` takes them as one batch-major chunk
    ``[C, T + 1, ...]`` (with their replay priorities, if any), and ``get_batch(n)`` returns exactly ``n`` unrolls
    as one batch-major nest ``[n, T + 1, ...]``, in the order they were put. A batch that one chunk holds is a view
    of it (no copy); otherwise the pieces are concatenated once per leaf. Nothing is split into single unrolls and
    stacked again.

    ``capacity`` counts unrolls: a ``put`` waits while the queue holds ``capacity`` or more (that wait is SEED's
    back-pressure), so the queue holds at most ``capacity + C - 1`` unrolls after a chunk of ``C``. ``get_batch``
    takes unrolls as they arrive, so a capacity below the batch size cannot stall it.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._chunks: collections.deque = collections.deque()  # [leaves, priorities or None, count, offset]
        self._size = 0
        self._structure: Any = None
        self._cond = threading.Condition()
        self._closed = threading.Event()

    def put(self, chunk: Any, priorities: Optional[np.ndarray] = None, env_ids: Optional[np.ndarray] = None) -> None:
        """Queues the ``C`` unrolls of a batch-major chunk ``[C, ...]`` (``priorities`` [C] or None; ``env_ids``
        [C], the envs they came from, or None: -1); waits while the queue is full. Raises QueueClosed once the
        queue is closed."""
        leaves = [np.asarray(x) for x in tf.nest.flatten(chunk)]
        count = int(leaves[0].shape[0]) if leaves else 0
        if count == 0:
            return
        # The env ids travel as one more leaf, sliced and concatenated with the others.
        leaves.append(np.full([count], -1, np.int32) if env_ids is None else np.asarray(env_ids).reshape(count))
        if priorities is not None:
            priorities = np.asarray(priorities, np.float64).reshape(count)
        with self._cond:
            while self._size >= self.capacity:
                if self._closed.is_set():
                    raise QueueClosed()
                self._cond.wait(0.1)
            if self._closed.is_set():
                raise QueueClosed()
            if self._structure is None:
                self._structure = chunk
            self._chunks.append([leaves, priorities, count, 0])
            self._size += count
            self._cond.notify_all()

    def get_batch(self, n: int) -> tuple[Any, Optional[np.ndarray]]:
        """The next ``n`` unrolls as one batch-major nest ``[n, ...]``, and their priorities ``[n]`` (None when
        they were put without). Waits for them; raises QueueClosed once the queue is closed."""
        batch, priorities, _ = self.get_batch_with_env_ids(n)
        return batch, priorities

    def get_batch_with_env_ids(self, n: int) -> tuple[Any, Optional[np.ndarray], np.ndarray]:
        """``get_batch``, and the env ids ``[n]`` the unrolls came from (-1 where they were put without)."""
        pieces: List[tuple] = []  # (leaves, priorities) slices, in order
        needed = n
        with self._cond:
            while needed:
                while not self._chunks:
                    if self._closed.is_set():
                        raise QueueClosed()
                    self._cond.wait(0.1)
                if self._closed.is_set():
                    raise QueueClosed()
                head = self._chunks[0]
                leaves, priorities, count, offset = head
                take = min(needed, count - offset)
                end = offset + take
                pieces.append(([x[offset:end] for x in leaves], None if priorities is None else priorities[offset:end]))
                if end == count:
                    self._chunks.popleft()
                else:
                    head[3] = end
                self._size -= take
                needed -= take
                self._cond.notify_all()
            structure = self._structure
        if len(pieces) == 1:
            leaves, priorities = pieces[0]
        else:
            leaves = [np.concatenate(parts) for parts in zip(*(p[0] for p in pieces))]
            parts = [p[1] for p in pieces]
            priorities = None if any(x is None for x in parts) else np.concatenate(parts)
        return tf.nest.pack_sequence_as(structure, leaves[:-1]), priorities, leaves[-1]

    def qsize(self) -> int:
        """Unrolls in the queue."""
        return self._size

    def close(self) -> None:
        self._closed.set()
        with self._cond:
            self._cond.notify_all()


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


class QueueSource:
    """Training batches straight from the unroll queue (V-trace, on-policy family): each unroll is used once."""

    replay = None
    """No replay (one to checkpoint: ``ReplaySource.replay``)."""
    checkpointed = False
    initial_priorities: Optional[Callable[[Any], Any]] = None
    """No priorities for completed unrolls."""

    def __init__(self, queue: UnrollQueue, batch_size: int):
        self.queue = queue
        self.batch_size = batch_size

    def next_batch(self):
        """Returns (batch-major batch, importance weights or None, replay indices or None, env ids [B] or None)."""
        batch, _, env_ids = self.queue.get_batch_with_env_ids(self.batch_size)
        return batch, None, None, env_ids

    def after_step(self, indices, priorities) -> None:
        del indices, priorities

    def stats(self) -> dict:
        return {}


class ReplaySource:
    """Prioritized sequence replay fed from the unroll queue with the original's replay-ratio coupling: every
    training step first inserts ``insertions`` sequences (blocking on the queue, so the learner runs at the
    actors' pace), waits until ``min_size`` sequences are stored, then samples ``batch_size``."""

    def __init__(self, queue: UnrollQueue, replay, batch_size: int, insertions: int, min_size: int,
                 checkpointed: bool = False, initial_priorities: Optional[Callable[[Any], Any]] = None):
        self.queue = queue
        self.replay = replay
        self.batch_size = batch_size
        self.insertions = insertions
        self.min_size = min_size
        self.checkpointed = checkpointed
        """Whether the replay is written with each checkpoint (the feed's ``checkpointed``)."""
        self.initial_priorities = initial_priorities
        """The compiled priorities of completed unrolls (batch-major), or None: priority 1."""
        self._inserted = 0
        self._sampled = 0

    def next_batch(self):
        needed = self.insertions
        while True:
            unrolls, priorities = self.queue.get_batch(needed)
            self.replay.insert(unrolls, np.ones([needed]) if priorities is None else _quarantined(priorities))
            self._inserted += needed
            if len(self.replay) >= self.min_size:
                break
            needed = min(self.insertions, self.min_size - len(self.replay))
        indices, weights, batch = self.replay.sample(self.batch_size)
        self._sampled += self.batch_size
        return batch, weights, indices, None  # the replay keeps no env ids

    def after_step(self, indices, priorities) -> None:
        if priorities is not None:
            self.replay.update_priorities(indices, _quarantined(priorities))

    def stats(self) -> dict:
        out = {"replay/size": len(self.replay), "replay/fill": len(self.replay) / self.replay.capacity,
               "replay/inserted_total": self.replay.num_inserted, "replay/inserted": self._inserted,
               "replay/sampled": self._sampled}
        self._inserted = self._sampled = 0
        return out


def _quarantined(priorities) -> np.ndarray:
    """Priorities with every non-finite one (a sequence of extreme rewards: its loss terms overflowed and its
    update was skipped) set to 0, so that such a sequence is (almost) never sampled rather than failing the
    replay's insert or update."""
    return np.nan_to_num(np.asarray(priorities, np.float64), nan=0.0, posinf=0.0, neginf=0.0)


def replay_sequence_spec(store) -> Unroll:
    """ArraySpecs of one replayed sequence: the unroll store's step layout over its full length."""
    length = store.full_length
    action_spec, env_spec, agent_output_spec, _, state_spec = store.specs

    def seq(s):
        return ArraySpec((length, *s.shape), s.dtype.name)

    def single(s):
        return ArraySpec(tuple(s.shape), s.dtype.name)

    return Unroll(agent_state=tf.nest.map_structure(single, state_spec),
                  prev_actions=tf.nest.map_structure(seq, action_spec),
                  env_outputs=tf.nest.map_structure(seq, env_spec),
                  agent_outputs=tf.nest.map_structure(seq, agent_output_spec),
                  policy_version=ArraySpec((length,), "int64"))


def frames_per_train_step(feed: Feed, batch_size: int, unroll_length: int, num_action_repeats: int) -> int:
    """Environment frames one train step accounts for (the original's ``iter_frame_ratio``): the unrolls it
    consumes (queue feed) or inserts into the replay (replay feed: batch_size / replay_ratio sequences)."""
    return feed.insertions_per_step(batch_size) * unroll_length * num_action_repeats


def make_replay(feed: ReplayFeed, store, seed: int):
    """The prioritized replay a replay feed declares, over the unroll store's sequences; refuses (ValueError,
    MemoryError) a buffer that would not fit in memory."""
    from seed_rl.learner import replay as replay_lib

    spec = replay_sequence_spec(store)
    required = replay_lib.required_bytes(feed.capacity, spec)
    print(f"seed_rl learner: the replay buffer ({feed.capacity:,d} sequences of {store.full_length} steps) "
          f"takes {required / 2**30:.2f} GiB", flush=True)
    replay_lib.check_memory(required, "the replay buffer")
    return replay_lib.PrioritizedReplay(
        feed.capacity, spec, priority_exponent=feed.priority_exponent,
        importance_sampling_exponent=feed.importance_sampling_exponent, seed=seed, check=False)




DataSource = Any
"""What :func:`build_source` returns: a :class:`QueueSource` or a :class:`ReplaySource` (see the module docstring)."""


def _queue_source(feed: QueueFeed, queue: UnrollQueue, store, batch_size: int, seed: int) -> QueueSource:
    del feed, store, seed
    return QueueSource(queue, batch_size)


def _replay_source(feed: ReplayFeed, queue: UnrollQueue, store, batch_size: int, seed: int) -> ReplaySource:
    initial = None if feed.initial_priorities is None else tf.function(feed.initial_priorities,
                                                                       reduce_retracing=True, autograph=False)
    return ReplaySource(queue, make_replay(feed, store, seed), batch_size, feed.insertions_per_step(batch_size),
                        feed.min_size, checkpointed=feed.checkpointed, initial_priorities=initial)


SOURCES: Dict[type, Callable[..., DataSource]] = {QueueFeed: _queue_source, ReplayFeed: _replay_source}
"""Feed type -> builder ``(feed, queue, store, batch_size, seed) -> source``; a new kind of feed registers one."""


def build_source(feed: Feed, queue: UnrollQueue, store, batch_size: int, seed: int) -> DataSource:
    """The data source that ``feed`` declares, fed by ``queue`` (the unroll store ``store`` gives a replay its
    sequences' layout)."""
    builder = SOURCES.get(type(feed))
    if builder is None:
        raise ValueError(f"no data source for the feed {type(feed).__name__}; known: "
                         f"{', '.join(t.__name__ for t in SOURCES)}")
    return builder(feed, queue, store, batch_size, seed)
