"""numpy <-> protobuf conversion for the learner/actor wire format.

Arrays travel as dtype name + shape + raw little-endian bytes: encoding is one ``tobytes`` copy, decoding is a
zero-copy ``np.frombuffer`` view of the message's bytes (so decoded arrays are read-only). Only the numeric and bool
dtypes in :data:`ALLOWED_DTYPES` cross the wire; anything else (object, string, structured) is refused, so a message
can never make the receiver run code or allocate more than its own size.

Observations are an array or a flat ``dict`` of arrays; on the wire they are a list of ``NamedArray`` where a plain
array is the single entry named ``""``. Specs (:class:`seed_rl.types.ArraySpec`) follow the same convention.

Every decoding error is a ``ValueError`` whose message names the field and says what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.types import ArraySpec, EnvOutput, ObservationSpec, StepBatch

__all__ = [
    "ALLOWED_DTYPES",
    "MAX_ARRAY_DIMS",
    "decode_array",
    "decode_array_spec",
    "decode_observation",
    "decode_observation_spec",
    "decode_step_batch",
    "encode_array",
    "encode_array_spec",
    "encode_observation",
    "encode_observation_spec",
    "encode_step_batch",
    "step_batch_bytes",
]

ALLOWED_DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
"""dtype names that may cross the wire."""

MAX_ARRAY_DIMS = 32
"""The most dimensions an array may have on the wire (numpy 1's limit; numpy 2 allows 64)."""

# numpy's limit on an array's byte size (also on the product of the non-zero dimensions of an empty array).
_MAX_ARRAY_BYTES = int(np.iinfo(np.intp).max)

# dtype name -> the little-endian numpy dtype the bytes are read with.
_WIRE_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name).newbyteorder("<") for name in ALLOWED_DTYPES
}
# Little-endian dtype -> its name; a dict lookup, because ``dtype.name`` costs microseconds on the hot path.
_WIRE_NAMES: dict[np.dtype, str] = {dtype: name for name, dtype in _WIRE_DTYPES.items()}

# The canonical dtypes of the per-env scalar fields of a StepBatch.
_FIELD_DTYPES: dict[str, np.dtype] = {
    "env_ids": np.dtype(np.int32),
    "run_ids": np.dtype(np.int64),
    "reward": np.dtype(np.float32),
    "done": np.dtype(np.bool_),
    "abandoned": np.dtype(np.bool_),
    "episode_step": np.dtype(np.int32),
    "raw_reward": np.dtype(np.float32),
    "life_lost": np.dtype(np.bool_),
}


# ----------------------------------------------------------------------------------------------------- arrays


def encode_array(array: Any) -> pb.Array:
    """Encodes a numpy array (or anything ``np.asarray`` accepts) as an ``Array`` message.

    Raises:
      ValueError: the dtype is not one of :data:`ALLOWED_DTYPES`.
    """
    message = pb.Array()
    _fill_array(message, array)
    return message


def _fill_array(message: pb.Array, array: Any) -> None:
    """Writes ``array`` into an (empty) ``Array`` message in place: cheaper than building and copying one."""
    a = np.asarray(array)
    name = _WIRE_NAMES.get(a.dtype)  # matches native dtypes on little-endian hosts
    if name is None:
        name = a.dtype.name
        if name not in _WIRE_DTYPES:
            raise ValueError(
                f"cannot send an array of dtype {a.dtype}: only {', '.join(ALLOWED_DTYPES)} cross the wire"
            )
        # Big-endian data (or a big-endian host): swap to little-endian.
        a = a.astype(_WIRE_DTYPES[name])
    message.dtype = name
    message.shape.extend(a.shape)
    message.data = a.tobytes()


