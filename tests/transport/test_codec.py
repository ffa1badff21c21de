"""Round trips and refusals of seed_rl.protos.codec (arrays, step batches, specs)."""

from __future__ import annotations

import numpy as np
import pytest

from seed_rl.protos import codec
from seed_rl.protos import seed_rl_pb2 as pb
from seed_rl.types import ArraySpec, EnvOutput, StepBatch


def _through_the_wire(message):
    """Serializes and parses a message, as gRPC does."""
    return type(message).FromString(message.SerializeToString())


@pytest.mark.parametrize("dtype", codec.ALLOWED_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4), (0, 5)])
def test_array_round_trip_every_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    if dtype == "bool":
        array = rng.integers(0, 2, size=shape).astype(bool)
    else:
        array = (rng.standard_normal(size=shape) * 50).astype(dtype)
    decoded = codec.decode_array(_through_the_wire(codec.encode_array(array)))
    assert decoded.dtype == np.dtype(dtype)
    assert decoded.shape == shape
    np.testing.assert_array_equal(decoded, array)


def test_encode_records_dtype_name_shape_and_little_endian_bytes():
    message = codec.encode_array(np.array([[1, 2, 3]], dtype=np.int32))
    assert message.dtype == "int32"
    assert list(message.shape) == [1, 3]
    assert message.data == b"\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00"


def test_big_endian_and_non_contiguous_inputs_round_trip():
    big = np.arange(6, dtype=">i4").reshape(2, 3)
    np.testing.assert_array_equal(codec.decode_array(codec.encode_array(big)), big)
    strided = np.arange(24, dtype=np.float32).reshape(4, 6).T[::2]
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(codec.decode_array(codec.encode_array(strided)), strided)


def test_decode_is_zero_copy_and_read_only():
    message = _through_the_wire(codec.encode_array(np.arange(1000, dtype=np.float64)))
    decoded = codec.decode_array(message)
    assert not decoded.flags.owndata
    assert not decoded.flags.writeable
    base = decoded
    while isinstance(base, np.ndarray):
        base = base.base
    # A view of the message's bytes, not a copy.
    assert isinstance(base, bytes) and len(base) == 8000


@pytest.mark.parametrize(
    "value", [np.array(["a"]), np.array([1 + 2j]), np.array([object()]), np.zeros(2, "V4")]
)
def test_encode_refuses_dtypes_outside_the_allow_list(value):
    with pytest.raises(ValueError, match="cross the wire"):
        codec.encode_array(value)


@pytest.mark.parametrize(
    "message, match",
    [
        (
            pb.Array(dtype="float32", shape=[2], data=b"\x00" * 7),
            r"7 bytes of data do not match shape \(2,\)",
        ),
        (pb.Array(dtype="float32", shape=[2], data=b"\x00" * 12), r"\(8 bytes expected\)"),
        (pb.Array(dtype="uint8", shape=[2, 3], data=b"\x00" * 5), r"shape \(2, 3\)"),
        (pb.Array(dtype="int32", shape=[-1], data=b""), "negative dimension"),
        (pb.Array(dtype="object", shape=[1], data=b"\x00" * 8), "'object' is not allowed"),
        (pb.Array(dtype="<U1", shape=[1], data=b"\x00" * 4), "'<U1' is not allowed"),
        (pb.Array(dtype="", shape=[1], data=b"\x00"), "missing"),
        (
            pb.Array(dtype="bool", shape=[2], data=b"\x01\x02"),
            "bool array holds bytes other than 0 and 1",
        ),
    ],
)
def test_decode_refuses_corrupt_arrays_with_a_clear_message(message, match):
    with pytest.raises(ValueError, match=match):
        codec.decode_array(message, "StepBatch.reward")


@pytest.mark.parametrize(
    "message, match",
    [
        (
            pb.Array(dtype="uint8", shape=[1] * 33, data=b"\x00"),
            r"^StepBatch\.reward: shape has 33 dimensions, more than the limit of 32",
        ),
        (
            pb.Array(dtype="float32", shape=[0, 2**62, 2**62], data=b""),
            r"^StepBatch\.reward: shape \(0, 4611686018427387904, 4611686018427387904\) of dtype float32 overflows",
        ),
        (
            pb.Array(dtype="float64", shape=[2**31, 2**31], data=b""),  # 2**65 bytes
            r"^StepBatch\.reward: shape \(2147483648, 2147483648\) of dtype float64 overflows",
        ),
        (
            pb.Array(dtype="int8", shape=[2**40, 2**20], data=b"\x00" * 8),  # 2**60 bytes: addressable, not sent
            r"^StepBatch\.reward: 8 bytes of data do not match shape \(1099511627776, 1048576\)",
        ),
    ],
    ids=["33-dims", "empty-but-overflowing", "overflowing", "huge-but-mismatched"],
)
def test_decode_refuses_absurd_shapes_naming_the_field(message, match):
    with pytest.raises(ValueError, match=match):
        codec.decode_array(_through_the_wire(message), "StepBatch.reward")


