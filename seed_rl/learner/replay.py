"""Prioritized sequence replay for the R2D2 and SAC learners: a sum tree, the ring buffer, memory accounting and
checkpoints of the buffer.

Imports numpy only (no TensorFlow): the buffer lives in host RAM as preallocated numpy arrays, one per leaf of the
item specs, with a leading ``[capacity]`` dimension.

Semantics kept from the original (``PrioritizedReplay`` in google-research/seed_rl ``common/utils.py``):

* FIFO ring: a batch of ``k`` items goes to slots ``(num_inserted + i) % capacity``, overwriting the oldest.
* Proportional prioritisation (Schaul et al. 2016, arXiv 1511.05952, eq. 1): item ``i`` is drawn with probability
  ``P(i) = p_i^alpha / sum_j p_j^alpha`` over the ``N = min(num_inserted, capacity)`` filled slots; draws are
  independent (plain categorical with replacement, as ``tf.random.categorical`` in the original, not stratified).
* Importance weights (eq. 2): ``w_i = (N * P(i))^-beta``, normalised by the maximum over the *sampled batch* (the
  original's choice; Schaul et al. normalise by the maximum over the whole buffer).
* ``priority_exponent == 0`` gives uniform sampling with weights exactly 1.

Deliberate differences (each one is a fix or an extension; none changes what is sampled):

* A sum tree makes sampling and updates O(B log N) instead of the original's O(N) normalisation per call.
* ``priority_exponent`` is fixed at construction (the original passes it to every ``sample`` call; its learners
  always pass the same flag), so the tree can hold ``p^alpha`` directly. Raw priorities are kept as well, so a
  checkpoint may be restored under another exponent.
* Priorities are clamped to ``MIN_PRIORITY`` so that an item inserted with priority 0 can still be drawn (in the
  original ``log(0) = -inf`` excluded it for good, and an all-zero buffer produced NaNs).
* Sampling from an empty buffer raises (the original's assertion ``num_inserted >= 0`` never fired).
* One lock makes ``insert``, ``sample``, ``update_priorities``, ``save`` and ``load`` safe to call from different
  threads (the original had to be used from a single thread).
* The memory the buffer will need is checked against the machine before allocating (``check_memory``), and the
  buffer can be checkpointed (``save``/``load``); the original did neither.

Kept limitation: ``update_priorities`` does not know whether a slot was overwritten between ``sample`` and the update
(neither did the original); the new item then gets the priority computed for the old one. With the R2D2 defaults a
training step inserts ``batch_size / replay_ratio`` items into a buffer of thousands, so this touches a tiny fraction
of the updates, and the next update of that slot corrects it.
"""

from __future__ import annotations

import json
import os
import threading
import zipfile
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

__all__ = [
    "MIN_PRIORITY",
    "PrioritizedReplay",
    "SumTree",
    "available_memory_bytes",
    "bytes_per_item",
    "check_memory",
    "required_bytes",
]

MIN_PRIORITY = 1e-8
"""Priorities are clamped to at least this value before the exponent, so every stored item stays sampleable."""

MEMORY_FRACTION = 0.9
"""``check_memory`` requires the buffer to fit in this fraction of the available memory (the rest is headroom for
the model, TensorFlow and the batches in flight)."""

_FORMAT_VERSION = 1


# ------------------------------------------------------------------------------------------------ nests


def _is_leaf(x: Any) -> bool:
    # ArraySpec is a NamedTuple: it must count as a leaf, so test for shape/dtype before tuple-ness.
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _flatten(nest: Any) -> list:
    """Leaves of a nest of tuples/NamedTuples/lists/dicts (dict keys in sorted order); None holds no leaves."""
    if nest is None:
        return []
    if _is_leaf(nest):
        return [nest]
    if isinstance(nest, Mapping):
        return [leaf for key in sorted(nest) for leaf in _flatten(nest[key])]
    if isinstance(nest, (tuple, list)):
        return [leaf for child in nest for leaf in _flatten(child)]
    raise TypeError(
        f"{type(nest).__name__} is neither an array spec (with .shape and .dtype) nor a tuple, NamedTuple, list or dict"
    )


