"""Tests of the sum tree and the prioritized replay buffer (seed_rl/learner/replay.py).

The anchors are the original's ``PrioritizedReplayTest`` (google-research/seed_rl ``tests/utils_test.py``): insert
indices, sampled value = index + 1, priority-update dominance, sampling frequency ~ priority, and the importance
weights for (alpha=1, beta=1) and (alpha=0.7, beta=0.3) normalised by the batch maximum. Items are tiny integers so
that every sampled item can be checked against the slot it came from.
"""

import os
import threading
from typing import NamedTuple

import numpy as np
import pytest

from seed_rl.learner.replay import (
    MIN_PRIORITY,
    PrioritizedReplay,
    SumTree,
    bytes_per_item,
    check_memory,
    required_bytes,
)
from seed_rl.types import ArraySpec, EnvOutput, Unroll

INT = ArraySpec(shape=(), dtype="int32")


def _replay(capacity=4, alpha=1.0, beta=1.0, seed=0, specs=INT):
    return PrioritizedReplay(
        capacity, specs, priority_exponent=alpha, importance_sampling_exponent=beta, seed=seed, check=False
    )


# ------------------------------------------------------------------------------------------------ sum tree


@pytest.mark.parametrize(
    "capacity,updates,total,leaves",
    [
        (1, [([0], [2.5])], 2.5, [2.5]),
        (5, [([0, 1, 2, 3, 4], [1, 2, 3, 4, 5])], 1 + 2 + 3 + 4 + 5, [1, 2, 3, 4, 5]),
        (5, [([0, 1, 2, 3, 4], [1, 2, 3, 4, 5]), ([4, 1], [0, 10])], 1 + 10 + 3 + 4 + 0, [1, 10, 3, 4, 0]),
        # A repeated index: the last value wins.
        (4, [([2, 2, 2], [7, 8, 9])], 9, [0, 0, 9, 0]),
        (3, [([0, 1], [1, 1]), ([], [])], 2, [1, 1, 0]),
    ],
)
def test_sum_tree_updates_and_totals(capacity, updates, total, leaves):
    tree = SumTree(capacity)
    for indices, values in updates:
        tree.update(indices, values)
    assert tree.total() == total
    np.testing.assert_array_equal(tree.get(np.arange(capacity)), leaves)


@pytest.mark.parametrize(
    "leaves,values,expected",
    [
        # cumulative sums 1, 3, 6, 10, 15: leaf i covers [cumsum[i-1], cumsum[i]).
        ([1, 2, 3, 4, 5], [0, 0.999, 1, 2.999, 3, 9.999, 10, 14.999], [0, 0, 1, 1, 2, 3, 4, 4]),
        # At or beyond the total (rounding) lands on the last positive leaf, never on an empty one.
        ([1, 2, 3, 4, 5], [15, 100], [4, 4]),
        ([1, 2, 0, 0, 0], [3, 3.5], [1, 1]),
        # Zero leaves are skipped.
        ([1, 0, 2], [1, 2.5], [2, 2]),
        ([0, 0, 3], [0, 2.999], [2, 2]),
        ([4], [0, 3.9, 4], [0, 0, 0]),
    ],
)
def test_sum_tree_find_prefix_sum(leaves, values, expected):
    tree = SumTree(len(leaves))
    tree.update(np.arange(len(leaves)), leaves)
    np.testing.assert_array_equal(tree.find_prefix_sum(values), expected)


def test_sum_tree_matches_brute_force_search():
    rng = np.random.default_rng(1)
    tree = SumTree(1000)
    leaves = rng.integers(0, 5, size=1000).astype(np.float64)  # integers: the sums are exact
    tree.update(np.arange(1000), leaves)
    changed = rng.choice(1000, size=100, replace=False)
    leaves[changed] = rng.integers(0, 5, size=100)
    tree.update(changed, leaves[changed])
    assert tree.total() == leaves.sum()
    values = rng.random(10_000) * leaves.sum()
    expected = np.searchsorted(np.cumsum(leaves), values, side="right")
    np.testing.assert_array_equal(tree.find_prefix_sum(values), expected)


