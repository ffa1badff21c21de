"""Table-driven tests of the unroll store and per-env tables on tiny integer observations.

Cut rules (unroll_length = 3, overlap 0): consecutive unrolls share one step::

    steps   0 1 2 3 4 5 6 7 8 9
    unroll  [0 1 2 3]
                  [3 4 5 6]
                        [6 7 8 9]

With ``num_overlapping_steps = 2`` (R2D2 burn-in) unrolls hold 2 + unroll_length + 1 steps and consecutive
unrolls share 3 steps; a fresh run starts at position 0 (no zero padding).
"""

import numpy as np
import pytest
import tensorflow as tf

from seed_rl.learner.tables import EnvTable, UnrollStore


def _store(unroll_length=3, overlap=0, num_envs=3):
    return UnrollStore(num_envs, unroll_length, tf.TensorSpec([], tf.int32), num_overlapping_steps=overlap)


def _append(store, env_ids, values):
    mask, ids, unrolls = store.append(tf.constant(env_ids, tf.int32), tf.constant(values, tf.int32))
    return mask.numpy().tolist(), ids.numpy().tolist(), unrolls.numpy().tolist()


@pytest.mark.parametrize(
    "unroll_length,overlap,steps,expected",
    [
        (3, 0, range(10), [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]),
        (1, 0, range(4), [[0, 1], [1, 2], [2, 3]]),
        (3, 2, range(1, 13), [[1, 2, 3, 4, 5, 6], [4, 5, 6, 7, 8, 9], [7, 8, 9, 10, 11, 12]]),
    ],
)
def test_unrolls_overlap(unroll_length, overlap, steps, expected):
    store = _store(unroll_length, overlap)
    got = []
    for s in steps:
        _, ids, unrolls = _append(store, [0], [s])
        got.extend(unrolls)
        assert ids == ([0] if unrolls else [])
    assert got == expected


def test_envs_are_independent_and_order_of_ids_does_not_matter():
    store = _store(2, 0)
    assert _append(store, [0, 2], [10, 20])[1] == []
    assert _append(store, [2, 0], [21, 11])[1] == []
    mask, ids, unrolls = _append(store, [2, 1, 0], [22, 30, 12])
    assert mask == [True, False, True]
    assert ids == [2, 0]
    assert unrolls == [[20, 21, 22], [10, 11, 12]]


def test_reset_drops_partial_unroll():
    store = _store(3, 0)
    _append(store, [0], [1])
    _append(store, [0], [2])
    store.reset(tf.constant([0]))
    got = []
    for s in [10, 11, 12, 13]:
        got.extend(_append(store, [0], [s])[2])
    assert got == [[10, 11, 12, 13]]


def test_reset_with_overlap_starts_a_fresh_sequence_without_padding():
    store = _store(2, 2)
    for s in [1, 2, 3, 4, 5]:
        _append(store, [0], [s])  # completes [1 2 3 4 5]
    _append(store, [0], [6])
    store.reset(tf.constant([0]))
    got = []
    for s in [7, 8, 9, 10, 11]:
        got.extend(_append(store, [0], [s])[2])
    assert got == [[7, 8, 9, 10, 11]]


def test_env_table_read_replace_add_reset():
    table = EnvTable(4, (tf.TensorSpec([], tf.int32), tf.TensorSpec([2], tf.float32)), "t")
    ids = tf.constant([3, 1])
    table.replace(ids, (tf.constant([5, 6]), tf.constant([[1.0, 2.0], [3.0, 4.0]])))
    table.add(tf.constant([1]), (tf.constant([10]), tf.constant([[1.0, 1.0]])))
    a, b = table.read(tf.constant([0, 1, 3]))
    assert a.numpy().tolist() == [0, 16, 5]
    np.testing.assert_allclose(b.numpy(), [[0, 0], [4, 5], [1, 2]])
    table.reset(tf.constant([3]))
    a, _ = table.read(tf.constant([3]))
    assert a.numpy().tolist() == [0]


def test_append_takes_a_python_list_of_env_ids():
    store = _store(unroll_length=1, num_envs=2)
    store.append([1, 0], tf.constant([10, 20], tf.int32))
    _, completed_ids, unrolls = store.append([0, 1], tf.constant([21, 11], tf.int32))
    assert completed_ids.numpy().tolist() == [0, 1]
    assert unrolls.numpy().tolist() == [[20, 21], [10, 11]]


def test_an_unroll_needs_at_least_one_step():
    with pytest.raises(ValueError, match="unroll_length >= 1"):
        _store(unroll_length=0)


def _staggered(unroll_length=4, overlap=0, num_envs=4, stagger_envs=4):
    return UnrollStore(num_envs, unroll_length, tf.TensorSpec([], tf.int32), num_overlapping_steps=overlap,
                       stagger_envs=stagger_envs)


def test_staggered_envs_complete_their_unrolls_at_evenly_spread_steps():
    """4 envs in lockstep, unrolls of 4: without staggering all four complete at the same steps; staggered, one
    env completes at each step from the first unroll's end on (env 0, offset 0, keeps its first; envs 1-3 drop
    theirs, cut 1-3 steps short)."""
    for stagger, expected_per_step in ((0, [0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4]),
                                       (4, [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1])):
        store = _staggered(stagger_envs=stagger)
        per_step = [len(_append(store, [0, 1, 2, 3], [t] * 4)[1]) for t in range(13)]
        assert per_step == expected_per_step, stagger


def test_a_staggered_env_drops_only_its_short_first_unroll():
    """Env 2 of 4 (unrolls of 4) starts at offset 2: its first unroll ([x x] 0 1 2) is dropped, and every unroll
    after it is whole, real and overlaps the one before by a step, as without staggering."""
    store = _staggered()
    got, masks = [], []
    for t in range(11):
        mask, ids, unrolls = _append(store, [2], [t])
        masks.extend(mask)
        got.extend(unrolls)
    assert got == [[2, 3, 4, 5, 6], [6, 7, 8, 9, 10]]
    assert masks[2] is False  # the step that filled the short unroll completed nothing


def test_a_staggered_env_with_overlap_keeps_real_burn_in_steps():
    store = _staggered(unroll_length=2, overlap=2, num_envs=2, stagger_envs=2)  # env 1's offset: 1
    got = []
    for t in range(10):
        got.extend(_append(store, [1], [t])[2])
    # the dropped unroll held positions 1..4 = steps 0..3; its last 3 steps start the next one
    assert got == [[1, 2, 3, 4, 5], [3, 4, 5, 6, 7], [5, 6, 7, 8, 9]]


def test_a_reset_staggers_again_and_env_zero_and_unstaggered_envs_start_at_zero():
    store = _staggered(unroll_length=4, num_envs=3, stagger_envs=2)  # offsets 0, 2; env 2 (evaluation) 0
    for t in range(3):
        _append(store, [0, 1, 2], [t] * 3)
    store.reset(tf.constant([0, 1, 2]))
    got = {0: [], 1: [], 2: []}
    for t in range(100, 109):
        _, ids, unrolls = _append(store, [0, 1, 2], [t] * 3)
        for i, u in zip(ids, unrolls):
            got[i].append(u)
    assert got[0] == [[100, 101, 102, 103, 104], [104, 105, 106, 107, 108]]
    assert got[1] == [[102, 103, 104, 105, 106]]  # the first, [x x 100 101 102], was dropped
    assert got[2] == got[0]