def decode_array(message: pb.Array, what: str = "array") -> np.ndarray:
    """Decodes an ``Array`` message into a read-only numpy view of its bytes (no copy).

    Args:
      message: the message.
      what: how to name the field in error messages, e.g. ``"StepBatch.reward"``.

    Raises:
      ValueError: the dtype is missing or not allowed, the shape has more than :data:`MAX_ARRAY_DIMS`
        dimensions, a dimension is negative, the shape's size overflows (its non-zero dimensions times the item
        size exceed what an array can address), the byte count does not equal ``prod(shape) * itemsize``, or a
        bool array holds bytes other than 0 and 1.
    """
    name = message.dtype
    dtype = _WIRE_DTYPES.get(name)
    if dtype is None:
        if not name:
            raise ValueError(f"{what}: missing (the Array has no dtype)")
        raise ValueError(
            f"{what}: dtype {name!r} is not allowed; expected one of {', '.join(ALLOWED_DTYPES)}"
        )
    shape = tuple(message.shape)
    if len(shape) > MAX_ARRAY_DIMS:
        raise ValueError(
            f"{what}: shape has {len(shape)} dimensions, more than the limit of {MAX_ARRAY_DIMS} "
            f"(it starts {shape[:4]})"
        )
    if shape and min(shape) < 0:
        raise ValueError(f"{what}: negative dimension in shape {shape}")
    data = message.data
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected or not expected:
        _check_size(what, shape, name, len(data), expected)  # rare: empty, overflowing or mismatched
    if name == "bool" and data.translate(None, b"\x00\x01"):
        raise ValueError(f"{what}: bool array holds bytes other than 0 and 1")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _check_size(what: str, shape: tuple[int, ...], name: str, size: int, expected: int) -> None:
    """Raises ValueError unless ``size`` bytes fit ``shape`` (an empty array passes when numpy can shape it).

    numpy refuses a shape whose non-zero dimensions, times the item size, exceed what an index can address, even
    when another dimension is 0 (the array is empty); that is reported here, naming the field, rather than by
    numpy's bare text at the reshape.
    """
    addressed = math.prod(d for d in shape if d) * _WIRE_DTYPES[name].itemsize
    if addressed > _MAX_ARRAY_BYTES:
        raise ValueError(
            f"{what}: shape {shape} of dtype {name} overflows: its non-zero dimensions make {addressed} bytes, "
            f"more than the {_MAX_ARRAY_BYTES} bytes an array can address"
        )
    if size != expected:
        raise ValueError(
            f"{what}: {size} bytes of data do not match shape {shape} and dtype {name} "
            f"({expected} bytes expected)"
        )


# ------------------------------------------------------------------------------------------------ observations


def encode_observation(observation: Any) -> list[pb.NamedArray]:
    """Encodes an observation (an array, or a flat dict of arrays) as a list of ``NamedArray``."""
    if isinstance(observation, Mapping):
        if not observation:
            raise ValueError("cannot send an empty dict observation")
        out = []
        for name, value in observation.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"dict observation keys must be non-empty strings, got {name!r}")
            if isinstance(value, Mapping):
                raise TypeError(
                    f"observation[{name!r}]: nested dicts are not supported; flatten them"
                )
            out.append(pb.NamedArray(name=name, array=encode_array(value)))
        return out
    return [pb.NamedArray(name="", array=encode_array(observation))]


def decode_observation(entries: Iterable[pb.NamedArray], what: str = "observation") -> Any:
    """Decodes a list of ``NamedArray``: one entry named ``""`` is a plain array, else a dict name -> array."""
    entries = list(entries)
    if not entries:
        raise ValueError(f"{what}: missing (no NamedArray)")
    if len(entries) == 1 and not entries[0].name:
        return decode_array(entries[0].array, what)
    out: dict[str, np.ndarray] = {}
    for entry in entries:
        if not entry.name:
            raise ValueError(
                f"{what}: an entry named '' (plain array) must be the only entry; got {len(entries)} entries"
            )
        if entry.name in out:
            raise ValueError(f"{what}: key {entry.name!r} appears twice")
        out[entry.name] = decode_array(entry.array, f"{what}[{entry.name!r}]")
    return out


# ------------------------------------------------------------------------------------------------- step batches