def test_sum_tree_rejects_bad_input():
    tree = SumTree(3)
    with pytest.raises(IndexError):
        tree.update([3], [1.0])
    with pytest.raises(ValueError, match=">= 0"):
        tree.update([0], [-1.0])
    with pytest.raises(ValueError, match="finite"):
        tree.update([0], [np.nan])


# ------------------------------------------------------------------------------------------------ insert / sample


def test_simple_insert_and_sample():
    # Original test_simple: sampled values are index + 1, weights 1 when priorities are equal.
    rb = _replay(capacity=2, alpha=0.5, beta=0.5)
    np.testing.assert_array_equal(rb.insert(np.array([1, 2], np.int32), [1.0, 1.0]), [0, 1])
    indices, weights, values = rb.sample(2)
    assert indices.dtype == np.int64 and weights.dtype == np.float32 and values.dtype == np.int32
    np.testing.assert_array_equal(values, indices + 1)
    np.testing.assert_array_equal(weights, [1.0, 1.0])


def test_insert_indices_wrap_around():
    rb = _replay(capacity=3)
    steps = [([10, 11], [0, 1]), ([12, 13], [2, 0]), ([14], [1]), ([15, 16, 17], [2, 0, 1])]
    for values, expected in steps:
        np.testing.assert_array_equal(rb.insert(np.array(values, np.int32), np.ones(len(values))), expected)
    assert rb.num_inserted == 8 and len(rb) == 3 and rb.capacity == 3
    indices, _, values = rb.sample(100)
    np.testing.assert_array_equal(values, 15 + (indices - 2) % 3)  # slot 2 holds 15, slot 0 16, slot 1 17
    with pytest.raises(ValueError, match="at once"):
        rb.insert(np.zeros(4, np.int32), np.ones(4))


def test_len_grows_until_capacity():
    rb = _replay(capacity=4)
    assert len(rb) == 0
    rb.insert(np.zeros(3, np.int32), np.ones(3))
    assert len(rb) == 3
    indices, _, _ = rb.sample(1000)
    assert set(indices.tolist()) == {0, 1, 2}  # never an empty slot


def test_sampling_frequencies_match_priorities():
    alpha, n = 0.7, 200_000
    priorities = np.array([0.5, 1.0, 2.0, 3.0, 0.1, 8.0, 0.0, 4.0])
    rb = _replay(capacity=8, alpha=alpha, beta=0.5, seed=3)
    rb.insert(np.arange(8, dtype=np.int32), priorities)
    indices, _, values = rb.sample(n)
    np.testing.assert_array_equal(values, indices)
    scaled = np.maximum(priorities, MIN_PRIORITY) ** alpha
    expected = n * scaled / scaled.sum()
    observed = np.bincount(indices, minlength=8)
    # Pearson chi-square over the 7 bins with a positive priority: 22.46 = chi2.ppf(0.999, df=7 - 1). The clamped
    # zero priority expects ~1e-5 draws and is checked on its own.
    nonzero = priorities > 0
    chi2 = np.sum((observed[nonzero] - expected[nonzero]) ** 2 / expected[nonzero])
    assert chi2 < 22.46, (observed, expected)
    assert observed[~nonzero].sum() <= 2


def test_initial_priorities_frequency():
    # Original test_initial_priorities: with priorities (0.1, 0.9) and alpha = 1, item 1 is drawn ~10% of the time
    # (here with a 5-sigma band derived from the sample count instead of +-30%).
    rb = _replay(capacity=2, alpha=1.0, beta=0.5, seed=5)
    rb.insert(np.array([1, 2], np.int32), [0.1, 0.9])
    n = 10_000
    _, _, values = rb.sample(n)
    count = np.sum(values == 1)
    assert abs(count - 0.1 * n) < 5 * np.sqrt(n * 0.1 * 0.9)


