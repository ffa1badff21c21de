"""The SavedModel a run exports for serving: one step of the acting policy, recurrent state in and out."""

from __future__ import annotations

import tensorflow as tf

from seed_rl.ops import specs as specs_lib
from seed_rl.types import Agent, EnvOutput


class PolicyModule(tf.Module):
    """What the SavedModel serves: one step of the agent, recurrent state in and out.

    ``step(prev_actions, env_outputs, agent_state)`` takes and returns nests; the ``serving_default`` signature is
    the same function with flat, named tensors (``state_i`` for the leaves of the recurrent state). The agent acts
    with its evaluation policy (``act`` without env ids).
    """

    def __init__(self, agent: Agent, observation_spec):
        super().__init__(name="policy")
        # Track the raw tf.Variables, not the Keras model: Keras 3 layers add a `serving_default` of their own
        # that cannot trace our multi-input call.
        self.weights = list(agent.policy_variables)
        self._agent = agent
        state_spec = tf.nest.map_structure(lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype),
                                           agent.initial_state(1))
        self._state_structure = state_spec
        env_spec = specs_lib.env_output_spec(observation_spec)
        signature = (agent.agent_output_spec().action, env_spec, state_spec)
        self.step = tf.function(self._step, input_signature=signature, autograph=False)
        self.initial_state = tf.function(lambda batch_size: agent.initial_state(batch_size),
                                         input_signature=[tf.TensorSpec([], tf.int32)], autograph=False)
        flat_spec = {"prev_action": signature[0], **{k: v for k, v in env_spec._asdict().items()
                                                      if k != "observation"}}
        if isinstance(env_spec.observation, dict):
            flat_spec.update({f"observation_{k}": v for k, v in env_spec.observation.items()})
        else:
            flat_spec["observation"] = env_spec.observation
        flat_spec.update({f"state_{i}": s for i, s in enumerate(tf.nest.flatten(state_spec))})
        flat_spec = {k: tf.TensorSpec(v.shape, v.dtype, name=k) for k, v in flat_spec.items()}
        self.serving = tf.function(self._serve, input_signature=[flat_spec], autograph=False)

    def _step(self, prev_actions, env_outputs, agent_state):
        outputs, new_state = self._agent.act(prev_actions, env_outputs, agent_state)
        return {"outputs": outputs._asdict(), "agent_state": new_state}

    def _serve(self, inputs):
        if "observation" in inputs:
            observation = inputs["observation"]
        else:
            observation = {k[len("observation_"):]: v for k, v in inputs.items() if k.startswith("observation_")}
        env_outputs = EnvOutput(inputs["reward"], inputs["done"], observation, inputs["abandoned"],
                                inputs["episode_step"])
        leaves = [inputs[f"state_{i}"] for i in range(len(tf.nest.flatten(self._state_structure)))]
        state = tf.nest.pack_sequence_as(self._state_structure, leaves)
        outputs, new_state = self._agent.act(inputs["prev_action"], env_outputs, state)
        flat = dict(outputs._asdict())
        flat.update({f"state_{i}": s for i, s in enumerate(tf.nest.flatten(new_state))})
        return flat


def export_saved_model(agent: Agent, path: str, observation_spec) -> str:
    """Exports the acting policy (one step, recurrent state in and out) as a SavedModel."""
    policy = PolicyModule(agent, observation_spec)
    tf.saved_model.save(policy, path, signatures={"serving_default": policy.serving.get_concrete_function()})
    return path