def _as_field(value: Any, name: str) -> np.ndarray:
    """Converts a per-env scalar field to its canonical dtype when that loses no kind (e.g. float64 -> float32)."""
    a = np.asarray(value)
    dtype = _FIELD_DTYPES[name]
    if a.dtype == dtype:
        return a
    if not np.can_cast(a.dtype, dtype, casting="same_kind"):
        raise ValueError(f"StepBatch.{name}: dtype {a.dtype} cannot be sent as {dtype}")
    return a.astype(dtype)


def encode_step_batch(step_batch: StepBatch) -> pb.StepBatch:
    """Encodes a :class:`StepBatch`; the per-env scalar fields are cast to their canonical dtypes (env_ids
    int32, run_ids int64, reward/raw_reward float32, done/abandoned/life_lost bool, episode_step int32) when the
    cast keeps the kind; the observation is sent as is; ``life_lost`` only when it is not None.
    """
    env_outputs = step_batch.env_outputs
    message = pb.StepBatch()
    _fill_array(message.env_ids, _as_field(step_batch.env_ids, "env_ids"))
    _fill_array(message.run_ids, _as_field(step_batch.run_ids, "run_ids"))
    _fill_array(message.reward, _as_field(env_outputs.reward, "reward"))
    _fill_array(message.done, _as_field(env_outputs.done, "done"))
    _fill_array(message.abandoned, _as_field(env_outputs.abandoned, "abandoned"))
    _fill_array(message.episode_step, _as_field(env_outputs.episode_step, "episode_step"))
    _fill_array(message.raw_reward, _as_field(step_batch.raw_rewards, "raw_reward"))
    if step_batch.life_lost is not None:  # absent: no life lost (only actors of terminal_on_life_loss send it)
        _fill_array(message.life_lost, _as_field(step_batch.life_lost, "life_lost"))
    observation = env_outputs.observation
    if isinstance(observation, Mapping):
        message.observation.extend(encode_observation(observation))
    else:
        _fill_array(message.observation.add().array, observation)
    return message


def decode_step_batch(message: pb.StepBatch) -> StepBatch:
    """Decodes a ``StepBatch`` message (zero-copy; arrays are read-only).

    Only the encoding is checked here (every field present and self-consistent); shapes, dtypes and env ids are
    checked against the learner's specs by the server.
    """
    return StepBatch(
        env_ids=decode_array(message.env_ids, "StepBatch.env_ids"),
        run_ids=decode_array(message.run_ids, "StepBatch.run_ids"),
        env_outputs=EnvOutput(
            reward=decode_array(message.reward, "StepBatch.reward"),
            done=decode_array(message.done, "StepBatch.done"),
            observation=decode_observation(message.observation, "StepBatch.observation"),
            abandoned=decode_array(message.abandoned, "StepBatch.abandoned"),
            episode_step=decode_array(message.episode_step, "StepBatch.episode_step"),
        ),
        raw_rewards=decode_array(message.raw_reward, "StepBatch.raw_reward"),
        life_lost=decode_array(message.life_lost, "StepBatch.life_lost") if message.HasField("life_lost") else None,
    )


def step_batch_bytes(observation_spec: ObservationSpec, rows: int) -> int:
    """An upper bound (within a few dozen bytes per array) on the encoded size of a ``StepBatch`` of ``rows``
    envs whose observation matches ``observation_spec``; the learner sizes its gRPC receive window with it."""
    leaves = observation_spec.items() if isinstance(observation_spec, Mapping) else [("", observation_spec)]
    arrays: list[tuple[int, tuple[int, ...], np.dtype]] = [(1, (rows,), d) for d in _FIELD_DTYPES.values()]
    arrays += [(len(name) + 8, (rows, *spec.shape), np.dtype(spec.dtype)) for name, spec in leaves]
    # Per array: its tag and length, the dtype name, the shape's packed varints (10 bytes at most each), the
    # data's tag and length.
    return sum(extra + 40 + 10 * len(shape) + math.prod(shape) * dtype.itemsize for extra, shape, dtype in arrays)