def _weights_by_value(weights, values):
    """Each value's weight, checking that a value always gets the same weight within the batch."""
    by_value = {}
    for w, v in zip(weights, values):
        by_value.setdefault(int(v), w)
        np.testing.assert_allclose(by_value[int(v)], w, rtol=1e-6)
    return np.array([by_value[v] for v in sorted(by_value)])


@pytest.mark.parametrize(
    "alpha,beta,expected",
    [
        # Original test_importance_sampling_weights1: w_i = (1 / (N P(i)))^1 with P(i) = p_i / sum.
        (1.0, 1.0, [(0.3 + 0.9) / 0.3, (0.3 + 0.9) / 0.9]),
        # Original test_importance_sampling_weights2.
        (0.7, 0.3, [((0.3**0.7 + 0.9**0.7) / 0.3**0.7) ** 0.3, ((0.3**0.7 + 0.9**0.7) / 0.9**0.7) ** 0.3]),
    ],
)
def test_importance_sampling_weights(alpha, beta, expected):
    rb = _replay(capacity=2, alpha=alpha, beta=beta, seed=5)
    rb.insert(np.array([0, 1], np.int32), [0.3, 0.9])
    _, weights, values = rb.sample(100)
    assert set(values.tolist()) == {0, 1}
    expected = np.array(expected) / np.max(expected)  # normalised by the batch maximum
    np.testing.assert_allclose(_weights_by_value(weights, values), expected, rtol=1e-6)


def test_importance_weights_formula_with_n_items():
    alpha, beta = 0.9, 0.6
    priorities = np.array([1.0, 2.0, 5.0, 0.5, 3.0])
    rb = _replay(capacity=8, alpha=alpha, beta=beta, seed=2)
    rb.insert(np.arange(5, dtype=np.int32), priorities)
    indices, weights, _ = rb.sample(64)
    p = priorities**alpha / np.sum(priorities**alpha)
    w = (5 * p[indices]) ** -beta
    np.testing.assert_allclose(weights, w / w.max(), rtol=1e-6)


def test_update_priorities_changes_dominance():
    # Original test_update_priorities, made decisive: (1e6 / 1)^1 leaves item 1 a 1e-6 chance per draw.
    rb = _replay(capacity=2, alpha=1.0, beta=0.5)
    rb.insert(np.array([1, 2], np.int32), [1.0, 1.0])
    _, _, before = rb.sample(1000)
    assert 400 < np.sum(before == 1) < 600
    rb.update_priorities([0], [1e6])
    indices, weights, values = rb.sample(64)
    np.testing.assert_array_equal(indices, np.zeros(64))
    np.testing.assert_array_equal(values, np.ones(64))
    np.testing.assert_array_equal(weights, np.ones(64))
    rb.update_priorities([0, 1, 1], [1.0, 5.0, 1e6])  # repeated index: the last priority wins
    np.testing.assert_array_equal(rb.get_priorities([0, 1]), [1.0, 1e6])
    assert np.all(rb.sample(64)[0] == 1)


def test_update_priorities_rejects_empty_slots_and_bad_values():
    rb = _replay(capacity=4)
    rb.insert(np.zeros(2, np.int32), np.ones(2))
    with pytest.raises(IndexError, match="filled slots"):
        rb.update_priorities([2], [1.0])  # never written: giving it a priority would make it sampleable
    with pytest.raises(ValueError, match=">= 0"):
        rb.update_priorities([0], [-1.0])
    with pytest.raises(ValueError, match="finite"):
        rb.insert(np.zeros(1, np.int32), [np.inf])


def test_zero_priority_items_remain_sampleable():
    rb = _replay(capacity=2, alpha=0.9)
    rb.insert(np.array([0, 1], np.int32), [0.0, 0.0])
    indices, weights, _ = rb.sample(1000)
    assert set(indices.tolist()) == {0, 1}
    np.testing.assert_array_equal(weights, np.ones(1000))


