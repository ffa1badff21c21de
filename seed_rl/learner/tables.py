"""Per-environment state held on the learner as ``tf.Variable``s, read and written inside the inference step.

* ``EnvTable``: one row per env id for each leaf of a nest (run ids, recurrent state, previous action, the first
  state of the current unroll, episode statistics). The original's ``Aggregator``.
* ``UnrollStore``: the partial unroll of every env. It completes unrolls of ``unroll_length + 1`` steps; consecutive
  unrolls of one env overlap by ``num_overlapping_steps + 1`` steps (1 for V-trace; ``burn_in + 1`` for R2D2)::

      unroll_length = 3, overlap 0:   steps  0 1 2 3 | 3 4 5 6 | 6 7 8 9 ...
                                              unroll 0   unroll 1   unroll 2

  After a reset (a new run id) the store starts the env again at position ``num_overlapping_steps`` with zeros in
  front (R2D2's burn-in padding), so an unroll never mixes two runs.

Every method takes env ids ``[N]`` (unique) and works eagerly and inside ``tf.function``.
"""

from __future__ import annotations

import tensorflow as tf


def _variable(shape, dtype, name):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False, name=name)


class EnvTable(tf.Module):
    def __init__(self, num_envs: int, specs, name: str):
        super().__init__(name=name)
        self.num_envs = num_envs
        self.specs = specs
        self._vars = tf.nest.map_structure(
            lambda s: _variable([num_envs, *s.shape], s.dtype, name), specs)

    def read(self, env_ids):
        return tf.nest.map_structure(lambda v: tf.gather(v, env_ids), self._vars)

    def replace(self, env_ids, values) -> None:
        tf.nest.map_structure(
            lambda v, x: v.scatter_update(tf.IndexedSlices(tf.cast(x, v.dtype), env_ids)), self._vars, values)

    def add(self, env_ids, values) -> None:
        tf.nest.map_structure(
            lambda v, x: v.scatter_add(tf.IndexedSlices(tf.cast(x, v.dtype), env_ids)), self._vars, values)

    def reset(self, env_ids) -> None:
        n = tf.shape(env_ids)[0]
        tf.nest.map_structure(
            lambda v: v.scatter_update(
                tf.IndexedSlices(tf.zeros(tf.concat([[n], tf.shape(v)[1:]], 0), v.dtype), env_ids)),
            self._vars)

    @property
    def value(self):
        return self._vars


class UnrollStore(tf.Module):
    def __init__(self, num_envs: int, unroll_length: int, specs, num_overlapping_steps: int = 0,
                 name: str = "unroll_store"):
        super().__init__(name=name)
        self.num_envs = num_envs
        self.unroll_length = unroll_length
        self.overlap = num_overlapping_steps
        self.full_length = num_overlapping_steps + unroll_length + 1
        self.specs = specs
        self._vars = tf.nest.map_structure(
            lambda s: _variable([num_envs, self.full_length, *s.shape], s.dtype, name), specs)
        self._index = tf.Variable(tf.fill([num_envs], num_overlapping_steps), trainable=False,
                                  name=f"{name}_index")

    def append(self, env_ids, values):
        """Appends one step per env.

        Returns ``(completed [N] bool, completed_env_ids [C], unrolls [C, full_length, ...])``.
        """
        index = tf.gather(self._index, env_ids)
        scatter_at = tf.stack([env_ids, index], axis=1)
        tf.nest.map_structure(lambda v, x: v.scatter_nd_update(scatter_at, tf.cast(x, v.dtype)),
                              self._vars, values)
        index += 1
        completed = tf.equal(index, self.full_length)
        completed_ids = tf.boolean_mask(env_ids, completed)
        unrolls = tf.nest.map_structure(lambda v: tf.gather(v, completed_ids), self._vars)
        keep = self.overlap + 1
        # The last `keep` steps of a completed unroll start the next one.
        tf.nest.map_structure(
            lambda v, u: v.scatter_update(tf.IndexedSlices(
                tf.concat([u[:, -keep:], u[:, keep:]], axis=1), completed_ids)),
            self._vars, unrolls)
        self._index.scatter_update(tf.IndexedSlices(tf.where(completed, keep, index), env_ids))
        return completed, completed_ids, unrolls

    def reset(self, env_ids) -> None:
        """Drops the partial unroll of ``env_ids`` (new run): restart at ``overlap`` after zero padding."""
        n = tf.shape(env_ids)[0]
        self._index.scatter_update(tf.IndexedSlices(tf.fill([n], self.overlap), env_ids))
        if self.overlap:
            pad = tf.stack(tf.meshgrid(env_ids, tf.range(self.overlap), indexing="ij"), axis=-1)
            tf.nest.map_structure(
                lambda v: v.scatter_nd_update(
                    pad, tf.zeros(tf.concat([[n, self.overlap], tf.shape(v)[2:]], 0), v.dtype)),
                self._vars)

    @property
    def index(self):
        return self._index