# ------------------------------------------------------------------------------------------------------- specs


def _encode_bounds(value: Any) -> list[float]:
    if value is None:
        return []
    return np.asarray(value, dtype=np.float64).ravel().tolist()


def _decode_bounds(values: Iterable[float], shape: tuple[int, ...]) -> Any:
    """Empty -> None; one value -> a float (shared bound); else a (nested) list, shaped like the spec if it fits."""
    values = list(values)
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if len(shape) > 1 and math.prod(shape) == len(values):
        return np.asarray(values, dtype=np.float64).reshape(shape).tolist()
    return values


def encode_array_spec(spec: ArraySpec) -> pb.ArraySpec:
    """Encodes an :class:`ArraySpec`. Bounds are flattened (C order); a scalar bound is one value."""
    dtype = np.dtype(spec.dtype).name
    if dtype not in _WIRE_DTYPES:
        raise ValueError(
            f"spec dtype {spec.dtype!r} is not allowed; expected one of {', '.join(ALLOWED_DTYPES)}"
        )
    return pb.ArraySpec(
        shape=[int(d) for d in spec.shape],
        dtype=dtype,
        num_values=int(spec.num_values or 0),
        minimum=_encode_bounds(spec.minimum),
        maximum=_encode_bounds(spec.maximum),
    )


def decode_array_spec(message: pb.ArraySpec, what: str = "spec") -> ArraySpec:
    """Decodes an ``ArraySpec`` message.

    Bounds come back as ``None`` (none sent), a float (one value: a bound shared by every element) or a list
    (nested to the spec's shape when it has that many values). A per-element bound of a one-element spec therefore
    comes back as a float, which broadcasts the same way.
    """
    dtype = message.dtype
    if dtype not in _WIRE_DTYPES:
        raise ValueError(
            f"{what}: dtype {dtype!r} is not allowed; expected one of {', '.join(ALLOWED_DTYPES)}"
        )
    shape = tuple(int(d) for d in message.shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"{what}: negative dimension in shape {shape}")
    return ArraySpec(
        shape=shape,
        dtype=dtype,
        num_values=int(message.num_values),
        minimum=_decode_bounds(message.minimum, shape),
        maximum=_decode_bounds(message.maximum, shape),
    )


def encode_observation_spec(spec: ObservationSpec) -> list[pb.NamedArraySpec]:
    """Encodes an observation spec: one entry named ``""`` for an :class:`ArraySpec`, else one per dict key."""
    if isinstance(spec, ArraySpec):
        return [pb.NamedArraySpec(name="", spec=encode_array_spec(spec))]
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError(
            f"an observation spec is an ArraySpec or a non-empty dict of them, got {spec!r}"
        )
    out = []
    for name, leaf in spec.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"observation spec keys must be non-empty strings, got {name!r}")
        if not isinstance(leaf, ArraySpec):
            raise TypeError(
                f"observation spec[{name!r}] must be an ArraySpec (flat dicts only), got {leaf!r}"
            )
        out.append(pb.NamedArraySpec(name=name, spec=encode_array_spec(leaf)))
    return out


def decode_observation_spec(entries: Iterable[pb.NamedArraySpec]) -> ObservationSpec:
    """Decodes a list of ``NamedArraySpec`` into an :class:`ArraySpec` or a dict name -> ArraySpec."""
    entries = list(entries)
    if not entries:
        raise ValueError("observation spec: missing (no entry)")
    if len(entries) == 1 and not entries[0].name:
        return decode_array_spec(entries[0].spec, "observation spec")
    out: dict[str, ArraySpec] = {}
    for entry in entries:
        if not entry.name or entry.name in out:
            raise ValueError(f"observation spec: empty or repeated key {entry.name!r}")
        out[entry.name] = decode_array_spec(entry.spec, f"observation spec[{entry.name!r}]")
    return out