def _flatten_like(specs: Any, items: Any, path: str = "items") -> list:
    """The leaves of ``items``, which must have the structure of ``specs``; a leaf may be anything array-like."""
    if specs is None:
        if items is not None:
            raise ValueError(f"{path}: expected None (the spec holds no arrays), got {type(items).__name__}")
        return []
    if _is_leaf(specs):
        return [np.asarray(items)]
    if isinstance(specs, Mapping):
        if not isinstance(items, Mapping) or sorted(items) != sorted(specs):
            got = sorted(items) if isinstance(items, Mapping) else type(items).__name__
            raise ValueError(f"{path}: expected a dict with keys {sorted(specs)}, got {got}")
        return [leaf for key in sorted(specs) for leaf in _flatten_like(specs[key], items[key], f"{path}[{key!r}]")]
    if not isinstance(items, (tuple, list)) or len(items) != len(specs):
        got = f"length {len(items)}" if isinstance(items, (tuple, list)) else type(items).__name__
        raise ValueError(f"{path}: expected a sequence of length {len(specs)} like the specs, got {got}")
    names = getattr(specs, "_fields", None)
    return [
        leaf
        for i, (s, x) in enumerate(zip(specs, items))
        for leaf in _flatten_like(s, x, f"{path}.{names[i]}" if names else f"{path}[{i}]")
    ]


def _leaf_paths(specs: Any, prefix: str = "items") -> list[str]:
    """Readable names of the leaves of ``specs``, in ``_flatten`` order, for error messages."""
    if specs is None:
        return []
    if _is_leaf(specs):
        return [prefix]
    if isinstance(specs, Mapping):
        return [p for key in sorted(specs) for p in _leaf_paths(specs[key], f"{prefix}[{key!r}]")]
    names = getattr(specs, "_fields", None)
    return [
        p
        for i, child in enumerate(specs)
        for p in _leaf_paths(child, f"{prefix}.{names[i]}" if names else f"{prefix}[{i}]")
    ]


def _pack_like(specs: Any, leaves: list) -> Any:
    """Inverse of ``_flatten``: a nest with the structure of ``specs`` holding ``leaves`` in order."""
    it = iter(leaves)

    def pack(s: Any) -> Any:
        if s is None:
            return None
        if _is_leaf(s):
            return next(it)
        if isinstance(s, Mapping):
            packed = {key: pack(s[key]) for key in sorted(s)}
            return {key: packed[key] for key in s}
        children = [pack(child) for child in s]
        if hasattr(s, "_fields"):  # NamedTuple
            return type(s)(*children)
        return type(s)(children)

    return pack(specs)


def _leaf_shape_dtype(spec: Any) -> tuple[tuple[int, ...], np.dtype]:
    dtype = np.dtype(getattr(spec.dtype, "as_numpy_dtype", spec.dtype))  # a tf.DType converts through numpy
    try:
        shape = tuple(int(d) for d in spec.shape)
    except TypeError:
        raise ValueError(f"replay item specs need fully defined shapes, got {spec.shape}") from None
    return shape, dtype


# ------------------------------------------------------------------------------------------------ memory


def bytes_per_item(specs: Any) -> int:
    """Bytes one stored item (one sequence) takes in the buffer's arrays."""
    total = 0
    for spec in _flatten(specs):
        shape, dtype = _leaf_shape_dtype(spec)
        total += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return total


def required_bytes(capacity: int, specs: Any) -> int:
    """Bytes a ``PrioritizedReplay(capacity, specs)`` holds once full: item arrays, raw priorities and sum tree."""
    return int(capacity) * (bytes_per_item(specs) + 8) + SumTree.nbytes_for(capacity)


def _format_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


def available_memory_bytes() -> Optional[int]:
    """Memory the process can still allocate: MemAvailable from /proc/meminfo, capped by a cgroup memory limit.

    Falls back to free physical pages (``os.sysconf``) where /proc/meminfo is missing; None when neither is known.
    """
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024  # reported in kB
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    # A container's limit is invisible in /proc/meminfo. Only the limit is used, not limit - usage: the usage
    # includes page cache that the kernel reclaims before it kills anything.
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            available = min(available, int(text))
        break
    return available


