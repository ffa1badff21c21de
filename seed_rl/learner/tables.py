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

  ``stagger_envs`` > 0 spreads the unrolls' ends over time: after a reset, env ``i`` (of the first ``stagger_envs``)
  starts at position ``i * unroll_length // stagger_envs % unroll_length`` instead of 0, and that first, short
  unroll is dropped (its steps before the offset are another run's or nothing); its last ``overlap + 1`` steps are
  real and start the next unroll, so every unroll after it is whole and real. Envs that an actor steps in lockstep
  would otherwise all complete their unrolls at the same step, handing the learner ``envs / batch_size`` batches at
  once and then nothing for ``unroll_length`` steps (docs/presets.md, "Unrolls that end together")::

      unroll_length = 4, overlap 0, env offset 2:   (x x) 0 1 2 | 2 3 4 5 6 | 6 7 8 9 10 ...
                                                    dropped        unroll 0    unroll 1

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
                 name: str = "unroll_store", stagger_envs: int = 0):
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
        self.stagger_envs = min(max(stagger_envs, 0), num_envs)
        offsets = [i * unroll_length // self.stagger_envs % unroll_length if i < self.stagger_envs else 0
                   for i in range(num_envs)]
        self._offsets = tf.constant(offsets, tf.int32)
        """Each env's position after a reset (all 0 without ``stagger_envs``)."""
        self._index = tf.Variable(self._offsets, trainable=False, name=f"{name}_index")
        # 1 while an env's first, short unroll is still filling: it is dropped when it completes.
        self._dropping = (tf.Variable(tf.cast(self._offsets > 0, tf.int32), trainable=False, name=f"{name}_dropping")
                          if self.stagger_envs else None)

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
        full = tf.equal(index, length)
        keep = self.overlap + 1
        completed = full if self._dropping is None else full & tf.not_equal(tf.gather(self._dropping, env_ids), 1)
        completed_ids = tf.boolean_mask(env_ids, completed)
        unrolls = self._gather(completed_ids, tf.range(length))
        if self._dropping is None:
            full_ids = completed_ids
            tails = tf.nest.map_structure(lambda u: u[:, length - keep:], unrolls)
        else:
            full_ids = tf.boolean_mask(env_ids, full)
            tails = self._gather(full_ids, tf.range(length - keep, length))
            self._dropping.scatter_update(tf.IndexedSlices(tf.zeros_like(full_ids), full_ids))
        # The last `keep` steps of a full unroll (kept or dropped) start the next one.
        head_rows = tf.reshape(full_ids[:, tf.newaxis] * length + tf.range(keep)[tf.newaxis], [-1])
        tf.nest.map_structure(
            lambda v, u: _writable(v) and v.scatter_update(tf.IndexedSlices(
                tf.reshape(u, tf.concat([[-1], tf.shape(u)[2:]], 0)), head_rows)),
            self._vars, tails)
        self._index.scatter_update(tf.IndexedSlices(tf.where(full, keep, index), env_ids))
        return completed, completed_ids, unrolls

    def _gather(self, env_ids, positions):
        """The rows at ``positions`` [P] of each env in ``env_ids`` [C]: a nest of [C, P, ...]."""
        rows = env_ids[:, tf.newaxis] * self.full_length + positions[tf.newaxis]
        return tf.nest.map_structure(lambda v: tf.gather(v, rows), self._vars)

    def reset(self, env_ids) -> None:
        """Drops the partial unroll of ``env_ids`` (new run): the next step is position 0, or the env's offset
        (``stagger_envs``), whose first unroll is then dropped."""
        if self._dropping is None:
            n = tf.shape(env_ids)[0]
            self._index.scatter_update(tf.IndexedSlices(tf.zeros([n], tf.int32), env_ids))
            return
        offsets = tf.gather(self._offsets, env_ids)
        self._index.scatter_update(tf.IndexedSlices(offsets, env_ids))
        self._dropping.scatter_update(tf.IndexedSlices(tf.cast(offsets > 0, tf.int32), env_ids))

    @property
    def index(self):
        return self._index