def test_decode_accepts_the_dimension_limit_and_empty_arrays_of_large_shape():
    decoded = codec.decode_array(pb.Array(dtype="uint8", shape=[1] * codec.MAX_ARRAY_DIMS, data=b"\x07"))
    assert decoded.shape == (1,) * 32 and decoded.ravel().tolist() == [7]
    assert codec.decode_array(pb.Array(dtype="float32", shape=[0, 2**40], data=b"")).shape == (0, 2**40)


def test_decode_error_names_the_field():
    with pytest.raises(ValueError, match=r"^StepBatch\.reward: "):
        codec.decode_array(pb.Array(dtype="float32", shape=[3], data=b""), "StepBatch.reward")


def _step_batch(observation, k=2):
    return StepBatch(
        env_ids=np.arange(k, dtype=np.int32) + 4,
        run_ids=np.array([2**62 + 1, 7][:k], dtype=np.int64),
        env_outputs=EnvOutput(
            reward=np.array([0.5, -1.0][:k], dtype=np.float32),
            done=np.array([True, False][:k]),
            observation=observation,
            abandoned=np.array([True, False][:k]),
            episode_step=np.array([0, 17][:k], dtype=np.int32),
        ),
        raw_rewards=np.array([10.0, -3.0][:k], dtype=np.float32),
    )


def _assert_step_batches_equal(a: StepBatch, b: StepBatch):
    for name in ("env_ids", "run_ids", "raw_rewards"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert getattr(a, name).dtype == getattr(b, name).dtype
    for name in ("reward", "done", "abandoned", "episode_step"):
        np.testing.assert_array_equal(getattr(a.env_outputs, name), getattr(b.env_outputs, name))
        assert getattr(a.env_outputs, name).dtype == getattr(b.env_outputs, name).dtype
    obs_a, obs_b = a.env_outputs.observation, b.env_outputs.observation
    if isinstance(obs_a, dict):
        assert list(obs_a) == list(obs_b)
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])
            assert obs_a[key].dtype == obs_b[key].dtype
    else:
        np.testing.assert_array_equal(obs_a, obs_b)
        assert obs_a.dtype == obs_b.dtype


def test_step_batch_round_trip_plain_observation():
    batch = _step_batch(np.arange(2 * 84 * 84 * 4, dtype=np.uint8).reshape(2, 84, 84, 4))
    message = _through_the_wire(codec.encode_step_batch(batch))
    assert len(message.observation) == 1 and message.observation[0].name == ""
    _assert_step_batches_equal(codec.decode_step_batch(message), batch)


def test_life_lost_is_sent_only_when_given_and_round_trips():
    batch = _step_batch(np.zeros((2, 3), np.uint8))
    message = _through_the_wire(codec.encode_step_batch(batch))
    assert not message.HasField("life_lost") and codec.decode_step_batch(message).life_lost is None
    lost = batch._replace(life_lost=np.array([True, False]))
    decoded = codec.decode_step_batch(_through_the_wire(codec.encode_step_batch(lost)))
    assert decoded.life_lost.dtype == np.bool_ and decoded.life_lost.tolist() == [True, False]


def test_step_batch_round_trip_dict_observation_keeps_key_order():
    observation = {
        "pixels": np.ones((2, 4, 4, 3), np.uint8),
        "goal": np.array([[1.5, 2.5], [3.5, 4.5]], np.float32),
        "flag": np.array([True, False]),
    }
    message = _through_the_wire(codec.encode_step_batch(_step_batch(observation)))
    assert [entry.name for entry in message.observation] == ["pixels", "goal", "flag"]
    decoded = codec.decode_step_batch(message)
    _assert_step_batches_equal(decoded, _step_batch(observation))