def check_memory(required_bytes: int, what: str, fraction: float = MEMORY_FRACTION) -> Optional[int]:
    """Raises MemoryError when ``required_bytes`` does not fit in ``fraction`` of the available memory.

    ``what`` names the allocation in the message (e.g. "The replay buffer (100,000 sequences x 3.3 MiB)").
    Returns the available bytes (None when they cannot be read, in which case nothing is checked).
    """
    available = available_memory_bytes()
    if available is not None and required_bytes > fraction * available:
        raise MemoryError(
            f"{what} needs {_format_bytes(required_bytes)}, but only {_format_bytes(available)} of memory is "
            f"available (MemAvailable) and it must fit in {fraction:.0%} of that. Reduce --replay_buffer_size "
            f"(sequences kept) or --unroll_length (steps per sequence; a sequence holds burn_in + unroll_length + 1 "
            f"steps), or run the learner on a machine with more memory."
        )
    return available


# ------------------------------------------------------------------------------------------------ sum tree


def _keep_last(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique ``indices`` (sorted) with, for duplicates, the value given last."""
    unique, first_in_reversed = np.unique(indices[::-1], return_index=True)
    return unique, values[len(indices) - 1 - first_in_reversed]


class SumTree:
    """A binary tree over ``capacity`` non-negative float64 leaves in which every node holds the sum of its leaves.

    Stored as one array: node 1 is the root, node ``n`` has children ``2n`` and ``2n + 1``, and leaf ``i`` is node
    ``num_leaves + i`` (``num_leaves`` = capacity rounded up to a power of two; the extra leaves stay 0).
    Every operation is vectorised over its ``k`` arguments and loops over the ``log2(num_leaves)`` levels only.
    A parent is recomputed as the sum of its two children (never incremented by a delta), so rounding errors do
    not accumulate, and two trees with the same leaves are bitwise equal whatever their history.
    """

    def __init__(self, capacity: int) -> None:
        if int(capacity) < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity}")
        self._capacity = int(capacity)
        self._num_leaves = self.num_leaves_for(self._capacity)
        self._depth = self._num_leaves.bit_length() - 1
        self._nodes = np.zeros(2 * self._num_leaves, np.float64)  # index 0 unused

    @staticmethod
    def num_leaves_for(capacity: int) -> int:
        return 1 << (int(capacity) - 1).bit_length()

    @classmethod
    def nbytes_for(cls, capacity: int) -> int:
        return 2 * cls.num_leaves_for(capacity) * 8

    @property
    def capacity(self) -> int:
        return self._capacity

    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._nodes[1])

    def get(self, indices: Any) -> np.ndarray:
        """float64 [k]: the leaf values at ``indices`` [k]."""
        return self._nodes[self._num_leaves + self._check_indices(indices)]

    def update(self, indices: Any, values: Any) -> None:
        """Sets leaves ``indices`` [k] to ``values`` [k] (finite, >= 0); for a repeated index the last value wins."""
        indices = self._check_indices(indices)
        values = np.asarray(values, np.float64).reshape(-1)
        if values.shape != indices.shape:
            raise ValueError(f"SumTree.update: {indices.size} indices but {values.size} values")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("SumTree.update: values must be finite and >= 0")
        if indices.size == 0:
            return
        indices, values = _keep_last(indices, values)
        nodes = indices + self._num_leaves
        self._nodes[nodes] = values
        for _ in range(self._depth):
            nodes >>= 1
            # `nodes` stays sorted, so dropping consecutive repeats makes it unique.
            nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]
            self._nodes[nodes] = self._nodes[2 * nodes] + self._nodes[2 * nodes + 1]

    def find_prefix_sum(self, values: Any) -> np.ndarray:
        """int64 [k]: for each ``v`` in ``values`` [k], the smallest leaf ``i`` with ``v < leaves[0] + ... + leaves[i]``.

        With ``v`` uniform in ``[0, total())`` this draws leaf ``i`` with probability ``leaves[i] / total()``.
        Leaves equal to 0 are never returned while ``total() > 0``: a value at or beyond the total (rounding)
        lands on the last positive leaf instead of an empty one.
        """
        remaining = np.asarray(values, np.float64).reshape(-1).copy()
        nodes = np.ones(remaining.shape, np.int64)
        for _ in range(self._depth):
            left = 2 * nodes
            left_sum = self._nodes[left]
            go_right = (remaining >= left_sum) & (self._nodes[left + 1] > 0)
            remaining -= np.where(go_right, left_sum, 0.0)
            nodes = left + go_right
        return nodes - self._num_leaves

    def _check_indices(self, indices: Any) -> np.ndarray:
        indices = np.asarray(indices, np.int64).reshape(-1)
        if indices.size and (indices.min() < 0 or indices.max() >= self._capacity):
            raise IndexError(f"SumTree indices must be in [0, {self._capacity}), got {indices.min()}..{indices.max()}")
        return indices


# ------------------------------------------------------------------------------------------------ replay


class PrioritizedReplay:
    """A FIFO ring buffer of items (sequences) sampled in proportion to ``priority ** priority_exponent``.

    ``specs`` is a nest (tuples, NamedTuples, lists, dicts; None for an empty field) of per-item array specs:
    anything with ``.shape`` and ``.dtype`` without the batch dimension (``seed_rl.types.ArraySpec``,
    ``tf.TensorSpec``, a numpy array). Items passed to ``insert`` have the same structure with a leading
    ``[k]`` dimension. Thread-safe: every public method takes the one lock of the buffer.

    The arrays are allocated with ``np.zeros`` (pages are only committed when written) after ``check_memory`` has
    verified that the full buffer will fit (skip with ``check=False``, for tests and benchmarks).
    """

    def __init__(
        self,
        capacity: int,
        specs: Any,
        priority_exponent: float = 0.9,
        importance_sampling_exponent: float = 0.6,
        seed: Optional[int] = 0,
        check: bool = True,
    ) -> None:
        capacity = int(capacity)
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        if not (np.isfinite(priority_exponent) and priority_exponent >= 0):
            raise ValueError(f"priority_exponent must be finite and >= 0, got {priority_exponent}")
        if not (np.isfinite(importance_sampling_exponent) and importance_sampling_exponent >= 0):
            raise ValueError(
                f"importance_sampling_exponent must be finite and >= 0, got {importance_sampling_exponent}"
            )
        self._specs = specs
        self._leaf_specs = [_leaf_shape_dtype(s) for s in _flatten(specs)]
        if not self._leaf_specs:
            raise ValueError("replay specs hold no arrays")
        self._leaf_paths = _leaf_paths(specs)
        self._capacity = capacity
        self._alpha = float(priority_exponent)
        self._beta = float(importance_sampling_exponent)
        if check:
            check_memory(
                required_bytes(capacity, specs),
                f"The replay buffer ({capacity:,} sequences x {_format_bytes(bytes_per_item(specs))})",
            )
        self._buffers = [np.zeros((capacity, *shape), dtype) for shape, dtype in self._leaf_specs]
        self._priorities = np.zeros(capacity, np.float64)  # raw, before the exponent
        self._tree = SumTree(capacity)
        self._num_inserted = 0
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()

    # -------------------------------------------------------------------------------- properties

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def num_inserted(self) -> int:
        """Items inserted since construction (or restored by ``load``), overwritten ones included."""
        return self._num_inserted

    @property
    def specs(self) -> Any:
        return self._specs

    @property
    def priority_exponent(self) -> float:
        return self._alpha

    @property
    def importance_sampling_exponent(self) -> float:
        return self._beta

    def __len__(self) -> int:
        return min(self._num_inserted, self._capacity)

    # -------------------------------------------------------------------------------- core

    def insert(self, items: Any, priorities: Any) -> np.ndarray:
        """Inserts ``k`` items (a nest like the specs, each leaf ``[k, ...]``) with ``priorities`` [k] (>= 0).

        Returns the int64 [k] slots written, ``(num_inserted + i) % capacity``; the oldest items are overwritten.
        """
        leaves = _flatten_like(self._specs, items)
        priorities = np.asarray(priorities, np.float64)
        k = priorities.shape[0] if priorities.ndim == 1 else -1
        if k < 0:
            raise ValueError(f"priorities must have shape [k], got {priorities.shape}")
        for leaf, (shape, dtype), path in zip(leaves, self._leaf_specs, self._leaf_paths):
            if leaf.shape != (k, *shape):
                raise ValueError(f"{path}: shape {leaf.shape} does not match [k={k}] + spec shape {list(shape)}")
            if not np.can_cast(leaf.dtype, dtype, casting="same_kind"):
                raise ValueError(f"{path}: dtype {leaf.dtype} cannot be stored as the spec's {dtype}")
        _check_priorities(priorities)
        if k > self._capacity:
            raise ValueError(f"cannot insert {k} items at once into a replay buffer of capacity {self._capacity}")
        with self._lock:
            indices = (self._num_inserted + np.arange(k, dtype=np.int64)) % self._capacity
            for buffer, leaf in zip(self._buffers, leaves):
                buffer[indices] = leaf
            self._set_priorities(indices, priorities)
            self._num_inserted += k
        return indices

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray, Any]:
        """Draws ``batch_size`` items independently, with replacement, with ``P(i) = p_i^alpha / sum_j p_j^alpha``.

        Returns ``(indices int64 [B], weights float32 [B], items)`` where ``items`` follows the specs with a leading
        ``[B]`` dimension (copies, safe to keep) and ``weights = (N * P(i))^-beta / max over the batch``.
        """
        batch_size = int(batch_size)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        with self._lock:
            size = len(self)
            if size == 0:
                raise RuntimeError("cannot sample from an empty replay buffer: insert items first")
            total = self._tree.total()
            indices = self._tree.find_prefix_sum(self._rng.random(batch_size) * total)
            probabilities = self._tree.get(indices) / total
            items = [buffer[indices] for buffer in self._buffers]
        weights = (size * probabilities) ** -self._beta
        weights /= weights.max()
        return indices, weights.astype(np.float32), _pack_like(self._specs, items)

    def update_priorities(self, indices: Any, priorities: Any) -> None:
        """Sets the priorities of filled slots ``indices`` [k]; for a repeated index the last priority wins."""
        indices = np.asarray(indices, np.int64).reshape(-1)
        priorities = np.asarray(priorities, np.float64).reshape(-1)
        if indices.shape != priorities.shape:
            raise ValueError(f"update_priorities: {indices.size} indices but {priorities.size} priorities")
        _check_priorities(priorities)
        with self._lock:
            if indices.size and (indices.min() < 0 or indices.max() >= len(self)):
                raise IndexError(
                    f"update_priorities: indices must be filled slots in [0, {len(self)}), "
                    f"got {indices.min()}..{indices.max()}"
                )
            self._set_priorities(indices, priorities)

    def get_priorities(self, indices: Any) -> np.ndarray:
        """float64 [k]: the raw priorities (before the exponent, before clamping) of slots ``indices``."""
        with self._lock:
            return self._priorities[np.asarray(indices, np.int64)].copy()

    def _set_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        indices, priorities = _keep_last(indices, priorities)
        self._priorities[indices] = priorities
        self._tree.update(indices, np.maximum(priorities, MIN_PRIORITY) ** self._alpha)

    # -------------------------------------------------------------------------------- checkpoints

    def estimate_checkpoint_bytes(self) -> int:
        """Approximate size of the file ``save`` writes now (uncompressed: filled slots, priorities, metadata)."""
        size = len(self)
        per_array_overhead = 256  # .npy header and zip entry
        return size * (bytes_per_item(self._specs) + 8) + (len(self._buffers) + 8) * per_array_overhead

    def save(self, path: str) -> int:
        """Writes the filled slots, raw priorities, ``num_inserted`` and the RNG state to ``path`` (npz, no pickles).

        The file appears atomically (written next to ``path`` and renamed). Inserts and samples wait while it is
        written. Returns the file size in bytes.
        """
        path = os.fspath(path)
        tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
        with self._lock:
            size = len(self)
            arrays: dict[str, Any] = {f"leaf_{i:04d}": buffer[:size] for i, buffer in enumerate(self._buffers)}
            arrays.update(
                format_version=np.int64(_FORMAT_VERSION),
                capacity=np.int64(self._capacity),
                num_inserted=np.int64(self._num_inserted),
                priorities=self._priorities[:size],
                priority_exponent=np.float64(self._alpha),
                leaf_specs=np.str_(self._leaf_specs_json()),
                rng_state=np.str_(json.dumps(self._rng.bit_generator.state)),
            )
            try:
                with open(tmp, "wb") as f:  # a file object, so that numpy does not append ".npz" to the name
                    np.savez(f, **arrays)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.remove(tmp)
                raise
        return os.path.getsize(path)

    def load(self, path: str) -> None:
        """Restores a buffer written by ``save``; capacity and item specs must match this buffer's.

        After loading, this buffer samples exactly what the saved one would have sampled (same items, priorities
        and RNG state), provided both use the same ``priority_exponent``; under another exponent the raw priorities
        are re-exponentiated. The item arrays are streamed into the preallocated buffer (no second copy in RAM).
        """
        path = os.fspath(path)
        with np.load(path, allow_pickle=False) as data:
            version = int(data["format_version"])
            if version != _FORMAT_VERSION:
                raise ValueError(f"{path}: replay checkpoint format {version}, expected {_FORMAT_VERSION}")
            capacity = int(data["capacity"])
            if capacity != self._capacity:
                raise ValueError(f"{path}: saved with capacity {capacity}, this buffer has {self._capacity}")
            saved_specs = str(data["leaf_specs"])
            if saved_specs != self._leaf_specs_json():
                raise ValueError(f"{path}: saved item specs {saved_specs} differ from {self._leaf_specs_json()}")
            num_inserted = int(data["num_inserted"])
            priorities = np.asarray(data["priorities"], np.float64)
            rng_state = json.loads(str(data["rng_state"]))
        size = min(num_inserted, capacity)
        if priorities.shape != (size,):
            raise ValueError(f"{path}: {priorities.shape[0]} priorities for {size} filled slots")
        _check_priorities(priorities)
        with self._lock, zipfile.ZipFile(path) as archive:
            for i, buffer in enumerate(self._buffers):
                _read_npy_into(archive, f"leaf_{i:04d}.npy", buffer[:size], path)
            self._priorities[:] = 0.0
            self._tree = SumTree(capacity)
            self._set_priorities(np.arange(size, dtype=np.int64), priorities)
            self._num_inserted = num_inserted
            self._rng.bit_generator.state = rng_state

    def _leaf_specs_json(self) -> str:
        return json.dumps([[list(shape), dtype.str] for shape, dtype in self._leaf_specs])


def _check_priorities(priorities: np.ndarray) -> None:
    if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
        raise ValueError("priorities must be finite and >= 0")


def _read_npy_into(archive: zipfile.ZipFile, name: str, out: np.ndarray, path: str) -> None:
    """Reads the .npy member ``name`` of ``archive`` straight into the C-contiguous array ``out``."""
    with archive.open(name) as f:  # a ZipExtFile: a buffered reader, with readinto
        major, minor = np.lib.format.read_magic(f)
        if (major, minor) == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(f)
        elif (major, minor) == (2, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"{path}: {name} has unsupported .npy format {major}.{minor}")
        if shape != out.shape or dtype != out.dtype or (fortran_order and out.ndim > 1):
            raise ValueError(f"{path}: {name} holds {dtype} {shape}, expected {out.dtype} {out.shape}")
        view = out.reshape(-1).view(np.uint8).data
        filled = 0
        while filled < len(view):
            n = f.readinto(view[filled:])  # type: ignore[attr-defined]
            if not n:
                raise ValueError(f"{path}: {name} is truncated")
            filled += n