def test_uniform_when_priority_exponent_is_zero():
    n = 30_000
    rb = _replay(capacity=4, alpha=0.0, beta=0.6, seed=7)
    rb.insert(np.arange(3, dtype=np.int32), [0.1, 10.0, 1000.0])
    indices, weights, _ = rb.sample(n)
    np.testing.assert_array_equal(weights, np.ones(n))
    counts = np.bincount(indices, minlength=4)
    assert counts[3] == 0
    assert np.all(np.abs(counts[:3] - n / 3) < 5 * np.sqrt(n * (1 / 3) * (2 / 3)))


def test_sample_from_empty_buffer_raises():
    rb = _replay()
    with pytest.raises(RuntimeError, match="empty replay buffer"):
        rb.sample(1)
    rb.insert(np.zeros(1, np.int32), [1.0])
    with pytest.raises(ValueError, match="batch_size"):
        rb.sample(0)


def test_same_seed_same_samples():
    a, b = _replay(capacity=8, seed=11), _replay(capacity=8, seed=11)
    for rb in (a, b):
        rb.insert(np.arange(8, dtype=np.int32), np.arange(1, 9))
    np.testing.assert_array_equal(a.sample(32)[0], b.sample(32)[0])


# ------------------------------------------------------------------------------------------------ nests


class AgentOutput(NamedTuple):
    action: object
    q_values: object


def _unroll_specs(steps=3):
    return Unroll(
        agent_state=(ArraySpec((2,), "float32"), [ArraySpec((2,), "float32")]),
        prev_actions=ArraySpec((steps,), "int32"),
        env_outputs=EnvOutput(
            reward=ArraySpec((steps,), "float32"),
            done=ArraySpec((steps,), "bool"),
            observation={"frame": ArraySpec((steps, 2, 2), "uint8"), "goal": ArraySpec((steps, 1), "int64")},
            abandoned=ArraySpec((steps,), "bool"),
            episode_step=ArraySpec((steps,), "int32"),
        ),
        agent_outputs=AgentOutput(action=ArraySpec((steps,), "int32"), q_values=ArraySpec((steps, 4), "float32")),
        policy_version=None,
    )


def _unroll_items(k, steps=3, offset=0):
    """k items whose every leaf encodes the item number i = offset + row."""
    i = np.arange(offset, offset + k)

    def fill(shape, dtype, scale=1):
        return np.broadcast_to((i * scale).reshape((k,) + (1,) * len(shape)), (k, *shape)).astype(dtype)

    return Unroll(
        agent_state=(fill((2,), np.float32, 0.5), [fill((2,), np.float32, -1)]),
        prev_actions=fill((steps,), np.int32, 3),
        env_outputs=EnvOutput(
            reward=fill((steps,), np.float32, 0.25),
            done=fill((steps,), np.int64) % 2 == 1,
            observation={"frame": fill((steps, 2, 2), np.uint8, 7), "goal": fill((steps, 1), np.int64, 100)},
            abandoned=fill((steps,), np.int64) % 3 == 0,
            episode_step=fill((steps,), np.int32, 2),
        ),
        agent_outputs=AgentOutput(action=fill((steps,), np.int32), q_values=fill((steps, 4), np.float32, 1.5)),
        policy_version=None,
    )


def _assert_nests_equal(a, b):
    assert type(a) is type(b)
    if a is None:
        return
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _assert_nests_equal(a[key], b[key])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_nests_equal(x, y)
    else:
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _take(nest, rows):
    if nest is None:
        return None
    if isinstance(nest, dict):
        return {key: _take(value, rows) for key, value in nest.items()}
    if isinstance(nest, tuple) and hasattr(nest, "_fields"):
        return type(nest)(*[_take(x, rows) for x in nest])
    if isinstance(nest, (tuple, list)):
        return type(nest)(_take(x, rows) for x in nest)
    return nest[rows]


