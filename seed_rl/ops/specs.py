"""TensorFlow specs and tensors from the transport's ArraySpecs: shared by agents (to build their networks) and
the learner (the inference step's signature and tables)."""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from seed_rl.types import ArraySpec, EnvOutput, ObservationSpec


def tensor_spec(spec: ArraySpec, batch_size=None) -> tf.TensorSpec:
    return tf.TensorSpec([batch_size, *spec.shape], tf.as_dtype(spec.dtype))


def observation_tensor_spec(spec: ObservationSpec, batch_size=None):
    if isinstance(spec, Mapping):
        return {k: tensor_spec(v, batch_size) for k, v in spec.items()}
    return tensor_spec(spec, batch_size)


def env_output_spec(observation_spec: ObservationSpec, batch_size=None) -> EnvOutput:
    return EnvOutput(
        reward=tf.TensorSpec([batch_size], tf.float32),
        done=tf.TensorSpec([batch_size], tf.bool),
        observation=observation_tensor_spec(observation_spec, batch_size),
        abandoned=tf.TensorSpec([batch_size], tf.bool),
        episode_step=tf.TensorSpec([batch_size], tf.int32),
    )


def zeros_like_spec(spec_nest, batch_size: int):
    return tf.nest.map_structure(
        lambda s: tf.zeros([batch_size, *s.shape[1:]], s.dtype), spec_nest)


def zeros_env_output(observation_spec: ObservationSpec, batch_size: int) -> EnvOutput:
    return zeros_like_spec(env_output_spec(observation_spec), batch_size)


def spec_of_tensors(nest):
    """TensorSpecs of a nest of [B, ...] tensors, with the batch dimension removed."""
    return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), nest)