def test_encode_step_batch_casts_scalar_fields_to_canonical_dtypes():
    batch = StepBatch(
        env_ids=[0, 1],  # python ints -> int32
        run_ids=np.array([1, 2], np.int32),  # -> int64
        env_outputs=EnvOutput(
            reward=np.array([0.25, 1.0], np.float64),  # -> float32
            done=[False, True],
            observation=np.zeros((2, 3), np.float64),  # sent as is
            abandoned=np.zeros(2, bool),
            episode_step=np.array([3, 4], np.int64),  # -> int32
        ),
        raw_rewards=[1.0, 2.0],
    )
    decoded = codec.decode_step_batch(codec.encode_step_batch(batch))
    assert decoded.env_ids.dtype == np.int32
    assert decoded.run_ids.dtype == np.int64
    assert decoded.env_outputs.reward.dtype == np.float32
    assert decoded.env_outputs.episode_step.dtype == np.int32
    assert decoded.raw_rewards.dtype == np.float32
    assert decoded.env_outputs.observation.dtype == np.float64
    np.testing.assert_array_equal(decoded.env_outputs.done, [False, True])


def test_encode_step_batch_refuses_a_cast_that_changes_kind():
    batch = _step_batch(np.zeros((2, 3), np.uint8))
    batch = batch._replace(env_outputs=batch.env_outputs._replace(done=np.array([0, 1])))
    with pytest.raises(ValueError, match="StepBatch.done: dtype int64 cannot be sent as bool"):
        codec.encode_step_batch(batch)


def test_decode_step_batch_names_a_missing_field():
    message = codec.encode_step_batch(_step_batch(np.zeros((2, 3), np.uint8)))
    message.ClearField("abandoned")
    with pytest.raises(ValueError, match=r"StepBatch\.abandoned: missing"):
        codec.decode_step_batch(message)
    message = codec.encode_step_batch(_step_batch(np.zeros((2, 3), np.uint8)))
    del message.observation[:]
    with pytest.raises(ValueError, match=r"StepBatch\.observation: missing"):
        codec.decode_step_batch(message)


def test_decode_observation_refuses_mixed_or_repeated_names():
    plain = pb.NamedArray(name="", array=codec.encode_array(np.zeros(2)))
    named = pb.NamedArray(name="a", array=codec.encode_array(np.zeros(2)))
    with pytest.raises(ValueError, match="must be the only entry"):
        codec.decode_observation([plain, named])
    with pytest.raises(ValueError, match="'a' appears twice"):
        codec.decode_observation([named, named])


def test_encode_observation_refuses_nested_dicts():
    with pytest.raises(TypeError, match="nested dicts"):
        codec.encode_observation({"a": {"b": np.zeros(1)}})


@pytest.mark.parametrize(
    "spec",
    [
        ArraySpec(shape=(), dtype="int32", num_values=18),
        ArraySpec(shape=(84, 84, 4), dtype="uint8"),
        ArraySpec(shape=(6,), dtype="float32", minimum=-1.0, maximum=1.0),
        ArraySpec(shape=(3,), dtype="float32", minimum=[-1.0, -2.0, -3.0], maximum=[1.0, 2.0, 3.0]),
        ArraySpec(shape=(2, 2), dtype="float64", minimum=[[0.0, 1.0], [2.0, 3.0]], maximum=10.0),
    ],
)
def test_array_spec_round_trip(spec):
    decoded = codec.decode_array_spec(_through_the_wire(codec.encode_array_spec(spec)))
    assert decoded == spec


def test_array_spec_dtype_is_normalised_and_bounds_accept_numpy():
    spec = ArraySpec(shape=[2], dtype=np.float32, minimum=np.array([0, 1]), maximum=np.float32(2))
    decoded = codec.decode_array_spec(codec.encode_array_spec(spec))
    assert decoded == ArraySpec(shape=(2,), dtype="float32", minimum=[0.0, 1.0], maximum=2.0)


def test_observation_spec_round_trip_plain_and_dict():
    plain = ArraySpec(shape=(4,), dtype="float32")
    assert codec.decode_observation_spec(codec.encode_observation_spec(plain)) == plain
    nested = {
        "pixels": ArraySpec((8, 8, 3), "uint8"),
        "goal": ArraySpec((2,), "float32", minimum=0.0),
    }
    decoded = codec.decode_observation_spec(codec.encode_observation_spec(nested))
    assert decoded == nested and list(decoded) == ["pixels", "goal"]


def test_specs_refuse_unsupported_dtypes():
    with pytest.raises(ValueError, match="not allowed"):
        codec.encode_array_spec(ArraySpec(shape=(), dtype="complex64"))
    with pytest.raises(ValueError, match="not allowed"):
        codec.decode_array_spec(pb.ArraySpec(dtype="object"))
    with pytest.raises(ValueError, match="ArraySpec or a non-empty dict"):
        codec.encode_observation_spec({})
