"""Per-environment state held on the learner as ``tf.Variable``s, read and written inside the inference step.

* ``EnvTable``: one row per env id for each leaf of a nest (run ids, recurrent state, previous action, the first
  state of the current unroll, episode statistics). The original's ``Aggregator``.
* ``UnrollStore``: the partial unroll of every env. It completes unrolls of ``num_overlapping_steps +
  unroll_length + 1`` steps; consecutive unrolls of one env overlap by ``num_overlapping_steps + 1`` steps (1 for
  V-trace; ``burn_in + 1`` for R2D2)::

      unroll_length = 3, overlap 0:   steps  0 1 2 3 | 3 4 5 6 | 6 7 8 9 ...
                                              unroll 0   unroll 1   unroll 2

      unroll_length = 2, overlap 2:   steps  0 1 2 3 4 | 2 3 4 5 6 | 4 5 6 7 8 ...

  After a reset (a new run id) the env starts again at position 0, so an unroll never mixes two runs. There is no
  zero padding: the first unroll of a run holds real steps only (the original padded the burn-in with zero
  frames, which a recurrent network then burned in from a state it never had when acting).

Every method takes env ids ``[N]`` (unique) and works eagerly and inside ``tf.function``.
"""

from __future__ import annotations

import tensorflow as tf


def _variable(shape, dtype, name):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False, name=name)


def _writable(v) -> bool:
    """Zero-size leaves (e.g. a frame stack of 0 frames) hold nothing, and scatters into them fail."""
    return v.shape.num_elements() != 0


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
            lambda v, x: _writable(v) and v.scatter_update(tf.IndexedSlices(tf.cast(x, v.dtype), env_ids)),
            self._vars, values)

    def add(self, env_ids, values) -> None:
        tf.nest.map_structure(
            lambda v, x: _writable(v) and v.scatter_add(tf.IndexedSlices(tf.cast(x, v.dtype), env_ids)),
            self._vars, values)

    def reset(self, env_ids) -> None:
        n = tf.shape(env_ids)[0]
        tf.nest.map_structure(
            lambda v: _writable(v) and v.scatter_update(
                tf.IndexedSlices(tf.zeros(tf.concat([[n], tf.shape(v)[1:]], 0), v.dtype), env_ids)),
            self._vars)

    @property
    def value(self):
        return self._vars


class UnrollStore(tf.Module):
    def __init__(self, num_envs: int, unroll_length: int, specs, num_overlapping_steps: int = 0,
                 name: str = "unroll_store"):
        super().__init__(name=name)
        if unroll_length < 1 or num_overlapping_steps < 0:
            # With unroll_length 0 every kept tail would fill the env's rows and the next step would land in the
            # next env's rows.
            raise ValueError(f"UnrollStore needs unroll_length >= 1 and num_overlapping_steps >= 0, got "
                             f"{unroll_length} and {num_overlapping_steps}")
        self.num_envs = num_envs
        self.unroll_length = unroll_length
        self.overlap = num_overlapping_steps
        self.full_length = num_overlapping_steps + unroll_length + 1
        self.specs = specs
        # One row per (env, position): row ``env_id * full_length + position``. Writing a step is then a row
        # scatter (a memcpy per row), where a scatter_nd into [num_envs, full_length, ...] copied element by
        # element, several times slower for Atari frames (measured: benchmarks/RESULTS.md, "Why the fast paths
        # exist").
        self._vars = tf.nest.map_structure(
            lambda s: _variable([num_envs * self.full_length, *s.shape], s.dtype, name), specs)
        self._index = tf.Variable(tf.zeros([num_envs], tf.int32), trainable=False, name=f"{name}_index")

    def append(self, env_ids, values):
        """Appends one step per env.

        Returns ``(completed [N] bool, completed_env_ids [C], unrolls [C, full_length, ...])``.
        """
        length = self.full_length
        env_ids = tf.convert_to_tensor(env_ids, tf.int32)
        index = tf.gather(self._index, env_ids)
        rows = env_ids * length + index
        tf.nest.map_structure(
            lambda v, x: _writable(v) and v.scatter_update(tf.IndexedSlices(tf.cast(x, v.dtype), rows)),
            self._vars, values)
        index += 1
        completed = tf.equal(index, length)
        completed_ids = tf.boolean_mask(env_ids, completed)
        first_rows = completed_ids[:, tf.newaxis] * length  # [C, 1]
        unroll_rows = first_rows + tf.range(length)[tf.newaxis]  # [C, full_length]
        unrolls = tf.nest.map_structure(lambda v: tf.gather(v, unroll_rows), self._vars)
        keep = self.overlap + 1
        # The last `keep` steps of a completed unroll start the next one.
        head_rows = tf.reshape(first_rows + tf.range(keep)[tf.newaxis], [-1])
        tf.nest.map_structure(
            lambda v, u: _writable(v) and v.scatter_update(tf.IndexedSlices(
                tf.reshape(u[:, length - keep:], tf.concat([[-1], tf.shape(u)[2:]], 0)), head_rows)),
            self._vars, unrolls)
        self._index.scatter_update(tf.IndexedSlices(tf.where(completed, keep, index), env_ids))
        return completed, completed_ids, unrolls

    def reset(self, env_ids) -> None:
        """Drops the partial unroll of ``env_ids`` (new run): the next step is position 0."""
        n = tf.shape(env_ids)[0]
        self._index.scatter_update(tf.IndexedSlices(tf.zeros([n], tf.int32), env_ids))

    @property
    def index(self):
        return self._index