def test_nested_specs_round_trip():
    specs = _unroll_specs()
    rb = _replay(capacity=8, specs=specs)
    items = _unroll_items(5)
    rb.insert(items, np.arange(1, 6))
    indices, _, sampled = rb.sample(50)
    _assert_nests_equal(sampled, _take(items, indices))
    assert sampled.env_outputs.observation["frame"].shape == (50, 3, 2, 2)
    assert sampled.policy_version is None
    # agent_state 2 x 2 float32; per step: prev_action, reward, done, frame 2x2, goal int64, abandoned,
    # episode_step, action, 4 q-values.
    assert bytes_per_item(specs) == 2 * 2 * 4 + 3 * (4 + 4 + 1 + 2 * 2 + 8 + 1 + 4 + 4 + 4 * 4)


def test_nested_specs_reject_mismatched_items():
    rb = _replay(capacity=8, specs=_unroll_specs())
    items = _unroll_items(2)
    with pytest.raises(ValueError, match="keys"):
        rb.insert(items._replace(env_outputs=items.env_outputs._replace(observation={"frame": 0})), np.ones(2))
    with pytest.raises(ValueError, match=r"items\.prev_actions: shape"):
        rb.insert(items._replace(prev_actions=np.zeros((2, 4), np.int32)), np.ones(2))
    with pytest.raises(ValueError, match=r"items\.env_outputs\.reward: dtype"):
        rb.insert(items._replace(env_outputs=items.env_outputs._replace(reward=np.zeros((2, 3), complex))), [1, 1])
    with pytest.raises(ValueError, match="shape"):
        rb.insert(items, np.ones(3))  # priorities for 3 items, items hold 2
    assert rb.num_inserted == 0


def test_original_nests_spec_with_list():
    # Original test_nests: specs (scalar int32, [int64 [2]]), zeros in, zeros out.
    specs = (ArraySpec((), "int32"), [ArraySpec((2,), "int64")])
    rb = _replay(capacity=2, specs=specs, alpha=0.5, beta=0.5)
    zeros = (np.zeros(1, np.int32), [np.zeros((1, 2), np.int64)])
    rb.insert(zeros, [1.0])
    _, _, sampled = rb.sample(1)
    _assert_nests_equal(sampled, zeros)


# ------------------------------------------------------------------------------------------------ checkpoints


def test_save_load_round_trip(tmp_path):
    specs = _unroll_specs()
    a = PrioritizedReplay(6, specs, priority_exponent=0.9, importance_sampling_exponent=0.6, seed=1, check=False)
    for offset in range(0, 8, 2):  # 8 items into 6 slots: wrapped around
        a.insert(_unroll_items(2, offset=offset), np.arange(offset, offset + 2) + 0.5)
    indices, _, _ = a.sample(4)
    a.update_priorities(indices, np.arange(4) * 2.0)
    a.sample(3)  # advance the RNG past its initial state

    path = str(tmp_path / "replay.npz")
    assert abs(a.estimate_checkpoint_bytes() - 6 * (bytes_per_item(specs) + 8)) < 10_000
    size = a.save(path)
    assert size == os.path.getsize(path) > 6 * bytes_per_item(specs)
    assert os.listdir(tmp_path) == ["replay.npz"]  # the temporary file was renamed
    with np.load(path, allow_pickle=False) as data:
        assert int(data["num_inserted"]) == 8

    b = PrioritizedReplay(6, specs, priority_exponent=0.9, importance_sampling_exponent=0.6, seed=99, check=False)
    b.load(path)
    assert (len(b), b.num_inserted) == (len(a), a.num_inserted) == (6, 8)
    np.testing.assert_array_equal(b.get_priorities(np.arange(6)), a.get_priorities(np.arange(6)))
    for _ in range(3):
        ia, wa, sa = a.sample(16)
        ib, wb, sb = b.sample(16)
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(wa, wb)
        _assert_nests_equal(sa, sb)
    np.testing.assert_array_equal(a.insert(_unroll_items(1, offset=50), [1.0]), b.insert(_unroll_items(1), [1.0]))


def test_load_partially_filled_into_used_buffer(tmp_path):
    a = _replay(capacity=8, seed=4)
    a.insert(np.array([5, 6, 7], np.int32), [1.0, 2.0, 3.0])
    path = str(tmp_path / "small")  # no .npz suffix: the file keeps the given name
    a.save(path)
    b = _replay(capacity=8, seed=0)
    b.insert(np.arange(8, dtype=np.int32) + 100, np.ones(8))
    b.load(path)
    assert (len(b), b.num_inserted) == (3, 3)
    ia, _, va = a.sample(200)
    ib, _, vb = b.sample(200)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(vb, ia + 5)  # the restored items, never the old ones past slot 2
    np.testing.assert_array_equal(b.insert(np.array([8], np.int32), [1.0]), [3])


def test_load_rejects_other_capacity_or_specs(tmp_path):
    path = str(tmp_path / "replay.npz")
    a = _replay(capacity=4)
    a.insert(np.zeros(2, np.int32), np.ones(2))
    a.save(path)
    with pytest.raises(ValueError, match="capacity"):
        _replay(capacity=5).load(path)
    with pytest.raises(ValueError, match="specs"):
        _replay(capacity=4, specs=ArraySpec((), "int64")).load(path)


# ------------------------------------------------------------------------------------------------ memory


def test_required_bytes_counts_arrays_priorities_and_tree():
    specs = (ArraySpec((84, 84, 1), "uint8"), ArraySpec((), "float32"))
    assert bytes_per_item(specs) == 84 * 84 + 4
    assert required_bytes(5, specs) == 5 * (84 * 84 + 4 + 8) + 2 * 8 * 8  # 5 -> 8 leaves, 16 nodes of 8 bytes


def test_check_memory_raises_with_a_clear_message():
    with pytest.raises(MemoryError) as error:
        check_memory(10**18, "The replay buffer (test)")
    message = str(error.value)
    for words in ("The replay buffer (test) needs", "available", "--replay_buffer_size", "--unroll_length"):
        assert words in message
    assert check_memory(1, "one byte") is None or check_memory(1, "one byte") > 0


def test_constructor_checks_memory_before_allocating():
    frame = ArraySpec((121, 84, 84, 1), "uint8")
    with pytest.raises(MemoryError, match=r"1,000,000,000 sequences"):
        PrioritizedReplay(10**9, frame)  # 850 TB: fails the check, allocates nothing


# ------------------------------------------------------------------------------------------------ threads


def test_concurrent_insert_sample_update():
    """An inserting thread, a sampling-and-updating thread: every sampled item is consistent with its slot."""
    capacity, rounds = 64, 300
    specs = (ArraySpec((), "int64"), ArraySpec((16,), "int64"))
    rb = _replay(capacity=capacity, alpha=0.9, beta=0.6, specs=specs)
    rb.insert((np.arange(8), np.repeat(np.arange(8)[:, None], 16, axis=1)), np.ones(8))
    errors = []

    def inserter():
        try:
            for r in range(rounds):
                ids = np.arange(8 + 8 * r, 16 + 8 * r)
                rb.insert((ids, np.repeat(ids[:, None], 16, axis=1)), np.random.default_rng(r).random(8) + 0.1)
        except Exception as e:  # surfaced in the main thread
            errors.append(e)

    def sampler():
        try:
            for _ in range(rounds):
                indices, weights, (ids, rows) = rb.sample(16)
                assert np.all(ids % capacity == indices), "item not from its slot"
                assert np.all(rows == ids[:, None]), "torn item"
                assert np.all((weights > 0) & (weights <= 1))
                rb.update_priorities(indices, np.full(16, 2.0))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=inserter), threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert rb.num_inserted == 8 + 8 * rounds
